/* scenarios_http.c: scenarios 8 and 9 of exec-bench.
 *
 * 8: a streamed http/request download. A local web server (web_static.c, which takes
 * as little of the machine as it can) serves a file of O.http_bytes; each server under
 * test downloads it with http/request {streamResponse:true} while the driver decodes
 * every http/request/bodyDelta and checks the byte count. The floor is `curl -o /dev/null` of the
 * same URL: the same HTTP work with no JSON-RPC in between. Row 8b is ours again against the
 * protocol floor (relay_floor.c): the body framed as bodyDeltas by a minimal relay process.
 *
 * 9: a download through the managed-network proxy. The same kind of server serves
 * O.proxy_bytes; a process/start with `networkProxy` runs curl in the child, which
 * goes through the server's policy proxy; the figure is curl's own time_total, so
 * the process start is not counted. The floor is the same curl straight to the web
 * server, and the ratio to it is the proxy's cost (target <= 1.3x).
 *
 * 9c: the same download by a sandboxed curl that ignores the proxy variables
 * (`--noproxy '*'`) with transparent TCP on (issue 35): its connection goes through
 * the sandbox's TUN device and the server's user-space TCP stack to the same proxy.
 * The name it asks for is an /etc/hosts alias of 127.0.0.1 (with a final dot, so the
 * sandbox's synthetic resolver answers it; the server resolves it on the host), or,
 * ours alone, bench-web.test through EXEC_SERVER_TEST_RESOLVE. Its floor is row 9,
 * the proxy variables (target <= 1.3x); the reference is codex 0.171.0, the first
 * with transparent TCP, its bundled bubblewrap on the child's PATH. */
#include "bench.h"

struct http_count {
    uint64_t bytes;
    bool done;
    char err[200];
    uint8_t *scratch;
    size_t cap;
};

static void count_delta(void *ud, struct span m)
{
    struct http_count *hc = ud;
    struct span params, v, data;
    if (!js_get(m, "params", &params) || !js_get(params, "deltaBase64", &v) || !js_str(v, &data))
        return;
    size_t need = base64_decoded_max(data.n);
    if (need > hc->cap) {
        hc->scratch = xrealloc(hc->scratch, need);
        hc->cap = need;
    }
    size_t got = 0;
    char e[64];
    if (base64_decode(data.p, data.n, hc->scratch, &got, e, sizeof e) < 0) {
        snprintf(hc->err, sizeof hc->err, "bad delta: %s", e);
        hc->done = true;
        return;
    }
    hc->bytes += got;
    if (js_get(params, "done", &v) && span_eq(v, "true")) hc->done = true;
}

static struct cell http_one(struct server *s, const char *url)
{
    struct wsc c;
    struct cell out;
    if (!connect_server(s, &c, &out)) return out;
    double *t = xcalloc((size_t)O.runs, sizeof *t);
    struct http_count hc = {0};
    char params[512], err[200];
    double cpu0 = 0;
    for (int r = -1; r < O.runs; r++) { /* -1: warm-up (first-touch faults), not counted */
        if (r == 0) cpu0 = server_cpu_ms(s);
        snprintf(params, sizeof params,
                 "{\"method\":\"GET\",\"url\":\"%s\",\"requestId\":\"bench-%d\","
                 "\"streamResponse\":true}",
                 url, r + 1);
        hc.bytes = 0;
        hc.done = false;
        double t0 = now_s();
        struct span res, msg;
        if (wsc_call(&c, "http/request", params, count_delta, &hc, &res, err, sizeof err,
                     TIMEOUT_MS) < 0) {
            out = failure("%s", err);
            goto done;
        }
        while (!hc.done) {
            if (wsc_wait(&c, &msg, TIMEOUT_MS) < 0) {
                out = failure("stream stopped after %llu bytes", (unsigned long long)hc.bytes);
                goto done;
            }
            count_delta(&hc, msg);
        }
        if (hc.err[0] || hc.bytes != O.http_bytes) {
            out = failure("%s (got %llu of %zu bytes)", hc.err[0] ? hc.err : "short body",
                          (unsigned long long)hc.bytes, O.http_bytes);
            goto done;
        }
        if (r >= 0) t[r] = (now_s() - t0) * 1e3;
    }
    out = stats(t, O.runs);
    out.cpu = (server_cpu_ms(s) - cpu0) / O.runs;
done:
    free(hc.scratch);
    free(t);
    wsc_close(&c);
    return out;
}

