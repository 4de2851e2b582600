/* ec_client: the client of libexecclient above its socket (which is ec_conn.c).
 *
 * WebSocket frames read off the connection (through proto/ws_reader in the client
 * role: this file answers its ping and close events), the plain message layer,
 * request/response matching by integer id, and reconnect + resume.
 * Pushed process events go to the sans-I/O trackers of ec_proto.c; this file only
 * moves messages and decides when to send process/read.
 *
 * Reconnect rules: one attempt shared by the whole client (`reconnecting`
 * guards against nesting); initialize{resumeSessionId} retried while the server still
 * holds the old socket (-32010); an unknown session is terminal; after resume every
 * process gets a RESYNC event and one catch-up process/read(afterSeq); a pending
 * process/write is re-sent with the same writeId; any other call in flight (start, fs,
 * generic calls) fails instead of being replayed. */
#include "crypto/random.h"
#include "ec_internal.h"

#include "proto/base64.h"
#include "util/mem.h"

#include <errno.h>
#include <stdint.h>
#include <openssl/ssl.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define EC_PUMP_BUDGET (1u << 20) /* socket bytes handled per pump() call */

const char *ec_err_kind_name(ec_err_kind kind)
{
    switch (kind) {
    case EC_OK: return "ok";
    case EC_ERR_TRANSPORT: return "transport";
    case EC_ERR_SERVER: return "server";
    case EC_ERR_TIMEOUT: return "timeout";
    case EC_ERR_PROTOCOL: return "protocol";
    case EC_ERR_USAGE: return "usage";
    case EC_ERR_SESSION_LOST: return "session lost";
    }
    return "unknown";
}

static void err_copy(ec_error *dst, const ec_error *src)
{
    if (dst) *dst = *src;
}

static void deliver(ec_client *c, const char *text, size_t len);

/* The plain layer: one JSON-RPC message per WebSocket text message. */
static int plain_open(ec_client *c, int64_t deadline, ec_error *err)
{
    return ec_conn_open_ws(c, deadline, err);
}

static int plain_send(ec_client *c, const char *text, size_t len, ec_error *err)
{
    return ec_conn_send_ws(c, WS_OP_TEXT, text, len, err);
}

static int plain_on_ws_message(ec_client *c, int opcode, const uint8_t *p, size_t n)
{
    (void)opcode; /* binary messages are taken as JSON too, as before */
    deliver(c, (const char *)p, n);
    return 0;
}

static const struct ec_msg_layer plain_layer = {
    .open = plain_open,
    .send = plain_send,
    .on_ws_message = plain_on_ws_message,
};

int ec_send_text_inplace(ec_client *c, char *text, size_t n, ec_error *err)
{
    if (c->fd < 0) return ec_fail(err, EC_ERR_TRANSPORT, 0, "connection lost");
    if (c->ml == &plain_layer)
        return ec_conn_send_ws_inplace(c, WS_OP_TEXT, (uint8_t *)text, n, err);
    return c->ml->send(c, text, n, err);
}

/* ---- pending requests ---------------------------------------------------------- */

static struct ec_pending *pending_new(ec_client *c, int kind, const char *method, json_t *params)
{
    struct ec_pending *p = xcalloc(1, sizeof *p);
    p->id = c->next_id++;
    p->kind = kind;
    p->method = xstrdup(method);
    p->params = params; /* owned */
    p->next = c->pending;
    c->pending = p;
    return p;
}

static void pending_unlink_free(ec_client *c, struct ec_pending *p)
{
    for (struct ec_pending **pp = &c->pending; *pp; pp = &(*pp)->next) {
        if (*pp == p) {
            *pp = p->next;
            break;
        }
    }
    free(p->method);
    json_decref(p->params);
    json_decref(p->result);
    free(p);
}

static int pending_send(ec_client *c, struct ec_pending *p, ec_error *err)
{
    char *text = ec_msg_request(p->id, p->method, p->params);
    int rc = c->fd >= 0 ? c->ml->send(c, text, strlen(text), err)
                        : ec_fail(err, EC_ERR_TRANSPORT, 0, "connection lost");
    free(text);
    /* A failed send never reached the server as a whole frame: it is not in flight,
     * so it may go again after a reconnect whatever the method. */
    p->sent = rc == 0;
    return rc;
}

static void pending_fail(struct ec_pending *p, ec_err_kind kind, const char *fmt, const char *m)
{
    p->done = true;
    ec_fail(&p->err, kind, 0, fmt, m);
}

struct ec_pending *ec_pending_new(ec_client *c, int kind, const char *method, json_t *params)
{
    return pending_new(c, kind, method, params);
}

int ec_pending_send(ec_client *c, struct ec_pending *pd)
{
    return pending_send(c, pd, NULL);
}

void ec_pending_unlink_free(ec_client *c, struct ec_pending *pd)
{
    pending_unlink_free(c, pd);
}

json_t *ec_process_params(const ec_process *p)
{
    json_t *o = json_pack("{s:s}", "processId", p->id);
    if (p->session_id) json_object_set_new(o, "sessionId", json_string(p->session_id));
    return o;
}

