/* proc_internal: the process record, shared by the model and the handlers.
 *
 * proc.c owns the model and its lifecycle (table, output, exit, close, eviction,
 * the stdin queue) and reports its events through struct proc_events; proc_rpc.c
 * is the session's sink for them (notifications, long-poll reads, viewers);
 * start_methods.c has process/start (one struct proc_start, proc_start.h),
 * process_methods.c the other JSON-RPC handlers (read, write, terminate...) and
 * tty_methods.c the terminal and stdin controls that are ours (resize,
 * closeStdin, any signal). Nothing outside src/process includes this header. */
#ifndef EXEC_PROCESS_PROC_INTERNAL_H
#define EXEC_PROCESS_PROC_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include <uv.h>

#include "process/event_log.h"
#include "process/proc_start.h"
#include "process/process.h"
#include "util/buf.h"

#define READ_CHUNK 8192        /* largest output chunk (PROTOCOL.md 5.1.2) */
#define READ_BATCH (64 * 1024) /* one read() empties a default-sized pipe... */
#define READS_PER_WAKEUP 4     /* ...fairness: at most 256 KiB per fd per loop turn */
#define MAX_WRITE_IDS 4096     /* remembered writeIds per process, like the reference */
#define PTY_DRAIN_MS 1000      /* after exit, how long a PTY may stay open (grandchild) */

struct proc;
struct conn;
struct audit_tty;

struct proc_viewer; /* proc_rpc.c */
struct waiter;      /* proc_rpc.c */
struct rpc_req;

struct out_src {
    struct proc *p;
    int fd; /* -1 once at EOF */
    uv_poll_t poll;
    bool polling;
    enum log_stream stream;
};

struct wq_item {
    struct wq_item *next;
    size_t off, len;
    uint8_t data[];
};

/* Where a process is in its life, only ever forward (tmux's job.c has the same
 * three): RUNNING until its exit status is known; EXITED once it is (process/exited
 * sent) while output may still be draining; CLOSED once every output fd has
 * drained (process/closed sent), kept PROC_RETAIN_MS for reads, then evicted.
 * Orthogonal to it: `terminated` (SIGKILL sent) and `paused` (output readers
 * stopped for flow control). */
enum proc_state { PROC_RUNNING, PROC_EXITED, PROC_CLOSED };

struct proc {
    struct proc *next, *prev;
    struct proc_table *table;
    char *id;
    struct buf id_json; /* the processId as a quoted JSON string, written once */
    bool tty;
    pid_t pid;
    int pidfd;
    uv_poll_t pid_poll;
    bool pid_open;
    int group_fd; /* after the leader's reaping: its pidfd, kept while its group has
                     members (a group never outlives its entry), else -1 */
    struct out_src out[2];
    int nout;
    int in_fd; /* -1 when the child has no writable stdin */
    bool had_stdin;
    bool eof_requested; /* process/closeStdin: no more writes; a pipe closes once
                           its queue drains, a PTY got its VEOF byte queued */
    uv_poll_t in_poll;
    bool in_polling, in_init;
    struct wq_item *wq_head, *wq_tail;
    enum proc_state state;
    bool terminated;           /* process/terminate sent SIGKILL */
    struct sandbox_hold *hold; /* placeholders and cgroup, held while its sandbox may live */
    bool paused;               /* output readers stopped: the connection is congested */
    int exit_code;
    bool sandboxed;              /* a sandbox was applied to the child */
    bool ends_itself;            /* a sandbox without namespaces (spawn.h) */
    uint64_t start_ns;           /* spawn time, for the process duration metric */
    uint64_t started_ms;         /* spawn time on the wall clock, for process/list */
    char **argv;                 /* the argv asked for (NULL-terminated), for process/list */
    char *cwd;                   /* its working directory, for process/list */
    struct proc_viewer *viewers; /* other connections following its events */
    bool sandbox_denied;         /* PROTOCOL.md 10.5, computed at exit */
    uint64_t exit_seq, close_seq;
    uv_timer_t timer; /* PTY drain deadline, then the eviction timer */
    struct event_log log;
    char **write_ids; /* ring of the last MAX_WRITE_IDS accepted writeIds */
    size_t nwrite_ids, write_ids_next;
    struct waiter *waiters;
    int handles; /* open uv handles; freed when it reaches zero */
    bool freeing;
    struct netproxy *netproxy; /* its managed-network proxy, released at close */
    /* The audit trail (proc_audit.c): */
    struct audit_tty *tty_rec; /* a PTY's recording (--record-dir), or NULL */
    uint64_t out_bytes;        /* output bytes read, for process.end */
    uint64_t exit_ns;          /* when its exit status came (metrics_now_ns) */
    int exit_signal;           /* the signal that ended it, or 0 */
    bool audit_ended;          /* process.end is written */
};

/* What the table tells its owner, each called on the loop thread as it happens
 * (the session's sink is in proc_rpc.c). The output path calls `output` once per
 * chunk with the chunk in the log, nothing copied, then `progressed` once per read
 * batch; between batch_begin and batch_end are the batch's outputs. */
