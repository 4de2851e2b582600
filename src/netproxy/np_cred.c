/* np_cred: credential masking (PROTOCOL.md section 8.3, `credentialMasking`).
 *
 * At process/start every variable of the child's environment that a provider
 * names, and whose value has the provider's shape, is replaced by a random dummy of
 * the same shape; the proxy keeps the real value. When a request leaves through the
 * proxy for one of that provider's destinations (an intercepted HTTPS request, or a
 * plain HTTP one to an http:// prefix), the dummy in its Authorization header (or
 * the provider's own header) is replaced by the real value. Anywhere else the dummy
 * goes out as it is: the child never holds the secret, and the secret never reaches
 * a host the provider did not name. Values are never logged.
 *
 * Providers (as codex's credential broker defines them):
 *   github      GH_TOKEN, GITHUB_TOKEN: tokens starting ghp_, gho_, ghu_, ghs_, ghr_
 *               or github_pat_; for github.com, api.github.com and *.ghe.com; Bearer,
 *               token or Basic (git's x-access-token:TOKEN).
 *   github (enterprise)  GH_ENTERPRISE_TOKEN, GITHUB_ENTERPRISE_TOKEN, for the host
 *               GH_HOST names (when it is not github.com).
 *   openai      OPENAI_API_KEY starting sk-, for api.openai.com, Bearer.
 *   custom      proxy.credentialProviders: name -> {env, patterns, url_prefixes,
 *               url_prefix_from_env, auth [bearer|token|basic|header], header,
 *               prefix}. A provider that cannot be used (no env, no pattern, no
 *               destination, a pattern that does not compile, a header without
 *               `header` auth...) is dropped with a warning, like the reference.
 * Patterns are POSIX extended regular expressions (glibc regcomp), matched against
 * the whole value; the Perl classes \d \w \s (and their capitals) outside brackets
 * are translated, which covers the patterns codex documents. A dummy keeps the
 * value's shape: each letter or digit is replaced by a random one of its class, a
 * change kept only if the whole value still matches the pattern (so literal parts,
 * "vendor_" say, stay). */
#include "netproxy/np_internal.h"

#include <ctype.h>
#include <errno.h>
#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "core/log.h"
#include "crypto/random.h"
#include "proto/base64.h"
#include "util/envv.h"
#include "util/mem.h"

#define NP_MAX_SECRET 2048

enum { AUTH_BEARER = 1, AUTH_TOKEN = 2, AUTH_BASIC = 4, AUTH_HEADER = 8 };
enum np_builtin { B_CUSTOM, B_GITHUB, B_GITHUB_ENTERPRISE, B_OPENAI };

struct np_dest {
    char scheme[8];
    char host[NP_HOST_MAX];
    uint16_t port; /* 0: any port (the built-ins bind hosts, not ports) */
    char *path;    /* prefix, "" for any */
    bool suffix;   /* host is a suffix (".ghe.com") */
};

struct np_provider {
    char *name;
    enum np_builtin builtin;
    char **env;
    size_t n_env;
    regex_t *re;
    size_t n_re;
    struct np_dest *dests;
    size_t n_dests;
    char *prefix_env;
    unsigned auth;
    char *header, *hprefix;
};

struct np_secret {
    struct np_provider *prov;
    char *real, *dummy;
    struct np_dest extra; /* url_prefix_from_env / GH_HOST, when set */
    bool has_extra;
};

struct np_cred {
    struct np_provider *provs;
    size_t n_provs;
    struct np_secret *secrets;
    size_t n_secrets;
};

/* ---------------------------------------------------------------------------------- */

static bool is_loopback_name(const char *host)
{
    return np_host_is_loopback(host);
}

/* "https://host[:port][/path]", "http://...", or a bare host (loopback: http, else
 * https). Returns 0 or -EINVAL. */
