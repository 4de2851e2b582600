/* np_config: the checks after decoding process/start's managed-network fields
 * (np_params_rpc.c decodes them), with the reference's wording (PROTOCOL.md section
 * 5.10).
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
