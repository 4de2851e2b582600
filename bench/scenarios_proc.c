/* scenarios_proc.c: the process scenarios of exec-bench: 1. one-shot, 2. streaming,
 * 3. fan-out and 4. many connections (the per-run work; bench.c drives them). */

#include "bench.h"

/* One /bin/true start (process id i, the nth on the connection counting from 1) to
 * process/closed; with sandbox (a JSON member text, or NULL) under that sandbox. */
static double oneshot_once(struct wsc *c, struct track *tr, int i, int nth, const char *sandbox)
{
    char params[2 * PATH_MAX + 1024];
    start_params(params, sizeof params, "o", i, "[\"/bin/true\"]");
    if (sandbox) {
        size_t l = strlen(params);
        snprintf(params + l - 1, sizeof params - l + 1, ",%s}", sandbox);
    }
    double t0 = now_s();
    wsc_request(c, "process/start", params);
    if (track_pump(c, tr, nth, nth, 30000) < 0) return -1;
    return (now_s() - t0) * 1e3;
}

static double spawn_once(void)
{
    char *argv[] = {"/bin/true", NULL};
    double t0 = now_s();
    pid_t pid;
    if (posix_spawn(&pid, argv[0], NULL, NULL, argv, environ) != 0) return -1;
    waitpid(pid, NULL, 0);
    return (now_s() - t0) * 1e3;
}

void scenario_oneshot(struct row *r)
{
    struct pair p;
    int warm = 10, n = O.oneshot_n, block = 10;
    double *t[3];
    for (int k = 0; k < 3; k++)
        t[k] = xcalloc((size_t)n, sizeof(double));
    for (int w = 0; w < (O.ref ? 2 : 1); w++) {
        pair_start(&p, r, w);
        track_init(&p.tr[w], "o", n + warm, false);
        double cpu = 0;
        /* Blocks of 10 of each kind, in turn. */
        for (int i0 = 0; i0 < n + warm; i0 += block) {
            int i1 = i0 + block < n + warm ? i0 + block : n + warm;
            for (int i = i0; i < i1 && w == 0; i++) {
                double v = spawn_once();
                if (i >= warm) t[2][i - warm] = v;
            }
            double c0 = p.up[w] ? server_cpu_ms(&p.s[w]) : 0;
            for (int i = i0; i < i1 && p.up[w]; i++) {
                double v = oneshot_once(&p.c[w], &p.tr[w], i, i + 1, NULL);
                if (v < 0)
                    pair_fail(&p, r, w, p.tr[w].err);
                else if (i >= warm)
                    t[w][i - warm] = v;
            }
            if (p.up[w] && i0 >= warm) cpu += server_cpu_ms(&p.s[w]) - c0;
        }
        if (p.up[w]) {
            struct cell c = stats(t[w], n);
            c.cpu = cpu / n;
            record(r, w, c);
        }
        track_free(&p.tr[w]);
        pair_stop(&p);
    }
    r->floor = stats(t[2], n);
    for (int k = 0; k < 3; k++)
        free(t[k]);
}

/* 1b: the same one-shot under a ReadOnly sandbox ({root: read}, network
 * restricted), ours and the reference; the floor column is ours without a sandbox
 * in the same run (blocks of ten of each, in turn), so the row shows what the
 * namespaces cost. */
/* A ReadOnly sandbox object with network `net` ("restricted" or "enabled"). */
static void readonly_sandbox(char *sb, size_t n, const char *net)
{
    snprintf(sb, n,
             "\"sandbox\":{\"permissions\":{\"type\":\"managed\",\"file_system\":{"
             "\"type\":\"restricted\",\"entries\":[{\"path\":{\"type\":\"special\","
             "\"value\":{\"kind\":\"root\"}},\"access\":\"read\"}]},\"network\":"
             "\"%s\"},\"cwd\":\"file:///tmp\",\"windowsSandboxLevel\":\"disabled\"}",
             net);
}

/* Rows 1b and 1c: a sandboxed one-shot with network `net`, alternating on ours with
 * the floor's kind: unsandboxed (floor_net NULL) or a sandbox with floor_net. */
