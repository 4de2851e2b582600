/* fdframe: length-prefixed frames with SCM_RIGHTS descriptors (see fdframe.h). */
#include "util/fdframe.h"

#include <errno.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

/* The rest of a frame, with sendmsg like its start: the sandboxed fs helper's
 * filter allows sendmsg on its socket and nothing that addresses one (send() is
 * sendto(2), which a no-network sandbox denies: every reply over 64 KiB failed). */
static int write_all(int fd, const char *p, size_t n)
{
    while (n) {
        struct iovec iov = {(void *)p, n};
        struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1};
        ssize_t w = sendmsg(fd, &mh, MSG_NOSIGNAL);
        if (w < 0) {
            if (errno == EINTR) continue;
            return -errno;
        }
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

static int read_all(int fd, char *p, size_t n)
{
    while (n) {
        ssize_t r = read(fd, p, n);
        if (r < 0) {
            if (errno == EINTR) continue;
            return -errno;
        }
        if (r == 0) return -EPIPE;
        p += r;
        n -= (size_t)r;
    }
    return 0;
}

/* Room for the most descriptors a frame carries, aligned for cmsghdr. */
union fdframe_cmsg {
    char buf[CMSG_SPACE(sizeof(int) * FDFRAME_MAX_FDS)];
    struct cmsghdr align;
};

/* Attaches fds[0..nfds) to mh as one SCM_RIGHTS message in u (memset and memcpy
 * only: async-signal-safe, for fdframe_send_tagged). */
static void put_fds(struct msghdr *mh, union fdframe_cmsg *u, const int *fds, int nfds)
{
    if (nfds <= 0) return;
    memset(u, 0, sizeof *u);
    mh->msg_control = u->buf;
    mh->msg_controllen = CMSG_SPACE(sizeof(int) * (size_t)nfds);
    struct cmsghdr *cm = CMSG_FIRSTHDR(mh);
    cm->cmsg_level = SOL_SOCKET;
    cm->cmsg_type = SCM_RIGHTS;
    cm->cmsg_len = CMSG_LEN(sizeof(int) * (size_t)nfds);
    memcpy(CMSG_DATA(cm), fds, sizeof(int) * (size_t)nfds);
}

int fdframe_send(int sock, const void *p, size_t n, const int *fds, int nfds)
{
    if (n > FDFRAME_MAX_LEN || nfds < 0 || nfds > FDFRAME_MAX_FDS) return -EMSGSIZE;
    uint32_t len = (uint32_t)n;
    /* The length and the first part of the payload go in one sendmsg with the fds,
     * so a short frame is a single system call. */
    size_t first = n < 65536 ? n : 65536;
    struct iovec iov[2] = {{&len, sizeof len}, {(void *)p, first}};
    union fdframe_cmsg u;
    struct msghdr mh = {.msg_iov = iov, .msg_iovlen = first ? 2 : 1};
    put_fds(&mh, &u, fds, nfds);
    ssize_t w;
    do {
        w = sendmsg(sock, &mh, MSG_NOSIGNAL);
    } while (w < 0 && errno == EINTR);
    if (w < 0) return -errno;
    size_t sent = (size_t)w;
    if (sent < sizeof len) {
        int rc = write_all(sock, (char *)&len + sent, sizeof len - sent);
        if (rc) return rc;
        sent = sizeof len;
    }
    sent -= sizeof len;
    return write_all(sock, (const char *)p + sent, n - sent);
}

void fdframe_begin(struct buf *b)
{
    uint32_t len = 0;
    buf_append(b, &len, sizeof len);
}

void fdframe_end(struct buf *b, size_t start)
{
    uint32_t len = (uint32_t)(b->len - start - sizeof len);
    memcpy(b->data + start, &len, sizeof len);
}

ssize_t fdframe_send_part(int sock, const void *frame, size_t len, size_t off, const int *fds,
                          int nfds)
{
    if (nfds < 0 || nfds > FDFRAME_MAX_FDS || (off && nfds)) return -EINVAL;
    /* One sendmsg at most: the rest waits for the socket to have room. */
    size_t n = len - off < 65536 ? len - off : 65536;
    struct iovec iov = {(char *)frame + off, n};
    union fdframe_cmsg u;
    struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1};
    put_fds(&mh, &u, fds, nfds);
    ssize_t w;
    do {
        w = sendmsg(sock, &mh, MSG_NOSIGNAL | MSG_DONTWAIT);
    } while (w < 0 && errno == EINTR);
    if (w < 0) return errno == EAGAIN || errno == EWOULDBLOCK ? 0 : -errno;
    return w;
}

