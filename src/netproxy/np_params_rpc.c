/* np_params_rpc: decoding process/start's managed-network fields (enforceManagedNetwork,
 * managedNetwork, networkProxy) with rpc/params' decoder and the reference's serde
 * wording (PROTOCOL.md section 5.10; the fields and what was verified are listed in
 * np_config.c, which checks them after decoding). */
#include "netproxy/netproxy_rpc.h"

#include <stdio.h>
#include <string.h>

#include "rpc/params.h"
#include "rpc/rpc.h"

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

/* What a client may send in process/start's networkProxy once it sees these:
 * networkProxyLaunch and networkProxyReviewDomains, the child behind this proxy with
 * proxy.reviewDomains; networkProxyTransparentTcp, proxy.transparentTcp (a TUN device
 * in the sandbox, np_tun.c); credentialMasking and credentialMaskingCustomProviders,
 * proxy.credentialMasking and proxy.credentialProviders (np_cred.c). */
static const struct rpc_capability netproxy_capabilities[] = {
    {"networkProxyLaunch", true, NULL},
    {"networkProxyReviewDomains", true, NULL},
    {"networkProxyTransparentTcp", true, NULL},
    {"credentialMasking", true, NULL},
    {"credentialMaskingCustomProviders", true, NULL},
    {NULL, false, NULL},
};

const struct rpc_domain netproxy_domain = {
    .name = "netproxy",
    .capabilities = netproxy_capabilities,
};