void scenario_oneshot_sandboxed(struct row *r, const char *net, const char *floor_net)
{
    struct pair p;
    int warm = 5, n = O.oneshot_n / 5 > 20 ? O.oneshot_n / 5 : 20, block = 10;
    char sb[PATH_MAX + 512], fsb[PATH_MAX + 512];
    readonly_sandbox(sb, sizeof sb, net);
    if (floor_net) readonly_sandbox(fsb, sizeof fsb, floor_net);
    double *t[3];
    for (int k = 0; k < 3; k++)
        t[k] = xcalloc((size_t)n, sizeof(double));
    for (int w = 0; w < (O.ref ? 2 : 1); w++) {
        pair_start(&p, r, w);
        /* Ours runs both kinds on one connection: ids 0..n+warm sandboxed, then
         * the unsandboxed ones after them. */
        track_init(&p.tr[w], "o", 2 * (n + warm), false);
        int nth = 0;
        for (int i0 = 0; i0 < n + warm && p.up[w]; i0 += block) {
            int i1 = i0 + block < n + warm ? i0 + block : n + warm;
            for (int i = i0; i < i1 && p.up[w]; i++) {
                double v = oneshot_once(&p.c[w], &p.tr[w], i, ++nth, sb);
                if (v < 0)
                    pair_fail(&p, r, w, p.tr[w].err);
                else if (i >= warm)
                    t[w][i - warm] = v;
            }
            for (int i = i0; i < i1 && w == 0 && p.up[w]; i++) {
                int id = n + warm + i;
                double v = oneshot_once(&p.c[w], &p.tr[w], id, ++nth, floor_net ? fsb : NULL);
                if (v < 0)
                    pair_fail(&p, r, w, p.tr[w].err);
                else if (i >= warm)
                    t[2][i - warm] = v;
            }
        }
        if (p.up[w]) record(r, w, stats(t[w], n));
        if (w == 0 && p.up[w]) r->floor = stats(t[2], n);
        track_free(&p.tr[w]);
        pair_stop(&p);
    }
    for (int k = 0; k < 3; k++)
        free(t[k]);
}

/* ------------------------------------------------------------------ 2. streaming */

/* One run of `head -c bytes /dev/zero` (--text: of lines of text) through the server;
 * MB/s, or < 0 with err. */
static double stream_once(struct wsc *c, int which, int run, size_t bytes, char *err, size_t errlen)
{
    char argv[256], params[640], prefix[16];
    if (O.text)
        snprintf(argv, sizeof argv,
                 "[\"/bin/sh\",\"-c\",\"yes 'exec-bench: a line of text, as a build or a test "
                 "prints it to a terminal' | head -c %zu\"]",
                 bytes);
    else
        snprintf(argv, sizeof argv, "[\"/usr/bin/head\",\"-c\",\"%zu\",\"/dev/zero\"]", bytes);
    struct track tr;
    snprintf(prefix, sizeof prefix, "s%d_", run);
    track_init(&tr, prefix, 1, true);
    start_params(params, sizeof params, prefix, 0, argv);
    if (O.tty) { /* --tty: the same command on a terminal */
        char *f = strstr(params, "\"tty\":false");
        if (f) memcpy(f, "\"tty\":true ", 11); /* as long as "tty":false */
    }
    double t0 = now_s();
    wsc_request(c, "process/start", params);
    int rc = track_pump(c, &tr, 1, 1, TIMEOUT_MS);
    double dt = now_s() - t0;
    /* On a terminal each newline of text arrives as \r\n: more bytes than asked for. */
    if (rc == 0 && (O.tty && O.text ? tr.bytes < bytes : tr.bytes != bytes))
        snprintf(tr.err, sizeof tr.err, "received %llu of %zu bytes", (unsigned long long)tr.bytes,
                 bytes);
    /* The reference sends output and exit from separate tasks and may break seq
     * order (PROTOCOL.md 5.7); ours must not. */
    if (rc == 0 && tr.order_errors && which == 0)
        snprintf(tr.err, sizeof tr.err, "%d notifications out of seq order", tr.order_errors);
    double rate = tr.err[0] ? -1 : bytes / dt / 1e6;
    snprintf(err, errlen, "%s", tr.err);
    track_free(&tr);
    return rate;
}

static double stream_floor_once(size_t bytes)
{
    char count[32];
    snprintf(count, sizeof count, "%zu", bytes);
    char *argv[] = {"/usr/bin/head", "-c", count, "/dev/zero", NULL};
    uint64_t got;
    double dt = pipe_floor(argv, &got, NULL);
    return got / dt / 1e6;
}

