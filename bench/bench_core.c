/* bench_core.c: the shared machinery of exec-bench: results and statistics, starting
 * and stopping the servers and reading their RSS, process tracking over a connection,
 * the driver's own floors, the scenario helpers and the floor/ours interleaving. */

#include "bench.h"

struct row rows[64];
int nrows;
bool ours_failed;
struct opts O; /* the options (bench.c parses them) */

/* Whether row `id` ("5b", "1", "7a") is to be run: every row unless --only names
 * rows, where "5" stands for all of 5a-5d. */
bool row_on(const char *id)
{
    if (!O.only) return true;
    size_t il = strlen(id);
    for (const char *p = O.only; *p;) {
        size_t n = strcspn(p, ",");
        if ((n == il && memcmp(p, id, n) == 0) ||
            (n < il && memcmp(p, id, n) == 0 && id[n] >= 'a' && id[n] <= 'z'))
            return true;
        p += n;
        if (*p == ',') p++;
    }
    return false;
}

struct row *row_get(const char *name, enum kind kind)
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
struct cell stats(double *s, int n)
{
    struct cell c = {.ok = n > 0, .dist = n > 2};
    if (n == 0) return c;
    qsort(s, (size_t)n, sizeof *s, cmp_dbl);
    c.p50 = n % 2 ? s[n / 2] : (s[n / 2 - 1] + s[n / 2]) / 2;
    int i95 = (int)ceil(0.95 * n) - 1;
    c.p95 = s[i95 < 0 ? 0 : i95];
    return c;
}

struct cell value(double v)
{
    return (struct cell){.ok = true, .p50 = v, .p95 = v};
}

struct cell failure(const char *fmt, ...)
{
    struct cell c = {0};
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c.err, sizeof c.err, fmt, ap);
    va_end(ap);
    return c;
}

/* ------------------------------------------------------------------ servers */

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
        if (which == 0) {
            /* EXEC_BENCH_WRAP="valgrind --tool=callgrind ..." (split at spaces) runs
             * our server under a profiler; the figures are then the profiler's. */
            char *wrap = getenv("EXEC_BENCH_WRAP");
            char *av[64];
            int ac = 0;
            for (char *t = wrap ? strtok(wrap, " ") : NULL; t && ac < 48; t = strtok(NULL, " "))
                av[ac++] = t;
            av[ac++] = (char *)O.ours;
            av[ac++] = "--listen";
            av[ac++] = "ws://127.0.0.1:0";
            for (int i = 0; O.ours_extra[i] && ac < 62; i++)
                av[ac++] = (char *)O.ours_extra[i];
            av[ac] = NULL;
            execvp(av[0], av);
        } else if (O.vs) {
            /* --vs: our own server again, with other options (split at spaces), or
             * another binary when the first word names an executable file. */
            char *av[64], *vs = strdup(O.vs);
            int ac = 0;
            char *t = strtok(vs, " ");
            av[ac++] = t && t[0] != '-' && access(t, X_OK) == 0 ? t : (char *)O.ours;
            if (av[0] == t) t = strtok(NULL, " ");
            av[ac++] = "--listen";
            av[ac++] = "ws://127.0.0.1:0";
            for (; t && ac < 62; t = strtok(NULL, " "))
                av[ac++] = t;
            av[ac] = NULL;
            execv(av[0], av);
        } else
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
        /* The scratch directory goes at exit: quote the server's complaint itself. */
        char said[160] = "";
        int e = open(path, O_RDONLY | O_CLOEXEC);
        ssize_t got = e >= 0 ? read(e, said, sizeof said - 1) : -1;
        if (e >= 0) close(e);
        said[got > 0 ? got : 0] = 0;
        said[strcspn(said, "\n")] = 0;
        snprintf(err, errlen, "server did not print its URL%s%s", *said ? ": " : "", said);
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

void server_stop(struct server *s)
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

