/* Live tests of libexecclient against the real exec-server, over real sockets.
 *
 * Faults are injected by a small TCP proxy (a thread in this test) between the
 * client and the server: it forwards WebSocket frames and can drop one process/output
 * notification (a seq gap), cut the connection after a given notification or right
 * after forwarding a given client request, and refuse connections for a while. It
 * also counts the client's requests by method, so the tests can prove "zero
 * process/read" and "exactly one" at the wire.
 *
 * usage: test_ec_live PATH-TO-exec-server */
#include "ec_proto.h"
#include "execclient.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* ---- the server ------------------------------------------------------------------ */

static pid_t server_pid;
static char server_url[128];
static int server_port;

static void server_start(const char *bin)
{
    int pfd[2];
    if (pipe(pfd) != 0) abort();
    server_pid = fork();
    if (server_pid == 0) {
        dup2(pfd[1], 1);
        close(pfd[0]);
        close(pfd[1]);
        execl(bin, bin, "--listen", "ws://127.0.0.1:0", "--session-ttl", "2", (char *)NULL);
        _exit(127);
    }
    close(pfd[1]);
    FILE *f = fdopen(pfd[0], "r");
    if (!fgets(server_url, sizeof server_url, f)) {
        fprintf(stderr, "server did not print its URL\n");
        exit(1);
    }
    fclose(f);
    server_url[strcspn(server_url, "\r\n")] = 0;
    server_port = atoi(strrchr(server_url, ':') + 1);
}

static void server_stop(void)
{
    kill(server_pid, SIGTERM);
    int st;
    waitpid(server_pid, &st, 0);
}

/* ---- the fault-injecting proxy -------------------------------------------------- */

struct side {
    int fd;
    uint8_t *buf;
    size_t len, cap;
    bool upgraded; /* the HTTP head has gone through; frames follow */
};

struct pair {
    bool used;
    struct side cl, sv; /* bytes read from the client / from the server */
};

static struct proxy {
    pthread_mutex_t mu;
    int listen_fd;
    int port;
    bool stop;
    /* faults, each fires once */
    uint64_t drop_output_seq;      /* drop the server's process/output with this seq */
    uint64_t cut_after_output_seq; /* cut after forwarding the process/output with this seq */
    char cut_after_method[64];     /* cut right after forwarding this client request */
    int64_t refuse_until_ms;       /* close new connections until then */
    int64_t refuse_after_cut_ms;   /* when a cut fires, refuse for this long */
    bool drop_exited;              /* drop the first process/exited */
    bool strip_sandbox_denied;     /* re-send process/exited without sandboxDenied (old server) */
    char *rewrite;                 /* verdict 4: the text to send instead of the frame */
    bool fragment_outputs;         /* re-send process/output as 3 fragments + pings between */
    /* observations */
    int reads, starts, writes, initializes, connections, pongs;
    char client_head[2048]; /* the last HTTP upgrade request from the client */
    struct pair pairs[8];
} px = {.mu = PTHREAD_MUTEX_INITIALIZER};

static void side_free(struct side *s)
{
    if (s->fd >= 0) close(s->fd);
    free(s->buf);
    memset(s, 0, sizeof *s);
    s->fd = -1;
}

static void pair_cut(struct pair *p)
{
    side_free(&p->cl);
    side_free(&p->sv);
    p->used = false;
    if (px.refuse_after_cut_ms) {
        px.refuse_until_ms = now_ms() + px.refuse_after_cut_ms;
        px.refuse_after_cut_ms = 0;
    }
}

static int connect_server(void)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)server_port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(fd, (struct sockaddr *)&a, sizeof a) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

static bool send_all(int fd, const uint8_t *p, size_t n)
{
    while (n) {
        ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
        if (w <= 0) return false;
        p += w;
        n -= (size_t)w;
    }
    return true;
}

/* What to do with one whole frame: 0 forward, 1 drop, 2 forward then cut, 3 forward
 * fragmented (with pings between), 4 send px.rewrite instead. */
static int judge(bool from_client, const uint8_t *frame, const struct ws_frame *f)
{
    if (from_client && f->opcode == WS_OP_PONG && f->payload_len == 2) px.pongs++;
    if (f->opcode != WS_OP_TEXT && f->opcode != WS_OP_BINARY) return 0;
    size_t n = (size_t)f->payload_len;
    char *text = malloc(n + 1);
    memcpy(text, frame + f->header_len, n);
    if (f->masked) ws_frame_unmask((uint8_t *)text, n, f->mask);
    text[n] = 0;
    int verdict = 0;
    struct ec_msg m;
    if (ec_msg_parse(text, n, &m) == 0 && m.method) {
        if (from_client) {
            if (strcmp(m.method, "process/read") == 0) px.reads++;
            if (strcmp(m.method, "process/start") == 0) px.starts++;
            if (strcmp(m.method, "process/write") == 0) px.writes++;
            if (strcmp(m.method, "initialize") == 0) px.initializes++;
            if (px.cut_after_method[0] && strcmp(m.method, px.cut_after_method) == 0) {
                px.cut_after_method[0] = 0;
                verdict = 2;
            }
        } else if (strcmp(m.method, "process/exited") == 0 && px.drop_exited) {
            px.drop_exited = false;
            verdict = 1;
        } else if (strcmp(m.method, "process/exited") == 0 && px.strip_sandbox_denied) {
            json_object_del(m.params, "sandboxDenied");
            px.rewrite = json_dumps(m.root, JSON_COMPACT);
            verdict = 4;
        } else if (strcmp(m.method, "process/output") == 0) {
            uint64_t seq = (uint64_t)json_integer_value(json_object_get(m.params, "seq"));
            if (px.drop_output_seq && seq == px.drop_output_seq) {
                px.drop_output_seq = 0;
                verdict = 1;
            } else if (px.cut_after_output_seq && seq == px.cut_after_output_seq) {
                px.cut_after_output_seq = 0;
                verdict = 2;
            } else if (px.fragment_outputs && !f->masked) {
                verdict = 3;
            }
        }
    }
    ec_msg_clear(&m);
    free(text);
    return verdict;
}

