/* web_static: the web server of scenarios 8 and 9 of exec-bench.
 *
 * Rows 8 and 9 measure an HTTP download made by the server under test (or by curl,
 * their floors), so the far end should cost as little as it can: on a two-core
 * machine every cycle it burns is taken from the download it serves. Python's
 * http.server, used before, copies each 64 KiB through the interpreter and took a
 * third of the machine's CPU during row 8 (perf: 32% of all samples, more than our
 * server's 19%). This one answers a GET of a file in one directory with pread(2) and
 * write(2) of 1 MiB at a time. sendfile(2) would skip the copy through user space,
 * but on this VM curl took 0.22-0.29 s for 256 MiB served by it against 0.09-0.13 s
 * by the 1 MiB copy loop (0.11-0.18 s by python's server, 64 KiB pieces).
 *
 * It runs in a child process of the driver, one connection at a time (the scenarios
 * make one download at a time; the listen backlog holds any other), answers with
 * Connection: close, and knows only GET and HEAD of a plain name in its directory:
 * anything else is 404 or 400. It is bench code, not a web server for anyone else. */
#include "bench.h"

#define REQ_MAX 8192
#define IO_TIMEOUT_MS 30000
#define COPY_BUF (1 << 20)

static void answer_status(int c, const char *status)
{
    char head[256];
    int n = snprintf(head, sizeof head,
                     "HTTP/1.1 %s\r\nContent-Length: 0\r\nConnection: close\r\n\r\n", status);
    write_full(c, head, (size_t)n);
}

/* Reads the request head (up to its blank line) into req; its length, or -1. */
static ssize_t read_head(int c, char *req)
{
    size_t n = 0;
    while (n < REQ_MAX - 1) {
        struct pollfd p = {c, POLLIN, 0};
        if (poll(&p, 1, IO_TIMEOUT_MS) <= 0) return -1;
        ssize_t k = read(c, req + n, REQ_MAX - 1 - n);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) return -1;
        n += (size_t)k;
        req[n] = '\0';
        if (strstr(req, "\r\n\r\n")) return (ssize_t)n;
    }
    return -1;
}

/* One connection: one request, one answer; buf holds COPY_BUF bytes. */
static void serve_conn(int c, int dirfd, char *buf)
{
    char req[REQ_MAX];
    if (read_head(c, req) < 0) return;
    char method[8], target[512];
    if (sscanf(req, "%7s %511s HTTP/1.", method, target) != 2 || target[0] != '/') {
        answer_status(c, "400 Bad Request");
        return;
    }
    bool head_only = strcmp(method, "HEAD") == 0;
    if (!head_only && strcmp(method, "GET") != 0) {
        answer_status(c, "405 Method Not Allowed");
        return;
    }
    const char *name = target + 1;
    int fd = -1;
    struct stat st;
    /* A plain name in the directory only: no path, no dot files. */
    if (name[0] && name[0] != '.' && !strchr(name, '/'))
        fd = openat(dirfd, name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0 || fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
        if (fd >= 0) close(fd);
        answer_status(c, "404 Not Found");
        return;
    }
    char head[256];
    int hn = snprintf(head, sizeof head,
                      "HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\n"
                      "Content-Length: %lld\r\nConnection: close\r\n\r\n",
                      (long long)st.st_size);
    if (write_full(c, head, (size_t)hn) == 0 && !head_only) {
        off_t off = 0;
        while (off < st.st_size) {
            ssize_t k = pread(fd, buf, COPY_BUF, off);
            if (k < 0 && errno == EINTR) continue;
            if (k <= 0 || write_full(c, buf, (size_t)k) < 0) break;
            off += k;
        }
    }
    close(fd);
}

pid_t web_static_start(const char *dir, int *port_out)
{
    struct sockaddr_in a;
    int dirfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    int l = dirfd < 0 ? -1 : listen_loopback(64, &a);
    if (l < 0) {
        if (dirfd >= 0) close(dirfd);
        return -1;
    }
    pid_t pid = fork();
    if (pid == 0) {
        signal(SIGPIPE, SIG_IGN);
        char *buf = xmalloc(COPY_BUF);
        for (;;) {
            int c = accept4(l, NULL, NULL, SOCK_CLOEXEC);
            if (c < 0 && errno == EINTR) continue;
            if (c < 0) _exit(1);
            serve_conn(c, dirfd, buf);
            /* The client reads to the end of the body; a clean shutdown lets it see
             * the end even if it has not read all yet when we close. */
            shutdown(c, SHUT_WR);
            close(c);
        }
    }
    close(l);
    close(dirfd);
    if (pid < 0) return -1;
    *port_out = ntohs(a.sin_port);
    return pid;
}