static int dest_parse(const char *s, struct np_dest *d)
{
    memset(d, 0, sizeof *d);
    const char *rest = s;
    if (strncasecmp(s, "https://", 8) == 0) {
        strcpy(d->scheme, "https");
        rest = s + 8;
    } else if (strncasecmp(s, "http://", 7) == 0) {
        strcpy(d->scheme, "http");
        rest = s + 7;
    } else if (strstr(s, "://")) {
        return -EINVAL;
    }
    size_t al = strcspn(rest, "/?#");
    if (al == 0 || al >= NP_HOST_MAX) return -EINVAL;
    char auth[NP_HOST_MAX];
    memcpy(auth, rest, al);
    auth[al] = '\0';
    if (strchr(auth, '@') || strchr(auth, '*')) return -EINVAL;
    uint16_t port = 0;
    char *colon = auth[0] == '[' ? strstr(auth, "]:") : strrchr(auth, ':');
    if (colon && (auth[0] == '[' || strchr(auth, ':') == colon)) {
        char *p = auth[0] == '[' ? colon + 2 : colon + 1;
        char *end;
        long v = strtol(p, &end, 10);
        if (*end || v <= 0 || v > 65535) return -EINVAL;
        port = (uint16_t)v;
        *(auth[0] == '[' ? colon + 1 : colon) = '\0';
    }
    np_host_normalize(auth, d->host, sizeof d->host);
    if (!d->host[0]) return -EINVAL;
    if (!d->scheme[0]) strcpy(d->scheme, is_loopback_name(d->host) ? "http" : "https");
    d->port = port ? port : strcmp(d->scheme, "https") == 0 ? 443 : 80;
    const char *path = rest + al;
    d->path = xstrdup(*path == '/' ? path : "");
    size_t pl = strlen(d->path);
    if (pl && d->path[pl - 1] == '/') d->path[pl - 1] = '\0'; /* "/v1/" is "/v1" */
    return 0;
}

static bool dest_match(const struct np_dest *d, const char *scheme, const char *host, uint16_t port,
                       const char *path)
{
    if (strcmp(d->scheme, scheme) != 0) return false;
    if (d->suffix) {
        size_t hl = strlen(host), sl = strlen(d->host);
        if (hl <= sl || strcmp(host + hl - sl, d->host) != 0) return false;
    } else if (strcmp(d->host, host) != 0) {
        return false;
    }
    if (d->port && d->port != port) return false;
    size_t pl = strlen(d->path);
    if (!pl) return true;
    /* a path prefix ends at a segment boundary: "/v1" covers "/v1" and "/v1/x" */
    return strncmp(path, d->path, pl) == 0 &&
           (path[pl] == '\0' || path[pl] == '/' || path[pl] == '?');
}

/* ---------------------------------------------------------------------------------- */
/* Patterns */

/* Rust-style classes to POSIX: \d \w \s (\D \W \S) outside brackets. */
static char *posix_pattern(const char *p)
{
    struct buf b;
    buf_init(&b);
    buf_puts(&b, "^(");
    bool in_class = false;
    for (const char *s = p; *s; s++) {
        if (!in_class && *s == '\\' && s[1]) {
            const char *rep = NULL;
            switch (s[1]) {
            case 'd': rep = "[0-9]"; break;
            case 'D': rep = "[^0-9]"; break;
            case 'w': rep = "[A-Za-z0-9_]"; break;
            case 'W': rep = "[^A-Za-z0-9_]"; break;
            case 's': rep = "[[:space:]]"; break;
            case 'S': rep = "[^[:space:]]"; break;
            }
            if (rep) {
                buf_puts(&b, rep);
                s++;
                continue;
            }
            buf_putc(&b, *s++);
            buf_putc(&b, *s);
            continue;
        }
        if (*s == '[' && !in_class)
            in_class = true;
        else if (*s == ']' && in_class)
            in_class = false;
        buf_putc(&b, *s);
    }
    buf_puts(&b, ")$");
    buf_putc(&b, '\0');
    return buf_steal(&b);
}