/* Sends an unmasked (server-side) frame payload as three fragments with a Ping
 * between them, as RFC 6455 allows. */
static bool send_fragmented(int fd, int opcode, const uint8_t *payload, size_t n)
{
    uint8_t *out = NULL;
    size_t len = 0, cap = 0;
    size_t a = n / 3, b = 2 * n / 3;
    ec_ws_encode(&out, &len, &cap, opcode, payload, a, NULL);
    out[0] &= 0x7F; /* not FIN */
    size_t mark = len;
    ec_ws_encode(&out, &len, &cap, WS_OP_PING, "px", 2, NULL);
    ec_ws_encode(&out, &len, &cap, WS_OP_CONT, payload + a, b - a, NULL);
    out[mark + 4] &= 0x7F;
    ec_ws_encode(&out, &len, &cap, WS_OP_CONT, payload + b, n - b, NULL);
    bool ok = send_all(fd, out, len);
    free(out);
    return ok;
}

/* Moves complete units from `from` to `to`. Returns false when the pair was cut. */
static bool forward(struct pair *p, struct side *from, struct side *to, bool from_client)
{
    size_t off = 0;
    bool cut = false;
    if (!from->upgraded) {
        uint8_t *end = memmem(from->buf, from->len, "\r\n\r\n", 4);
        if (!end) return true;
        off = (size_t)(end - from->buf) + 4;
        if (from_client) {
            size_t k = off < sizeof px.client_head - 1 ? off : sizeof px.client_head - 1;
            memcpy(px.client_head, from->buf, k);
            px.client_head[k] = 0;
        }
        if (!send_all(to->fd, from->buf, off)) cut = true;
        from->upgraded = true;
    }
    while (!cut) {
        struct ws_frame f;
        /* A proxy cuts frames, not messages: the header tells where each ends. */
        if (ws_frame_decode(from->buf + off, from->len - off, &f) == 0) break;
        if (!ws_frame_valid(&f)) {
            cut = true;
            break;
        }
        if (from->len - off - f.header_len < f.payload_len) break;
        size_t total = f.header_len + (size_t)f.payload_len;
        int v = judge(from_client, from->buf + off, &f);
        if (v == 4) {
            uint8_t *out = NULL;
            size_t len = 0, cap = 0;
            ec_ws_encode(&out, &len, &cap, WS_OP_TEXT, px.rewrite, strlen(px.rewrite), NULL);
            if (!send_all(to->fd, out, len)) cut = true;
            free(out);
            free(px.rewrite);
            px.rewrite = NULL;
        } else if (v == 3) {
            if (!send_fragmented(to->fd, f.opcode, from->buf + off + f.header_len,
                                 (size_t)f.payload_len))
                cut = true;
        } else if (v != 1 && !send_all(to->fd, from->buf + off, total)) {
            cut = true;
        }
        off += total;
        if (v == 2) cut = true;
    }
    if (cut) {
        pair_cut(p);
        return false;
    }
    memmove(from->buf, from->buf + off, from->len - off);
    from->len -= off;
    return true;
}

static bool side_read(struct side *s)
{
    if (s->cap - s->len < 65536) {
        s->cap = s->cap ? s->cap * 2 : 131072;
        s->buf = realloc(s->buf, s->cap);
    }
    ssize_t r = recv(s->fd, s->buf + s->len, s->cap - s->len, 0);
    if (r <= 0) return false;
    s->len += (size_t)r;
    return true;
}

static void *proxy_main(void *arg)
{
    (void)arg;
    for (;;) {
        struct pollfd pfd[1 + 16];
        int n = 0;
        pthread_mutex_lock(&px.mu);
        if (px.stop) {
            pthread_mutex_unlock(&px.mu);
            break;
        }
        pfd[n++] = (struct pollfd){.fd = px.listen_fd, .events = POLLIN};
        for (int i = 0; i < 8; i++) {
            pfd[n++] =
                (struct pollfd){.fd = px.pairs[i].used ? px.pairs[i].cl.fd : -1, .events = POLLIN};
            pfd[n++] =
                (struct pollfd){.fd = px.pairs[i].used ? px.pairs[i].sv.fd : -1, .events = POLLIN};
        }
        pthread_mutex_unlock(&px.mu);
        if (poll(pfd, (nfds_t)n, 50) <= 0) continue;
        pthread_mutex_lock(&px.mu);
        if (pfd[0].revents & POLLIN) {
            int cfd = accept4(px.listen_fd, NULL, NULL, SOCK_CLOEXEC);
            if (cfd >= 0) {
                int sfd = now_ms() < px.refuse_until_ms ? -1 : connect_server();
                int slot = -1;
                for (int i = 0; i < 8 && slot < 0; i++)
                    if (!px.pairs[i].used) slot = i;
                if (sfd < 0 || slot < 0) {
                    close(cfd);
                    if (sfd >= 0) close(sfd);
                } else {
                    struct pair *p = &px.pairs[slot];
                    memset(p, 0, sizeof *p);
                    p->used = true;
                    p->cl.fd = cfd;
                    p->sv.fd = sfd;
                    px.connections++;
                }
            }
        }
        for (int i = 0; i < 8; i++) {
            struct pair *p = &px.pairs[i];
            short cr = pfd[1 + 2 * i].revents, sr = pfd[2 + 2 * i].revents;
            if (!p->used) continue;
            if (cr && pfd[1 + 2 * i].fd == p->cl.fd) {
                if (!side_read(&p->cl)) {
                    pair_cut(p);
                    continue;
                }
                if (!forward(p, &p->cl, &p->sv, true)) continue;
            }
            if (sr && pfd[2 + 2 * i].fd == p->sv.fd) {
                if (!side_read(&p->sv)) {
                    pair_cut(p);
                    continue;
                }
                forward(p, &p->sv, &p->cl, false);
            }
        }
        pthread_mutex_unlock(&px.mu);
    }
    return NULL;
}

