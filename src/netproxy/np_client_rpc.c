/* np_client_rpc: the managed-network proxy's client for a session (netproxy_rpc.h):
 * the approval question as a network/policyRequest to the connection the session is
 * attached to, its answer ({"decision":{"type":"allow"}} or {"type":"deny"|"ask",
 * "reason":".."}; anything else is no answer, and the proxy denies, verified) read
 * back into a netproxy_answer, and each decision sent as a network/policyDecision
 * notification (none while the session is detached). */
#include "netproxy/netproxy_rpc.h"
#include "netproxy/np_audit.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>

#include "rpc/dispatch.h"
#include "session/session.h"
#include "transport/conn.h"
#include "util/buf.h"
#include "util/mem.h"

/* A question in flight: the rpc call and whom to tell its answer. */
struct netproxy_ask {
    struct rpc_call *call;
    netproxy_answer_fn fn;
    void *ctx;
};

static struct conn *session_conn(void *owner)
{
    struct session *s = owner;
    return s ? s->conn : NULL;
}

static void on_answer(void *arg, enum rpc_call_outcome outcome, json_t *value)
{
    struct netproxy_ask *q = arg;
    netproxy_answer_fn fn = q->fn;
    void *ctx = q->ctx;
    free(q); /* the call is over either way */
    const char *type = NULL, *reason = NULL;
    if (outcome == RPC_CALL_RESULT) {
        json_t *d = json_object_get(value, "decision");
        type = json_string_value(json_object_get(d, "type"));
        reason = json_string_value(json_object_get(d, "reason"));
    }
    if (type && strcmp(type, "allow") == 0)
        fn(ctx, NETPROXY_ALLOW, NULL);
    else if (type && reason && strcmp(type, "deny") == 0)
        fn(ctx, NETPROXY_DENY, reason);
    else if (type && reason && strcmp(type, "ask") == 0)
        fn(ctx, NETPROXY_ASK, reason);
    else
        fn(ctx, NETPROXY_NO_ANSWER, NULL);
}

static struct netproxy_ask *ask(void *owner, const char *process_id, const char *protocol,
                                const char *host, uint16_t port, netproxy_answer_fn fn, void *ctx)
{
    struct conn *conn = session_conn(owner);
    if (!conn) return NULL; /* detached: nobody to ask */
    json_t *params = json_pack("{s:s,s:{s:s,s:s,s:i}}", "processId", process_id, "request",
                               "protocol", protocol, "host", host, "port", (int)port);
    struct netproxy_ask *q = xcalloc(1, sizeof *q);
    q->fn = fn;
    q->ctx = ctx;
    q->call = rpc_call_start(conn, "network/policyRequest", params, on_answer, q);
    if (!q->call) {
        free(q);
        return NULL;
    }
    return q;
}

static void cancel(struct netproxy_ask *q)
{
    if (!q) return;
    rpc_call_cancel(q->call);
    free(q);
}

/* "2026-11-25T14:08:20.420Z", the reference's timestamp. */
static void timestamp(char *out, size_t n)
{
    struct timeval tv;
    gettimeofday(&tv, NULL);
    struct tm tm;
    gmtime_r(&tv.tv_sec, &tm);
    char base[32];
    strftime(base, sizeof base, "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(out, n, "%.20s.%03dZ", base, (int)(tv.tv_usec / 1000) % 1000);
}

static void put_field(struct buf *b, const char *k, const char *v, bool first)
{
    if (!first) buf_putc(b, ',');
    buf_put_json_str(b, k, strlen(k));
    buf_putc(b, ':');
    buf_put_json_str(b, v, strlen(v));
}

static void report(void *owner, const char *process_id, const struct netproxy_decision *d)
{
    np_audit_decision(((struct session *)owner)->id, process_id, d);
    struct conn *conn = session_conn(owner);
    if (!conn) return;
    char ts[40];
    timestamp(ts, sizeof ts);
    struct buf b;
    buf_init_msg(&b);
    buf_puts(&b, "{\"method\":\"network/policyDecision\",\"params\":{");
    put_field(&b, "processId", process_id, true);
    put_field(&b, "timestamp", ts, false);
    put_field(&b, "scope", d->scope, false);
    put_field(&b, "decision", d->decision, false);
    put_field(&b, "source", d->source, false);
    put_field(&b, "reason", d->reason, false);
    put_field(&b, "protocol", d->protocol, false);
    put_field(&b, "host", d->host, false);
    buf_printf(&b, ",\"port\":%u", d->port);
    if (d->method) put_field(&b, "method", d->method, false);
    put_field(&b, "client", d->client, false);
    buf_printf(&b, ",\"policyOverride\":%s}}", d->override ? "true" : "false");
    conn_send(conn, &b);
}

struct netproxy_client netproxy_session_client(struct session *s)
{
    return (struct netproxy_client){.owner = s, .ask = ask, .cancel = cancel, .report = report};
}
