/* helper: the daemon side of the sandboxed fs helper processes.
 *
 * A helper is the small executable exec-sandbox-helper (next to the daemon binary)
 * that confines itself once with a policy and then serves fs requests over a
 * socketpair. One helper is kept warm per (session, policy) and reused, so a
 * sandboxed fs operation costs one round trip instead of a process start. Calls are
 * blocking and meant for the libuv thread pool; each helper serves one request at a
 * time (a mutex); when requests overlap a second helper is started for the same key,
 * so two run in parallel and the rest queue. A helper that dies fails its
 * in-flight request with a clear error and is replaced on the next call.
 *
 * The wire between daemon and helper: frames of a 4-byte native-endian length and
 * that many bytes. First the daemon sends the policy (the sandbox JSON) and the
 * helper answers "ok" or an error text; then request/reply frames, a reply may
 * carry one fd (SCM_RIGHTS) for fs/open. */
#ifndef EXEC_SANDBOX_HELPER_H
#define EXEC_SANDBOX_HELPER_H

#include <stddef.h>
#include <stdint.h>

#include "util/buf.h"

#define SB_FRAME_MAX (1u << 30)
#define SB_HELPER_NAME "exec-sandbox-helper"

/* Outcomes of sandbox_helper_call besides 0. */
enum {
    SB_CALL_UNENFORCEABLE = -1001, /* the helper could not confine itself (or not start) */
    SB_CALL_DIED = -1002,          /* the helper died during the request */
    SB_CALL_CLOSED = -1003,        /* the session is gone */
};

/* Runs one request frame in the helper for (owner, policy_json), starting it when
 * needed. On 0 the reply frame is appended to *reply and *fd_out holds a received
 * fd (caller owns it) or -1. Blocking; thread-safe. */
int sandbox_helper_call(const char *owner, const char *policy_json, const void *req,
                        size_t req_len, struct buf *reply, int *fd_out);

/* Kills every helper of owner (a session id) and refuses new ones for it. Called
 * when the session ends. */
void sandbox_helper_release_owner(const char *owner);

/* The pid of the live helper for (owner, policy_json), or -1 (tests, diagnostics). */
int sandbox_helper_pid(const char *owner, const char *policy_json);

/* Frame I/O shared with the helper executable. Return 0 or -errno (-EPIPE at EOF). */
int sandbox_frame_send(int fd, const void *p, size_t n, int pass_fd);
int sandbox_frame_recv(int fd, struct buf *out, int *fd_out);

#endif
