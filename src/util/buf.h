/* buf: a growable byte buffer, and the JSON text writers built on it.
 *
 * Hot messages (process/output notifications, process/read results) are written
 * straight into a buf instead of building jansson trees per chunk. A buf used as an
 * outgoing message starts with BUF_MSG_HEADROOM reserved bytes so the transport can
 * put its frame header in front of the payload without copying it (see conn.h). */
#ifndef EXEC_UTIL_BUF_H
#define EXEC_UTIL_BUF_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Room for the largest server-to-client WebSocket frame header (2 + 8 bytes). */
#define BUF_MSG_HEADROOM 10

struct buf {
    char *data; /* owned heap storage, or NULL when empty */
    size_t len; /* bytes in use */
    size_t cap; /* bytes allocated */
    bool big;   /* data is a util/bigbuf buffer (buf_reserve_big), not malloc's */
};

void buf_init(struct buf *b);
/* Starts an outgoing message: empties b and reserves the frame headroom. */
void buf_init_msg(struct buf *b);
void buf_free(struct buf *b);
void buf_reset(struct buf *b);
/* Makes room for n more bytes. */
void buf_reserve(struct buf *b, size_t n);
/* The same for a buffer about to hold megabytes (a file's contents): the storage
 * becomes a util/bigbuf buffer (cached, huge pages) once it is that large. */
void buf_reserve_big(struct buf *b, size_t n);
/* Returns a pointer to n writable bytes at the end and counts them as used. */
char *buf_extend(struct buf *b, size_t n);
void buf_append(struct buf *b, const void *p, size_t n);
void buf_puts(struct buf *b, const char *s);
void buf_putc(struct buf *b, char c);
void buf_printf(struct buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void buf_vprintf(struct buf *b, const char *fmt, va_list ap);
void buf_put_u64(struct buf *b, uint64_t v);
void buf_put_i64(struct buf *b, int64_t v);
/* Appends s as a quoted JSON string. s must be valid UTF-8 (it came from jansson). */
void buf_put_json_str(struct buf *b, const char *s, size_t n);
/* The same without the quotes: s as a JSON string's content. */
void buf_put_json_chars(struct buf *b, const char *s, size_t n);
/* Takes the storage away from b (b becomes empty); the caller frees it, with
 * bigbuf_free_any when it may have been reserved with buf_reserve_big. */
char *buf_steal(struct buf *b);

#endif
