/* relay_harness: a minimal remote-mode harness for the black-box tests, built on the
 * pure modules (noise_ik, relay_frame, relay_framing) with blocking sockets.
 *
 *   relay-harness --registry http://127.0.0.1:PORT --environment-id ID [--token T]
 *                 [--mode ok|wrong-key|foreign-prologue|unauthorized-key|
 *                         bad-authorization|tamper|replay] [--count-output]
 *
 * It asks the registry for a connect bundle (POST .../connect with a fresh harness
 * key), opens the rendezvous WebSocket, claims a new stream (resume{0}), sends Noise
 * msg 1 with the authorization and waits for msg 2. In mode ok it then bridges:
 * every stdin line is one JSON-RPC message sent encrypted, every message received is
 * printed as one stdout line. The other modes break one thing on purpose and expect
 * the executor to reset the stream. --count-output makes it the benchmarks' C sink:
 * process/output notifications are not printed but their bytes counted (from the
 * base64's length, without decoding), and {"counted":N} is printed before each
 * process/closed (N since the last one). Outcome on stderr: "RESULT open" once the
 * handshake completed, "RESULT reset" / "RESULT closed" when the stream ended.
 * Exit 0 after stdin EOF, 3 on reset, 4 on close, 2 on a setup error. Test code:
 * trusts the fake registry, http:// and ws:// only. */
#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <jansson.h>
#include <netdb.h>
#include <poll.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "crypto/noise_ik.h"
#include "crypto/random.h"
#include "proto/noise_key.h"
#include "proto/relay_frame.h"
#include "proto/relay_framing.h"
#include "remote/rv_ws.h"
#include "proto/base64.h"

static void die(const char *fmt, const char *arg)
{
    fprintf(stderr, "relay-harness: ");
    fprintf(stderr, fmt, arg);
    fprintf(stderr, "\n");
    exit(2);
}

static int tcp_connect(const char *host, int port)
{
    char ps[8];
    snprintf(ps, sizeof ps, "%d", port);
    struct addrinfo hints = {.ai_socktype = SOCK_STREAM}, *res;
    if (getaddrinfo(host, ps, &hints, &res) != 0) die("cannot resolve %s", host);
    int fd = socket(res->ai_family, SOCK_STREAM, 0);
    if (fd < 0 || connect(fd, res->ai_addr, res->ai_addrlen) < 0) die("cannot connect to %s", host);
    freeaddrinfo(res);
    return fd;
}

static void write_all(int fd, const void *p, size_t n)
{
    const char *c = p;
    while (n) {
        ssize_t k = send(fd, c, n, MSG_NOSIGNAL);
        if (k <= 0) {
            if (k < 0 && errno == EINTR) continue;
            fprintf(stderr, "RESULT closed\n");
            exit(4);
        }
        c += k;
        n -= (size_t)k;
    }
}

/* POST body to url (http://host:port/path); returns the response body (malloc'd). */
static char *http_post(const char *url, const char *token, const char *body, int *status)
{
    struct rv_ws_url u;
    char wsurl[4200];
    if (strncmp(url, "http://", 7) != 0) die("only http:// registries: %s", url);
    snprintf(wsurl, sizeof wsurl, "ws://%s", url + 7);
    if (rv_ws_parse_url(wsurl, &u) < 0) die("bad url %s", url);
    int fd = tcp_connect(u.host, u.port);
    char head[8192];
    int n = snprintf(head, sizeof head,
                     "POST %s HTTP/1.1\r\nHost: %s:%d\r\nContent-Type: application/json\r\n"
                     "Content-Length: %zu\r\nConnection: close\r\n%s%s%s\r\n",
                     u.target, u.host, u.port, strlen(body), token ? "Authorization: Bearer " : "",
                     token ? token : "", token ? "\r\n" : "");
    write_all(fd, head, (size_t)n);
    write_all(fd, body, strlen(body));
    size_t cap = 65536, len = 0;
    char *resp = malloc(cap);
    for (;;) {
        if (len + 4096 > cap) resp = realloc(resp, cap *= 2);
        ssize_t k = recv(fd, resp + len, cap - len - 1, 0);
        if (k <= 0) break;
        len += (size_t)k;
    }
    close(fd);
    resp[len] = '\0';
    *status = len > 12 ? atoi(resp + 9) : 0;
    char *b = strstr(resp, "\r\n\r\n");
    char *out = strdup(b ? b + 4 : "");
    free(resp);
    return out;
}

