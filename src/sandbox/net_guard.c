/* net_guard: a network-enabled sandbox's connect(2), decided by its init (see
 * net_guard.h). Runs in the init only: a fork of the spawner, single-threaded, so
 * it may allocate. */
#include "sandbox/net_guard.h"

#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <unistd.h>

#include "core/own_ports.h"
#include "sandbox/notify.h"

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

int net_guard_pollfds(const struct net_guard *g, struct pollfd *p, int max)
{
    int n = 0;
    for (int i = 0; i < g->npending && n < max; i++)
        p[n++] = (struct pollfd){g->pending[i].sock, POLLOUT, 0};
    return n;
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
    notify_effective_caps(false);
    int rc = connect_for(sock, ss, len);
    notify_effective_caps(true);
    if (relative && chdir("/") < 0) return rc;
    return rc;
}

/* A managed network without a namespace of its own: the command may reach the proxy's
 * ports on loopback only, and reaches them at the init's relay listeners (the port it
 * was told is the one its own namespace would have had). Rewrites *ss to the relay's
 * address, or returns -ECONNREFUSED. */
static int proxy_only_target(const struct net_guard *g, struct sockaddr_storage *ss, socklen_t len)
{
    uint16_t port = 0;
    bool loopback = false;
    if (ss->ss_family == AF_INET && len >= sizeof(struct sockaddr_in)) {
        struct sockaddr_in *a = (struct sockaddr_in *)ss;
        port = ntohs(a->sin_port);
        loopback = ntohl(a->sin_addr.s_addr) == INADDR_LOOPBACK;
    } else if (ss->ss_family == AF_INET6 && len >= offsetof(struct sockaddr_in6, sin6_scope_id)) {
        struct sockaddr_in6 *a = (struct sockaddr_in6 *)ss;
        port = ntohs(a->sin6_port);
        loopback = IN6_IS_ADDR_LOOPBACK(&a->sin6_addr);
    }
    for (int i = 0; i < 2 && loopback; i++) {
        if (!port || port != g->proxy_ports[i] || !g->relay_ports[i]) continue;
        if (ss->ss_family == AF_INET)
            ((struct sockaddr_in *)ss)->sin_port = htons(g->relay_ports[i]);
        else
            ((struct sockaddr_in6 *)ss)->sin6_port = htons(g->relay_ports[i]);
        return 0;
    }
    return -ECONNREFUSED;
}

/* One connect(2) notification. The init makes every connect itself, whatever the
 * socket's family, on its own duplicate and with the address it read once: letting
 * the kernel continue the call would look the descriptor number up again, and
 * another task sharing the command's descriptor table could have put an IP socket
 * there meanwhile (the escape suite's connect_swap did, in about a hundred tries). */
void net_guard_connect(struct net_guard *g, struct notify *nf, const struct notify_call *c)
{
    uint64_t id = c->n->id;
    int sock = notify_getfd(c, (int)c->n->data.args[0]);
    int err = sock < 0 ? sock : 0;
    struct sockaddr_storage ss;
    uint64_t len = c->n->data.args[2] & 0xffffffffu;
    if (!err && len > sizeof ss) err = -EINVAL;
    if (!err && len) err = notify_read(c, c->n->data.args[1], &ss, (size_t)len);
    if (!notify_valid(nf, id)) goto out; /* the caller went while we read its memory */
    if (!err && g->proxy_only) err = proxy_only_target(g, &ss, (socklen_t)len);
    if (!err) err = net_guard_verdict(&ss, (size_t)len, own_ports_has);
    if (!err) err = connect_as_caller(sock, c->tid, &ss, (socklen_t)len);
    if (err == 1 && g->npending < NET_GUARD_MAX_PENDING) {
        g->pending[g->npending].id = id;
        g->pending[g->npending].sock = sock;
        g->npending++;
        sock = -1; /* kept until the connect completes */
    } else {
        notify_answer(nf, id, err == 1 ? -EAGAIN : err, 0);
    }
out:
    if (sock >= 0) close(sock);
}

void net_guard_serve_pending(struct net_guard *g, struct notify *nf, const struct pollfd *p, int n)
{
    /* last to first, so that removing one does not move one not yet looked at */
    for (int k = n - 1; k >= 0; k--) {
        if (!p[k].revents) continue;
        int soerr = 0;
        socklen_t sl = sizeof soerr;
        if (getsockopt(g->pending[k].sock, SOL_SOCKET, SO_ERROR, &soerr, &sl) < 0) soerr = errno;
        notify_answer(nf, g->pending[k].id, -soerr, 0);
        close(g->pending[k].sock);
        g->pending[k] = g->pending[--g->npending];
    }
}