static bool value_matches(const struct np_provider *p, const char *v)
{
    size_t n = strlen(v);
    if (n == 0 || n > NP_MAX_SECRET) return false;
    if (p->builtin == B_GITHUB || p->builtin == B_GITHUB_ENTERPRISE) {
        static const char *const prefixes[] = {"github_pat_", "ghp_", "gho_", "ghu_",
                                               "ghs_",        "ghr_", NULL};
        for (const char *const *x = prefixes; *x; x++) {
            size_t xl = strlen(*x);
            if (strncmp(v, *x, xl) != 0 || n < xl + 16) continue;
            for (size_t i = xl; i < n; i++)
                if (!isalnum((unsigned char)v[i]) && v[i] != '_') return false;
            return true;
        }
        return false;
    }
    if (p->builtin == B_OPENAI) {
        if (strncmp(v, "sk-", 3) != 0 || n < 20) return false;
        for (size_t i = 3; i < n; i++)
            if (!isalnum((unsigned char)v[i]) && v[i] != '_' && v[i] != '-') return false;
        return true;
    }
    for (size_t i = 0; i < p->n_re; i++)
        if (regexec(&p->re[i], v, 0, NULL, 0) == 0) return true;
    return false;
}

static char random_like(char c)
{
    uint8_t r;
    crypto_random_bytes(&r, 1);
    if (isdigit((unsigned char)c)) return (char)('0' + r % 10);
    if (isupper((unsigned char)c)) return (char)('A' + r % 26);
    return (char)('a' + r % 26);
}

/* A dummy with real's shape. Built-ins keep their prefix ("ghp_", "sk-proj-") and
 * randomise the rest; custom providers randomise every letter and digit the pattern
 * lets change. NULL when no different value of the shape matches. */
static char *make_dummy(const struct np_provider *p, const char *real)
{
    size_t n = strlen(real);
    char *d = xstrdup(real);
    size_t keep = 0;
    if (p->builtin == B_GITHUB || p->builtin == B_GITHUB_ENTERPRISE) {
        keep = strncmp(real, "github_pat_", 11) == 0 ? 11 : 4;
    } else if (p->builtin == B_OPENAI) {
        const char *dash = strchr(real + 3, '-');
        keep = dash && (size_t)(dash - real) < 16 ? (size_t)(dash - real) + 1 : 3;
    }
    for (size_t i = keep; i < n; i++) {
        if (!isalnum((unsigned char)real[i])) continue;
        int tries = p->builtin == B_CUSTOM ? (n > 256 ? 4 : 26) : 1;
        for (int t = 0; t < tries; t++) {
            d[i] = random_like(real[i]);
            if (d[i] == real[i] && p->builtin == B_CUSTOM) continue;
            if (p->builtin != B_CUSTOM || value_matches(p, d)) break;
            d[i] = real[i];
        }
        if (p->builtin == B_CUSTOM && !value_matches(p, d)) d[i] = real[i];
    }
    if (strcmp(d, real) == 0 || !value_matches(p, d)) {
        free(d);
        return NULL;
    }
    return d;
}

/* ---------------------------------------------------------------------------------- */
/* Providers */

static void prov_free(struct np_provider *p)
{
    free(p->name);
    for (size_t i = 0; i < p->n_env; i++)
        free(p->env[i]);
    free(p->env);
    for (size_t i = 0; i < p->n_re; i++)
        regfree(&p->re[i]);
    free(p->re);
    for (size_t i = 0; i < p->n_dests; i++)
        free(p->dests[i].path);
    free(p->dests);
    free(p->prefix_env);
    free(p->header);
    free(p->hprefix);
}

static void add_env(struct np_provider *p, const char *k)
{
    p->env = xrealloc(p->env, (p->n_env + 1) * sizeof *p->env);
    p->env[p->n_env++] = xstrdup(k);
}

