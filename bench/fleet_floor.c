/* fleet-floor: the least a registry and rendezvous can be, as the floor of
 * bench/fleet_bench.py's rows (issue 37): one process, one thread, blocking sockets.
 *
 *   POST .../register   keeps the executor's key, answers a rendezvous URL
 *   POST .../connect    answers that URL, the key and a fixed authorization
 *   POST .../validate   {"valid":true}
 *   GET  ...?role=...   the executor's socket, then each harness socket in turn: every
 *                       frame is copied to the other side (unmasked, re-framed as a
 *                       server's), nothing is parsed, checked or routed; Pings get Pongs
 *
 * No tokens, no signatures, no database, no stream table, one harness at a time. It
 * prints `http://127.0.0.1:PORT` and serves until the executor's socket closes. */
#include <arpa/inet.h>
#include <errno.h>
#include <jansson.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include "proto/http_upgrade.h"
#include "proto/ws_frame.h"
#include "util/buf.h"

#define BUF (512 * 1024)

static int port;
static char *executor_key; /* JSON of the registered key */

/* Header and payload in one writev (one segment on the wire, as any relay would). */
static int write_frame(int fd, const uint8_t *h, size_t hl, const uint8_t *p, size_t n)
{
    struct iovec v[2] = {{(void *)h, hl}, {(void *)p, n}};
    size_t total = hl + n;
    while (total) {
        ssize_t w = writev(fd, v, 2);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return -1;
        total -= (size_t)w;
        for (int i = 0; i < 2 && w > 0; i++) {
            size_t k = (size_t)w < v[i].iov_len ? (size_t)w : v[i].iov_len;
            v[i].iov_base = (char *)v[i].iov_base + k;
            v[i].iov_len -= k;
            w -= (ssize_t)k;
        }
    }
    return 0;
}

static int write_all(int fd, const void *p, size_t n)
{
    const char *c = p;
    while (n) {
        ssize_t w = write(fd, c, n);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return -1;
        c += w;
        n -= (size_t)w;
    }
    return 0;
}

/* Reads one request (head + Content-Length body) into b; the head's length, or 0. */
static size_t read_request(int fd, struct buf *b, struct http_request_head *h, struct http_field *f,
                           size_t nf)
{
    char chunk[16384];
    for (;;) {
        if (b->len && http_request_scan(b->data, b->len, f, nf, h) == HTTP_SCAN_OK) {
            size_t cl = f[0].seen ? strtoul(f[0].value, NULL, 10) : 0;
            if (b->len >= h->consumed + cl) return h->consumed;
        }
        ssize_t n = read(fd, chunk, sizeof chunk);
        if (n <= 0) return 0;
        buf_append(b, chunk, (size_t)n);
    }
}

static void reply(int fd, const char *json)
{
    char head[256];
    int n = snprintf(head, sizeof head,
                     "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: "
                     "%zu\r\n\r\n",
                     strlen(json));
    write_all(fd, head, (size_t)n);
    write_all(fd, json, strlen(json));
}

static void answer_api(int fd, const struct http_request_head *h, const char *body, size_t n)
{
    char url[256], *out = NULL;
    snprintf(url, sizeof url, "ws://127.0.0.1:%d/rv?role=", port);
    json_t *doc = json_loadb(body, n, 0, NULL);
    const char *path = h->path;
    size_t pl = h->path_len;
    if (pl >= 9 && memcmp(path + pl - 9, "/register", 9) == 0) {
        free(executor_key);
        executor_key = json_dumps(json_object_get(doc, "executor_public_key"), JSON_COMPACT);
        out = json_dumps(json_pack("{s:s,s:s+,s:s,s:s}", "environment_id", "env-bench", "url", url,
                                   "environment", "security_profile", "noise_hybrid_ik_v1",
                                   "executor_registration_id", "reg-1"),
                         JSON_COMPACT);
    } else if (pl >= 8 && memcmp(path + pl - 8, "/connect", 8) == 0) {
        json_t *key = json_loads(executor_key ? executor_key : "{}", 0, NULL);
        out = json_dumps(json_pack("{s:s,s:s+,s:s,s:s,s:o,s:s}", "environment_id", "env-bench",
                                   "url", url, "harness", "security_profile", "noise_hybrid_ik_v1",
                                   "executor_registration_id", "reg-1", "executor_public_key", key,
                                   "harness_key_authorization", "floor-authorization"),
                         JSON_COMPACT);
    } else {
        out = strdup("{\"valid\":true}");
    }
    json_decref(doc);
    reply(fd, out);
    free(out);
}

