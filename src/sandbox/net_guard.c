/* net_guard: a network-enabled sandbox's connect(2), decided by its init (see
 * net_guard.h). Runs in the init only: a fork of the spawner, single-threaded, so
 * it may allocate. */
#include "sandbox/net_guard.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <linux/kcmp.h>
#include <linux/seccomp.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <unistd.h>

#include "core/own_ports.h"

#define SB_PIDFD_THREAD O_EXCL /* linux/pidfd.h, Linux 6.9 */

int net_guard_verdict(const void *addr, size_t len, bool (*is_ours)(uint16_t port))
{
    if (len > sizeof(struct sockaddr_storage)) return -EINVAL;
    if (len < sizeof(sa_family_t)) return -EINVAL;
    sa_family_t fam;
    memcpy(&fam, addr, sizeof fam);
    uint16_t port_be;
    if (fam == AF_INET) {
        if (len < sizeof(struct sockaddr_in)) return -EINVAL;
        memcpy(&port_be, (const char *)addr + offsetof(struct sockaddr_in, sin_port),
               sizeof port_be);
    } else if (fam == AF_INET6) {
        /* RFC 2133's shorter form, without sin6_scope_id, is one the kernel takes */
        if (len < offsetof(struct sockaddr_in6, sin6_scope_id)) return -EINVAL;
        memcpy(&port_be, (const char *)addr + offsetof(struct sockaddr_in6, sin6_port),
               sizeof port_be);
    } else {
        return 0; /* AF_UNSPEC (dissolving an association) and the like: no port */
    }
    return is_ours(ntohs(port_be)) ? -ECONNREFUSED : 0;
}

int net_guard_open(struct net_guard *g, int fd)
{
    memset(g, 0, sizeof *g);
    g->fd = -1;
    struct seccomp_notif_sizes sz;
    if (syscall(SYS_seccomp, SECCOMP_GET_NOTIF_SIZES, 0, &sz) < 0) return -errno;
    /* The kernel's structs may be larger than our headers' (newer fields). */
    g->req_size = sz.seccomp_notif > sizeof(struct seccomp_notif) ? sz.seccomp_notif
                                                                  : sizeof(struct seccomp_notif);
    g->resp_size = sz.seccomp_notif_resp > sizeof(struct seccomp_notif_resp)
                       ? sz.seccomp_notif_resp
                       : sizeof(struct seccomp_notif_resp);
    g->req = calloc(1, g->req_size);
    g->resp = calloc(1, g->resp_size);
    if (!g->req || !g->resp) return -ENOMEM;
    g->fd = fd;
    return 0;
}

int net_guard_pollfds(const struct net_guard *g, struct pollfd *p, int max)
{
    int n = 0;
    if (g->fd < 0 || max < 1) return 0;
    p[n++] = (struct pollfd){g->fd, POLLIN, 0};
    for (int i = 0; i < g->npending && n < max; i++)
        p[n++] = (struct pollfd){g->pending[i].sock, POLLOUT, 0};
    return n;
}

/* Answers notification id with error (0 or -errno): never "continue", which would
 * have the kernel look the call's arguments up again (serve_one). A target that is
 * gone meanwhile (ENOENT) needs no answer. */
static void answer(struct net_guard *g, uint64_t id, int error)
{
    struct seccomp_notif_resp *r = g->resp;
    memset(r, 0, g->resp_size);
    r->id = id;
    r->error = error;
    while (ioctl(g->fd, SECCOMP_IOCTL_NOTIF_SEND, r) < 0 && errno == EINTR) {
    }
}

static bool still_valid(struct net_guard *g, uint64_t id)
{
    return ioctl(g->fd, SECCOMP_IOCTL_NOTIF_ID_VALID, &id) == 0;
}

/* Connects the command's socket (our duplicate) to the address we read. A blocking
 * socket is made non-blocking for the call (the description is shared; the command
 * is inside connect meanwhile) and waits in the loop; returns 1 then, else the
 * answer (0 or -errno). */
static int connect_for(int sock, const struct sockaddr_storage *ss, socklen_t len)
{
    int fl = fcntl(sock, F_GETFL);
    if (fl < 0) return -errno;
    bool blocking = !(fl & O_NONBLOCK);
    if (blocking && fcntl(sock, F_SETFL, fl | O_NONBLOCK) < 0) return -errno;
    int rc = connect(sock, (const struct sockaddr *)ss, len) < 0 ? -errno : 0;
    if (blocking) (void)fcntl(sock, F_SETFL, fl);
    if (blocking && (rc == -EINPROGRESS || rc == -EALREADY)) return 1;
    return rc;
}

/* The init's effective capabilities off (on: back from its permitted set). The
 * command has none: a connect the init makes for it must not pass a check the
 * command would fail (a Unix socket's write permission, a netlink group). */
static void effective_caps(bool on)
{
    struct __user_cap_header_struct h = {.version = _LINUX_CAPABILITY_VERSION_3, .pid = 0};
    struct __user_cap_data_struct d[2];
    if (syscall(SYS_capget, &h, d) < 0) return;
    for (int i = 0; i < 2; i++)
        d[i].effective = on ? d[i].permitted : 0;
    (void)syscall(SYS_capset, &h, d);
}