static void web_stop(pid_t web)
{
    if (web > 0) {
        kill(web, SIGKILL);
        waitpid(web, NULL, 0);
    }
}

/* A file of `bytes` in O.tmp/sub served by a web server of its own: its pid, the
 * file's path and URL. */
static pid_t serve_body(const char *sub, size_t bytes, char *path, size_t pn, char *url, size_t un)
{
    char dir[PATH_MAX + 16];
    snprintf(dir, sizeof dir, "%s/%s", O.tmp, sub);
    mkdir(dir, 0755);
    snprintf(path, pn, "%s/body.bin", dir);
    make_file(path, bytes);
    int port = 0;
    pid_t web = web_static_start(dir, &port);
    snprintf(url, un, "http://127.0.0.1:%d/body.bin", port);
    return web;
}

/* Row 8b's floor: the same body through relay_floor.c's minimal protocol relay, the
 * driver decoding and counting its deltas as it does ours (first run not counted). */
static struct cell http_protocol_floor(const char *url)
{
    int port = 0;
    char path[256];
    if (sscanf(url, "http://127.0.0.1:%d%255s", &port, path) != 2) return failure("url %s", url);
    double *t = xcalloc((size_t)O.runs, sizeof *t);
    struct http_count hc = {0};
    struct cell out;
    for (int r = -1; r < O.runs; r++) {
        hc.bytes = 0;
        hc.done = false;
        double t0 = now_s();
        pid_t pid = -1;
        int fd = relay_http_start(port, path, &pid);
        if (fd < 0) {
            out = failure("the protocol relay did not start");
            goto done;
        }
        struct wsc c;
        wsc_attach(&c, fd);
        struct span msg;
        while (!hc.done && wsc_wait(&c, &msg, TIMEOUT_MS) >= 0)
            count_delta(&hc, msg);
        double dt = (now_s() - t0) * 1e3;
        wsc_close(&c);
        waitpid(pid, NULL, 0);
        if (hc.err[0] || hc.bytes != O.http_bytes) {
            out = failure("relay: %s (got %llu of %zu bytes)", hc.err[0] ? hc.err : "short body",
                          (unsigned long long)hc.bytes, O.http_bytes);
            goto done;
        }
        if (r >= 0) t[r] = dt;
    }
    out = stats(t, O.runs);
done:
    free(hc.scratch);
    free(t);
    return out;
}

void scenario_http(void)
{
    char path[PATH_MAX + 48], name[96], url[128];
    /* The web server: web_static.c's, in a child of ours. */
    pid_t web = serve_body("www", O.http_bytes, path, sizeof path, url, sizeof url);
    snprintf(name, sizeof name, "8. http/request streamed %zu MiB (ms)", O.http_bytes >> 20);
    struct row *r = row_get(name, K_MS);
    progress("%s", name);
    r->has_floor = true;
    char *curl_argv[] = {"/usr/bin/curl", "-s", "-o", "/dev/null", url, NULL};
    r->floor = cmd_floor(curl_argv, "/dev/null");
    snprintf(name, sizeof name,
             "8b. http/request streamed %zu MiB (ms; floor: the protocol without a server)",
             O.http_bytes >> 20);
    struct row *rp = row_on("8b") ? row_get(name, K_MS) : NULL;
    if (rp) {
        rp->has_floor = true;
        rp->floor = http_protocol_floor(url);
    }
    struct server s;
    for (int w = 0; w < nservers(); w++)
        if (start_or_fail(&s, w, &r, 1)) {
            struct cell c = http_one(&s, url);
            record(r, w, c);
            if (rp && w == 0) record(rp, w, c);
            server_stop(&s);
        }
    web_stop(web);
    unlink(path);
}

