/* fleet_metrics: what `exec-server registry` shows on GET /metrics (Prometheus text,
 * format 0.0.4): environments online and streams open on this node, bytes and frames
 * relayed each way, refusals by reason, requests by endpoint and status with their
 * latency, and the database's state. Bounded label sets only (never an environment,
 * token or stream id). Loop thread only: plain integer adds. */
#ifndef EXEC_FLEET_METRICS_H
#define EXEC_FLEET_METRICS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "util/buf.h"

enum fleet_endpoint {
    FLEET_EP_REGISTER,
    FLEET_EP_CONNECT,
    FLEET_EP_VALIDATE,
    FLEET_EP_RENDEZVOUS_ENVIRONMENT,
    FLEET_EP_RENDEZVOUS_HARNESS,
    FLEET_EP_METRICS,
    FLEET_EP_READYZ,
    FLEET_EP_OTHER,
    FLEET_EP_COUNT
};

/* A request answered with status, taking duration_ns since its head arrived. */
void fleet_metrics_request(enum fleet_endpoint ep, int status, uint64_t duration_ns);
/* A refusal, by reason (a fixed word: unknown_token, expired_url, rate_limited ...;
 * a word not in the list counts as "other"). Every refusal is also a log line. */
void fleet_metrics_refusal(const char *reason);
/* Relayed frames: to_environment (from a harness) or to a harness. */
void fleet_metrics_relayed(bool to_environment, size_t bytes);
/* Gauges: +1/-1 as environments attach, streams open, harness sockets come. */
void fleet_metrics_gauges(int environments, int streams, int harnesses);

/* Appends the whole exposition text; db_up and db_pending describe the database. */
void fleet_metrics_render(struct buf *out, bool db_up, unsigned db_pending);

#endif
