/* session: the registry, attach/detach/resume and the detached TTL (see
 * session.h). The methods (initialize, environment/info and status, session/close) are in
 * session_methods.c. */
#include "session/session.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/limits.h"
#include "core/log.h"
#include "core/metrics.h"
#include "crypto/random.h"
#include "fs/fs_watch.h"
#include "process/process.h"
#include "process/shell_snapshot.h"
#include "rpc/dispatch.h"
#include "sandbox/helper.h"
#include "transport/conn.h"
#include "util/mem.h"

static struct session *sessions;
static uv_loop_t *session_loop;
static uint64_t session_ttl_ms = 80000;
static uint64_t detach_counter;

void session_configure(uv_loop_t *loop, uint64_t detached_ttl_ms)
{
    session_loop = loop;
    session_ttl_ms = detached_ttl_ms;
}

static void uuid_v4(char out[37])
{
    uint8_t r[16];
    crypto_random_bytes(r, sizeof r); /* the id is what a resume presents: unguessable */
    r[6] = (uint8_t)((r[6] & 0x0F) | 0x40);
    r[8] = (uint8_t)((r[8] & 0x3F) | 0x80);
    snprintf(out, 37, "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x",
             r[0], r[1], r[2], r[3], r[4], r[5], r[6], r[7], r[8], r[9], r[10], r[11], r[12],
             r[13], r[14], r[15]);
}

struct session *session_find(const char *id)
{
    for (struct session *s = sessions; s; s = s->next)
        if (strcmp(s->id, id) == 0) return s;
    return NULL;
}

static void session_free_cb(uv_handle_t *h)
{
    free(h->data);
}

static void session_destroy(struct session *s)
{
    if (s->prev) s->prev->next = s->next;
    else sessions = s->next;
    if (s->next) s->next->prev = s->prev;
    /* The TTL timer runs exactly while the session is detached. */
    if (s->conn) metrics_sessions_changed(-1, 0);
    else if (uv_is_active((uv_handle_t *)&s->ttl)) metrics_sessions_changed(0, -1);
    if (s->conn) conn_set_owner(s->conn, NULL, NULL);
    s->conn = NULL;
    proc_table_destroy(s->procs);
    fs_watch_table_destroy(s->watches);
    sandbox_helper_release_owner(s->id); /* its warm sandbox helpers die with it */
    s->ttl.data = s;
    uv_close((uv_handle_t *)&s->ttl, session_free_cb);
}

static void session_expired(uv_timer_t *t)
{
    struct session *s = t->data;
    log_event("event=session_expire session=%s detached_ms=%llu processes=killed", s->id,
             (unsigned long long)session_ttl_ms);
    metrics_sessions_changed(0, -1); /* the fired timer is no longer active */
    session_destroy(s);
}

/* conn_owner_ops.closed: the bound connection is gone. */
static void session_conn_closed(void *owner, struct conn *c)
{
    struct session *s = owner;
    if (s->conn != c) return;
    s->conn = NULL;
    metrics_sessions_changed(-1, 0);
    proc_table_detached(s->procs, c);
    if (conn_flags(c) & CONN_F_NO_RESUME) {
        /* There is no resume over stdio: the only connection is gone. */
        session_destroy(s);
        return;
    }
    if (s->ending) {
        /* The client said it is done (session/close): nothing to resume. */
        log_event("event=session_end session=%s peer=%s reason=session_close", s->id,
                  conn_peer(c));
        session_destroy(s);
        return;
    }
    log_event("event=session_detach session=%s peer=%s ttl_ms=%llu", s->id, conn_peer(c),
              (unsigned long long)session_ttl_ms);
    s->detach_order = ++detach_counter;
    uv_timer_start(&s->ttl, session_expired, session_ttl_ms, 0);
    metrics_sessions_changed(0, 1);
    /* Over max_detached: the session detached longest ago expires now. */
    size_t detached = 0;
    struct session *oldest = NULL;
    for (struct session *o = sessions; o; o = o->next) {
        if (o->conn) continue;
        detached++;
        if (!oldest || o->detach_order < oldest->detach_order) oldest = o;
    }
    if (detached > server_limits.max_detached && oldest) {
        log_warn("session %s expired early: %zu detached sessions exceed the limit of %u "
                 "(--max-detached-sessions); killing its processes",
                 oldest->id, detached, server_limits.max_detached);
        session_destroy(oldest);
    }
}

/* conn_owner_ops.output_safe: every process output notification the connection
 * has queued past written_total is still in its process's retained log. */
static bool session_conn_output_safe(void *owner, const struct conn *c, uint64_t written_total)
{
    struct session *s = owner;
    return proc_table_output_safe(s->procs, written_total);
}

/* conn_owner_ops.unblocked: the session's producers are its processes. */
static void session_conn_unblocked(void *owner, struct conn *c)
{
    struct session *s = owner;
    proc_table_resume_output(s->procs);
}

static const struct conn_owner_ops session_conn_owner = {
    .closed = session_conn_closed,
    .unblocked = session_conn_unblocked,
    .output_safe = session_conn_output_safe,
};

struct session *session_of(const struct conn *c)
{
    return conn_owner(c, &session_conn_owner);
}

void session_destroy_all(void)
{
    while (sessions) session_destroy(sessions);
    proc_snapshot_shutdown();
}

static void attach(struct session *s, struct conn *c)
{
    if (uv_is_active((uv_handle_t *)&s->ttl)) metrics_sessions_changed(0, -1);
    metrics_sessions_changed(1, 0);
    uv_timer_stop(&s->ttl);
    s->conn = c;
    conn_set_owner(c, &session_conn_owner, s);
    rpc_conn_set_initialized(c);
}

struct session *session_create(struct conn *c)
{
    struct session *s = xcalloc(1, sizeof *s);
    uuid_v4(s->id);
    s->loop = session_loop;
    uv_timer_init(session_loop, &s->ttl);
    s->ttl.data = s;
    s->procs = proc_table_new(s);
    s->next = sessions;
    if (sessions) sessions->prev = s;
    sessions = s;
    attach(s, c);
    log_event("event=session_attach session=%s peer=%s resumed=false", s->id, conn_peer(c));
    return s;
}

void session_resume(struct session *s, struct conn *c)
{
    attach(s, c);
    proc_table_attached(s->procs, c);
    log_event("event=session_attach session=%s peer=%s resumed=true", s->id, conn_peer(c));
}
