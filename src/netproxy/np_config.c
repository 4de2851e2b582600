/* np_config: decoding process/start's managed-network fields with the reference's
 * wording (PROTOCOL.md section 5.10), and the checks after decoding.
 *
 * Verified on 0.169.0: networkProxy = {proxy (required), auditMetadata?,
 * environmentId?, executionId?, policyDecisionTimeoutMs?}; in proxy the booleans
 * enabled, enableSocks5, enableSocks5Udp, allowUpstreamProxy,
 * dangerouslyAllowAllUnixSockets, allowLocalBinding and `mode` ("limited"|"full")
 * are required; domains {pattern: "none"|"allow"|"deny"} and unixSockets {path:
 * "allow"|"deny"} may be absent or null; unknown members are ignored except inside a
 * credential provider (snake_case, unknown keys rejected). unixSockets is accepted
 * and has no effect: on Linux the reference refuses every unix-socket request
 * (x-unix-socket) as unsupported, and so does ours. managedNetwork is checked to be
 * an object and otherwise ignored (its content is for the sandbox). 0.171.0 adds
 * proxy.transparentTcp, an optional boolean (not null) between enableSocks5 and
 * enableSocks5Udp, which needs a sandbox and SOCKS5 (netproxy_validate).
 *
 * Also the settings the proxy takes from the server rather than the request: whether
 * non-public addresses may go through an upstream proxy, and the upstream proxies of
 * the server's environment (HTTP(S)_PROXY, ALL_PROXY). */
#include "netproxy/netproxy.h"
#include "netproxy/np_internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "core/env_vars.h"
#include "core/log.h"

#include "rpc/params.h"

/* Runs a nested decoder's failure up into the outer one. */
static void carry(struct pdec *outer, const struct pdec *inner)
{
    if (inner->failed) pdec_fail(outer, "%s", inner->err);
}

/* The reference decodes these members through a buffered value, where serde names
 * any number "number" ("invalid type: number, expected a string", verified) rather
 * than "integer `5`". Enum values keep serde's usual text (verified for unixSockets). */
static void number_wording(struct pdec *d)
{
    const char *at = strstr(d->err, "invalid type: integer `");
    if (!at || strstr(d->err, "expected string or map")) return;
    const char *end = strchr(at + 23, '`');
    if (!end) return;
    char fixed[sizeof d->err];
    snprintf(fixed, sizeof fixed, "%.*sinvalid type: number%s", (int)(at - d->err), d->err,
             end + 1);
    snprintf(d->err, sizeof d->err, "%s", fixed);
}

static void decode_enum_map(struct pdec *d, json_t *map, const char *const *variants)
{
    const char *k;
    json_t *v;
    json_object_foreach(map, k, v)
    {
        struct pdec e = {.obj = map};
        pdec_enum(&e, k, PDEC_REQUIRED, variants, 0);
        carry(d, &e);
        if (d->failed) return;
    }
}

static void decode_string_array(struct pdec *d, json_t *arr)
{
    size_t i;
    json_t *v;
    json_array_foreach(arr, i, v) if (!json_is_string(v))
    {
        char what[128];
        pdec_describe(v, what, sizeof what);
        pdec_fail(d, "invalid type: %s, expected a string", what);
        return;
    }
}

