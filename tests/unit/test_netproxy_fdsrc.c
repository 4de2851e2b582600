/* netproxy_attach_fd_source, the path a sandboxed child's connections take: real
 * sockets, a real loop. The test plays the child's init: it accepts a TCP
 * connection itself and hands the accepted socket to the proxy over a socketpair
 * (SCM_RIGHTS, tag 'H' or 'S'); the proxy must serve it exactly like a connection
 * to its own listener, judged by what a local upstream server receives and what
 * the client reads back. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include <uv.h>

#include <cmocka.h>

#include "netproxy/netproxy.h"

static int listen_local(uint16_t *port)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in a = {.sin_family = AF_INET};
    inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
    assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof a), 0);
    assert_int_equal(listen(fd, 16), 0);
    socklen_t len = sizeof a;
    getsockname(fd, (struct sockaddr *)&a, &len);
    *port = ntohs(a.sin_port);
    return fd;
}

/* A connected pair: the client end, and the accepted end the "init" hands over. */
static void tcp_pair(int *client, int *accepted)
{
    uint16_t port;
    int l = listen_local(&port);
    *client = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port)};
    inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
    assert_int_equal(connect(*client, (struct sockaddr *)&a, sizeof a), 0);
    *accepted = accept(l, NULL, NULL);
    assert_true(*accepted >= 0);
    close(l);
}

static void send_fd(int sp, char tag, int fd)
{
    struct iovec iov = {&tag, 1};
    union {
        struct cmsghdr h;
        char buf[CMSG_SPACE(sizeof(int))];
    } cm;
    memset(&cm, 0, sizeof cm);
    struct msghdr msg = {
        .msg_iov = &iov, .msg_iovlen = 1, .msg_control = cm.buf, .msg_controllen = sizeof cm.buf};
    struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int));
    memcpy(CMSG_DATA(c), &fd, sizeof fd);
    assert_int_equal(sendmsg(sp, &msg, 0), 1);
}

/* Runs the loop until fd is readable (or the deadline: a failure). */
static void pump_until_readable(uv_loop_t *loop, int fd)
{
    for (int i = 0; i < 5000; i++) {
        uv_run(loop, UV_RUN_NOWAIT);
        struct pollfd p = {.fd = fd, .events = POLLIN};
        if (poll(&p, 1, 2) == 1) return;
    }
    fail_msg("fd %d never became readable", fd);
}

/* Reads until EOF, pumping the loop. */
static size_t read_all(uv_loop_t *loop, int fd, char *out, size_t cap)
{
    size_t n = 0;
    for (;;) {
        pump_until_readable(loop, fd);
        ssize_t r = read(fd, out + n, cap - 1 - n);
        if (r <= 0) break;
        n += (size_t)r;
    }
    out[n] = '\0';
    return n;
}

static struct netproxy *start(uv_loop_t *loop, bool socks)
{
    struct netproxy_params p = {
        .present = true, .enabled = true, .enable_socks5 = socks, .allow_local_binding = true};
    p.domains = json_pack("{s:s,s:s}", "127.0.0.1", "allow", "blocked.test", "deny");
    char err[256] = "";
    assert_int_equal(netproxy_validate(&p, false, err, sizeof err), 0);
    struct netproxy *np = NULL;
    if (netproxy_start(loop, &p, NULL, "p-fd", &np, err, sizeof err) != 0) fail_msg("%s", err);
    netproxy_params_free(&p);
    return np;
}

/* The init's part: accepts a connection itself and hands it to the proxy with tag;
 * returns the client end. */
static int hand_over(int sp, char tag)
{
    int client, accepted;
    tcp_pair(&client, &accepted);
    send_fd(sp, tag, accepted);
    close(accepted); /* the proxy has its own copy now */
    return client;
}

/* A proxy on loop with an fd source attached: sp[1] is the init's end. */
static struct netproxy *start_with_source(uv_loop_t *loop, bool socks, int sp[2])
{
    uv_loop_init(loop);
    struct netproxy *np = start(loop, socks);
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sp), 0);
    assert_int_equal(netproxy_attach_fd_source(np, sp[0]), 0);
    return np;
}

static void finish(uv_loop_t *loop, struct netproxy *np)
{
    netproxy_release(np);
    while (uv_run(loop, UV_RUN_NOWAIT)) {
    }
    assert_int_equal(uv_loop_close(loop), 0);
}

