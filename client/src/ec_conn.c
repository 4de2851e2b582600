/* ec_conn: the physical connection under a client of libexecclient.
 *
 * One blocking TCP socket (optionally TLS) driven with poll(): URL parsing, connect
 * with a deadline, the HTTP upgrade (optional bearer token; the reply is checked by
 * proto/http_upgrade's response parser), masked frames out and raw bytes in. Message layers (plain
 * JSON-RPC, the remote relay) open, write and drop it through the ec_conn_* calls of ec_internal.h.
 * The bytes read become frames here (answering Ping and Close, and the keepalive's own Pings) and
 * each data message goes to the layer's on_ws_message. Every failure drops the connection so the
 * caller can resume. */
#include "ec_internal.h"

#include "crypto/random.h"
#include "proto/base64.h"
#include "proto/http_upgrade.h"
#include "util/mem.h"

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

/* ---- URL ----------------------------------------------------------------------- */

int ec_url_parse(const char *url, char **host, char **port, char **path, bool *tls, ec_error *err)
{
    if (!url || !*url)
        return ec_fail(err, EC_ERR_USAGE, 0, "no server URL (use --url or EXEC_SERVER_URL)");
    *tls = strncmp(url, "wss://", 6) == 0;
    if (strncmp(url, "ws://", 5) != 0 && !*tls)
        return ec_fail(err, EC_ERR_USAGE, 0,
                       "bad URL `%s`: expected ws://HOST:PORT or "
                       "wss://HOST:PORT",
                       url);
    const char *p = url + (*tls ? 6 : 5), *h0, *h1;
    if (*p == '[') {
        h0 = p + 1;
        h1 = strchr(h0, ']');
        if (!h1) return ec_fail(err, EC_ERR_USAGE, 0, "bad URL `%s`: unclosed [", url);
        p = h1 + 1;
    } else {
        h0 = p;
        while (*p && *p != ':' && *p != '/')
            p++;
        h1 = p;
    }
    if (h1 == h0) return ec_fail(err, EC_ERR_USAGE, 0, "bad URL `%s`: no host", url);
    const char *port0 = *tls ? "443" : "80";
    size_t port_len = *tls ? 3 : 2;
    if (*p == ':') {
        port0 = ++p;
        while (*p >= '0' && *p <= '9')
            p++;
        port_len = (size_t)(p - port0);
        if (port_len == 0 || port_len > 5 || atoi(port0) > 65535 || atoi(port0) == 0)
            return ec_fail(err, EC_ERR_USAGE, 0, "bad URL `%s`: bad port", url);
    }
    if (*p && *p != '/' && *p != '?')
        return ec_fail(err, EC_ERR_USAGE, 0, "bad URL `%s`: expected ws://HOST:PORT", url);
    *host = xstrndup(h0, (size_t)(h1 - h0));
    *port = xstrndup(port0, port_len);
    /* The request target: a query straight after the authority gets its "/". */
    size_t plen = strlen(p);
    *path = xmalloc(plen + 2);
    snprintf(*path, plen + 2, "%s%s", *p == '/' ? "" : "/", p);
    return 0;
}

/* ---- socket I/O ------------------------------------------------------------------ */

void ec_conn_drop(ec_client *c)
{
    if (c->fd >= 0 && c->ml->on_drop) c->ml->on_drop(c);
    if (c->ssl) {
        SSL_free(c->ssl);
        c->ssl = NULL;
    }
    if (c->fd >= 0) close(c->fd);
    c->fd = -1;
    c->rlen = 0;
    /* The reader is reset when the next connection opens, not here: a message it
     * handed out may still be in use by whoever dropped the connection. */
}