/* proxy.credentialProviders: name -> CredentialProviderConfig (deny_unknown_fields). */
static void decode_providers(struct pdec *d, json_t *map)
{
    static const char *const fields[] = {"env",  "patterns", "url_prefixes", "url_prefix_from_env",
                                         "auth", "header",   "prefix",       NULL};
    static const char *const auths[] = {"bearer", "token", "basic", "header", NULL};
    const char *name;
    json_t *prov;
    json_object_foreach(map, name, prov)
    {
        struct pdec e;
        if (!pdec_begin(&e, prov, "CredentialProviderConfig")) {
            carry(d, &e);
            return;
        }
        const char *k;
        json_t *v;
        json_object_foreach(prov, k, v)
        {
            bool known = false;
            for (const char *const *f = fields; *f; f++)
                if (strcmp(*f, k) == 0) known = true;
            if (!known) {
                pdec_fail(d,
                          "unknown field `%s`, expected one of `env`, `patterns`, "
                          "`url_prefixes`, `url_prefix_from_env`, `auth`, `header`, `prefix`",
                          k);
                return;
            }
        }
        for (int i = 0; i < 3; i++) {
            json_t *arr = pdec_array(&e, fields[i], PDEC_OPTIONAL);
            if (arr) decode_string_array(&e, arr);
        }
        pdec_string(&e, "url_prefix_from_env", PDEC_OPTIONAL);
        json_t *auth = pdec_array(&e, "auth", PDEC_OPTIONAL);
        size_t i;
        json_t *a;
        if (auth) json_array_foreach(auth, i, a)
            {
                json_t *wrap = json_pack("{s:O}", "a", a);
                struct pdec w = {.obj = wrap};
                pdec_enum(&w, "a", PDEC_REQUIRED, auths, 0);
                json_decref(wrap);
                carry(&e, &w);
            }
        pdec_string(&e, "header", PDEC_OPTIONAL);
        pdec_string(&e, "prefix", PDEC_OPTIONAL);
        carry(d, &e);
        if (d->failed) return;
    }
}

static void decode_proxy(struct pdec *d, json_t *proxy, struct netproxy_params *p)
{
    static const char *const modes[] = {"limited", "full", NULL};
    static const char *const perms[] = {"none", "allow", "deny", NULL};
    static const char *const unix_perms[] = {"allow", "deny", NULL};
    struct pdec e;
    if (!pdec_begin(&e, proxy, "RemoteNetworkProxyConfig")) {
        carry(d, &e);
        return;
    }
    p->enabled = pdec_bool(&e, "enabled", PDEC_REQUIRED, false);
    p->enable_socks5 = pdec_bool(&e, "enableSocks5", PDEC_REQUIRED, false);
    p->transparent_tcp = pdec_bool(&e, "transparentTcp", PDEC_OPTIONAL_NONNULL, false);
    p->enable_socks5_udp = pdec_bool(&e, "enableSocks5Udp", PDEC_REQUIRED, false);
    p->allow_upstream_proxy = pdec_bool(&e, "allowUpstreamProxy", PDEC_REQUIRED, false);
    p->allow_all_unix_sockets =
        pdec_bool(&e, "dangerouslyAllowAllUnixSockets", PDEC_REQUIRED, false);
    p->limited = pdec_enum(&e, "mode", PDEC_REQUIRED, modes, 1) == 0;
    json_t *domains = pdec_object(&e, "domains", PDEC_OPTIONAL);
    if (domains) decode_enum_map(&e, domains, perms);
    json_t *unix_sockets = json_object_get(proxy, "unixSockets");
    if (!e.failed && unix_sockets && !json_is_null(unix_sockets)) {
        if (!json_is_object(unix_sockets)) {
            char what[128];
            pdec_describe(unix_sockets, what, sizeof what);
            pdec_fail(&e, "invalid type: %s, expected struct NetworkUnixSocketPermissions", what);
        } else {
            decode_enum_map(&e, unix_sockets, unix_perms);
        }
    }
    p->allow_local_binding = pdec_bool(&e, "allowLocalBinding", PDEC_REQUIRED, false);
    p->credential_masking = pdec_bool(&e, "credentialMasking", PDEC_OPTIONAL, false);
    json_t *providers = pdec_object(&e, "credentialProviders", PDEC_OPTIONAL);
    if (providers) decode_providers(&e, providers);
    json_t *review = pdec_array(&e, "reviewDomains", PDEC_OPTIONAL);
    if (review) decode_string_array(&e, review);
    carry(d, &e);
    if (d->failed) return;
    p->domains = domains ? json_deep_copy(domains) : NULL;
    p->providers = providers ? json_deep_copy(providers) : NULL;
    p->review = review ? json_deep_copy(review) : NULL;
}