static pthread_t proxy_thread;

static void proxy_start(void)
{
    px.listen_fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in a = {.sin_family = AF_INET};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    bind(px.listen_fd, (struct sockaddr *)&a, sizeof a);
    listen(px.listen_fd, 16);
    socklen_t al = sizeof a;
    getsockname(px.listen_fd, (struct sockaddr *)&a, &al);
    px.port = ntohs(a.sin_port);
    for (int i = 0; i < 8; i++)
        px.pairs[i].cl.fd = px.pairs[i].sv.fd = -1;
    pthread_create(&proxy_thread, NULL, proxy_main, NULL);
}

static void proxy_stop(void)
{
    pthread_mutex_lock(&px.mu);
    px.stop = true;
    pthread_mutex_unlock(&px.mu);
    pthread_join(proxy_thread, NULL);
    for (int i = 0; i < 8; i++)
        if (px.pairs[i].used) pair_cut(&px.pairs[i]);
    close(px.listen_fd);
}

/* Resets faults and counters between tests. */
static void proxy_reset(void)
{
    pthread_mutex_lock(&px.mu);
    px.drop_output_seq = px.cut_after_output_seq = 0;
    px.cut_after_method[0] = 0;
    px.refuse_until_ms = px.refuse_after_cut_ms = 0;
    px.fragment_outputs = px.drop_exited = px.strip_sandbox_denied = false;
    px.reads = px.starts = px.writes = px.initializes = px.connections = px.pongs = 0;
    px.client_head[0] = 0;
    pthread_mutex_unlock(&px.mu);
}

static int px_get(int *counter)
{
    pthread_mutex_lock(&px.mu);
    int v = *counter;
    pthread_mutex_unlock(&px.mu);
    return v;
}

/* ---- helpers ------------------------------------------------------------------- */

static ec_client *connect_via_proxy(int reconnect_ms)
{
    char url[64];
    snprintf(url, sizeof url, "ws://127.0.0.1:%d", px.port);
    ec_client_options o = {.url = url,
                           .client_name = "test_ec_live",
                           .reconnect_timeout_ms = reconnect_ms,
                           .call_timeout_ms = 30000};
    ec_client *c = NULL;
    ec_error e = {0};
    int rc = ec_client_connect(&o, &c, &e);
    if (rc != 0) {
        fprintf(stderr, "connect failed: %s\n", e.message);
        exit(1);
    }
    return c;
}

struct collected {
    char out[4096], err[4096];
    size_t out_len, err_len;
    int exit_code;
    int exits, closes, resyncs;
    int rc; /* 0 or the failing kind */
};

static const char *const test_env[] = {"PATH=/usr/bin:/bin", NULL};

static void collect(ec_process *p, struct collected *r, int timeout_ms)
{
    memset(r, 0, sizeof *r);
    r->exit_code = -1;
    int64_t deadline = now_ms() + timeout_ms;
    for (;;) {
        ec_event ev;
        ec_error e = {0};
        int left = (int)(deadline - now_ms());
        int rc = ec_process_next_event(p, left > 0 ? left : 0, &ev, &e);
        if (rc) {
            r->rc = rc;
            if (rc != -EC_ERR_SESSION_LOST) fprintf(stderr, "collect: %s\n", e.message);
            return;
        }
        switch (ev.type) {
        case EC_EVENT_OUTPUT: {
            bool is_err = ev.stream == EC_STREAM_STDERR;
            char *dst = is_err ? r->err : r->out;
            size_t *len = is_err ? &r->err_len : &r->out_len;
            if (*len + ev.len < 4095) {
                memcpy(dst + *len, ev.data, ev.len);
                *len += ev.len;
                dst[*len] = 0;
            }
            break;
        }
        case EC_EVENT_EXITED:
            r->exits++;
            r->exit_code = ev.exit_code;
            break;
        case EC_EVENT_CLOSED: r->closes++; return;
        case EC_EVENT_RESYNC: r->resyncs++; break;
        }
    }
}

static ec_process *start_sh(ec_client *c, const char *script)
{
    const char *argv[] = {"/bin/sh", "-c", script, NULL};
    ec_start_options so = {.argv = argv, .cwd = "/tmp", .env = test_env};
    ec_process *p = NULL;
    ec_error e = {0};
    if (ec_process_start(c, &so, &p, &e) != 0) fail_msg("start failed: %s", e.message);
    return p;
}

/* ---- tests -------------------------------------------------------------------- */

static void test_pushed_events_complete_with_zero_reads(void **state)
{
    proxy_reset();
    ec_client *c = connect_via_proxy(0);
    ec_process *p = start_sh(c, "echo one; echo two >&2; exit 3");
    struct collected r;
    collect(p, &r, 20000);
    assert_true(r.rc == 0);
    assert_true(strcmp(r.out, "one\n") == 0);
    assert_true(strcmp(r.err, "two\n") == 0);
    assert_true(r.exit_code == 3 && r.exits == 1 && r.closes == 1);
    ec_process_stats st;
    ec_process_get_stats(p, &st);
    assert_true(st.reads_sent == 0);
    assert_true(px_get(&px.reads) == 0);
    assert_true(ec_process_closed(p));
    ec_event ev;
    assert_true(ec_process_next_event(p, 0, &ev, NULL) == -EC_ERR_USAGE);
    ec_process_free(p);
    ec_client_close(c);
}