/* ---- WebSocket client (blocking) ---- */

static int ws_fd;
static uint8_t *rbuf;
static size_t rlen, rcap, rpos; /* rbuf[rpos..rlen) is not taken yet */

static void ws_send(int opcode, const uint8_t *p, size_t n)
{
    uint8_t h[14];
    size_t hl = 2;
    h[0] = (uint8_t)(0x80 | opcode);
    if (n < 126) {
        h[1] = (uint8_t)(0x80 | n);
    } else if (n < 65536) {
        h[1] = 0x80 | 126;
        h[2] = (uint8_t)(n >> 8);
        h[3] = (uint8_t)n;
        hl = 4;
    } else {
        h[1] = 0x80 | 127;
        for (int i = 0; i < 8; i++)
            h[2 + i] = (uint8_t)((uint64_t)n >> (56 - 8 * i));
        hl = 10;
    }
    uint8_t key[4];
    crypto_random_bytes(key, sizeof key);
    memcpy(h + hl, key, 4);
    hl += 4;
    uint8_t *m = malloc(hl + n);
    memcpy(m, h, hl);
    for (size_t i = 0; i < n; i++)
        m[hl + i] = p[i] ^ key[i & 3];
    write_all(ws_fd, m, hl + n);
    free(m);
}

static bool fill(void)
{
    if (rpos) { /* what was taken goes now, not a frame at a time */
        memmove(rbuf, rbuf + rpos, rlen - rpos);
        rlen -= rpos;
        rpos = 0;
    }
    /* 256 KiB a read: a C sink of the benchmarks takes a stream in a few reads. */
    if (rlen + (256 << 10) > rcap) rbuf = realloc(rbuf, rcap = rlen + (512 << 10));
    ssize_t k = recv(ws_fd, rbuf + rlen, rcap - rlen, 0);
    if (k <= 0) return false;
    rlen += (size_t)k;
    return true;
}

/* Takes the next whole binary message out of the buffer, in place (*out valid until
 * the next fill): 1, 0 when more bytes are needed, -1 on a close frame. Answers
 * pings. */
static int ws_next_view(uint8_t **out, size_t *out_len)
{
    for (;;) {
        uint8_t *b = rbuf + rpos;
        size_t have = rlen - rpos;
        if (have < 2) return 0;
        size_t hl = 2;
        uint64_t n = b[1] & 0x7f;
        if (n == 126) {
            if (have < 4) return 0;
            n = (uint64_t)b[2] << 8 | b[3];
            hl = 4;
        } else if (n == 127) {
            if (have < 10) return 0;
            n = 0;
            for (int i = 0; i < 8; i++)
                n = n << 8 | b[2 + i];
            hl = 10;
        }
        if (have < hl + n) return 0;
        int op = b[0] & 0x0f;
        rpos += hl + n;
        if (op == 2) {
            *out = b + hl;
            *out_len = n;
            return 1;
        }
        if (op == 9) ws_send(10, b + hl, n);
        if (op == 8) return -1;
    }
}

/* The same into *out (malloc'd). */
static int ws_next(uint8_t **out, size_t *out_len)
{
    uint8_t *p;
    int r = ws_next_view(&p, out_len);
    if (r == 1) {
        *out = malloc(*out_len ? *out_len : 1);
        memcpy(*out, p, *out_len);
    }
    return r;
}

/* Blocking: the next binary message; false when the socket ended. */
static bool ws_recv(uint8_t **out, size_t *out_len)
{
    for (;;) {
        int r = ws_next(out, out_len);
        if (r != 0) return r > 0;
        if (!fill()) return false;
    }
}

