/* metrics: the server's counters, in Prometheus text format on GET /metrics.
 *
 * Names and labels follow the reference's observability plan (codex-rs/exec-server
 * observability.md: exec_server.connections.active ... in OTel naming, here in
 * Prometheus form): bounded label domains only (transport, operation = the JSON-RPC
 * method name of an implemented method, result), never ids, paths or commands.
 * Recording is a few integer adds on the loop thread: no allocation, no locks. */
#ifndef EXEC_CORE_METRICS_H
#define EXEC_CORE_METRICS_H

#include <stdbool.h>
#include <stdint.h>

#include "util/buf.h"

/* transport: "websocket", "http" (a listener connection not upgraded), "stdio" or
 * "relay". */
void metrics_connection_opened(const char *transport);
void metrics_connection_closed(const char *transport);
void metrics_connection_rejected(const char *transport, const char *reason);
/* An open connection changes what it is (accepted as http, then upgraded). */
void metrics_connection_retag(const char *from, const char *to);
/* A refused login, by auth_refusal reason (an unknown reason counts as "other"). */
void metrics_auth_refused(const char *reason);
/* Sessions move between attached (bound to a connection) and detached (waiting to
 * be resumed): +1/-1 to each gauge. */
void metrics_sessions_changed(int attached, int detached);
/* operation: a static method name (the method table's string). */
void metrics_request_done(const char *operation, bool ok, uint64_t duration_ns);
void metrics_process_started(void);
/* Remote mode: one registration or rendezvous connect attempt, and a reconnect by
 * reason (peer_close, read_error, write_error, pong_timeout, local_shutdown,
 * registration_rejected, connect_failed; anything else is not counted). */
void metrics_remote_registration(bool ok, uint64_t duration_ns);
void metrics_remote_connect(bool ok, uint64_t duration_ns);
void metrics_remote_reconnect(const char *reason);
void metrics_process_exited(bool success, uint64_t duration_ns);

/* The managed-network proxy: one policy decision. decision "allow", "deny" or "ask";
 * mode "full" or "limited"; source "baseline_policy", "decider", "mode_guard" or
 * "proxy_state" (anything else is not counted). */
void metrics_netproxy_decision(const char *decision, const char *mode, const char *source);

/* A latency histogram (seconds, fixed bounds 1 ms ... 300 s), for other metric
 * sets (the fleet registry's) to share the server's shape. */
#define METRICS_HIST_BUCKETS 10
struct metrics_hist {
    uint64_t buckets[METRICS_HIST_BUCKETS]; /* per bucket; cumulative on output */
    uint64_t count;
    double sum;
};
void metrics_hist_add(struct metrics_hist *h, uint64_t ns);
/* Appends name_bucket{labels,le=...}, _sum and _count lines. */
void metrics_hist_render(struct buf *out, const char *name, const char *labels,
                         const struct metrics_hist *h);
/* Appends the standard process_* families (CPU, memory, fds, start time). */
void metrics_render_process(struct buf *out);

/* Appends the exposition text (format 0.0.4). */
void metrics_render(struct buf *out);
/* Families of a layer above (the audit trail's, installed by the server) that
 * metrics_render appends to its own; NULL: none. */
void metrics_set_extra(void (*render)(struct buf *out));

/* Monotonic nanoseconds (uv_hrtime), for durations. */
uint64_t metrics_now_ns(void);

#endif
