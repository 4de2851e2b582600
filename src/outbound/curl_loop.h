/* curl_loop: libcurl's multi interface on the libuv loop (see curl_loop.c). */
#ifndef EXEC_OUTBOUND_CURL_LOOP_H
#define EXEC_OUTBOUND_CURL_LOOP_H

#include "outbound/curl_dl.h"
#include <stdbool.h>
#include <uv.h>

/* One transfer. The owner sets easy (configured) and done, then adds it; done runs
 * once on the loop when the transfer ends, after the handle left the multi. */
struct curl_loop_job {
    CURL *easy;
    void (*done)(struct curl_loop_job *job, CURLcode result);
};

/* Starts the transfer (the first call sets the loop up). Returns 0, -ENOMEM, or
 * -EINVAL (libcurl refused the handle). */
int curl_loop_add(uv_loop_t *loop, struct curl_loop_job *job);
/* Aborts a transfer in progress: done is not called. */
void curl_loop_remove(struct curl_loop_job *job);
/* Resumes a transfer whose write callback returned CURL_WRITEFUNC_PAUSE. */
void curl_loop_unpause(struct curl_loop_job *job);
/* fn runs after each round of curl's work on the loop (a socket event or a
 * timeout), once the write callbacks of that round are over: a producer that
 * gathered their output (conn_cork) lets it go here, in one write. One hook. */
void curl_loop_on_round_end(void (*fn)(void));
/* Frees the multi handle (daemon shutdown; every job must be removed first). */
void curl_loop_shutdown(void);

#endif