static void add_dest(struct np_provider *p, const char *scheme, const char *host, bool suffix)
{
    p->dests = xrealloc(p->dests, (p->n_dests + 1) * sizeof *p->dests);
    struct np_dest *d = &p->dests[p->n_dests++];
    memset(d, 0, sizeof *d);
    snprintf(d->scheme, sizeof d->scheme, "%s", scheme);
    snprintf(d->host, sizeof d->host, "%s", host);
    d->path = xstrdup("");
    d->suffix = suffix;
}

static const char *const builtin_env[] = {"GH_TOKEN",
                                          "GITHUB_TOKEN",
                                          "GH_ENTERPRISE_TOKEN",
                                          "GITHUB_ENTERPRISE_TOKEN",
                                          "OPENAI_API_KEY",
                                          "GH_HOST",
                                          NULL};

static bool valid_env_key(const char *k)
{
    if (!(*k == '_' || isalpha((unsigned char)*k))) return false;
    for (const char *s = k; *s; s++)
        if (!(*s == '_' || isalnum((unsigned char)*s))) return false;
    return true;
}

/* Compiles a custom provider; false (and why) when it cannot be used. */
static bool compile_custom(struct np_provider *p, const char *name, json_t *cfg, const char **why)
{
    memset(p, 0, sizeof *p);
    p->name = xstrdup(name);
    p->builtin = B_CUSTOM;
    size_t i;
    json_t *v;
    json_array_foreach(json_object_get(cfg, "env"), i, v)
    {
        const char *k = json_string_value(v);
        if (!valid_env_key(k)) return *why = "an invalid environment key", false;
        for (const char *const *b = builtin_env; *b; b++)
            if (strcmp(*b, k) == 0) return *why = "an environment key of a built-in source", false;
        add_env(p, k);
    }
    if (!p->n_env) return *why = "no environment keys", false;
    json_array_foreach(json_object_get(cfg, "patterns"), i, v)
    {
        const char *pat = json_string_value(v);
        if (strlen(pat) > 2048) return *why = "a pattern over 2048 bytes", false;
        char *px = posix_pattern(pat);
        p->re = xrealloc(p->re, (p->n_re + 1) * sizeof *p->re);
        int rc = regcomp(&p->re[p->n_re], px, REG_EXTENDED | REG_NOSUB);
        free(px);
        if (rc != 0) return *why = "a pattern that does not compile", false;
        p->n_re++;
        if (regexec(&p->re[p->n_re - 1], "", 0, NULL, 0) == 0)
            return *why = "a pattern matching the empty value", false;
    }
    if (!p->n_re) return *why = "no credential patterns", false;
    json_array_foreach(json_object_get(cfg, "url_prefixes"), i, v)
    {
        struct np_dest d;
        if (dest_parse(json_string_value(v), &d) < 0) return *why = "an invalid destination", false;
        p->dests = xrealloc(p->dests, (p->n_dests + 1) * sizeof *p->dests);
        p->dests[p->n_dests++] = d;
    }
    const char *pe = json_string_value(json_object_get(cfg, "url_prefix_from_env"));
    if (pe) {
        if (!valid_env_key(pe)) return *why = "an invalid host environment key", false;
        for (size_t k = 0; k < p->n_env; k++)
            if (strcmp(p->env[k], pe) == 0) return *why = "an invalid host environment key", false;
        p->prefix_env = xstrdup(pe);
    }
    if (!p->n_dests && !p->prefix_env) return *why = "no destination URL prefixes", false;
    json_array_foreach(json_object_get(cfg, "auth"), i, v)
    {
        const char *a = json_string_value(v);
        if (!a && json_is_object(v)) a = json_object_iter_key(json_object_iter(v));
        if (!a) continue;
        p->auth |= strcmp(a, "bearer") == 0  ? AUTH_BEARER
                   : strcmp(a, "token") == 0 ? AUTH_TOKEN
                   : strcmp(a, "basic") == 0 ? AUTH_BASIC
                                             : AUTH_HEADER;
    }
    if (!p->auth) p->auth = AUTH_BEARER;
    const char *hdr = json_string_value(json_object_get(cfg, "header"));
    const char *pfx = json_string_value(json_object_get(cfg, "prefix"));
    if (!!(p->auth & AUTH_HEADER) != !!hdr)
        return *why = "a header name exactly when using header authentication", false;
    if (pfx && !hdr) return *why = "header authentication to use a header prefix", false;
    if (hdr) {
        for (const char *s = hdr; *s; s++)
            if (!isalnum((unsigned char)*s) && !strchr("!#$%&'*+-.^_`|~", *s))
                return *why = "an invalid header", false;
        p->header = xstrdup(hdr);
    }
    p->hprefix = xstrdup(pfx ? pfx : "");
    return true;
}

