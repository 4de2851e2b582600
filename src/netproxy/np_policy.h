/* np_policy: the managed-network policy, pure (no I/O): domain patterns, host
 * normalisation, address classification, and the decisions the proxy takes before
 * and after it resolves a name (PROTOCOL.md section 5.10).
 *
 * Patterns are those of codex's network proxy (codex-rs/network-proxy, its domain
 * matcher), checked against the reference by experiment:
 *   "example.com"     the host itself (case-insensitive, a trailing dot ignored);
 *   "*.example.com"   any subdomain, NOT the apex;
 *   "**.example.com"  the apex and any subdomain;
 *   "region*.x.com"   `*` matches any run of characters (dots included), `?` one;
 *   "*"               every host, accepted in allow entries only;
 *   "[::1]"           an IPv6 literal.
 * Deny wins over allow. A map value "none" is neither.
 *
 * The decision order (verified on 0.169.0): an explicit deny blocks ("denied"); then,
 * unless allowLocalBinding, a loopback or private IP literal (or `localhost`) that is
 * not itself listed in an allow entry blocks ("not_allowed_local"); then a host no
 * allow entry matches is "not_allowed" (the decider may still allow it); then, unless
 * allowLocalBinding, a name that resolves to any non-public address blocks
 * ("not_allowed_local"), after the decider if there was one. */
#ifndef EXEC_NETPROXY_NP_POLICY_H
#define EXEC_NETPROXY_NP_POLICY_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/socket.h>

/* The longest host we handle (DNS names are at most 253 bytes). */
#define NP_HOST_MAX 256

/* REVIEW: proxy.reviewDomains, hosts that always go to the client's decider as if
 * no allow entry listed them (verified: an allowlisted host under review is asked,
 * and denied as not_allowed without policyDecisionTimeoutMs; deny still wins). */
enum np_perm { NP_PERM_NONE, NP_PERM_ALLOW, NP_PERM_DENY, NP_PERM_REVIEW };

struct np_policy {
    char **allow; /* compiled allow candidates ("?*.x" for "*.x") */
    size_t n_allow;
    char **deny;
    size_t n_deny;
    char **review;
    size_t n_review;
    char **allow_exact; /* allow entries without wildcards, normalised: the explicit
                           allowlisting a local literal needs */
    size_t n_allow_exact;
    bool allow_local_binding;
};

/* Adds one `domains` entry. Returns 0, or -EINVAL with err set to the reference's
 * text after "invalid network proxy config: " (e.g. "domain pattern is empty"). */
int np_policy_add(struct np_policy *p, const char *pattern, enum np_perm perm, char *err, size_t n);
void np_policy_free(struct np_policy *p);

/* Lower-cases, trims white space, strips brackets, a `:port` (when there is exactly
 * one colon) and trailing dots. out gets at most n-1 bytes. */
void np_host_normalize(const char *in, char *out, size_t n);
/* Matches a compiled candidate (`*` any run, `?` one character) against a
 * normalised host, ASCII case-insensitively. */
bool np_pattern_match(const char *pattern, const char *host);

/* The host is `localhost` or a loopback literal. */
bool np_host_is_loopback(const char *host);
/* The host is an IP literal (an IPv6 scope `%x` allowed); *non_public tells whether
 * it is loopback, private, link-local or otherwise not globally routable. */
bool np_host_is_ip_literal(const char *host, bool *non_public);
/* The address is not globally routable (codex's is_non_public_ip: loopback, RFC 1918,
 * link-local, CGNAT, the TEST-NETs, benchmarking, reserved, multicast, unspecified,
 * IPv6 ULA/link-local, v4-mapped forms of these). */
bool np_addr_non_public(const struct sockaddr *sa);

enum np_reason {
    NP_REASON_ALLOW,
    NP_REASON_DENIED,
    NP_REASON_NOT_ALLOWED,
    NP_REASON_NOT_ALLOWED_LOCAL,
    NP_REASON_METHOD_NOT_ALLOWED,
    NP_REASON_MITM_REQUIRED,
    NP_REASON_UNIX_SOCKET_UNSUPPORTED,
};
/* "allow", "denied", "not_allowed", "not_allowed_local", "method_not_allowed",
 * "mitm_required", "unix_socket_unsupported". */
const char *np_reason_name(enum np_reason r);
/* The 403 body's `message` and the x-proxy-error header for a refusal reason (a
 * reason the client's decider gave, NULL here, gets the generic pair). */
const char *np_reason_message(const char *reason);
const char *np_reason_header(const char *reason);

/* The decision before any name resolution, for a normalised host. Returns
 * ALLOW, DENIED, NOT_ALLOWED or NOT_ALLOWED_LOCAL. *check_resolved is set when an
 * allowed (or decider-allowed) name must still have its addresses checked. */
enum np_reason np_policy_baseline(const struct np_policy *p, const char *host,
                                  bool *check_resolved);

/* limited mode lets GET, HEAD and OPTIONS through. */
bool np_method_allowed_limited(const char *method);

#endif
