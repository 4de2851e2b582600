/* stdio: one JSON-RPC message per line on stdin/stdout. '\n' ends a message, a
 * preceding '\r' is dropped, blank lines are skipped, and a line longer than the
 * message limit (--max-message-bytes) ends the connection. */
#include "transport/stdio.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/limits.h"
#include "core/log.h"
#include "transport/conn_internal.h"
#include "util/mem.h"

struct stdio_conn {
    struct conn base;
    uv_pipe_t in, out;
    struct buf line;
    int handles_open;
    void (*on_eof)(void);
};

static void stdio_handle_closed(uv_handle_t *h)
{
    struct stdio_conn *s = h->data;
    if (--s->handles_open > 0) return;
    void (*on_eof)(void) = s->on_eof;
    conn_closed(&s->base);
    if (on_eof) on_eof();
}

static void stdio_close(struct conn *c)
{
    struct stdio_conn *s = (struct stdio_conn *)c;
    if (uv_is_closing((uv_handle_t *)&s->in)) return;
    uv_close((uv_handle_t *)&s->in, stdio_handle_closed);
    uv_close((uv_handle_t *)&s->out, stdio_handle_closed);
}

static void stdio_destroy(struct conn *c)
{
    struct stdio_conn *s = (struct stdio_conn *)c;
    buf_free(&s->line);
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

static void stdio_set_reading(struct conn *c, bool on)
{
    struct stdio_conn *s = (struct stdio_conn *)c;
    if (uv_is_closing((uv_handle_t *)&s->in)) return;
    if (on) uv_read_start((uv_stream_t *)&s->in, stdio_alloc, stdio_read);
    else uv_read_stop((uv_stream_t *)&s->in);
}

static const struct conn_ops stdio_ops = {
    .kind = "stdio",
    .flags = CONN_F_NO_RESUME | CONN_F_ANON_PEER,
    .send = stdio_send,
    .close = stdio_close,
    .destroy = stdio_destroy,
    .set_reading = stdio_set_reading,
};

static void stdio_read(uv_stream_t *st, ssize_t nread, const uv_buf_t *b)
{
    struct stdio_conn *s = st->data;
    if (nread < 0) {
        conn_close(&s->base);
        return;
    }
    const char *p = b->base, *end = b->base + nread;
    conn_ref(&s->base);
    while (p < end && s->base.open) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        if (!nl) {
            buf_append(&s->line, p, (size_t)(end - p));
            if (s->line.len > server_limits.max_message) {
                log_warn("stdio: line over the limit of %zu bytes (--max-message-bytes); "
                         "closing", server_limits.max_message);
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

int stdio_serve(uv_loop_t *loop, conn_message_fn on_message, void (*on_eof)(void))
{
    struct stdio_conn *s = xcalloc(1, sizeof *s);
    conn_init(&s->base, &stdio_ops, loop, on_message);
    strcpy(s->base.peer, "stdio");
    s->on_eof = on_eof;
    uv_pipe_init(loop, &s->in, 0);
    uv_pipe_init(loop, &s->out, 0);
    s->in.data = s->out.data = s;
    s->handles_open = 2;
    int r = uv_pipe_open(&s->in, 0);
    if (r == 0) r = uv_pipe_open(&s->out, 1);
    if (r == 0) r = uv_read_start((uv_stream_t *)&s->in, stdio_alloc, stdio_read);
    if (r != 0) {
        log_error("stdio transport: %s (stdin and stdout must be pipes or sockets)",
                  uv_strerror(r));
        stdio_close(&s->base);
        return r;
    }
    return 0;
}
