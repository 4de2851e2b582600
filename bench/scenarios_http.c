/* scenarios_http.c: scenario 8 of exec-bench, a streamed http/request download.
 *
 * A local `python3 -m http.server` serves a file of O.http_bytes; each server under
 * test downloads it with http/request {streamResponse:true} while the driver decodes
 * every http/request/bodyDelta and checks the byte count. The floor is `curl -o
 * /dev/null` of the same URL: the same HTTP work with no JSON-RPC in between. */
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

void scenario_http(void)
{
    char dir[PATH_MAX + 16], path[PATH_MAX + 32], name[96];
    snprintf(dir, sizeof dir, "%s/www", O.tmp);
    mkdir(dir, 0755);
    snprintf(path, sizeof path, "%s/body.bin", dir);
    make_file(path, O.http_bytes);
    /* The web server: python's, on a port it picks from the one we reserve. */
    int port = 0;
    {
        int fd = socket(AF_INET, SOCK_STREAM, 0);
        struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
        socklen_t al = sizeof a;
        bind(fd, (struct sockaddr *)&a, sizeof a);
        getsockname(fd, (struct sockaddr *)&a, &al);
        port = ntohs(a.sin_port);
        close(fd);
    }
    char portbuf[16];
    snprintf(portbuf, sizeof portbuf, "%d", port);
    char *py[] = {"/usr/bin/env", "python3", "-m", "http.server", "--bind", "127.0.0.1",
                  "--directory", dir, portbuf, NULL};
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
    posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
    pid_t web;
    if (posix_spawn(&web, py[0], &fa, NULL, py, environ) != 0) web = -1;
    posix_spawn_file_actions_destroy(&fa);
    char url[128];
    snprintf(url, sizeof url, "http://127.0.0.1:%d/body.bin", port);
    /* Wait until it answers. */
    for (int i = 0; i < 100; i++) {
        int fd = socket(AF_INET, SOCK_STREAM, 0);
        struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port),
                                .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
        int ok = connect(fd, (struct sockaddr *)&a, sizeof a) == 0;
        close(fd);
        if (ok) break;
        usleep(50000);
    }
    snprintf(name, sizeof name, "8. http/request streamed %zu MiB (ms)", O.http_bytes >> 20);
    struct row *r = row_get(name, K_MS);
    progress("%s", name);
    r->has_floor = true;
    char *curl_argv[] = {"/usr/bin/curl", "-s", "-o", "/dev/null", url, NULL};
    r->floor = cmd_floor(curl_argv, "/dev/null");
    struct server s;
    for (int w = 0; w < nservers(); w++)
        if (start_or_fail(&s, w, &r, 1)) {
            record(r, w, http_one(&s, url));
            server_stop(&s);
        }
    if (web > 0) {
        kill(web, SIGTERM);
        waitpid(web, NULL, 0);
    }
    unlink(path);
}