static void test_gap_recovered_with_exactly_one_read(void **state)
{
    proxy_reset();
    px.drop_output_seq = 2;
    ec_client *c = connect_via_proxy(0);
    ec_process *p = start_sh(c, "echo a; sleep 0.3; echo b; sleep 0.3; echo c; exit 5");
    struct collected r;
    collect(p, &r, 20000);
    assert_true(r.rc == 0);
    assert_true(strcmp(r.out, "a\nb\nc\n") == 0);
    assert_true(r.exit_code == 5 && r.exits == 1 && r.closes == 1);
    ec_process_stats st;
    ec_process_get_stats(p, &st);
    assert_true(st.gaps_detected == 1);
    assert_true(st.reads_sent == 1);
    assert_true(px_get(&px.reads) == 1);
    ec_process_free(p);
    ec_client_close(c);
}

/* A lost exit notification shows up as a seq gap at close: one read recovers it. */
static void test_lost_exit_recovered_with_one_read(void **state)
{
    proxy_reset();
    px.drop_exited = true;
    ec_client *c = connect_via_proxy(0);
    ec_process *p = start_sh(c, "echo x; exit 9");
    struct collected r;
    collect(p, &r, 20000);
    assert_true(r.rc == 0 && strcmp(r.out, "x\n") == 0);
    assert_true(r.exit_code == 9 && r.exits == 1 && r.closes == 1);
    ec_process_stats st;
    ec_process_get_stats(p, &st);
    assert_true(st.reads_sent == 1 && st.gaps_detected == 1);
    assert_true(px_get(&px.reads) == 1);
    ec_process_free(p);
    ec_client_close(c);
}

/* An exit without sandboxDenied (an older server) costs exactly one read. */
static void test_old_server_exit_costs_one_read(void **state)
{
    proxy_reset();
    px.strip_sandbox_denied = true;
    ec_client *c = connect_via_proxy(0);
    ec_process *p = start_sh(c, "echo y; exit 4");
    struct collected r;
    collect(p, &r, 20000);
    assert_true(r.rc == 0 && strcmp(r.out, "y\n") == 0);
    assert_true(r.exit_code == 4 && r.exits == 1 && r.closes == 1);
    ec_process_stats st;
    ec_process_get_stats(p, &st);
    assert_true(st.reads_sent == 1 && st.gaps_detected == 0);
    assert_true(px_get(&px.reads) == 1);
    ec_process_free(p);
    ec_client_close(c);
}

static void test_reconnect_mid_command(void **state)
{
    proxy_reset();
    px.cut_after_output_seq = 1;
    ec_client *c = connect_via_proxy(15000);
    char *sid = strdup(ec_client_session_id(c));
    ec_process *p = start_sh(c, "echo one; sleep 0.5; echo two; sleep 0.5; echo three");
    struct collected r;
    collect(p, &r, 30000);
    assert_true(r.rc == 0);
    assert_true(strcmp(r.out, "one\ntwo\nthree\n") == 0); /* complete, nothing twice */
    assert_true(r.exit_code == 0 && r.closes == 1);
    assert_true(r.resyncs == 1);
    assert_true(ec_client_reconnects(c) == 1);
    assert_true(strcmp(ec_client_session_id(c), sid) == 0);
    assert_true(px_get(&px.initializes) == 2);
    ec_process_stats st;
    ec_process_get_stats(p, &st);
    assert_true(st.resyncs == 1 && st.reads_sent == 1);
    /* The client keeps working on the resumed session. */
    ec_process *q = start_sh(c, "echo after");
    collect(q, &r, 20000);
    assert_true(strcmp(r.out, "after\n") == 0);
    ec_process_free(q);
    ec_process_free(p);
    free(sid);
    ec_client_close(c);
}

/* The server side goes away while the client is idle: the next call resumes first and
 * succeeds (nothing was in flight, so nothing fails). */
static void test_idle_drop_resumes_before_the_next_call(void **state)
{
    proxy_reset();
    ec_client *c = connect_via_proxy(15000);
    pthread_mutex_lock(&px.mu);
    for (int i = 0; i < 8; i++)
        if (px.pairs[i].used) pair_cut(&px.pairs[i]);
    pthread_mutex_unlock(&px.mu);
    /* The drop has reached the idle client: its socket reads the end. */
    struct pollfd pfd = {.fd = ec_client_fd(c), .events = POLLIN};
    assert_true(pfd.fd >= 0 && poll(&pfd, 1, 10000) == 1);
    ec_error e = {0};
    json_t *res = NULL;
    assert_true(ec_client_call(c, "environment/status", NULL, &res, &e) == 0);
    assert_true(json_is_string(json_object_get(res, "status")));
    json_decref(res);
    assert_true(ec_client_reconnects(c) == 1);
    ec_client_close(c);
}

