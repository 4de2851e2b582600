/* audit: the loop thread's side of the audit trail and the recordings (see audit.h):
 * records and recording events are made here, gathered in a list for the loop
 * iteration and handed to the writer thread (audit_writer.c) by a uv_prepare, one
 * lock and at most one wakeup per iteration. A prepare handle runs right before the
 * loop blocks for I/O, so what any phase made (a timer, an I/O callback, a close
 * callback: a session's end) is handed over before the loop may sleep. */
#include "audit/audit.h"

#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "audit/audit_internal.h"
#include "core/log.h"
#include "proto/hex.h"
#include "util/mem.h"

struct audit_counters audit_counters;

static struct {
    bool log, rec; /* a log, recordings: on */
    bool required, input, fs_reads;
    uv_loop_t *loop;                /* NULL: hand over at once */
    uv_prepare_t prepare;           /* the hand-over, once per loop iteration */
    struct audit_item *head, *tail; /* made this iteration, not handed over yet */
    uint64_t lost;                  /* records dropped since the last audit.lost */
} A;

static void hand_over(void)
{
    if (!A.head) return;
    audit_writer_push(A.head, A.tail);
    A.head = A.tail = NULL;
}

static void on_prepare(uv_prepare_t *h)
{
    hand_over();
}

/* Whether cost more bytes fit in the queue of records or of recordings. */
static bool room(bool records, size_t cost)
{
    _Atomic size_t *q = records ? &audit_counters.inflight_records : &audit_counters.inflight;
    return atomic_load_explicit(q, memory_order_relaxed) + cost <=
           (records ? AUDIT_RECORDS_MAX : AUDIT_QUEUE_MAX);
}

static void enqueue(struct audit_item *it)
{
    atomic_fetch_add_explicit(it->kind == AUDIT_ITEM_RECORD ? &audit_counters.inflight_records
                                                            : &audit_counters.inflight,
                              it->cost, memory_order_relaxed);
    it->next = NULL;
    if (A.tail)
        A.tail->next = it;
    else
        A.head = it;
    A.tail = it;
    if (!A.loop) hand_over();
}

static struct audit_item *item_new(enum audit_item_kind kind, struct audit_tty *t)
{
    struct audit_item *it = xcalloc(1, sizeof *it);
    it->kind = kind;
    it->tty = t;
    buf_init(&it->body);
    return it;
}

int audit_start(uv_loop_t *loop, const struct audit_options *o, char *err, size_t errlen)
{
    if (!o->log_path && !o->record_dir) return 0;
    int r = audit_writer_start(o, loop != NULL, err, errlen);
    if (r < 0) return r;
    A.log = o->log_path != NULL;
    A.rec = o->record_dir != NULL;
    A.required = o->required;
    A.input = o->record_input;
    A.fs_reads = o->fs_reads;
    A.loop = loop;
    if (loop) {
        uv_prepare_init(loop, &A.prepare);
        uv_prepare_start(&A.prepare, on_prepare);
        uv_unref((uv_handle_t *)&A.prepare); /* never what keeps the loop alive */
    }
    return 0;
}

/* An audit.lost record for the records dropped so far (it is small: always queued). */
static void put_lost(void)
{
    struct audit_item *it = item_new(AUDIT_ITEM_RECORD, NULL);
    audit_record_begin(&it->body, audit_unix_ns(), "audit.lost");
    audit_put_u64(&it->body, "records", A.lost);
    audit_record_end(&it->body);
    it->cost = it->body.len;
    A.lost = 0;
    enqueue(it);
}

void audit_stop(void)
{
    if (!A.log && !A.rec) return;
    if (A.lost) put_lost();
    if (A.loop && A.log) audit_commit(audit_begin("audit.close"));
    hand_over();
    if (A.loop && !uv_is_closing((uv_handle_t *)&A.prepare)) {
        uv_prepare_stop(&A.prepare);
        uv_close((uv_handle_t *)&A.prepare, NULL);
    }
    audit_writer_stop(5000);
    A.log = A.rec = false;
}