/* ---- incoming messages ----------------------------------------------------------- */

/* s (NUL-terminated) is the n bytes at t. */
static bool same_str(const char *s, const char *t, size_t n)
{
    return strncmp(s, t, n) == 0 && s[n] == 0;
}

/* The handle a process notification is for: a viewer's copy names the other session
 * (`sessionId`, ours); the session's own events do not. Ids as bytes and lengths
 * (sid NULL: none). */
static ec_process *find_process_n(ec_client *c, const char *sid, size_t sid_len, const char *id,
                                  size_t id_len)
{
    if (sid && c->session_id && same_str(c->session_id, sid, sid_len)) sid = NULL;
    for (ec_process *p = c->procs; p; p = p->next) {
        if (!same_str(p->id, id, id_len)) continue;
        if (!sid ? !p->session_id : p->session_id && same_str(p->session_id, sid, sid_len))
            return p;
    }
    return NULL;
}

static ec_process *find_process_in(ec_client *c, const char *session_id, const char *id)
{
    return find_process_n(c, session_id, session_id ? strlen(session_id) : 0, id, strlen(id));
}

static ec_process *find_process(ec_client *c, const char *id)
{
    return find_process_in(c, NULL, id);
}

/* process/output of an open handle, taken without a JSON tree (ec_msg_output_view):
 * true when taken. Anything unexpected is left to the full parse below. */
static bool deliver_output(ec_client *c, const char *text, size_t len)
{
    struct ec_output_view v;
    if (!ec_msg_output_view(text, len, &v)) return false;
    ec_process *p =
        find_process_n(c, v.session_id, v.session_id_len, v.process_id, v.process_id_len);
    if (!p) return false;
    ec_track_on_output(&p->t, v.seq, v.stream, v.b64, v.b64_len);
    p->last_progress_ms = ec_now_ms();
    return true;
}

static void on_read_reply(ec_client *c, struct ec_pending *pd, struct ec_msg *m)
{
    ec_process *p = pd->reader;
    if (!p) return;
    p->read_pending = NULL;
    p->last_progress_ms = ec_now_ms();
    if (m->kind == EC_MSG_RESPONSE) {
        if (ec_track_on_read_result(&p->t, m->result) != 0) {
            p->broken = true;
            ec_fail(&p->broken_err, EC_ERR_PROTOCOL, 0, "malformed process/read result");
        }
        return;
    }
    ec_track_on_read_failed(&p->t);
    /* A read that the server refuses will be refused again: stop here. */
    p->broken = true;
    ec_fail(&p->broken_err, EC_ERR_SERVER, m->err_code, "process/read: %s", m->err_message);
}

void ec_client_use_feature(ec_client *c, const struct ec_feature *f)
{
    for (int i = 0; i < c->n_features; i++)
        if (c->features[i] == f) return;
    if (c->n_features < EC_FEATURES_MAX) c->features[c->n_features++] = f;
}

/* One decoded JSON-RPC message, to the request table / process trackers / features /
 * hook (c->deliver). */
static void deliver(ec_client *c, const char *text, size_t len)
{
    if (deliver_output(c, text, len)) return;
    for (int i = 0; i < c->n_features; i++)
        if (c->features[i]->on_raw && c->features[i]->on_raw(c, text, len)) return;
    struct ec_msg m;
    if (ec_msg_parse(text, len, &m) != 0) {
        if (c->hook) c->hook(c->hook_ud, text, len);
        return;
    }
    if ((m.kind == EC_MSG_RESPONSE || m.kind == EC_MSG_ERROR) && m.id_is_int) {
        for (struct ec_pending *pd = c->pending; pd; pd = pd->next) {
            if (pd->id != m.id || pd->done) continue;
            if (pd->kind == EC_PENDING_READ) {
                on_read_reply(c, pd, &m);
                pending_unlink_free(c, pd);
            } else if (pd->kind == EC_PENDING_FEATURE) {
                if (pd->owner->on_reply) pd->owner->on_reply(c, pd, &m);
                pending_unlink_free(c, pd);
            } else {
                pd->done = true;
                if (m.kind == EC_MSG_RESPONSE) {
                    pd->result = json_incref(m.result);
                } else {
                    ec_fail(&pd->err, EC_ERR_SERVER, m.err_code, "%s", m.err_message);
                }
            }
            ec_msg_clear(&m);
            return;
        }
    }
    for (int i = 0; m.kind == EC_MSG_NOTIFICATION && i < c->n_features; i++) {
        const struct ec_feature *f = c->features[i];
        if (f->on_notification && f->on_notification(c, &m)) {
            ec_msg_clear(&m);
            return;
        }
    }
    if (m.kind == EC_MSG_NOTIFICATION && strncmp(m.method, "process/", 8) == 0) {
        const char *pid = json_string_value(json_object_get(m.params, "processId"));
        const char *sid = json_string_value(json_object_get(m.params, "sessionId"));
        ec_process *p = pid ? find_process_in(c, sid, pid) : NULL;
        if (p && strcmp(m.method, "process/attachEnded") == 0) {
            /* The watched process went away without an exit (its session ended). */
            if (!p->t.closed_queued && !p->broken) {
                p->broken = true;
                ec_fail(&p->broken_err, EC_ERR_SESSION_LOST, 0,
                        "session %s ended: process %s is gone", sid ? sid : "?", p->id);
            }
            ec_msg_clear(&m);
            return;
        }
        if (p) {
            ec_track_on_notification(&p->t, m.method, m.params);
            p->last_progress_ms = ec_now_ms();
            ec_msg_clear(&m);
            return;
        }
    }
    if (c->hook) c->hook(c->hook_ud, text, len);
    ec_msg_clear(&m);
}

