/* env_policy: the child's environment from process/start's `envPolicy` and `env`.
 * See env_policy.h for the rules (PROTOCOL.md §5.1.3). */
#include "process/env_policy.h"

#include <ctype.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proto/hex.h"
#include "util/buf.h"
#include "util/mem.h"

/* "core" on Unix: what a login shell needs to find programs, files and a locale. */
static const char *const core_names[] = {"PATH", "SHELL",  "TMPDIR",   "TEMP",    "TMP",  "HOME",
                                         "LANG", "LC_ALL", "LC_CTYPE", "LOGNAME", "USER", NULL};
static const char *const default_excludes[] = {"*KEY*", "*SECRET*", "*TOKEN*", NULL};

bool env_name_matches(const char *pat, const char *name)
{
    /* Iterative glob with one backtrack point: linear enough for env names and
     * never recursive, so a hostile pattern cannot blow the stack. */
    const char *star = NULL, *resume = NULL;
    while (*name) {
        if (*pat == '*') {
            star = pat++;
            resume = name;
        } else if (*pat == '?' ||
                   (*pat && tolower((unsigned char)*pat) == tolower((unsigned char)*name))) {
            pat++;
            name++;
        } else if (star) {
            pat = star + 1;
            name = ++resume;
        } else {
            return false;
        }
    }
    while (*pat == '*')
        pat++;
    return *pat == '\0';
}

static bool matches_any_json(json_t *patterns, const char *name)
{
    size_t i;
    json_t *p;
    json_array_foreach(patterns, i,
                       p) if (env_name_matches(json_string_value(p), name)) return true;
    return false;
}

static bool matches_any(const char *const *patterns, const char *name)
{
    for (; *patterns; patterns++)
        if (env_name_matches(*patterns, name)) return true;
    return false;
}

static bool is_core(const char *name)
{
    for (const char *const *c = core_names; *c; c++)
        if (strcasecmp(*c, name) == 0) return true;
    return false;
}

void env_policy_from_json(json_t *obj, struct env_policy *out)
{
    const char *inherit = json_string_value(json_object_get(obj, "inherit"));
    out->inherit = inherit && !strcmp(inherit, "all")    ? ENV_INHERIT_ALL
                   : inherit && !strcmp(inherit, "none") ? ENV_INHERIT_NONE
                                                         : ENV_INHERIT_CORE;
    out->ignore_default_excludes = json_is_true(json_object_get(obj, "ignoreDefaultExcludes"));
    out->exclude = json_object_get(obj, "exclude");
    out->set = json_object_get(obj, "set");
    out->include_only = json_object_get(obj, "includeOnly");
}

/* A growable envp with replace-by-name. Names are found through an open-addressing
 * hash index (slot = entry index + 1, 0 = empty), so building an environment of n
 * names is linear: a linear scan per name made 60k keys take 12 s of the loop
 * thread. */
struct envv {
    char **v;
    size_t n, cap;
    size_t *slots; /* nslots entries, a power of two, at most half full */
    size_t nslots;
};

static size_t name_len(const char *kv)
{
    const char *eq = strchr(kv, '=');
    return eq ? (size_t)(eq - kv) : strlen(kv);
}

static size_t name_hash(const char *name, size_t n)
{
    uint64_t h = 14695981039346656037ull; /* FNV-1a */
    for (size_t i = 0; i < n; i++)
        h = (h ^ (unsigned char)name[i]) * 1099511628211ull;
    return (size_t)(h ^ (h >> 32));
}

/* The slot holding name[0..nl) or the empty slot where it would go. */
static size_t *envv_slot(struct envv *e, const char *name, size_t nl)
{
    size_t mask = e->nslots - 1;
    for (size_t i = name_hash(name, nl) & mask;; i = (i + 1) & mask) {
        size_t *s = &e->slots[i];
        if (*s == 0) return s;
        const char *kv = e->v[*s - 1];
        if (name_len(kv) == nl && memcmp(kv, name, nl) == 0) return s;
    }
}

/* (Re)builds the index for the entries there are, with room to grow. */
static void envv_reindex(struct envv *e)
{
    free(e->slots);
    e->nslots = 64;
    while (e->nslots < 2 * (e->n + 1))
        e->nslots *= 2;
    e->slots = xcalloc(e->nslots, sizeof *e->slots);
    for (size_t i = 0; i < e->n; i++) {
        size_t *s = envv_slot(e, e->v[i], name_len(e->v[i]));
        if (*s == 0) *s = i + 1; /* a duplicate name in a given environ: the first wins */
    }
}