static void test_start_in_flight_is_not_replayed(void **state)
{
    proxy_reset();
    snprintf(px.cut_after_method, sizeof px.cut_after_method, "process/start");
    ec_client *c = connect_via_proxy(15000);
    const char *argv[] = {"/bin/sh", "-c", "echo started", NULL};
    ec_start_options so = {.argv = argv, .cwd = "/tmp", .env = test_env, .process_id = "once"};
    ec_process *p = NULL;
    ec_error e = {0};
    int rc = ec_process_start(c, &so, &p, &e);
    assert_true(rc == -EC_ERR_TRANSPORT && e.kind == EC_ERR_TRANSPORT);
    assert_true(strstr(e.message, "not replayed") != NULL);
    assert_true(p == NULL);
    assert_true(px_get(&px.starts) == 1);
    /* The client resumed; the process that did start is visible under its id, and a
     * second start of the same id is the caller's decision: it says "already exists". */
    json_t *res = NULL;
    rc = ec_client_call(
        c, "process/read",
        json_pack("{s:s, s:i, s:i}", "processId", "once", "afterSeq", 0, "waitMs", 2000), &res, &e);
    assert_true(rc == 0);
    json_decref(res);
    assert_true(px_get(&px.starts) == 1);
    assert_true(ec_client_reconnects(c) == 1);
    ec_client_close(c);
}

static void test_write_retried_with_same_write_id(void **state)
{
    proxy_reset();
    ec_client *c = connect_via_proxy(15000);
    const char *argv[] = {"/bin/sh", "-c", "read x; echo got:$x; read y; echo got:$y", NULL};
    ec_start_options so = {.argv = argv, .cwd = "/tmp", .env = test_env, .pipe_stdin = true};
    ec_process *p = NULL;
    ec_error e = {0};
    assert_true(ec_process_start(c, &so, &p, &e) == 0);
    pthread_mutex_lock(&px.mu);
    snprintf(px.cut_after_method, sizeof px.cut_after_method, "process/write");
    pthread_mutex_unlock(&px.mu);
    assert_true(ec_process_write(p, "x1\n", 3, &e) == 0); /* forwarded, reply lost, re-sent */
    assert_true(ec_process_write(p, "y2\n", 3, &e) == 0);
    struct collected r;
    collect(p, &r, 20000);
    assert_true(strcmp(r.out, "got:x1\ngot:y2\n") == 0);
    assert_true(px_get(&px.writes) == 3);
    assert_true(ec_client_reconnects(c) == 1);
    ec_process_free(p);
    ec_client_close(c);
}

static void test_unknown_session_is_terminal(void **state)
{
    proxy_reset();
    px.cut_after_output_seq = 1;
    px.refuse_after_cut_ms = 3500; /* longer than the server's 2 s session TTL */
    ec_client *c = connect_via_proxy(15000);
    ec_process *p = start_sh(c, "echo one; sleep 30");
    struct collected r;
    collect(p, &r, 30000);
    assert_true(r.rc == -EC_ERR_SESSION_LOST);
    assert_true(strcmp(r.out, "one\n") == 0); /* what came before the loss is delivered */
    assert_true(r.resyncs == 1);              /* the waiting caller was woken */
    ec_error e = {0};
    assert_true(ec_client_call(c, "environment/status", NULL, NULL, &e) == -EC_ERR_SESSION_LOST);
    assert_true(e.kind == EC_ERR_SESSION_LOST && strstr(e.message, "unknown session") != NULL);
    ec_process_free(p);
    ec_client_close(c);
}

static void test_error_kinds_and_fs(void **state)
{
    proxy_reset();
    ec_client *c = connect_via_proxy(0);
    ec_error e = {0};
    char dir[] = "/tmp/ec_live_XXXXXX";
    assert_true(mkdtemp(dir) != NULL);
    char path[256], sub[256], copy[256];
    snprintf(path, sizeof path, "%s/a b.txt", dir);
    snprintf(sub, sizeof sub, "%s/d/e", dir);
    snprintf(copy, sizeof copy, "%s/d/e/copy.txt", dir);

    uint8_t *data;
    size_t n;
    assert_true(ec_fs_read_file(c, path, &data, &n, &e) == -EC_ERR_SERVER);
    assert_true(e.kind == EC_ERR_SERVER && e.code == -32004);
    assert_true(ec_fs_read_file(c, "relative", &data, &n, &e) == -EC_ERR_USAGE);

    assert_true(ec_fs_write_file(c, path, "hello\0world", 11, &e) == 0);
    assert_true(ec_fs_read_file(c, path, &data, &n, &e) == 0);
    assert_true(n == 11 && memcmp(data, "hello\0world", 11) == 0);
    free(data);
    ec_metadata md;
    assert_true(ec_fs_get_metadata(c, path, &md, &e) == 0 && md.is_file && md.size == 11);
    assert_true(ec_fs_create_directory(c, sub, true, &e) == 0);
    assert_true(ec_fs_copy(c, path, copy, false, &e) == 0);
    ec_dirent *ents;
    assert_true(ec_fs_read_directory(c, dir, &ents, &n, &e) == 0 && n == 2);
    ec_dirents_free(ents, n);
    ec_walk_entry *w;
    bool trunc = true;
    assert_true(ec_fs_walk(c, dir, NULL, &w, &n, &trunc, &e) == 0 && n == 4 && !trunc);
    bool saw_space = false;
    for (size_t i = 0; i < n; i++)
        saw_space |= strcmp(w[i].path, path) == 0;
    assert_true(saw_space);
    ec_walk_entries_free(w, n);
    char *canon = NULL;
    char dotted[300];
    snprintf(dotted, sizeof dotted, "%s/d/../a b.txt", dir);
    assert_true(ec_fs_canonicalize(c, dotted, &canon, &e) == 0 && canon &&
                strcmp(canon, path) == 0);
    free(canon);
    /* Random-access reads. */
    assert_true(ec_fs_open(c, "h1", path, false, &e) == 0);
    bool eof = false;
    assert_true(ec_fs_read_block(c, "h1", 6, 100, &data, &n, &eof, &e) == 0);
    assert_true(n == 5 && memcmp(data, "world", 5) == 0 && eof);
    free(data);
    assert_true(ec_fs_close(c, "h1", &e) == 0);
    assert_true(ec_fs_remove(c, dir, true, false, &e) == 0);
    assert_true(ec_fs_get_metadata(c, dir, &md, &e) == -EC_ERR_SERVER && e.code == -32004);

    /* A timeout is its own kind, and the connection stays usable after it. */
    ec_process *p = start_sh(c, "sleep 5");
    ec_event ev;
    assert_true(ec_process_next_event(p, 200, &ev, &e) == -EC_ERR_TIMEOUT &&
                e.kind == EC_ERR_TIMEOUT);
    bool was = false;
    assert_true(ec_process_terminate(p, &was, &e) == 0 && was);
    struct collected r;
    collect(p, &r, 20000);
    assert_true(r.exit_code == 137);
    assert_true(ec_client_call(c, "no/such", NULL, NULL, &e) == -EC_ERR_SERVER && e.code == -32601);
    ec_process_free(p);
    ec_client_close(c);
}