void audit_reopen(void)
{
    if (!A.log) return;
    enqueue(item_new(AUDIT_ITEM_REOPEN, NULL));
}

bool audit_enabled(void)
{
    return A.log;
}

bool audit_recording(void)
{
    return A.rec;
}

bool audit_fs_reads(void)
{
    return A.log && A.fs_reads;
}

const char *audit_refusal(void)
{
    if (!A.required || !A.log) return NULL;
    const char *why = NULL;
    if (atomic_load_explicit(&audit_counters.failing, memory_order_relaxed))
        why = "the audit log cannot be written";
    else if (!room(true, AUDIT_RECORDS_MAX / 8))
        why = "the audit log's queue is full";
    if (why) atomic_fetch_add_explicit(&audit_counters.refused, 1, memory_order_relaxed);
    return why;
}

struct buf *audit_begin(const char *type)
{
    if (!A.log) return NULL;
    struct audit_item *it = item_new(AUDIT_ITEM_RECORD, NULL);
    audit_record_begin(&it->body, audit_unix_ns(), type);
    return &it->body;
}

void audit_commit(struct buf *record)
{
    struct audit_item *it =
        (struct audit_item *)((char *)record - offsetof(struct audit_item, body));
    audit_record_end(record);
    it->cost = record->len;
    if (A.lost && room(true, it->cost + 256)) put_lost();
    if (!room(true, it->cost)) {
        A.lost++;
        atomic_fetch_add_explicit(&audit_counters.dropped, 1, memory_order_relaxed);
        audit_item_free(it);
        return;
    }
    enqueue(it);
}

/* ---- recordings ---- */

