/* np_policy: domain patterns, host classification and the baseline decision (see
 * np_policy.h). Pure: no I/O, no allocation beyond the compiled pattern lists. */
#include "netproxy/np_policy.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "util/mem.h"

static void trim(const char **s, size_t *len)
{
    while (*len && isspace((unsigned char)**s))
        (*s)++, (*len)--;
    while (*len && isspace((unsigned char)(*s)[*len - 1]))
        (*len)--;
}

static bool parse_ip(const char *s, struct in6_addr *a6, struct in_addr *a4, bool *v6)
{
    if (inet_pton(AF_INET, s, a4) == 1) {
        *v6 = false;
        return true;
    }
    if (inet_pton(AF_INET6, s, a6) == 1) {
        *v6 = true;
        return true;
    }
    return false;
}

/* codex's normalize_dns_host_or_ip_literal: lower-case, trailing dots off, an IP
 * literal's `%25` scope separator written `%`. */
static void normalize_literal(const char *s, size_t len, char *out, size_t n)
{
    size_t k = 0;
    for (size_t i = 0; i < len && k + 1 < n; i++)
        out[k++] = (char)tolower((unsigned char)s[i]);
    out[k] = '\0';
    while (k && out[k - 1] == '.')
        out[--k] = '\0';
    char *pct = strstr(out, "%25");
    if (pct) {
        char ip[NP_HOST_MAX];
        size_t il = (size_t)(pct - out);
        if (il < sizeof ip) {
            memcpy(ip, out, il);
            ip[il] = '\0';
            struct in6_addr a6;
            struct in_addr a4;
            bool v6;
            if (parse_ip(ip, &a6, &a4, &v6)) memmove(pct + 1, pct + 3, strlen(pct + 3) + 1);
        }
    }
}

void np_host_normalize(const char *in, char *out, size_t n)
{
    const char *s = in;
    size_t len = strlen(in);
    trim(&s, &len);
    if (len && s[0] == '[') {
        const char *end = memchr(s, ']', len);
        if (end) {
            normalize_literal(s + 1, (size_t)(end - s - 1), out, n);
            return;
        }
    }
    size_t colons = 0, first = 0;
    for (size_t i = 0; i < len; i++)
        if (s[i] == ':' && colons++ == 0) first = i;
    if (colons == 1) len = first;
    normalize_literal(s, len, out, n);
}

/* Compares one character of a pattern with one of a host: ASCII letters without
 * case, everything else byte for byte. `?` is handled by the caller. */
static bool same_char(char p, char h)
{
    return tolower((unsigned char)p) == tolower((unsigned char)h);
}

/* Length of the UTF-8 sequence starting at s (1 for ASCII or a stray byte), so `?`
 * consumes one character as the reference's matcher (over Unicode scalars) does. */
static size_t utf8_len(const char *s)
{
    unsigned char c = (unsigned char)*s;
    size_t n = c < 0x80 ? 1 : c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 1;
    for (size_t i = 1; i < n; i++)
        if (((unsigned char)s[i] & 0xC0) != 0x80) return 1;
    return n;
}

/* Glob match with `*` and `?`. Only the latest star needs retrying (it can absorb
 * whatever an earlier one could), so the work is bounded by pattern x host. */
bool np_pattern_match(const char *pattern, const char *host)
{
    const char *p = pattern, *h = host;
    const char *star_p = NULL, *star_h = NULL;
    while (*h) {
        if (*p == '*') {
            star_p = ++p;
            star_h = h;
        } else if (*p == '?') {
            p++;
            h += utf8_len(h);
        } else if (*p && same_char(*p, *h)) {
            p++;
            h++;
        } else if (star_p) {
            star_h += utf8_len(star_h);
            p = star_p;
            h = star_h;
        } else {
            return false;
        }
    }
    while (*p == '*')
        p++;
    return *p == '\0';
}

