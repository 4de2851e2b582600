/* wsc: minimal blocking WebSocket JSON-RPC client of the benchmark driver (see wsc.h). */
#include "wsc.h"

#include "proto/http_upgrade.h"
#include "proto/json_load.h"
#include "proto/ws_frame.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "util/mem.h"

/* Free space wanted before each recv(); the buffer starts at 4x this and grows. */
#define RECV_CHUNK (64u << 10)

double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* ------------------------------------------------------------------ JSON scan */

static const char *js_ws(const char *p, const char *e)
{
    while (p < e && (*p == ' ' || *p == '\n' || *p == '\r' || *p == '\t'))
        p++;
    return p;
}

static const char *js_skip(const char *p, const char *e)
{
    if (p >= e) return NULL;
    if (*p == '"') return json_load_string_end(p, e);
    if (*p == '{' || *p == '[') {
        int depth = 0;
        while (p < e) {
            char ch = *p;
            if (ch == '"') {
                p = json_load_string_end(p, e);
                if (!p) return NULL;
                continue;
            }
            if (ch == '{' || ch == '[')
                depth++;
            else if (ch == '}' || ch == ']') {
                if (--depth == 0) return p + 1;
            }
            p++;
        }
        return NULL;
    }
    while (p < e && *p != ',' && *p != '}' && *p != ']' && *p != ' ' && *p != '\n' && *p != '\r' &&
           *p != '\t')
        p++;
    return p;
}

bool js_get(struct span v, const char *key, struct span *out)
{
    const char *p = v.p, *e = v.p + v.n;
    size_t kl = strlen(key);
    p = js_ws(p, e);
    if (p >= e || *p != '{') return false;
    p++;
    for (;;) {
        p = js_ws(p, e);
        if (p >= e || *p == '}' || *p != '"') return false;
        const char *ks = p + 1;
        const char *ke = json_load_string_end(p, e);
        if (!ke) return false;
        p = js_ws(ke, e);
        if (p >= e || *p != ':') return false;
        p = js_ws(p + 1, e);
        const char *ve = js_skip(p, e);
        if (!ve) return false;
        if ((size_t)(ke - 1 - ks) == kl && memcmp(ks, key, kl) == 0) {
            out->p = p;
            out->n = (size_t)(ve - p);
            return true;
        }
        p = js_ws(ve, e);
        if (p < e && *p == ',')
            p++;
        else
            return false;
    }
}

bool js_str(struct span v, struct span *out)
{
    if (v.n < 2 || v.p[0] != '"') return false;
    out->p = v.p + 1;
    out->n = v.n - 2;
    return true;
}

bool js_u64(struct span v, uint64_t *out)
{
    if (v.n == 0 || v.n > 20) return false;
    uint64_t r = 0;
    for (size_t i = 0; i < v.n; i++) {
        if (v.p[i] < '0' || v.p[i] > '9') return false;
        r = r * 10 + (uint64_t)(v.p[i] - '0');
    }
    *out = r;
    return true;
}

bool js_i64(struct span v, int64_t *out)
{
    uint64_t u;
    if (v.n > 0 && v.p[0] == '-') {
        if (!js_u64((struct span){v.p + 1, v.n - 1}, &u)) return false;
        *out = -(int64_t)u;
        return true;
    }
    if (!js_u64(v, &u)) return false;
    *out = (int64_t)u;
    return true;
}

bool span_eq(struct span s, const char *lit)
{
    size_t n = strlen(lit);
    return s.n == n && memcmp(s.p, lit, n) == 0;
}

size_t span_count(struct span s, const char *lit)
{
    size_t n = strlen(lit), count = 0;
    const char *p = s.p, *e = s.p + s.n;
    while (p < e) {
        const char *q = memmem(p, (size_t)(e - p), lit, n);
        if (!q) break;
        count++;
        p = q + n;
    }
    return count;
}

/* ------------------------------------------------------------------ socket */

static int write_all_v(int fd, struct iovec *iov, int cnt)
{
    while (cnt > 0) {
        ssize_t w = writev(fd, iov, cnt);
        if (w < 0) {
            if (errno == EINTR) continue;
            return -errno;
        }
        size_t left = (size_t)w;
        while (cnt > 0 && left >= iov->iov_len) {
            left -= iov->iov_len;
            iov++;
            cnt--;
        }
        if (cnt > 0) {
            iov->iov_base = (char *)iov->iov_base + left;
            iov->iov_len -= left;
        }
    }
    return 0;
}

