/* audit_internal: what the loop side (audit.c) and the writer thread (audit_writer.c)
 * share: the items handed over, one recording's state, the counters. Private to
 * src/audit. */
#ifndef EXEC_AUDIT_AUDIT_INTERNAL_H
#define EXEC_AUDIT_AUDIT_INTERNAL_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "audit/audit.h"
#include "audit/audit_cast.h"
#include "util/buf.h"

enum audit_item_kind {
    AUDIT_ITEM_RECORD,     /* body: a record's body (audit_record.h) */
    AUDIT_ITEM_TTY_OPEN,   /* body: the recording's header line */
    AUDIT_ITEM_TTY_OUTPUT, /* data, len: borrowed output, release(ctx) when done */
    AUDIT_ITEM_TTY_INPUT,  /* body: the bytes typed */
    AUDIT_ITEM_TTY_RESIZE, /* rows, cols */
    AUDIT_ITEM_TTY_CLOSE,  /* the writer closes the file and frees tty */
    AUDIT_ITEM_REOPEN,     /* SIGHUP: the log is opened again at its path */
};

/* One thing handed to the writer; made on the loop thread, freed by the writer. */
struct audit_item {
    struct audit_item *next;
    enum audit_item_kind kind;
    size_t cost;           /* bytes counted in flight (its queue's) until written */
    struct audit_tty *tty; /* the recording of a TTY item */
    uint64_t t_ns;         /* TTY events: when (monotonic) */
    const void *data;      /* TTY_OUTPUT: the borrowed bytes */
    size_t len;
    void (*release)(void *ctx);
    void *ctx;
    unsigned rows, cols;
    struct buf body;
};

/* One recording. name and start_ns are set on the loop before it is handed over and
 * never change; lost is the loop's; the rest is the writer's. */
struct audit_tty {
    char name[256];    /* the file's name in the recording directory */
    uint64_t start_ns; /* monotonic time of the start: events are relative to it */
    uint64_t lost;     /* output bytes dropped for want of room (loop thread) */
    int fd;            /* writer: the file, or -1 when it could not be made */
    struct audit_cast_enc out_enc, in_enc;
    struct buf pending; /* writer: lines not yet written */
    bool dirty;         /* writer: on the batch's list of recordings to write */
    struct audit_tty *dirty_next;
};

/* Counters for /metrics, written by either side. */
struct audit_counters {
    _Atomic uint64_t written, dropped, write_errors, refused;
    _Atomic uint64_t casts_opened, casts_failed, cast_bytes, cast_dropped;
    _Atomic bool failing;            /* the last write of the log failed */
    _Atomic size_t inflight;         /* recordings' bytes handed over, not yet written */
    _Atomic size_t inflight_records; /* records' bytes handed over, not yet written */
};
extern struct audit_counters audit_counters;

/* ---- audit_writer.c ---- */

/* Opens the log (creating it 0600, O_APPEND) and the recording directory, and starts
 * the thread; announce: audit.open records say when the log is (re)opened (servers;
 * not commands that write a record and stop). Returns 0 or -errno with the message
 * in err. */
int audit_writer_start(const struct audit_options *o, bool announce, char *err, size_t errlen);
/* Queues a list of items (first..last, in order) and wakes the writer. */
void audit_writer_push(struct audit_item *first, struct audit_item *last);
/* Stops the thread once everything queued is written (waits at most wait_ms). */
void audit_writer_stop(unsigned wait_ms);
/* Frees an item (its body) without doing it; the release of borrowed output too. */
void audit_item_free(struct audit_item *it);

#endif
