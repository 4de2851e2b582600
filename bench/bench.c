/* exec-bench: the benchmark driver of issue 6.
 *
 * Starts each server itself (our exec-server and, when installed, the reference codex
 * exec-server), reads the URL line it prints, runs the same scenarios against both in
 * one run and prints one table: each figure for both, the advantage of ours over the
 * reference (>1 means ours is better, whatever the unit), and the floor (the same work
 * done by the driver itself with posix_spawn, a pipe, cat or find) where there is one.
 * Every scenario gets a fresh server so no scenario pays for the previous one's
 * retained processes or allocator high-water mark; the servers run one after the
 * other within a scenario so their figures see the same machine load.
 *
 *   exec-bench [--ours PATH] [--ref PATH|--no-ref] [--scenarios 1,2,...] [--quick]
 *              [--runs N] [--oneshot N] [--stream-mib N] [--fanout N] [--conns N]
 *              [--file-mib N] [--walk N] [--procs N] [--mem-stream-mb N] [--sandbox-n N]
 *
 * Exit status: 0 when every scenario ran against our server, 1 otherwise (the
 * reference failing a scenario only shows in the table). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <glob.h>
#include <limits.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "util/base64.h"
#include "util/mem.h"
#include "wsc.h"

extern char **environ;

#define REF_GLOB "/.cache/codex-ref/node_modules/@openai/codex-linux-x64/vendor/*/bin/codex"
#define TIMEOUT_MS 120000

/* ------------------------------------------------------------------ options */

static struct opts {
    const char *ours, *ref;
    unsigned scenarios; /* bit i = scenario i */
    bool quick;
    int runs;
    int oneshot_n;
    size_t stream_bytes;
    int fanout_n;
    int conns_n;
    size_t file_bytes;
    int walk_entries;
    int mem_procs;
    size_t mem_stream_bytes;
    double mem_stream_secs;
    int sandbox_n;
    char tmp[PATH_MAX];
} O;

/* ------------------------------------------------------------------ results */

enum kind { K_MS, K_MBS, K_MB };

struct cell {
    bool ok;
    bool dist; /* p95 meaningful */
    double p50, p95;
    char err[200];
};

struct row {
    char name[96];
    enum kind kind;
    struct cell v[2]; /* ours, reference */
    struct cell floor;
    bool has_floor;
};

static struct row rows[64];
static int nrows;
static bool ours_failed;

static struct row *row_get(const char *name, enum kind kind)
{
    for (int i = 0; i < nrows; i++)
        if (strcmp(rows[i].name, name) == 0) return &rows[i];
    struct row *r = &rows[nrows++];
    memset(r, 0, sizeof *r);
    snprintf(r->name, sizeof r->name, "%s", name);
    r->kind = kind;
    return r;
}

static int cmp_dbl(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* Median and p95 of n samples (sorted in place). */
static struct cell stats(double *s, int n)
{
    struct cell c = {.ok = n > 0, .dist = n > 2};
    if (n == 0) return c;
    qsort(s, (size_t)n, sizeof *s, cmp_dbl);
    c.p50 = n % 2 ? s[n / 2] : (s[n / 2 - 1] + s[n / 2]) / 2;
    int i95 = (int)ceil(0.95 * n) - 1;
    c.p95 = s[i95 < 0 ? 0 : i95];
    return c;
}

static struct cell value(double v)
{
    return (struct cell){.ok = true, .p50 = v, .p95 = v};
}

static struct cell failure(const char *fmt, ...)
{
    struct cell c = {0};
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c.err, sizeof c.err, fmt, ap);
    va_end(ap);
    return c;
}

/* ------------------------------------------------------------------ servers */

struct server {
    int which; /* 0 ours, 1 reference */
    pid_t pid;
    int port;
    int out_fd;
    char exe[PATH_MAX];
};

static int server_start(struct server *s, int which, char *err, size_t errlen)
{
    memset(s, 0, sizeof *s);
    s->which = which;
    s->out_fd = -1;
    int p[2];
    if (pipe2(p, O_CLOEXEC) < 0) return -errno;
    char path[PATH_MAX + 32];
    snprintf(path, sizeof path, "%s/server-%d.stderr", O.tmp, which);
    pid_t pid = fork();
    if (pid < 0) return -errno;
    if (pid == 0) {
        dup2(p[1], 1);
        int e = open(path, O_WRONLY | O_CREAT | O_APPEND, 0644);
        if (e >= 0) dup2(e, 2);
        int nul = open("/dev/null", O_RDONLY);
        if (nul >= 0) dup2(nul, 0);
        if (chdir(O.tmp) < 0) _exit(126);
        if (which == 0)
            execl(O.ours, O.ours, "--listen", "ws://127.0.0.1:0", (char *)NULL);
        else
            execl(O.ref, O.ref, "exec-server", "--listen", "ws://127.0.0.1:0", (char *)NULL);
        _exit(127);
    }
    close(p[1]);
    s->pid = pid;
    s->out_fd = p[0];
    char line[256];
    size_t n = 0;
    double deadline = now_s() + 30;
    while (n < sizeof line - 1 && !memchr(line, '\n', n)) {
        struct pollfd pfd = {.fd = p[0], .events = POLLIN};
        int left = (int)((deadline - now_s()) * 1000);
        if (left <= 0 || poll(&pfd, 1, left) <= 0) break;
        ssize_t r = read(p[0], line + n, sizeof line - 1 - n);
        if (r <= 0) break;
        n += (size_t)r;
    }
    line[n] = 0;
    char *colon = strrchr(line, ':');
    if (strncmp(line, "ws://", 5) != 0 || !colon || (s->port = atoi(colon + 1)) <= 0) {
        snprintf(err, errlen, "server did not print its URL (see %s)", path);
        kill(pid, SIGKILL);
        waitpid(pid, NULL, 0);
        close(p[0]);
        s->pid = 0;
        return -EIO;
    }
    char link[64];
    snprintf(link, sizeof link, "/proc/%d/exe", (int)pid);
    ssize_t l = readlink(link, s->exe, sizeof s->exe - 1);
    s->exe[l > 0 ? l : 0] = 0;
    return 0;
}

static void server_stop(struct server *s)
{
    if (s->pid <= 0) return;
    kill(s->pid, SIGTERM);
    for (int i = 0; i < 100; i++) {
        if (waitpid(s->pid, NULL, WNOHANG) == s->pid) goto done;
        usleep(20000);
    }
    kill(s->pid, SIGKILL);
    waitpid(s->pid, NULL, 0);
done:
    close(s->out_fd);
    s->pid = 0;
}

static long rss_kb_of(pid_t pid)
{
    char path[64], line[256];
    snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    long kb = -1;
    while (fgets(line, sizeof line, f))
        if (strncmp(line, "VmRSS:", 6) == 0) kb = atol(line + 6);
    fclose(f);
    return kb;
}

/* RSS of the server plus any helper children running the same executable (the
 * processes it runs for clients are not counted). In MB (10^6 bytes). */
