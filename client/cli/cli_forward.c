/* cli_forward: `exec-client forward -L [BIND:]LPORT:HOST:PORT ...`, ssh -L over our
 * server's TCP forwarding (tcp/connect, capability tcpForward; the server runs with
 * --allow-tcp-forwarding).
 *
 * Each -L listens on BIND:LPORT here (127.0.0.1 unless BIND says otherwise; `*` or an
 * empty BIND is every interface; LPORT 0 picks a free port, and the line printed on
 * stderr names it). Every accepted connection becomes one stream that the server
 * opens to HOST:PORT from its side, so HOST is resolved there (`localhost` is the
 * server's). Many connections run at once over the one WebSocket, in one poll loop:
 * a stream's bytes are written to its local socket as its events come, and the next
 * event is taken only once the last one is written, so a slow local reader holds its
 * own stream back (the library returns credit to the server only then) without
 * stalling the others. Half-closes pass both ways (curl's request, then the
 * response to EOF). Runs until SIGINT/SIGTERM (exit 0) or the connection is lost
 * (exit 255). */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "cli.h"

#define FWD_READ (64u << 10)

struct fwd_spec {
    char bind[256];
    char lport[8];
    char host[256];
    unsigned port;
    int fd; /* the listener */
};

struct fwd_conn {
    struct fwd_conn *next;
    struct fwd_spec *spec;
    int fd;
    ec_tcp *t;
    bool connected;
    bool local_eof;     /* our reader saw EOF: the stream was shut down */
    const uint8_t *out; /* bytes of the current event still to write locally */
    size_t out_len;
    bool remote_eof_pending; /* EOF came: shut the local socket down once out is empty */
    int pidx;                /* its entry in this turn's pollfd array, or -1 */
};

static volatile sig_atomic_t fwd_stop;

static void on_stop(int sig)
{
    fwd_stop = sig;
}

/* Splits `s` on the colons outside [brackets] into at most 4 fields. */
static int split_fields(const char *s, char fields[4][256])
{
    int n = 0;
    size_t k = 0;
    int depth = 0;
    for (const char *p = s;; p++) {
        if (*p == '[') depth++;
        if (*p == ']') depth--;
        if (*p == '\0' || (*p == ':' && depth == 0)) {
            fields[n][k] = '\0';
            n++;
            k = 0;
            if (*p == '\0') return n;
            if (n == 4) return -1; /* a fifth field */
            continue;
        }
        if (k + 1 >= 256) return -1;
        fields[n][k++] = *p;
    }
}

static void unbracket(char *s)
{
    size_t n = strlen(s);
    if (n >= 2 && s[0] == '[' && s[n - 1] == ']') {
        memmove(s, s + 1, n - 2);
        s[n - 2] = '\0';
    }
}

static bool parse_port(const char *s, bool allow_zero, unsigned *out)
{
    if (!*s || strspn(s, "0123456789") != strlen(s) || strlen(s) > 5) return false;
    unsigned long v = strtoul(s, NULL, 10);
    if (v > 65535 || (!allow_zero && v == 0)) return false;
    *out = (unsigned)v;
    return true;
}

static int parse_spec(const char *arg, struct fwd_spec *sp)
{
    char f[4][256];
    int n = split_fields(arg, f);
    if (n != 3 && n != 4) return -1;
    int i = n == 4 ? 1 : 0;
    snprintf(sp->bind, sizeof sp->bind, "%s", n == 4 ? f[0] : "127.0.0.1");
    unbracket(sp->bind);
    if (strcmp(sp->bind, "localhost") == 0) snprintf(sp->bind, sizeof sp->bind, "127.0.0.1");
    if (strcmp(sp->bind, "*") == 0 || sp->bind[0] == '\0')
        snprintf(sp->bind, sizeof sp->bind, "0.0.0.0");
    unsigned lport;
    if (!parse_port(f[i], true, &lport) || !parse_port(f[i + 2], false, &sp->port)) return -1;
    snprintf(sp->lport, sizeof sp->lport, "%u", lport);
    snprintf(sp->host, sizeof sp->host, "%s", f[i + 1]);
    unbracket(sp->host);
    return sp->host[0] ? 0 : -1;
}

static void set_nonblock(int fd)
{
    int fl = fcntl(fd, F_GETFL);
    if (fl >= 0) fcntl(fd, F_SETFL, fl | O_NONBLOCK);
}