static void params_decode(struct pdec *d, struct netproxy_params *p);

void netproxy_params_decode(struct pdec *d, struct netproxy_params *p)
{
    bool failed_before = d->failed;
    params_decode(d, p);
    if (!failed_before && d->failed) number_wording(d);
}

static void params_decode(struct pdec *d, struct netproxy_params *p)
{
    memset(p, 0, sizeof *p);
    p->enforce_managed_network =
        pdec_bool(d, "enforceManagedNetwork", PDEC_OPTIONAL_NONNULL, false);
    json_t *mn = d->obj && !d->failed ? json_object_get(d->obj, "managedNetwork") : NULL;
    if (mn && !json_is_null(mn)) {
        struct pdec e;
        if (!pdec_begin(&e, mn, "ManagedNetworkSandboxContext")) carry(d, &e);
    }
    json_t *np = d->obj && !d->failed ? json_object_get(d->obj, "networkProxy") : NULL;
    if (!np || json_is_null(np)) return;
    struct pdec e;
    if (!pdec_begin(&e, np, "RemoteNetworkProxyLaunchConfig")) {
        carry(d, &e);
        return;
    }
    json_t *proxy = json_object_get(np, "proxy");
    if (!proxy) {
        pdec_fail(d, "missing field `proxy`");
        return;
    }
    decode_proxy(&e, proxy, p);
    json_t *audit = json_object_get(np, "auditMetadata");
    if (!e.failed && audit && !json_is_null(audit)) {
        struct pdec a;
        if (!pdec_begin(&a, audit, "NetworkProxyAuditMetadata")) carry(&e, &a);
    }
    pdec_string(&e, "environmentId", PDEC_OPTIONAL);
    pdec_string(&e, "executionId", PDEC_OPTIONAL);
    p->timeout_ms = pdec_u64(&e, "policyDecisionTimeoutMs", PDEC_OPTIONAL, 0, &p->has_timeout);
    carry(d, &e);
    p->present = !d->failed;
}

int netproxy_validate(const struct netproxy_params *p, bool sandboxed, char *err, size_t n)
{
    if (!p->present) return 0;
    /* In 0.171.0's order (verified; 0.169.0 too checks the timeout first). */
    if (p->has_timeout && p->timeout_ms == 0) {
        snprintf(err, n, "network policy decision callback timeout must be nonzero");
        return -EINVAL;
    }
    if (p->transparent_tcp && !sandboxed) {
        snprintf(err, n, "transparent TCP requires a managed Linux sandbox");
        return -EINVAL;
    }
    if (!p->enabled) {
        snprintf(err, n,
                 "invalid network proxy config: executor-local network proxy launch "
                 "requires an enabled proxy");
        return -EINVAL;
    }
    if (p->transparent_tcp && !p->enable_socks5) {
        snprintf(err, n,
                 "invalid network proxy config: transparent_tcp requires an enabled managed "
                 "SOCKS5 proxy");
        return -EINVAL;
    }
    struct np_policy pol = {0};
    const char *k;
    json_t *v;
    char why[400];
    int rc = 0;
    json_object_foreach(p->domains, k, v)
    {
        const char *s =
            json_is_string(v) ? json_string_value(v) : json_object_iter_key(json_object_iter(v));
        if (!s) s = "none";
        enum np_perm perm = strcmp(s, "allow") == 0  ? NP_PERM_ALLOW
                            : strcmp(s, "deny") == 0 ? NP_PERM_DENY
                                                     : NP_PERM_NONE;
        if (np_policy_add(&pol, k, perm, why, sizeof why) < 0) {
            snprintf(err, n, "invalid network proxy config: %s", why);
            rc = -EINVAL;
            break;
        }
    }
    size_t i;
    json_array_foreach(p->review, i, v)
    {
        if (rc < 0) break;
        if (np_policy_add(&pol, json_string_value(v), NP_PERM_REVIEW, why, sizeof why) < 0) {
            snprintf(err, n, "invalid network proxy config: %s", why);
            rc = -EINVAL;
        }
    }
    np_policy_free(&pol);
    return rc;
}

