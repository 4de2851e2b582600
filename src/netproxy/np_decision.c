/* np_decision: the proxy's decision on a connection: the baseline policy and the
 * limited-mode guard, asking the client (np->client, bounded in number and in
 * time), reporting what was decided (to the client, the metric, a log line; never a
 * body, a header or a credential) and refusing in the protocol's way (a SOCKS5 reply, a plain-text
 * 403 for CONNECT, a JSON 403 for a forwarded request). Shared by the TCP path (netproxy.c),
 * interception (np_mitm.c) and the UDP relay (np_udp.c); its bytes go out through np->relay. */
#include "netproxy/np_internal.h"

#include <stdio.h>
#include <string.h>
#include <time.h>

#include "core/log.h"
#include "core/metrics.h"
#include "core/own_ports.h"
#include "netproxy/np_policy.h"
#include "util/buf.h"

#define NP_MAX_ASKS 256 /* policy requests in flight per proxy */

void np_http_date(char *out, size_t n)
{
    time_t t = time(NULL);
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(out, n, "%a, %d %b %Y %H:%M:%S GMT", &tm);
}

static void put_field(struct buf *b, const char *k, const char *v, bool first)
{
    if (!first) buf_putc(b, ',');
    buf_put_json_str(b, k, strlen(k));
    buf_putc(b, ':');
    buf_put_json_str(b, v, strlen(v));
}

/* Reports one decision: to the client (none while nobody listens), the counter, an
 * info line (host, port, decision; never a body, a header or a credential). method
 * NULL: none (SOCKS). */
void np_report(struct netproxy *np, const char *scope, const char *decision, const char *source,
               const char *reason, const char *protocol, const char *host, uint16_t port,
               const char *method, const char *client, bool override)
{
    metrics_netproxy_decision(decision, np->params.limited ? "limited" : "full", source);
    char hv[NP_HOST_MAX * 2], idv[160];
    log_info("network policy: process=%s %s %s:%u -> %s (%s, %s)",
             log_value(np->process_id, idv, sizeof idv), protocol, log_value(host, hv, sizeof hv),
             port, decision, source, reason);
    if (!np->client.report) return;
    struct netproxy_decision d = {
        .scope = scope,
        .decision = decision,
        .source = source,
        .reason = reason,
        .protocol = protocol,
        .host = host,
        .method = method,
        .client = client,
        .port = port,
        .override = override,
    };
    np->client.report(np->client.owner, np->process_id, &d);
}

void np_report_client(struct np_client *c, const char *scope, const char *decision,
                      const char *source, const char *reason, bool override)
{
    np_report(c->np, scope, decision, source, reason, c->protocol, c->host, c->port,
              c->kind == NP_KIND_HTTP && c->method[0] ? c->method : NULL, c->peer, override);
}

/* Refuses the connection in its protocol's way after reporting the decision. */
void np_refuse(struct np_client *c, const char *scope, const char *decision, const char *source,
               const char *reason)
{
    np_report_client(c, scope, decision, source, reason, false);
    if (c->kind == NP_KIND_SOCKS) {
        uint8_t r[32];
        size_t n = np_socks_reply(r, NP_SOCKS_NOT_ALLOWED, NULL);
        c->np->relay->write_copy(c, false, r, n);
        c->np->relay->finish(c);
        return;
    }
    if (c->is_connect) {
        /* CONNECT refusals carry the message as plain text (verified) */
        np_reply_simple(c, 403, "Forbidden", "text/plain", np_reason_header(reason),
                        np_reason_message(reason));
        return;
    }
    struct buf body;
    buf_init(&body);
    buf_puts(&body, "{\"status\":\"blocked\"");
    put_field(&body, "host", c->host, false);
    put_field(&body, "reason", reason, false);
    put_field(&body, "decision", decision, false);
    put_field(&body, "source", source, false);
    put_field(&body, "protocol", c->protocol, false);
    buf_printf(&body, ",\"port\":%u", c->port);
    put_field(&body, "message", np_reason_message(reason), false);
    buf_putc(&body, '}');
    buf_putc(&body, '\0');
    np_reply_simple(c, 403, "Forbidden", "application/json", np_reason_header(reason), body.data);
    buf_free(&body);
}

void np_reply_simple(struct np_client *c, int status, const char *reason, const char *content_type,
                     const char *proxy_error, const char *body)
{
    char date[64];
    np_http_date(date, sizeof date);
    struct buf b;
    buf_init(&b);
    buf_printf(&b, "HTTP/1.1 %d %s\r\n", status, reason);
    if (content_type) buf_printf(&b, "content-type: %s\r\n", content_type);
    if (proxy_error) buf_printf(&b, "x-proxy-error: %s\r\n", proxy_error);
    buf_printf(&b, "content-length: %zu\r\nconnection: close\r\ndate: %s\r\n\r\n%s", strlen(body),
               date, body);
    c->np->relay->send(c, false, b.data, b.len);
    buf_free(&b);
    c->np->relay->finish(c);
}