static void push(char ***v, size_t *n, const char *s)
{
    for (size_t i = 0; i < *n; i++)
        if (strcmp((*v)[i], s) == 0) return;
    *v = xrealloc(*v, (*n + 1) * sizeof **v);
    (*v)[(*n)++] = xstrdup(s);
}

static bool has_any(const char *s, size_t len, const char *set)
{
    for (size_t i = 0; i < len; i++)
        if (strchr(set, s[i])) return true;
    return false;
}

/* The bracket rule: `[...]` only around an IPv6 literal or `*`, followed by nothing,
 * dots, or a `:port`. */
static bool brackets_ok(const char *host, size_t len)
{
    if (!len || host[0] != '[') return false;
    const char *end = memchr(host, ']', len);
    if (!end) return false;
    size_t il = (size_t)(end - host - 1);
    if (has_any(host + 1, il, "[]")) return false;
    char ip[NP_HOST_MAX];
    normalize_literal(host + 1, il, ip, sizeof ip);
    char *pct = strchr(ip, '%');
    if (pct) *pct = '\0';
    struct in6_addr a6;
    if (strcmp(ip, "*") != 0 && inet_pton(AF_INET6, ip, &a6) != 1) return false;
    const char *suffix = end + 1;
    size_t sl = len - (size_t)(suffix - host);
    if (has_any(suffix, sl, "[]")) return false;
    if (sl && suffix[0] == ':') return true;
    for (size_t i = 0; i < sl; i++)
        if (suffix[i] != '.') return false;
    return true;
}

int np_policy_add(struct np_policy *p, const char *pattern, enum np_perm perm, char *err, size_t n)
{
    const char *raw = pattern;
    size_t len = strlen(pattern);
    trim(&raw, &len);
    char host[NP_HOST_MAX];
    const char *prefix = "";
    const char *rest = raw;
    size_t rl = len;
    if (len >= 3 && strncmp(raw, "**.", 3) == 0)
        prefix = "**.", rest += 3, rl -= 3;
    else if (len >= 2 && strncmp(raw, "*.", 2) == 0)
        prefix = "*.", rest += 2, rl -= 2;

    if (perm == NP_PERM_DENY && len == 1 && raw[0] == '*') {
        snprintf(err, n,
                 "invalid value for network.denied_domains: * (allowed exact hosts or scoped "
                 "wildcards like *.example.com or **.example.com)");
        return -EINVAL;
    }
    bool ws = false;
    for (size_t i = 0; i < len; i++)
        if (isspace((unsigned char)raw[i])) ws = true;
    if (ws || has_any(raw, len, "{}\\/")) {
        snprintf(err, n, "unsupported domain pattern syntax: %s", pattern);
        return -EINVAL;
    }
    for (size_t i = 0; i + 1 < rl; i++)
        if (rest[i] == '*' && rest[i + 1] == '*') {
            snprintf(err, n, "unsupported repeated wildcard: %s", pattern);
            return -EINVAL;
        }
    if (has_any(rest, rl, "[]") && !brackets_ok(rest, rl)) {
        snprintf(err, n, "brackets are only supported for IPv6 literals or [*]: %s", pattern);
        return -EINVAL;
    }
    if (rl >= NP_HOST_MAX) {
        snprintf(err, n, "unsupported domain pattern syntax: %s", pattern);
        return -EINVAL;
    }
    char restz[NP_HOST_MAX];
    memcpy(restz, rest, rl);
    restz[rl] = '\0';
    np_host_normalize(restz, host, sizeof host);
    if (!*host) {
        snprintf(err, n, "domain pattern is empty");
        return -EINVAL;
    }
    if (perm == NP_PERM_NONE) return 0;
    char ***v = perm == NP_PERM_ALLOW ? &p->allow : perm == NP_PERM_DENY ? &p->deny : &p->review;
    size_t *nv = perm == NP_PERM_ALLOW  ? &p->n_allow
                 : perm == NP_PERM_DENY ? &p->n_deny
                                        : &p->n_review;
    char cand[NP_HOST_MAX + 4];
    if (*prefix) {
        if (prefix[1] == '*') push(v, nv, host); /* "**." also matches the apex */
        snprintf(cand, sizeof cand, "?*.%s", host);
        push(v, nv, cand);
    } else {
        push(v, nv, host);
        if (perm == NP_PERM_ALLOW && !strpbrk(host, "*?"))
            push(&p->allow_exact, &p->n_allow_exact, host);
    }
    return 0;
}