static void envv_put(struct envv *e, const char *name, const char *value)
{
    if (!e->slots || 2 * (e->n + 1) > e->nslots) envv_reindex(e);
    struct buf kv;
    buf_init(&kv);
    buf_printf(&kv, "%s=%s", name, value);
    buf_putc(&kv, '\0');
    size_t *s = envv_slot(e, name, strlen(name));
    if (*s) {
        free(e->v[*s - 1]);
        e->v[*s - 1] = buf_steal(&kv);
        return;
    }
    if (e->n + 1 >= e->cap) {
        e->cap = e->cap ? e->cap * 2 : 32;
        e->v = xrealloc(e->v, e->cap * sizeof *e->v);
    }
    e->v[e->n++] = buf_steal(&kv);
    e->v[e->n] = NULL;
    *s = e->n;
}

/* Keeps only the entries keep() accepts, in order (one pass), and re-indexes. */
static void envv_filter(struct envv *e, bool (*keep)(const char *kv, void *arg), void *arg)
{
    size_t k = 0;
    for (size_t i = 0; i < e->n; i++) {
        if (keep(e->v[i], arg))
            e->v[k++] = e->v[i];
        else
            free(e->v[i]);
    }
    e->n = k;
    e->v[k] = NULL;
    envv_reindex(e);
}

/* envv_filter's test for includeOnly: the name matches one of the patterns. */
static bool included(const char *kv, void *patterns)
{
    char name[1024];
    size_t nl = name_len(kv);
    if (nl >= sizeof name) nl = sizeof name - 1;
    memcpy(name, kv, nl);
    name[nl] = '\0';
    return matches_any_json(patterns, name);
}

char **env_build(char *const *server_env, const struct env_policy *pol, json_t *env)
{
    struct envv e = {0};
    e.cap = 32;
    e.v = xcalloc(e.cap, sizeof *e.v);
    char name[1024];
    if (pol && pol->inherit != ENV_INHERIT_NONE) {
        for (char *const *s = server_env; s && *s; s++) {
            size_t nl = name_len(*s);
            if (nl == 0 || nl >= sizeof name || !(*s)[nl]) continue;
            memcpy(name, *s, nl);
            name[nl] = '\0';
            if (pol->inherit == ENV_INHERIT_CORE && !is_core(name)) continue;
            if (!pol->ignore_default_excludes && matches_any(default_excludes, name)) continue;
            if (matches_any_json(pol->exclude, name)) continue;
            envv_put(&e, name, *s + nl + 1);
        }
    }
    const char *k;
    json_t *v;
    if (pol) {
        json_object_foreach(pol->set, k, v) envv_put(&e, k, json_string_value(v));
        if (json_array_size(pol->include_only)) envv_filter(&e, included, pol->include_only);
    }
    json_object_foreach(env, k, v) envv_put(&e, k, json_string_value(v));
    free(e.slots);
    return e.v;
}

void env_free(char **envp)
{
    if (!envp) return;
    for (char **s = envp; *s; s++)
        free(*s);
    free(envp);
}

const char *env_get(char *const *envp, const char *name)
{
    size_t nl = strlen(name);
    for (char *const *s = envp; s && *s; s++)
        if (name_len(*s) == nl && memcmp(*s, name, nl) == 0) return *s + nl + 1;
    return NULL;
}

static bool lower_hex(const char *s, size_t n, bool *all_zero)
{
    *all_zero = strspn(s, "0") >= n;
    return hex_is_lower(s, n);
}

bool env_trace_parent_valid(const char *s)
{
    /* "00-<32 hex>-<16 hex>-<2 hex>" (55 characters for version 00). */
    bool zero;
    if (strlen(s) != 55 || s[2] != '-' || s[35] != '-' || s[52] != '-') return false;
    if (!lower_hex(s, 2, &zero) || strncmp(s, "ff", 2) == 0) return false;
    if (!lower_hex(s + 3, 32, &zero) || zero) return false;
    if (!lower_hex(s + 36, 16, &zero) || zero) return false;
    return lower_hex(s + 53, 2, &zero);
}

/* tracestate: at most 512 visible ASCII characters, no control bytes. */
static bool trace_state_valid(const char *s)
{
    size_t n = strlen(s);
    if (n == 0 || n > 512) return false;
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)s[i] < 0x20 || (unsigned char)s[i] > 0x7e) return false;
    return true;
}

char **env_add_trace(char **envp, json_t *trace)
{
    const char *tp = json_string_value(json_object_get(trace, "traceparent"));
    if (!tp || !env_trace_parent_valid(tp) || env_get(envp, "TRACEPARENT")) return envp;
    const char *ts = json_string_value(json_object_get(trace, "tracestate"));
    struct envv e = {.v = envp};
    while (e.v[e.n])
        e.n++;
    e.cap = e.n + 1;
    envv_put(&e, "TRACEPARENT", tp);
    if (ts && trace_state_valid(ts) && !env_get(e.v, "TRACESTATE")) envv_put(&e, "TRACESTATE", ts);
    free(e.slots);
    return e.v;
}
