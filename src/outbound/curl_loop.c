/* curl_loop: libcurl's multi interface driven by the libuv loop.
 *
 * One CURLM for the daemon. curl tells us which sockets to watch (socket callback
 * → uv_poll per socket) and when to call it back (timer callback → one uv_timer);
 * we tell curl what happened with curl_multi_socket_action. No thread per request
 * and nothing blocks the loop: name resolution runs in curl's own resolver thread
 * (the threaded resolver of Debian's libcurl), transfers are non-blocking. This is
 * libcurl's documented event-driven mode (the multi-uv example's shape), kept in one
 * module so anything that needs HTTP on the loop (http/request, a registry client)
 * shares it. */
#include "outbound/curl_loop.h"

#include <errno.h>
#include <stdlib.h>

#include "util/mem.h"

struct sock_ctx {
    uv_poll_t poll;
    curl_socket_t fd;
};

static CURLM *multi;
static uv_loop_t *loop_of;
static uv_timer_t timer;
static bool started;

static void check_done(void)
{
    CURLMsg *m;
    int left;
    while ((m = curl_dl_fns.multi_info_read(multi, &left))) {
        if (m->msg != CURLMSG_DONE) continue;
        CURL *easy = m->easy_handle;
        CURLcode rc = m->data.result;
        struct curl_loop_job *job = NULL;
        curl_dl_fns.easy_getinfo(easy, CURLINFO_PRIVATE, (char **)&job);
        curl_dl_fns.multi_remove_handle(multi, easy);
        if (job && job->done) job->done(job, rc);
    }
}

static void (*round_end)(void);

void curl_loop_on_round_end(void (*fn)(void))
{
    round_end = fn;
}

static void action(curl_socket_t fd, int flags)
{
    int running;
    curl_dl_fns.multi_socket_action(multi, fd, flags, &running);
    check_done();
    if (round_end) round_end();
}

static void on_poll(uv_poll_t *h, int status, int events)
{
    struct sock_ctx *sc = h->data;
    int flags = 0;
    if (status < 0) flags = CURL_CSELECT_ERR;
    if (events & UV_READABLE) flags |= CURL_CSELECT_IN;
    if (events & UV_WRITABLE) flags |= CURL_CSELECT_OUT;
    action(sc->fd, flags);
}

static void on_timer(uv_timer_t *t)
{
    action(CURL_SOCKET_TIMEOUT, 0);
}

static void sock_closed(uv_handle_t *h)
{
    free(h->data);
}

static int socket_cb(CURL *easy, curl_socket_t s, int what, void *userp, void *socketp)
{
    struct sock_ctx *sc = socketp;
    if (what == CURL_POLL_REMOVE) {
        if (sc) {
            uv_poll_stop(&sc->poll);
            uv_close((uv_handle_t *)&sc->poll, sock_closed);
            curl_dl_fns.multi_assign(multi, s, NULL);
        }
        return 0;
    }
    if (!sc) {
        sc = xcalloc(1, sizeof *sc);
        sc->fd = s;
        if (uv_poll_init_socket(loop_of, &sc->poll, s) < 0) {
            free(sc);
            return -1; /* libcurl's socket-callback contract: -1 is its error value */
        }
        sc->poll.data = sc;
        curl_dl_fns.multi_assign(multi, s, sc);
    }
    int ev = 0;
    if (what == CURL_POLL_IN || what == CURL_POLL_INOUT) ev |= UV_READABLE;
    if (what == CURL_POLL_OUT || what == CURL_POLL_INOUT) ev |= UV_WRITABLE;
    uv_poll_start(&sc->poll, ev, on_poll);
    return 0;
}

static int timer_cb(CURLM *m, long timeout_ms, void *userp)
{
    /* 0 ("as soon as possible") becomes 1 ms: libuv 1.44 runs a timer re-armed to 0
     * from its own callback again within the same pass, which would starve every
     * socket on the loop while a fast transfer keeps asking. */
    if (timeout_ms < 0)
        uv_timer_stop(&timer);
    else
        uv_timer_start(&timer, on_timer, timeout_ms == 0 ? 1 : (uint64_t)timeout_ms, 0);
    return 0;
}

/* Sets the multi handle up on first use. -ENOMEM when libcurl cannot (out of
 * memory or descriptors): nothing is kept, so the next transfer tries again. */
static int init_once(uv_loop_t *loop)
{
    if (started) return 0;
    if (curl_dl_fns.global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) return -ENOMEM;
    multi = curl_dl_fns.multi_init();
    if (!multi) {
        curl_dl_fns.global_cleanup();
        return -ENOMEM;
    }
    started = true;
    loop_of = loop;
    uv_timer_init(loop, &timer);
    uv_unref((uv_handle_t *)&timer); /* an idle timer must not keep the loop alive */
    curl_dl_fns.multi_setopt(multi, CURLMOPT_SOCKETFUNCTION, socket_cb);
    curl_dl_fns.multi_setopt(multi, CURLMOPT_TIMERFUNCTION, timer_cb);
    return 0;
}

int curl_loop_add(uv_loop_t *loop, struct curl_loop_job *job)
{
    int rc = init_once(loop);
    if (rc < 0) return rc;
    curl_dl_fns.easy_setopt(job->easy, CURLOPT_PRIVATE, (char *)job);
    CURLMcode mc = curl_dl_fns.multi_add_handle(multi, job->easy);
    return mc == CURLM_OK ? 0 : mc == CURLM_OUT_OF_MEMORY ? -ENOMEM : -EINVAL;
}

void curl_loop_remove(struct curl_loop_job *job)
{
    if (multi) curl_dl_fns.multi_remove_handle(multi, job->easy);
}

void curl_loop_unpause(struct curl_loop_job *job)
{
    curl_dl_fns.easy_pause(job->easy, CURLPAUSE_CONT);
    /* Unpausing may deliver buffered data right away or finish the transfer. */
    action(CURL_SOCKET_TIMEOUT, 0);
}

void curl_loop_shutdown(void)
{
    if (!started) return;
    curl_dl_fns.multi_cleanup(multi);
    multi = NULL;
    uv_close((uv_handle_t *)&timer, NULL);
    curl_dl_fns.global_cleanup();
    started = false;
}