/* ------------------------------------------------------------------ 9. the proxy */

/* curl's time_total (seconds) from its -w output; < 0 when absent. */
static double time_total(const char *out)
{
    char *end;
    double v = strtod(out, &end);
    return end == out ? -1 : v;
}

/* What row 9c's child needs: a sandbox, transparentTcp, its own PATH. */
struct transparent {
    const char *path_env; /* the child's PATH */
};

/* process/start of curl downloading url behind the proxy (its variables, or with t
 * transparent TCP in a sandbox) as params. */
static void proxy_params(char *out, size_t n, const char *id, const char *url,
                         const struct transparent *t)
{
    if (!t) {
        snprintf(out, n,
                 "{\"processId\":\"%s\",\"argv\":[\"/usr/bin/curl\",\"-s\",\"--noproxy\",\"\","
                 "\"-o\",\"/dev/null\",\"-w\",\"%%{time_total} %%{size_download}\",\"%s\"],"
                 "\"cwd\":\"file:///tmp\",\"env\":{\"PATH\":\"/usr/bin:/bin\"},\"tty\":false,"
                 "\"networkProxy\":{\"proxy\":{\"enabled\":true,\"enableSocks5\":false,"
                 "\"enableSocks5Udp\":false,\"allowUpstreamProxy\":false,"
                 "\"dangerouslyAllowAllUnixSockets\":false,\"mode\":\"full\","
                 "\"domains\":{\"127.0.0.1\":\"allow\"},\"allowLocalBinding\":true}}}",
                 id, url);
        return;
    }
    const char *host = url + 7; /* http://NAME.:PORT/... -> NAME */
    size_t hl = strcspn(host, ".:");
    snprintf(out, n,
             "{\"processId\":\"%s\",\"argv\":[\"/usr/bin/curl\",\"-s\",\"--noproxy\",\"*\","
             "\"-o\",\"/dev/null\",\"-w\",\"%%{time_total} %%{size_download}\",\"%s\"],"
             "\"cwd\":\"file:///tmp\",\"env\":{\"PATH\":\"%s\"},\"tty\":false,"
             "\"sandbox\":{\"permissions\":{\"type\":\"managed\",\"file_system\":{\"type\":"
             "\"restricted\",\"entries\":[{\"path\":{\"type\":\"special\",\"value\":"
             "{\"kind\":\"root\"}},\"access\":\"read\"}]},\"network\":\"restricted\"},"
             "\"cwd\":\"file:///tmp\",\"windowsSandboxLevel\":\"disabled\"},"
             "\"enforceManagedNetwork\":true,"
             "\"networkProxy\":{\"proxy\":{\"enabled\":true,\"enableSocks5\":true,"
             "\"transparentTcp\":true,\"enableSocks5Udp\":false,\"allowUpstreamProxy\":false,"
             "\"dangerouslyAllowAllUnixSockets\":false,\"mode\":\"full\","
             "\"domains\":{\"%.*s\":\"allow\"},\"allowLocalBinding\":true}}}",
             id, url, t->path_env, (int)hl, host);
}

/* One download by curl in a child behind the server's proxy: curl's time in ms, or a
 * failure. */
