/* env_policy: decoding `envPolicy` and building a child's environment from it
 * (PROTOCOL.md section 5.1.3). See env_policy.h for the contract.
 *
 * The environment is kept as a small array of name/value pairs while the policy
 * steps run (inherit, default excludes, exclude, set, includeOnly, then `env`);
 * environments hold a few hundred variables at most, so linear scans are fine and
 * keep the steps obviously in the documented order. */
#include "process/env_policy.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/types.h>

#include "util/buf.h"
#include "util/mem.h"

/* ---- decoding ---------------------------------------------------------------- */

/* The reference decodes envPolicy from an already-parsed JSON value, where serde names
 * any number just "number" (not "integer `1`" as when reading text). */
static void describe(const json_t *v, char *out, size_t outlen)
{
    if (json_is_number(v)) snprintf(out, outlen, "number");
    else pdec_describe(v, out, outlen);
}

/* inherit's variants, in the order the reference lists them in its error text. */
static const char *const inherit_variants[] = {"core", "all", "none", NULL};

static bool decode_string_array(struct pdec *d, const char *key, json_t **out)
{
    *out = pdec_array(d, key, PDEC_REQUIRED);
    if (d->failed) return false;
    size_t i;
    json_t *v;
    json_array_foreach(*out, i, v)
    {
        if (!json_is_string(v)) {
            char what[128];
            describe(v, what, sizeof what);
            pdec_fail(d, "invalid type: %s, expected a string", what);
            return false;
        }
    }
    return true;
}

bool env_policy_decode(struct pdec *d, const char *key, struct env_policy *out)
{
    memset(out, 0, sizeof *out);
    if (d->failed || !json_is_object(d->obj)) return !d->failed;
    json_t *v = json_object_get(d->obj, key);
    if (!v || json_is_null(v)) return true;

    if (json_is_number(v)) {
        pdec_fail(d, "invalid type: number, expected struct ExecEnvPolicy");
        return false;
    }
    struct pdec sub;
    if (pdec_begin(&sub, v, "ExecEnvPolicy")) {
        int inh = pdec_enum(&sub, "inherit", PDEC_REQUIRED, inherit_variants, -1);
        out->ignore_default_excludes =
            pdec_bool(&sub, "ignoreDefaultExcludes", PDEC_REQUIRED, false);
        decode_string_array(&sub, "exclude", &out->exclude);
        out->set = pdec_object(&sub, "set", PDEC_REQUIRED);
        if (!sub.failed) {
            const char *k;
            json_t *sv;
            json_object_foreach(out->set, k, sv)
            {
                if (!json_is_string(sv)) {
                    char what[128];
                    describe(sv, what, sizeof what);
                    pdec_fail(&sub, "invalid type: %s, expected a string", what);
                    break;
                }
            }
        }
        decode_string_array(&sub, "includeOnly", &out->include_only);
        out->inherit = inh == 0 ? ENV_INHERIT_CORE : inh == 1 ? ENV_INHERIT_ALL : ENV_INHERIT_NONE;
    }
    if (sub.failed) {
        pdec_fail(d, "%s", sub.err);
        memset(out, 0, sizeof *out);
        return false;
    }
    out->present = true;
    return true;
}

/* ---- matching ------------------------------------------------------------------ */

bool env_pattern_match(const char *p, const char *s)
{
    /* Iterative glob with single-star backtracking: linear-ish, no recursion. */
    const char *star = NULL, *resume = NULL;
    while (*s) {
        if (*p == '*') {
            star = p++;
            resume = s;
        } else if (*p && (*p == '?' || tolower((unsigned char)*p) == tolower((unsigned char)*s))) {
            p++;
            s++;
        } else if (star) {
            p = star + 1;
            s = ++resume;
        } else {
            return false;
        }
    }
    while (*p == '*') p++;
    return *p == '\0';
}

static bool matches_any(json_t *patterns, const char *name)
{
    size_t i;
    json_t *v;
    json_array_foreach(patterns, i, v) if (env_pattern_match(json_string_value(v), name)) return true;
    return false;
}

/* ---- building ------------------------------------------------------------------ */

struct env_var {
    char *name;
    char *value;
};

struct env_list {
    struct env_var *v;
    size_t n, cap;
};

static ssize_t list_find(const struct env_list *l, const char *name)
{
    for (size_t i = 0; i < l->n; i++)
        if (strcmp(l->v[i].name, name) == 0) return (ssize_t)i;
    return -1;
}