static double server_rss_mb(const struct server *s)
{
    long kb = rss_kb_of(s->pid);
    DIR *d = opendir("/proc");
    struct dirent *de;
    while (d && (de = readdir(d))) {
        int pid = atoi(de->d_name);
        if (pid <= 0 || pid == s->pid) continue;
        char path[64], buf[512];
        snprintf(path, sizeof path, "/proc/%d/stat", pid);
        int fd = open(path, O_RDONLY);
        if (fd < 0) continue;
        ssize_t n = read(fd, buf, sizeof buf - 1);
        close(fd);
        if (n <= 0) continue;
        buf[n] = 0;
        char *rp = strrchr(buf, ')');
        int ppid = 0;
        if (!rp || sscanf(rp + 2, "%*c %d", &ppid) != 1 || ppid != s->pid) continue;
        char exe[PATH_MAX];
        snprintf(path, sizeof path, "/proc/%d/exe", pid);
        ssize_t l = readlink(path, exe, sizeof exe - 1);
        if (l <= 0) continue;
        exe[l] = 0;
        if (strcmp(exe, s->exe) == 0) kb += rss_kb_of(pid);
    }
    if (d) closedir(d);
    return kb * 1024.0 / 1e6;
}

/* ------------------------------------------------------------------ process tracking */

/* Follows the notifications of processes named <prefix><index> on one connection:
 * output bytes (decoded), seq order, exit and close. Responses are counted too, so
 * pipelined requests can be awaited without matching ids. */
struct track {
    char prefix[16];
    int n;
    uint64_t *last_seq;
    bool *closed;
    int closed_count;
    int responses;
    uint64_t bytes;
    int order_errors;
    bool decode;
    uint8_t *scratch;
    size_t scratch_cap;
    char err[200];
};

static void track_init(struct track *t, const char *prefix, int n, bool decode)
{
    memset(t, 0, sizeof *t);
    snprintf(t->prefix, sizeof t->prefix, "%s", prefix);
    t->n = n;
    t->last_seq = xcalloc((size_t)n, sizeof *t->last_seq);
    t->closed = xcalloc((size_t)n, sizeof *t->closed);
    t->decode = decode;
}

static void track_free(struct track *t)
{
    free(t->last_seq);
    free(t->closed);
    free(t->scratch);
}

static void track_msg(void *ud, struct span m)
{
    struct track *t = ud;
    struct span method, params, v, id;
    if (!js_get(m, "method", &method)) {
        struct span e, em;
        t->responses++;
        if (js_get(m, "error", &e) && !t->err[0]) {
            if (js_get(e, "message", &em) && js_str(em, &v))
                snprintf(t->err, sizeof t->err, "%.*s", (int)v.n, v.p);
            else
                snprintf(t->err, sizeof t->err, "error response");
        }
        return;
    }
    if (!js_get(m, "params", &params) || !js_get(params, "processId", &v) || !js_str(v, &id))
        return;
    size_t pl = strlen(t->prefix);
    if (id.n <= pl || memcmp(id.p, t->prefix, pl) != 0) return;
    int idx = 0;
    for (size_t i = pl; i < id.n; i++) idx = idx * 10 + (id.p[i] - '0');
    if (idx < 0 || idx >= t->n) return;
    uint64_t seq = 0;
    if (js_get(params, "seq", &v) && js_u64(v, &seq)) {
        if (seq <= t->last_seq[idx]) t->order_errors++;
        t->last_seq[idx] = seq;
    }
    if (span_eq(method, "\"process/output\"")) {
        struct span chunk;
        if (!js_get(params, "chunk", &v) || !js_str(v, &chunk)) return;
        if (t->decode) {
            size_t need = base64_decoded_max(chunk.n), got;
            if (need > t->scratch_cap) {
                t->scratch_cap = need * 2;
                t->scratch = xrealloc(t->scratch, t->scratch_cap);
            }
            char e[64];
            if (base64_decode(chunk.p, chunk.n, t->scratch, &got, e, sizeof e) < 0) {
                snprintf(t->err, sizeof t->err, "bad base64 in output: %s", e);
                return;
            }
            t->bytes += got;
        } else {
            size_t pad = chunk.n >= 2 ? (chunk.p[chunk.n - 1] == '=') +
                                            (chunk.p[chunk.n - 2] == '=')
                                      : 0;
            t->bytes += chunk.n / 4 * 3 - pad;
        }
    } else if (span_eq(method, "\"process/closed\"")) {
        if (!t->closed[idx]) {
            t->closed[idx] = true;
            t->closed_count++;
        }
    }
}

/* Pumps messages into t until closed_count >= closed and responses >= responses. */
static int track_pump(struct wsc *c, struct track *t, int closed, int responses, int timeout_ms)
{
    double deadline = now_s() + timeout_ms / 1000.0;
    while (t->closed_count < closed || t->responses < responses) {
        struct span m;
        int left = (int)((deadline - now_s()) * 1000);
        int rc = wsc_wait(c, &m, left < 0 ? 0 : left);
        if (rc < 0) {
            snprintf(t->err, sizeof t->err, "%s (closed %d/%d, responses %d/%d)",
                     rc == -ETIMEDOUT ? "timed out" : strerror(-rc), t->closed_count, closed,
                     t->responses, responses);
            return rc;
        }
        track_msg(t, m);
        if (t->err[0]) return -EPROTO;
    }
    return 0;
}

static void start_params(char *out, size_t n, const char *prefix, int idx, const char *argv_json)
{
    snprintf(out, n,
             "{\"processId\":\"%s%d\",\"argv\":%s,\"cwd\":\"file:///tmp\",\"env\":{},"
             "\"tty\":false}",
             prefix, idx, argv_json);
}

/* ------------------------------------------------------------------ floors */

