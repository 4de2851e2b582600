/* http_client: one outbound HTTP(S) call on libcurl's multi interface on the loop
 * (outbound/curl_loop), without the protocol: checking the method and URL, the
 * request's headers (a value may come from the executor's environment), redirects,
 * proxies and trust, the response's status and headers, and its body either
 * collected (bounded: HTTP_BUFFERED_MAX) or handed over as curl reads it, with
 * pausing. What happens is reported through the struct http_call_events the owner
 * gives (http_methods.c turns them into the result and the body deltas). */
#ifndef EXEC_HTTP_HTTP_CLIENT_H
#define EXEC_HTTP_HTTP_CLIENT_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "outbound/curl_loop.h"
#include "util/buf.h"

#define HTTP_BUFFERED_MAX (64u << 20) /* a buffered body beyond this: use streamResponse */

struct http_call;

/* How a call ended, as the reference tells them apart. */
enum http_outcome {
    HTTP_OK,
    HTTP_BODY_TIMEOUT, /* streamed: the deadline passed after the response began */
    HTTP_BODY_BROKEN,  /* the body could not be read or decoded */
    HTTP_TOO_BIG,      /* buffered: the body exceeds HTTP_BUFFERED_MAX */
    HTTP_SEND_FAILED,  /* no response: connecting, sending, the deadline, a redirect */
};

/* What a call tells its owner, on the loop thread. */
struct http_call_events {
    /* Streamed: the final response's status and headers are in (once at most). */
    void (*response)(struct http_call *c);
    /* Streamed: n bytes of the body; false pauses the call (the same bytes are
     * offered again after http_call_resume). */
    bool (*body)(struct http_call *c, const void *data, size_t n);
    /* The call ended (it has left the loop); the owner frees it here or later. */
    void (*done)(struct http_call *c, enum http_outcome outcome);
};

struct http_call {
    struct curl_loop_job job;
    const struct http_call_events *events;
    bool stream, follow;
    bool paused; /* a body event said false */
    struct curl_slist *hdrs;
    uint8_t *body; /* the request's body, or NULL */
    size_t body_len;
    long status;
    json_t *resp_headers; /* [{name,value}] of the response being received, or NULL */
    struct buf body_buf;  /* buffered mode: the response's body */
    bool too_big;
};

/* Why a request cannot be made: -ENOSYS (libcurl could not be loaded) or -EINVAL
 * (method, URL or scheme), with the reference's text in err; 0 if it can. */
int http_call_check(const char *method, const char *url, char *err, size_t errlen);
void http_call_init(struct http_call *c, const struct http_call_events *events, bool stream,
                    bool follow);
/* Frees what the call holds (not c itself). */
void http_call_free(struct http_call *c);
/* Adds a request header; its value is `value` then the environment variable
 * `env_var` (either may be NULL). Returns 0, or -EINVAL with the text in err. */
int http_call_add_header(struct http_call *c, const char *name, const char *value,
                         const char *env_var, char *err, size_t errlen);
/* Starts the call (headers and body set; timeout_ms < 0 for none). Returns 0, or a
 * negative errno when curl refused it (no event follows). */
int http_call_start(struct http_call *c, uv_loop_t *loop, const char *method, const char *url,
                    long timeout_ms);
/* A paused call reads on. */
void http_call_resume(struct http_call *c);
/* Stops a call in progress: no event follows. */
void http_call_abort(struct http_call *c);

#endif