/* Sends the catch-up reads the trackers ask for. */
static void kick_reads(ec_client *c)
{
    if (c->fd < 0 || c->reconnecting) return;
    for (ec_process *p = c->procs; p; p = p->next) {
        if (p->broken || p->read_pending || !ec_track_wants_read(&p->t)) continue;
        json_t *params = ec_track_read_params(&p->t, p->id);
        if (p->session_id) json_object_set_new(params, "sessionId", json_string(p->session_id));
        struct ec_pending *pd = pending_new(c, EC_PENDING_READ, "process/read", params);
        pd->reader = p;
        p->read_pending = pd;
        if (pending_send(c, pd, NULL) != 0) return; /* the loss is handled by the next pump */
    }
}

static int reconnect(ec_client *c, ec_error *err);

/* dead_err is set: the client is lost for good (readable from other threads). */
static void mark_dead(ec_client *c)
{
    c->dead = true;
    __atomic_store_n(&c->gone, 1, __ATOMIC_RELEASE);
}

bool ec_client_lost(const ec_client *c, ec_error *why)
{
    if (!__atomic_load_n(&c->gone, __ATOMIC_ACQUIRE)) return false;
    if (why) *why = c->dead_err;
    return true;
}

/* " (why)" when the message layer knows why the connection went, else "". */
static const char *loss_suffix(ec_client *c, char *buf, size_t n)
{
    const char *why = c->ml->loss_reason ? c->ml->loss_reason(c) : NULL;
    if (!why || !*why) return "";
    snprintf(buf, n, ": %s", why);
    return buf;
}

/* Connection loss: reconnect (once, shared) or fail everything. */
static int handle_loss(ec_client *c, ec_error *err)
{
    if (c->dead) {
        err_copy(err, &c->dead_err);
        return -(int)c->dead_err.kind;
    }
    if (c->reconnecting)
        return ec_fail(err, EC_ERR_TRANSPORT, 0, "connection lost during reconnect");
    /* In-flight calls that must not be replayed fail now; reads are re-issued from the
     * trackers' afterSeq; writes keep their writeId and are re-sent. Without a resume
     * to come, every call fails below, with why the connection went. */
    bool resume = c->reconnect_timeout_ms > 0 && c->session_id && !c->ml->no_resume;
    for (struct ec_pending *pd = c->pending, *next; pd; pd = next) {
        next = pd->next;
        if (pd->done) continue;
        if (pd->kind == EC_PENDING_READ) {
            if (pd->reader) {
                pd->reader->read_pending = NULL;
                ec_track_on_read_failed(&pd->reader->t);
            }
            pending_unlink_free(c, pd);
        } else if (pd->kind == EC_PENDING_FEATURE) {
            pending_unlink_free(c, pd); /* what it belonged to ends below */
        } else if (resume && pd->kind != EC_PENDING_RETRY && pd->sent) {
            pending_fail(pd, EC_ERR_TRANSPORT, "connection lost while waiting for %s; not replayed",
                         pd->method);
        }
    }
    for (int i = 0; i < c->n_features; i++) /* streams belong to the connection */
        if (c->features[i]->on_loss) c->features[i]->on_loss(c);
    if (!resume) {
        char why[200];
        const char *suffix = loss_suffix(c, why, sizeof why);
        ec_fail(&c->dead_err, EC_ERR_TRANSPORT, 0, "connection to the server lost%s", suffix);
        mark_dead(c);
        for (struct ec_pending *pd = c->pending; pd; pd = pd->next) {
            if (pd->done) continue;
            char what[300];
            snprintf(what, sizeof what, "%s%s", pd->method, suffix);
            pending_fail(pd, EC_ERR_TRANSPORT, "connection lost while waiting for %s", what);
        }
        err_copy(err, &c->dead_err);
        return -EC_ERR_TRANSPORT;
    }
    for (ec_process *p = c->procs; p; p = p->next)
        ec_track_on_resume(&p->t);
    return reconnect(c, err);
}

/* One poll + read + dispatch step, waiting at most timeout_ms. Returns 0 (maybe
 * nothing happened) or a negative kind when the connection is gone for good. */