static pid_t spawn_out(char *const argv[], int *out_fd)
{
    int p[2] = {-1, -1};
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    if (out_fd) {
        if (pipe2(p, O_CLOEXEC) < 0) return -1;
        posix_spawn_file_actions_adddup2(&fa, p[1], 1);
    }
    pid_t pid;
    int rc = posix_spawn(&pid, argv[0], &fa, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    if (out_fd) {
        close(p[1]);
        *out_fd = p[0];
    }
    return rc == 0 ? pid : -1;
}

/* Runs argv with its stdout piped into the driver; returns seconds, sets *bytes. */
static double pipe_floor(char *const argv[], uint64_t *bytes)
{
    static char buf[1 << 20];
    int fd;
    double t0 = now_s();
    pid_t pid = spawn_out(argv, &fd);
    if (pid < 0) return -1;
    uint64_t total = 0;
    ssize_t r;
    while ((r = read(fd, buf, sizeof buf)) > 0) total += (uint64_t)r;
    close(fd);
    waitpid(pid, NULL, 0);
    *bytes = total;
    return now_s() - t0;
}

/* ------------------------------------------------------------------ scenario helpers */

typedef struct cell (*scen_fn)(struct server *s, struct wsc *c, void *arg);

/* Connects and handshakes; on failure sets *out to the error and returns false. */
static bool connect_server(struct server *s, struct wsc *c, struct cell *out)
{
    char err[200];
    int rc = wsc_open(c, s->port);
    if (rc < 0) {
        *out = failure("connect: %s", strerror(-rc));
        return false;
    }
    if (wsc_handshake(c, err, sizeof err) < 0) {
        *out = failure("initialize: %s", err);
        wsc_close(c);
        return false;
    }
    return true;
}

static void record(struct row *r, int which, struct cell c)
{
    r->v[which] = c;
    if (!c.ok && which == 0) ours_failed = true;
}

static bool have_ref(void)
{
    return O.ref != NULL;
}

static bool start_or_fail(struct server *s, int which, struct row **rs, int nr);

/* ------------------------------------------------------------------ interleaving */

/* Scenarios 1-3 compare against a floor, and the machine's load drifts: the floor
 * runs are interleaved with our server's (floor, ours, floor, ...) so the ratio
 * sees the same conditions. The reference runs on its own right after: with the
 * reference merely running and connected, the driver's own posix_spawn floor went
 * from 0.55 to 3.2 ms here, so it is never up while ours or the floor is measured. */
struct pair {
    struct server s[2];
    struct wsc c[2];
    bool up[2];
    struct track tr[2]; /* scenario 1: one tracker over all runs */
};

static void pair_start(struct pair *p, struct row *r, int only)
{
    memset(p, 0, sizeof *p);
    for (int w = only; w == only; w++) {
        if (!start_or_fail(&p->s[w], w, &r, 1)) continue;
        struct cell err;
        if (!connect_server(&p->s[w], &p->c[w], &err)) {
            record(r, w, err);
            server_stop(&p->s[w]);
            continue;
        }
        p->up[w] = true;
    }
}

static void pair_fail(struct pair *p, struct row *r, int w, const char *err)
{
    record(r, w, failure("%s", err));
    wsc_close(&p->c[w]);
    server_stop(&p->s[w]);
    p->up[w] = false;
}

static void pair_stop(struct pair *p)
{
    for (int w = 0; w < 2; w++)
        if (p->up[w]) {
            wsc_close(&p->c[w]);
            server_stop(&p->s[w]);
        }
}

/* ------------------------------------------------------------------ 1. one-shot */

/* One process/start of /bin/true -> process/closed, in ms; < 0 on failure. */
static double oneshot_once(struct wsc *c, struct track *tr, int i)
{
    char params[256];
    start_params(params, sizeof params, "o", i, "[\"/bin/true\"]");
    double t0 = now_s();
    wsc_request(c, "process/start", params);
    if (track_pump(c, tr, i + 1, i + 1, 30000) < 0) return -1;
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

static void scenario_oneshot(struct row *r)
{
    struct pair p;
    int warm = 10, n = O.oneshot_n, block = 10;
    double *t[3];
    for (int k = 0; k < 3; k++) t[k] = xcalloc((size_t)n, sizeof(double));
    for (int w = 0; w < (O.ref ? 2 : 1); w++) {
        pair_start(&p, r, w);
        track_init(&p.tr[w], "o", n + warm, false);
        /* Blocks of 10 of each kind, in turn. */
        for (int i0 = 0; i0 < n + warm; i0 += block) {
            int i1 = i0 + block < n + warm ? i0 + block : n + warm;
            for (int i = i0; i < i1 && w == 0; i++) {
                double v = spawn_once();
                if (i >= warm) t[2][i - warm] = v;
            }
            for (int i = i0; i < i1 && p.up[w]; i++) {
                double v = oneshot_once(&p.c[w], &p.tr[w], i);
                if (v < 0) pair_fail(&p, r, w, p.tr[w].err);
                else if (i >= warm) t[w][i - warm] = v;
            }
        }
        if (p.up[w]) record(r, w, stats(t[w], n));
        track_free(&p.tr[w]);
        pair_stop(&p);
    }
    r->floor = stats(t[2], n);
    for (int k = 0; k < 3; k++) free(t[k]);
}

/* ------------------------------------------------------------------ 2. streaming */

/* One run of `head -c bytes /dev/zero` through the server; MB/s, or < 0 with err. */
static double stream_once(struct wsc *c, int which, int run, size_t bytes, char *err,
                          size_t errlen)
{
    char argv[128], params[512], prefix[16];
    snprintf(argv, sizeof argv, "[\"/usr/bin/head\",\"-c\",\"%zu\",\"/dev/zero\"]", bytes);
    struct track tr;
    snprintf(prefix, sizeof prefix, "s%d_", run);
    track_init(&tr, prefix, 1, true);
    start_params(params, sizeof params, prefix, 0, argv);
    double t0 = now_s();
    wsc_request(c, "process/start", params);
    int rc = track_pump(c, &tr, 1, 1, TIMEOUT_MS);
    double dt = now_s() - t0;
    if (rc == 0 && tr.bytes != bytes)
        snprintf(tr.err, sizeof tr.err, "received %llu of %zu bytes",
                 (unsigned long long)tr.bytes, bytes);
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
    double dt = pipe_floor(argv, &got);
    return got / dt / 1e6;
}

static void scenario_stream(struct row *r)
{
    struct pair p;
    int runs = O.runs;
    double *t[3];
    for (int k = 0; k < 3; k++) t[k] = xcalloc((size_t)runs, sizeof(double));
    char err[200];
    for (int w = 0; w < (O.ref ? 2 : 1); w++) {
        pair_start(&p, r, w);
        for (int run = 0; run < runs; run++) {
            if (w == 0) t[2][run] = stream_floor_once(O.stream_bytes);
            if (!p.up[w]) continue;
            double v = stream_once(&p.c[w], w, run, O.stream_bytes, err, sizeof err);
            if (v < 0) pair_fail(&p, r, w, err);
            else t[w][run] = v;
        }
        if (p.up[w]) {
            struct cell c = stats(t[w], runs);
            c.dist = false;
            record(r, w, c);
        }
        pair_stop(&p);
    }
    r->floor = stats(t[2], runs);
    r->floor.dist = false;
    for (int k = 0; k < 3; k++) free(t[k]);
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

static void scenario_fanout(struct row *r)
{
    struct pair p;
    int runs = O.runs;
    double *t[3];
    for (int k = 0; k < 3; k++) t[k] = xcalloc((size_t)runs, sizeof(double));
    char err[200];
    for (int w = 0; w < (O.ref ? 2 : 1); w++) {
        pair_start(&p, r, w);
        for (int run = 0; run < runs; run++) {
            if (w == 0) t[2][run] = fanout_floor_once();
            if (!p.up[w]) continue;
            double v = fanout_once(&p.c[w], run, err, sizeof err);
            if (v < 0) pair_fail(&p, r, w, err);
            else t[w][run] = v;
        }
        if (p.up[w]) record(r, w, stats(t[w], runs));
        pair_stop(&p);
    }
    r->floor = stats(t[2], runs);
    for (int k = 0; k < 3; k++) free(t[k]);
}

/* ------------------------------------------------------------------ 4. many connections */

/* n connections, each: connect + upgrade, initialize, initialized, run /bin/true until
 * process/closed. The upgrades are done one by one (so the listen backlog never
 * overflows into SYN retries); after that every connection proceeds on its own, all
 * multiplexed with poll(). Returns total milliseconds. */
static struct cell conns_run(struct server *s)
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
        for (int i = 0; i < n; i++) pfd[i] = (struct pollfd){.fd = state[i] == 2 ? -1 : c[i].fd,
                                                               .events = POLLIN};
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

static char *file_big, *file_out, *walk_root;

static void make_file(const char *path, size_t bytes)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) return;
    uint64_t x = 0x9E3779B97F4A7C15ull;
    size_t blk = 1 << 20;
    uint64_t *b = xmalloc(blk);
    for (size_t done = 0; done < bytes; done += blk) {
        for (size_t i = 0; i < blk / 8; i++) {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            b[i] = x;
        }
        size_t n = bytes - done < blk ? bytes - done : blk;
        if (write(fd, b, n) != (ssize_t)n) break;
    }
    free(b);
    close(fd);
}

static void make_tree(const char *root, int entries)
{
    mkdir(root, 0755);
    int dirs = entries / 500 > 0 ? entries / 500 : 1;
    int per = entries / dirs - 1;
    char p[PATH_MAX];
    for (int d = 0; d < dirs; d++) {
        snprintf(p, sizeof p, "%s/d%03d", root, d);
        mkdir(p, 0755);
        for (int f = 0; f < per; f++) {
            snprintf(p, sizeof p, "%s/d%03d/f%04d", root, d, f);
            int fd = open(p, O_WRONLY | O_CREAT, 0644);
            if (fd >= 0) close(fd);
        }
    }
}

static int walk_total(void)
{
    int dirs = O.walk_entries / 500 > 0 ? O.walk_entries / 500 : 1;
    return dirs * (O.walk_entries / dirs);
}

static struct cell readfile_one(struct server *s)
{
    struct wsc c;
    struct cell out;
    if (!connect_server(s, &c, &out)) return out;
    double *t = xcalloc((size_t)O.runs, sizeof *t);
    char params[PATH_MAX + 64], err[200];
    snprintf(params, sizeof params, "{\"path\":\"file://%s\"}", file_big);
    uint8_t *dec = xmalloc(base64_decoded_max(base64_encoded_len(O.file_bytes)));
    for (int r = 0; r < O.runs; r++) {
        struct span res, v, data;
        double t0 = now_s();
        if (wsc_call(&c, "fs/readFile", params, NULL, NULL, &res, err, sizeof err, TIMEOUT_MS) <
            0) {
            out = failure("%s", err);
            goto done;
        }
        size_t got = 0;
        char e[64];
        if (!js_get(res, "dataBase64", &v) || !js_str(v, &data) ||
            base64_decode(data.p, data.n, dec, &got, e, sizeof e) < 0 || got != O.file_bytes) {
            out = failure("readFile returned %zu bytes, not %zu", got, O.file_bytes);
            goto done;
        }
        t[r] = (now_s() - t0) * 1e3;
    }
    out = stats(t, O.runs);
done:
    free(dec);
    free(t);
    wsc_close(&c);
    return out;
}

static char *b64_data;
static size_t b64_len;

/* fs/writeFile of `bytes` (at most what fits in one 64 MiB message). */
static struct cell writefile_one(struct server *s, size_t bytes)
{
    struct wsc c;
    struct cell out;
    if (!connect_server(s, &c, &out)) return out;
    double *t = xcalloc((size_t)O.runs, sizeof *t);
    char head[PATH_MAX + 128], err[200];
    size_t enc = base64_encoded_len(bytes);
    for (int r = 0; r < O.runs; r++) {
        uint64_t id = c.next_id++;
        int hl = snprintf(head, sizeof head,
                          "{\"id\":%llu,\"method\":\"fs/writeFile\",\"params\":{\"path\":"
                          "\"file://%s\",\"dataBase64\":\"",
                          (unsigned long long)id, file_out);
        struct iovec iov[3] = {{head, (size_t)hl}, {b64_data, enc}, {"\"}}", 3}};
        struct span res;
        double t0 = now_s();
        wsc_sendv(&c, iov, 3);
        if (wsc_await(&c, id, NULL, NULL, &res, err, sizeof err, TIMEOUT_MS) < 0) {
            out = failure("%s", err);
            goto done;
        }
        t[r] = (now_s() - t0) * 1e3;
        struct stat st;
        if (stat(file_out, &st) < 0 || (size_t)st.st_size != bytes) {
            out = failure("file has %lld bytes, not %zu", (long long)st.st_size, bytes);
            goto done;
        }
    }
    out = stats(t, O.runs);
done:
    free(t);
    wsc_close(&c);
    return out;
}

/* fs/open replace + pipelined fs/writeBlock of 1 MiB blocks + fs/close. */
static struct cell writeblock_one(struct server *s)
{
    struct wsc c;
    struct cell out;
    if (!connect_server(s, &c, &out)) return out;
    double *t = xcalloc((size_t)O.runs, sizeof *t);
    char params[PATH_MAX + 128], head[256], err[200];
    size_t blk = 1 << 20, nblk = (O.file_bytes + blk - 1) / blk;
    size_t blk_enc = base64_encoded_len(blk);
    for (int r = 0; r < O.runs; r++) {
        struct span res;
        double t0 = now_s();
        snprintf(params, sizeof params,
                 "{\"handleId\":\"w%d\",\"path\":\"file://%s\",\"mode\":\"replace\"}", r,
                 file_out);
        if (wsc_call(&c, "fs/open", params, NULL, NULL, &res, err, sizeof err, TIMEOUT_MS) < 0) {
            out = failure("fs/open: %s", err);
            goto done;
        }
        struct track tr;
        track_init(&tr, "-", 1, false);
        for (size_t b = 0; b < nblk; b++) {
            /* The encoding of the whole file is cut at multiples of 1 MiB (a multiple
             * of 3 bytes would be needed to cut it exactly; 1 MiB is not, so each
             * block is its own slice of the file, encoded up front below). */
            int hl = snprintf(head, sizeof head,
                              "{\"id\":%llu,\"method\":\"fs/writeBlock\",\"params\":{"
                              "\"handleId\":\"w%d\",\"offset\":%zu,\"chunk\":\"",
                              (unsigned long long)c.next_id++, r, b * blk);
            struct iovec iov[3] = {
                {head, (size_t)hl}, {b64_data + b * blk_enc, blk_enc}, {"\"}}", 3}};
            wsc_sendv(&c, iov, 3);
        }
        int rc = track_pump(&c, &tr, 0, (int)nblk, TIMEOUT_MS);
        if (rc < 0 || tr.err[0]) {
            out = failure("fs/writeBlock: %s", tr.err);
            track_free(&tr);
            goto done;
        }
        track_free(&tr);
        snprintf(params, sizeof params, "{\"handleId\":\"w%d\"}", r);
        if (wsc_call(&c, "fs/close", params, NULL, NULL, &res, err, sizeof err, TIMEOUT_MS) < 0) {
            out = failure("fs/close: %s", err);
            goto done;
        }
        t[r] = (now_s() - t0) * 1e3;
        struct stat st;
        if (stat(file_out, &st) < 0 || (size_t)st.st_size != nblk * blk) {
            out = failure("file has %lld bytes, not %zu", (long long)st.st_size, nblk * blk);
            goto done;
        }
    }
    out = stats(t, O.runs);
done:
    free(t);
    wsc_close(&c);
    return out;
}

static const char *server_name(int which);
static void progress(const char *fmt, ...);

static struct cell walk_one(struct server *s)
{
    struct wsc c;
    struct cell out;
    if (!connect_server(s, &c, &out)) return out;
    double *t = xcalloc((size_t)O.runs, sizeof *t);
    char params[PATH_MAX + 256], err[200];
    snprintf(params, sizeof params,
             "{\"path\":\"file://%s\",\"options\":{\"maxDepth\":64,\"maxDirectories\":10000,"
             "\"maxEntries\":50000,\"followDirectorySymlinks\":false}}",
             walk_root);
    for (int r = 0; r < O.runs; r++) {
        struct span res, v;
        double t0 = now_s();
        if (wsc_call(&c, "fs/walk", params, NULL, NULL, &res, err, sizeof err, TIMEOUT_MS) < 0) {
            out = failure("%s", err);
            goto done;
        }
        t[r] = (now_s() - t0) * 1e3;
        /* The answer is capped at 4 MiB counting len(uri) + 64 per entry (PROTOCOL.md
         * 6.11), so a 50,000-entry tree under /tmp comes back truncated from both
         * servers: accept all entries, or a truncated prefix. */
        size_t n = js_get(res, "entries", &v) ? span_count(v, "\"kind\"") : 0;
        struct span tr;
        bool truncated = js_get(res, "truncated", &tr) && span_eq(tr, "true");
        if (n == 0 || ((int)n != walk_total() && !truncated)) {
            out = failure("walk listed %zu entries, not %d", n, walk_total());
            goto done;
        }
        if (r == 0)
            progress("   %s: fs/walk returned %zu entries%s", server_name(s->which), n,
                     truncated ? " (truncated at the 4 MiB answer budget)" : "");
    }
    out = stats(t, O.runs);
done:
    free(t);
    wsc_close(&c);
    return out;
}

static struct cell cmd_floor(char *const argv[], const char *out_path)
{
    double *t = xcalloc((size_t)O.runs, sizeof *t);
    for (int r = 0; r < O.runs; r++) {
        if (out_path) {
            posix_spawn_file_actions_t fa;
            posix_spawn_file_actions_init(&fa);
            posix_spawn_file_actions_addopen(&fa, 1, out_path, O_WRONLY | O_CREAT | O_TRUNC,
                                             0644);
            double t0 = now_s();
            pid_t pid;
            if (posix_spawn(&pid, argv[0], &fa, NULL, argv, environ) == 0)
                waitpid(pid, NULL, 0);
            t[r] = (now_s() - t0) * 1e3;
            posix_spawn_file_actions_destroy(&fa);
        } else {
            uint64_t got;
            t[r] = pipe_floor(argv, &got) * 1e3;
        }
    }
    struct cell c = stats(t, O.runs);
    free(t);
    return c;
}

/* ------------------------------------------------------------------ 6. memory */

struct mem_result {
    struct cell idle, live, noread;
    double noread_growth; /* MB over the second half of the window */
};

static struct mem_result mem_run(struct server *s)
{
    struct mem_result m = {0};
    struct wsc c, c2;
    struct cell err;
    if (!connect_server(s, &c, &err)) {
        m.idle = m.live = m.noread = err;
        return m;
    }
    usleep(300000);
    m.idle = value(server_rss_mb(s));

    int n = O.mem_procs;
    struct track tr;
    track_init(&tr, "m", n, false);
    char params[256];
    for (int i = 0; i < n; i++) {
        start_params(params, sizeof params, "m", i, "[\"/bin/sleep\",\"600\"]");
        wsc_request(&c, "process/start", params);
    }
    if (track_pump(&c, &tr, 0, n, TIMEOUT_MS) < 0) {
        m.live = failure("%s", tr.err);
    } else {
        usleep(300000);
        m.live = value(server_rss_mb(s));
    }
    int before = tr.responses;
    for (int i = 0; i < n; i++) {
        snprintf(params, sizeof params, "{\"processId\":\"m%d\"}", i);
        wsc_request(&c, "process/terminate", params);
    }
    tr.err[0] = 0;
    track_pump(&c, &tr, n, before + n, TIMEOUT_MS);
    track_free(&tr);

    /* A second connection starts a 1 GB stream and then never reads its socket. */
    if (!connect_server(s, &c2, &err)) {
        m.noread = err;
        wsc_close(&c);
        return m;
    }
    char argv[128];
    snprintf(argv, sizeof argv, "[\"/usr/bin/head\",\"-c\",\"%zu\",\"/dev/zero\"]",
             O.mem_stream_bytes);
    start_params(params, sizeof params, "n", 0, argv);
    wsc_request(&c2, "process/start", params);
    double t0 = now_s(), peak = 0, mid = 0;
    while (now_s() - t0 < O.mem_stream_secs) {
        double r = server_rss_mb(s);
        if (r > peak) peak = r;
        if (mid == 0 && now_s() - t0 >= O.mem_stream_secs / 2) mid = peak;
        usleep(20000);
    }
    m.noread = value(peak);
    m.noread_growth = peak - mid;
    wsc_request(&c2, "process/terminate", "{\"processId\":\"n0\"}");
    wsc_close(&c2);
    wsc_close(&c);
    return m;
}

/* ------------------------------------------------------------------ 7. sandboxed fs */

static struct cell sandbox_one(struct server *s, bool sandboxed, const char *ws)
{
    struct wsc c;
    struct cell out;
    if (!connect_server(s, &c, &out)) return out;
    char data[base64_encoded_len(4096) + 1];
    static uint8_t raw[4096];
    memset(raw, 'x', sizeof raw);
    data[base64_encode(raw, sizeof raw, data)] = 0;
    size_t plen = sizeof data + 2 * PATH_MAX + 1024;
    char *params = xmalloc(plen), err[200];
    char sb[2 * PATH_MAX + 512] = "";
    if (sandboxed)
        snprintf(sb, sizeof sb,
                 ",\"sandbox\":{\"permissions\":{\"type\":\"managed\",\"file_system\":{"
                 "\"type\":\"restricted\",\"entries\":[{\"path\":{\"type\":\"special\","
                 "\"value\":{\"kind\":\"root\"}},\"access\":\"read\"},{\"path\":{\"type\":"
                 "\"special\",\"value\":{\"kind\":\"project_roots\"}},\"access\":\"write\"}]},"
                 "\"network\":\"restricted\"},\"cwd\":\"file://%s\",\"workspaceRoots\":["
                 "\"file://%s\"],\"windowsSandboxLevel\":\"disabled\"}",
                 ws, ws);
    snprintf(params, plen, "{\"path\":\"file://%s/f.txt\",\"dataBase64\":\"%s\"%s}", ws, data,
             sb);
    int warm = 5, n = O.sandbox_n;
    double *t = xcalloc((size_t)n, sizeof *t);
    for (int i = 0; i < n + warm; i++) {
        struct span res;
        double t0 = now_s();
        if (wsc_call(&c, "fs/writeFile", params, NULL, NULL, &res, err, sizeof err, 30000) < 0) {
            out = failure("n/a (%s)", err);
            goto done;
        }
        if (i >= warm) t[i - warm] = (now_s() - t0) * 1e3;
    }
    out = stats(t, n);
done:
    free(t);
    free(params);
    wsc_close(&c);
    return out;
}

static struct cell write4k_floor(const char *ws)
{
    int n = O.sandbox_n;
    double *t = xcalloc((size_t)n, sizeof *t);
    char path[PATH_MAX + 16];
    snprintf(path, sizeof path, "%s/f.txt", ws);
    static char raw[4096];
    for (int i = 0; i < n; i++) {
        double t0 = now_s();
        int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        if (fd >= 0) {
            if (write(fd, raw, sizeof raw) < 0) t0 = 0;
            close(fd);
        }
        t[i] = (now_s() - t0) * 1e3;
    }
    struct cell c = stats(t, n);
    free(t);
    return c;
}

/* ------------------------------------------------------------------ driver */

static int nservers(void)
{
    return have_ref() ? 2 : 1;
}

static const char *server_name(int which)
{
    return which == 0 ? "ours" : "reference";
}

/* Starts server `which`, or records the failure in every given row. */
static bool start_or_fail(struct server *s, int which, struct row **rs, int nr)
{
    char err[256];
    if (server_start(s, which, err, sizeof err) == 0) return true;
    for (int i = 0; i < nr; i++) record(rs[i], which, failure("%s", err));
    return false;
}

static void progress(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "exec-bench: ");
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}

