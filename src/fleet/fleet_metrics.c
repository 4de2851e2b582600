/* fleet_metrics: the registry's counters (see fleet_metrics.h). */
#include "fleet/fleet_metrics.h"

#include <stdio.h>
#include <string.h>

#include "core/metrics.h"

static const char *const endpoint_names[FLEET_EP_COUNT] = {
    "register",           "connect", "validate", "rendezvous_environment",
    "rendezvous_harness", "metrics", "readyz",   "other"};
static const int statuses[] = {101, 200, 400, 401, 403, 404, 405,
                               409, 411, 413, 429, 431, 500, 503};
#define NSTATUS (sizeof statuses / sizeof statuses[0])
static uint64_t requests[FLEET_EP_COUNT][NSTATUS + 1]; /* the last column: other statuses */
static struct metrics_hist durations[FLEET_EP_COUNT];

static const char *const reasons[] = {"malformed_token",
                                      "unknown_token",
                                      "revoked_token",
                                      "expired_token",
                                      "wrong_role",
                                      "wrong_environment",
                                      "bad_signature",
                                      "expired_url",
                                      "replayed_url",
                                      "superseded",
                                      "environment_offline",
                                      "rate_limited",
                                      "too_many_environments",
                                      "too_many_pending_bundles",
                                      "too_many_streams",
                                      "stream_taken",
                                      "malformed_frame",
                                      "oversized_frame",
                                      "text_frame",
                                      "unknown_stream",
                                      "claim_timeout",
                                      "idle_timeout",
                                      "pong_timeout",
                                      "database_unavailable",
                                      "too_many_connections",
                                      "bad_request",
                                      "other"};
#define NREASONS (sizeof reasons / sizeof reasons[0])
static uint64_t refusals[NREASONS];

static uint64_t relayed_bytes[2], relayed_frames[2]; /* to harness, to environment */
static int64_t environments_online, streams_open, harness_sockets;

void fleet_metrics_request(enum fleet_endpoint ep, int status, uint64_t duration_ns)
{
    size_t i = 0;
    while (i < NSTATUS && statuses[i] != status)
        i++;
    requests[ep][i]++;
    metrics_hist_add(&durations[ep], duration_ns);
}

void fleet_metrics_refusal(const char *reason)
{
    size_t i = 0;
    while (i + 1 < NREASONS && strcmp(reasons[i], reason) != 0)
        i++;
    refusals[i]++;
}

void fleet_metrics_relayed(bool to_environment, size_t bytes)
{
    relayed_bytes[to_environment] += bytes;
    relayed_frames[to_environment]++;
}

void fleet_metrics_gauges(int environments, int streams, int harnesses)
{
    environments_online += environments;
    streams_open += streams;
    harness_sockets += harnesses;
}

static void render_requests(struct buf *out)
{
    buf_puts(out, "# HELP exec_registry_requests_total HTTP requests and upgrades answered, by "
                  "endpoint and status.\n# TYPE exec_registry_requests_total counter\n");
    for (int e = 0; e < FLEET_EP_COUNT; e++)
        for (size_t i = 0; i <= NSTATUS; i++) {
            if (!requests[e][i]) continue;
            if (i < NSTATUS)
                buf_printf(out,
                           "exec_registry_requests_total{endpoint=\"%s\",status=\"%d\"} %llu\n",
                           endpoint_names[e], statuses[i], (unsigned long long)requests[e][i]);
            else
                buf_printf(out,
                           "exec_registry_requests_total{endpoint=\"%s\",status=\"other\"} %llu\n",
                           endpoint_names[e], (unsigned long long)requests[e][i]);
        }
    buf_puts(out, "# HELP exec_registry_request_duration_seconds Time from a request's head to "
                  "its answer.\n# TYPE exec_registry_request_duration_seconds histogram\n");
    for (int e = 0; e <= FLEET_EP_VALIDATE; e++) {
        char labels[64];
        snprintf(labels, sizeof labels, "endpoint=\"%s\"", endpoint_names[e]);
        metrics_hist_render(out, "exec_registry_request_duration_seconds", labels, &durations[e]);
    }
}

void fleet_metrics_render(struct buf *out, bool db_up, unsigned db_pending)
{
    buf_puts(out, "# HELP exec_registry_build_info The running registry's version.\n"
                  "# TYPE exec_registry_build_info gauge\n"
                  "exec_registry_build_info{version=\"" EXEC_SERVER_VERSION "\"} 1\n");
    metrics_render_process(out);
    buf_printf(out,
               "# HELP exec_registry_environments_online Executors attached to this node.\n"
               "# TYPE exec_registry_environments_online gauge\n"
               "exec_registry_environments_online %lld\n"
               "# HELP exec_registry_streams_open Harness streams this node routes.\n"
               "# TYPE exec_registry_streams_open gauge\nexec_registry_streams_open %lld\n"
               "# HELP exec_registry_harness_sockets Harness WebSockets open on this node.\n"
               "# TYPE exec_registry_harness_sockets gauge\nexec_registry_harness_sockets %lld\n",
               (long long)environments_online, (long long)streams_open, (long long)harness_sockets);
    buf_puts(out, "# HELP exec_registry_relayed_bytes_total Relay frame bytes forwarded, by "
                  "direction.\n# TYPE exec_registry_relayed_bytes_total counter\n");
    for (int d = 1; d >= 0; d--)
        buf_printf(out, "exec_registry_relayed_bytes_total{direction=\"%s\"} %llu\n",
                   d ? "to_environment" : "to_harness", (unsigned long long)relayed_bytes[d]);
    buf_puts(out, "# HELP exec_registry_relayed_frames_total Relay frames forwarded, by "
                  "direction.\n# TYPE exec_registry_relayed_frames_total counter\n");
    for (int d = 1; d >= 0; d--)
        buf_printf(out, "exec_registry_relayed_frames_total{direction=\"%s\"} %llu\n",
                   d ? "to_environment" : "to_harness", (unsigned long long)relayed_frames[d]);
    buf_puts(out, "# HELP exec_registry_refusals_total Requests, upgrades and frames refused, "
                  "by reason.\n# TYPE exec_registry_refusals_total counter\n");
    for (size_t i = 0; i < NREASONS; i++)
        buf_printf(out, "exec_registry_refusals_total{reason=\"%s\"} %llu\n", reasons[i],
                   (unsigned long long)refusals[i]);
    render_requests(out);
    buf_printf(out,
               "# HELP exec_registry_database_up Whether the last database call reached it.\n"
               "# TYPE exec_registry_database_up gauge\nexec_registry_database_up %d\n"
               "# HELP exec_registry_database_jobs_pending Database calls queued or running.\n"
               "# TYPE exec_registry_database_jobs_pending gauge\n"
               "exec_registry_database_jobs_pending %u\n",
               db_up ? 1 : 0, db_pending);
}