static int pump(ec_client *c, int timeout_ms, ec_error *err)
{
    if (c->fd < 0) {
        char why[200];
        if (c->reconnecting)
            return ec_fail(err, EC_ERR_TRANSPORT, 0, "connection lost%s",
                           loss_suffix(c, why, sizeof why));
        int rc = handle_loss(c, err);
        if (rc) return rc;
        kick_reads(c);
        return 0;
    }
    timeout_ms = ec_conn_keepalive(c, timeout_ms);
    if (c->fd < 0) return pump(c, 0, err);
    /* Not waiting: the read itself says whether anything came (a host that polled the
     * socket already calls this with 0; a poll() more per batch is a syscall more). */
    int r = 1;
    if (timeout_ms != 0) {
        struct pollfd pfd = {.fd = c->fd, .events = POLLIN};
        r = poll(&pfd, 1, timeout_ms);
    }
    if (r < 0 && errno != EINTR)
        return ec_fail(err, EC_ERR_TRANSPORT, 0, "poll: %s", strerror(errno));
    if (r > 0) {
        /* A bounded batch per call: the caller gets to consume events in between, and
         * a fast producer is held back by TCP flow control instead of piling up here. */
        size_t budget = EC_PUMP_BUDGET;
        for (;;) {
            ssize_t n = ec_conn_read_some(c);
            if (n < 0) break;
            if (ec_conn_handle_input(c) < 0 || n == 0 || c->rx_short) break;
            if ((size_t)n >= budget) break;
            budget -= (size_t)n;
        }
    }
    if (c->fd < 0) return pump(c, 0, err);
    kick_reads(c);
    return 0;
}

/* Waits for pd to complete. Takes pd out of the table. */
static int pending_wait(ec_client *c, struct ec_pending *pd, int64_t deadline, json_t **result,
                        ec_error *err)
{
    int rc = 0;
    while (!pd->done) {
        int left = ec_remaining(deadline);
        if (left == 0) {
            rc = ec_fail(err, EC_ERR_TIMEOUT, 0, "%s timed out", pd->method);
            goto out;
        }
        rc = pump(c, left, err);
        if (rc && !pd->done) goto out;
    }
    if (pd->err.kind != EC_OK) {
        err_copy(err, &pd->err);
        rc = -(int)pd->err.kind;
    } else {
        rc = 0;
        if (result) {
            *result = pd->result;
            pd->result = NULL;
        }
    }
out:
    pending_unlink_free(c, pd);
    return rc;
}

int ec_pump(ec_client *c, int timeout_ms, ec_error *err)
{
    return pump(c, timeout_ms, err);
}

int ec_call_kind(ec_client *c, int kind, const char *method, json_t *params, json_t **result,
                 ec_error *err)
{
    if (result) *result = NULL;
    if (c->dead) {
        json_decref(params);
        err_copy(err, &c->dead_err);
        return -(int)c->dead_err.kind;
    }
    if (!c->reconnecting) {
        /* Notice a loss that happened since the last call (EOF already queued) and
         * resume before sending, rather than fail a request the server never saw. */
        int rc = pump(c, 0, err);
        if (rc) {
            json_decref(params);
            return rc;
        }
    }
    struct ec_pending *pd = pending_new(c, kind, method, params);
    int64_t deadline = ec_deadline(c->call_timeout_ms);
    pending_send(c, pd, NULL); /* a failed send shows up as a loss in the wait */
    return pending_wait(c, pd, deadline, result, err);
}

int ec_client_call(ec_client *c, const char *method, json_t *params, json_t **result, ec_error *err)
{
    return ec_call_kind(c, EC_PENDING_CALL, method, params, result, err);
}

/* initialize (+ initialized) on the current connection. */
static int do_initialize(ec_client *c, int64_t deadline, const char *resume, ec_error *err)
{
    json_t *params = json_pack("{s:s}", "clientName", c->client_name);
    if (resume) json_object_set_new(params, "resumeSessionId", json_string(resume));
    struct ec_pending *pd = pending_new(c, EC_PENDING_CALL, "initialize", params);
    pending_send(c, pd, NULL);
    json_t *res = NULL;
    int rc = pending_wait(c, pd, deadline, &res, err);
    if (rc) return rc;
    const char *sid = json_string_value(json_object_get(res, "sessionId"));
    if (!sid) {
        json_decref(res);
        return ec_fail(err, EC_ERR_PROTOCOL, 0, "initialize result has no sessionId");
    }
    if (!c->session_id) {
        c->session_id = xstrdup(sid);
    } else if (strcmp(sid, c->session_id) != 0) {
        /* A resume that lands in another session would hand our process handles to
         * strangers' ids: terminal, like an unknown session. */
        json_decref(res);
        return ec_fail(err, EC_ERR_SERVER, 0, "resume answered with another session (%s)", sid);
    }
    json_t *info = json_object_get(res, "environmentInfo");
    if (json_is_object(info)) {
        json_decref(c->env_info);
        c->env_info = json_incref(info);
    }
    json_decref(res);
    const char *note = "{\"method\":\"initialized\",\"params\":{}}";
    return c->ml->send(c, note, strlen(note), err);
}

