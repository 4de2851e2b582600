/* netproxy: the managed-network policy proxy (PROTOCOL.md section 5.10).
 *
 * A process/start with `networkProxy` gets its own proxy inside the server, on the
 * event loop: an HTTP forward proxy (with CONNECT) and, with enableSocks5, a SOCKS5
 * proxy (TCP, and UDP with enableSocks5Udp), each on 127.0.0.1 with a kernel-chosen
 * port. Every connection is decided by the domain policy (np_policy.h); a host no
 * entry decides is put to the client as a `network/policyRequest` when
 * policyDecisionTimeoutMs is set, and every decision is reported with a
 * `network/policyDecision` notification, counted in the metrics and logged (host,
 * port, decision, never a body or a credential). DNS is resolved by the proxy
 * (uv_getaddrinfo on libuv's thread pool), and the addresses it checked are the ones
 * it connects to.
 *
 * The proxy speaks no JSON-RPC itself: the question to the client and the decision
 * reports go through a struct netproxy_client the caller hands in, and the
 * rpc-facing side (netproxy_rpc.h) makes one for a session and decodes the params.
 *
 * The lifecycle, for the process/start handler (and the sandbox, which hands in the
 * connections of a child in its own network namespace):
 *
 *     struct netproxy_params np;             decoded with the start's params
 *     netproxy_params_decode(&d, &np);       errors: the reference's -32602 texts
 *     netproxy_validate(&np, err, n)         the post-decode checks (-32602 too)
 *     cl = netproxy_session_client(session)  (netproxy_rpc.h)
 *     netproxy_start(loop, &np, &cl, processId, &proxy, err, n)
 *     envp = netproxy_child_env(proxy, envp) the proxy variables, masked secrets
 *     netproxy_ports(proxy, &http, &socks)   the ports the variables name
 *     netproxy_attach_fd_source(proxy, fd)   (sandboxed child: connections by fd)
 *     netproxy_release(proxy)                when the process closes
 *
 * Test-only: EXEC_SERVER_TEST_RESOLVE="name=IP[,name=IP...]" in the server's
 * environment makes the proxy resolve those names to those addresses without asking
 * DNS (a second name for 127.0.0.1 stands in for the internet in the tests). It is
 * read once, never set by anything but the test suites, and changes no policy: the
 * address is classified like any resolved one. */
#ifndef EXEC_NETPROXY_NETPROXY_H
#define EXEC_NETPROXY_NETPROXY_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <uv.h>

#include "core/limits.h"
#include "netproxy/np_policy.h"

struct netproxy;

/* What process/start said about the managed network. */
struct netproxy_params {
    bool enforce_managed_network; /* enforceManagedNetwork (the sandbox's business) */
    bool present;                 /* networkProxy was given (and not null) */
    bool enabled;
    bool enable_socks5, enable_socks5_udp;
    bool transparent_tcp; /* proxy.transparentTcp (0.171.0) */
    bool allow_upstream_proxy;
    bool allow_all_unix_sockets;
    bool limited; /* mode "limited" (else "full") */
    bool allow_local_binding;
    bool credential_masking;
    bool has_timeout;
    uint64_t timeout_ms; /* policyDecisionTimeoutMs */
    json_t *domains;     /* owned copy of proxy.domains (object) or NULL */
    json_t *providers;   /* owned copy of proxy.credentialProviders or NULL */
    json_t *review;      /* owned copy of proxy.reviewDomains (array) or NULL */
};

/* The checks after decoding, with the reference's texts (for a -32602), in its order:
 * a zero timeout, transparentTcp without a sandbox (sandboxed: the start carries a
 * sandbox object), a disabled proxy, transparentTcp without SOCKS5, a bad domain
 * pattern. Returns 0 or -EINVAL. */
int netproxy_validate(const struct netproxy_params *p, bool sandboxed, char *err, size_t n);
void netproxy_params_free(struct netproxy_params *p);

/* Server-wide settings (main): --proxy-private-ips-via-upstream and
 * --tcp-upstream-proxy (NULL: none; copied). */
void netproxy_configure(bool private_ips_via_upstream, const struct limits_endpoint *tcp_upstream);

/* The client's answer to a policy request: allow, deny or ask (both with the
 * client's reason), or none (an error, a malformed answer, the connection gone):
 * the proxy denies then. */
enum netproxy_answer { NETPROXY_ALLOW, NETPROXY_DENY, NETPROXY_ASK, NETPROXY_NO_ANSWER };
typedef void (*netproxy_answer_fn)(void *ctx, enum netproxy_answer answer, const char *reason);

/* One decision, as reported (network/policyDecision's fields; method NULL: none). */
struct netproxy_decision {
    const char *scope, *decision, *source, *reason, *protocol, *host, *method, *client;
    uint16_t port;
    bool override;
};

/* Who the proxy asks and tells: the client of the process, reached by the layer that
 * speaks to it (netproxy_rpc.h). owner is passed back to both functions. */
struct netproxy_ask;
struct netproxy_client {
    void *owner;
    /* Puts the policy question for protocol host:port to the client. Returns a
     * pending question (fn runs once, on the loop, with its answer, unless cancelled
     * first), or NULL when nobody can be asked (fn never runs). */
    struct netproxy_ask *(*ask)(void *owner, const char *process_id, const char *protocol,
                                const char *host, uint16_t port, netproxy_answer_fn fn, void *ctx);
    /* Forgets a pending question: its fn will not run. */
    void (*cancel)(struct netproxy_ask *q);
    /* Tells the client one decision (nothing when nobody listens). */
    void (*report)(void *owner, const char *process_id, const struct netproxy_decision *d);
};

/* Starts the proxy of one process: binds its listeners and, with credential
 * masking, loads (or makes, once per install) the MITM CA. Policy requests and
 * decisions go through client (copied; NULL: nobody is asked, which denies, and
 * nobody told), naming process_id. Takes the params' owned members. Returns 0, or
 * a negative errno with err set. */
int netproxy_start(uv_loop_t *loop, struct netproxy_params *p, const struct netproxy_client *client,
                   const char *process_id, struct netproxy **out, char *err, size_t n);

/* The child's environment with the proxy's variables set (they replace any the
 * client sent) and, with credential masking, secrets replaced by dummies and the CA
 * bundle variables added. Takes envp (NULL-terminated, malloc'd strings, as
 * env_build makes it) and returns the new one. */
char **netproxy_child_env(struct netproxy *np, char **envp);

/* The ports the child's variables name (socks 0 when SOCKS5 is off). A sandboxed
 * child's init listens on the same ports inside its network namespace. */
void netproxy_ports(const struct netproxy *np, uint16_t *http_port, uint16_t *socks_port);

/* Serves connections handed in over a socketpair: every message carries one
 * accepted TCP socket (SCM_RIGHTS) and a one-byte tag, 'H' for the HTTP proxy and
 * 'S' for SOCKS5; each is served exactly like a connection to the proxy's own
 * listeners. Takes sockpair_fd (closed when the peer closes it or at release).
 * The process identity is the proxy's own (netproxy_start). Returns 0 or -errno. */
int netproxy_attach_fd_source(struct netproxy *np, int sockpair_fd);

/* Stops the proxy: listeners, fd sources and every proxied connection close, a
 * pending policy request is dropped; memory goes once libuv has let go. NULL ok. */
void netproxy_release(struct netproxy *np);

#endif
