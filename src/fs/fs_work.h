/* fs_work: the work item shared by the fs request plumbing and the fs operations.
 *
 * fs_methods.c decodes a request into a struct fs_work and runs it on the libuv
 * thread pool or hands it to the session's sandbox helper; fs_ops.c holds the
 * blocking operation code (fs_ops_run) that fills in its result or error, whichever
 * side it runs on. Internal to src/fs. */
#ifndef EXEC_FS_FS_WORK_H
#define EXEC_FS_FS_WORK_H

#include <stdbool.h>
#include <stddef.h>
#include <pthread.h>
#include <stdint.h>
#include <uv.h>

#include "fs/fs_request.h"
#include "util/buf.h"

/* A session id kept by work that outlives its request's connection (fs_session_id). */
#define FS_SESSION_ID_LEN 40

#define FS_HANDLE_ID_MAX 32

struct rpc_req;
struct fs_sandbox;

/* An open file handle (fs/open), reference counted on the loop thread. */
struct fs_handle {
    int refs;
    int fd;
    /* Held by a pool thread for its pwrite: pipelined writeBlocks otherwise meet
     * on the inode's lock in the kernel, which spins while its owner copies (a
     * quarter of 5c's server time). A futex sleeps instead; decoding still overlaps. */
    pthread_mutex_t write_lock;
    size_t id_len;
    char id[FS_HANDLE_ID_MAX + 1];
    char *path; /* the file it was opened on, for the audit records (fs_audit.h), or NULL */
};

/* What kind of failure a message reports; fs_methods.c, which replies, gives each its
 * JSON-RPC code. */
enum fs_err_kind {
    FS_ERR_REFUSED = 1, /* the request cannot be served as asked (-32600) */
    FS_ERR_PARAMS,      /* the params do not hold up (-32602) */
    FS_ERR_INTERNAL,    /* the server failed (-32603) */
};

struct fs_work {
    uv_work_t w;
    struct rpc_req *req;
    /* What to do, as the handler validated it: all that crosses to the sandboxed
     * helper (fs_request.h). nofollow is followSymlinks:false (PROTOCOL.md section
     * 6.13), fsync ours (the file and its directory before the reply), replace
     * fs/open's mode "replace". */
    struct fs_request rq;
    uint64_t audit_bytes; /* the payload's decoded size, for its audit record */
    bool b64_writable;    /* rq.b64 is the request's own copy: may be decoded in place */
    /* open / readBlock */
    char hid[FS_HANDLE_ID_MAX + 1];
    size_t hid_len;
    int fd;
    struct fs_handle *h;
    uint64_t offset, len;
    bool replace; /* fs/open mode "replace" */
    /* writeFile: the file a replacing write displaced, still open (or -1). Its last
     * close frees the inode, which waits for writeback still in flight on its pages
     * (on ext4 the write before this one started it); closed after the reply, that
     * wait is off the request's path (docs/WRITE_PATH.md). */
    int displaced_fd;
    /* the read budget (fs_budget.h): room held, and room wanted when told to wait */
    size_t budget_held, budget_need;
    bool budget_wait;            /* ran into FS_BUDGET_WAIT: run again later */
    struct fs_work *next_parked; /* fs_methods.c's list of those waiting */
    /* outcome */
    struct buf out;        /* the reply message, begun on the loop thread */
    int err;               /* errno to report, or 0 */
    enum fs_err_kind kind; /* when msg is set */
    char *msg;             /* validation error text */
    /* sandboxed: run in the session's helper for this policy (fs/fs_helper_pool.h) */
    struct fs_sandbox *sb;            /* the sandbox to run in (fs_helper_pool.h), or NULL: owned by
                                         fs_methods.c's work, borrowed by capability discovery's */
    char sb_owner[FS_SESSION_ID_LEN]; /* the session id, for the audit records */
};

/* Records errno e (EIO for 0) as the outcome unless one is already recorded. */
void fs_work_set_err(struct fs_work *fw, int e);
/* Records a validation error (its kind and formatted text) unless one is recorded. */
void fs_work_set_msg(struct fs_work *fw, enum fs_err_kind kind, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Whether an error has been recorded. */
bool fs_work_failed(const struct fs_work *fw);

/* Runs fw's operation directly (blocking): on a pool thread, or inside the sandbox
 * helper. */
void fs_ops_run(struct fs_work *fw);
/* Runs fw (blocking, on a pool thread): in the session's sandbox helper when fw->sb
 * is set, else directly. The outcome is in fw as after fs_ops_run. */
void fs_work_run(struct fs_work *fw);

/* After a request served by a sandbox helper (on the loop thread): keeps the sweep
 * that retires idle helpers running. */
void fs_helper_sweep_arm(uv_loop_t *loop);

#endif