static int open_with(struct wsc *c, int port, size_t chunk)
{
    memset(c, 0, sizeof *c);
    c->next_id = 1;
    c->chunk = chunk;
    c->fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (c->fd < 0) return -errno;
    int one = 1;
    setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    int rc;
    if (connect(c->fd, (struct sockaddr *)&sa, sizeof sa) < 0) {
        rc = -errno;
        goto fail;
    }
    static const char req[] = "GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\n"
                              "Connection: Upgrade\r\nSec-WebSocket-Key: "
                              "dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n";
    struct iovec iov = {(void *)req, sizeof req - 1};
    rc = write_all_v(c->fd, &iov, 1);
    if (rc < 0) goto fail;
    c->cap = chunk * 4;
    c->buf = xmalloc(c->cap);
    /* Read the 101 response (proto/http_upgrade checks it); anything after the
     * blank line is already frames. */
    for (;;) {
        long r = wsc_fill(c);
        if (r < 0) {
            rc = (int)r;
            goto fail;
        }
        struct http_response_info info;
        enum http_response_outcome o =
            http_upgrade_response_parse(c->buf, c->end, "dGhlIHNhbXBsZSBub25jZQ==", &info);
        if (o == HTTP_RESPONSE_INCOMPLETE) continue;
        if (o != HTTP_RESPONSE_UPGRADED) {
            rc = -ECONNREFUSED;
            goto fail;
        }
        c->start = info.consumed;
        ws_reader_init(&c->rd, WS_ROLE_CLIENT, UINT64_MAX, SIZE_MAX);
        return 0;
    }
fail:
    wsc_close(c);
    return rc;
}

int wsc_open(struct wsc *c, int port)
{
    return open_with(c, port, RECV_CHUNK);
}

int wsc_open_small(struct wsc *c, int port)
{
    return open_with(c, port, 1024);
}

void wsc_attach(struct wsc *c, int fd)
{
    memset(c, 0, sizeof *c);
    c->next_id = 1;
    c->chunk = RECV_CHUNK;
    c->fd = fd;
    c->cap = RECV_CHUNK * 4;
    c->buf = xmalloc(c->cap);
    ws_reader_init(&c->rd, WS_ROLE_CLIENT, UINT64_MAX, SIZE_MAX);
}

void wsc_close(struct wsc *c)
{
    if (c->fd >= 0) close(c->fd);
    c->fd = -1;
    free(c->buf);
    c->buf = NULL;
    c->cap = c->start = c->end = 0;
    ws_reader_free(&c->rd);
}

long wsc_fill(struct wsc *c)
{
    if (c->start == c->end) {
        c->start = c->end = 0;
        /* The rest of a large frame goes straight into the reader's message
         * buffer (wsc_next feeds it from there): no copy on our side. */
        size_t room = 0;
        uint8_t *area = c->direct_n ? NULL : ws_reader_recv_area(&c->rd, &room);
        if (area) {
            for (;;) {
                ssize_t r = recv(c->fd, area, room, 0);
                if (r < 0 && errno == EINTR) continue;
                if (r < 0) return -errno;
                if (r == 0) return -EPIPE;
                c->direct = area;
                c->direct_n = (size_t)r;
                return r;
            }
        }
    }
    if (c->cap - c->end < c->chunk) {
        if (c->start > 0) {
            memmove(c->buf, c->buf + c->start, c->end - c->start);
            c->end -= c->start;
            c->start = 0;
        }
        if (c->cap - c->end < c->chunk) {
            c->cap *= 2;
            c->buf = xrealloc(c->buf, c->cap);
        }
    }
    for (;;) {
        ssize_t r = recv(c->fd, c->buf + c->end, c->cap - c->end, 0);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) return -errno;
        if (r == 0) return -EPIPE;
        c->end += (size_t)r;
        return r;
    }
}

static int send_frame(struct wsc *c, int opcode, bool fin, const struct iovec *iov, int iovcnt)
{
    size_t n = 0;
    for (int i = 0; i < iovcnt; i++)
        n += iov[i].iov_len;
    uint8_t h[WS_FRAME_MAX_HEADER];
    /* A zero masking key: legal, and XOR with it is the identity. */
    static const uint8_t zero_key[4];
    size_t hl = ws_frame_encode(h, fin, opcode, n, zero_key);
    struct iovec v[16];
    if (iovcnt > 15) return -EINVAL;
    v[0].iov_base = h;
    v[0].iov_len = hl;
    memcpy(v + 1, iov, sizeof *iov * (size_t)iovcnt);
    return write_all_v(c->fd, v, iovcnt + 1);
}

/* Frames above this go out as several fragments: servers drop frames over 16 MiB
 * (PROTOCOL.md 1.3) even when the whole message is within the 64 MiB limit. */
#define MAX_FRAME (8u << 20)

int wsc_sendv(struct wsc *c, const struct iovec *iov, int iovcnt)
{
    size_t total = 0;
    for (int i = 0; i < iovcnt; i++)
        total += iov[i].iov_len;
    if (total <= MAX_FRAME) return send_frame(c, 1, true, iov, iovcnt);
    /* Cut the pieces into MAX_FRAME slices: text frame, continuations, FIN last. */
    size_t off = 0;
    int i = 0;
    size_t in = 0; /* offset inside iov[i] */
    while (off < total) {
        struct iovec part[15];
        int np = 0;
        size_t want = total - off < MAX_FRAME ? total - off : MAX_FRAME, got = 0;
        while (got < want && np < 15) {
            size_t take = iov[i].iov_len - in;
            if (take > want - got) take = want - got;
            part[np].iov_base = (char *)iov[i].iov_base + in;
            part[np++].iov_len = take;
            got += take;
            in += take;
            if (in == iov[i].iov_len) {
                i++;
                in = 0;
            }
        }
        int rc = send_frame(c, off == 0 ? 1 : 0, off + got == total, part, np);
        if (rc < 0) return rc;
        off += got;
    }
    return 0;
}

