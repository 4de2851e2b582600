/* event_log: ordered, bounded output log of one process (see event_log.h). */
#include "process/event_log.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "util/mem.h"

void event_log_init(struct event_log *log)
{
    memset(log, 0, sizeof *log);
    log->next_seq = 1;
}

void event_log_chunk_ref(struct log_chunk *c)
{
    atomic_fetch_add_explicit(&c->refs, 1, memory_order_relaxed);
}

void event_log_chunk_unref(void *p)
{
    struct log_chunk *c = p;
    /* One reference left is the caller's own: nobody else can see the chunk, so the
     * common case (never lent) costs no atomic read-modify-write. */
    if (atomic_load_explicit(&c->refs, memory_order_acquire) == 1 ||
        atomic_fetch_sub_explicit(&c->refs, 1, memory_order_acq_rel) == 1)
        free(c);
}

void event_log_free(struct event_log *log)
{
    struct log_chunk *c = log->head;
    while (c) {
        struct log_chunk *n = c->next;
        event_log_chunk_unref(c);
        c = n;
    }
    log->head = log->tail = NULL;
    log->bytes = log->count = 0;
}

struct log_chunk *event_log_append(struct event_log *log, enum log_stream stream, const void *data,
                                   size_t len)
{
    struct log_chunk *c = xmalloc(sizeof *c + len);
    c->next = NULL;
    c->seq = log->next_seq++;
    c->len = (uint32_t)len;
    atomic_init(&c->refs, 1);
    c->stream = (uint8_t)stream;
    c->wire_end = 0;
    memcpy(c->data, data, len);
    if (log->tail)
        log->tail->next = c;
    else
        log->head = c;
    log->tail = c;
    log->bytes += len;
    log->count++;
    /* Evict whole chunks from the oldest end, but always keep the newest. */
    while (log->head != c &&
           (log->bytes > EVENT_LOG_MAX_BYTES || log->count > EVENT_LOG_MAX_CHUNKS)) {
        struct log_chunk *old = log->head;
        log->head = old->next;
        log->bytes -= old->len;
        log->count--;
        log->evicted_wire_end = old->wire_end;
        event_log_chunk_unref(old);
    }
    return c;
}

uint64_t event_log_take_seq(struct event_log *log)
{
    return log->next_seq++;
}

struct log_chunk *event_log_after(const struct event_log *log, uint64_t after_seq)
{
    /* Readers almost always ask for the tail end; the list is short-lived enough
     * (<= 50,000 chunks) that a scan from the oldest is acceptable for now. */
    struct log_chunk *c = log->head;
    while (c && c->seq <= after_seq)
        c = c->next;
    return c;
}

const char *event_log_stream_name(enum log_stream s)
{
    return s == STREAM_STDOUT ? "stdout" : s == STREAM_STDERR ? "stderr" : "pty";
}