/* Sets name=value, replacing an existing entry. Takes copies. */
static void list_set(struct env_list *l, const char *name, size_t name_len, const char *value)
{
    char *n = xmalloc(name_len + 1);
    memcpy(n, name, name_len);
    n[name_len] = '\0';
    ssize_t at = list_find(l, n);
    if (at >= 0) {
        free(n);
        free(l->v[at].value);
        l->v[at].value = xstrdup(value);
        return;
    }
    if (l->n == l->cap) {
        l->cap = l->cap ? l->cap * 2 : 32;
        l->v = xrealloc(l->v, l->cap * sizeof *l->v);
    }
    l->v[l->n].name = n;
    l->v[l->n].value = xstrdup(value);
    l->n++;
}

/* Keeps only the entries for which keep(name) == want. */
static void list_filter(struct env_list *l, bool (*pred)(const char *, void *), void *ctx,
                        bool keep_when)
{
    size_t w = 0;
    for (size_t i = 0; i < l->n; i++) {
        if (pred(l->v[i].name, ctx) == keep_when) {
            l->v[w++] = l->v[i];
        } else {
            free(l->v[i].name);
            free(l->v[i].value);
        }
    }
    l->n = w;
}

/* The Unix core set of `inherit: "core"`, compared case-insensitively. */
static bool is_core_var(const char *name, void *ctx)
{
    (void)ctx;
    static const char *const core[] = {"PATH", "SHELL",  "TMPDIR",  "TEMP",    "TMP", "HOME",
                                       "LANG", "LC_ALL", "LC_CTYPE", "LOGNAME", "USER", NULL};
    for (const char *const *c = core; *c; c++)
        if (strcasecmp(*c, name) == 0) return true;
    return false;
}

static bool is_default_excluded(const char *name, void *ctx)
{
    (void)ctx;
    return env_pattern_match("*KEY*", name) || env_pattern_match("*SECRET*", name) ||
           env_pattern_match("*TOKEN*", name);
}

static bool matches_patterns(const char *name, void *ctx)
{
    return matches_any(ctx, name);
}

static int cmp_var(const void *a, const void *b)
{
    return strcmp(((const struct env_var *)a)->name, ((const struct env_var *)b)->name);
}

char **env_policy_build(const struct env_policy *pol, char *const *server_env, json_t *env)
{
    struct env_list l = {0};
    if (pol && pol->present && pol->inherit != ENV_INHERIT_NONE && server_env) {
        for (char *const *e = server_env; *e; e++) {
            const char *eq = strchr(*e, '=');
            if (!eq || eq == *e) continue;
            size_t nlen = (size_t)(eq - *e);
            bool seen = false;
            for (size_t i = 0; i < l.n && !seen; i++)
                seen = strlen(l.v[i].name) == nlen && memcmp(l.v[i].name, *e, nlen) == 0;
            if (!seen) list_set(&l, *e, nlen, eq + 1);
        }
        if (pol->inherit == ENV_INHERIT_CORE) list_filter(&l, is_core_var, NULL, true);
    }
    if (pol && pol->present) {
        if (!pol->ignore_default_excludes) list_filter(&l, is_default_excluded, NULL, false);
        if (pol->exclude) list_filter(&l, matches_patterns, pol->exclude, false);
        const char *k;
        json_t *v;
        if (pol->set) json_object_foreach(pol->set, k, v) list_set(&l, k, strlen(k), json_string_value(v));
        if (pol->include_only && json_array_size(pol->include_only) > 0)
            list_filter(&l, matches_patterns, pol->include_only, true);
    }
    if (env) {
        const char *k;
        json_t *v;
        json_object_foreach(env, k, v) list_set(&l, k, strlen(k), json_string_value(v));
    }
    if (l.n > 1) qsort(l.v, l.n, sizeof *l.v, cmp_var);

    char **envp = xcalloc(l.n + 1, sizeof *envp);
    for (size_t i = 0; i < l.n; i++) {
        struct buf kv;
        buf_init(&kv);
        buf_printf(&kv, "%s=%s", l.v[i].name, l.v[i].value);
        buf_putc(&kv, '\0');
        envp[i] = buf_steal(&kv);
        free(l.v[i].name);
        free(l.v[i].value);
    }
    free(l.v);
    return envp;
}

const char *env_lookup(char *const *envp, const char *name)
{
    size_t nlen = strlen(name);
    for (char *const *e = envp; e && *e; e++)
        if (strncmp(*e, name, nlen) == 0 && (*e)[nlen] == '=') return *e + nlen + 1;
    return NULL;
}

void env_free(char **envp)
{
    if (!envp) return;
    for (char **e = envp; *e; e++) free(*e);
    free(envp);
}