/* A field of /proc/PID/status in kB ("VmRSS:", "RssAnon:"), or -1. */
static long status_kb(pid_t pid, const char *field)
{
    char path[64], line[256];
    snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    long kb = -1;
    size_t fl = strlen(field);
    while (fgets(line, sizeof line, f))
        if (strncmp(line, field, fl) == 0) kb = atol(line + fl);
    fclose(f);
    return kb;
}

static long rss_kb_of(pid_t pid)
{
    return status_kb(pid, "VmRSS:");
}

/* CPU time of one process (every thread) in ns, from the scheduler's own
 * accounting (/proc/PID/task/TID/schedstat): exact, and unlike wall time not
 * stretched by other load on the machine. -1 when unknown. */
static double cpu_ns_of(pid_t pid)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/task", (int)pid);
    DIR *d = opendir(path);
    if (!d) return -1;
    double ns = 0;
    struct dirent *de;
    while ((de = readdir(d))) {
        if (de->d_name[0] == '.') continue;
        char p2[128], buf[128];
        snprintf(p2, sizeof p2, "/proc/%d/task/%s/schedstat", (int)pid, de->d_name);
        int fd = open(p2, O_RDONLY);
        if (fd < 0) continue;
        ssize_t n = read(fd, buf, sizeof buf - 1);
        close(fd);
        if (n <= 0) continue;
        buf[n] = 0;
        ns += strtod(buf, NULL);
    }
    closedir(d);
    return ns;
}

/* The children of the server running its own executable (spawner, sandbox
 * helpers): calls fn on each. */
static void for_helpers(const struct server *s, void (*fn)(pid_t, void *), void *ud)
{
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
        if (strcmp(exe, s->exe) == 0) fn(pid, ud);
    }
    if (d) closedir(d);
}

static void add_cpu(pid_t pid, void *ud)
{
    double ns = cpu_ns_of(pid);
    if (ns > 0) *(double *)ud += ns;
}

/* CPU ms used so far by the server and its helper processes (not by the commands
 * it runs for clients). Differences of two readings are what a row reports. */
double server_cpu_ms(const struct server *s)
{
    double ns = cpu_ns_of(s->pid);
    if (ns < 0) return 0;
    for_helpers(s, add_cpu, &ns);
    return ns / 1e6;
}

/* CPU ms used so far by the driver itself (for floors it computes in-process). */
double self_cpu_ms(void)
{
    return cpu_ns_of(getpid()) / 1e6;
}

/* RSS of the server plus the private memory of any helper children running the
 * same executable (the processes it runs for clients are not counted). In MB
 * (10^6 bytes). */
/* A helper runs the server's own executable: its file-backed pages (the program
 * and the libraries) are the server's, already in its RSS; what it adds is its
 * private memory. */
static void add_rss(pid_t pid, void *ud)
{
    long kb = status_kb(pid, "RssAnon:"), sh = status_kb(pid, "RssShmem:");
    if (kb > 0) *(long *)ud += kb;
    if (sh > 0) *(long *)ud += sh;
}

double server_rss_mb(const struct server *s)
{
    long kb = rss_kb_of(s->pid);
    for_helpers(s, add_rss, &kb);
    return kb * 1024.0 / 1e6;
}

/* ------------------------------------------------------------------ process tracking */

/* Follows the notifications of processes named <prefix><index> on one connection:
 * output bytes (decoded), seq order, exit and close. Responses are counted too, so
 * pipelined requests can be awaited without matching ids. */

void track_init(struct track *t, const char *prefix, int n, bool decode)
{
    memset(t, 0, sizeof *t);
    snprintf(t->prefix, sizeof t->prefix, "%s", prefix);
    t->n = n;
    t->last_seq = xcalloc((size_t)n, sizeof *t->last_seq);
    t->closed = xcalloc((size_t)n, sizeof *t->closed);
    t->decode = decode;
}

void track_free(struct track *t)
{
    free(t->last_seq);
    free(t->closed);
    free(t->scratch);
}