static int reconnect(ec_client *c, ec_error *err)
{
    c->reconnecting = true;
    if (c->on_reconnect) c->on_reconnect(c->on_reconnect_ud, EC_RECONNECTING);
    int64_t deadline = ec_deadline(c->reconnect_timeout_ms);
    int rc;
    ec_error e = {0};
    int delay = 25;
    int64_t refused_since = 0; /* when the current run of refusals started */
    for (;;) {
        ec_conn_drop(c);
        rc = c->ml->open(c, deadline, &e);
        if (rc == 0) rc = do_initialize(c, deadline, c->session_id, &e);
        if (rc == 0) break;
        /* -32010: the server has not noticed the old socket's close yet. A registry's
         * 404 or 409 (HTTP statuses, where JSON-RPC codes are negative) is "not there
         * yet": a registry that restarted with its state in memory, an executor not
         * registered or attached again; tried again within the window, like a
         * refused connection. A 401 (the registry's, or the executor's word that its
         * own credentials were refused) is not retried: each attempt would spend one
         * more authorization. */
        bool not_yet = rc == -EC_ERR_SERVER && (e.code == 404 || e.code == 409);
        bool retry = (rc != -EC_ERR_SERVER || e.code == -32010 || not_yet) &&
                     !(rc == -EC_ERR_TRANSPORT && e.code == 401);
        if (rc == -EC_ERR_TRANSPORT && e.code == 401) {
            c->dead = true;
            ec_fail(&c->dead_err, EC_ERR_TRANSPORT, 401, "connection lost; reconnect failed: %s",
                    e.message);
            break;
        }
        if (!retry) {
            ec_fail(&c->dead_err, EC_ERR_SESSION_LOST, e.code, "cannot resume session %s: %s",
                    c->session_id, e.message);
            mark_dead(c);
            break;
        }
        /* Nothing listens there any more (the server stopped): a short wait covers
         * a restart, then give up rather than knock for the whole resume window. */
        refused_since = c->last_refused ? (refused_since ? refused_since : ec_now_ms()) : 0;
        bool refused_long = refused_since && c->refused_timeout_ms > 0 &&
                            ec_now_ms() - refused_since >= c->refused_timeout_ms;
        if (ec_remaining(deadline) == 0 || refused_long) {
            ec_fail(&c->dead_err, EC_ERR_TRANSPORT, 0, "connection lost; reconnect failed: %s",
                    e.message);
            mark_dead(c);
            break;
        }
        int left = ec_remaining(deadline);
        usleep((useconds_t)(delay < left ? delay : left) * 1000);
        if (delay < 500) delay *= 2;
    }
    c->reconnecting = false;
    if (c->dead) {
        ec_conn_drop(c);
        /* Every call in flight fails with why the resume failed (one reason for the
         * caller to print, not "lost while waiting for" some method). */
        for (struct ec_pending *pd = c->pending; pd; pd = pd->next)
            if (!pd->done) pending_fail(pd, c->dead_err.kind, "%s", c->dead_err.message);
        err_copy(err, &c->dead_err);
        if (c->on_reconnect) c->on_reconnect(c->on_reconnect_ud, EC_RECONNECT_FAILED);
        return -(int)c->dead_err.kind;
    }
    c->reconnects++;
    if (c->on_reconnect) c->on_reconnect(c->on_reconnect_ud, EC_RECONNECTED);
    /* Writes in flight go again with new request ids and the same writeId; so do
     * requests that never left this client. */
    for (struct ec_pending *pd = c->pending; pd; pd = pd->next) {
        if (pd->done || (pd->kind != EC_PENDING_RETRY && pd->sent)) continue;
        pd->id = c->next_id++;
        pending_send(c, pd, NULL);
    }
    return 0;
}

/* ---- public client API ------------------------------------------------------------ */

int ec_client_connect(const ec_client_options *o, ec_client **out, ec_error *err)
{
    *out = NULL;
    if (!o) return ec_fail(err, EC_ERR_USAGE, 0, "no options");
    ec_client *c = xcalloc(1, sizeof *c);
    c->ml = &plain_layer;
    c->deliver = deliver;
    c->fd = -1;
    c->next_id = 1;
    c->ca_file = o->ca_file ? xstrdup(o->ca_file) : NULL;
    int rc;
    if (o->program_argv) {
        rc = ec_program_init(c, o, err);
    } else if (o->remote_url) {
        /* The token goes to the registry only; the rendezvous URL is signed. */
        rc = ec_remote_init(c, o, err);
    } else {
        rc = ec_url_parse(o->url, &c->host, &c->port, &c->path, &c->tls, err);
        c->token = o->bearer_token ? xstrdup(o->bearer_token) : NULL;
    }
    if (rc) goto fail;
    c->client_name = xstrdup(o->client_name ? o->client_name : "exec-client");
    c->call_timeout_ms = o->call_timeout_ms ? o->call_timeout_ms : 60000;
    c->reconnect_timeout_ms = o->reconnect_timeout_ms;
    c->refused_timeout_ms = o->refused_timeout_ms;
    c->lag_ms = o->lag_ms > 0 ? o->lag_ms : 5000;
    c->on_reconnect = o->on_reconnect;
    c->on_reconnect_ud = o->on_reconnect_ud;
    int64_t deadline = ec_deadline(o->connect_timeout_ms > 0 ? o->connect_timeout_ms : 10000);
    rc = c->ml->open(c, deadline, err);
    if (rc == 0 && !o->skip_initialize) {
        c->reconnecting = true; /* no resume before there is a session */
        rc = do_initialize(c, deadline, o->resume_session_id, err);
        c->reconnecting = false;
    }
    if (rc) goto fail;
    *out = c;
    return 0;
fail:
    ec_client_close(c);
    return rc;
}

