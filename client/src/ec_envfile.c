/* ec_envfile: environments.toml, the file codex reads from CODEX_HOME, turned into one
 * ec_client_options per environment.
 *
 * The schema is codex's (exec-server environment_toml.rs), with its checks and their
 * wording: top level `default`, `include_local` and `[[environments]]`; per
 * environment `id`, exactly one transport (`url` = ws:// or wss://, or `program` with
 * optional `args`, `env` and `cwd`: a local command spoken to over its stdin/stdout),
 * `connect_timeout_sec` (url only) and `initialize_timeout_sec`. Unknown fields are
 * errors, as codex's deny_unknown_fields makes them. Ours adds, for what libexecclient
 * can reach beyond codex's file:
 *   auth_bearer_token = "..."   with url: sent on the WebSocket upgrade; with remote:
 *                               to the registry only (as exec-client --token)
 *   remote = "https://..."      an environment registry (remote mode, REMOTE.md) and
 *   environment_id = "..."      the environment registered there: a third transport
 *   ca_file = "PATH"            wss:// / https:// trust (relative: to the file's dir)
 * so a file that uses them is ours only (codex would refuse the unknown fields).
 *
 * Timeouts map onto the client's single connect deadline: connect (default 10 s) plus
 * initialize (default 10 s) for url and remote, initialize only for a program. */
#include "ec_internal.h"
#include "ec_toml.h"

#include "util/mem.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAX_ENVIRONMENT_ID_LEN 64
#define DEFAULT_CONNECT_MS 10000
#define DEFAULT_INITIALIZE_MS 10000
#define DEFAULT_RECONNECT_MS 30000

struct ec_env_entry {
    char *id;
    ec_client_options o;
    /* what o points into (owned) */
    char *url, *token, *remote, *environment_id, *ca_file, *cwd;
    char **argv, **env; /* NULL-terminated */
};

struct ec_env_file {
    struct ec_env_entry *e;
    size_t n;
    char *default_id; /* NULL: no default environment */
    bool include_local;
};

static void entry_clear(struct ec_env_entry *e)
{
    free(e->id);
    free(e->url);
    if (e->token) {
        memset(e->token, 0, strlen(e->token));
        free(e->token);
    }
    free(e->remote);
    free(e->environment_id);
    free(e->ca_file);
    free(e->cwd);
    ec_strv_free(e->argv);
    ec_strv_free(e->env);
}

void ec_env_file_free(ec_env_file *f)
{
    if (!f) return;
    for (size_t i = 0; i < f->n; i++)
        entry_clear(&f->e[i]);
    free(f->e);
    free(f->default_id);
    free(f);
}

size_t ec_env_file_count(const ec_env_file *f)
{
    return f ? f->n : 0;
}

const char *ec_env_file_id(const ec_env_file *f, size_t i)
{
    return f && i < f->n ? f->e[i].id : NULL;
}

const ec_client_options *ec_env_file_options(const ec_env_file *f, size_t i)
{
    return f && i < f->n ? &f->e[i].o : NULL;
}

const ec_client_options *ec_env_file_find(const ec_env_file *f, const char *id)
{
    for (size_t i = 0; f && id && i < f->n; i++)
        if (strcmp(f->e[i].id, id) == 0) return &f->e[i].o;
    return NULL;
}

const char *ec_env_file_default(const ec_env_file *f)
{
    return f ? f->default_id : NULL;
}

bool ec_env_file_include_local(const ec_env_file *f)
{
    return f && f->include_local;
}

/* ---- checks -------------------------------------------------------------------------- */

/* Rust's str::trim for ASCII white space (what the values in practice carry). */
static char *trimmed(const char *s)
{
    while (*s == ' ' || *s == '\t' || *s == '\n' || *s == '\r' || *s == '\f' || *s == '\v')
        s++;
    size_t n = strlen(s);
    while (n && (s[n - 1] == ' ' || s[n - 1] == '\t' || s[n - 1] == '\n' || s[n - 1] == '\r' ||
                 s[n - 1] == '\f' || s[n - 1] == '\v'))
        n--;
    return xstrndup(s, n);
}

