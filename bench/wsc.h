/* wsc: the benchmark driver's own minimal WebSocket JSON-RPC client.
 *
 * Blocking sockets, the tree's own RFC 6455 code (proto/http_upgrade checks the
 * 101, proto/ws_reader receives in the client role) and a JSON scanner that finds
 * the members it is asked for without building a tree (string values, base64
 * chunks included, are skipped with memchr). It exists so that the driver is never
 * the bottleneck it measures: one recv() fills a large buffer, messages wholly in
 * it are handed out as spans into that buffer without copying (the reader gathers
 * only frames split across reads and fragmented messages), and frames are sent
 * with one writev() of header + payload pieces (the masking key is zero, so the
 * payload goes out unmodified). Not a general client: it trusts the server to
 * speak PROTOCOL.md. */
#ifndef EXEC_BENCH_WSC_H
#define EXEC_BENCH_WSC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#include "proto/ws_reader.h"

/* A slice of a message; not NUL-terminated. */
struct span {
    const char *p;
    size_t n;
};

struct wsc {
    int fd;
    char *buf; /* received bytes [start, end) not yet consumed */
    size_t cap, start, end;
    struct ws_reader rd; /* frames in (client role) */
    uint8_t *direct;     /* bytes received straight into rd's area, not yet fed */
    size_t direct_n;
    uint64_t next_id;
    size_t chunk; /* free space wanted before each recv() */
};

/* ---- JSON scanning (spans point into the caller's message) ---- */

/* Finds member key of the object v. Returns false when v is not an object or has no
 * such member. */
bool js_get(struct span v, const char *key, struct span *out);
/* The contents of a string value (between the quotes, escapes left as they are). */
bool js_str(struct span v, struct span *out);
bool js_u64(struct span v, uint64_t *out);
bool js_i64(struct span v, int64_t *out);
bool span_eq(struct span s, const char *lit);
/* Counts occurrences of lit in s (for counting walk entries and the like). */
size_t span_count(struct span s, const char *lit);

/* ---- connection ---- */

/* Connects to 127.0.0.1:port and performs the WebSocket upgrade. 0 or -errno. */
int wsc_open(struct wsc *c, int port);
/* The same with a 4 KiB receive buffer that grows only as needed: for holding
 * thousands of mostly idle connections. */
int wsc_open_small(struct wsc *c, int port);
/* Wraps a connected socket that already speaks WebSocket frames (no upgrade). */
void wsc_attach(struct wsc *c, int fd);
void wsc_close(struct wsc *c);
/* Sends one text message made of the given pieces. 0 or -errno. */
int wsc_sendv(struct wsc *c, const struct iovec *iov, int iovcnt);
int wsc_send(struct wsc *c, const char *p, size_t n);
/* Sends {"id":N,"method":method,"params":params} and returns N. params is raw JSON. */
uint64_t wsc_request(struct wsc *c, const char *method, const char *params);
/* Sends a notification {"method":method,"params":params}. */
int wsc_notify(struct wsc *c, const char *method, const char *params);

/* Reads once from the socket (it must be readable or the call blocks). Returns bytes
 * read, or -errno (-EPIPE at end of stream). */
long wsc_fill(struct wsc *c);
/* Hands out the next complete buffered message: 1 and *msg set (valid until the next
 * wsc_fill, wsc_next or wsc_wait), 0 when more bytes are needed, -errno on a protocol error or
 * a Close frame. Pings are answered here. */
int wsc_next(struct wsc *c, struct span *msg);
/* Blocks until a message is available or timeout_ms passes (-ETIMEDOUT). */
int wsc_wait(struct wsc *c, struct span *msg, int timeout_ms);

/* Called for every message that is not the awaited response. */
typedef void (*wsc_handler)(void *ud, struct span msg);

/* Waits for the response with the given id, passing everything else to h (may be
 * NULL). On success returns 0 and sets *result (the "result" member). A JSON-RPC
 * error returns -EPROTO and copies its message into err. */
int wsc_await(struct wsc *c, uint64_t id, wsc_handler h, void *ud, struct span *result, char *err,
              size_t errlen, int timeout_ms);
/* wsc_request + wsc_await. */
int wsc_call(struct wsc *c, const char *method, const char *params, wsc_handler h, void *ud,
             struct span *result, char *err, size_t errlen, int timeout_ms);
/* initialize + initialized. */
int wsc_handshake(struct wsc *c, char *err, size_t errlen);

/* Monotonic clock in seconds. */
double now_s(void);

#endif