static void free_list(char **v, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(v[i]);
    free(v);
}

void np_policy_free(struct np_policy *p)
{
    free_list(p->allow, p->n_allow);
    free_list(p->deny, p->n_deny);
    free_list(p->review, p->n_review);
    free_list(p->allow_exact, p->n_allow_exact);
    memset(p, 0, sizeof *p);
}

static bool any_match(char *const *v, size_t n, const char *host)
{
    for (size_t i = 0; i < n; i++)
        if (np_pattern_match(v[i], host)) return true;
    return false;
}

static bool v4_in(uint32_t ip, uint32_t base, int prefix)
{
    uint32_t mask = prefix == 0 ? 0 : UINT32_MAX << (32 - prefix);
    return (ip & mask) == (base & mask);
}

static bool v4_non_public(const struct in_addr *a)
{
    uint32_t ip = ntohl(a->s_addr);
    return v4_in(ip, 0x7F000000u, 8)     /* loopback */
           || v4_in(ip, 0x0A000000u, 8)  /* RFC 1918 */
           || v4_in(ip, 0xAC100000u, 12) /* RFC 1918 */
           || v4_in(ip, 0xC0A80000u, 16) /* RFC 1918 */
           || v4_in(ip, 0xA9FE0000u, 16) /* link-local */
           || v4_in(ip, 0x00000000u, 8)  /* "this network", unspecified */
           || v4_in(ip, 0xE0000000u, 4)  /* multicast */
           || ip == 0xFFFFFFFFu          /* broadcast */
           || v4_in(ip, 0x64400000u, 10) /* CGNAT */
           || v4_in(ip, 0xC0000000u, 24) /* IETF protocol assignments */
           || v4_in(ip, 0xC0000200u, 24) /* TEST-NET-1 */
           || v4_in(ip, 0xC6120000u, 15) /* benchmarking */
           || v4_in(ip, 0xC6336400u, 24) /* TEST-NET-2 */
           || v4_in(ip, 0xCB007100u, 24) /* TEST-NET-3 */
           || v4_in(ip, 0xF0000000u, 4); /* reserved */
}

static bool v6_non_public(const struct in6_addr *a)
{
    const uint8_t *b = a->s6_addr;
    static const uint8_t mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xFF, 0xFF};
    static const uint8_t zero[16] = {0};
    if (memcmp(b, mapped, 12) == 0) {
        struct in_addr v4;
        memcpy(&v4.s_addr, b + 12, 4);
        return v4_non_public(&v4);
    }
    if (memcmp(b, zero, 15) == 0 && (b[15] == 0 || b[15] == 1)) return true; /* :: and ::1 */
    return b[0] == 0xFF                                                      /* multicast */
           || (b[0] & 0xFE) == 0xFC                                          /* unique local */
           || (b[0] == 0xFE && (b[1] & 0xC0) == 0x80);                       /* link-local */
}

bool np_addr_non_public(const struct sockaddr *sa)
{
    if (sa->sa_family == AF_INET) return v4_non_public(&((const struct sockaddr_in *)sa)->sin_addr);
    if (sa->sa_family == AF_INET6)
        return v6_non_public(&((const struct sockaddr_in6 *)sa)->sin6_addr);
    return true;
}

/* Parses an IP literal host, its IPv6 scope (`%x`) ignored. */
static bool parse_literal(const char *host, struct in6_addr *a6, struct in_addr *a4, bool *v6)
{
    char ip[NP_HOST_MAX];
    snprintf(ip, sizeof ip, "%s", host);
    char *pct = strchr(ip, '%');
    if (pct) *pct = '\0';
    return parse_ip(ip, a6, a4, v6);
}

