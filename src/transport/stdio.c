/* stdio: one JSON-RPC message per line on stdin/stdout. '\n' ends a message, a
 * preceding '\r' is dropped, blank lines are skipped, and a line longer than the
 * message limit (--max-message-bytes) ends the connection.
 *
 * Standard input is whatever the user chose: a pipe or socket is watched by the
 * loop; a regular file or /dev/null cannot be (epoll refuses them with EPERM, and
 * libuv aborts on that), so it is read with plain reads on the thread pool, one
 * chunk at a time, until its end, which ends the connection like a closed pipe. */
#include "transport/stdio.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <unistd.h>

#include "core/limits.h"
#include "core/log.h"
#include "transport/conn_impl.h"
#include "util/mem.h"

#define STDIO_FILE_CHUNK 65536

struct stdio_conn {
    struct conn base;
    uv_pipe_t in, out;
    struct buf line;
    int handles_open; /* out, and in (the pipe, or the file reader while it reads) */
    bool closing;
    void (*on_eof)(void);
    /* stdin that the loop cannot watch (a regular file, /dev/null, ...). */
    bool in_file;
    bool file_paused; /* set_reading(false): no new read until resumed */
    bool file_busy;   /* a read is on the thread pool */
    uv_fs_t file_req;
    char *file_buf;
};

static void stdio_release(struct stdio_conn *s)
{
    if (--s->handles_open > 0) return;
    void (*on_eof)(void) = s->on_eof;
    conn_closed(&s->base);
    if (on_eof) on_eof();
}

static void stdio_handle_closed(uv_handle_t *h)
{
    stdio_release(h->data);
}

static void stdio_close(struct conn *c)
{
    struct stdio_conn *s = (struct stdio_conn *)c;
    if (s->closing) return;
    s->closing = true;
    if (!s->in_file)
        uv_close((uv_handle_t *)&s->in, stdio_handle_closed);
    else if (!s->file_busy)
        stdio_release(s); /* else the read's callback releases it */
    uv_close((uv_handle_t *)&s->out, stdio_handle_closed);
}

static void stdio_destroy(struct conn *c)
{
    struct stdio_conn *s = (struct stdio_conn *)c;
    buf_free(&s->line);
    free(s->file_buf);
    free(s);
}

static void stdio_send(struct conn *c, struct buf *msg)
{
    struct stdio_conn *s = (struct stdio_conn *)c;
    buf_putc(msg, '\n');
    size_t len = msg->len - BUF_MSG_HEADROOM;
    char *mem = buf_steal(msg);
    uv_buf_t b = uv_buf_init(mem + BUF_MSG_HEADROOM, (unsigned)len);
    conn_write(c, (uv_stream_t *)&s->out, mem, &b, 1);
}

static void stdio_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *b)
{
    static char slab[65536];
    b->base = slab;
    b->len = sizeof slab;
}

static void stdio_read(uv_stream_t *st, ssize_t nread, const uv_buf_t *b);
static void file_read_next(struct stdio_conn *s);

static void stdio_set_reading(struct conn *c, bool on)
{
    struct stdio_conn *s = (struct stdio_conn *)c;
    if (s->closing) return;
    if (s->in_file) {
        s->file_paused = !on;
        if (on) file_read_next(s);
    } else if (on) {
        uv_read_start((uv_stream_t *)&s->in, stdio_alloc, stdio_read);
    } else {
        uv_read_stop((uv_stream_t *)&s->in);
    }
}

static const struct conn_ops stdio_ops = {
    .kind = "stdio",
    .flags = CONN_F_NO_RESUME | CONN_F_ANON_PEER,
    .send = stdio_send,
    .close = stdio_close,
    .destroy = stdio_destroy,
    .set_reading = stdio_set_reading,
};

