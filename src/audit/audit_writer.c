/* audit_writer: the thread that writes the audit log and the recordings, so the loop
 * never waits for a disk (see audit.h).
 *
 * It takes what the loop handed over in batches. Records are sealed into the chain
 * (audit_chain.h) and appended with one write(2) per batch, under flock(2) so that
 * other writers of the same file (`exec-server registry token` commands, a second
 * server) take turns: before sealing, the file's size is compared with where this
 * writer's last write ended, and when someone else wrote since (or at the first
 * write, or after a reopen), the chain goes on from the file's last line. An empty
 * file (new, rotated, truncated) continues the chain this writer holds. Recording
 * events become asciicast lines (audit_cast.h), gathered per recording and written
 * once per batch.
 *
 * A failed write keeps what it did not write and is tried again every second;
 * meanwhile the loop's bounded queue fills and then drops (audit.c). Nothing here
 * blocks the loop: the only lock they share is held to splice a list. */
#include "audit/audit_chain.h"
#include "audit/audit_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "core/log.h"
#include "util/mem.h"

#define RETRY_MS 1000
#define LINGER_MS 100 /* records reach the file at most this long after their hand-over */
#define TAIL_STEP 65536
#define TAIL_MAX (16u << 20) /* a last line longer than this is not followed */
#define TTY_FLUSH_BYTES (1u << 20)
#define WAKE_BYTES (256u << 10) /* of terminal output waiting: a lingering writer is woken */

static struct {
    pthread_t thread;
    bool running;
    pthread_mutex_t mu;
    pthread_cond_t wake, done;
    struct audit_item *head, *tail; /* handed over, not taken yet */
    bool stop, exited;
    bool linger; /* a batch was just written: wait LINGER_MS before sleeping */
    bool asleep; /* waiting to be woken: a hand-over signals */
    bool nudged; /* signalled for terminal output since the last batch was taken */
    /* the log */
    char *path;
    int fd;
    int64_t end; /* the file's size after this writer's last write; -1: unknown */
    struct audit_chain chain;
    struct audit_item *held, **held_tail; /* records not sealed yet */
    struct buf out;                       /* sealed, not written yet */
    size_t out_cost;                      /* their cost (audit_item.cost) */
    uint64_t out_records;
    bool need_nl;     /* the file ends inside a line: a newline goes first */
    bool fail_logged; /* this failure was said */
    bool announce;    /* write audit.open records (servers, not one-shot commands) */
    const char *program;
    /* recordings */
    char *dir;
    int dir_fd;
    struct audit_tty *dirty; /* recordings with lines to write this batch */
} W = {.fd = -1, .dir_fd = -1, .mu = PTHREAD_MUTEX_INITIALIZER};

void audit_item_free(struct audit_item *it)
{
    if (it->kind == AUDIT_ITEM_TTY_OUTPUT) it->release(it->ctx);
    buf_free(&it->body);
    free(it);
}

/* ---- the log ---- */

/* Writes all of p or stops at an error; returns the bytes written (errno set when
 * short). */
static size_t write_all(int fd, const char *p, size_t n)
{
    size_t done = 0;
    while (done < n) {
        ssize_t w = write(fd, p + done, n - done);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) {
            if (w == 0) errno = EIO;
            break;
        }
        done += (size_t)w;
    }
    return done;
}

/* Reads the last line of the file (size bytes) into line; *complete is whether it
 * ends with a newline. Returns 0, -ENODATA for an empty file, or -errno. */
