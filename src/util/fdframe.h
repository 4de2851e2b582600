/* fdframe: length-prefixed frames over a stream socket, with file descriptors.
 *
 * A frame is a 4-byte native-endian length and that many bytes; up to
 * FDFRAME_MAX_FDS descriptors ride along (SCM_RIGHTS) with its first bytes. Both
 * ends are processes of this program on one machine (the daemon and its spawner,
 * the daemon and a sandbox helper), so native byte order is the wire order.
 * Calls block (but fdframe_send_part); callers serialise use of one socket
 * themselves. */
#ifndef EXEC_UTIL_FDFRAME_H
#define EXEC_UTIL_FDFRAME_H

#include <stddef.h>
#include <sys/types.h>

#include "util/buf.h"

#define FDFRAME_MAX_FDS 16
#define FDFRAME_MAX_LEN (1u << 30)

/* Sends p[0..n) with fds[0..nfds). Returns 0 or -errno (-EMSGSIZE when too long). */
int fdframe_send(int sock, const void *p, size_t n, const int *fds, int nfds);

/* The same without blocking, for a caller that queues what does not fit (the loop
 * thread's spawner channel). The frame is built whole first: fdframe_begin
 * appends the length's placeholder at b->len (remember it as start), the payload
 * follows, fdframe_end(b, start) fills the length in. fdframe_send_part sends
 * from byte off what the socket takes in one sendmsg (MSG_DONTWAIT); the fds ride
 * with byte 0, so they are passed only with off 0 and belong to the receiver once
 * anything was sent. Returns the bytes sent (0: no room, nothing sent, the fds
 * still the caller's) or -errno (-EPIPE: the peer is gone). */
void fdframe_begin(struct buf *b);
void fdframe_end(struct buf *b, size_t start);
ssize_t fdframe_send_part(int sock, const void *frame, size_t len, size_t off, const int *fds,
                          int nfds);

/* Receives one frame, appending its bytes to *out. Received descriptors (close-on-exec)
 * go to fds[0..*nfds) up to maxfds; extra ones are closed. Returns 0, -EPIPE at a
 * clean end of stream, or -errno; on failure no descriptor is left open. */
int fdframe_recv(int sock, struct buf *out, int *fds, int maxfds, int *nfds);

/* One tag byte with a few descriptors, the smallest message that hands descriptors
 * over (a sandbox's init passing a connection, or transparent TCP's device and
 * sockets, to the proxy; a command passing its seccomp listener to the init). At
 * most FDFRAME_TAGGED_MAX. Only system calls: async-signal-safe. Returns 0 or
 * -errno. */
#define FDFRAME_TAGGED_MAX 4
int fdframe_send_tagged(int sock, char tag, const int *fds, int nfds);

/* Receives one such message (flags as for recvmsg, MSG_CMSG_CLOEXEC added). Returns
 * 1 with *tag and fds[0..*nfds) (extra ones past maxfds are closed), 0 at the end of
 * the stream, or -errno. */
int fdframe_recv_tagged(int sock, int flags, char *tag, int *fds, int maxfds, int *nfds);

#endif