/* Takes the descriptors of mh's SCM_RIGHTS messages into fds[*nfds..maxfds) and
 * closes those past maxfds, so none is left open unseen (both receivers). */
static void take_fds(struct msghdr *mh, int *fds, int maxfds, int *nfds)
{
    for (struct cmsghdr *cm = CMSG_FIRSTHDR(mh); cm; cm = CMSG_NXTHDR(mh, cm)) {
        if (cm->cmsg_level != SOL_SOCKET || cm->cmsg_type != SCM_RIGHTS) continue;
        size_t k = (cm->cmsg_len - CMSG_LEN(0)) / sizeof(int);
        for (size_t i = 0; i < k; i++) {
            int got;
            memcpy(&got, CMSG_DATA(cm) + i * sizeof(int), sizeof got);
            if (*nfds < maxfds)
                fds[(*nfds)++] = got;
            else
                close(got);
        }
    }
}

int fdframe_recv(int sock, struct buf *out, int *fds, int maxfds, int *nfds)
{
    *nfds = 0;
    uint32_t len;
    struct iovec iov = {&len, sizeof len};
    union {
        char buf[CMSG_SPACE(sizeof(int) * FDFRAME_MAX_FDS)];
        struct cmsghdr align;
    } u;
    struct msghdr mh = {
        .msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.buf, .msg_controllen = sizeof u.buf};
    ssize_t r;
    do {
        r = recvmsg(sock, &mh, MSG_CMSG_CLOEXEC);
    } while (r < 0 && errno == EINTR);
    if (r < 0) return -errno;
    if (r == 0) return -EPIPE;
    take_fds(&mh, fds, maxfds, nfds);
    int rc = 0;
    if (mh.msg_flags & MSG_CTRUNC) rc = -EMSGSIZE;
    if (!rc && (size_t)r < sizeof len)
        rc = read_all(sock, (char *)&len + r, sizeof len - (size_t)r);
    if (!rc && len > FDFRAME_MAX_LEN) rc = -EMSGSIZE;
    if (!rc) rc = read_all(sock, buf_extend(out, len), len);
    if (rc) {
        for (int i = 0; i < *nfds; i++)
            close(fds[i]);
        *nfds = 0;
    }
    return rc;
}

int fdframe_send_tagged(int sock, char tag, const int *fds, int nfds)
{
    if (nfds < 1 || nfds > FDFRAME_TAGGED_MAX) return -EINVAL;
    struct iovec iov = {&tag, 1};
    union fdframe_cmsg u;
    struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1};
    put_fds(&mh, &u, fds, nfds);
    ssize_t w;
    do {
        w = sendmsg(sock, &mh, MSG_NOSIGNAL);
    } while (w < 0 && errno == EINTR);
    return w == 1 ? 0 : w < 0 ? -errno : -EIO;
}

int fdframe_recv_tagged(int sock, int flags, char *tag, int *fds, int maxfds, int *nfds)
{
    *nfds = 0;
    struct iovec iov = {tag, 1};
    union {
        char buf[CMSG_SPACE(sizeof(int) * FDFRAME_TAGGED_MAX)];
        struct cmsghdr align;
    } u;
    struct msghdr mh = {
        .msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.buf, .msg_controllen = sizeof u.buf};
    ssize_t n;
    do {
        n = recvmsg(sock, &mh, flags | MSG_CMSG_CLOEXEC);
    } while (n < 0 && errno == EINTR);
    if (n < 0) return -errno;
    take_fds(&mh, fds, maxfds, nfds);
    return n > 0 ? 1 : 0;
}