/* ---- an upload replaces its target whole, or not at all ---- */

static int cancel_at(void *ud, uint64_t done)
{
    return done >= *(uint64_t *)ud;
}

/* The entries of dir whose name holds ".exec-client." (an upload's temporaries). */
static int temporaries(const char *dir)
{
    char cmd[512];
    snprintf(cmd, sizeof cmd, "ls -A '%s' | grep -c '\\.exec-client\\.'", dir);
    FILE *f = popen(cmd, "r");
    int n = -1;
    if (f && fscanf(f, "%d", &n) != 1) n = -1;
    if (f) pclose(f);
    return n;
}

static void file_is(const char *path, const void *data, size_t n)
{
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    char *got = malloc(n + 1);
    size_t k = fread(got, 1, n + 1, f);
    fclose(f);
    assert_true(k == n && memcmp(got, data, n) == 0);
    free(got);
}

static void test_upload_replaces_whole_or_not_at_all(void **state)
{
    proxy_reset();
    ec_client *c = connect_via_proxy(0);
    ec_error e = {0};
    char dir[] = "/tmp/ec_live_up_XXXXXX", path[256], link[256], src[256], tmp[512];
    assert_true(mkdtemp(dir) != NULL);
    snprintf(path, sizeof path, "%s/p.txt", dir);
    snprintf(link, sizeof link, "%s/link.txt", dir);
    snprintf(src, sizeof src, "%s/src.bin", dir);
    assert_non_null(ec_temp_name(path, tmp, sizeof tmp));
    assert_true(strncmp(tmp, dir, strlen(dir)) == 0 &&
                strncmp(tmp + strlen(dir), "/.p.txt.exec-client.", 20) == 0 &&
                strlen(tmp) == strlen(dir) + 30);
    FILE *f = fopen(path, "w");
    fputs("precious\n", f);
    fclose(f);
    chmod(path, 0640);
    size_t big = 6u << 20;
    uint8_t *data = malloc(big);
    for (size_t i = 0; i < big; i++)
        data[i] = (uint8_t)(i * 131 + (i >> 13));
    f = fopen(src, "wb");
    fwrite(data, 1, big, f);
    fclose(f);

    /* Cancelled half-way: the old file whole, no temporary left. */
    uint64_t stop_at = 2u << 20;
    ec_transfer_options o = {.progress = cancel_at, .progress_ud = &stop_at};
    int fd = open(src, O_RDONLY);
    assert_true(ec_fs_upload(c, fd, path, &o, NULL, &e) == -EC_ERR_USAGE);
    assert_true(strcmp(e.message, "transfer cancelled") == 0);
    close(fd);
    file_is(path, "precious\n", 9);
    assert_int_equal(temporaries(dir), 0);

    /* Complete: replaced in one step, its mode kept; through a symbolic link, the file
     * it names is replaced and the link stays. */
    fd = open(src, O_RDONLY);
    uint64_t sent = 0;
    assert_true(ec_fs_upload(c, fd, path, NULL, &sent, &e) == 0 && sent == big);
    close(fd);
    file_is(path, data, big);
    struct stat st;
    assert_true(stat(path, &st) == 0 && (st.st_mode & 07777) == 0640);
    assert_true(symlink("p.txt", link) == 0);
    fd = open(src, O_RDONLY);
    lseek(fd, 1 << 20, SEEK_SET);
    assert_true(ec_fs_upload(c, fd, link, NULL, NULL, &e) == 0);
    close(fd);
    assert_true(lstat(link, &st) == 0 && S_ISLNK(st.st_mode));
    file_is(path, data + (1 << 20), big - (1 << 20));
    assert_int_equal(temporaries(dir), 0);

    /* The connection lost mid-way: the old file whole, and the error says where the
     * part sent is (it cannot be removed without a connection). */
    snprintf(px.cut_after_method, sizeof px.cut_after_method, "fs/writeBlock");
    fd = open(src, O_RDONLY);
    assert_true(ec_fs_upload(c, fd, path, NULL, NULL, &e) == -EC_ERR_TRANSPORT);
    close(fd);
    file_is(path, data + (1 << 20), big - (1 << 20));
    char *left = strstr(e.message, "; the part sent is left in ");
    assert_non_null(left);
    left += strlen("; the part sent is left in ");
    assert_true(strncmp(left, dir, strlen(dir)) == 0 && access(left, F_OK) == 0);
    assert_int_equal(temporaries(dir), 1);
    unlink(left);
    unlink(link);
    unlink(path);
    unlink(src);
    rmdir(dir);
    free(data);
    ec_client_close(c);
}