static struct cell proxy_one(struct server *s, const char *url, const struct transparent *tt)
{
    struct wsc c;
    struct cell out;
    if (!connect_server(s, &c, &out)) return out;
    double *t = xcalloc((size_t)O.runs, sizeof *t);
    char params[2048];
    char *text = xmalloc(4096);
    for (int r = 0; r < O.runs; r++) {
        char id[32];
        snprintf(id, sizeof id, "px%d", r);
        proxy_params(params, sizeof params, id, url, tt);
        wsc_request(&c, "process/start", params);
        size_t tl = 0;
        bool closed = false;
        while (!closed) {
            struct span m, p, v, pid, chunk;
            if (wsc_wait(&c, &m, TIMEOUT_MS) < 0) {
                out = failure("no process/closed");
                goto done;
            }
            if (js_get(m, "error", &v)) {
                out = failure("process/start failed: %.*s", (int)(v.n > 150 ? 150 : v.n), v.p);
                goto done;
            }
            if (!js_get(m, "method", &v) || !js_get(m, "params", &p) ||
                !js_get(p, "processId", &pid) || !js_str(pid, &pid) || !span_eq(pid, id))
                continue;
            if (span_eq(v, "\"process/closed\""))
                closed = true;
            else if (span_eq(v, "\"process/output\"") && js_get(p, "chunk", &chunk) &&
                     js_str(chunk, &chunk) && tl + base64_decoded_max(chunk.n) < 4000) {
                size_t got = 0;
                char e[64];
                if (base64_decode(chunk.p, chunk.n, (uint8_t *)text + tl, &got, e, sizeof e) == 0)
                    tl += got;
            }
        }
        text[tl] = '\0';
        double secs = time_total(text);
        char *sp = strchr(text, ' ');
        if (secs < 0 || !sp || strtoull(sp + 1, NULL, 10) != O.proxy_bytes) {
            out = failure("curl through the proxy printed \"%.60s\"", text);
            goto done;
        }
        t[r] = secs * 1e3;
    }
    out = stats(t, O.runs);
done:
    free(text);
    free(t);
    wsc_close(&c);
    return out;
}

/* The same curl, straight to the web server. */
static struct cell proxy_floor(const char *url)
{
    double *t = xcalloc((size_t)O.runs, sizeof *t);
    struct cell out;
    for (int r = 0; r < O.runs; r++) {
        char *argv[] = {"/usr/bin/curl",
                        "-s",
                        "--noproxy",
                        "*",
                        "-o",
                        "/dev/null",
                        "-w",
                        "%{time_total} %{size_download}",
                        (char *)url,
                        NULL};
        int p[2];
        if (pipe2(p, O_CLOEXEC) < 0) return failure("pipe");
        posix_spawn_file_actions_t fa;
        posix_spawn_file_actions_init(&fa);
        posix_spawn_file_actions_adddup2(&fa, p[1], 1);
        pid_t pid;
        int rc = posix_spawn(&pid, argv[0], &fa, NULL, argv, environ);
        posix_spawn_file_actions_destroy(&fa);
        close(p[1]);
        char text[128] = "";
        size_t n = 0;
        ssize_t k;
        while (n < sizeof text - 1 && (k = read(p[0], text + n, sizeof text - 1 - n)) > 0)
            n += (size_t)k;
        text[n] = '\0';
        close(p[0]);
        if (rc == 0) waitpid(pid, NULL, 0);
        double secs = time_total(text);
        char *sp = strchr(text, ' ');
        if (rc != 0 || secs < 0 || !sp || strtoull(sp + 1, NULL, 10) != O.proxy_bytes) {
            free(t);
            return failure("curl printed \"%.60s\"", text);
        }
        t[r] = secs * 1e3;
    }
    out = stats(t, O.runs);
    free(t);
    return out;
}

/* curl through the minimal relay of proxy_floor.c (row 9b's floor). */
static struct cell relay_floor(const char *url)
{
    int web_port = 0, relay_port = 0;
    if (sscanf(url, "http://127.0.0.1:%d/", &web_port) != 1) return failure("url %s", url);
    pid_t relay = proxy_floor_start(web_port, &relay_port);
    if (relay < 0) return failure("the minimal relay did not start");
    char rurl[128];
    snprintf(rurl, sizeof rurl, "http://127.0.0.1:%d%s", relay_port, strstr(url + 7, "/"));
    struct cell c = proxy_floor(rurl);
    kill(relay, SIGKILL);
    waitpid(relay, NULL, 0);
    return c;
}

/* An alias of 127.0.0.1 in /etc/hosts (a name without a dot), into out; false when
 * there is none. */
static bool loopback_alias(char *out, size_t n)
{
    FILE *f = fopen("/etc/hosts", "r");
    char line[512];
    bool found = false;
    while (f && !found && fgets(line, sizeof line, f)) {
        char *save, *addr = strtok_r(line, " \t\n", &save);
        if (!addr || strcmp(addr, "127.0.0.1") != 0) continue;
        for (char *name; !found && (name = strtok_r(NULL, " \t\n", &save));)
            if (name[0] != '#' && !strchr(name, '.') && strcmp(name, "localhost") != 0) {
                snprintf(out, n, "%s", name);
                found = true;
            }
    }
    if (f) fclose(f);
    return found;
}