static void run_scenarios(void)
{
    struct server s;
    char name[96];

    if (O.scenarios & (1u << 1)) {
        snprintf(name, sizeof name, "1. one-shot /bin/true, %d sequential (ms)", O.oneshot_n);
        struct row *r = row_get(name, K_MS);
        progress("%s", name);
        r->has_floor = true;
        scenario_oneshot(r);
    }
    if (O.scenarios & (1u << 2)) {
        snprintf(name, sizeof name, "2. streaming %zu MiB stdout (MB/s)", O.stream_bytes >> 20);
        struct row *r = row_get(name, K_MBS);
        progress("%s", name);
        r->has_floor = true;
        scenario_stream(r);
    }
    if (O.scenarios & (1u << 3)) {
        snprintf(name, sizeof name, "3. fan-out %d x /bin/true, one connection (ms)",
                 O.fanout_n);
        struct row *r = row_get(name, K_MS);
        progress("%s", name);
        r->has_floor = true;
        scenario_fanout(r);
    }
    if (O.scenarios & (1u << 4)) {
        snprintf(name, sizeof name, "4. %d connections: init + one command each (ms)",
                 O.conns_n);
        struct row *r = row_get(name, K_MS);
        progress("%s", name);
        double acc[2][64];
        int nacc[2] = {0, 0};
        bool failed[2] = {false, false};
        for (int run = 0; run < O.runs; run++)
            for (int w = 0; w < nservers(); w++) {
                if (failed[w] || !start_or_fail(&s, w, &r, 1)) {
                    failed[w] = true;
                    continue;
                }
                struct cell c = conns_run(&s);
                server_stop(&s);
                if (!c.ok) {
                    record(r, w, c);
                    failed[w] = true;
                    continue;
                }
                acc[w][nacc[w]++] = c.p50;
            }
        for (int w = 0; w < nservers(); w++)
            if (!failed[w]) record(r, w, stats(acc[w], nacc[w]));
    }
    if (O.scenarios & (1u << 5)) {
        char path[PATH_MAX + 32];
        snprintf(path, sizeof path, "%s/big.bin", O.tmp);
        file_big = xstrdup(path);
        snprintf(path, sizeof path, "%s/out.bin", O.tmp);
        file_out = xstrdup(path);
        snprintf(path, sizeof path, "%s/tree", O.tmp);
        walk_root = xstrdup(path);
        progress("5. files: preparing %zu MiB file and %d-entry tree", O.file_bytes >> 20,
                 O.walk_entries);
        make_file(file_big, O.file_bytes);
        make_tree(walk_root, O.walk_entries);
        /* One encoding per 1 MiB block (each block a multiple of 4 characters). */
        size_t blk = 1 << 20, nblk = (O.file_bytes + blk - 1) / blk;
        b64_data = xmalloc(nblk * base64_encoded_len(blk));
        {
            uint8_t *raw = xmalloc(blk);
            int fd = open(file_big, O_RDONLY);
            for (size_t b = 0; b < nblk; b++) {
                memset(raw, 0, blk);
                if (pread(fd, raw, blk, (off_t)(b * blk)) < 0) break;
                base64_encode(raw, blk, b64_data + b * base64_encoded_len(blk));
            }
            close(fd);
            free(raw);
        }
        b64_len = nblk * base64_encoded_len(blk);
        /* One fs/writeFile message must stay under the 64 MiB message limit of both
         * servers: its base64 is 4/3 of the data, so 64 MiB cannot go in one call. */
        size_t wf = O.file_bytes;
        while (base64_encoded_len(wf) + 4096 > (64u << 20)) wf /= 2;
        /* writeFile takes a contiguous encoding: re-encode the first wf bytes. */
        char *wf_b64 = xmalloc(base64_encoded_len(wf));
        {
            uint8_t *raw = xmalloc(wf);
            int fd = open(file_big, O_RDONLY);
            if (pread(fd, raw, wf, 0) < 0) memset(raw, 0, wf);
            close(fd);
            base64_encode(raw, wf, wf_b64);
            free(raw);
        }

        char *cat_argv[] = {"/bin/cat", file_big, NULL};
        char *find_argv[] = {"/usr/bin/find", walk_root, NULL};

        snprintf(name, sizeof name, "5a. fs/readFile %zu MiB (ms)", O.file_bytes >> 20);
        struct row *r = row_get(name, K_MS);
        progress("%s", name);
        r->has_floor = true;
        r->floor = cmd_floor(cat_argv, NULL);
        for (int w = 0; w < nservers(); w++)
            if (start_or_fail(&s, w, &r, 1)) {
                record(r, w, readfile_one(&s));
                server_stop(&s);
            }

        snprintf(name, sizeof name, "5b. fs/writeFile %zu MiB (ms)", wf >> 20);
        r = row_get(name, K_MS);
        progress("%s", name);
        r->has_floor = true;
        {
            /* Floor: cat of the same amount into the file. */
            char count[32];
            snprintf(count, sizeof count, "%zu", wf);
            char *head_argv[] = {"/usr/bin/head", "-c", count, file_big, NULL};
            r->floor = cmd_floor(head_argv, file_out);
        }
        char *keep = b64_data;
        b64_data = wf_b64;
        for (int w = 0; w < nservers(); w++)
            if (start_or_fail(&s, w, &r, 1)) {
                record(r, w, writefile_one(&s, wf));
                server_stop(&s);
            }
        b64_data = keep;
        free(wf_b64);

        snprintf(name, sizeof name, "5c. fs/open+writeBlock %zu MiB in 1 MiB blocks (ms)",
                 O.file_bytes >> 20);
        r = row_get(name, K_MS);
        progress("%s", name);
        r->has_floor = true;
        r->floor = cmd_floor(cat_argv, file_out);
        for (int w = 0; w < nservers(); w++)
            if (start_or_fail(&s, w, &r, 1)) {
                record(r, w, writeblock_one(&s));
                server_stop(&s);
            }

        snprintf(name, sizeof name, "5d. fs/walk %d entries (ms)", walk_total());
        r = row_get(name, K_MS);
        progress("%s", name);
        r->has_floor = true;
        r->floor = cmd_floor(find_argv, NULL);
        for (int w = 0; w < nservers(); w++)
            if (start_or_fail(&s, w, &r, 1)) {
                record(r, w, walk_one(&s));
                server_stop(&s);
            }
        free(b64_data);
    }
    if (O.scenarios & (1u << 6)) {
        struct row *ri = row_get("6a. RSS idle, one connection (MB)", K_MB);
        snprintf(name, sizeof name, "6b. RSS with %d live processes (MB)", O.mem_procs);
        struct row *rl = row_get(name, K_MB);
        snprintf(name, sizeof name, "6c. RSS peak, client not reading a %zu MB stream (MB)",
                 O.mem_stream_bytes / 1000000);
        struct row *rn = row_get(name, K_MB);
        struct row *rs[3] = {ri, rl, rn};
        progress("6. memory");
        for (int w = 0; w < nservers(); w++)
            if (start_or_fail(&s, w, rs, 3)) {
                struct mem_result m = mem_run(&s);
                server_stop(&s);
                record(ri, w, m.idle);
                record(rl, w, m.live);
                record(rn, w, m.noread);
                if (m.noread.ok)
                    progress("   %s: RSS growth over the last %.1f s of not reading: %.2f MB",
                             server_name(w), O.mem_stream_secs / 2, m.noread_growth);
                if (w == 0 && m.noread.ok && m.noread_growth > 1.0)
                    progress("   ours: memory still growing while the client does not read");
            }
    }
    if (O.scenarios & (1u << 7)) {
        char ws[PATH_MAX + 16];
        snprintf(ws, sizeof ws, "%s/ws", O.tmp);
        mkdir(ws, 0755);
        struct row *rsb = row_get("7a. fs/writeFile 4 KiB, sandboxed (ms)", K_MS);
        struct row *run = row_get("7b. fs/writeFile 4 KiB, no sandbox (ms)", K_MS);
        progress("7. sandboxed fs latency");
        run->has_floor = true;
        for (int w = 0; w < nservers(); w++) {
            struct row *both[2] = {rsb, run};
            if (start_or_fail(&s, w, both, 2)) {
                struct cell sb = sandbox_one(&s, true, ws);
                /* A refused sandbox is a missing feature, not a broken run. */
                rsb->v[w] = sb;
                record(run, w, sandbox_one(&s, false, ws));
                server_stop(&s);
            }
        }
        /* After the servers, on the file they wrote: right after scenario 6 the
         * first few milliseconds of writes were slow for whoever came first. */
        run->floor = write4k_floor(ws);
    }
}