void track_msg(void *ud, struct span m)
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
    for (size_t i = pl; i < id.n; i++)
        idx = idx * 10 + (id.p[i] - '0');
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
            size_t pad =
                chunk.n >= 2 ? (chunk.p[chunk.n - 1] == '=') + (chunk.p[chunk.n - 2] == '=') : 0;
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
int track_pump(struct wsc *c, struct track *t, int closed, int responses, int timeout_ms)
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

void start_params(char *out, size_t n, const char *prefix, int idx, const char *argv_json)
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
double pipe_floor(char *const argv[], uint64_t *bytes, struct rusage *ru)
{
    static char buf[1 << 20];
    int fd;
    double t0 = now_s();
    pid_t pid = spawn_out(argv, &fd);
    if (ru) memset(ru, 0, sizeof *ru);
    if (pid < 0) return -1;
    uint64_t total = 0;
    ssize_t r;
    while ((r = read(fd, buf, sizeof buf)) > 0)
        total += (uint64_t)r;
    close(fd);
    wait4(pid, NULL, 0, ru);
    *bytes = total;
    return now_s() - t0;
}

/* ------------------------------------------------------------------ scenario helpers */

/* Connects and handshakes; on failure sets *out to the error and returns false. */
bool connect_server(struct server *s, struct wsc *c, struct cell *out)
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

void record(struct row *r, int which, struct cell c)
{
    r->v[which] = c;
    if (!c.ok && which == 0) ours_failed = true;
}

bool have_ref(void)
{
    return O.ref != NULL;
}

/* ------------------------------------------------------------------ interleaving */

/* Scenarios 1-3 compare against a floor, and the machine's load drifts: the floor
 * runs are interleaved with our server's (floor, ours, floor, ...) so the ratio
 * sees the same conditions. The reference runs on its own right after: with the
 * reference merely running and connected, the driver's own posix_spawn floor went
 * from 0.55 to 3.2 ms here, so it is never up while ours or the floor is measured. */

void pair_start(struct pair *p, struct row *r, int only)
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

void pair_fail(struct pair *p, struct row *r, int w, const char *err)
{
    record(r, w, failure("%s", err));
    wsc_close(&p->c[w]);
    server_stop(&p->s[w]);
    p->up[w] = false;
}

void pair_stop(struct pair *p)
{
    for (int w = 0; w < 2; w++)
        if (p->up[w]) {
            wsc_close(&p->c[w]);
            server_stop(&p->s[w]);
        }
}

/* ------------------------------------------------------------------ 1. one-shot */

/* One process/start of /bin/true -> process/closed, in ms; < 0 on failure. */
/* ------------------------------------------------------------------ driver */

int nservers(void)
{
    return have_ref() ? 2 : 1;
}

const char *server_name(int which)
{
    return which == 0 ? "ours" : O.vs ? "ours --vs" : "reference";
}

/* Starts server `which`, or records the failure in every given row. */
bool start_or_fail(struct server *s, int which, struct row **rs, int nr)
{
    char err[256];
    if (server_start(s, which, err, sizeof err) == 0) return true;
    for (int i = 0; i < nr; i++)
        record(rs[i], which, failure("%s", err));
    return false;
}

void progress(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "exec-bench: ");
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}

/* ------------------------------------------------------------------ sockets */

int write_full(int fd, const void *buf, size_t n)
{
    const char *p = buf;
    while (n > 0) {
        ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return -1;
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

int listen_loopback(int backlog, struct sockaddr_in *a)
{
    int l = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    *a = (struct sockaddr_in){.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t al = sizeof *a;
    if (l < 0 || bind(l, (struct sockaddr *)a, sizeof *a) < 0 || listen(l, backlog) < 0 ||
        getsockname(l, (struct sockaddr *)a, &al) < 0) {
        int e = errno;
        if (l >= 0) close(l);
        errno = e;
        return -1;
    }
    return l;
}
