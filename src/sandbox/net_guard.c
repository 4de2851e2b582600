/* net_guard: a network-enabled sandbox's connect(2), decided by its init (see
 * net_guard.h). Runs in the init only: a fork of the spawner, single-threaded, so
 * it may allocate. */
#include "sandbox/net_guard.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/seccomp.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include "core/own_ports.h"

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
        if (len < sizeof(struct sockaddr_in6)) return -EINVAL;
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

/* Answers notification id with error (0 or -errno), or lets it continue. A target
 * that is gone meanwhile (ENOENT) needs no answer. */
static void answer(struct net_guard *g, uint64_t id, int error, bool cont)
{
    struct seccomp_notif_resp *r = g->resp;
    memset(r, 0, g->resp_size);
    r->id = id;
    r->error = cont ? 0 : error;
    r->flags = cont ? SECCOMP_USER_NOTIF_FLAG_CONTINUE : 0;
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

/* One connect(2) notification. */
static void serve_one(struct net_guard *g)
{
    struct seccomp_notif *req = g->req;
    memset(req, 0, g->req_size);
    if (ioctl(g->fd, SECCOMP_IOCTL_NOTIF_RECV, req) < 0) return; /* gone meanwhile */
    uint64_t id = req->id;
    int pidfd = (int)syscall(SYS_pidfd_open, req->pid, 0);
    /* The pid may have been reused before pidfd_open: the id says whether it is
     * still the caller. */
    if (pidfd < 0 || !still_valid(g, id)) {
        if (pidfd >= 0) close(pidfd);
        answer(g, id, -ESRCH, false);
        return;
    }
    int sock = (int)syscall(SYS_pidfd_getfd, pidfd, (int)req->data.args[0], 0);
    int err = sock < 0 ? -errno : 0;
    int dom = 0;
    socklen_t dl = sizeof dom;
    if (!err && getsockopt(sock, SOL_SOCKET, SO_DOMAIN, &dom, &dl) < 0) err = -errno;
    if (!err && dom != AF_INET && dom != AF_INET6) {
        /* Unix, netlink...: no port of ours there, and the socket's family cannot
         * change, so the kernel may carry on with the call as it is. */
        answer(g, id, 0, true);
        goto out;
    }
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
    if (!err) err = connect_for(sock, &ss, (socklen_t)len);
    if (err == 1 && g->npending < NET_GUARD_MAX_PENDING) {
        g->pending[g->npending].id = id;
        g->pending[g->npending].sock = sock;
        g->npending++;
        sock = -1; /* kept until the connect completes */
    } else {
        answer(g, id, err == 1 ? -EAGAIN : err, false);
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
        answer(g, g->pending[k].id, -soerr, false);
        close(g->pending[k].sock);
        g->pending[k] = g->pending[--g->npending];
    }
    if (p[0].revents & POLLIN) serve_one(g);
}