/* The connect itself, as the command would make it: without the init's
 * capabilities, and a Unix socket's relative name from the caller's working
 * directory (the init is single-threaded: it goes there for the call). */
static int connect_as_caller(int sock, pid_t tid, const struct sockaddr_storage *ss, socklen_t len)
{
    const struct sockaddr_un *un = (const struct sockaddr_un *)ss;
    bool relative = ss->ss_family == AF_UNIX && len > offsetof(struct sockaddr_un, sun_path) &&
                    un->sun_path[0] != '/' && un->sun_path[0] != 0;
    if (relative) {
        char cwd[64];
        snprintf(cwd, sizeof cwd, "/proc/%d/cwd", (int)tid);
        if (chdir(cwd) < 0) return -errno;
    }
    effective_caps(false);
    int rc = connect_for(sock, ss, len);
    effective_caps(true);
    if (relative && chdir("/") < 0) return rc;
    return rc;
}

/* A pidfd of the calling thread's process, for pidfd_getfd. Since Linux 6.9 the
 * thread's own (PIDFD_THREAD); before, only a thread group leader has one (a
 * thread's id gets EINVAL or ENOENT), so a thread's is its leader's, used only when
 * both share one descriptor table. */
static int caller_pidfd(pid_t tid)
{
    int fd = (int)syscall(SYS_pidfd_open, tid, SB_PIDFD_THREAD);
    if (fd >= 0 || errno != EINVAL) return fd;
    char path[64], buf[1024];
    snprintf(path, sizeof path, "/proc/%d/status", (int)tid);
    int sf = open(path, O_RDONLY | O_CLOEXEC);
    ssize_t n = sf >= 0 ? read(sf, buf, sizeof buf - 1) : -1;
    if (sf >= 0) close(sf);
    const char *t = n > 0 ? (buf[n] = 0, strstr(buf, "\nTgid:")) : NULL;
    pid_t tgid = t ? (pid_t)strtol(t + 6, NULL, 10) : 0;
    if (tgid <= 0 || (tgid != tid && syscall(SYS_kcmp, tgid, tid, KCMP_FILES, 0, 0) != 0)) {
        errno = ESRCH;
        return -1;
    }
    return (int)syscall(SYS_pidfd_open, tgid, 0);
}

/* One connect(2) notification. The init makes every connect itself, whatever the
 * socket's family, on its own duplicate and with the address it read once: letting
 * the kernel continue the call would look the descriptor number up again, and
 * another task sharing the command's descriptor table could have put an IP socket
 * there meanwhile (the escape suite's connect_swap did, in about a hundred tries). */
static void serve_one(struct net_guard *g)
{
    struct seccomp_notif *req = g->req;
    memset(req, 0, g->req_size);
    if (ioctl(g->fd, SECCOMP_IOCTL_NOTIF_RECV, req) < 0) return; /* gone meanwhile */
    uint64_t id = req->id;
    int pidfd = caller_pidfd((pid_t)req->pid);
    /* The pid may have been reused before pidfd_open: the id says whether it is
     * still the caller. */
    if (pidfd < 0 || !still_valid(g, id)) {
        if (pidfd >= 0) close(pidfd);
        answer(g, id, -ESRCH);
        return;
    }
    int sock = (int)syscall(SYS_pidfd_getfd, pidfd, (int)req->data.args[0], 0);
    int err = sock < 0 ? -errno : 0;
    struct sockaddr_storage ss;
    uint64_t len = req->data.args[2] & 0xffffffffu;
    if (!err && len > sizeof ss) err = -EINVAL;
    if (!err && len) {
        struct iovec local = {&ss, (size_t)len};
        struct iovec remote = {(void *)(uintptr_t)req->data.args[1], (size_t)len};
        if (process_vm_readv((pid_t)req->pid, &local, 1, &remote, 1, 0) != (ssize_t)len)
            err = -EFAULT;
    }
    if (!still_valid(g, id)) goto out; /* the caller went while we read its memory */
    if (!err) err = net_guard_verdict(&ss, (size_t)len, own_ports_has);
    if (!err) err = connect_as_caller(sock, (pid_t)req->pid, &ss, (socklen_t)len);
    if (err == 1 && g->npending < NET_GUARD_MAX_PENDING) {
        g->pending[g->npending].id = id;
        g->pending[g->npending].sock = sock;
        g->npending++;
        sock = -1; /* kept until the connect completes */
    } else {
        answer(g, id, err == 1 ? -EAGAIN : err);
    }
out:
    if (sock >= 0) close(sock);
    close(pidfd);
}

void net_guard_serve(struct net_guard *g, const struct pollfd *p, int n)
{
    if (g->fd < 0 || n < 1) return;
    /* Pending connects first (their pollfds follow the listener's), last to first
     * so that removing one does not move one not yet looked at. */
    for (int i = n - 1; i >= 1; i--) {
        if (!p[i].revents) continue;
        int k = i - 1;
        int soerr = 0;
        socklen_t sl = sizeof soerr;
        if (getsockopt(g->pending[k].sock, SOL_SOCKET, SO_ERROR, &soerr, &sl) < 0) soerr = errno;
        answer(g, g->pending[k].id, -soerr);
        close(g->pending[k].sock);
        g->pending[k] = g->pending[--g->npending];
    }
    if (p[0].revents & POLLIN) serve_one(g);
}