void netproxy_params_free(struct netproxy_params *p)
{
    json_decref(p->domains);
    json_decref(p->providers);
    json_decref(p->review);
    p->domains = p->providers = p->review = NULL;
}

/* ---- the server's settings and environment ------------------------------------- */

static bool private_ips_via_upstream;
static struct limits_endpoint tcp_upstream; /* host "" when none */

void netproxy_configure(bool via_upstream, const struct limits_endpoint *tcp_up)
{
    private_ips_via_upstream = via_upstream;
    if (tcp_up)
        tcp_upstream = *tcp_up;
    else
        memset(&tcp_upstream, 0, sizeof tcp_upstream);
}

const struct limits_endpoint *np_tcp_upstream(void)
{
    return tcp_upstream.host[0] ? &tcp_upstream : NULL;
}

/* Its variable, CODEX_EXEC_SERVER_PROXY_PRIVATE_IPS_VIA_UPSTREAM, is the flag's
 * (server/options.c applies it; anything but true or false stops the start). */
bool np_private_via_upstream(void)
{
    return private_ips_via_upstream;
}

/* A proxy variable: its name (for the warning) and its value (env_vars). */
struct proxy_var {
    const char *name, *value;
};

/* An upstream proxy from the server's environment: http://host[:port] only (the
 * reference takes HTTP(S) proxies only; anything else is ignored with a warning). */
static void upstream_from_names(const struct proxy_var *vars, char *host, size_t hn, uint16_t *port)
{
    for (const struct proxy_var *n = vars; n->name; n++) {
        const char *v = n->value;
        if (!v || !*v) continue;
        if (strncasecmp(v, "http://", 7) != 0) {
            log_warn("network proxy: %s is not an http:// proxy; upstream proxying ignores it",
                     n->name);
            continue;
        }
        const char *a = v + 7;
        size_t al = strcspn(a, "/");
        char auth[NP_HOST_MAX];
        if (al >= sizeof auth || memchr(a, '@', al)) continue;
        memcpy(auth, a, al);
        auth[al] = '\0';
        uint16_t p = 80;
        char *colon = auth[0] == '[' ? strstr(auth, "]:") : strrchr(auth, ':');
        if (colon) {
            char *ps = auth[0] == '[' ? colon + 2 : colon + 1;
            long pv = strtol(ps, NULL, 10);
            if (pv > 0 && pv < 65536) p = (uint16_t)pv;
            *(auth[0] == '[' ? colon + 1 : colon) = '\0';
        }
        np_host_normalize(auth, host, hn);
        *port = p;
        return;
    }
}

void np_upstream_from_env(struct netproxy *np)
{
    const struct proxy_var all[] = {{"ALL_PROXY", env_vars.all_proxy},
                                    {"all_proxy", env_vars.all_proxy_lower}};
    const struct proxy_var http_names[] = {{"HTTP_PROXY", env_vars.http_proxy},
                                           {"http_proxy", env_vars.http_proxy_lower},
                                           all[0],
                                           all[1],
                                           {NULL, NULL}};
    const struct proxy_var https_names[] = {{"HTTPS_PROXY", env_vars.https_proxy},
                                            {"https_proxy", env_vars.https_proxy_lower},
                                            all[0],
                                            all[1],
                                            {NULL, NULL}};
    upstream_from_names(http_names, np->up_http_host, sizeof np->up_http_host, &np->up_http_port);
    upstream_from_names(https_names, np->up_connect_host, sizeof np->up_connect_host,
                        &np->up_connect_port);
}