static int tail_line(int fd, int64_t size, struct buf *line, bool *complete)
{
    buf_reset(line);
    if (size <= 0) return -ENODATA;
    char last;
    ssize_t got1 = pread(fd, &last, 1, size - 1);
    if (got1 != 1) return got1 < 0 ? -errno : -EIO;
    *complete = last == '\n';
    int64_t stop = *complete ? size - 1 : size; /* where the line ends */
    int64_t from = stop;
    char *chunk = xmalloc(TAIL_STEP);
    int r = 0;
    while (from > 0 && stop - from < (int64_t)TAIL_MAX) {
        int64_t at = from > TAIL_STEP ? from - TAIL_STEP : 0;
        ssize_t got = pread(fd, chunk, (size_t)(from - at), at);
        if (got != from - at) {
            r = got < 0 ? -errno : -EIO;
            break;
        }
        char *nl = memrchr(chunk, '\n', (size_t)got);
        if (nl) {
            from = at + (nl - chunk) + 1;
            break;
        }
        from = at;
    }
    free(chunk);
    if (r == 0 && stop - from >= (int64_t)TAIL_MAX) r = -EFBIG;
    if (r < 0) return r;
    buf_reserve(line, (size_t)(stop - from));
    if (pread(fd, line->data, (size_t)(stop - from), from) != stop - from) return -EIO;
    line->len = (size_t)(stop - from);
    return 0;
}

/* The chain goes on from the file's last line, unless the file is empty (then from
 * what this writer holds). */
static void follow_file(int64_t size)
{
    struct buf line;
    buf_init(&line);
    bool complete = true;
    int r = tail_line(W.fd, size, &line, &complete);
    if (r == 0) {
        if (audit_chain_follow(&W.chain, line.data, line.len) < 0)
            log_warn("audit: the last line of %s is not a record; the chain goes on after it "
                     "(`exec-server audit verify` will name it)",
                     W.path);
        W.need_nl = !complete;
    } else if (r != -ENODATA) {
        log_warn("audit: cannot read the end of %s (%s); the chain goes on from seq %llu", W.path,
                 strerror(-r), (unsigned long long)W.chain.seq);
    }
    buf_free(&line);
    W.end = size;
}

static void set_failing(int err)
{
    atomic_fetch_add(&audit_counters.write_errors, 1);
    atomic_store(&audit_counters.failing, true);
    if (W.fail_logged) return;
    W.fail_logged = true;
    log_error("audit: cannot write %s: %s; %zu bytes of records wait and are tried again "
              "every second (see exec_server_audit_* in /metrics)",
              W.path, strerror(err),
              W.out.len + (size_t)atomic_load(&audit_counters.inflight_records));
}

static void set_writing(void)
{
    if (!atomic_load(&audit_counters.failing)) return;
    atomic_store(&audit_counters.failing, false);
    W.fail_logged = false;
    log_notice("audit: %s is written again", W.path);
}

/* Seals the held records after what is sealed already. */
static void seal_held(void)
{
    if (W.need_nl && W.out.len == 0) buf_putc(&W.out, '\n');
    W.need_nl = false;
    while (W.held) {
        struct audit_item *it = W.held;
        W.held = it->next;
        audit_chain_seal(&W.chain, it->body.data, it->body.len, &W.out);
        W.out_cost += it->cost;
        W.out_records++;
        audit_item_free(it);
    }
    W.held_tail = &W.held;
}

/* Appends what is held and sealed to the log, taking the file's lock. */
static void flush_log(void)
{
    if (!W.held && W.out.len == 0) return;
    if (W.fd < 0) {
        set_failing(EBADF);
        return;
    }
    while (flock(W.fd, LOCK_EX) < 0 && errno == EINTR)
        ;
    struct stat st;
    int64_t size = fstat(W.fd, &st) == 0 ? (int64_t)st.st_size : -1;
    /* Someone else wrote (or this is the first write, or the file was truncated):
     * go on from its last line. Not with sealed bytes waiting: they are chained
     * already and go as they are. */
    if (size != W.end && W.out.len == 0) follow_file(size);
    seal_held();
    size_t n = write_all(W.fd, W.out.data, W.out.len);
    int err = errno;
    if (n > 0) {
        W.end = size >= 0 ? size + (int64_t)n : -1;
        memmove(W.out.data, W.out.data + n, W.out.len - n);
        W.out.len -= n;
    }
    flock(W.fd, LOCK_UN);
    if (W.out.len) {
        set_failing(err);
        return;
    }
    atomic_fetch_add(&audit_counters.written, W.out_records);
    atomic_fetch_sub(&audit_counters.inflight_records, W.out_cost);
    W.out_cost = 0;
    W.out_records = 0;
    set_writing();
}

