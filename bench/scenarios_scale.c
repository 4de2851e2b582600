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
 * machine's rather than the server's. */
#include <pthread.h>

#include "bench.h"

struct loadgen {
    struct wsc *c;       /* O.scale_load connections (initialized) */
    int n;
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
    for (int i = 0; i < n; i++) due[i] = t0 + period * i / n;
    while (!lg->stop && !lg->err[0]) {
        double now = now_s(), next = now + 0.05;
        for (int i = 0; i < n; i++) {
            if (!running[i] && due[i] <= now) {
                char params[256], id[32];
                snprintf(id, sizeof id, "l%llu_", (unsigned long long)seqno[i]++);
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
        for (int i = 0; i < n; i++) pfd[i] = (struct pollfd){.fd = lg->c[i].fd, .events = POLLIN};
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

struct scale_result {
    struct cell rss, per_conn, loaded, unloaded, idle_many;
    double floor_unloaded, floor_loaded, rate;
};

static struct scale_result scale_run(struct server *s)
{
    struct scale_result r = {0};
    struct wsc m;
    struct cell err;
    char e[200] = "";
    if (!connect_server(s, &m, &err)) {
        r.rss = r.per_conn = r.loaded = r.unloaded = err;
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
    progress("   %s: %d connections initialized in %.1f s", server_name(s->which), n,
             now_s() - t0);
    usleep(500000);
    double rssn = server_rss_mb(s);
    r.rss = value(rssn);
    r.per_conn = value((rssn - rss1) * 1e6 / 1024 / n);
    /* With all of them held but none busy: does a start cost more when the server
     * has n connections (n descriptors) than with one? */
    if (!oneshots(&m, k, &next, ours, fl, e, sizeof e)) goto fail;
    r.idle_many = stats(ours, k);

    /* The load, and the one-shots under it. */
    struct loadgen lg = {.c = c, .n = nl};
    pthread_t th;
    if (pthread_create(&th, NULL, load_main, &lg) != 0) {
        snprintf(e, sizeof e, "cannot start the load thread");
        goto fail;
    }
    usleep(1000000);
    uint64_t s0 = lg.closed;
    double l0 = now_s();
    bool ok = oneshots(&m, k, &next, ours, fl, e, sizeof e);
    r.rate = (lg.closed - s0) / (now_s() - l0);
    lg.stop = true;
    pthread_join(th, NULL);
    if (!ok) goto fail;
    if (lg.err[0]) {
        snprintf(e, sizeof e, "%s", lg.err);
        goto fail;
    }
    r.loaded = stats(ours, k);
    r.floor_loaded = stats(fl, k).p50;
    goto out;
fail:
    r.loaded = failure("%s", e);
    if (!r.rss.ok) r.rss = r.per_conn = r.loaded;
    if (!r.idle_many.ok) r.idle_many = r.loaded;
out:
    for (int i = 0; i < opened; i++) wsc_close(&c[i]);
    free(c);
    free(ours);
    free(fl);
    wsc_close(&m);
    return r;
}

void scenario_scale(void)
{
    char name[4][128];
    snprintf(name[0], sizeof name[0], "10a. RSS, %d initialized idle connections (MB)",
             O.scale_conns);
    snprintf(name[1], sizeof name[1], "10b. memory per idle connection (KiB)");
    snprintf(name[2], sizeof name[2],
             "10d. one-shot, %d connections x 1 command / %d ms (ms; floor: ours unloaded)",
             O.scale_load, O.scale_period_ms);
    snprintf(name[3], sizeof name[3],
             "10c. one-shot, %d idle connections held (ms; floor: ours with one)", O.scale_conns);
    struct row *rs[4] = {row_get(name[0], K_MB), row_get(name[1], K_MB), row_get(name[3], K_MS),
                         row_get(name[2], K_MS)};
    rs[2]->has_floor = rs[3]->has_floor = true;
    progress("10. scale: %d connections, %d of them loaded", O.scale_conns, O.scale_load);
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
        bool up = start_or_fail(&s, w, rs, 4);
        O.ours_extra[0] = NULL;
        if (!up) continue;
        struct scale_result r = scale_run(&s);
        server_stop(&s);
        record(rs[0], w, r.rss);
        record(rs[1], w, r.per_conn);
        record(rs[2], w, r.idle_many);
        record(rs[3], w, r.loaded);
        if (w == 0) rs[2]->floor = rs[3]->floor = r.unloaded;
        if (r.loaded.ok)
            progress("   %s: one-shot p50 %.3f ms with one connection, %.3f ms with %d idle, "
                     "%.3f ms loaded (%.2fx); the driver's posix_spawn %.3f -> %.3f ms "
                     "(%.2fx); the load ran %.0f commands/s",
                     server_name(w), r.unloaded.p50, r.idle_many.p50, O.scale_conns, r.loaded.p50,
                     r.loaded.p50 / r.unloaded.p50, r.floor_unloaded, r.floor_loaded,
                     r.floor_loaded / r.floor_unloaded, r.rate);
    }
}
