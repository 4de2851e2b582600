/* session: the registry, attach/detach/resume and the detached TTL (see
 * session.h). The methods (initialize, environment/info and status, session/close) are in
 * session_methods.c. */
#include "session/session.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <errno.h>
#include <time.h>
#include <unistd.h>

#include "audit/audit.h"
#include "core/limits.h"
#include "core/log.h"
#include "core/metrics.h"
#include "crypto/random.h"
#include "rpc/dispatch.h"
#include "transport/conn.h"
#include "util/mem.h"

static struct session *sessions;
static uv_loop_t *session_loop;
static uint64_t session_ttl_ms = 80000;
static uint64_t detach_counter;
static const struct session_part_ops *parts[SESSION_PARTS_MAX];
static int nparts;

/* Runs hook `fn` of every registered part that has it, with the arguments after. */
#define EACH_PART(fn, ...)                                                                         \
    do {                                                                                           \
        for (int i_ = 0; i_ < nparts; i_++)                                                        \
            if (parts[i_]->fn) parts[i_]->fn(__VA_ARGS__);                                         \
    } while (0)

void session_register_part(const struct session_part_ops *ops)
{
    for (int i = 0; i < nparts; i++)
        if (parts[i] == ops) return;
    if (nparts == SESSION_PARTS_MAX) abort(); /* a new part needs SESSION_PARTS_MAX raised */
    parts[nparts++] = ops;
}

static int part_index(const struct session_part_ops *ops)
{
    for (int i = 0; i < nparts; i++)
        if (parts[i] == ops) return i;
    abort(); /* not registered: a programming error */
}

void *session_part(const struct session *s, const struct session_part_ops *ops)
{
    return s->parts[part_index(ops)];
}

void session_set_part(struct session *s, const struct session_part_ops *ops, void *state)
{
    s->parts[part_index(ops)] = state;
}

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
    snprintf(out, 37, "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", r[0],
             r[1], r[2], r[3], r[4], r[5], r[6], r[7], r[8], r[9], r[10], r[11], r[12], r[13],
             r[14], r[15]);
}

struct session *session_find(const char *id)
{
    for (struct session *s = sessions; s; s = s->next)
        if (strcmp(s->id, id) == 0) return s;
    return NULL;
}

struct session *session_visible(const struct conn *c, const char *id)
{
    struct session *s = session_find(id);
    return s && strcmp(s->identity, conn_identity(c)) == 0 ? s : NULL;
}

static uint64_t wall_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* A session's audit record (audit/audit.h): type, the connection it is about (or
 * NULL) and why it ended (or NULL). */
static void session_audit(const char *type, const struct session *s, const struct conn *c,
                          const char *reason)
{
    struct buf *b = audit_begin(type);
    if (!b) return;
    audit_put_str(b, "session", s->id);
    if (c) {
        audit_put_str(b, "peer", conn_peer(c));
        audit_put_str(b, "transport", conn_kind(c));
        const char *who = conn_identity(c);
        if (*who) audit_put_strn(b, "identity", who, 16);
        audit_put_str(b, "client", s->client_name);
    }
    if (reason) audit_put_str(b, "reason", reason);
    audit_commit(b);
}

static void session_free_cb(uv_handle_t *h)
{
    struct session *s = h->data;
    free(s->client_name);
    free(s);
}

static void session_destroy(struct session *s, const char *reason)
{
    if (s->prev)
        s->prev->next = s->next;
    else
        sessions = s->next;
    if (s->next) s->next->prev = s->prev;
    if (s->conn)
        metrics_sessions_changed(-1, 0);
    else if (s->detached)
        metrics_sessions_changed(0, -1);
    s->detached = false;
    if (s->conn) conn_set_owner(s->conn, NULL, NULL);
    s->conn = NULL;
    EACH_PART(ended, s); /* its processes are killed, its sandbox helpers released */
    session_audit("session.end", s, NULL, reason); /* after its processes' ends */
    s->ttl.data = s;
    uv_close((uv_handle_t *)&s->ttl, session_free_cb);
}

static void session_expired(uv_timer_t *t)
{
    struct session *s = t->data;
    log_event("event=session_expire session=%s detached_ms=%llu processes=killed", s->id,
              (unsigned long long)(s->kept ? s->keep_ms : session_ttl_ms));
    session_destroy(s, "expired");
}