/* An audit.open record (why the log was opened), first in what follows. */
static void hold_open_record(const char *reason)
{
    if (!W.announce) return;
    struct audit_item *it = xcalloc(1, sizeof *it);
    buf_init(&it->body);
    audit_record_begin(&it->body, audit_unix_ns(), "audit.open");
    audit_put_str(&it->body, "reason", reason);
    audit_put_str(&it->body, "program", W.program);
    audit_put_str(&it->body, "version", EXEC_SERVER_VERSION);
    audit_put_i64(&it->body, "pid", (int64_t)getpid());
    audit_record_end(&it->body);
    *W.held_tail = it;
    W.held_tail = &it->next;
}

static int open_log(const char *path)
{
    return open(path, O_RDWR | O_APPEND | O_CREAT | O_CLOEXEC, 0600); /* read: its tail */
}

static void reopen(void)
{
    flush_log(); /* what was handed over before the signal goes to the old file */
    int fd = open_log(W.path);
    if (fd < 0) {
        log_error("audit: cannot reopen %s: %s; records still go to the file opened before", W.path,
                  strerror(errno));
        atomic_fetch_add(&audit_counters.write_errors, 1);
        return;
    }
    if (W.fd >= 0) close(W.fd);
    W.fd = fd;
    W.end = -1;
    log_notice("audit: reopened %s", W.path);
    hold_open_record("reopen");
}

/* ---- recordings ---- */

static void tty_write(struct audit_tty *t)
{
    if (t->fd >= 0 && t->pending.len) {
        size_t n = write_all(t->fd, t->pending.data, t->pending.len);
        if (n < t->pending.len) {
            log_warn("audit: cannot write the recording %s/%s: %s; it stops here", W.dir, t->name,
                     strerror(errno));
            close(t->fd);
            t->fd = -1;
        }
    }
    buf_reset(&t->pending);
}

static void tty_mark(struct audit_tty *t)
{
    if (t->pending.len >= TTY_FLUSH_BYTES) tty_write(t);
    if (t->dirty) return;
    t->dirty = true;
    t->dirty_next = W.dirty;
    W.dirty = t;
}