/* A fast producer must not push the consumer into lag: the client reads the socket
 * in bounded batches, so TCP flow control holds the server back. */
static void test_bulk_output_is_complete_without_lag(void **state)
{
    proxy_reset();
    ec_client *c = connect_via_proxy(0);
    ec_process *p = start_sh(c, "head -c 50331648 /dev/zero");
    uint64_t total = 0;
    bool nonzero = false, closed = false;
    int64_t deadline = now_ms() + 120000;
    while (!closed && now_ms() < deadline) {
        ec_event ev;
        ec_error e = {0};
        if (ec_process_next_event(p, 5000, &ev, &e) != 0) break;
        if (ev.type == EC_EVENT_OUTPUT) {
            total += ev.len;
            for (size_t i = 0; i < ev.len; i++)
                nonzero |= ev.data[i] != 0;
        }
        closed = ev.type == EC_EVENT_CLOSED;
    }
    assert_true(closed);
    assert_true(total == 50331648);
    assert_true(!nonzero);
    ec_process_stats st;
    ec_process_get_stats(p, &st);
    assert_true(st.lags == 0 && st.reads_sent == 0 && st.gaps_detected == 0);
    ec_process_free(p);
    ec_client_close(c);
}

/* Merged output (ec_process_set_merge_output) is the same bytes in the same order,
 * stdout and stderr apart, with seqs rising; and a process
 * whose id the fast reading of process/output leaves to jansson (a quote in it) gets
 * its output all the same. */
static void test_merged_output_exact(void **state)
{
    proxy_reset();
    ec_client *c = connect_via_proxy(0);
    const char *ids[] = {NULL, "odd\"id\\"};
    for (int k = 0; k < 2; k++) {
        const char *argv[] = {"/bin/sh", "-c",
                              "i=0; while [ $i -lt 3 ]; do seq 1 40000; echo e$i >&2; "
                              "i=$((i+1)); done",
                              NULL};
        ec_start_options so = {.argv = argv, .cwd = "/tmp", .env = test_env, .process_id = ids[k]};
        ec_process *p = NULL;
        ec_error e = {0};
        assert_int_equal(ec_process_start(c, &so, &p, &e), 0);
        ec_process_set_merge_output(p, true);
        size_t out_len = 0, err_len = 0;
        uint64_t last_seq = 0;
        char *out = malloc(3 * 228894), err[64] = "";
        for (bool closed = false; !closed;) {
            ec_event ev;
            assert_int_equal(ec_process_next_event(p, 20000, &ev, &e), 0);
            if (ev.type == EC_EVENT_OUTPUT) {
                assert_true(ev.seq > last_seq);
                last_seq = ev.seq;
                if (ev.stream == EC_STREAM_STDERR) {
                    assert_true(err_len + ev.len < sizeof err);
                    memcpy(err + err_len, ev.data, ev.len);
                    err_len += ev.len;
                } else {
                    assert_true(out_len + ev.len <= 3 * 228894);
                    memcpy(out + out_len, ev.data, ev.len);
                    out_len += ev.len;
                }
            }
            closed = ev.type == EC_EVENT_CLOSED;
        }
        assert_memory_equal(err, "e0\ne1\ne2\n", 9);
        assert_int_equal(err_len, 9);
        /* seq 1 40000, three times: 228,894 bytes each */
        assert_int_equal(out_len, 3 * 228894);
        for (int r = 0; r < 3; r++) {
            const char *o = out + (size_t)r * 228894;
            assert_memory_equal(o, "1\n2\n3\n", 6);
            assert_memory_equal(o + 228894 - 12, "39999\n40000\n", 12);
        }
        free(out);
        ec_process_free(p);
    }
    ec_client_close(c);
}

/* The same process read back whole (ec_process_attach replays what the server retains in
 * one read): with merging on, its chunks come as a few large events. */
static void test_merged_output_replayed_in_few_events(void **state)
{
    proxy_reset();
    ec_client *c = connect_via_proxy(0);
    ec_process *p = start_sh(c, "head -c 600000 /dev/zero");
    struct collected r;
    collect(p, &r, 20000);
    assert_true(r.rc == 0 && r.closes == 1);
    const char *id = ec_process_id(p);
    char pid[64];
    snprintf(pid, sizeof pid, "%s", id);
    ec_process_free(p);
    ec_error e = {0};
    assert_int_equal(ec_process_attach(c, NULL, pid, &p, &e), 0);
    ec_process_set_merge_output(p, true);
    size_t total = 0, events = 0;
    for (bool closed = false; !closed;) {
        ec_event ev;
        assert_int_equal(ec_process_next_event(p, 20000, &ev, &e), 0);
        if (ev.type == EC_EVENT_OUTPUT) {
            total += ev.len;
            events++;
        }
        closed = ev.type == EC_EVENT_CLOSED;
    }
    assert_int_equal(total, 600000);
    /* 74 chunks of at most 8 KiB; blocks of 16 KiB, 32 KiB ... take them in a handful. */
    assert_true(events <= 10);
    ec_process_free(p);
    ec_client_close(c);
}

/* A download whose fd takes everything at once (/dev/null) and one block in flight:
 * each block is asked for again before the wait (it waited for the server's next Ping
 * with nothing in flight, and failed as stalled at the call timeout). */
