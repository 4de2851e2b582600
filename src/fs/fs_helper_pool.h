/* fs_helper_pool: the daemon side of the sandboxed fs helper processes.
 *
 * A helper is a sandboxed child of the spawner that does not exec anything: once
 * confined by the policy it serves fs requests over a socketpair (fs_helper_run). A
 * helper is kept warm per policy and shared by the sessions using that policy, so
 * a sandboxed fs operation costs one round trip instead of a process start. Calls
 * are blocking and meant for the libuv thread pool; each helper serves one request
 * at a time (a mutex); when requests overlap a second helper is started for the
 * same policy, so two run in parallel and the rest queue. A helper found dead
 * before a request is replaced; one that dies during it fails that request.
 *
 * The wire between daemon and helper: frames (util/fdframe). The helper first
 * says "ok"; then request/reply frames, a reply may carry one fd for fs/open. */
#ifndef EXEC_FS_FS_HELPER_POOL_H
#define EXEC_FS_FS_HELPER_POOL_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sandbox/policy.h"
#include "util/buf.h"

#define FS_HELPER_FRAME_MAX (1u << 30)

/* Outcomes of fs_helper_pool_call besides 0. */
enum {
    FS_HELPER_CALL_UNENFORCEABLE = -1001, /* this host cannot sandbox (why says so) */
    FS_HELPER_CALL_DIED = -1002,          /* the helper died during the request */
    FS_HELPER_CALL_CLOSED = -1003,        /* the session is gone */
    FS_HELPER_CALL_NO_RESOURCES = -1004,  /* the helper could not start: something ran out */
    FS_HELPER_CALL_REFUSED = -1005,       /* the policy cannot be enforced on this tree */
};

/* A sandbox the fs helpers enforce: the request's policy, parsed once where the
 * request is decoded and handed as it is to the helper that starts for it, and the key
 * the helpers are shared by (the sandbox object as compact JSON with sorted keys, so
 * two requests that write one policy alike share them). Read-only once made: the
 * threads of one request may share it. */
struct fs_sandbox {
    char *key;
    struct sandbox_policy pol;
};

/* Decodes a request's sandbox object (NULL or JSON null: none) for an fs operation
 * that reads and/or writes. 0 with *out NULL when the operation runs unconfined (no
 * sandbox, or one that restricts neither), 0 with *out set (fs_sandbox_free) when it
 * must run in a helper; -EINVAL with *se filled when the policy does not parse. */
int fs_sandbox_decode(json_t *sandbox, bool reads, bool writes, struct fs_sandbox **out,
                      struct sandbox_error *se);
void fs_sandbox_free(struct fs_sandbox *sb);

/* Runs one request frame for session owner in the helper for sb, starting it when
 * needed. On 0 the reply frame is appended to *reply and *fd_out holds a
 * received fd (caller owns it) or -1. On failure returns an FS_HELPER_CALL_* code with a
 * message for the client in why. Blocking; thread-safe. */
int fs_helper_pool_call(const char *owner, const struct fs_sandbox *sb, const void *req,
                        size_t req_len, struct buf *reply, int *fd_out, char *why, size_t whyn);

/* A session ended: it uses its helpers no more (those no other session uses are
 * killed) and gets no new ones. */
void fs_helper_pool_release_owner(const char *owner);

/* The pid of the live helper for (owner, policy key), or -1 (tests, diagnostics). */
int fs_helper_pool_pid(const char *owner, const char *policy_json);
/* Retires the helpers idle for idle_ms or more (their placeholder directories go
 * with them). Blocking (reaps); returns how many helpers are left. */
int fs_helper_pool_sweep(int idle_ms);

/* How many helpers are alive (tests, metrics). */
int fs_helper_pool_count(void);

/* Frame I/O shared with the helper executable. Return 0 or -errno (-EPIPE at EOF). */
int fs_helper_frame_send(int fd, const void *p, size_t n, int pass_fd);
int fs_helper_frame_recv(int fd, struct buf *out, int *fd_out);

#endif