static void tty_open(struct audit_tty *t, const struct buf *header)
{
    t->fd = W.dir_fd < 0 ? -1
                         : openat(W.dir_fd, t->name, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (t->fd < 0) {
        atomic_fetch_add(&audit_counters.casts_failed, 1);
        log_warn("audit: cannot make the recording %s/%s: %s", W.dir, t->name, strerror(errno));
        return;
    }
    atomic_fetch_add(&audit_counters.casts_opened, 1);
    buf_append(&t->pending, header->data, header->len);
    tty_mark(t);
}

static void tty_close(struct audit_tty *t, uint64_t t_us)
{
    audit_cast_put_finish(&t->out_enc, &t->pending, t_us, 'o');
    audit_cast_put_finish(&t->in_enc, &t->pending, t_us, 'i');
    tty_write(t);
    if (t->fd >= 0) close(t->fd);
    if (t->dirty)
        for (struct audit_tty **pp = &W.dirty; *pp; pp = &(*pp)->dirty_next)
            if (*pp == t) {
                *pp = t->dirty_next;
                break;
            }
    buf_free(&t->pending);
    free(t);
}

static void tty_item(struct audit_item *it)
{
    struct audit_tty *t = it->tty;
    uint64_t t_us = it->t_ns > t->start_ns ? (it->t_ns - t->start_ns) / 1000u : 0;
    switch (it->kind) {
    case AUDIT_ITEM_TTY_OPEN: tty_open(t, &it->body); break;
    case AUDIT_ITEM_TTY_OUTPUT:
        if (t->fd < 0) break;
        audit_cast_put_event(&t->out_enc, &t->pending, t_us, 'o', it->data, it->len);
        atomic_fetch_add_explicit(&audit_counters.cast_bytes, it->len, memory_order_relaxed);
        tty_mark(t);
        break;
    case AUDIT_ITEM_TTY_INPUT:
        if (t->fd < 0) break;
        audit_cast_put_event(&t->in_enc, &t->pending, t_us, 'i', it->body.data, it->body.len);
        tty_mark(t);
        break;
    case AUDIT_ITEM_TTY_RESIZE:
        if (t->fd < 0) break;
        audit_cast_put_resize(&t->pending, t_us, it->cols, it->rows);
        tty_mark(t);
        break;
    case AUDIT_ITEM_TTY_CLOSE: tty_close(t, t_us); break;
    default: break;
    }
}

/* ---- the thread ---- */

static void run_batch(struct audit_item *it)
{
    size_t done_cost = 0; /* recording items' cost: given back once they are written */
    while (it) {
        struct audit_item *next = it->next;
        if (it->kind == AUDIT_ITEM_RECORD) {
            it->next = NULL;
            *W.held_tail = it;
            W.held_tail = &it->next;
        } else if (it->kind == AUDIT_ITEM_REOPEN) {
            reopen();
            audit_item_free(it);
        } else {
            tty_item(it);
            done_cost += it->cost;
            audit_item_free(it);
        }
        it = next;
    }
    flush_log();
    for (struct audit_tty *t = W.dirty; t; t = t->dirty_next) {
        tty_write(t);
        t->dirty = false;
    }
    W.dirty = NULL;
    atomic_fetch_sub(&audit_counters.inflight, done_cost);
}

/* Stopping while the log cannot be written: what waits is dropped, and said. */
static void drop_unwritten(void)
{
    uint64_t n = W.out_records;
    for (struct audit_item *it = W.held; it; it = W.held) {
        W.held = it->next;
        audit_item_free(it);
        n++;
    }
    W.held_tail = &W.held;
    if (!n) return;
    atomic_fetch_add(&audit_counters.dropped, n);
    log_error("audit: %llu records could not be written to %s before the exit",
              (unsigned long long)n, W.path);
}

/* Waits (W.mu held) ms milliseconds for the wake condition, or for ever (ms 0). */
static void wait_wake(unsigned ms)
{
    if (!ms) {
        pthread_cond_wait(&W.wake, &W.mu);
        return;
    }
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    ts.tv_nsec += (long)(ms % 1000) * 1000000;
    ts.tv_sec += ms / 1000 + ts.tv_nsec / 1000000000;
    ts.tv_nsec %= 1000000000;
    pthread_cond_timedwait(&W.wake, &W.mu, &ts);
}

/* Waits (W.mu held) for something to do. After a batch the writer lingers LINGER_MS
 * unasked (it looks at the queue when the time is up): while it lingers the loop
 * hands over without waking it, so a busy server pays no wakeup per loop iteration
 * (on our VMs a futex wake of another thread cost the loop several microseconds);
 * only a writer that found nothing after lingering sleeps until it is woken. */
static void writer_wait(void)
{
    if (W.head || W.stop) return;
    if (W.held || W.out.len) { /* the log is failing: try again in a while */
        wait_wake(RETRY_MS);
    } else if (W.linger) {
        W.linger = false;
        wait_wake(LINGER_MS);
    } else {
        W.asleep = true;
        wait_wake(0);
        W.asleep = false;
    }
}

static void *writer_main(void *arg)
{
    sigset_t all;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, NULL); /* signals are the loop thread's */
    pthread_mutex_lock(&W.mu);
    for (;;) {
        writer_wait();
        if (!W.head && !W.stop && !W.held && !W.out.len) continue; /* lingered for nothing */
        W.linger = true;
        W.nudged = false;
        struct audit_item *batch = W.head;
        W.head = W.tail = NULL;
        bool stop = W.stop;
        pthread_mutex_unlock(&W.mu);
        run_batch(batch);
        pthread_mutex_lock(&W.mu);
        if (stop && !W.head) break;
    }
    if (W.held || W.out.len) drop_unwritten();
    W.exited = true;
    pthread_cond_broadcast(&W.done);
    pthread_mutex_unlock(&W.mu);
    return NULL;
}