struct np_cred *np_cred_new(json_t *providers)
{
    struct np_cred *cr = xcalloc(1, sizeof *cr);
    cr->provs = xcalloc(3 + json_object_size(providers), sizeof *cr->provs);
    struct np_provider *gh = &cr->provs[cr->n_provs++];
    gh->name = xstrdup("github");
    gh->builtin = B_GITHUB;
    add_env(gh, "GH_TOKEN");
    add_env(gh, "GITHUB_TOKEN");
    add_dest(gh, "https", "github.com", false);
    add_dest(gh, "https", "api.github.com", false);
    add_dest(gh, "https", ".ghe.com", true);
    gh->auth = AUTH_BEARER | AUTH_TOKEN | AUTH_BASIC;
    struct np_provider *ghe = &cr->provs[cr->n_provs++];
    ghe->name = xstrdup("github-enterprise");
    ghe->builtin = B_GITHUB_ENTERPRISE;
    add_env(ghe, "GH_ENTERPRISE_TOKEN");
    add_env(ghe, "GITHUB_ENTERPRISE_TOKEN");
    ghe->auth = AUTH_BEARER | AUTH_TOKEN | AUTH_BASIC;
    struct np_provider *oa = &cr->provs[cr->n_provs++];
    oa->name = xstrdup("openai");
    oa->builtin = B_OPENAI;
    add_env(oa, "OPENAI_API_KEY");
    add_dest(oa, "https", "api.openai.com", false);
    oa->auth = AUTH_BEARER;
    const char *name;
    json_t *cfg;
    json_object_foreach(providers, name, cfg)
    {
        struct np_provider *p = &cr->provs[cr->n_provs];
        const char *why = "";
        if (compile_custom(p, name, cfg, &why)) {
            cr->n_provs++;
        } else {
            char nv[160];
            log_warn("credential provider %s dropped: it has %s", log_value(name, nv, sizeof nv),
                     why);
            prov_free(p);
            memset(p, 0, sizeof *p);
        }
    }
    return cr;
}

void np_cred_free(struct np_cred *cr)
{
    if (!cr) return;
    for (size_t i = 0; i < cr->n_provs; i++)
        prov_free(&cr->provs[i]);
    free(cr->provs);
    for (size_t i = 0; i < cr->n_secrets; i++) {
        struct np_secret *s = &cr->secrets[i];
        explicit_bzero(s->real, strlen(s->real));
        free(s->real);
        free(s->dummy);
        free(s->extra.path);
    }
    free(cr->secrets);
    free(cr);
}

/* ---------------------------------------------------------------------------------- */
/* The child's environment */

static const char *env_value(char **envp, const char *name)
{
    size_t nl = strlen(name);
    for (size_t i = 0; envp && envp[i]; i++)
        if (strncmp(envp[i], name, nl) == 0 && envp[i][nl] == '=') return envp[i] + nl + 1;
    return NULL;
}

