/* scenarios_scale.c: scenario 10 of exec-bench, scale (issue 25).
 *
 * O.scale_conns connections are opened and initialized and then held idle; the
 * server's RSS with all of them gives the memory per connection. Then
 * O.scale_load of them each run /bin/true every O.scale_period_ms (a thread of its
 * own drives them: a command starts when its period has come and the previous
 * one has closed), and a separate connection measures one-shot /bin/true
 * latency under that load, against the same measurement before any of it (ours
 * unloaded is the row's floor column). The driver's own posix_spawn is timed in
 * turn with the one-shots, loaded and not, to show how much of any rise is the
 * machine's rather than the server's. Before any server is up, the driver measures
 * how many /bin/true a second the machine can run at all (10e's floor), and after
 * the full load a tenth of it runs (10f), a load such a machine carries. */
#include <pthread.h>

#include "bench.h"

struct loadgen {
    struct wsc *c; /* O.scale_load connections (initialized) */
    int n;
    int phase; /* in the process ids, so that a later load reuses none */
    volatile bool stop;
    uint64_t started, closed;
    char err[200];
};

/* The load: each connection runs /bin/true, waits for process/closed, and starts
 * the next one a period after the previous start (at once if that has passed). */
static void *load_main(void *arg)
{
    struct loadgen *lg = arg;
    int n = lg->n;
    double *due = xcalloc((size_t)n, sizeof *due);
    bool *running = xcalloc((size_t)n, sizeof *running);
    uint64_t *seqno = xcalloc((size_t)n, sizeof *seqno);
    struct pollfd *pfd = xcalloc((size_t)n, sizeof *pfd);
    double period = O.scale_period_ms / 1000.0, t0 = now_s();
    /* Spread the first starts over one period so the load is even. */
    for (int i = 0; i < n; i++)
        due[i] = t0 + period * i / n;
    while (!lg->stop && !lg->err[0]) {
        double now = now_s(), next = now + 0.05;
        for (int i = 0; i < n; i++) {
            if (!running[i] && due[i] <= now) {
                char params[256], id[32];
                snprintf(id, sizeof id, "l%d.%llu_", lg->phase, (unsigned long long)seqno[i]++);
                start_params(params, sizeof params, id, 0, "[\"/bin/true\"]");
                if (wsc_request(&lg->c[i], "process/start", params) == 0) {
                    snprintf(lg->err, sizeof lg->err, "load connection %d: send failed", i);
                    break;
                }
                running[i] = true;
                lg->started++;
                due[i] += period;
                if (due[i] < now) due[i] = now;
            }
            if (!running[i] && due[i] < next) next = due[i];
        }
        for (int i = 0; i < n; i++)
            pfd[i] = (struct pollfd){.fd = lg->c[i].fd, .events = POLLIN};
        int wait_ms = (int)((next - now_s()) * 1000);
        if (poll(pfd, (nfds_t)n, wait_ms < 0 ? 0 : wait_ms) < 0 && errno != EINTR) break;
        for (int i = 0; i < n; i++) {
            if (!(pfd[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
            if (wsc_fill(&lg->c[i]) < 0) {
                snprintf(lg->err, sizeof lg->err, "load connection %d closed", i);
                break;
            }
            struct span m, method;
            while (wsc_next(&lg->c[i], &m) == 1) {
                if (js_get(m, "method", &method) && span_eq(method, "\"process/closed\"")) {
                    running[i] = false;
                    lg->closed++;
                } else if (!js_get(m, "method", &method) && js_get(m, "error", &method)) {
                    snprintf(lg->err, sizeof lg->err, "load connection %d: %.*s", i,
                             (int)(method.n < 150 ? method.n : 150), method.p);
                }
            }
        }
    }
    free(due);
    free(running);
    free(seqno);
    free(pfd);
    return NULL;
}

/* n one-shots on c, each after one posix_spawn of the driver's (blocks of ten of
 * each in turn); the ids continue from *next. */
static bool oneshots(struct wsc *c, int n, int *next, double *ours, double *floor_t, char *err,
                     size_t errlen)
{
    char *argv[] = {"/bin/true", NULL};
    for (int i0 = 0; i0 < n; i0 += 10) {
        int i1 = i0 + 10 < n ? i0 + 10 : n;
        for (int i = i0; i < i1; i++) {
            double t0 = now_s();
            pid_t pid;
            if (posix_spawn(&pid, argv[0], NULL, NULL, argv, environ) == 0) waitpid(pid, NULL, 0);
            floor_t[i] = (now_s() - t0) * 1e3;
        }
        for (int i = i0; i < i1; i++) {
            char params[256], prefix[24];
            snprintf(prefix, sizeof prefix, "m%d_", (*next)++);
            start_params(params, sizeof params, prefix, 0, "[\"/bin/true\"]");
            struct track tr;
            track_init(&tr, prefix, 1, false);
            double t0 = now_s();
            wsc_request(c, "process/start", params);
            int rc = track_pump(c, &tr, 1, 1, 30000);
            ours[i] = (now_s() - t0) * 1e3;
            if (rc < 0 || tr.err[0]) snprintf(err, errlen, "one-shot: %s", tr.err);
            track_free(&tr);
            if (err[0]) return false;
        }
    }
    return true;
}

/* The one-shots measured while nl of the connections c carry the load. */
struct under_load {
    struct cell oneshot;
    double floor; /* the driver's posix_spawn p50 meanwhile */
    double rate;  /* commands/s the load achieved */
};

static bool measure_under_load(struct wsc *m, struct wsc *c, int nl, int k, int *next, double *ours,
                               double *fl, char *e, size_t elen, struct under_load *out)
{
    static int phase;
    struct loadgen lg = {.c = c, .n = nl, .phase = phase++};
    pthread_t th;
    if (pthread_create(&th, NULL, load_main, &lg) != 0) {
        snprintf(e, elen, "cannot start the load thread");
        return false;
    }
    usleep(1000000);
    uint64_t s0 = lg.closed;
    double l0 = now_s();
    bool ok = oneshots(m, k, next, ours, fl, e, elen);
    out->rate = (lg.closed - s0) / (now_s() - l0);
    lg.stop = true;
    pthread_join(th, NULL);
    if (ok && lg.err[0]) {
        snprintf(e, elen, "%s", lg.err);
        ok = false;
    }
    if (!ok) return false;
    out->oneshot = stats(ours, k);
    out->floor = stats(fl, k).p50;
    /* Let the commands still running end before whatever is measured next. */
    usleep(500000);
    return true;
}

/* How many /bin/true a second this machine can run at all: the driver's own
 * posix_spawn + waitpid from one thread per CPU for about a second, no server up.
 * Row 10d's load asks for O.scale_load * 1000 / O.scale_period_ms a second; where
 * that is near or above this ceiling, no server can keep a one-shot's latency. */
static void *ceiling_main(void *arg)
{
    double *until = arg;
    char *argv[] = {"/bin/true", NULL};
    uint64_t n = 0;
    while (now_s() < *until) {
        pid_t pid;
        if (posix_spawn(&pid, argv[0], NULL, NULL, argv, environ) != 0) break;
        waitpid(pid, NULL, 0);
        n++;
    }
    return (void *)(uintptr_t)n;
}

static double spawn_ceiling(void)
{
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    int nt = cpus < 1 ? 1 : cpus > 16 ? 16 : (int)cpus;
    pthread_t th[16];
    double t0 = now_s(), until = t0 + 1.5;
    int started = 0;
    for (; started < nt; started++)
        if (pthread_create(&th[started], NULL, ceiling_main, &until) != 0) break;
    uint64_t total = 0;
    for (int i = 0; i < started; i++) {
        void *n;
        pthread_join(th[i], &n);
        total += (uintptr_t)n;
    }
    return total / (now_s() - t0);
}

struct scale_result {
    struct cell rss, per_conn, unloaded, idle_many;
    struct under_load heavy, light;
    double floor_unloaded;
};

static struct scale_result scale_run(struct server *s)
{
    struct scale_result r = {0};
    struct wsc m;
    struct cell err;
    char e[200] = "";
    if (!connect_server(s, &m, &err)) {
        r.rss = r.per_conn = r.unloaded = r.idle_many = err;
        r.heavy.oneshot = r.light.oneshot = err;
        return r;
    }
    int n = O.scale_conns, nl = O.scale_load < n ? O.scale_load : n, k = O.scale_oneshots;
    int next = 0;
    double *ours = xcalloc((size_t)k, sizeof *ours), *fl = xcalloc((size_t)k, sizeof *fl);
    struct wsc *c = xcalloc((size_t)n, sizeof *c);
    int opened = 0;
    /* Warm up, then the unloaded figures and the RSS with one connection. */
    if (!oneshots(&m, 10, &next, ours, fl, e, sizeof e)) goto fail;
    if (!oneshots(&m, k, &next, ours, fl, e, sizeof e)) goto fail;
    r.unloaded = stats(ours, k);
    r.floor_unloaded = stats(fl, k).p50;
    usleep(300000);
    double rss1 = server_rss_mb(s);

    /* The connections: upgraded one by one (no listen-backlog overflow), then
     * initialize pipelined over all of them, then initialized. */
    double t0 = now_s();
    for (; opened < n; opened++) {
        int rc = wsc_open_small(&c[opened], s->port);
        if (rc < 0) {
            snprintf(e, sizeof e, "connection %d: %s", opened, strerror(-rc));
            goto fail;
        }
        wsc_request(&c[opened], "initialize", "{\"clientName\":\"exec-bench\"}");
    }
    {
        struct pollfd *pfd = xcalloc((size_t)n, sizeof *pfd);
        bool *done = xcalloc((size_t)n, sizeof *done);
        int ndone = 0;
        double deadline = now_s() + TIMEOUT_MS / 1000.0;
        while (ndone < n && !e[0]) {
            for (int i = 0; i < n; i++)
                pfd[i] = (struct pollfd){.fd = done[i] ? -1 : c[i].fd, .events = POLLIN};
            int left = (int)((deadline - now_s()) * 1000);
            if (left <= 0 || poll(pfd, (nfds_t)n, left) <= 0) {
                snprintf(e, sizeof e, "initialize: %d of %d answered in time", ndone, n);
                break;
            }
            for (int i = 0; i < n; i++) {
                if (done[i] || !(pfd[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
                struct span msg, v;
                if (wsc_fill(&c[i]) < 0) {
                    snprintf(e, sizeof e, "connection %d closed during initialize", i);
                    break;
                }
                while (!done[i] && wsc_next(&c[i], &msg) == 1)
                    if (js_get(msg, "result", &v)) {
                        done[i] = true;
                        ndone++;
                        wsc_notify(&c[i], "initialized", "{}");
                    }
            }
        }
        free(pfd);
        free(done);
        if (e[0]) goto fail;
    }
    progress("   %s: %d connections initialized in %.1f s", server_name(s->which), n, now_s() - t0);
    usleep(500000);
    double rssn = server_rss_mb(s);
    r.rss = value(rssn);
    r.per_conn = value((rssn - rss1) * 1e6 / 1024 / n);
    /* With all of them held but none busy: does a start cost more when the server
     * has n connections (n descriptors) than with one? */
    if (!oneshots(&m, k, &next, ours, fl, e, sizeof e)) goto fail;
    r.idle_many = stats(ours, k);

    /* The load, and the one-shots under it; then a tenth of it, which the
     * machine can carry. */
    if (!measure_under_load(&m, c, nl, k, &next, ours, fl, e, sizeof e, &r.heavy)) goto fail;
    int nlight = nl / 10 > 0 ? nl / 10 : 1;
    if (!measure_under_load(&m, c, nlight, k, &next, ours, fl, e, sizeof e, &r.light)) goto fail;
    goto out;
fail : {
    /* What was measured before the failure stays; the rest says why it is missing. */
    struct cell f = failure("%s", e);
    if (!r.heavy.oneshot.ok) r.heavy.oneshot = f;
    if (!r.light.oneshot.ok) r.light.oneshot = f;
    if (!r.rss.ok) r.rss = r.per_conn = f;
    if (!r.idle_many.ok) r.idle_many = f;
}
out:
    for (int i = 0; i < opened; i++)
        wsc_close(&c[i]);
    free(c);
    free(ours);
    free(fl);
    wsc_close(&m);
    return r;
}

void scenario_scale(void)
{
    char name[6][128];
    int nlight = O.scale_load / 10 > 0 ? O.scale_load / 10 : 1;
    snprintf(name[0], sizeof name[0], "10a. RSS, %d initialized idle connections (MB)",
             O.scale_conns);
    snprintf(name[1], sizeof name[1], "10b. memory per idle connection (KiB)");
    snprintf(name[2], sizeof name[2],
             "10c. one-shot, %d idle connections held (ms; floor: ours with one)", O.scale_conns);
    snprintf(name[3], sizeof name[3],
             "10d. one-shot, %d connections x 1 command / %d ms (ms; floor: ours unloaded)",
             O.scale_load, O.scale_period_ms);
    snprintf(name[4], sizeof name[4],
             "10e. commands/s the load of 10d ran (floor: the machine's posix_spawn ceiling)");
    snprintf(name[5], sizeof name[5],
             "10f. one-shot, %d connection%s x 1 command / %d ms (ms; floor: ours unloaded)",
             nlight, nlight == 1 ? "" : "s", O.scale_period_ms);
    struct row *rs[6] = {row_get(name[0], K_MB), row_get(name[1], K_MB),  row_get(name[2], K_MS),
                         row_get(name[3], K_MS), row_get(name[4], K_MBS), row_get(name[5], K_MS)};
    rs[2]->has_floor = rs[3]->has_floor = rs[4]->has_floor = rs[5]->has_floor = true;
    progress("10. scale: %d connections, %d of them loaded", O.scale_conns, O.scale_load);
    double ceiling = spawn_ceiling();
    rs[4]->floor = value(ceiling);
    progress("   this machine runs at most %.0f /bin/true a second (the driver's posix_spawn, "
             "%ld threads); 10d's load asks for %.0f, 10f's for %.0f",
             ceiling, sysconf(_SC_NPROCESSORS_ONLN), O.scale_load * 1000.0 / O.scale_period_ms,
             nlight * 1000.0 / O.scale_period_ms);
    /* Ours is told how many connections to accept, in all and from one peer (the
     * driver is one address); the reference has no limit. */
    char maxc[32];
    snprintf(maxc, sizeof maxc, "%d", O.scale_conns + 64);
    for (int w = 0; w < nservers(); w++) {
        struct server s;
        O.ours_extra[0] = "--max-connections";
        O.ours_extra[1] = maxc;
        O.ours_extra[2] = "--max-connections-per-peer";
        O.ours_extra[3] = maxc;
        bool up = start_or_fail(&s, w, rs, 6);
        O.ours_extra[0] = NULL;
        if (!up) continue;
        struct scale_result r = scale_run(&s);
        server_stop(&s);
        record(rs[0], w, r.rss);
        record(rs[1], w, r.per_conn);
        record(rs[2], w, r.idle_many);
        record(rs[3], w, r.heavy.oneshot);
        record(rs[4], w, r.heavy.oneshot.ok ? value(r.heavy.rate) : r.heavy.oneshot);
        record(rs[5], w, r.light.oneshot);
        if (w == 0) rs[2]->floor = rs[3]->floor = rs[5]->floor = r.unloaded;
        if (r.light.oneshot.ok)
            progress("   %s: one-shot p50 %.3f ms with one connection, %.3f ms with %d idle, "
                     "%.3f ms under 10d's load (%.2fx), %.3f ms under 10f's (%.2fx); the "
                     "driver's posix_spawn %.3f -> %.3f / %.3f ms; the loads ran %.0f / %.0f "
                     "commands/s",
                     server_name(w), r.unloaded.p50, r.idle_many.p50, O.scale_conns,
                     r.heavy.oneshot.p50, r.heavy.oneshot.p50 / r.unloaded.p50, r.light.oneshot.p50,
                     r.light.oneshot.p50 / r.unloaded.p50, r.floor_unloaded, r.heavy.floor,
                     r.light.floor, r.heavy.rate, r.light.rate);
    }
}