/* ------------------------------------------------------------------ table */

static void fmt_num(char *out, size_t n, double v, enum kind k)
{
    if (k == K_MBS) snprintf(out, n, "%.0f", v);
    else if (k == K_MB) snprintf(out, n, "%.1f", v);
    else if (v < 10) snprintf(out, n, "%.3f", v);
    else if (v < 1000) snprintf(out, n, "%.1f", v);
    else snprintf(out, n, "%.0f", v);
}

static void fmt_cell(char *out, size_t n, const struct cell *c, enum kind k)
{
    if (!c->ok) {
        snprintf(out, n, "%s", c->err[0] ? c->err : "-");
        return;
    }
    char a[32], b[32];
    fmt_num(a, sizeof a, c->p50, k);
    if (c->dist) {
        fmt_num(b, sizeof b, c->p95, k);
        snprintf(out, n, "%s / %s", a, b);
    } else {
        snprintf(out, n, "%s", a);
    }
}

/* How many times better `a` is than `b` (>1: a better), on medians. */
static double better(double a, double b, enum kind k)
{
    return k == K_MBS ? a / b : b / a;
}

static void print_table(void)
{
    printf("\n| scenario | ours (p50 / p95) | reference (p50 / p95) | ours better by | floor "
           "(p50 / p95) | ours vs floor |\n");
    printf("|---|---|---|---|---|---|\n");
    for (int i = 0; i < nrows; i++) {
        struct row *r = &rows[i];
        char o[256], ref[256], ratio[32] = "", fl[64] = "", vf[32] = "";
        fmt_cell(o, sizeof o, &r->v[0], r->kind);
        if (have_ref()) fmt_cell(ref, sizeof ref, &r->v[1], r->kind);
        else snprintf(ref, sizeof ref, "not run");
        if (r->v[0].ok && r->v[1].ok) snprintf(ratio, sizeof ratio, "%.1fx",
                                               better(r->v[0].p50, r->v[1].p50, r->kind));
        if (r->has_floor) {
            fmt_cell(fl, sizeof fl, &r->floor, r->kind);
            if (r->v[0].ok && r->floor.ok) {
                if (r->kind == K_MBS)
                    snprintf(vf, sizeof vf, "%.2f of floor", r->v[0].p50 / r->floor.p50);
                else
                    snprintf(vf, sizeof vf, "%.2fx floor (+%.3f ms)",
                             r->v[0].p50 / r->floor.p50, r->v[0].p50 - r->floor.p50);
            }
        }
        printf("| %s | %s | %s | %s | %s | %s |\n", r->name, o, ref, ratio, fl, vf);
    }
}