/* Sends all of buf before the deadline. On failure the connection is dropped. */
static int send_all(ec_client *c, const uint8_t *buf, size_t n, int64_t deadline, ec_error *err)
{
    while (n > 0) {
        if (c->fd < 0) return ec_fail(err, EC_ERR_TRANSPORT, 0, "connection lost");
        if (c->ssl) {
            int w = SSL_write(c->ssl, buf, (int)(n > INT32_MAX ? INT32_MAX : n));
            if (w > 0) {
                buf += w;
                n -= (size_t)w;
                continue;
            }
            int e = SSL_get_error(c->ssl, w);
            if (e == SSL_ERROR_WANT_WRITE || e == SSL_ERROR_WANT_READ) {
                struct pollfd pfd = {.fd = c->fd,
                                     .events = e == SSL_ERROR_WANT_READ ? POLLIN : POLLOUT};
                if (poll(&pfd, 1, ec_remaining(deadline)) == 0) {
                    ec_conn_drop(c);
                    return ec_fail(err, EC_ERR_TIMEOUT, 0, "timed out sending to the server");
                }
                continue;
            }
            ERR_clear_error();
            ec_conn_drop(c);
            return ec_fail(err, EC_ERR_TRANSPORT, 0, "connection lost (TLS)");
        }
        ssize_t w = send(c->fd, buf, n, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (w > 0) {
            buf += w;
            n -= (size_t)w;
            continue;
        }
        if (w < 0 && errno == EINTR) continue;
        if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            struct pollfd pfd = {.fd = c->fd, .events = POLLOUT};
            int r = poll(&pfd, 1, ec_remaining(deadline));
            if (r == 0) {
                ec_conn_drop(c); /* a half-sent frame cannot be resumed */
                return ec_fail(err, EC_ERR_TIMEOUT, 0, "timed out sending to the server");
            }
            continue;
        }
        int e = errno;
        ec_conn_drop(c);
        return ec_fail(err, EC_ERR_TRANSPORT, 0, "connection lost: %s", strerror(e));
    }
    return 0;
}

static int send_frame(ec_client *c, int opcode, const void *payload, size_t n, ec_error *err)
{
    uint8_t mask[4];
    crypto_random_bytes(mask, sizeof mask);
    c->wlen = 0;
    ec_ws_encode(&c->wbuf, &c->wlen, &c->wcap, opcode, payload, n, mask);
    int64_t deadline = ec_deadline(c->call_timeout_ms < 0 ? 60000 : c->call_timeout_ms);
    int rc = send_all(c, c->wbuf, c->wlen, deadline, err);
    if (c->wcap > (1u << 20)) { /* do not keep a huge scratch after a big upload */
        free(c->wbuf);
        c->wbuf = NULL;
        c->wcap = 0;
    }
    return rc;
}

static int resolve_and_connect(ec_client *c, int64_t deadline, ec_error *err)
{
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM};
    struct addrinfo *res = NULL;
    int g = getaddrinfo(c->host, c->port, &hints, &res);
    if (g != 0)
        return ec_fail(err, EC_ERR_TRANSPORT, 0, "cannot resolve %s: %s", c->host, gai_strerror(g));
    int last = ECONNREFUSED;
    bool timed_out = false;
    for (struct addrinfo *ai = res; ai; ai = ai->ai_next) {
        int fd =
            socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, ai->ai_protocol);
        if (fd < 0) {
            last = errno;
            continue;
        }
        int r = connect(fd, ai->ai_addr, ai->ai_addrlen);
        if (r < 0 && errno == EINPROGRESS) {
            struct pollfd pfd = {.fd = fd, .events = POLLOUT};
            int pr;
            do
                pr = poll(&pfd, 1, ec_remaining(deadline));
            while (pr < 0 && errno == EINTR);
            if (pr == 0) {
                timed_out = true;
                close(fd);
                continue;
            }
            int soerr = 0;
            socklen_t sl = sizeof soerr;
            getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &sl);
            r = soerr ? -1 : 0;
            errno = soerr;
        }
        if (r < 0) {
            last = errno;
            close(fd);
            continue;
        }
        int one = 1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        c->fd = fd;
        c->last_refused = false;
        c->last_rx_ms = ec_now_ms();
        freeaddrinfo(res);
        return 0;
    }
    freeaddrinfo(res);
    c->last_refused = !timed_out && last == ECONNREFUSED;
    if (timed_out)
        return ec_fail(err, EC_ERR_TIMEOUT, 0, "timed out connecting to %s:%s", c->host, c->port);
    return ec_fail(err, EC_ERR_TRANSPORT, 0, "cannot connect to %s:%s: %s", c->host, c->port,
                   strerror(last));
}

/* Reads whatever is available into rbuf. Returns bytes read, 0 on EAGAIN, -1 on EOF or
 * error (connection dropped). */