static void ws_open(const char *url)
{
    struct rv_ws_url u;
    if (rv_ws_parse_url(url, &u) < 0 || u.tls) die("bad rendezvous url %s", "(redacted)");
    ws_fd = tcp_connect(u.host, u.port);
    char req[8192];
    int n = snprintf(req, sizeof req,
                     "GET %s HTTP/1.1\r\nHost: %s:%d\r\nUpgrade: websocket\r\nConnection: "
                     "Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
                     "Sec-WebSocket-Version: 13\r\n\r\n",
                     u.target, u.host, u.port);
    write_all(ws_fd, req, (size_t)n);
    for (;;) {
        if (!fill()) die("%s", "rendezvous closed during the upgrade");
        uint8_t *e = memmem(rbuf, rlen, "\r\n\r\n", 4);
        if (!e) continue;
        if (memcmp(rbuf, "HTTP/1.1 101", 12) != 0) die("%s", "rendezvous refused the upgrade");
        size_t hl = (size_t)(e + 4 - rbuf);
        memmove(rbuf, rbuf + hl, rlen - hl);
        rlen -= hl;
        return;
    }
}

/* ---- relay ---- */

static char stream_id[40];
static uint32_t send_seq;

static void send_frame(struct relay_frame *f)
{
    f->version = RELAY_FRAME_VERSION;
    f->stream_id.ptr = stream_id;
    f->stream_id.len = strlen(stream_id);
    uint8_t *out;
    size_t n;
    if (relay_frame_encode_alloc(f, &out, &n) < 0) die("%s", "cannot encode a frame");
    ws_send(2, out, n);
    free(out);
}

/* Encrypts and sends one message; tamper flips a bit of the first record; replay
 * sends the first record a second time under the next seq. */
static void send_message(struct noise_ik_transport *tx, const char *msg, size_t len, bool tamper,
                         bool replay)
{
    struct relay_framer fr;
    if (relay_framer_init(&fr, msg, len) < 0) return;
    struct relay_chunk ch;
    static uint8_t pt[RELAY_RECORD_PLAINTEXT_MAX], ct[NOISE_IK_MAX_MESSAGE];
    bool first = true;
    while (relay_framer_next(&fr, &ch)) {
        memcpy(pt, ch.head, ch.head_len);
        memcpy(pt + ch.head_len, ch.body, ch.body_len);
        size_t n;
        noise_ik_transport_encrypt(tx, pt, ch.head_len + ch.body_len, ct, sizeof ct, &n);
        if (first && tamper) ct[n / 2] ^= 0x01;
        struct relay_frame f = {
            .body = RELAY_BODY_DATA, .seq = send_seq++, .payload = ct, .payload_len = n};
        send_frame(&f);
        if (first && replay) {
            f.seq = send_seq++;
            send_frame(&f);
        }
        first = false;
    }
}

/* Decodes a frame and tells whether it is for our stream; a reset for it ends the
 * program (exit 3) after saying so. */
static bool own_frame(const uint8_t *msg, size_t n, struct relay_frame *in)
{
    bool mine = relay_frame_decode(msg, n, in) == 0 && in->stream_id.len == strlen(stream_id) &&
                memcmp(in->stream_id.ptr, stream_id, in->stream_id.len) == 0;
    if (mine && in->body == RELAY_BODY_RESET) {
        fprintf(stderr, "RESULT reset %.*s\n", (int)in->reason.len, in->reason.ptr);
        exit(3);
    }
    return mine;
}

/* Blocking: the next frame for our stream (*msg owns its bytes); exit 4 when the
 * socket ends. */
static void next_own_frame(struct relay_frame *in, uint8_t **msg)
{
    for (;;) {
        size_t n;
        if (!ws_recv(msg, &n)) {
            fprintf(stderr, "RESULT closed\n");
            exit(4);
        }
        if (own_frame(*msg, n, in)) return;
        free(*msg);
    }
}

static int print_message(void *ctx, const uint8_t *msg, size_t len)
{
    fwrite(msg, 1, len, stdout);
    fputc('\n', stdout);
    fflush(stdout);
    return 0;
}

/* --count-output: process/output counted, not printed. */
static uint64_t counted;

static bool starts_with(const uint8_t *msg, size_t len, const char *lit)
{
    size_t n = strlen(lit);
    return len >= n && memcmp(msg, lit, n) == 0;
}