int wsc_send(struct wsc *c, const char *p, size_t n)
{
    struct iovec iov = {(void *)p, n};
    return wsc_sendv(c, &iov, 1);
}

uint64_t wsc_request(struct wsc *c, const char *method, const char *params)
{
    uint64_t id = c->next_id++;
    char head[256];
    int hl = snprintf(head, sizeof head,
                      "{\"id\":%llu,\"method\":\"%s\",\"params\":", (unsigned long long)id, method);
    struct iovec iov[3] = {{head, (size_t)hl}, {(void *)params, strlen(params)}, {"}", 1}};
    if (wsc_sendv(c, iov, 3) < 0) return 0;
    return id;
}

int wsc_notify(struct wsc *c, const char *method, const char *params)
{
    char head[256];
    int hl = snprintf(head, sizeof head, "{\"method\":\"%s\",\"params\":", method);
    struct iovec iov[3] = {{head, (size_t)hl}, {(void *)params, strlen(params)}, {"}", 1}};
    return wsc_sendv(c, iov, 3);
}

int wsc_next(struct wsc *c, struct span *msg)
{
    while (c->direct_n || c->start < c->end) {
        struct ws_event ev;
        if (c->direct_n) {
            /* Bytes wsc_fill put into the reader's own area: one frame's, all taken. */
            size_t k = ws_reader_feed(&c->rd, c->direct, c->direct_n, &ev);
            c->direct += k;
            c->direct_n -= k;
        } else {
            c->start +=
                ws_reader_feed(&c->rd, (uint8_t *)c->buf + c->start, c->end - c->start, &ev);
        }
        switch (ev.kind) {
        case WS_EV_MESSAGE:
            msg->p = (const char *)ev.data;
            msg->n = ev.len;
            return 1;
        case WS_EV_PING: {
            struct iovec iov = {ev.data, ev.len};
            send_frame(c, WS_OP_PONG, true, &iov, 1);
            break;
        }
        case WS_EV_CLOSE: return -EPIPE;
        case WS_EV_ERROR: return -EPROTO;
        case WS_EV_PONG:
        case WS_EV_NONE: break;
        }
    }
    return 0;
}

int wsc_wait(struct wsc *c, struct span *msg, int timeout_ms)
{
    double deadline = now_s() + timeout_ms / 1000.0;
    for (;;) {
        int rc = wsc_next(c, msg);
        if (rc != 0) return rc;
        int left = (int)((deadline - now_s()) * 1000.0);
        if (left < 0) return -ETIMEDOUT;
        struct pollfd pfd = {.fd = c->fd, .events = POLLIN};
        int pr = poll(&pfd, 1, left);
        if (pr < 0 && errno == EINTR) continue;
        if (pr < 0) return -errno;
        if (pr == 0) return -ETIMEDOUT;
        long r = wsc_fill(c);
        if (r < 0) return (int)r;
    }
}

int wsc_await(struct wsc *c, uint64_t id, wsc_handler h, void *ud, struct span *result, char *err,
              size_t errlen, int timeout_ms)
{
    double deadline = now_s() + timeout_ms / 1000.0;
    for (;;) {
        struct span m, v;
        int left = (int)((deadline - now_s()) * 1000.0);
        int rc = wsc_wait(c, &m, left < 0 ? 0 : left);
        if (rc < 0) {
            snprintf(err, errlen, "%s", rc == -ETIMEDOUT ? "timed out" : strerror(-rc));
            return rc;
        }
        uint64_t got;
        /* Responses have an "id" and no "method"; notifications the reverse. */
        if (m.n > 0 && js_get(m, "id", &v) && js_u64(v, &got) && got == id) {
            if (js_get(m, "result", result)) return 0;
            struct span e, msgv;
            if (js_get(m, "error", &e) && js_get(e, "message", &msgv) && js_str(msgv, &v))
                snprintf(err, errlen, "%.*s", (int)v.n, v.p);
            else
                snprintf(err, errlen, "bad response");
            return -EPROTO;
        }
        if (h) h(ud, m);
    }
}

int wsc_call(struct wsc *c, const char *method, const char *params, wsc_handler h, void *ud,
             struct span *result, char *err, size_t errlen, int timeout_ms)
{
    uint64_t id = wsc_request(c, method, params);
    if (id == 0) {
        snprintf(err, errlen, "send failed");
        return -EPIPE;
    }
    return wsc_await(c, id, h, ud, result, err, errlen, timeout_ms);
}

int wsc_handshake(struct wsc *c, char *err, size_t errlen)
{
    struct span r;
    int rc = wsc_call(c, "initialize", "{\"clientName\":\"exec-bench\"}", NULL, NULL, &r, err,
                      errlen, 30000);
    if (rc < 0) return rc;
    rc = wsc_notify(c, "initialized", "{}");
    if (rc < 0) snprintf(err, errlen, "send failed");
    return rc;
}
