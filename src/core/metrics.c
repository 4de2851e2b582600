/* metrics: Prometheus counters of the server (see metrics.h). */
#include "core/metrics.h"

#include <dirent.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>
#include <uv.h>

/* Histogram bounds in seconds, shared by every histogram. */
static const double bounds[] = {0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5, 30, 300};
#define NB METRICS_HIST_BUCKETS
_Static_assert(sizeof bounds / sizeof bounds[0] == METRICS_HIST_BUCKETS, "one count a bound");

void metrics_hist_add(struct metrics_hist *h, uint64_t ns)
{
    double s = (double)ns / 1e9;
    for (size_t i = 0; i < NB; i++) {
        if (s <= bounds[i]) {
            h->buckets[i]++;
            break;
        }
    }
    h->count++;
    h->sum += s;
}

enum { T_WS, T_HTTP, T_STDIO, T_RELAY, T_N };
static const char *const transports[T_N] = {"websocket", "http", "stdio", "relay"};
static int64_t conns_active[T_N];
static uint64_t conns_accepted[T_N], conns_rejected[T_N];

#define MAX_OPS 64 /* more than the methods we implement */
struct op {
    const char *name;
    uint64_t total[2]; /* error, ok */
    struct metrics_hist dur[2];
};
static struct op ops[MAX_OPS];
static size_t nops;

/* Remote mode (REMOTE.md §5.3). */
static uint64_t remote_registrations[2], remote_connects[2]; /* error, success */
static struct metrics_hist remote_registration_dur[2], remote_connect_dur[2];
static const char *const reconnect_reasons[] = {"peer_close",     "read_error",
                                                "write_error",    "pong_timeout",
                                                "local_shutdown", "registration_rejected",
                                                "connect_failed"};
#define NREASONS (sizeof reconnect_reasons / sizeof reconnect_reasons[0])
static uint64_t remote_reconnects[NREASONS];
static bool remote_mode;

static int64_t procs_active;
static uint64_t procs_total;
static struct metrics_hist proc_dur[2]; /* failure, success */

/* The managed-network proxy's decisions: decision x mode x source. */
static const char *const np_decisions[] = {"allow", "deny", "ask"};
static const char *const np_modes[] = {"full", "limited"};
static const char *const np_sources[] = {"baseline_policy", "decider", "mode_guard", "proxy_state"};
static uint64_t np_counts[3][2][4];
static bool np_used;

static int find_label(const char *const *v, int n, const char *s)
{
    for (int i = 0; i < n; i++)
        if (s && strcmp(v[i], s) == 0) return i;
    return -1;
}

void metrics_netproxy_decision(const char *decision, const char *mode, const char *source)
{
    int d = find_label(np_decisions, 3, decision), m = find_label(np_modes, 2, mode),
        s = find_label(np_sources, 4, source);
    if (d < 0 || m < 0 || s < 0) return;
    np_counts[d][m][s]++;
    np_used = true;
}

uint64_t metrics_now_ns(void)
{
    return uv_hrtime();
}

static int tindex(const char *t)
{
    for (int i = 0; t && i < T_N; i++)
        if (strcmp(t, transports[i]) == 0) return i;
    return T_WS;
}

void metrics_connection_retag(const char *from, const char *to)
{
    int f = tindex(from), t = tindex(to);
    conns_active[f]--;
    conns_accepted[f]--;
    conns_active[t]++;
    conns_accepted[t]++;
}

static const char *const auth_reasons[] = {"missing_token", "invalid_header", "invalid_token",
                                           "invalid_jwt",   "expired",        "not_yet_valid",
                                           "wrong_issuer",  "wrong_audience", "other"};
#define NAUTH (sizeof auth_reasons / sizeof auth_reasons[0])
static uint64_t auth_refusals[NAUTH];

void metrics_auth_refused(const char *reason)
{
    size_t i = 0;
    while (i + 1 < NAUTH && (!reason || strcmp(reason, auth_reasons[i]) != 0))
        i++;
    auth_refusals[i]++;
}

static int64_t sessions_attached, sessions_detached;

void metrics_sessions_changed(int attached, int detached)
{
    sessions_attached += attached;
    sessions_detached += detached;
}