struct netproxy_ask *np_ask(struct netproxy *np, const char *protocol, const char *host,
                            uint16_t port, netproxy_answer_fn fn, void *ctx)
{
    if (!np->client.ask) return NULL; /* released, or nobody to ask */
    return np->client.ask(np->client.owner, np->process_id, protocol, host, port, fn, ctx);
}

void np_ask_cancel(struct netproxy *np, struct netproxy_ask *q)
{
    if (q && np->client.cancel) np->client.cancel(q);
}

/* Whether a CONNECT tunnel is intercepted (np_internal.h): there is a CA, and limited
 * mode or credential masking needs to see inside. */
bool np_interception_wanted(const struct np_client *c)
{
    if (!c->np->mitm || !c->is_connect) return false;
    return c->np->params.limited || np_cred_wants(c);
}

/* Allowed by the policy or the client: the limited-mode guard, then the connection
 * (np_internal.h). */
void np_proceed_allowed(struct np_client *c)
{
    struct netproxy *np = c->np;
    c->stage = NP_STAGE_CONNECT;
    np_report_client(c, "domain", "allow", c->decider_allowed ? "decider" : "baseline_policy",
                     c->decider_allowed ? np_reason_name(c->baseline) : "allow",
                     c->decider_allowed);
    if (np->params.limited && c->kind == NP_KIND_HTTP) {
        if (c->is_connect && !np_interception_wanted(c)) {
            np_refuse(c, "non_domain", "deny", "mode_guard", "mitm_required");
            return;
        }
        if (!c->is_connect && !np_method_allowed_limited(c->method)) {
            np_refuse(c, "non_domain", "deny", "mode_guard", "method_not_allowed");
            return;
        }
    }
    np->relay->resolve(c);
}

static void allowed(struct np_client *c, bool by_decider)
{
    c->decider_allowed = by_decider;
    if (c->check_resolved) {
        c->stage = NP_STAGE_CHECK;
        c->np->relay->resolve(c);
        return;
    }
    np_proceed_allowed(c);
}

static void ask_done(struct np_client *c)
{
    np_ask_cancel(c->np, c->call);
    c->call = NULL;
    c->np->n_asks--;
    uv_timer_stop(&c->timer);
}

static void decider_denied(struct np_client *c, const char *decision, const char *reason)
{
    np_refuse(c, "domain", decision, "decider", reason ? reason : "not_allowed");
}

/* The client's answer (netproxy_client.ask); no answer denies at once (verified). */
static void on_answer(void *ctx, enum netproxy_answer answer, const char *reason)
{
    struct np_client *c = ctx;
    c->call = NULL; /* the question is over either way */
    ask_done(c);
    if (answer == NETPROXY_ALLOW) {
        allowed(c, true);
    } else if (answer == NETPROXY_DENY || answer == NETPROXY_ASK) {
        char r[256];
        snprintf(r, sizeof r, "%s", reason);
        decider_denied(c, answer == NETPROXY_ASK ? "ask" : "deny", r);
    } else {
        decider_denied(c, "deny", NULL);
    }
}

static void on_ask_timeout(uv_timer_t *t)
{
    struct np_client *c = t->data;
    ask_done(c);
    decider_denied(c, "deny", NULL);
}

static void ask(struct np_client *c)
{
    struct netproxy *np = c->np;
    if (np->n_asks >= NP_MAX_ASKS) {
        decider_denied(c, "deny", NULL);
        return;
    }
    c->call = np_ask(np, c->protocol, c->host, c->port, on_answer, c);
    if (!c->call) {
        decider_denied(c, "deny", NULL);
        return;
    }
    np->n_asks++;
    c->stage = NP_STAGE_ASK;
    uv_timer_start(&c->timer, on_ask_timeout, np->params.timeout_ms, 0);
}

/* Decides the connection to c->host:c->port (the request parsed; np_internal.h). */
void np_decide(struct np_client *c)
{
    struct netproxy *np = c->np;
    c->stage = NP_STAGE_DECIDE;
    /* A listener of this server (its WebSocket, another sandbox's proxy) is never a
     * sandboxed command's to reach, on any address, whatever the policy or a client's
     * decision: through it the command could start an unsandboxed process. */
    if (own_ports_has(c->port)) {
        np_refuse(c, "domain", "deny", "server_port", "server_port");
        return;
    }
    if (c->kind == NP_KIND_SOCKS && np->params.limited) {
        /* SOCKS cannot show a method: limited mode refuses it outright (verified) */
        np_refuse(c, "non_domain", "deny", "mode_guard", "method_not_allowed");
        return;
    }
    bool check = false;
    c->baseline = np_policy_baseline(&np->policy, c->host, &check);
    c->check_resolved = check;
    switch (c->baseline) {
    case NP_REASON_ALLOW: allowed(c, false); return;
    case NP_REASON_NOT_ALLOWED:
        if (np->params.has_timeout)
            ask(c);
        else
            np_refuse(c, "domain", "deny", "baseline_policy", "not_allowed");
        return;
    default: np_refuse(c, "domain", "deny", "baseline_policy", np_reason_name(c->baseline)); return;
    }
}