/* Binds and listens; prints where. Returns 0 or -1 after saying why. */
static int listen_spec(struct fwd_spec *sp)
{
    struct addrinfo hints = {.ai_family = AF_UNSPEC,
                             .ai_socktype = SOCK_STREAM,
                             .ai_flags = AI_PASSIVE | AI_NUMERICSERV | AI_NUMERICHOST};
    struct addrinfo *res = NULL;
    int rc = getaddrinfo(sp->bind, sp->lport, &hints, &res);
    if (rc != 0) {
        fprintf(stderr, "exec-client: forward: bad bind address `%s`: %s\n", sp->bind,
                gai_strerror(rc));
        return -1;
    }
    int fd = socket(res->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int one = 1;
    if (fd >= 0) setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (fd < 0 || bind(fd, res->ai_addr, res->ai_addrlen) != 0 || listen(fd, 128) != 0) {
        fprintf(stderr, "exec-client: forward: cannot listen on %s:%s: %s\n", sp->bind, sp->lport,
                strerror(errno));
        if (fd >= 0) close(fd);
        freeaddrinfo(res);
        return -1;
    }
    freeaddrinfo(res);
    set_nonblock(fd);
    struct sockaddr_storage ss;
    socklen_t len = sizeof ss;
    char addr[INET6_ADDRSTRLEN] = "?";
    unsigned port = 0;
    if (getsockname(fd, (struct sockaddr *)&ss, &len) == 0) {
        if (ss.ss_family == AF_INET6) {
            struct sockaddr_in6 *a6 = (struct sockaddr_in6 *)&ss;
            inet_ntop(AF_INET6, &a6->sin6_addr, addr, sizeof addr);
            port = ntohs(a6->sin6_port);
        } else {
            struct sockaddr_in *a4 = (struct sockaddr_in *)&ss;
            inet_ntop(AF_INET, &a4->sin_addr, addr, sizeof addr);
            port = ntohs(a4->sin_port);
        }
    }
    bool v6 = strchr(addr, ':') != NULL, hv6 = strchr(sp->host, ':') != NULL;
    fprintf(stderr, "exec-client: forwarding %s%s%s:%u -> %s%s%s:%u (from the server)\n",
            v6 ? "[" : "", addr, v6 ? "]" : "", port, hv6 ? "[" : "", sp->host, hv6 ? "]" : "",
            sp->port);
    sp->fd = fd;
    return 0;
}

static void conn_free(struct fwd_conn **list, struct fwd_conn *fc)
{
    for (struct fwd_conn **pp = list; *pp; pp = &(*pp)->next) {
        if (*pp == fc) {
            *pp = fc->next;
            break;
        }
    }
    if (fc->fd >= 0) close(fc->fd);
    ec_tcp_close(fc->t);
    free(fc);
}

/* Writes what it can of the pending bytes; false when the local side is gone. */
static bool flush_out(struct fwd_conn *fc)
{
    while (fc->out_len > 0) {
        ssize_t w = send(fc->fd, fc->out, fc->out_len, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (w < 0 && errno == EINTR) continue;
        if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return true;
        if (w <= 0) return false;
        fc->out += w;
        fc->out_len -= (size_t)w;
    }
    if (fc->remote_eof_pending) {
        fc->remote_eof_pending = false;
        shutdown(fc->fd, SHUT_WR);
    }
    return true;
}

/* Takes the stream's events while the local socket keeps up. Returns false when the
 * stream is over (the caller frees it). */
static bool drain_events(struct fwd_conn *fc, bool verbose)
{
    for (;;) {
        if (!flush_out(fc)) return false;
        if (fc->out_len > 0) return true; /* the local reader is slow: wait for POLLOUT */
        ec_tcp_event ev;
        if (ec_tcp_next_event(fc->t, 0, &ev, NULL) != 0) return true;
        switch (ev.type) {
        case EC_TCP_CONNECTED: fc->connected = true; break;
        case EC_TCP_DATA:
            fc->out = ev.data;
            fc->out_len = ev.len;
            break;
        case EC_TCP_EOF: fc->remote_eof_pending = true; break;
        case EC_TCP_CLOSED:
            if (ev.error && (verbose || !fc->connected))
                fprintf(stderr, "exec-client: forward to %s:%u: %s\n", fc->spec->host,
                        fc->spec->port, ev.error);
            return false;
        }
    }
}

/* One read of the local socket, sent on. Returns false when the stream is over. */
static bool pump_local(struct fwd_conn *fc)
{
    uint8_t buf[FWD_READ];
    size_t room = ec_tcp_write_room(fc->t);
    if (fc->local_eof || room == 0) return true;
    ssize_t n = recv(fc->fd, buf, room < sizeof buf ? room : sizeof buf, MSG_DONTWAIT);
    if (n < 0 && (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK)) return true;
    if (n < 0) return false; /* reset: abort the stream */
    if (n == 0) {
        fc->local_eof = true;
        return ec_tcp_shutdown(fc->t, NULL) == 0;
    }
    return ec_tcp_write(fc->t, buf, (size_t)n, NULL) == 0;
}

static void accept_all(struct cli *cli, struct fwd_spec *sp, struct fwd_conn **list)
{
    for (;;) {
        int fd = accept4(sp->fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) return; /* EAGAIN, or a transient error: poll again */
        struct fwd_conn *fc = calloc(1, sizeof *fc);
        fc->spec = sp;
        fc->fd = fd;
        fc->pidx = -1;
        ec_error e = {0};
        if (ec_tcp_open(cli->c, sp->host, sp->port, &fc->t, &e) != 0) {
            fprintf(stderr, "exec-client: forward: %s\n", e.message);
            close(fd);
            free(fc);
            continue;
        }
        fc->next = *list;
        *list = fc;
    }
}

static int cmd_forward(struct cli *cli, const struct cli_args *a)
{
    struct fwd_spec specs[64];
    size_t nspecs = 0;
    for (int i = 0; i < a->nopts; i++) {
        const char *spec = a->opts[i].value; /* -L is forward's one option */
        if (nspecs == sizeof specs / sizeof specs[0]) cli_die_usage("%s", "forward: too many -L");
        if (parse_spec(spec, &specs[nspecs]) != 0)
            cli_die_usage("forward: bad -L `%s`; expected [BIND:]LPORT:HOST:PORT", spec);
        nspecs++;
    }
    if (nspecs == 0) cli_die_usage("%s", "forward: no -L [BIND:]LPORT:HOST:PORT given");
    cli_connect_or_die(cli, false, false);
    /* The session holds nothing: it ends with this connection, whichever way. */
    ec_client_end_session(cli->c, NULL);
    if (!ec_client_has_capability(cli->c, "tcpForward")) {
        fprintf(stderr, "exec-client: forward: the server does not allow TCP forwarding (it "
                        "must run with --allow-tcp-forwarding)\n");
        return EXIT_FAILED;
    }
    for (size_t i = 0; i < nspecs; i++)
        if (listen_spec(&specs[i]) != 0) return EXIT_FAILED;
    struct sigaction sa = {.sa_handler = on_stop};
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);

    struct fwd_conn *conns = NULL;
    struct pollfd *pfd = NULL;
    size_t cap = 0;
    int rc = 0;
    while (!fwd_stop) {
        size_t n = 0;
        for (struct fwd_conn *fc = conns; fc; fc = fc->next)
            n++;
        if (cap < n + nspecs + 1) {
            cap = (n + nspecs + 1) * 2;
            pfd = realloc(pfd, cap * sizeof *pfd);
        }
        size_t k = 0;
        pfd[k++] = (struct pollfd){.fd = ec_client_fd(cli->c), .events = POLLIN};
        for (size_t i = 0; i < nspecs; i++)
            pfd[k++] = (struct pollfd){.fd = specs[i].fd, .events = POLLIN};
        for (struct fwd_conn *fc = conns; fc; fc = fc->next) {
            short ev = 0;
            if (fc->connected && !fc->local_eof && ec_tcp_write_room(fc->t) > 0) ev |= POLLIN;
            if (fc->out_len > 0) ev |= POLLOUT;
            /* Nothing wanted: not polled at all (a half-closed socket would report
             * POLLHUP on every turn). */
            fc->pidx = ev ? (int)k : -1;
            if (ev) pfd[k++] = (struct pollfd){.fd = fc->fd, .events = ev};
        }
        if (pfd[0].fd < 0) {
            fprintf(stderr, "exec-client: forward: the connection to the server was lost\n");
            rc = EXIT_CONN;
            break;
        }
        int pr = poll(pfd, k, 1000);
        if (pr < 0 && errno != EINTR) break;
        if (pr <= 0) continue;
        if (pfd[0].revents) {
            ec_error e = {0};
            if (ec_client_process_ready(cli->c, &e) != 0) {
                fprintf(stderr, "exec-client: forward: %s\n", e.message);
                rc = EXIT_CONN;
                break;
            }
        }
        for (size_t i = 0; i < nspecs; i++)
            if (pfd[1 + i].revents & POLLIN) accept_all(cli, &specs[i], &conns);
        /* Every stream, not only those polled: events arrive through the WebSocket. */
        for (struct fwd_conn *fc = conns, *next; fc; fc = next) {
            next = fc->next;
            short rev = fc->pidx >= 0 ? pfd[fc->pidx].revents : 0;
            bool alive = true;
            if (rev & (POLLIN | POLLHUP | POLLERR)) alive = pump_local(fc);
            if (alive) alive = drain_events(fc, cli->verbose);
            if (!alive) conn_free(&conns, fc);
        }
    }
    while (conns)
        conn_free(&conns, conns);
    for (size_t i = 0; i < nspecs; i++)
        close(specs[i].fd);
    free(pfd);
    return rc;
}

const struct cli_cmd_entry cli_forward_entry = {
    .name = "forward",
    .usage = "forward -L [BIND:]LPORT:HOST:PORT [-L ...]",
    .summary = "like ssh -L: connections to BIND:LPORT here (default 127.0.0.1; LPORT 0: any "
               "free port, printed) are made to HOST:PORT from the server (needs "
               "--allow-tcp-forwarding there); runs until interrupted",
    .text = "Like ssh -L: connections to BIND:LPORT here are made to HOST:PORT from the "
            "server.\n",
    .flags = "L:",
    .upper = 0,
    .bad_option = "forward: unexpected argument `%s` (forward -L [BIND:]LPORT:HOST:PORT)",
    .exec = cmd_forward,
};