void ec_client_close(ec_client *c)
{
    if (!c) return;
    if (c->fd >= 0) {
        if (c->ml->on_close) c->ml->on_close(c);
    }
    if (c->fd >= 0) {
        uint8_t code[2] = {0x03, 0xE8}; /* 1000 normal closure */
        ec_conn_send_ws(c, WS_OP_CLOSE, code, 2, NULL);
    }
    ec_conn_drop(c);
    if (c->ml->destroy) c->ml->destroy(c);
    while (c->procs)
        ec_process_free(c->procs);
    for (int i = 0; i < c->n_features; i++)
        if (c->features[i]->free_all) c->features[i]->free_all(c);
    while (c->pending)
        pending_unlink_free(c, c->pending);
    json_decref(c->env_info);
    free(c->session_id);
    free(c->host);
    free(c->port);
    free(c->path);
    free(c->token);
    free(c->ca_file);
    SSL_CTX_free(c->ssl_ctx);
    free(c->client_name);
    free(c->rbuf);
    ws_reader_free(&c->rd);
    free(c->wbuf);
    free(c);
}

const char *ec_client_session_id(const ec_client *c)
{
    return c->session_id;
}

json_t *ec_client_environment_info(const ec_client *c)
{
    return c->env_info;
}

bool ec_client_has_capability(const ec_client *c, const char *name)
{
    json_t *caps = json_object_get(c->env_info, "capabilities");
    return json_is_true(json_object_get(caps, name));
}

int ec_client_fd(const ec_client *c)
{
    return c->fd;
}

int ec_client_idle_ms(const ec_client *c)
{
    if (c->fd < 0) return -1;
    int64_t d = ec_now_ms() - c->last_rx_ms;
    return d > INT32_MAX ? INT32_MAX : (int)d;
}

int ec_client_ping(ec_client *c, ec_error *err)
{
    return ec_conn_send_ws(c, WS_OP_PING, NULL, 0, err);
}

unsigned ec_client_reconnects(const ec_client *c)
{
    return c->reconnects;
}

int ec_client_wait_hint_ms(const ec_client *c)
{
    if (c->keepalive_ms <= 0 || c->fd < 0 || !c->ping_due) return -1;
    int64_t next = c->ping_sent ? c->ping_sent + 2 * (int64_t)c->keepalive_ms : c->ping_due;
    int64_t left = next - ec_now_ms();
    return left < 0 ? 0 : left > INT32_MAX ? INT32_MAX : (int)left;
}

int ec_client_process_ready(ec_client *c, ec_error *err)
{
    return ec_client_poll(c, 0, err);
}

int ec_client_poll(ec_client *c, int timeout_ms, ec_error *err)
{
    if (c->dead) {
        err_copy(err, &c->dead_err);
        return -(int)c->dead_err.kind;
    }
    return pump(c, timeout_ms, err);
}

void ec_client_set_message_hook(ec_client *c, ec_message_fn fn, void *ud)
{
    c->hook = fn;
    c->hook_ud = ud;
}

int ec_client_send_text(ec_client *c, const char *text, size_t len, ec_error *err)
{
    if (c->dead) {
        err_copy(err, &c->dead_err);
        return -(int)c->dead_err.kind;
    }
    if (c->fd < 0) return ec_fail(err, EC_ERR_TRANSPORT, 0, "connection lost");
    return c->ml->send(c, text, len, err);
}

/* ---- processes ------------------------------------------------------------------ */