static void test_http_by_fd(void **state)
{
    (void)state;
    uv_loop_t loop;
    int sp[2];
    struct netproxy *np = start_with_source(&loop, false, sp);
    uint16_t up_port;
    int up_l = listen_local(&up_port);
    int client = hand_over(sp[1], 'H');

    char req[256];
    int rl = snprintf(req, sizeof req,
                      "GET http://127.0.0.1:%u/via-fd HTTP/1.1\r\nHost: 127.0.0.1:%u\r\n"
                      "Proxy-Connection: keep-alive\r\n\r\n",
                      up_port, up_port);
    assert_int_equal(write(client, req, (size_t)rl), rl);

    pump_until_readable(&loop, up_l);
    int up = accept(up_l, NULL, NULL);
    assert_true(up >= 0);
    char got[2048] = "";
    size_t n = 0;
    while (!strstr(got, "\r\n\r\n")) {
        pump_until_readable(&loop, up);
        ssize_t r = read(up, got + n, sizeof got - 1 - n);
        assert_true(r > 0);
        n += (size_t)r;
        got[n] = '\0';
    }
    /* what the upstream received: origin-form, no proxy headers, one request */
    assert_non_null(strstr(got, "GET /via-fd HTTP/1.1\r\n"));
    assert_null(strstr(got, "Proxy-Connection"));
    assert_non_null(strstr(got, "Connection: close\r\n"));
    const char *resp = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok";
    assert_int_equal(write(up, resp, strlen(resp)), (ssize_t)strlen(resp));
    close(up);

    char back[2048];
    read_all(&loop, client, back, sizeof back);
    assert_non_null(strstr(back, "HTTP/1.1 200 OK\r\n"));
    assert_non_null(strstr(back, "\r\n\r\nok"));
    close(client);

    /* a denied host is refused the same way as on the listener */
    client = hand_over(sp[1], 'H');
    const char *bad = "GET http://blocked.test/ HTTP/1.1\r\nHost: blocked.test\r\n\r\n";
    assert_int_equal(write(client, bad, strlen(bad)), (ssize_t)strlen(bad));
    read_all(&loop, client, back, sizeof back);
    assert_non_null(strstr(back, "HTTP/1.1 403 Forbidden\r\n"));
    assert_non_null(strstr(back, "\"reason\":\"denied\""));
    close(client);

    /* a SOCKS tag on a proxy without SOCKS5: the socket is closed, nothing served */
    client = hand_over(sp[1], 'S');
    assert_int_equal(read_all(&loop, client, back, sizeof back), 0);
    close(client);

    close(sp[1]); /* the init went away: the source stops */
    close(up_l);
    finish(&loop, np);
}

static void test_socks_by_fd(void **state)
{
    (void)state;
    uv_loop_t loop;
    int sp[2];
    struct netproxy *np = start_with_source(&loop, true, sp);
    uint16_t up_port;
    int up_l = listen_local(&up_port);
    int client = hand_over(sp[1], 'S');
    uint8_t hello[] = {5, 1, 0};
    assert_int_equal(write(client, hello, 3), 3);
    uint8_t r[16];
    pump_until_readable(&loop, client);
    assert_int_equal(read(client, r, 2), 2);
    assert_int_equal(r[1], 0);
    uint8_t conn[] = {5, 1, 0, 1, 127, 0, 0, 1, (uint8_t)(up_port >> 8), (uint8_t)up_port};
    assert_int_equal(write(client, conn, sizeof conn), (ssize_t)sizeof conn);
    pump_until_readable(&loop, client);
    assert_int_equal(read(client, r, 10), 10);
    assert_int_equal(r[1], 0); /* succeeded */
    pump_until_readable(&loop, up_l);
    int up = accept(up_l, NULL, NULL);
    assert_int_equal(write(client, "ping", 4), 4);
    pump_until_readable(&loop, up);
    char got[8] = "";
    assert_int_equal(read(up, got, 4), 4);
    assert_memory_equal(got, "ping", 4);
    close(up);
    close(client);
    close(up_l);
    /* released with the source still attached: everything closes */
    finish(&loop, np);
    close(sp[1]);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_http_by_fd),
        cmocka_unit_test(test_socks_by_fd),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