struct proc_events {
    void (*output)(struct proc *p, struct log_chunk *c); /* c: p's newest chunk */
    void (*progressed)(struct proc *p);                  /* p's log grew by a batch */
    void (*exited)(struct proc *p);  /* exit_code, sandbox_denied, exit_seq are set */
    void (*closed)(struct proc *p);  /* every output fd drained; close_seq is set */
    void (*leaving)(struct proc *p); /* p leaves its table (evicted, or the table ends) */
    void *(*batch_begin)(struct proc_table *t); /* its result goes to batch_end */
    void (*batch_end)(void *token);
    /* Whether the consumer is congested: the readers pause until
     * proc_table_resume_output, and the children block on full pipes. */
    bool (*congested)(const struct proc_table *t);
};

struct proc_table {
    const struct proc_events *events;
    void *owner;          /* the events' owner (proc_rpc.c: the session) */
    const char *owner_id; /* names the owner in log lines */
    struct proc *head;
    struct proc_start *starting; /* starts in their spawn window */
    /* Ends one of them when the table is destroyed (set by start_methods.c, which
     * owns the starts, with the first one). */
    void (*abandon_start)(struct proc_start *ps);
};

struct spawn_result;

/* The process `id` of table t, or NULL. */
struct proc *proc_find(struct proc_table *t, const char *id);
/* The start of process `id` in its spawn window, or NULL. */
struct proc_start *proc_starting(struct proc_table *t, const char *id);
/* Processes of t that have not closed yet, starts in flight included (what
 * --max-processes counts). */
unsigned proc_table_live(const struct proc_table *t);
/* The same over every table of the server (what --max-total-processes counts). */
unsigned proc_live_total(void);
/* Records a spawned child in t (owned by t from now on) with its handles set up
 * but not yet watched: the caller replies to process/start first, then calls
 * proc_watch so no notification precedes the response. */
struct proc *proc_add(struct proc_table *t, const char *id, bool tty, bool sandboxed,
                      const struct spawn_result *sr, uv_loop_t *loop);
void proc_watch(struct proc *p);
/* Whether a read after `after` has something to return now (or the end). */
bool proc_read_ready(const struct proc *p, uint64_t after);
/* Queues decoded stdin bytes (takes it; dropped when the child has no stdin or
 * it is empty) and writes what the pipe takes now. */
void proc_stdin_push(struct proc *p, struct wq_item *it);
/* Closes the child's stdin (idempotent). */
void proc_close_stdin(struct proc *p);
/* process/terminate: SIGKILL to the process group, stdin closed. */
void proc_kill(struct proc *p);
/* Writes queued stdin bytes without blocking; polls for writability when the
 * child is not reading. Closes stdin once the queue is empty if EOF was asked. */
void proc_stdin_flush(struct proc *p);

/* ---- proc_rpc.c, for the handlers ---- */

/* Answers a process/read from p's event log (takes req). */
void proc_reply_read(struct rpc_req *req, struct proc *p, uint64_t after, bool has_max,
                     uint64_t max_bytes);
/* Parks a process/read (takes req) until p has something after `after` or wait_ms
 * passes, then answers it like proc_reply_read. */
void proc_wait_read(struct rpc_req *req, struct proc *p, uint64_t after, bool has_max,
                    uint64_t max_bytes, uint64_t wait_ms);
/* Makes connection c (not the session's own) a viewer of p: every later event of p
 * is also pushed to c, carrying `sessionId`. Idempotent. */
void proc_view_add(struct proc *p, struct conn *c);
/* The table a request addresses: its own session's, or with a `sessionId` (ours)
 * another session its client may see (session_visible). Replies -32600 `unknown
 * session id` and returns NULL otherwise. */
struct proc_table *proc_request_table(struct rpc_req *req, const char *session_id);
/* The process `id` of that table, or NULL after replying -32600 (`unknown session id`,
 * or `unknown process id <id>`). */
struct proc *proc_request_proc(struct rpc_req *req, const char *session_id, const char *id);

/* ---- proc_audit.c: the audit trail and the recordings (audit/audit.h) ---- */

struct sandbox_policy;
struct json_t;
/* The launch's part of process.start (the request's env names, the sandbox in
 * short) into out; nothing when there is no log. */
void proc_audit_describe(struct buf *out, struct json_t *env, const struct sandbox_policy *pol,
                         bool proxy);
/* p started from ps: opens its recording (a PTY, --record-dir) and writes process.start. */
void proc_audit_started(struct proc *p, const struct proc_start *ps, const char *session);
/* ps did not start: process.start with its error. */
void proc_audit_failed(const struct proc_start *ps, const char *session, const char *error);
/* Lends output chunk c to p's recording (p->tty_rec is set). */
void proc_audit_output(struct proc *p, struct log_chunk *c);
/* process.end (once): exited and drained, or reason; closes the recording. */
void proc_audit_end(struct proc *p, const char *reason);
/* process.terminate / process.signal (type) sent sig to p. */
void proc_audit_signal(struct proc *p, const char *type, int sig);

/* tty_methods.c: the extension methods and the start-time size. */
struct pdec;
/* Decodes process/start's optional `size: {rows, cols}` (ours; each 1-65535). */
void proc_decode_size(struct pdec *d, unsigned short *rows, unsigned short *cols);
void proc_handle_resize(struct rpc_req *req);
void proc_handle_close_stdin(struct rpc_req *req);
void proc_handle_signal(struct rpc_req *req);

#endif