/* Row 2 against the pipe floor, and row 2b (ours again) against the protocol
 * floor (relay_floor.c): each run of ours sits between one of each floor. */
/* One measured run of server w of p: its rate into *t, its CPU added to *cpu. */
static void stream_measure(struct pair *p, struct row *r, int w, int run, double *t, double *cpu)
{
    char err[200];
    if (!p->up[w]) return;
    double c0 = server_cpu_ms(&p->s[w]);
    double v = stream_once(&p->c[w], w, run, O.stream_bytes, err, sizeof err);
    if (v < 0)
        pair_fail(p, r, w, err);
    else
        *t = v;
    if (p->up[w]) *cpu += server_cpu_ms(&p->s[w]) - c0;
}

static void stream_record(struct pair *p, struct row *r, struct row *proto, int w, double *t,
                          double cpu)
{
    if (!p->up[w]) return;
    struct cell c = stats(t, O.runs);
    c.dist = false;
    c.cpu = cpu / O.runs;
    record(r, w, c);
    if (w == 0) proto->v[0] = c;
}

void scenario_stream(struct row *r, struct row *proto)
{
    struct pair p[2];
    int runs = O.runs;
    double *t[4], cpu[2] = {0, 0};
    for (int k = 0; k < 4; k++)
        t[k] = xcalloc((size_t)runs, sizeof(double));
    char perr[200] = "";
    /* --vs: both configurations of ours up at once, their runs taken in turn (the order
     * swapped every run) so the machine's drift falls on both alike; the reference is
     * measured on its own after ours, never up beside it. */
    bool together = O.vs != NULL;
    for (int w = 0; w < (O.ref ? 2 : 1); w++) {
        if (w == 1 && together) break;
        pair_start(&p[w], r, w);
        if (together) pair_start(&p[1], r, 1);
        for (int run = 0; run < runs; run++) {
            if (w == 0) t[2][run] = stream_floor_once(O.stream_bytes);
            int first = together ? run % 2 : w;
            stream_measure(&p[first], r, first, run, &t[first][run], &cpu[first]);
            if (together) stream_measure(&p[!first], r, !first, run, &t[!first][run], &cpu[!first]);
            if (w == 0 && !perr[0]) t[3][run] = relay_floor_once(O.stream_bytes, perr, sizeof perr);
        }
        for (int k = w; k <= (together ? 1 : w); k++) {
            stream_record(&p[k], r, proto, k, t[k], cpu[k]);
            pair_stop(&p[k]);
        }
    }
    r->floor = stats(t[2], runs);
    r->floor.dist = false;
    proto->floor = perr[0] ? failure("%s", perr) : stats(t[3], runs);
    proto->floor.dist = false;
    for (int k = 0; k < 4; k++)
        free(t[k]);
}

/* ------------------------------------------------------------------ 3. fan-out */

/* n process/start of /bin/true pipelined, until all are closed; ms or < 0. */
static double fanout_once(struct wsc *c, int run, char *err, size_t errlen)
{
    int n = O.fanout_n;
    char params[256], prefix[16];
    struct track tr;
    snprintf(prefix, sizeof prefix, "f%d_", run);
    track_init(&tr, prefix, n, false);
    double t0 = now_s();
    for (int i = 0; i < n; i++) {
        start_params(params, sizeof params, prefix, i, "[\"/bin/true\"]");
        wsc_request(c, "process/start", params);
    }
    int rc = track_pump(c, &tr, n, n, TIMEOUT_MS);
    double ms = (now_s() - t0) * 1e3;
    snprintf(err, errlen, "%s", tr.err);
    track_free(&tr);
    return rc < 0 ? -1 : ms;
}

static double fanout_floor_once(void)
{
    int n = O.fanout_n;
    pid_t *pids = xcalloc((size_t)n, sizeof *pids);
    char *argv[] = {"/bin/true", NULL};
    double t0 = now_s();
    for (int i = 0; i < n; i++)
        if (posix_spawn(&pids[i], argv[0], NULL, NULL, argv, environ) != 0) pids[i] = -1;
    for (int i = 0; i < n; i++)
        if (pids[i] > 0) waitpid(pids[i], NULL, 0);
    double ms = (now_s() - t0) * 1e3;
    free(pids);
    return ms;
}