void metrics_connection_opened(const char *transport)
{
    int i = tindex(transport);
    conns_active[i]++;
    conns_accepted[i]++;
}

void metrics_connection_closed(const char *transport)
{
    conns_active[tindex(transport)]--;
}

void metrics_connection_rejected(const char *transport, const char *reason)
{
    (void)reason;
    conns_rejected[tindex(transport)]++;
}

void metrics_request_done(const char *operation, bool ok, uint64_t duration_ns)
{
    struct op *o = NULL;
    for (size_t i = 0; i < nops; i++)
        if (ops[i].name == operation || strcmp(ops[i].name, operation) == 0) o = &ops[i];
    if (!o) {
        if (nops == MAX_OPS) return;
        o = &ops[nops++];
        o->name = operation;
    }
    o->total[ok]++;
    metrics_hist_add(&o->dur[ok], duration_ns);
}

void metrics_process_started(void)
{
    procs_active++;
    procs_total++;
}

void metrics_process_exited(bool success, uint64_t duration_ns)
{
    procs_active--;
    metrics_hist_add(&proc_dur[success], duration_ns);
}

void metrics_remote_registration(bool ok, uint64_t duration_ns)
{
    remote_mode = true;
    remote_registrations[ok]++;
    metrics_hist_add(&remote_registration_dur[ok], duration_ns);
}

void metrics_remote_connect(bool ok, uint64_t duration_ns)
{
    remote_mode = true;
    remote_connects[ok]++;
    metrics_hist_add(&remote_connect_dur[ok], duration_ns);
}

void metrics_remote_reconnect(const char *reason)
{
    for (size_t i = 0; i < NREASONS; i++)
        if (strcmp(reconnect_reasons[i], reason) == 0) remote_reconnects[i]++;
}

void metrics_hist_render(struct buf *out, const char *name, const char *labels,
                         const struct metrics_hist *h)
{
    uint64_t cum = 0;
    for (size_t i = 0; i < NB; i++) {
        cum += h->buckets[i];
        buf_printf(out, "%s_bucket{%s%sle=\"%g\"} %llu\n", name, labels, *labels ? "," : "",
                   bounds[i], (unsigned long long)cum);
    }
    buf_printf(out, "%s_bucket{%s%sle=\"+Inf\"} %llu\n", name, labels, *labels ? "," : "",
               (unsigned long long)h->count);
    buf_printf(out, "%s_sum{%s} %.9f\n%s_count{%s} %llu\n", name, labels, h->sum, name, labels,
               (unsigned long long)h->count);
}

/* The standard process_* families of Prometheus client libraries, from /proc. */
void metrics_render_process(struct buf *out)
{
    static double start_time; /* seconds since the epoch, taken at the first scrape */
    long ticks = sysconf(_SC_CLK_TCK), page = sysconf(_SC_PAGESIZE);
    unsigned long long utime = 0, stime = 0, starttime = 0, vsize = 0;
    long long rss = 0;
    FILE *f = fopen("/proc/self/stat", "re");
    if (f) {
        char line[1024];
        if (fgets(line, sizeof line, f)) {
            /* After "pid (comm) ": comm may hold spaces, so start past the last ')'. */
            const char *p = strrchr(line, ')');
            if (p && sscanf(p + 2,
                            "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu %*d %*d %*d %*d "
                            "%*d %*d %llu %llu %lld",
                            &utime, &stime, &starttime, &vsize, &rss) != 5)
                utime = stime = starttime = vsize = 0, rss = 0;
        }
        fclose(f);
    }
    if (start_time == 0 && ticks > 0) {
        /* starttime is in ticks after boot: add the boot time from /proc/stat. */
        unsigned long long btime = 0;
        FILE *st = fopen("/proc/stat", "re");
        char line[256];
        while (st && fgets(line, sizeof line, st))
            if (sscanf(line, "btime %llu", &btime) == 1) break;
        if (st) fclose(st);
        if (btime) start_time = (double)btime + (double)starttime / (double)ticks;
    }
    unsigned long long fds = 0;
    DIR *d = opendir("/proc/self/fd");
    for (struct dirent *e; d && (e = readdir(d));)
        fds += e->d_name[0] != '.';
    if (d) {
        closedir(d);
        fds--; /* the directory's own descriptor */
    }
    struct rlimit rl = {0};
    getrlimit(RLIMIT_NOFILE, &rl);
    buf_printf(out,
               "# HELP process_cpu_seconds_total Total user and system CPU time spent in "
               "seconds.\n# TYPE process_cpu_seconds_total counter\n"
               "process_cpu_seconds_total %.2f\n"
               "# HELP process_resident_memory_bytes Resident memory size in bytes.\n"
               "# TYPE process_resident_memory_bytes gauge\n"
               "process_resident_memory_bytes %lld\n"
               "# HELP process_virtual_memory_bytes Virtual memory size in bytes.\n"
               "# TYPE process_virtual_memory_bytes gauge\n"
               "process_virtual_memory_bytes %llu\n"
               "# HELP process_open_fds Number of open file descriptors.\n"
               "# TYPE process_open_fds gauge\nprocess_open_fds %llu\n"
               "# HELP process_max_fds Maximum number of open file descriptors.\n"
               "# TYPE process_max_fds gauge\nprocess_max_fds %llu\n"
               "# HELP process_start_time_seconds Start time of the process since unix epoch "
               "in seconds.\n# TYPE process_start_time_seconds gauge\n"
               "process_start_time_seconds %.2f\n",
               ticks > 0 ? (double)(utime + stime) / (double)ticks : 0.0, rss * page, vsize, fds,
               (unsigned long long)rl.rlim_cur, start_time);
}