/* Row 9c: the same download through transparent TCP, against row 9 (ours) as its
 * floor; the reference is codex 0.171.0 (row9 gives the URL's port and path). */
static void transparent_row(const char *url, struct row *row9)
{
    char name[112], host[64], turl[192];
    if (access("/dev/net/tun", F_OK) != 0) {
        progress("9c skipped: no /dev/net/tun on this host");
        return;
    }
    snprintf(name, sizeof name,
             "9c. %zu MiB download through transparent TCP (ms; floor: row 9, proxy variables)",
             O.proxy_bytes >> 20);
    struct row *r = row_get(name, K_MS);
    progress("%s", name);
    r->has_floor = true;
    r->floor = row9->v[0];
    bool alias = loopback_alias(host, sizeof host);
    if (!alias) {
        snprintf(host, sizeof host, "bench-web.test");
        setenv("EXEC_SERVER_TEST_RESOLVE", "bench-web.test=127.0.0.1", 1);
    }
    snprintf(turl, sizeof turl, "http://%s.%s", host, strchr(url + 7, ':'));
    struct transparent ours = {.path_env = "/usr/bin:/bin"};
    struct server s;
    if (start_or_fail(&s, 0, &r, 1)) {
        record(r, 0, proxy_one(&s, turl, &ours));
        server_stop(&s);
    }
    if (!have_ref()) return;
    if (!O.ref171 || !alias) {
        record(r, 1,
               failure(!O.ref171 ? "no codex 0.171.0 (--ref171)"
                                 : "no /etc/hosts alias of 127.0.0.1 for its name"));
        return;
    }
    /* its launcher wants bubblewrap on the child's PATH: the one it ships */
    char path_env[PATH_MAX + 32];
    snprintf(path_env, sizeof path_env, "%s", O.ref171);
    char *bin = strrchr(path_env, '/');
    if (bin) *bin = '\0';
    bin = strrchr(path_env, '/');
    if (bin)
        snprintf(bin, sizeof path_env - (size_t)(bin - path_env), "/codex-resources:/usr/bin:/bin");
    struct transparent theirs = {.path_env = path_env};
    const char *saved = O.ref; /* server_start runs O.ref: 0.171.0 for this row only */
    O.ref = O.ref171;
    if (start_or_fail(&s, 1, &r, 1)) {
        record(r, 1, proxy_one(&s, turl, &theirs));
        server_stop(&s);
    }
    O.ref = saved;
}

/* Row 9 against a direct download, and row 9b (ours again) against the least any
 * proxy costs: the same download through a minimal relay. */
void scenario_proxy(void)
{
    char path[PATH_MAX + 48], name[96], url[128];
    pid_t web = serve_body("www-proxy", O.proxy_bytes, path, sizeof path, url, sizeof url);
    snprintf(name, sizeof name, "9. %zu MiB download through the network proxy (ms)",
             O.proxy_bytes >> 20);
    struct row *r = row_get(name, K_MS);
    progress("%s", name);
    r->has_floor = true;
    snprintf(name, sizeof name,
             "9b. %zu MiB download through the network proxy (ms; floor: a minimal relay)",
             O.proxy_bytes >> 20);
    struct row *rr = row_on("9b") ? row_get(name, K_MS) : NULL;
    r->floor = proxy_floor(url);
    if (rr) {
        rr->has_floor = true;
        rr->floor = relay_floor(url);
    }
    struct server s;
    for (int w = 0; w < nservers(); w++)
        if (start_or_fail(&s, w, &r, 1)) {
            struct cell c = proxy_one(&s, url, NULL);
            record(r, w, c);
            if (rr && w == 0) record(rr, w, c);
            server_stop(&s);
        }
    if (row_on("9c")) transparent_row(url, r);
    web_stop(web);
    unlink(path);
}
