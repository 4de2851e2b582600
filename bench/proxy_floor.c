/* proxy_floor: the relay floor of scenario 9 (issue 24).
 *
 * Row 9's floor is curl straight to the web server: one loopback connection. Any
 * proxy puts a second connection and a process in the path, so each byte crosses the
 * loopback twice and three processes share the machine's cores. This is the least a
 * proxy can be: a process of its own that accepts a connection, connects to the web
 * server, and copies bytes both ways through a 64 KiB buffer with poll(2), reading
 * nothing and deciding nothing. curl through it is row 9b's floor; whatever ours costs
 * beyond that is the policy proxy's own. (splice(2) through a pipe instead of the
 * buffer measured the same on this machine: the copies are not what costs.) */
#include "bench.h"

#define RELAY_BUF (64 * 1024)

/* One proxied connection, until both directions ended. */
static void relay_conn(int client, int upstream_port, char *buf)
{
    int up = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in a = {.sin_family = AF_INET,
                            .sin_port = htons((uint16_t)upstream_port),
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    if (up < 0 || connect(up, (struct sockaddr *)&a, sizeof a) < 0) {
        if (up >= 0) close(up);
        return;
    }
    struct pollfd pf[2] = {{client, POLLIN, 0}, {up, POLLIN, 0}};
    int open_dirs = 2;
    while (open_dirs > 0) {
        if (poll(pf, 2, 30000) <= 0) break;
        for (int i = 0; i < 2; i++) {
            if (pf[i].fd < 0 || !(pf[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
            int dst = i ? client : up;
            ssize_t n = read(pf[i].fd, buf, RELAY_BUF);
            if (n < 0 && errno == EINTR) continue;
            if (n > 0 && write_full(dst, buf, (size_t)n) == 0) continue;
            shutdown(dst, SHUT_WR);
            pf[i].fd = -1;
            open_dirs--;
        }
    }
    close(up);
}

pid_t proxy_floor_start(int upstream_port, int *port_out)
{
    struct sockaddr_in a;
    int l = listen_loopback(16, &a);
    if (l < 0) return -1;
    pid_t pid = fork();
    if (pid == 0) {
        char *buf = xmalloc(RELAY_BUF);
        for (;;) {
            int c = accept4(l, NULL, NULL, SOCK_CLOEXEC);
            if (c < 0 && errno == EINTR) continue;
            if (c < 0) _exit(1);
            relay_conn(c, upstream_port, buf);
            close(c);
        }
    }
    close(l);
    *port_out = ntohs(a.sin_port);
    return pid;
}