bool np_host_is_ip_literal(const char *host, bool *non_public)
{
    struct in6_addr a6;
    struct in_addr a4;
    bool v6;
    if (!parse_literal(host, &a6, &a4, &v6)) return false;
    if (non_public) *non_public = v6 ? v6_non_public(&a6) : v4_non_public(&a4);
    return true;
}

bool np_host_is_loopback(const char *host)
{
    if (strcmp(host, "localhost") == 0) return true;
    struct in6_addr a6;
    struct in_addr a4;
    bool v6;
    if (!parse_literal(host, &a6, &a4, &v6)) return false;
    if (!v6) return (ntohl(a4.s_addr) >> 24) == 127;
    return IN6_IS_ADDR_LOOPBACK(&a6);
}

const char *np_reason_name(enum np_reason r)
{
    switch (r) {
    case NP_REASON_ALLOW: return "allow";
    case NP_REASON_DENIED: return "denied";
    case NP_REASON_NOT_ALLOWED: return "not_allowed";
    case NP_REASON_NOT_ALLOWED_LOCAL: return "not_allowed_local";
    case NP_REASON_METHOD_NOT_ALLOWED: return "method_not_allowed";
    case NP_REASON_MITM_REQUIRED: return "mitm_required";
    case NP_REASON_UNIX_SOCKET_UNSUPPORTED: return "unix_socket_unsupported";
    }
    return "not_allowed";
}

const char *np_reason_message(const char *reason)
{
    if (!reason) return "Request blocked by network policy.";
    if (strcmp(reason, "denied") == 0) return "Domain denied by the sandbox policy.";
    if (strcmp(reason, "not_allowed") == 0) return "Domain not in allowlist.";
    if (strcmp(reason, "not_allowed_local") == 0)
        return "Sandbox policy blocks local/private network addresses.";
    if (strcmp(reason, "method_not_allowed") == 0) return "Method not allowed in limited mode.";
    if (strcmp(reason, "mitm_required") == 0) return "MITM required for limited HTTPS.";
    if (strcmp(reason, "server_port") == 0)
        return "A port this exec-server listens on is closed to sandboxed commands.";
    return "Request blocked by network policy.";
}

const char *np_reason_header(const char *reason)
{
    if (!reason) return "blocked-by-policy";
    if (strcmp(reason, "denied") == 0) return "blocked-by-denylist";
    if (strcmp(reason, "not_allowed") == 0 || strcmp(reason, "not_allowed_local") == 0)
        return "blocked-by-allowlist";
    if (strcmp(reason, "method_not_allowed") == 0) return "blocked-by-method-policy";
    if (strcmp(reason, "mitm_required") == 0) return "blocked-by-mitm-required";
    return "blocked-by-policy";
}

enum np_reason np_policy_baseline(const struct np_policy *p, const char *host, bool *check_resolved)
{
    *check_resolved = false;
    if (!*host) return NP_REASON_NOT_ALLOWED;
    if (any_match(p->deny, p->n_deny, host)) return NP_REASON_DENIED;
    if (!p->allow_local_binding) {
        bool non_public = false;
        bool literal = np_host_is_ip_literal(host, &non_public);
        if (np_host_is_loopback(host) || (literal && non_public)) {
            bool explicit_allow = false;
            for (size_t i = 0; i < p->n_allow_exact; i++)
                if (strcmp(p->allow_exact[i], host) == 0) explicit_allow = true;
            if (!explicit_allow) return NP_REASON_NOT_ALLOWED_LOCAL;
        } else if (!literal) {
            *check_resolved = true;
        }
    }
    if (!any_match(p->allow, p->n_allow, host) || any_match(p->review, p->n_review, host))
        return NP_REASON_NOT_ALLOWED;
    return NP_REASON_ALLOW;
}

bool np_method_allowed_limited(const char *method)
{
    return strcmp(method, "GET") == 0 || strcmp(method, "HEAD") == 0 ||
           strcmp(method, "OPTIONS") == 0;
}