ssize_t ec_conn_read_some(ec_client *c)
{
    /* 256 KiB a read: a stream of output comes in a few large reads per pump. */
    if (c->rcap - c->rlen < 65536) {
        c->rcap = c->rcap ? c->rcap * 2 : 262144;
        c->rbuf = xrealloc(c->rbuf, c->rcap);
    }
    if (c->ssl) {
        /* Drain everything TLS has decrypted: plaintext left inside the SSL object
         * would not wake a poll() on the socket. */
        ssize_t total = 0;
        for (;;) {
            if (c->rcap - c->rlen < 16384) {
                c->rcap *= 2;
                c->rbuf = xrealloc(c->rbuf, c->rcap);
            }
            int r = SSL_read(c->ssl, c->rbuf + c->rlen, (int)(c->rcap - c->rlen));
            if (r > 0) {
                c->rlen += (size_t)r;
                total += r;
                c->last_rx_ms = ec_now_ms();
                continue;
            }
            int e = SSL_get_error(c->ssl, r);
            if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE) {
                c->rx_short = true;
                return total;
            }
            ERR_clear_error();
            if (total > 0) return total; /* report the data; the loss shows next time */
            ec_conn_drop(c);
            return -1;
        }
    }
    for (;;) {
        size_t room = c->rcap - c->rlen;
        ssize_t r = recv(c->fd, c->rbuf + c->rlen, room, MSG_DONTWAIT);
        if (r > 0) {
            c->rlen += (size_t)r;
            c->last_rx_ms = ec_now_ms();
            c->rx_short = (size_t)r < room;
            return r;
        }
        if (r < 0 && errno == EINTR) continue;
        if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return 0;
        ec_conn_drop(c);
        return -1;
    }
}

/* wss: TLS over the connected socket, the server's certificate checked against the
 * CA file (or the system store; SSL_CERT_FILE / SSL_CERT_DIR are honoured) and the
 * URL's host (a name or an IP address). */
static int tls_connect(ec_client *c, int64_t deadline, ec_error *err)
{
    if (!c->tls) return 0;
    if (!c->ssl_ctx) {
        c->ssl_ctx = SSL_CTX_new(TLS_client_method());
        SSL_CTX_set_min_proto_version(c->ssl_ctx, TLS1_2_VERSION);
        SSL_CTX_set_verify(c->ssl_ctx, SSL_VERIFY_PEER, NULL);
        bool ok = c->ca_file ? SSL_CTX_load_verify_locations(c->ssl_ctx, c->ca_file, NULL) == 1
                             : SSL_CTX_set_default_verify_paths(c->ssl_ctx) == 1;
        if (!ok) {
            ERR_clear_error();
            SSL_CTX_free(c->ssl_ctx);
            c->ssl_ctx = NULL;
            ec_conn_drop(c);
            return ec_fail(err, EC_ERR_USAGE, 0, "cannot load the CA file %s",
                           c->ca_file ? c->ca_file : "(system)");
        }
    }
    c->ssl = SSL_new(c->ssl_ctx);
    SSL_set_fd(c->ssl, c->fd);
    X509_VERIFY_PARAM *vp = SSL_get0_param(c->ssl);
    if (X509_VERIFY_PARAM_set1_ip_asc(vp, c->host) != 1) {
        SSL_set_tlsext_host_name(c->ssl, c->host);
        SSL_set1_host(c->ssl, c->host);
    }
    for (;;) {
        int r = SSL_connect(c->ssl);
        if (r == 1) return 0;
        int e = SSL_get_error(c->ssl, r);
        if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE) {
            struct pollfd pfd = {.fd = c->fd,
                                 .events = e == SSL_ERROR_WANT_READ ? POLLIN : POLLOUT};
            if (poll(&pfd, 1, ec_remaining(deadline)) == 0) {
                ec_conn_drop(c);
                return ec_fail(err, EC_ERR_TIMEOUT, 0, "timed out in the TLS handshake");
            }
            continue;
        }
        long vr = SSL_get_verify_result(c->ssl);
        unsigned long ee = ERR_get_error();
        char why[256];
        if (vr != X509_V_OK)
            snprintf(why, sizeof why, "certificate verify failed: %s",
                     X509_verify_cert_error_string(vr));
        else
            ERR_error_string_n(ee, why, sizeof why);
        ERR_clear_error();
        ec_conn_drop(c);
        return ec_fail(err, EC_ERR_TRANSPORT, 0, "TLS handshake with %s:%s failed: %s", c->host,
                       c->port, why);
    }
}

