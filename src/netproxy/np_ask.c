/* np_ask: the proxy's word with its client (struct netproxy_client, handed in at
 * start): the policy question, forgetting it, and the report of each decision, which
 * is also counted in the metrics and logged (host, port, decision; never a body, a
 * header or a credential). After release nobody is asked or told. Below everything
 * that decides: the TCP decision (np_decision.c), the SOCKS5 UDP relay (np_udp.c) and
 * a closing connection (np_conn.c) use it. */
#include "netproxy/np_internal.h"

#include "core/log.h"
#include "core/metrics.h"

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