static void (*extra)(struct buf *out);

void metrics_set_extra(void (*render)(struct buf *out))
{
    extra = render;
}

void metrics_render(struct buf *out)
{
    char labels[160];
    buf_puts(out, "# HELP exec_server_build_info The running exec-server's version.\n"
                  "# TYPE exec_server_build_info gauge\n"
                  "exec_server_build_info{version=\"" EXEC_SERVER_VERSION "\"} 1\n");
    metrics_render_process(out);
    buf_printf(out,
               "# HELP exec_server_sessions Sessions by state: attached to a connection, "
               "or detached and waiting to be resumed.\n"
               "# TYPE exec_server_sessions gauge\n"
               "exec_server_sessions{state=\"attached\"} %lld\n"
               "exec_server_sessions{state=\"detached\"} %lld\n",
               (long long)sessions_attached, (long long)sessions_detached);
    buf_puts(out, "# HELP exec_server_auth_refusals_total Refused logins (401) by reason.\n"
                  "# TYPE exec_server_auth_refusals_total counter\n");
    for (size_t i = 0; i < NAUTH; i++)
        buf_printf(out, "exec_server_auth_refusals_total{reason=\"%s\"} %llu\n", auth_reasons[i],
                   (unsigned long long)auth_refusals[i]);
    buf_puts(out, "# HELP exec_server_connections_active Open client connections.\n"
                  "# TYPE exec_server_connections_active gauge\n");
    for (int t = 0; t < T_N; t++)
        buf_printf(out, "exec_server_connections_active{transport=\"%s\"} %lld\n", transports[t],
                   (long long)conns_active[t]);
    buf_puts(out, "# HELP exec_server_connections_total Client connections by outcome.\n"
                  "# TYPE exec_server_connections_total counter\n");
    for (int t = 0; t < T_N; t++) {
        buf_printf(out,
                   "exec_server_connections_total{transport=\"%s\",result=\"accepted\"} %llu\n",
                   transports[t], (unsigned long long)conns_accepted[t]);
        buf_printf(out,
                   "exec_server_connections_total{transport=\"%s\",result=\"rejected\"} %llu\n",
                   transports[t], (unsigned long long)conns_rejected[t]);
    }
    buf_puts(out, "# HELP exec_server_requests_total JSON-RPC requests answered, by method.\n"
                  "# TYPE exec_server_requests_total counter\n");
    for (size_t i = 0; i < nops; i++)
        for (int ok = 1; ok >= 0; ok--)
            buf_printf(out, "exec_server_requests_total{operation=\"%s\",result=\"%s\"} %llu\n",
                       ops[i].name, ok ? "ok" : "error", (unsigned long long)ops[i].total[ok]);
    buf_puts(out, "# HELP exec_server_request_duration_seconds Time from a request's arrival "
                  "to its reply.\n# TYPE exec_server_request_duration_seconds histogram\n");
    for (size_t i = 0; i < nops; i++)
        for (int ok = 1; ok >= 0; ok--) {
            snprintf(labels, sizeof labels, "operation=\"%s\",result=\"%s\"", ops[i].name,
                     ok ? "ok" : "error");
            metrics_hist_render(out, "exec_server_request_duration_seconds", labels,
                                &ops[i].dur[ok]);
        }
    buf_printf(out,
               "# HELP exec_server_processes_active Managed processes not yet exited.\n"
               "# TYPE exec_server_processes_active gauge\n"
               "exec_server_processes_active %lld\n"
               "# HELP exec_server_processes_total Managed processes started.\n"
               "# TYPE exec_server_processes_total counter\n"
               "exec_server_processes_total %llu\n",
               (long long)procs_active, (unsigned long long)procs_total);
    buf_puts(out, "# HELP exec_server_process_duration_seconds Managed process lifetimes, by "
                  "exit status (success: exit code 0).\n"
                  "# TYPE exec_server_process_duration_seconds histogram\n");
    metrics_hist_render(out, "exec_server_process_duration_seconds", "result=\"success\"",
                        &proc_dur[1]);
    metrics_hist_render(out, "exec_server_process_duration_seconds", "result=\"failure\"",
                        &proc_dur[0]);
    if (extra) extra(out);
    if (np_used) {
        buf_puts(out, "# HELP exec_server_network_policy_decisions_total Managed-network proxy "
                      "decisions, by decision, mode and source.\n"
                      "# TYPE exec_server_network_policy_decisions_total counter\n");
        for (int d = 0; d < 3; d++)
            for (int m = 0; m < 2; m++)
                for (int s = 0; s < 4; s++)
                    buf_printf(out,
                               "exec_server_network_policy_decisions_total{decision=\"%s\","
                               "mode=\"%s\",source=\"%s\"} %llu\n",
                               np_decisions[d], np_modes[m], np_sources[s],
                               (unsigned long long)np_counts[d][m][s]);
    }
    if (!remote_mode) return;
    static const char *const names[2][2] = {
        {"exec_server_remote_registration_total",
         "exec_server_remote_registration_duration_seconds"},
        {"exec_server_remote_rendezvous_connect_total",
         "exec_server_remote_rendezvous_connect_duration_seconds"}};
    static const char *const helps[2][2] = {
        {"Registrations with the environment registry, by result.",
         "Time a registration with the environment registry took."},
        {"Connections to the registry's rendezvous relay, by result.",
         "Time a connection to the rendezvous relay took."}};
    const uint64_t *totals[2] = {remote_registrations, remote_connects};
    const struct metrics_hist *durs[2] = {remote_registration_dur, remote_connect_dur};
    for (int k = 0; k < 2; k++) {
        buf_printf(out, "# HELP %s %s\n# TYPE %s counter\n", names[k][0], helps[k][0], names[k][0]);
        for (int ok = 1; ok >= 0; ok--)
            buf_printf(out, "%s{result=\"%s\"} %llu\n", names[k][0], ok ? "success" : "error",
                       (unsigned long long)totals[k][ok]);
        buf_printf(out, "# HELP %s %s\n# TYPE %s histogram\n", names[k][1], helps[k][1],
                   names[k][1]);
        for (int ok = 1; ok >= 0; ok--)
            metrics_hist_render(out, names[k][1], ok ? "result=\"success\"" : "result=\"error\"",
                                &durs[k][ok]);
    }
    buf_puts(out, "# HELP exec_server_remote_reconnects_total Rendezvous reconnects, by "
                  "reason.\n# TYPE exec_server_remote_reconnects_total counter\n");
    for (size_t i = 0; i < NREASONS; i++)
        buf_printf(out, "exec_server_remote_reconnects_total{reason=\"%s\"} %llu\n",
                   reconnect_reasons[i], (unsigned long long)remote_reconnects[i]);
}
