/* event_log: one process's ordered output log (PROTOCOL.md sections 5.7-5.8).
 *
 * One sequence counter is shared by output chunks, the exit event and the close
 * event; only output chunks are stored. The retained window holds at most
 * EVENT_LOG_MAX_BYTES raw bytes and EVENT_LOG_MAX_CHUNKS chunks, evicting whole
 * chunks from the oldest end. A chunk may be lent to another thread (a terminal
 * recording's writer, audit/audit.h) with a reference of its own, so it outlives its
 * eviction until that thread is done. Pure data structure, no I/O. */
#ifndef EXEC_PROCESS_EVENT_LOG_H
#define EXEC_PROCESS_EVENT_LOG_H

#include <stddef.h>
#include <stdint.h>

#define EVENT_LOG_MAX_BYTES (1u << 20)
#define EVENT_LOG_MAX_CHUNKS 50000u

enum log_stream { STREAM_STDOUT = 0, STREAM_STDERR = 1, STREAM_PTY = 2 };

struct log_chunk {
    struct log_chunk *next; /* newer chunk */
    uint64_t seq;
    uint32_t len;
    _Atomic uint32_t refs; /* the log's, and the recording's while its writer has it
                              (event_log_chunk_ref): freed when the last one goes */
    uint8_t stream;        /* enum log_stream */
    uint64_t wire_end;     /* stream offset just past its notification on the
                              attached connection (conn_sent_total), 0 if none */
    uint8_t data[];
};

struct event_log {
    struct log_chunk *head, *tail; /* oldest, newest */
    size_t bytes;                  /* raw bytes retained */
    size_t count;                  /* chunks retained */
    uint64_t next_seq;             /* next unassigned seq (starts at 1) */
    uint64_t evicted_wire_end;     /* wire_end of the newest evicted chunk */
};

void event_log_init(struct event_log *log);
void event_log_free(struct event_log *log);
/* Stores a copy of data as the next event and returns the chunk (owned by log). */
struct log_chunk *event_log_append(struct event_log *log, enum log_stream stream, const void *data,
                                   size_t len);
/* Another reference to c (another thread may hold it: the counts are atomic). */
void event_log_chunk_ref(struct log_chunk *c);
/* Drops a reference (a void * for a release callback); the last one frees c. Any
 * thread. */
void event_log_chunk_unref(void *c);
/* Takes the next seq for a non-output event (exit, close). */
uint64_t event_log_take_seq(struct event_log *log);
/* First retained chunk with seq > after_seq, or NULL. */
struct log_chunk *event_log_after(const struct event_log *log, uint64_t after_seq);
const char *event_log_stream_name(enum log_stream s);

#endif