void audit_writer_push(struct audit_item *first, struct audit_item *last)
{
    pthread_mutex_lock(&W.mu);
    /* A lingering writer looks by itself, unless a terminal's output piles up: held
     * for the rest of a linger (100 ms at 120 MB/s is 12 MB), the lent chunks grew
     * the heap (4,600 page faults a 256 MiB stream against 760) and went cold in the
     * cache, and the stream slowed (docs/AUDIT.md, "How much it costs"); woken every
     * WAKE_BYTES, the writer gives them back while they are warm. While it lingers
     * the recordings' bytes in flight are those waiting for it. */
    bool wake = W.asleep ? W.head == NULL
                         : !W.nudged && atomic_load_explicit(&audit_counters.inflight,
                                                             memory_order_relaxed) >= WAKE_BYTES;
    W.nudged |= wake;
    if (W.tail)
        W.tail->next = first;
    else
        W.head = first;
    W.tail = last;
    if (wake) pthread_cond_signal(&W.wake);
    pthread_mutex_unlock(&W.mu);
}

int audit_writer_start(const struct audit_options *o, bool announce, char *err, size_t errlen)
{
    W.held_tail = &W.held;
    buf_init(&W.out);
    audit_chain_init(&W.chain);
    W.program = o->program;
    W.announce = announce;
    if (o->record_dir) {
        W.dir_fd = open(o->record_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (W.dir_fd < 0 || faccessat(W.dir_fd, ".", W_OK | X_OK, AT_EACCESS) < 0) {
            int e = errno;
            snprintf(err, errlen, "--record-dir %s: %s", o->record_dir, strerror(e));
            if (W.dir_fd >= 0) close(W.dir_fd);
            W.dir_fd = -1;
            return -e;
        }
        W.dir = xstrdup(o->record_dir);
    }
    if (o->log_path) {
        W.path = xstrdup(o->log_path);
        W.fd = open_log(o->log_path);
        if (W.fd < 0) {
            int e = errno;
            snprintf(err, errlen, "--audit-log %s: %s", o->log_path, strerror(e));
            return -e;
        }
        W.end = -1; /* the first write follows the file's last line */
        hold_open_record("start");
    }
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&W.wake, &ca);
    pthread_cond_init(&W.done, &ca);
    pthread_condattr_destroy(&ca);
    int r = pthread_create(&W.thread, NULL, writer_main, NULL);
    if (r != 0) {
        snprintf(err, errlen, "cannot start the audit writer thread: %s", strerror(r));
        return -r;
    }
    pthread_setname_np(W.thread, "exec-audit"); /* what ps and top show */
    W.running = true;
    return 0;
}

void audit_writer_stop(unsigned wait_ms)
{
    if (!W.running) return;
    pthread_mutex_lock(&W.mu);
    W.stop = true;
    pthread_cond_signal(&W.wake);
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    ts.tv_sec += wait_ms / 1000;
    ts.tv_nsec += (long)(wait_ms % 1000) * 1000000;
    if (ts.tv_nsec >= 1000000000) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000;
    }
    while (!W.exited)
        if (pthread_cond_timedwait(&W.done, &W.mu, &ts) == ETIMEDOUT) break;
    bool exited = W.exited;
    pthread_mutex_unlock(&W.mu);
    if (!exited) {
        log_error("audit: the writer did not finish within %u ms; exiting without it", wait_ms);
        return; /* the process ends: the thread goes with it */
    }
    pthread_join(W.thread, NULL);
    W.running = false;
    if (W.fd >= 0) close(W.fd);
    if (W.dir_fd >= 0) close(W.dir_fd);
    W.fd = W.dir_fd = -1;
    buf_free(&W.out);
    free(W.path);
    free(W.dir);
    W.path = W.dir = NULL;
}