void scenario_fanout(struct row *r)
{
    struct pair p;
    int runs = O.runs;
    double *t[3];
    for (int k = 0; k < 3; k++)
        t[k] = xcalloc((size_t)runs, sizeof(double));
    char err[200];
    for (int w = 0; w < (O.ref ? 2 : 1); w++) {
        pair_start(&p, r, w);
        double cpu = 0;
        for (int run = 0; run < runs; run++) {
            if (w == 0) t[2][run] = fanout_floor_once();
            if (!p.up[w]) continue;
            double c0 = server_cpu_ms(&p.s[w]);
            double v = fanout_once(&p.c[w], run, err, sizeof err);
            if (v < 0)
                pair_fail(&p, r, w, err);
            else
                t[w][run] = v;
            if (p.up[w]) cpu += server_cpu_ms(&p.s[w]) - c0;
        }
        if (p.up[w]) {
            struct cell c = stats(t[w], runs);
            c.cpu = cpu / runs;
            record(r, w, c);
        }
        pair_stop(&p);
    }
    r->floor = stats(t[2], runs);
    for (int k = 0; k < 3; k++)
        free(t[k]);
}

/* ------------------------------------------------------------------ 4. many connections */

/* n connections, each: connect + upgrade, initialize, initialized, run /bin/true until
 * process/closed. The upgrades are done one by one (so the listen backlog never
 * overflows into SYN retries); after that every connection proceeds on its own, all
 * multiplexed with poll(). Returns total milliseconds. */
struct cell conns_run(struct server *s)
{
    int n = O.conns_n;
    struct wsc *c = xcalloc((size_t)n, sizeof *c);
    struct track *tr = xcalloc((size_t)n, sizeof *tr);
    int *state = xcalloc((size_t)n, sizeof *state);
    struct pollfd *pfd = xcalloc((size_t)n, sizeof *pfd);
    struct cell out = {0};
    int opened = 0, done = 0;
    double t0 = now_s();
    for (; opened < n; opened++) {
        int rc = wsc_open(&c[opened], s->port);
        if (rc < 0) {
            out = failure("connection %d: %s", opened, strerror(-rc));
            goto cleanup;
        }
        track_init(&tr[opened], "c", 1, false);
        wsc_request(&c[opened], "initialize", "{\"clientName\":\"exec-bench\"}");
    }
    double deadline = now_s() + TIMEOUT_MS / 1000.0;
    while (done < n) {
        for (int i = 0; i < n; i++)
            pfd[i] = (struct pollfd){.fd = state[i] == 2 ? -1 : c[i].fd, .events = POLLIN};
        int left = (int)((deadline - now_s()) * 1000);
        if (left <= 0 || poll(pfd, (nfds_t)n, left) <= 0) {
            out = failure("timed out with %d/%d connections done", done, n);
            goto cleanup;
        }
        for (int i = 0; i < n; i++) {
            if (!(pfd[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
            long r = wsc_fill(&c[i]);
            if (r < 0) {
                out = failure("connection %d: %s", i, strerror((int)-r));
                goto cleanup;
            }
            struct span m;
            int rc;
            while (state[i] != 2 && (rc = wsc_next(&c[i], &m)) == 1) {
                track_msg(&tr[i], m);
                if (tr[i].err[0]) {
                    out = failure("connection %d: %s", i, tr[i].err);
                    goto cleanup;
                }
                if (state[i] == 0 && tr[i].responses == 1) {
                    char params[256];
                    wsc_notify(&c[i], "initialized", "{}");
                    start_params(params, sizeof params, "c", 0, "[\"/bin/true\"]");
                    wsc_request(&c[i], "process/start", params);
                    state[i] = 1;
                } else if (state[i] == 1 && tr[i].closed_count == 1 && tr[i].responses == 2) {
                    state[i] = 2;
                    done++;
                }
            }
        }
    }
    out = value((now_s() - t0) * 1e3);
cleanup:
    for (int i = 0; i < opened; i++) {
        wsc_close(&c[i]);
        track_free(&tr[i]);
    }
    free(c);
    free(tr);
    free(state);
    free(pfd);
    return out;
}

/* ------------------------------------------------------------------ 5. files */