static struct row *row_find(const char *prefix)
{
    for (int i = 0; i < nrows; i++)
        if (strncmp(rows[i].name, prefix, strlen(prefix)) == 0) return &rows[i];
    return NULL;
}

static void target(const char *what, bool known, bool ok, const char *fmt, ...)
{
    char detail[160] = "";
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(detail, sizeof detail, fmt, ap);
    va_end(ap);
    printf("- %-58s %-5s %s\n", what, !known ? "n/a" : ok ? "MET" : "MISS", detail);
}

static void print_targets(void)
{
    printf("\nTargets (issue 6):\n");
    struct row *r;
    if ((r = row_find("1.")) && r->v[0].ok && r->floor.ok) {
        double d = r->v[0].p50 - r->floor.p50;
        target("one-shot p50 within 0.5 ms of the posix_spawn floor", true, d <= 0.5,
               "(+%.3f ms)", d);
        if (r->v[1].ok)
            target("one-shot p50 at least 30x faster than the reference", true,
                   r->v[1].p50 / r->v[0].p50 >= 30, "(%.1fx)", r->v[1].p50 / r->v[0].p50);
    }
    if ((r = row_find("2.")) && r->v[0].ok && r->floor.ok)
        target("streaming at least half the pipe floor", true,
               r->v[0].p50 >= r->floor.p50 / 2, "(%.2f of floor%s)", r->v[0].p50 / r->floor.p50,
               "");
    if ((r = row_find("2.")) && r->v[0].ok && r->v[1].ok)
        target("streaming about 3x the reference", true, r->v[0].p50 >= 3 * r->v[1].p50,
               "(%.1fx)", r->v[0].p50 / r->v[1].p50);
    if ((r = row_find("3.")) && r->v[0].ok && r->floor.ok)
        target("fan-out within 2x of the spawn floor", true, r->v[0].p50 <= 2 * r->floor.p50,
               "(%.2fx)", r->v[0].p50 / r->floor.p50);
    if ((r = row_find("6a.")) && r->v[0].ok)
        target("idle RSS under 4 MB", true, r->v[0].p50 < 4, "(%.1f MB)", r->v[0].p50);
    if ((r = row_find("6b.")) && r->v[0].ok)
        target("RSS under 16 MB with the live processes", true, r->v[0].p50 < 16, "(%.1f MB)",
               r->v[0].p50);
    struct row *idle = row_find("6a.");
    if ((r = row_find("6c.")) && r->v[0].ok && idle && idle->v[0].ok)
        target("RSS bounded while a client does not read", true,
               r->v[0].p50 - idle->v[0].p50 < 32, "(peak %.1f MB, idle + %.1f MB)", r->v[0].p50,
               r->v[0].p50 - idle->v[0].p50);
}