/* s into out with the bytes a file name should not hold as %XX (at most n bytes). */
static size_t name_part(char *out, size_t n, const char *s)
{
    size_t k = 0;
    for (const unsigned char *p = (const unsigned char *)s; *p && k + 4 < n; p++) {
        bool plain = (*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
                     (*p >= '0' && *p <= '9') || *p == '_' || *p == '-' ||
                     (*p == '.' && p != (const unsigned char *)s);
        if (plain) {
            out[k++] = (char)*p;
        } else {
            out[k++] = '%';
            out[k++] = hex_upper[*p >> 4];
            out[k++] = hex_upper[*p & 15];
        }
    }
    out[k] = '\0';
    return k;
}

struct audit_tty *audit_tty_open(const char *session, const char *process_id, unsigned rows,
                                 unsigned cols, char *const *argv)
{
    if (!A.rec) return NULL;
    struct audit_tty *t = xcalloc(1, sizeof *t);
    t->fd = -1;
    buf_init(&t->pending);
    t->start_ns = uv_hrtime();
    uint64_t now = audit_unix_ns();
    char sp[48], pp[128];
    name_part(sp, sizeof sp, session);
    name_part(pp, sizeof pp, process_id);
    snprintf(t->name, sizeof t->name, "%s.%s.%llu.cast", sp, pp,
             (unsigned long long)(now / 1000000u));
    struct buf cmd;
    buf_init(&cmd);
    for (size_t i = 0; argv && argv[i] && i < AUDIT_LIST_MAX; i++) {
        if (i) buf_putc(&cmd, ' ');
        buf_puts(&cmd, argv[i]);
    }
    buf_putc(&cmd, '\0');
    struct audit_item *it = item_new(AUDIT_ITEM_TTY_OPEN, t);
    audit_cast_put_header(&it->body, cols, rows, now / 1000000000u, cmd.data);
    buf_free(&cmd);
    it->cost = it->body.len;
    enqueue(it); /* the header, resizes and the close are always queued: they are small */
    return t;
}

const char *audit_tty_name(const struct audit_tty *t)
{
    return t->name;
}

void audit_tty_output(struct audit_tty *t, const void *data, size_t len, void (*release)(void *),
                      void *ctx)
{
    if (!room(false, len)) {
        t->lost += len;
        atomic_fetch_add_explicit(&audit_counters.cast_dropped, len, memory_order_relaxed);
        release(ctx);
        return;
    }
    struct audit_item *it = item_new(AUDIT_ITEM_TTY_OUTPUT, t);
    it->t_ns = uv_hrtime();
    it->data = data;
    it->len = len;
    it->release = release;
    it->ctx = ctx;
    it->cost = len;
    enqueue(it);
}

void audit_tty_input(struct audit_tty *t, const void *data, size_t len)
{
    if (!A.input || !len) return;
    if (!room(false, len)) {
        atomic_fetch_add_explicit(&audit_counters.cast_dropped, len, memory_order_relaxed);
        return;
    }
    struct audit_item *it = item_new(AUDIT_ITEM_TTY_INPUT, t);
    it->t_ns = uv_hrtime();
    buf_append(&it->body, data, len);
    it->cost = len;
    enqueue(it);
}

void audit_tty_resize(struct audit_tty *t, unsigned rows, unsigned cols)
{
    struct audit_item *it = item_new(AUDIT_ITEM_TTY_RESIZE, t);
    it->t_ns = uv_hrtime();
    it->rows = rows;
    it->cols = cols;
    enqueue(it);
}

uint64_t audit_tty_lost(const struct audit_tty *t)
{
    return t->lost;
}

void audit_tty_close(struct audit_tty *t)
{
    struct audit_item *it = item_new(AUDIT_ITEM_TTY_CLOSE, t);
    it->t_ns = uv_hrtime();
    enqueue(it);
}

/* ---- metrics ---- */

static uint64_t get(_Atomic uint64_t *v)
{
    return atomic_load_explicit(v, memory_order_relaxed);
}

void audit_metrics_render(struct buf *out, const char *p)
{
    struct audit_counters *c = &audit_counters;
    if (A.log) {
        buf_printf(out,
                   "# HELP %s_audit_records_total Audit records written, and dropped for want "
                   "of room (an audit.lost record counts them in the log).\n"
                   "# TYPE %s_audit_records_total counter\n"
                   "%s_audit_records_total{result=\"written\"} %llu\n"
                   "%s_audit_records_total{result=\"dropped\"} %llu\n",
                   p, p, p, (unsigned long long)get(&c->written), p,
                   (unsigned long long)get(&c->dropped));
        buf_printf(out,
                   "# HELP %s_audit_write_errors_total Failed writes of the audit log.\n"
                   "# TYPE %s_audit_write_errors_total counter\n"
                   "%s_audit_write_errors_total %llu\n"
                   "# HELP %s_audit_log_writable 1 while the audit log takes records, 0 while "
                   "its writes fail.\n# TYPE %s_audit_log_writable gauge\n"
                   "%s_audit_log_writable %d\n"
                   "# HELP %s_audit_refused_total Requests refused because the audit log "
                   "could not take their record (--audit-required).\n"
                   "# TYPE %s_audit_refused_total counter\n%s_audit_refused_total %llu\n",
                   p, p, p, (unsigned long long)get(&c->write_errors), p, p, p,
                   atomic_load(&c->failing) ? 0 : 1, p, p, p, (unsigned long long)get(&c->refused));
    }
    if (A.rec)
        buf_printf(out,
                   "# HELP %s_recordings_total Terminal recordings started, by result.\n"
                   "# TYPE %s_recordings_total counter\n"
                   "%s_recordings_total{result=\"opened\"} %llu\n"
                   "%s_recordings_total{result=\"failed\"} %llu\n"
                   "# HELP %s_recording_bytes_total Terminal output bytes recorded, and "
                   "dropped for want of room.\n# TYPE %s_recording_bytes_total counter\n"
                   "%s_recording_bytes_total{result=\"written\"} %llu\n"
                   "%s_recording_bytes_total{result=\"dropped\"} %llu\n",
                   p, p, p, (unsigned long long)get(&c->casts_opened), p,
                   (unsigned long long)get(&c->casts_failed), p, p, p,
                   (unsigned long long)get(&c->cast_bytes), p,
                   (unsigned long long)get(&c->cast_dropped));
}