static int handshake(ec_client *c, int64_t deadline, ec_error *err)
{
    int trc = tls_connect(c, deadline, err);
    if (trc) return trc;
    uint8_t rnd[16];
    crypto_random_bytes(rnd, sizeof rnd);
    char key[25] = {0};
    base64_encode(rnd, sizeof rnd, key);
    char *req = NULL;
    size_t reqlen = 0;
    FILE *f = open_memstream(&req, &reqlen);
    fprintf(f,
            "GET %s HTTP/1.1\r\nHost: %s:%s\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
            "Sec-WebSocket-Key: %s\r\nSec-WebSocket-Version: 13\r\n",
            c->path, c->host, c->port, key);
    if (c->token) fprintf(f, "Authorization: Bearer %s\r\n", c->token);
    fputs("\r\n", f);
    fclose(f);
    int rc = send_all(c, (const uint8_t *)req, reqlen, deadline, err);
    free(req);
    if (rc) return rc;
    /* Read the response head; whatever follows it is already WebSocket data. */
    struct http_response_info info;
    enum http_response_outcome o = HTTP_RESPONSE_INCOMPLETE;
    while (o == HTTP_RESPONSE_INCOMPLETE) {
        struct pollfd pfd = {.fd = c->fd, .events = POLLIN};
        int pr = poll(&pfd, 1, ec_remaining(deadline));
        if (pr == 0) {
            ec_conn_drop(c);
            return ec_fail(err, EC_ERR_TIMEOUT, 0, "timed out waiting for the upgrade");
        }
        if (pr < 0 && errno == EINTR) continue;
        if (ec_conn_read_some(c) < 0)
            return ec_fail(err, EC_ERR_TRANSPORT, 0,
                           "server closed the connection during the upgrade");
        o = http_upgrade_response_parse((const char *)c->rbuf, c->rlen, key, &info);
    }
    if (o == HTTP_RESPONSE_BAD) {
        ec_conn_drop(c);
        return ec_fail(err, EC_ERR_PROTOCOL, 0, "%s", info.error);
    }
    if (o == HTTP_RESPONSE_REFUSED) {
        /* The server's reason, when its body came with the head (ours sends both in
         * one write): the first line, printable bytes only. */
        char reason[200] = "";
        size_t n = 0;
        for (size_t i = info.consumed; i < c->rlen && n + 1 < sizeof reason; i++) {
            unsigned char ch = c->rbuf[i];
            if (ch == '\r' || ch == '\n') break;
            if (ch >= 0x20 && ch < 0x7f) reason[n++] = (char)ch;
        }
        reason[n] = 0;
        char line[200];
        snprintf(line, sizeof line, "%.*s", (int)info.status_line_len, info.status_line);
        ec_conn_drop(c);
        return ec_fail(err, EC_ERR_TRANSPORT, info.status, "WebSocket upgrade refused: %s%s%s",
                       line, n ? ": " : "", reason);
    }
    memmove(c->rbuf, c->rbuf + info.consumed, c->rlen - info.consumed);
    c->rlen -= info.consumed;
    ws_reader_free(&c->rd);
    ws_reader_init(&c->rd, WS_ROLE_CLIENT, EC_MAX_MESSAGE, EC_MAX_MESSAGE);
    return 0;
}

/* ---- the shared connection, for message layers ------------------------------------- */

int ec_conn_set_url(ec_client *c, const char *url, ec_error *err)
{
    char *host, *port, *path;
    bool tls;
    int rc = ec_url_parse(url, &host, &port, &path, &tls, err);
    if (rc) return rc;
    free(c->host);
    free(c->port);
    free(c->path);
    c->host = host;
    c->port = port;
    c->path = path;
    c->tls = tls;
    return 0;
}

int ec_conn_open_ws(ec_client *c, int64_t deadline, ec_error *err)
{
    int rc = resolve_and_connect(c, deadline, err);
    if (rc == 0) rc = handshake(c, deadline, err);
    c->ping_sent = 0;
    c->ping_due = rc == 0 && c->keepalive_ms > 0 ? ec_now_ms() + c->keepalive_ms : 0;
    return rc;
}

int ec_conn_send_raw(ec_client *c, const void *buf, size_t n, ec_error *err)
{
    if (c->fd < 0) return ec_fail(err, EC_ERR_TRANSPORT, 0, "connection lost");
    int64_t deadline = ec_deadline(c->call_timeout_ms < 0 ? 60000 : c->call_timeout_ms);
    return send_all(c, buf, n, deadline, err);
}

int ec_conn_send_ws_inplace(ec_client *c, int opcode, uint8_t *payload, size_t n, ec_error *err)
{
    if (c->fd < 0) return ec_fail(err, EC_ERR_TRANSPORT, 0, "connection lost");
    uint8_t mask[4];
    crypto_random_bytes(mask, sizeof mask);
    size_t hl = ws_frame_header_len(n, true);
    ws_frame_encode(payload - hl, true, opcode, n, mask);
    ws_frame_unmask(payload, n, mask);
    int64_t deadline = ec_deadline(c->call_timeout_ms < 0 ? 60000 : c->call_timeout_ms);
    return send_all(c, payload - hl, hl + n, deadline, err);
}