/* conn_owner_ops.closed: the bound connection is gone. */
static void session_conn_closed(void *owner, struct conn *c)
{
    struct session *s = owner;
    if (s->conn != c) return;
    s->conn = NULL;
    metrics_sessions_changed(-1, 0);
    EACH_PART(detached, s, c);
    if (conn_flags(c) & CONN_F_NO_RESUME) {
        /* There is no resume over stdio: the only connection is gone. */
        session_destroy(s, "connection closed");
        return;
    }
    if (s->ending) {
        /* The client said it is done (session/close): nothing to resume. */
        log_event("event=session_end session=%s peer=%s reason=session_close", s->id, conn_peer(c));
        session_destroy(s, "closed");
        return;
    }
    uint64_t ttl = s->kept ? s->keep_ms : session_ttl_ms;
    bool forever = ttl == LIMITS_KEEP_FOREVER;
    char ttl_text[24];
    snprintf(ttl_text, sizeof ttl_text, "%llu", (unsigned long long)ttl);
    log_event("event=session_detach session=%s peer=%s ttl_ms=%s", s->id, conn_peer(c),
              forever ? "forever" : ttl_text);
    session_audit("session.detach", s, c, NULL);
    s->detach_order = ++detach_counter;
    s->detached = true;
    s->detached_ms = wall_ms();
    if (!forever) uv_timer_start(&s->ttl, session_expired, ttl, 0);
    metrics_sessions_changed(0, 1);
    /* Over max_detached: the session detached longest ago expires now. Kept
     * sessions are spared (session_keep allows at most max_detached of them, so
     * there is always another one while the limit is exceeded). */
    size_t detached = 0;
    struct session *oldest = NULL;
    for (struct session *o = sessions; o; o = o->next) {
        if (!o->detached) continue;
        detached++;
        if (!oldest || (oldest->kept && !o->kept) ||
            (oldest->kept == o->kept && o->detach_order < oldest->detach_order))
            oldest = o;
    }
    if (detached > server_limits.max_detached && oldest) {
        log_warn("session %s expired early: %zu detached sessions exceed the limit of %u "
                 "(--max-detached-sessions); killing its processes",
                 oldest->id, detached, server_limits.max_detached);
        session_destroy(oldest, "evicted");
    }
}

/* conn_owner_ops.output_safe: every process output notification the connection
 * has queued past written_total is still in its process's retained log. */
static bool session_conn_output_safe(void *owner, const struct conn *c, uint64_t written_total)
{
    struct session *s = owner;
    for (int i = 0; i < nparts; i++)
        if (parts[i]->output_safe && !parts[i]->output_safe(s, written_total)) return false;
    return true;
}

/* conn_owner_ops.unblocked: the session's producers (its processes) are its parts'. */
static void session_conn_unblocked(void *owner, struct conn *c)
{
    struct session *s = owner;
    EACH_PART(unblocked, s);
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
    while (sessions)
        session_destroy(sessions, "shutdown");
    for (int i = 0; i < nparts; i++)
        if (parts[i]->shutdown) parts[i]->shutdown();
}

static void attach(struct session *s, struct conn *c)
{
    if (s->detached) metrics_sessions_changed(0, -1);
    s->detached = false;
    s->detached_ms = 0;
    metrics_sessions_changed(1, 0);
    uv_timer_stop(&s->ttl);
    s->conn = c;
    conn_set_owner(c, &session_conn_owner, s);
    rpc_conn_set_initialized(c);
}

struct session *session_create(struct conn *c, const char *client_name)
{
    struct session *s = xcalloc(1, sizeof *s);
    uuid_v4(s->id);
    snprintf(s->identity, sizeof s->identity, "%s", conn_identity(c));
    s->client_name = xstrdup(client_name);
    s->created_ms = wall_ms();
    s->loop = session_loop;
    uv_timer_init(session_loop, &s->ttl);
    s->ttl.data = s;
    EACH_PART(created, s);
    s->next = sessions;
    if (sessions) sessions->prev = s;
    sessions = s;
    attach(s, c);
    log_event("event=session_attach session=%s peer=%s resumed=false", s->id, conn_peer(c));
    session_audit("session.start", s, c, NULL);
    return s;
}

void session_resume(struct session *s, struct conn *c)
{
    attach(s, c);
    EACH_PART(attached, s, c);
    log_event("event=session_attach session=%s peer=%s resumed=true", s->id, conn_peer(c));
    session_audit("session.resume", s, c, NULL);
}

int session_keep(struct session *s, uint64_t keep_ms)
{
    unsigned kept = 0;
    for (struct session *o = sessions; o; o = o->next)
        kept += o != s && o->kept;
    if (kept >= server_limits.max_detached) return -ENOSPC;
    s->kept = true;
    s->keep_ms = keep_ms;
    s->ending = false; /* a later session/close still wins */
    return 0;
}

json_t *session_list_json(const struct conn *c)
{
    json_t *arr = json_array();
    const char *who = conn_identity(c);
    for (struct session *s = sessions; s; s = s->next) {
        if (strcmp(s->identity, who) != 0) continue;
        json_t *o = json_object();
        json_object_set_new(o, "sessionId", json_string(s->id));
        json_object_set_new(o, "clientName", json_string(s->client_name));
        json_object_set_new(o, "current", json_boolean(s->conn == c));
        json_object_set_new(o, "attached", json_boolean(s->conn != NULL));
        json_object_set_new(o, "createdAtMs", json_integer((json_int_t)s->created_ms));
        json_object_set_new(o, "detachedAtMs",
                            s->detached ? json_integer((json_int_t)s->detached_ms) : json_null());
        json_t *exp = json_null();
        if (s->detached && uv_is_active((uv_handle_t *)&s->ttl)) {
            uint64_t due = uv_timer_get_due_in(&s->ttl);
            exp = json_integer((json_int_t)(wall_ms() + due));
        }
        json_object_set_new(o, "expiresAtMs", exp);
        json_object_set_new(o, "kept", json_boolean(s->kept));
        json_object_set_new(o, "keepSeconds",
                            !s->kept || s->keep_ms == LIMITS_KEEP_FOREVER
                                ? json_null()
                                : json_integer((json_int_t)(s->keep_ms / 1000)));
        EACH_PART(list, s, o); /* processes, running */
        json_array_append_new(arr, o);
    }
    return arr;
}