/* ------------------------------------------------------------------ main */

static void usage(FILE *f)
{
    fprintf(f,
            "usage: exec-bench [options]\n"
            "  --ours PATH          our server (default: exec-server beside exec-bench)\n"
            "  --ref PATH           reference codex binary (default: ~" REF_GLOB ")\n"
            "  --no-ref             run only our server\n"
            "  --scenarios LIST     comma-separated scenario numbers 1-7 (default: all)\n"
            "  --quick              small sizes for a smoke test\n"
            "  --runs N             repetitions of streaming, fan-out, connections, files\n"
            "  --oneshot N          sequential one-shot runs (500)\n"
            "  --stream-mib N       streaming size in MiB (256)\n"
            "  --fanout N           processes started at once (200)\n"
            "  --conns N            connections (500)\n"
            "  --file-mib N         file size in MiB (64)\n"
            "  --walk N             entries in the walked tree (50000)\n"
            "  --procs N            live processes for the memory figure (500)\n"
            "  --mem-stream-mb N    size of the unread stream in MB (1000)\n"
            "  --sandbox-n N        sandboxed writes (200)\n");
}

static void cleanup_tmp(void)
{
    if (!O.tmp[0]) return;
    char *argv[] = {"/bin/rm", "-rf", O.tmp, NULL};
    pid_t pid;
    if (posix_spawn(&pid, argv[0], NULL, NULL, argv, environ) == 0) waitpid(pid, NULL, 0);
}