static const char *dummy_for(struct np_cred *cr, struct np_provider *p, const char *real,
                             char **envp)
{
    for (size_t i = 0; i < cr->n_secrets; i++)
        if (cr->secrets[i].prov == p && strcmp(cr->secrets[i].real, real) == 0)
            return cr->secrets[i].dummy;
    struct np_secret s = {.prov = p};
    if (p->builtin == B_GITHUB_ENTERPRISE) {
        /* bound to GH_HOST, and only when it names an enterprise host */
        const char *gh_host = env_value(envp, "GH_HOST");
        if (!gh_host || dest_parse(gh_host, &s.extra) < 0) return NULL;
        if (strcmp(s.extra.host, "github.com") == 0 ||
            strcmp(s.extra.host, "api.github.com") == 0) {
            free(s.extra.path);
            return NULL;
        }
        s.extra.port = 0;
        s.has_extra = true;
    } else if (p->prefix_env) {
        const char *v = env_value(envp, p->prefix_env);
        if (v && dest_parse(v, &s.extra) == 0) s.has_extra = true;
        if (!s.has_extra && !p->n_dests) return NULL; /* nowhere to send it: left as is */
    }
    s.dummy = make_dummy(p, real);
    if (!s.dummy) {
        free(s.extra.path);
        char nv[160];
        log_warn("credential provider %s: no dummy of the value's shape; left unmasked",
                 log_value(p->name, nv, sizeof nv));
        return NULL;
    }
    s.real = xstrdup(real);
    cr->secrets = xrealloc(cr->secrets, (cr->n_secrets + 1) * sizeof *cr->secrets);
    cr->secrets[cr->n_secrets++] = s;
    return s.dummy;
}

char **np_cred_child_env(struct netproxy *np, char **envp)
{
    struct np_cred *cr = np->cred;
    size_t masked = 0;
    for (size_t i = 0; envp && envp[i]; i++) {
        char *eq = strchr(envp[i], '=');
        if (!eq) continue;
        char name[256];
        size_t nl = (size_t)(eq - envp[i]);
        if (nl >= sizeof name) continue;
        memcpy(name, envp[i], nl);
        name[nl] = '\0';
        for (size_t k = 0; k < cr->n_provs; k++) {
            struct np_provider *p = &cr->provs[k];
            bool named = false;
            for (size_t e = 0; e < p->n_env; e++)
                if (strcmp(p->env[e], name) == 0) named = true;
            if (!named || !value_matches(p, eq + 1)) continue;
            const char *dummy = dummy_for(cr, p, eq + 1, envp);
            if (!dummy) continue;
            size_t len = nl + 1 + strlen(dummy) + 1;
            char *repl = xmalloc(len);
            snprintf(repl, len, "%s=%s", name, dummy);
            explicit_bzero(envp[i], strlen(envp[i]));
            free(envp[i]);
            envp[i] = repl;
            masked++;
            break;
        }
    }
    const char *bundle = np->ca_bundle;
    if (bundle) {
        static const char *const ca_vars[] = {
            "CODEX_CA_CERTIFICATE", "SSL_CERT_FILE",     "CURL_CA_BUNDLE",     "REQUESTS_CA_BUNDLE",
            "NODE_EXTRA_CA_CERTS",  "GIT_SSL_CAINFO",    "PIP_CERT",           "CARGO_HTTP_CAINFO",
            "NPM_CONFIG_CAFILE",    "npm_config_cafile", "BUNDLE_SSL_CA_CERT", NULL};
        for (const char *const *v = ca_vars; *v; v++)
            envp = envv_put(envp, *v, bundle);
    }
    if (masked) {
        char idv[160];
        log_info("credential masking: process %s: %zu variable(s) masked",
                 log_value(np->process_id, idv, sizeof idv), masked);
    }
    return envp;
}

/* ---------------------------------------------------------------------------------- */
/* Requests */

static bool secret_goes_to(const struct np_secret *s, const char *scheme, const char *host,
                           uint16_t port, const char *path)
{
    if (s->has_extra && dest_match(&s->extra, scheme, host, port, path)) return true;
    for (size_t i = 0; i < s->prov->n_dests; i++)
        if (dest_match(&s->prov->dests[i], scheme, host, port, path)) return true;
    return false;
}