int ec_process_start(ec_client *c, const ec_start_options *o, ec_process **out, ec_error *err)
{
    *out = NULL;
    if (!o || !o->argv || !o->argv[0])
        return ec_fail(err, EC_ERR_USAGE, 0, "argv must not be empty");
    char idbuf[32];
    const char *id = o->process_id;
    if (!id) {
        snprintf(idbuf, sizeof idbuf, "ec-%u", ++c->proc_counter);
        id = idbuf;
    }
    if (find_process(c, id))
        return ec_fail(err, EC_ERR_USAGE, 0, "process id %s is already in use", id);
    char *cwd = ec_path_to_uri(o->cwd ? o->cwd : "/");
    if (!cwd) return ec_fail(err, EC_ERR_USAGE, 0, "cwd must be an absolute path");
    json_t *argv = json_array();
    for (size_t i = 0; o->argv[i]; i++)
        json_array_append_new(argv, json_string(o->argv[i]));
    json_t *env = json_object();
    for (size_t i = 0; o->env && o->env[i]; i++) {
        const char *eq = strchr(o->env[i], '=');
        if (!eq || eq == o->env[i]) continue;
        char *k = xstrndup(o->env[i], (size_t)(eq - o->env[i]));
        json_object_set_new(env, k, json_string(eq + 1));
        free(k);
    }
    json_t *params = json_pack("{s:s, s:o, s:s, s:o, s:b, s:b}", "processId", id, "argv", argv,
                               "cwd", cwd, "env", env, "tty", o->tty, "pipeStdin", o->pipe_stdin);
    free(cwd);
    if (!params) return ec_fail(err, EC_ERR_USAGE, 0, "argv, env or cwd is not valid UTF-8");
    if (o->arg0) json_object_set_new(params, "arg0", json_string(o->arg0));
    if (o->tty && o->rows && o->cols && ec_client_has_capability(c, "processStartSize"))
        json_object_set_new(params, "size",
                            json_pack("{s:i, s:i}", "rows", (int)o->rows, "cols", (int)o->cols));
    if (o->env_inherit)
        json_object_set_new(params, "envPolicy",
                            json_pack("{s:s, s:b, s:[], s:{}, s:[]}", "inherit", o->env_inherit,
                                      "ignoreDefaultExcludes", 0, "exclude", "set", "includeOnly"));
    /* Register the handle first: notifications may precede the start reply. */
    ec_process *p = xcalloc(1, sizeof *p);
    p->c = c;
    p->id = xstrdup(id);
    ec_track_init(&p->t);
    p->last_progress_ms = ec_now_ms();
    p->next = c->procs;
    c->procs = p;
    json_t *res = NULL;
    int rc = ec_call_kind(c, EC_PENDING_CALL, "process/start", params, &res, err);
    json_decref(res);
    if (rc) {
        ec_process_free(p);
        return rc;
    }
    *out = p;
    return 0;
}

void ec_process_set_merge_output(ec_process *p, bool on)
{
    p->merge_output = on;
}

int ec_process_next_event(ec_process *p, int timeout_ms, ec_event *ev, ec_error *err)
{
    ec_client *c = p->c;
    ec_pevent_free_list(p->cur);
    p->cur = NULL;
    memset(ev, 0, sizeof *ev);
    int64_t deadline = ec_deadline(timeout_ms);
    bool polled = false;
    for (;;) {
        size_t len = 0;
        struct ec_pevent *e = p->merge_output ? ec_track_pop_run(&p->t, &len) : ec_track_pop(&p->t);
        if (e) {
            p->cur = e;
            p->last_progress_ms = ec_now_ms();
            ev->type = e->type;
            ev->stream = e->stream;
            ev->data = e->data;
            ev->len = p->merge_output ? len : e->len;
            ev->exit_code = e->exit_code;
            ev->sandbox_denied = e->sandbox_denied;
            ev->seq = e->seq;
            for (struct ec_pevent *n = e->next; n; n = n->next)
                ev->seq = n->seq; /* a merged run: its last chunk's */
            return 0;
        }
        if (p->t.closed_queued) return ec_fail(err, EC_ERR_USAGE, 0, "process %s is closed", p->id);
        if (p->broken) {
            err_copy(err, &p->broken_err);
            return -(int)p->broken_err.kind;
        }
        if (c->dead) {
            err_copy(err, &c->dead_err);
            return -(int)c->dead_err.kind;
        }
        int left = ec_remaining(deadline);
        if (left == 0 && polled)
            return ec_fail(err, EC_ERR_TIMEOUT, 0, "no event from process %s", p->id);
        /* Exited but no close for lag_ms: the only loss a seq gap cannot reveal is a
         * missing tail, so ask once what we missed. */
        int64_t lag_at = p->last_progress_ms + c->lag_ms;
        int64_t now = ec_now_ms();
        if (p->t.exit_queued && !p->read_pending && now >= lag_at) {
            p->t.need_read = true;
            p->last_progress_ms = now;
        }
        /* Remote mode: a quiet running process is asked for news now and then; the
         * answer (or the executor's reset of a stream it no longer has) proves the
         * path alive or starts the resume. */
        int64_t probe_at = p->last_progress_ms + c->liveness_ms;
        if (c->liveness_ms > 0 && now >= probe_at && c->fd >= 0) {
            if (p->read_pending) {
                /* A read (never a long poll) unanswered that long: the path is dead
                 * somewhere behind the rendezvous; resume on a new stream. */
                ec_conn_drop(c);
            } else if (!p->t.exit_queued) {
                p->t.need_read = true;
            }
            p->last_progress_ms = now;
            probe_at = now + c->liveness_ms;
        }
        kick_reads(c);
        int wait = left;
        int lag_left = (int)(lag_at - now);
        if (lag_left < 1) lag_left = c->lag_ms;
        if (wait < 0 || wait > lag_left) wait = lag_left;
        int probe_left = (int)(probe_at - now);
        if (c->liveness_ms > 0 && probe_left > 0 && wait > probe_left) wait = probe_left;
        int rc = pump(c, wait, err);
        polled = true;
        /* Events that arrived before a loss are still delivered first. */
        if (rc && !p->t.q_head) return rc;
    }
}