static int count_message(void *ctx, const uint8_t *msg, size_t len)
{
    if (starts_with(msg, len, "{\"method\":\"process/output\",")) {
        const uint8_t *c = memmem(msg, len, "\"chunk\":\"", 9);
        const uint8_t *q = c ? memchr(c + 9, '"', (size_t)(msg + len - c - 9)) : NULL;
        if (q) {
            size_t b = (size_t)(q - c - 9), n = b / 4 * 3;
            n -= b >= 1 && q[-1] == '=';
            n -= b >= 2 && q[-2] == '=';
            counted += n;
            return 0;
        }
    }
    if (starts_with(msg, len, "{\"method\":\"process/closed\",")) {
        printf("{\"counted\":%llu}\n", (unsigned long long)counted);
        counted = 0;
    }
    return print_message(ctx, msg, len);
}

static void uuid4(char out[37])
{
    uint8_t r[16];
    crypto_random_bytes(r, sizeof r);
    r[6] = (r[6] & 0x0f) | 0x40;
    r[8] = (r[8] & 0x3f) | 0x80;
    char *p = out;
    for (int i = 0; i < 16; i++) {
        p += sprintf(p, "%02x", r[i]);
        if (i == 3 || i == 5 || i == 7 || i == 9) *p++ = '-';
    }
}

/* Mode ok, once open: stdin lines out as messages, every message in to on_msg, until
 * stdin ends (0) or the socket does (4). */
static int bridge(struct noise_ik_transport *tx, struct relay_reasm *reasm,
                  relay_reasm_msg_fn on_msg)
{
    char *line = NULL;
    size_t lcap = 0, llen = 0;
    bool stdin_open = true;
    uint32_t recv_seq = 0;
    static uint8_t plain[NOISE_IK_MAX_MESSAGE];
    for (;;) {
        struct pollfd pf[2] = {{.fd = ws_fd, .events = POLLIN}, {.fd = 0, .events = POLLIN}};
        if (poll(pf, stdin_open ? 2 : 1, 30000) <= 0) continue;
        if (stdin_open && (pf[1].revents & (POLLIN | POLLHUP))) {
            /* Own line buffer: stdio's would hide buffered lines from poll. */
            if (llen + 65536 > lcap) line = realloc(line, lcap = lcap * 2 + 65536);
            ssize_t k = read(0, line + llen, lcap - llen);
            if (k <= 0) break;
            llen += (size_t)k;
            char *nl;
            while ((nl = memchr(line, '\n', llen))) {
                size_t ln = (size_t)(nl - line);
                if (ln) send_message(tx, line, ln, false, false);
                memmove(line, nl + 1, llen - ln - 1);
                llen -= ln + 1;
            }
        }
        if (!(pf[0].revents & (POLLIN | POLLHUP | POLLERR))) continue;
        if (!fill()) {
            fprintf(stderr, "RESULT closed\n");
            return 4;
        }
        uint8_t *msg;
        size_t n;
        int r;
        while ((r = ws_next_view(&msg, &n)) == 1) {
            struct relay_frame in;
            if (own_frame(msg, n, &in)) {
                if (in.body == RELAY_BODY_DATA) {
                    size_t pn;
                    if (in.seq != recv_seq++ ||
                        noise_ik_transport_decrypt(tx, in.payload, in.payload_len, plain,
                                                   sizeof plain, &pn) < 0 ||
                        relay_reasm_push(reasm, plain, pn, on_msg, NULL) < 0)
                        die("%s", "a record from the executor does not decrypt in order");
                }
            }
        }
        if (r < 0) {
            fprintf(stderr, "RESULT closed\n");
            return 4;
        }
    }
    free(line);
    return 0;
}