static void replace_all(struct buf *out, const char *s, size_t n, const char *from, const char *to)
{
    size_t fl = strlen(from);
    for (size_t i = 0; i < n;) {
        if (fl && i + fl <= n && memcmp(s + i, from, fl) == 0) {
            buf_puts(out, to);
            i += fl;
        } else {
            buf_putc(out, s[i++]);
        }
    }
}

static bool rewrite(void *ctx, const struct np_http_header *h, struct buf *out)
{
    struct np_client *c = ctx;
    struct np_cred *cr = c->np->cred;
    const char *scheme = c->mitm ? "https" : "http";
    const char *path = c->forward_path ? c->forward_path : "/";
    bool authz = h->name_len == 13 && strncasecmp(h->name, "Authorization", 13) == 0;
    char value[NP_MAX_SECRET * 2 + 64];
    if (h->value_len >= sizeof value) return false;
    memcpy(value, h->value, h->value_len);
    value[h->value_len] = '\0';
    for (size_t i = 0; i < cr->n_secrets; i++) {
        const struct np_secret *s = &cr->secrets[i];
        const struct np_provider *p = s->prov;
        if (!secret_goes_to(s, scheme, c->host, c->port, path)) continue;
        if (p->header && h->name_len == strlen(p->header) &&
            strncasecmp(h->name, p->header, h->name_len) == 0) {
            size_t pl = strlen(p->hprefix);
            if (strncmp(value, p->hprefix, pl) == 0 && strcmp(value + pl, s->dummy) == 0) {
                buf_puts(out, p->hprefix);
                buf_puts(out, s->real);
                return true;
            }
        }
        if (!authz) continue;
        char *sp = strchr(value, ' ');
        if (!sp) continue;
        size_t sl = (size_t)(sp - value);
        const char *cred = sp + 1;
        while (*cred == ' ')
            cred++;
        bool bearer = sl == 6 && strncasecmp(value, "Bearer", 6) == 0;
        bool token = sl == 5 && strncasecmp(value, "token", 5) == 0;
        bool basic = sl == 5 && strncasecmp(value, "Basic", 5) == 0;
        if (((bearer && (p->auth & AUTH_BEARER)) || (token && (p->auth & AUTH_TOKEN))) &&
            strcmp(cred, s->dummy) == 0) {
            buf_append(out, value, sl);
            buf_putc(out, ' ');
            buf_puts(out, s->real);
            return true;
        }
        if (basic && (p->auth & AUTH_BASIC)) {
            size_t cl = strlen(cred), dl = 0;
            uint8_t *dec = xmalloc(base64_decoded_max(cl) + 1);
            char err[96];
            if (base64_decode(cred, cl, dec, &dl, err, sizeof err) == 0) {
                dec[dl] = '\0';
                if (memchr(dec, ':', dl) && strstr((char *)dec, s->dummy)) {
                    struct buf plain;
                    buf_init(&plain);
                    replace_all(&plain, (char *)dec, dl, s->dummy, s->real);
                    buf_puts(out, "Basic ");
                    base64_append(out, plain.data, plain.len);
                    if (plain.data) explicit_bzero(plain.data, plain.len);
                    buf_free(&plain);
                    free(dec);
                    return true;
                }
            }
            free(dec);
        }
    }
    return false;
}

np_http_rewrite_fn np_cred_rewrite_fn(struct np_client *c)
{
    return c->np->cred && c->np->cred->n_secrets ? rewrite : NULL;
}

bool np_cred_wants(const struct np_client *c)
{
    struct np_cred *cr = c->np->cred;
    if (!cr) return false;
    for (size_t i = 0; i < cr->n_secrets; i++) {
        const struct np_secret *s = &cr->secrets[i];
        if (s->has_extra && strcmp(s->extra.scheme, "https") == 0 &&
            dest_match(&s->extra, "https", c->host, c->port, s->extra.path))
            return true;
        for (size_t k = 0; k < s->prov->n_dests; k++) {
            const struct np_dest *d = &s->prov->dests[k];
            if (dest_match(d, "https", c->host, c->port, d->path)) return true;
        }
    }
    return false;
}