int ec_process_write(ec_process *p, const void *data, size_t len, ec_error *err)
{
    char *b64 = xmalloc(base64_encoded_len(len) + 1);
    b64[base64_encode(data, len, b64)] = 0;
    char wid[48];
    snprintf(wid, sizeof wid, "%s%llu", p->wid_prefix, (unsigned long long)++p->next_write_id);
    json_t *params = ec_process_params(p);
    json_object_set_new(params, "chunk", json_string(b64));
    json_object_set_new(params, "writeId", json_string(wid));
    free(b64);
    json_t *res = NULL;
    int rc = ec_call_kind(p->c, EC_PENDING_RETRY, "process/write", params, &res, err);
    if (rc) return rc;
    const char *st = json_string_value(json_object_get(res, "status"));
    if (st && strcmp(st, "accepted") != 0 && strcmp(st, "starting") != 0)
        rc = ec_fail(err, EC_ERR_SERVER, -32600, "process/write: %s", st);
    json_decref(res);
    return rc;
}

int ec_process_interrupt(ec_process *p, ec_error *err)
{
    json_t *params = ec_process_params(p);
    json_object_set_new(params, "signal", json_string("interrupt"));
    return ec_call_kind(p->c, EC_PENDING_CALL, "process/signal", params, NULL, err);
}

int ec_process_terminate(ec_process *p, bool *was_running, ec_error *err)
{
    json_t *res = NULL;
    json_t *params = ec_process_params(p);
    int rc = ec_call_kind(p->c, EC_PENDING_CALL, "process/terminate", params, &res, err);
    if (rc == 0 && was_running) *was_running = json_is_true(json_object_get(res, "running"));
    json_decref(res);
    return rc;
}

int ec_process_attach(ec_client *c, const char *session_id, const char *process_id,
                      ec_process **out, ec_error *err)
{
    *out = NULL;
    if (!process_id) return ec_fail(err, EC_ERR_USAGE, 0, "no process id");
    if (session_id && c->session_id && strcmp(session_id, c->session_id) == 0) session_id = NULL;
    if (session_id && !ec_client_has_capability(c, "processAttach"))
        return ec_fail(err, EC_ERR_USAGE, 0,
                       "the server does not support this (no processAttach capability)");
    if (find_process_in(c, session_id, process_id))
        return ec_fail(err, EC_ERR_USAGE, 0, "process %s already has a handle", process_id);
    /* Registered first: a viewer's events may follow the reply at once. */
    ec_process *p = xcalloc(1, sizeof *p);
    p->c = c;
    p->id = xstrdup(process_id);
    p->session_id = session_id ? xstrdup(session_id) : NULL;
    uint8_t r[6];
    crypto_random_bytes(r, sizeof r);
    snprintf(p->wid_prefix, sizeof p->wid_prefix, "a%02x%02x%02x%02x%02x%02x-", r[0], r[1], r[2],
             r[3], r[4], r[5]);
    ec_track_init(&p->t);
    p->last_progress_ms = ec_now_ms();
    p->next = c->procs;
    c->procs = p;
    /* Our own session's process (after a resume) is caught up with a plain read, which
     * every server answers; another session's is watched with process/attach, which
     * answers the same way and subscribes this connection to what follows. */
    json_t *params = ec_process_params(p);
    json_object_set_new(params, "afterSeq", json_integer(0));
    json_t *res = NULL;
    int rc = ec_call_kind(c, EC_PENDING_CALL, session_id ? "process/attach" : "process/read",
                          params, &res, err);
    if (rc == 0 && ec_track_on_read_result(&p->t, res) != 0)
        rc = ec_fail(err, EC_ERR_PROTOCOL, 0, "malformed process/read result");
    json_decref(res);
    if (rc) {
        ec_process_free(p);
        return rc;
    }
    *out = p;
    return 0;
}

const char *ec_process_id(const ec_process *p)
{
    return p->id;
}

bool ec_process_closed(const ec_process *p)
{
    return p->t.closed_queued && !p->t.q_head;
}

void ec_process_get_stats(const ec_process *p, ec_process_stats *out)
{
    out->reads_sent = p->t.reads_sent;
    out->duplicates_dropped = p->t.duplicates_dropped;
    out->gaps_detected = p->t.gaps_detected;
    out->resyncs = p->t.resyncs;
    out->lags = p->t.lags;
}

void ec_process_free(ec_process *p)
{
    if (!p) return;
    ec_client *c = p->c;
    for (ec_process **pp = &c->procs; *pp; pp = &(*pp)->next) {
        if (*pp == p) {
            *pp = p->next;
            break;
        }
    }
    if (p->read_pending) p->read_pending->reader = NULL; /* its reply is then dropped */
    ec_track_free(&p->t);
    ec_pevent_free_list(p->cur);
    free(p->session_id);
    free(p->id);
    free(p);
}
