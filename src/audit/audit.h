/* audit: the audit trail (--audit-log) and terminal recordings (--record-dir) of a
 * server or a registry, for an operator who wants to know afterwards what a client
 * did (docs/AUDIT.md: the record schema, the chain, rotation, what is never kept).
 *
 * The domain modules call this at the place each action is decided: one record per
 * action, its body written on the loop thread into a buf (audit_begin, the field
 * writers of audit_record.h, audit_commit) and nothing else done there. Records and
 * recording events are handed to one writer thread once per loop iteration (a
 * uv_prepare), which chains them (audit_chain.h), appends them to the log with one
 * write(2) per batch (at most 100 ms after their hand-over) and writes the recordings
 * (audit_cast.h). The loop never waits
 * for the disk. What is queued is bounded (AUDIT_RECORDS_MAX bytes of records,
 * AUDIT_QUEUE_MAX of recordings); past it records are dropped and counted, and an
 * audit.lost record says how many once there is room again.
 *
 * A log that cannot be written (a full disk, a file gone read-only) is said loudly
 * once per episode (log_error) and counted in /metrics; records wait in the bounded
 * queue and the writer tries again every second. With --audit-required, work is
 * refused meanwhile (audit_refusal: the JSON-RPC handlers reply an error before they
 * act). SIGHUP reopens the log at its path (logrotate's habit).
 *
 * All functions but audit_start and audit_stop are for the loop thread. Off (every
 * call a no-op returning NULL or false) until audit_start. */
#ifndef EXEC_AUDIT_AUDIT_H
#define EXEC_AUDIT_AUDIT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "audit/audit_record.h"
#include "util/buf.h"

/* Bytes in flight to the writer, bounded apart so that a terminal flooding its
 * recording never takes the room of the log's records. */
#define AUDIT_RECORDS_MAX (16u << 20) /* records */
#define AUDIT_QUEUE_MAX (64u << 20)   /* recordings' output and input */

struct audit_options {
    const char *log_path;   /* --audit-log: the file (created 0600), or NULL */
    const char *record_dir; /* --record-dir: the directory of recordings, or NULL */
    bool required;          /* --audit-required: refuse work while records cannot be written */
    bool record_input;      /* --record-input: recordings carry what the client typed */
    bool fs_reads;          /* --audit-fs-reads: fs reads are recorded too */
    const char *program;    /* who writes: "exec-server", "exec-server registry" */
};

/* Opens the log (its tail continues the chain: a restart goes on where the last run
 * stopped), checks the recording directory and starts the writer thread. loop is
 * where records are handed over once per iteration; NULL for a command that writes
 * a few records and stops (they go at once). Returns 0, or a negative errno with the
 * user's message in err. The server calls it once its spawner is started, so that
 * process is not forked while the writer thread holds a lock. */
int audit_start(uv_loop_t *loop, const struct audit_options *o, char *err, size_t errlen);
/* Hands everything over, waits for the writer to write it (at most a few seconds:
 * a hung disk does not stop an exit) and stops the thread. */
void audit_stop(void);
/* SIGHUP: the writer reopens the log at its path (after writing what it has to the
 * old one); the chain goes on in the new file. */
void audit_reopen(void);

bool audit_enabled(void);   /* a log is being written */
bool audit_recording(void); /* PTY processes are recorded */
bool audit_fs_reads(void);  /* --audit-fs-reads */
/* With --audit-required, while records cannot be written (the writer failed, or the
 * queue is full): why, for the refusal's message (and the refusal is counted);
 * otherwise NULL. */
const char *audit_refusal(void);

/* A new record of this type (a static name, "process.start"), its time taken now:
 * add fields with audit_put_* and hand it over with audit_commit. NULL when there is
 * no log. */
struct buf *audit_begin(const char *type);
/* Queues the record audit_begin gave (it is not to be touched again). */
void audit_commit(struct buf *record);

/* ---- terminal recordings ---- */

struct audit_tty;
/* A recording of a PTY process that starts now with a terminal of rows x cols:
 * NULL when recording is off. The file is DIR/<session>.<process>.<start ms>.cast
 * (the process id with bytes outside [A-Za-z0-9._-] as %XX); created by the writer. */
struct audit_tty *audit_tty_open(const char *session, const char *process_id, unsigned rows,
                                 unsigned cols, char *const *argv);
/* The file's name in the directory (for the process.start record). */
const char *audit_tty_name(const struct audit_tty *t);
/* Output the process wrote, borrowed, not copied: release(ctx) is called once the
 * writer is done with it, on the writer thread (or at once, here, when the bytes are
 * dropped for want of room). */
void audit_tty_output(struct audit_tty *t, const void *data, size_t len, void (*release)(void *),
                      void *ctx);
/* What the client typed (copied); ignored unless --record-input. */
void audit_tty_input(struct audit_tty *t, const void *data, size_t len);
void audit_tty_resize(struct audit_tty *t, unsigned rows, unsigned cols);
/* Bytes of output left out of the recording so far for want of room. */
uint64_t audit_tty_lost(const struct audit_tty *t);
/* The recording ends (the writer closes the file and frees t). */
void audit_tty_close(struct audit_tty *t);

/* The audit families of /metrics, named prefix_audit_... (exec_server, exec_registry). */
void audit_metrics_render(struct buf *out, const char *prefix);

#endif