static char ours_default[PATH_MAX];

int main(int argc, char **argv)
{
    O = (struct opts){.scenarios = 0xFE, .runs = 5, .oneshot_n = 500, .stream_bytes = 256u << 20,
                      .fanout_n = 200, .conns_n = 500, .file_bytes = 64u << 20,
                      .walk_entries = 50000, .mem_procs = 500,
                      .mem_stream_bytes = 1000000000, .mem_stream_secs = 3, .sandbox_n = 200};
    bool no_ref = false, runs_set = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
#define OPT(name) (strcmp(a, name) == 0 && v && ++i)
        if (strcmp(a, "--quick") == 0) {
            O.quick = true;
            O.oneshot_n = 50;
            O.stream_bytes = 16u << 20;
            O.fanout_n = 20;
            O.conns_n = 20;
            O.file_bytes = 4u << 20;
            O.walk_entries = 2000;
            O.mem_procs = 20;
            O.mem_stream_bytes = 100000000;
            O.mem_stream_secs = 1;
            O.sandbox_n = 20;
            if (!runs_set) O.runs = 2;
        } else if (strcmp(a, "--no-ref") == 0) no_ref = true;
        else if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            usage(stdout);
            return 0;
        } else if (OPT("--ours")) O.ours = v;
        else if (OPT("--ref")) O.ref = v;
        else if (OPT("--scenarios")) {
            O.scenarios = 0;
            for (const char *p = v; *p; p++)
                if (*p >= '1' && *p <= '7') O.scenarios |= 1u << (*p - '0');
        } else if (OPT("--runs")) {
            O.runs = atoi(v);
            runs_set = true;
        } else if (OPT("--oneshot")) O.oneshot_n = atoi(v);
        else if (OPT("--stream-mib")) O.stream_bytes = (size_t)atol(v) << 20;
        else if (OPT("--fanout")) O.fanout_n = atoi(v);
        else if (OPT("--conns")) O.conns_n = atoi(v);
        else if (OPT("--file-mib")) O.file_bytes = (size_t)atol(v) << 20;
        else if (OPT("--walk")) O.walk_entries = atoi(v);
        else if (OPT("--procs")) O.mem_procs = atoi(v);
        else if (OPT("--mem-stream-mb")) O.mem_stream_bytes = (size_t)atol(v) * 1000000;
        else if (OPT("--sandbox-n")) O.sandbox_n = atoi(v);
        else {
            fprintf(stderr, "exec-bench: unknown or incomplete option %s\n", a);
            usage(stderr);
            return 2;
        }
#undef OPT
    }
    if (O.runs < 1 || O.runs > 64 || O.oneshot_n < 1 || O.fanout_n < 1 || O.conns_n < 1 ||
        O.file_bytes < (1u << 20) || O.walk_entries < 2 || O.walk_entries > 50000 ||
        O.mem_procs < 1 || O.sandbox_n < 1 || O.stream_bytes == 0) {
        fprintf(stderr, "exec-bench: option out of range (runs 1..64, file >= 1 MiB, walk "
                        "2..50000, counts >= 1)\n");
        return 2;
    }
    if (!O.ours) {
        char self[PATH_MAX];
        ssize_t l = readlink("/proc/self/exe", self, sizeof self - 1);
        self[l > 0 ? l : 0] = 0;
        char *slash = strrchr(self, '/');
        if (slash) *slash = 0;
        /* The driver is built in BUILD/bench/, the server in BUILD/. */
        snprintf(ours_default, sizeof ours_default, "%s/exec-server", self);
        if (access(ours_default, X_OK) != 0)
            snprintf(ours_default, sizeof ours_default, "%s/../exec-server", self);
        O.ours = ours_default;
    }
    static char refbuf[PATH_MAX];
    if (no_ref) O.ref = NULL;
    else if (!O.ref) {
        const char *home = getenv("HOME");
        char pat[PATH_MAX];
        snprintf(pat, sizeof pat, "%s" REF_GLOB, home ? home : "/root");
        glob_t g;
        if (glob(pat, 0, NULL, &g) == 0 && g.gl_pathc > 0) {
            snprintf(refbuf, sizeof refbuf, "%s", g.gl_pathv[0]);
            O.ref = refbuf;
        }
        globfree(&g);
        if (!O.ref) progress("reference not found (%s); running ours only", pat);
    }
    if (access(O.ours, X_OK) != 0) {
        fprintf(stderr, "exec-bench: our server %s is not executable\n", O.ours);
        return 2;
    }
    /* 500 connections + 500 processes' pipes need more than the default 1024 fds;
     * the servers inherit the limit. */
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
    }
    signal(SIGPIPE, SIG_IGN);
    snprintf(O.tmp, sizeof O.tmp, "/tmp/exec-bench-XXXXXX");
    if (!mkdtemp(O.tmp)) {
        perror("mkdtemp");
        return 2;
    }
    atexit(cleanup_tmp);

    progress("ours: %s", O.ours);
    if (O.ref) progress("reference: %s", O.ref);
    double t0 = now_s();
    run_scenarios();
    print_table();
    print_targets();
    printf("\n(%s; driver and servers on the same machine; %.0f s total)\n",
           O.quick ? "--quick sizes" : "full sizes", now_s() - t0);
    return ours_failed ? 1 : 0;
}
