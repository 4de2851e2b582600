/* np_decision: the proxy's decision on a TCP connection once its request is read
 * (np_request.c): the server's own ports, the baseline policy, then, for a host no
 * entry decides, the client's answer (np_ask.c: bounded in number and in time). An
 * allowed connection goes on to the relay (np_relay.c: the local-address check, the
 * limited-mode guard, the upstream); a refused one is answered in its protocol's way
 * (np_reply.c). */
#include "netproxy/np_internal.h"

#include <stdio.h>
#include <string.h>

#include "core/own_ports.h"
#include "netproxy/np_policy.h"

#define NP_MAX_ASKS 256 /* policy requests in flight per proxy */

static void allowed(struct np_client *c, bool by_decider)
{
    c->decider_allowed = by_decider;
    if (c->check_resolved) {
        c->stage = NP_STAGE_CHECK;
        np_resolve(c);
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