/* One frame from buf[0..n) to `to` (unmasked, as a server's); the bytes used, or 0
 * when the frame is not whole yet; -1 on a close. */
static long pump_frame(uint8_t *buf, size_t n, int from, int to)
{
    struct ws_frame f;
    if (!ws_frame_decode(buf, n, &f) || n < f.header_len + f.payload_len) return 0;
    uint8_t *p = buf + f.header_len;
    size_t len = (size_t)f.payload_len;
    if (f.masked) ws_frame_unmask(p, len, f.mask);
    uint8_t h[WS_FRAME_MAX_HEADER];
    if (f.opcode == WS_OP_CLOSE) return -1;
    if (f.opcode == WS_OP_PING) {
        size_t hl = ws_frame_encode(h, true, WS_OP_PONG, len, NULL);
        write_frame(from, h, hl, p, len);
    } else if (f.opcode != WS_OP_PONG) {
        size_t hl = ws_frame_encode(h, f.fin, f.opcode, len, NULL);
        if (write_frame(to, h, hl, p, len) < 0) return -1;
    }
    return (long)(f.header_len + len);
}

static int serve(int fd, int *is_env);

/* Copies frames between the two sockets until one closes; 1 when the executor's did.
 * Requests on the listener (the executor's /validate) are answered in between. */
static int relay(int ls, int env, int harness, uint8_t *bufs[2], size_t fill[2])
{
    struct pollfd pf[3] = {{env, POLLIN, 0}, {harness, POLLIN, 0}, {ls, POLLIN, 0}};
    for (;;) {
        if (poll(pf, 3, -1) < 0 && errno != EINTR) return 1;
        if (pf[2].revents & POLLIN) {
            int c = accept(ls, NULL, NULL), is_env = 0;
            int s = c >= 0 ? serve(c, &is_env) : -1;
            if (s >= 0) close(s); /* one harness at a time */
        }
        for (int i = 0; i < 2; i++) {
            if (!(pf[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
            ssize_t r = read(pf[i].fd, bufs[i] + fill[i], BUF - fill[i]);
            if (r <= 0) return i == 0;
            fill[i] += (size_t)r;
            size_t off = 0;
            long used;
            while ((used = pump_frame(bufs[i] + off, fill[i] - off, pf[i].fd, pf[1 - i].fd)) > 0)
                off += (size_t)used;
            if (used < 0) return i == 0;
            memmove(bufs[i], bufs[i] + off, fill[i] - off);
            fill[i] -= off;
        }
    }
}

/* Answers one connection's request: the API, or an upgrade (returns the socket and
 * whether it is the executor's). Returns -1 when the socket was answered and closed. */
static int serve(int fd, int *is_env)
{
    struct buf b;
    buf_init(&b);
    struct http_request_head h;
    struct http_field f[2] = {{"content-length", false, NULL, 0},
                              {"sec-websocket-key", false, NULL, 0}};
    size_t head = read_request(fd, &b, &h, f, 2);
    int keep = -1;
    if (head && f[1].seen) {
        struct buf r;
        buf_init(&r);
        http_write_101(&r, f[1].value, f[1].len);
        write_all(fd, r.data, r.len);
        buf_free(&r);
        *is_env = memmem(h.query, h.query_len, "role=environment", 16) != NULL;
        keep = fd;
    } else if (head) {
        answer_api(fd, &h, b.data + head, b.len - head);
    }
    buf_free(&b);
    if (keep < 0) close(fd);
    return keep;
}

int main(void)
{
    int ls = socket(AF_INET, SOCK_STREAM, 0), one = 1;
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t al = sizeof a;
    if (ls < 0 || bind(ls, (struct sockaddr *)&a, sizeof a) < 0 || listen(ls, 64) < 0 ||
        getsockname(ls, (struct sockaddr *)&a, &al) < 0)
        return 1;
    port = ntohs(a.sin_port);
    printf("http://127.0.0.1:%d\n", port);
    fflush(stdout);
    uint8_t *bufs[2] = {malloc(BUF), malloc(BUF)};
    size_t fill[2] = {0, 0};
    int env = -1;
    for (;;) {
        int c = accept(ls, NULL, NULL);
        if (c < 0) continue;
        setsockopt(c, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        int is_env = 0, s = serve(c, &is_env);
        if (s < 0) continue;
        if (is_env) {
            env = s;
            continue;
        }
        fill[1] = 0;
        int ended = env >= 0 ? relay(ls, env, s, bufs, fill) : 0;
        close(s);
        if (ended) break;
    }
    return 0;
}