int ec_conn_send_ws(ec_client *c, int opcode, const void *payload, size_t n, ec_error *err)
{
    if (c->fd < 0) return ec_fail(err, EC_ERR_TRANSPORT, 0, "connection lost");
    return send_frame(c, opcode, payload, n, err);
}

/* ---- input ------------------------------------------------------------------------ */

/* Hands the bytes in rbuf to the WebSocket reader (proto/ws_reader, the server's
 * own state machine in the client role) and acts on its events. Returns -1 when the
 * connection must be dropped (a violation, or a Close from the server). */
int ec_conn_handle_input(ec_client *c)
{
    if (c->ml->on_input) {
        int r = c->ml->on_input(c);
        if (r < 0) ec_conn_drop(c);
        return r;
    }
    size_t off = 0;
    int rc = 0;
    while (rc == 0 && c->fd >= 0 && off < c->rlen) {
        struct ws_event ev;
        off += ws_reader_feed(&c->rd, c->rbuf + off, c->rlen - off, &ev);
        switch (ev.kind) {
        case WS_EV_MESSAGE:
            if (c->ml->on_ws_message(c, ev.opcode, ev.data, ev.len) < 0) rc = -1;
            break;
        case WS_EV_PING: ec_conn_send_ws(c, WS_OP_PONG, ev.data, ev.len, NULL); break;
        case WS_EV_CLOSE:   /* echo the code and go */
        case WS_EV_ERROR: { /* or close with the reader's verdict */
            uint8_t code[2];
            ec_conn_send_ws(c, WS_OP_CLOSE, code, ws_close_payload(ev.code, code), NULL);
            rc = -1;
            break;
        }
        case WS_EV_PONG: /* the keep-alive's answer: the next Ping is due later */
            if (c->ping_sent) {
                c->ping_sent = 0;
                c->ping_due = ec_now_ms() + c->keepalive_ms;
            }
            break;
        case WS_EV_NONE: break;
        }
    }
    /* The reader keeps what it needs of a partial frame: rbuf starts over. */
    if (c->fd >= 0) c->rlen = 0;
    if (rc < 0) ec_conn_drop(c);
    return rc;
}

/* Keepalive (remote mode): a Ping every keepalive_ms, as the reference executor does
 * on its own rendezvous socket; none while one is unanswered, and the connection is
 * given up (then resumed) when a Ping has had no Pong for two intervals. Returns how
 * long the caller may wait before the next call is due (timeout_ms when sooner or
 * when there is no keepalive). */
int ec_conn_keepalive(ec_client *c, int timeout_ms)
{
    if (c->keepalive_ms <= 0 || c->fd < 0 || !c->ping_due) return timeout_ms;
    int64_t now = ec_now_ms();
    if (c->ping_sent && now - c->ping_sent >= 2 * (int64_t)c->keepalive_ms) {
        ec_conn_drop(c); /* the rendezvous path is dead: the caller resumes */
        return 0;
    }
    if (!c->ping_sent && now >= c->ping_due) {
        ec_conn_send_ws(c, WS_OP_PING, "", 0, NULL);
        c->ping_sent = now;
    }
    int64_t next = c->ping_sent ? c->ping_sent + 2 * (int64_t)c->keepalive_ms : c->ping_due;
    int64_t wait = next > now ? next - now : 0;
    return timeout_ms < 0 || wait < timeout_ms ? (int)wait : timeout_ms;
}

int ec_conn_read(ec_client *c, int timeout_ms, ec_error *err)
{
    if (c->fd < 0) return ec_fail(err, EC_ERR_TRANSPORT, 0, "connection lost");
    timeout_ms = ec_conn_keepalive(c, timeout_ms);
    if (c->fd < 0) return ec_fail(err, EC_ERR_TRANSPORT, 0, "connection lost");
    struct pollfd pfd = {.fd = c->fd, .events = POLLIN};
    int r = poll(&pfd, 1, timeout_ms);
    if (r > 0 && ec_conn_read_some(c) >= 0) ec_conn_handle_input(c);
    if (c->fd < 0) return ec_fail(err, EC_ERR_TRANSPORT, 0, "connection lost");
    return 0;
}