/* Splits the bytes read into lines and delivers each complete one. */
static void stdio_consume(struct stdio_conn *s, const char *data, size_t n)
{
    const char *p = data, *end = data + n;
    conn_ref(&s->base);
    while (p < end && s->base.open) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        if (!nl) {
            buf_append(&s->line, p, (size_t)(end - p));
            if (s->line.len > server_limits.max_message) {
                log_warn("stdio: line over the limit of %zu bytes (--max-message-bytes); "
                         "closing",
                         server_limits.max_message);
                conn_close(&s->base);
            }
            break;
        }
        const char *msg = p;
        size_t len = (size_t)(nl - p);
        if (s->line.len) {
            buf_append(&s->line, p, len);
            msg = s->line.data;
            len = s->line.len;
        }
        if (len && msg[len - 1] == '\r') len--;
        if (len) conn_deliver(&s->base, msg, len);
        buf_reset(&s->line);
        p = nl + 1;
    }
    conn_unref(&s->base);
}

static void stdio_read(uv_stream_t *st, ssize_t nread, const uv_buf_t *b)
{
    struct stdio_conn *s = st->data;
    if (nread < 0) {
        conn_close(&s->base);
        return;
    }
    stdio_consume(s, b->base, (size_t)nread);
}

static void file_read_done(uv_fs_t *req)
{
    struct stdio_conn *s = req->data;
    ssize_t n = req->result;
    uv_fs_req_cleanup(req);
    s->file_busy = false;
    if (s->closing) {
        stdio_release(s);
        return;
    }
    if (n <= 0) {
        if (n < 0) log_warn("stdio: reading standard input: %s", uv_strerror((int)n));
        conn_close(&s->base); /* the end of the file is the end of the input */
        return;
    }
    stdio_consume(s, s->file_buf, (size_t)n);
    file_read_next(s);
}

/* Starts the next plain read of a stdin the loop cannot watch (one at a time). */
static void file_read_next(struct stdio_conn *s)
{
    if (s->closing || s->file_paused || s->file_busy || !s->base.open) return;
    uv_buf_t b = uv_buf_init(s->file_buf, STDIO_FILE_CHUNK);
    s->file_req.data = s;
    int r = uv_fs_read(s->base.loop, &s->file_req, STDIN_FILENO, &b, 1, -1, file_read_done);
    if (r < 0) {
        log_warn("stdio: reading standard input: %s", uv_strerror(r));
        conn_close(&s->base);
        return;
    }
    s->file_busy = true;
}

/* Whether the loop can watch fd: epoll refuses regular files and some character
 * devices (/dev/null) with EPERM, which libuv treats as fatal. */
static bool stdio_pollable(int fd)
{
    int ep = epoll_create1(EPOLL_CLOEXEC);
    if (ep < 0) return true;
    struct epoll_event ev = {.events = EPOLLIN};
    int r = epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev);
    int err = errno;
    close(ep);
    return r == 0 || err != EPERM;
}

int stdio_serve(uv_loop_t *loop, conn_message_fn on_message, void (*on_eof)(void))
{
    struct stdio_conn *s = xcalloc(1, sizeof *s);
    conn_init(&s->base, &stdio_ops, loop, on_message);
    strcpy(s->base.peer, "stdio");
    s->on_eof = on_eof;
    s->in_file = !stdio_pollable(STDIN_FILENO);
    uv_pipe_init(loop, &s->out, 0);
    s->out.data = s;
    s->handles_open = 2;
    int r = 0;
    if (s->in_file) {
        s->file_buf = xmalloc(STDIO_FILE_CHUNK);
    } else {
        uv_pipe_init(loop, &s->in, 0);
        s->in.data = s;
        r = uv_pipe_open(&s->in, 0);
    }
    if (r == 0) r = uv_pipe_open(&s->out, 1);
    if (r == 0 && s->in_file)
        file_read_next(s);
    else if (r == 0)
        r = uv_read_start((uv_stream_t *)&s->in, stdio_alloc, stdio_read);
    if (r != 0) {
        log_error("stdio transport: %s (stdin and stdout must be pipes or sockets)",
                  uv_strerror(r));
        stdio_close(&s->base);
        return r;
    }
    return 0;
}