static void test_download_to_a_fast_fd(void **state)
{
    proxy_reset();
    char path[] = "/tmp/test_ec_live_dl.XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    assert_int_equal(ftruncate(fd, 5u << 20), 0);
    close(fd);
    char url[64];
    snprintf(url, sizeof url, "ws://127.0.0.1:%d", px.port);
    /* Well below the server's Ping interval (30 s), which alone ended the stall. */
    ec_client_options o = {.url = url, .call_timeout_ms = 15000};
    ec_client *c = NULL;
    ec_error e = {0};
    assert_int_equal(ec_client_connect(&o, &c, &e), 0);
    int null = open("/dev/null", O_WRONLY);
    ec_transfer_options to = {.window = 1, .block = 1u << 20};
    uint64_t got = 0;
    int rc = ec_fs_download(c, path, null, &to, &got, &e);
    if (rc) fprintf(stderr, "download: %s\n", e.message);
    assert_int_equal(rc, 0);
    assert_int_equal(got, 5u << 20);
    close(null);
    unlink(path);
    ec_client_close(c);
}

static void test_event_loop_api(void **state)
{
    proxy_reset();
    ec_client *c = connect_via_proxy(0);
    ec_process *p = start_sh(c, "for i in 1 2 3; do echo line$i; done");
    char out[256] = "";
    bool closed = false;
    int64_t deadline = now_ms() + 20000;
    while (!closed && now_ms() < deadline) {
        struct pollfd pfd = {.fd = ec_client_fd(c), .events = POLLIN};
        poll(&pfd, 1, 1000);
        assert_true(ec_client_process_ready(c, NULL) == 0);
        ec_event ev;
        while (ec_process_next_event(p, 0, &ev, NULL) == 0) {
            if (ev.type == EC_EVENT_OUTPUT) strncat(out, (const char *)ev.data, ev.len);
            if (ev.type == EC_EVENT_CLOSED) closed = true;
        }
    }
    assert_true(closed);
    assert_true(strcmp(out, "line1\nline2\nline3\n") == 0);
    ec_process_free(p);
    ec_client_close(c);
}

static void test_fragments_pings_and_bearer_token(void **state)
{
    proxy_reset();
    px.fragment_outputs = true;
    char url[64];
    snprintf(url, sizeof url, "ws://127.0.0.1:%d/", px.port);
    ec_client_options o = {.url = url, .bearer_token = "s3cret"};
    ec_client *c = NULL;
    ec_error e = {0};
    assert_true(ec_client_connect(&o, &c, &e) == 0);
    pthread_mutex_lock(&px.mu);
    assert_true(strstr(px.client_head, "\r\nAuthorization: Bearer s3cret\r\n") != NULL);
    assert_true(strstr(px.client_head, "GET / HTTP/1.1\r\n") == px.client_head);
    pthread_mutex_unlock(&px.mu);
    ec_process *p = start_sh(c, "printf 'abcdefghijklmnopqrstuvwxyz'; sleep 0.2; echo 0123456789");
    struct collected r;
    collect(p, &r, 20000);
    assert_true(r.rc == 0 && r.closes == 1);
    assert_true(strcmp(r.out, "abcdefghijklmnopqrstuvwxyz0123456789\n") == 0);
    /* One Pong per injected Ping, payload echoed (the proxy thread may see the last one
     * a moment after the client delivered the event). */
    for (int i = 0; i < 100 && px_get(&px.pongs) < 2; i++)
        usleep(20 * 1000); /* sleep-ok: the poll interval, 2 s bound */
    assert_true(px_get(&px.pongs) == 2);
    ec_process_free(p);
    ec_client_close(c);
}

static void test_connect_errors(void **state)
{
    ec_client *c = NULL;
    ec_error e = {0};
    ec_client_options o = {.url = "http://127.0.0.1:1"};
    assert_true(ec_client_connect(&o, &c, &e) == -EC_ERR_USAGE && c == NULL);
    o.url = "ws://127.0.0.1:1";
    assert_true(ec_client_connect(&o, &c, &e) == -EC_ERR_TRANSPORT);
    assert_true(strstr(e.message, "refused") != NULL);
    char url[64];
    snprintf(url, sizeof url, "ws://127.0.0.1:%d/other", server_port);
    o.url = url;
    assert_true(ec_client_connect(&o, &c, &e) == -EC_ERR_TRANSPORT);
    assert_true(strstr(e.message, "404") != NULL);
}

static const char *server_bin;

/* One server and one proxy for the whole group, as before the cmocka port. */
static int group_setup(void **state)
{
    server_start(server_bin);
    proxy_start();
    return 0;
}

static int group_teardown(void **state)
{
    proxy_stop();
    server_stop();
    return 0;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: test_ec_live PATH-TO-exec-server\n");
        return 2;
    }
    signal(SIGPIPE, SIG_IGN); /* the proxy writes to sockets it may have lost */
    server_bin = argv[1];
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pushed_events_complete_with_zero_reads),
        cmocka_unit_test(test_gap_recovered_with_exactly_one_read),
        cmocka_unit_test(test_lost_exit_recovered_with_one_read),
        cmocka_unit_test(test_old_server_exit_costs_one_read),
        cmocka_unit_test(test_reconnect_mid_command),
        cmocka_unit_test(test_idle_drop_resumes_before_the_next_call),
        cmocka_unit_test(test_start_in_flight_is_not_replayed),
        cmocka_unit_test(test_write_retried_with_same_write_id),
        cmocka_unit_test(test_unknown_session_is_terminal),
        cmocka_unit_test(test_error_kinds_and_fs),
        cmocka_unit_test(test_upload_replaces_whole_or_not_at_all),
        cmocka_unit_test(test_bulk_output_is_complete_without_lag),
        cmocka_unit_test(test_merged_output_exact),
        cmocka_unit_test(test_merged_output_replayed_in_few_events),
        cmocka_unit_test(test_download_to_a_fast_fd),
        cmocka_unit_test(test_event_loop_api),
        cmocka_unit_test(test_fragments_pings_and_bearer_token),
        cmocka_unit_test(test_connect_errors),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