static int check_id(const char *id, ec_error *err)
{
    char *t = trimmed(id);
    bool empty = !*t, padded = strcmp(t, id) != 0;
    free(t);
    if (empty) return ec_fail(err, EC_ERR_USAGE, 0, "environment id cannot be empty");
    if (padded)
        return ec_fail(err, EC_ERR_USAGE, 0,
                       "environment id `%s` must not contain surrounding whitespace", id);
    if (strcmp(id, "local") == 0 || strcasecmp(id, "none") == 0)
        return ec_fail(err, EC_ERR_USAGE, 0, "environment id `%s` is reserved", id);
    if (strlen(id) > MAX_ENVIRONMENT_ID_LEN)
        return ec_fail(err, EC_ERR_USAGE, 0,
                       "environment id `%s` cannot be longer than %d characters", id,
                       MAX_ENVIRONMENT_ID_LEN);
    for (const char *c = id; *c; c++) {
        bool ok = (*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') ||
                  (*c >= '0' && *c <= '9') || *c == '-' || *c == '_';
        if (!ok)
            return ec_fail(err, EC_ERR_USAGE, 0,
                           "environment id `%s` must contain only ASCII letters, numbers, "
                           "'-' or '_'",
                           id);
    }
    return 0;
}

static const char *type_name(const json_t *v)
{
    switch (json_typeof(v)) {
    case JSON_OBJECT: return "a table";
    case JSON_ARRAY: return "an array";
    case JSON_STRING: return "a string";
    case JSON_INTEGER: return "an integer";
    case JSON_REAL: return "a float";
    case JSON_TRUE:
    case JSON_FALSE: return "a boolean";
    default: return "null";
    }
}

/* A string field without NUL (a C string); *out borrowed from v. */
static int get_str(const json_t *v, const char *where, const char *field, const char **out,
                   ec_error *err)
{
    *out = NULL; /* defined on every path, the error ones too */
    if (!json_is_string(v))
        return ec_fail(err, EC_ERR_USAGE, 0, "%s`%s` must be a string, not %s", where, field,
                       type_name(v));
    if (strlen(json_string_value(v)) != json_string_length(v))
        return ec_fail(err, EC_ERR_USAGE, 0, "%s`%s` must not contain U+0000", where, field);
    *out = json_string_value(v);
    return 0;
}

/* A number of seconds (integer or float) -> ms, as Duration::try_from_secs_f64. */
static int get_secs(const json_t *v, const char *where, const char *field, int *ms, ec_error *err)
{
    if (!json_is_number(v))
        return ec_fail(err, EC_ERR_USAGE, 0, "%s`%s` must be a number of seconds, not %s", where,
                       field, type_name(v));
    double s = json_number_value(v);
    if (!(s >= 0) || !isfinite(s))
        return ec_fail(err, EC_ERR_USAGE, 0, "%s`%s` must be a non-negative number of seconds",
                       where, field);
    double m = s * 1000.0;
    if (m >= 0x7fffffff) {
        *ms = 0x7fffffff;
    } else {
        *ms = (int)m;
        if (*ms < m) (*ms)++; /* rounded up: a partial millisecond still counts */
    }
    return 0;
}

static char *join_dir(const char *dir, const char *rel)
{
    size_t n = strlen(dir) + strlen(rel) + 2;
    char *p = xmalloc(n);
    snprintf(p, n, "%s%s%s", dir, dir[0] && dir[strlen(dir) - 1] == '/' ? "" : "/", rel);
    return p;
}

/* A path: absolute as is, relative to config_dir (or an error without one). */
static int get_path(const json_t *v, const char *where, const char *field, const char *config_dir,
                    char **out, ec_error *err)
{
    const char *s;
    int rc = get_str(v, where, field, &s, err);
    if (rc) return rc;
    if (s[0] == '/') {
        *out = xstrdup(s);
        return 0;
    }
    if (!config_dir || !*s)
        return ec_fail(err, EC_ERR_USAGE, 0, "%s%s must be absolute", where, field);
    *out = join_dir(config_dir, s);
    return 0;
}

static const char *const env_fields[] = {"id",
                                         "url",
                                         "program",
                                         "args",
                                         "env",
                                         "cwd",
                                         "connect_timeout_sec",
                                         "initialize_timeout_sec",
                                         "auth_bearer_token",
                                         "remote",
                                         "environment_id",
                                         "ca_file",
                                         NULL};

static int unknown_field(const char *where, const char *key, const char *const *known,
                         ec_error *err)
{
    char list[400];
    size_t o = 0;
    list[0] = 0;
    for (size_t i = 0; known[i] && o < sizeof list; i++) {
        int w = snprintf(list + o, sizeof list - o, "%s`%s`", i ? ", " : "", known[i]);
        if (w < 0) break;
        o += (size_t)w;
    }
    return ec_fail(err, EC_ERR_USAGE, 0, "%sunknown field `%s`, expected one of %s", where, key,
                   list);
}

static bool known(const char *key, const char *const *list)
{
    for (size_t i = 0; list[i]; i++)
        if (strcmp(key, list[i]) == 0) return true;
    return false;
}

/* A ws:// or wss:// entry's url, trimmed and parsed as the client will connect. */
static int parse_url(const json_t *url, const char *where, struct ec_env_entry *e, ec_error *err)
{
    const char *s;
    int rc = get_str(url, where, "url", &s, err);
    if (rc) return rc;
    e->url = trimmed(s);
    if (!*e->url) return ec_fail(err, EC_ERR_USAGE, 0, "environment url cannot be empty");
    if (strncmp(e->url, "ws://", 5) != 0 && strncmp(e->url, "wss://", 6) != 0)
        return ec_fail(err, EC_ERR_USAGE, 0, "environment url `%s` must use ws:// or wss://",
                       e->url);
    char *h = NULL, *p = NULL, *path = NULL;
    bool tls;
    ec_error ue = {0};
    rc = ec_url_parse(e->url, &h, &p, &path, &tls, &ue);
    free(h);
    free(p);
    free(path);
    if (rc)
        return ec_fail(err, EC_ERR_USAGE, 0, "environment url `%s` is invalid: %s", e->url,
                       ue.message);
    return 0;
}

/* A program entry (of table t): program and args into e->argv, env into e->env
 * ("K=V"), cwd relative to the file's directory. */
static int parse_program(const json_t *t, const char *where, const char *id, const char *config_dir,
                         struct ec_env_entry *e, ec_error *err)
{
    json_t *args = json_object_get(t, "args"), *env = json_object_get(t, "env"),
           *cwd = json_object_get(t, "cwd");
    const char *s, *key;
    json_t *v;
    int rc = get_str(json_object_get(t, "program"), where, "program", &s, err);
    if (rc) return rc;
    char *prog = trimmed(s);
    if (!*prog) {
        free(prog);
        return ec_fail(err, EC_ERR_USAGE, 0, "environment `%s` program cannot be empty", id);
    }
    if (args && !json_is_array(args)) {
        free(prog);
        return ec_fail(err, EC_ERR_USAGE, 0, "%s`args` must be an array of strings, not %s", where,
                       type_name(args));
    }
    size_t nargs = json_array_size(args);
    e->argv = xcalloc(nargs + 2, sizeof *e->argv);
    e->argv[0] = prog;
    for (size_t i = 0; i < nargs; i++) {
        if ((rc = get_str(json_array_get(args, i), where, "args[]", &s, err))) return rc;
        e->argv[i + 1] = xstrdup(s);
    }
    if (env && !json_is_object(env))
        return ec_fail(err, EC_ERR_USAGE, 0, "%s`env` must be a table of strings, not %s", where,
                       type_name(env));
    e->env = xcalloc(json_object_size(env) + 1, sizeof *e->env);
    size_t k = 0;
    json_object_foreach(env, key, v)
    {
        if (!*key || strchr(key, '='))
            return ec_fail(err, EC_ERR_USAGE, 0, "%senv: `%s` is not a variable name", where, key);
        if ((rc = get_str(v, where, "env value", &s, err))) return rc;
        size_t n = strlen(key) + strlen(s) + 2;
        e->env[k] = xmalloc(n);
        snprintf(e->env[k++], n, "%s=%s", key, s);
    }
    if (cwd && (rc = get_path(cwd, where, "cwd", config_dir, &e->cwd, err))) return rc;
    return 0;
}

static int parse_entry(const json_t *t, size_t index, const char *config_dir,
                       struct ec_env_entry *e, ec_error *err)
{
    char where[128];
    snprintf(where, sizeof where, "environments[%zu]: ", index);
    if (!json_is_object(t))
        return ec_fail(err, EC_ERR_USAGE, 0, "%smust be a table, not %s", where, type_name(t));
    const char *key;
    json_t *v;
    json_object_foreach((json_t *)t, key, v)
    {
        if (!known(key, env_fields)) return unknown_field(where, key, env_fields, err);
    }
    const char *id, *s;
    json_t *jid = json_object_get(t, "id");
    if (!jid) return ec_fail(err, EC_ERR_USAGE, 0, "%smissing field `id`", where);
    int rc = get_str(jid, where, "id", &id, err);
    if (rc == 0) rc = check_id(id, err);
    if (rc) return rc;
    e->id = xstrdup(id);
    snprintf(where, sizeof where, "environment `%s`: ", id);

    json_t *url = json_object_get(t, "url"), *program = json_object_get(t, "program"),
           *remote = json_object_get(t, "remote"), *args = json_object_get(t, "args"),
           *env = json_object_get(t, "env"), *cwd = json_object_get(t, "cwd"),
           *cto = json_object_get(t, "connect_timeout_sec"),
           *ito = json_object_get(t, "initialize_timeout_sec"),
           *token = json_object_get(t, "auth_bearer_token"),
           *envid = json_object_get(t, "environment_id"), *ca = json_object_get(t, "ca_file");
    if (!program && (args || env || cwd))
        return ec_fail(err, EC_ERR_USAGE, 0, "environment `%s` args, env, and cwd require program",
                       id);
    if (!url && !remote && cto)
        return ec_fail(err, EC_ERR_USAGE, 0,
                       "environment `%s` connect_timeout_sec requires url (or remote)", id);
    if ((url != NULL) + (program != NULL) + (remote != NULL) != 1)
        return ec_fail(err, EC_ERR_USAGE, 0,
                       "environment `%s` must set exactly one of url, program or remote", id);
    if (!url && !remote && (token || ca))
        return ec_fail(err, EC_ERR_USAGE, 0,
                       "environment `%s` auth_bearer_token and ca_file require url or remote", id);
    if (!remote != !envid)
        return ec_fail(err, EC_ERR_USAGE, 0,
                       "environment `%s` remote and environment_id go together", id);
    int connect_ms = DEFAULT_CONNECT_MS, init_ms = DEFAULT_INITIALIZE_MS;
    if (cto && (rc = get_secs(cto, where, "connect_timeout_sec", &connect_ms, err))) return rc;
    if (ito && (rc = get_secs(ito, where, "initialize_timeout_sec", &init_ms, err))) return rc;
    if (token) {
        if ((rc = get_str(token, where, "auth_bearer_token", &s, err))) return rc;
        e->token = xstrdup(s);
    }
    if (ca && (rc = get_path(ca, where, "ca_file", config_dir, &e->ca_file, err))) return rc;
    if (url) {
        if ((rc = parse_url(url, where, e, err))) return rc;
    } else if (remote) {
        if ((rc = get_str(remote, where, "remote", &s, err))) return rc;
        e->remote = trimmed(s);
        if (strncmp(e->remote, "http://", 7) != 0 && strncmp(e->remote, "https://", 8) != 0)
            return ec_fail(err, EC_ERR_USAGE, 0,
                           "environment `%s` remote `%s` must be an http:// or https:// URL", id,
                           e->remote);
        if ((rc = get_str(envid, where, "environment_id", &s, err))) return rc;
        e->environment_id = trimmed(s);
        if (!*e->environment_id)
            return ec_fail(err, EC_ERR_USAGE, 0, "environment `%s` environment_id cannot be empty",
                           id);
    } else {
        if ((rc = parse_program(t, where, id, config_dir, e, err))) return rc;
    }
    e->o.url = e->url;
    e->o.remote_url = e->remote;
    e->o.environment_id = e->environment_id;
    e->o.bearer_token = e->token;
    e->o.ca_file = e->ca_file;
    e->o.program_argv = (const char *const *)e->argv;
    e->o.program_env = (const char *const *)e->env;
    e->o.program_cwd = e->cwd;
    e->o.connect_timeout_ms = program ? init_ms : connect_ms + init_ms;
    if (e->o.connect_timeout_ms <= 0) e->o.connect_timeout_ms = 1; /* 0 would mean "default" */
    /* A stdio server has no resume: its session ends with the program. */
    e->o.reconnect_timeout_ms = program ? 0 : DEFAULT_RECONNECT_MS;
    return 0;
}

static const char *const top_fields[] = {"default", "include_local", "environments", NULL};

int ec_env_file_parse(const char *text, size_t len, const char *config_dir, ec_env_file **out,
                      ec_error *err)
{
    *out = NULL;
    char terr[300];
    json_t *doc;
    if (ec_toml_parse(text, len, &doc, terr, sizeof terr) != 0)
        return ec_fail(err, EC_ERR_USAGE, 0, "%s", terr);
    ec_env_file *f = xcalloc(1, sizeof *f);
    int rc = 0;
    const char *key;
    json_t *v;
    json_object_foreach(doc, key, v)
    {
        if (!known(key, top_fields)) {
            rc = unknown_field("", key, top_fields, err);
            goto done;
        }
    }
    json_t *il = json_object_get(doc, "include_local");
    if (il && !json_is_boolean(il)) {
        rc = ec_fail(err, EC_ERR_USAGE, 0, "`include_local` must be a boolean, not %s",
                     type_name(il));
        goto done;
    }
    f->include_local = !il || json_is_true(il);
    json_t *envs = json_object_get(doc, "environments");
    if (envs && !json_is_array(envs)) {
        rc = ec_fail(err, EC_ERR_USAGE, 0,
                     "`environments` must be an array of tables ([[environments]]), not %s",
                     type_name(envs));
        goto done;
    }
    f->e = xcalloc(json_array_size(envs) + 1, sizeof *f->e);
    for (size_t i = 0; i < json_array_size(envs); i++) {
        rc = parse_entry(json_array_get(envs, i), i, config_dir, &f->e[f->n], err);
        f->n++; /* cleared on failure too */
        if (rc) goto done;
        for (size_t j = 0; j + 1 < f->n; j++) {
            if (strcmp(f->e[j].id, f->e[f->n - 1].id) == 0) {
                rc = ec_fail(err, EC_ERR_USAGE, 0, "environment id `%s` is duplicated", f->e[j].id);
                goto done;
            }
        }
    }
    json_t *def = json_object_get(doc, "default");
    if (!def) {
        f->default_id = f->include_local ? xstrdup("local") : NULL;
    } else {
        const char *d;
        if ((rc = get_str(def, "", "default", &d, err))) goto done;
        char *t = trimmed(d);
        if (!*t) {
            free(t);
            rc = ec_fail(err, EC_ERR_USAGE, 0, "default environment id cannot be empty");
            goto done;
        }
        bool found = (f->include_local && strcmp(t, "local") == 0) || strcasecmp(t, "none") == 0;
        for (size_t i = 0; i < f->n && !found; i++)
            found = strcmp(f->e[i].id, t) == 0;
        if (!found) {
            rc = ec_fail(err, EC_ERR_USAGE, 0, "default environment `%s` is not configured", t);
            free(t);
            goto done;
        }
        if (strcasecmp(t, "none") == 0) {
            free(t);
            t = NULL;
        }
        f->default_id = t;
    }
done:
    json_decref(doc);
    if (rc) {
        ec_env_file_free(f);
        return rc;
    }
    *out = f;
    return 0;
}

/* The file codex reads: $CODEX_HOME/environments.toml, CODEX_HOME defaulting to
 * ~/.codex. Caller frees. */
static char *default_path(void)
{
    const char *home = getenv("CODEX_HOME");
    if (home && *home) return join_dir(home, "environments.toml");
    home = getenv("HOME");
    if (!home || !*home) return NULL;
    return join_dir(home, ".codex/environments.toml");
}

int ec_env_file_load(const char *path, ec_env_file **out, ec_error *err)
{
    *out = NULL;
    char *owned = path ? NULL : default_path();
    if (!path) path = owned;
    if (!path) return ec_fail(err, EC_ERR_USAGE, 0, "no environments file: HOME is not set");
    int rc = 0;
    char *text = NULL;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0) {
        rc = ec_fail(err, EC_ERR_USAGE, 0, "failed to read environment config `%s`: %s", path,
                     strerror(errno));
        goto out;
    }
    if (!S_ISREG(st.st_mode) || st.st_size > (off_t)EC_TOML_MAX_BYTES) {
        rc = ec_fail(err, EC_ERR_USAGE, 0, "failed to read environment config `%s`: %s", path,
                     S_ISREG(st.st_mode) ? "file too large" : "not a regular file");
        goto out;
    }
    size_t len = 0, cap = (size_t)st.st_size + 1;
    text = xmalloc(cap + 1);
    for (;;) {
        ssize_t r = read(fd, text + len, cap - len);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) {
            rc = ec_fail(err, EC_ERR_USAGE, 0, "failed to read environment config `%s`: %s", path,
                         strerror(errno));
            goto out;
        }
        if (r == 0) break;
        len += (size_t)r;
        if (len == cap) { /* the file grew: one byte over the limit is enough to refuse */
            if (cap > EC_TOML_MAX_BYTES) break;
            cap = EC_TOML_MAX_BYTES + 1;
            text = xrealloc(text, cap + 1);
        }
    }
    /* Relative paths in the file are taken from the file's directory (codex: from
     * CODEX_HOME), made absolute here so they do not depend on a later chdir. */
    char *dir = xstrdup(path);
    char *slash = strrchr(dir, '/');
    if (slash)
        slash == dir ? (void)(slash[1] = 0) : (void)(*slash = 0);
    else
        strcpy(dir, ".");
    char *abs = realpath(dir, NULL);
    if (abs) {
        free(dir);
        dir = abs;
    }
    ec_error pe = {0};
    rc = ec_env_file_parse(text, len, dir, out, &pe);
    free(dir);
    if (rc)
        rc = ec_fail(err, pe.kind, 0, "failed to parse environment config `%s`: %s", path,
                     pe.message);
out:
    if (fd >= 0) close(fd);
    free(text);
    free(owned);
    return rc;
}