int main(int argc, char **argv)
{
    const char *registry = NULL, *env = NULL, *token = NULL, *mode = "ok";
    relay_reasm_msg_fn on_msg = print_message;
    static const struct option longs[] = {
        {"registry", required_argument, 0, 'r'}, {"environment-id", required_argument, 0, 'e'},
        {"token", required_argument, 0, 't'},    {"mode", required_argument, 0, 'm'},
        {"count-output", no_argument, 0, 'c'},   {0, 0, 0, 0},
    };
    int ch;
    while ((ch = getopt_long(argc, argv, "", longs, NULL)) != -1) {
        if (ch == 'r')
            registry = optarg;
        else if (ch == 'e')
            env = optarg;
        else if (ch == 't')
            token = optarg;
        else if (ch == 'm')
            mode = optarg;
        else if (ch == 'c')
            on_msg = count_message;
        else
            return 2;
    }
    if (!registry || !env) die("%s", "--registry and --environment-id are required");

    struct noise_ik_static_key me, other;
    noise_ik_static_key_generate(&me, NULL, NULL);
    noise_ik_static_key_generate(&other, NULL, NULL);
    /* unauthorized-key: the registry authorizes `other`, the handshake uses `me`. */
    bool swap_key = strcmp(mode, "unauthorized-key") == 0;
    json_t *kj = noise_ik_public_key_to_json(swap_key ? &other.pub : &me.pub);
    json_t *body = json_pack("{s:o}", "harness_public_key", kj);
    char *bs = json_dumps(body, JSON_COMPACT);
    json_decref(body);
    char path[4096];
    snprintf(path, sizeof path, "%s/cloud/environment/%s/connect", registry, env);
    int status;
    char *resp = http_post(path, token, bs, &status);
    free(bs);
    json_t *bundle = json_loads(resp, 0, NULL);
    free(resp);
    const char *url = json_string_value(json_object_get(bundle, "url"));
    const char *reg = json_string_value(json_object_get(bundle, "executor_registration_id"));
    const char *auth = json_string_value(json_object_get(bundle, "harness_key_authorization"));
    struct noise_ik_public_key exec_key;
    if (status != 200 || !url || !reg || !auth ||
        noise_ik_public_key_from_json(json_object_get(bundle, "executor_public_key"), &exec_key) <
            0) {
        fprintf(stderr, "relay-harness: /connect failed with HTTP status %d\n", status);
        return 2;
    }
    if (strcmp(mode, "wrong-key") == 0) exec_key = other.pub; /* pin a key the executor lacks */
    if (strcmp(mode, "bad-authorization") == 0) auth = "hka-not-issued-by-the-registry";

    uuid4(stream_id);
    ws_open(url);
    struct relay_frame f = {.body = RELAY_BODY_RESUME};
    send_frame(&f);
    size_t plen;
    uint8_t *prologue = noise_ik_prologue(strcmp(mode, "foreign-prologue") == 0 ? "other-env" : env,
                                          reg, stream_id, &plen);
    struct noise_ik_handshake *hs;
    noise_ik_initiator_new(&hs, &me, &exec_key, prologue, plen, NULL, NULL);
    free(prologue);
    static uint8_t m1[NOISE_IK_MAX_MESSAGE];
    size_t m1n;
    if (noise_ik_write_message1(hs, (const uint8_t *)auth, strlen(auth), m1, sizeof m1, &m1n) < 0)
        die("%s", "cannot write msg 1");
    json_decref(bundle);
    f = (struct relay_frame){.body = RELAY_BODY_HANDSHAKE, .payload = m1, .payload_len = m1n};
    send_frame(&f);

    struct noise_ik_transport *tx = NULL;
    struct relay_reasm reasm;
    relay_reasm_init(&reasm);
    for (;;) {
        uint8_t *msg;
        struct relay_frame in;
        next_own_frame(&in, &msg);
        if (in.body == RELAY_BODY_HANDSHAKE) {
            if (noise_ik_read_message2(hs, in.payload, in.payload_len) < 0 ||
                noise_ik_transport_new(hs, &tx) < 0)
                die("%s", "msg 2 does not authenticate");
            free(msg);
            break;
        }
        free(msg);
    }
    noise_ik_handshake_free(hs);
    fprintf(stderr, "RESULT open\n");
    bool tamper = strcmp(mode, "tamper") == 0, replay = strcmp(mode, "replay") == 0;
    if (tamper || replay) {
        const char *init = "{\"id\":1,\"method\":\"initialize\",\"params\":{\"clientName\":\"t\"}}";
        send_message(tx, init, strlen(init), tamper, replay);
        /* The executor must reset the stream rather than answer. Only the reset or
         * the socket's end stop this wait (the test bounds it). */
        for (;;) {
            uint8_t *msg;
            struct relay_frame in;
            next_own_frame(&in, &msg);
            /* A replayed copy follows a genuine record, which may be answered first. */
            if (in.body == RELAY_BODY_DATA && !replay) {
                fprintf(stderr, "RESULT answered\n");
                return 5;
            }
            free(msg);
        }
    }

    int rc = bridge(tx, &reasm, on_msg);
    relay_reasm_free(&reasm);
    noise_ik_transport_free(tx);
    close(ws_fd);
    return rc;
}
