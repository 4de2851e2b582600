/* env_config: `environmentConfig/read`, the executor's own codex configuration.
 *
 * codex asks an environment that advertises `environmentConfigRead` for the parts of
 * its configuration that belong to the machine (in a normal turn: `mcp_servers`, so
 * MCP servers configured on the executor run there). The reference answers with its
 * user layer, `$CODEX_HOME/config.toml` (default `~/.codex/config.toml`), filtered
 * to the requested key paths and written back as TOML (PROTOCOL.md §8.3):
 *   {"userHomeDir","codexHomeDir","hostname",
 *    "config":{"layers":[{"source":"user (<file>)","baseDir":<uri>,"toml":...}],
 *              "cloudInsertionIndex":0},
 *    "requirements":{"layers":[],"cloudInsertionIndex":0}}
 *
 * There is no TOML library in Debian for C, and none is needed: the filter works on
 * the file's own lines. It keeps each top-level `key = value` and each `[table]`
 * entry whose dotted path starts with a requested path (or is a prefix of one,
 * for a requested leaf inside a table), keeps values exactly as written (multi-line
 * arrays and strings included), and writes the kept root keys, then each kept table
 * under its header, separated by blank lines. Array-of-tables (`[[x]]`) sections are
 * kept or dropped whole. The file is read on the thread pool. */
#include "session/env_config.h"

#include <ctype.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/host_env.h"
#include "proto/uri.h"
#include "rpc/dispatch.h"
#include "rpc/params.h"
#include "util/buf.h"
#include "util/mem.h"

#define CONFIG_MAX (1u << 20) /* a larger config.toml is not read */

/* Splits a dotted key ("a.b", "a . \"b.c\"") into parts; returns the count. */
static size_t split_key(const char *s, size_t n, char parts[][128], size_t max)
{
    size_t k = 0, i = 0;
    while (i < n && k < max) {
        while (i < n && (s[i] == ' ' || s[i] == '\t'))
            i++;
        size_t len = 0;
        if (i < n && (s[i] == '"' || s[i] == '\'')) {
            char q = s[i++];
            while (i < n && s[i] != q && len + 1 < 128)
                parts[k][len++] = s[i++];
            if (i < n) i++;
        } else {
            while (i < n && s[i] != '.' && s[i] != ' ' && s[i] != '\t' && len + 1 < 128)
                parts[k][len++] = s[i++];
        }
        parts[k][len] = '\0';
        k++;
        while (i < n && (s[i] == ' ' || s[i] == '\t'))
            i++;
        if (i < n && s[i] == '.')
            i++;
        else
            break;
    }
    return k;
}

/* Whether path a (na parts) and requested path b (nb) overlap: one is a prefix of
 * the other. */
static bool overlaps(char a[][128], size_t na, json_t *b)
{
    size_t nb = json_array_size(b);
    size_t m = na < nb ? na : nb;
    for (size_t i = 0; i < m; i++)
        if (strcmp(a[i], json_string_value(json_array_get(b, i))) != 0) return false;
    return true;
}

static bool wanted(char path[][128], size_t n, json_t *paths)
{
    size_t i;
    json_t *p;
    json_array_foreach(paths, i, p) if (overlaps(path, n, p)) return true;
    return false;
}

/* How a value continues onto the next lines: open brackets/braces outside strings,
 * or an open multi-line string. */
struct scan {
    int depth;
    char ml; /* '"' or '\'' while inside a triple-quoted string */
};

static void scan_value(struct scan *sc, const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (sc->ml) {
            if (i + 2 < n + 0 && s[i] == sc->ml && s[i + 1] == sc->ml && s[i + 2] == sc->ml) {
                sc->ml = 0;
                i += 2;
            }
            continue;
        }
        char c = s[i];
        if (c == '#') return;
        if ((c == '"' || c == '\'') && i + 2 < n && s[i + 1] == c && s[i + 2] == c) {
            sc->ml = c;
            i += 2;
            continue;
        }
        if (c == '"' || c == '\'') {
            for (i++; i < n && s[i] != c; i++)
                if (c == '"' && s[i] == '\\') i++;
            continue;
        }
        if (c == '[' || c == '{') sc->depth++;
        if (c == ']' || c == '}') sc->depth--;
    }
}

/* Length of a one-line entry without its trailing comment and blanks. */
static size_t without_comment(const char *s, size_t n)
{
    size_t i = 0;
    for (; i < n; i++) {
        char c = s[i];
        if (c == '#') break;
        if (c == '"' || c == '\'') {
            for (i++; i < n && s[i] != c; i++)
                if (c == '"' && s[i] == '\\') i++;
        }
    }
    if (i > n) i = n;
    while (i > 0 && (s[i - 1] == ' ' || s[i - 1] == '\t'))
        i--;
    return i;
}

char *env_config_filter(const char *text, size_t len, json_t *paths)
{
    struct buf root, tables, cur;
    buf_init(&root);
    buf_init(&tables);
    buf_init(&cur);
    char table[16][128];
    size_t ntable = 0;
    bool array_table = false, cur_any = false;
    char header[512] = "";
    const char *p = text, *end = text + len;
    struct scan sc = {0};
    bool keep_cont = false; /* a kept entry whose value continues */
    while (p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        size_t n = nl ? (size_t)(nl - p) : (size_t)(end - p);
        const char *line = p;
        p = nl ? nl + 1 : end;
        if (sc.depth > 0 || sc.ml) {
            if (keep_cont) {
                buf_append(ntable ? &cur : &root, line, n);
                buf_putc(ntable ? &cur : &root, '\n');
            }
            scan_value(&sc, line, n);
            continue;
        }
        size_t a = 0;
        while (a < n && (line[a] == ' ' || line[a] == '\t'))
            a++;
        size_t b = n;
        while (b > a && (line[b - 1] == ' ' || line[b - 1] == '\t' || line[b - 1] == '\r'))
            b--;
        if (a == b || line[a] == '#') continue;
        if (line[a] == '[') {
            /* A new table: flush the previous one if anything in it was kept. */
            if (cur_any) {
                if (tables.len) buf_putc(&tables, '\n');
                buf_printf(&tables, "%s\n", header);
                buf_append(&tables, cur.data, cur.len);
            }
            buf_reset(&cur);
            cur_any = false;
            array_table = b - a >= 2 && line[a + 1] == '[';
            size_t hs = a + (array_table ? 2 : 1), he = b;
            while (he > hs && line[he - 1] == ']')
                he--;
            ntable = split_key(line + hs, he - hs, table, 16);
            snprintf(header, sizeof header, "%.*s", (int)(b - a), line + a);
            continue;
        }
        const char *eq = memchr(line + a, '=', b - a);
        if (!eq) continue;
        char key[16][128], full[32][128];
        size_t nk = split_key(line + a, (size_t)(eq - line) - a, key, 16);
        size_t nf = 0;
        for (size_t i = 0; i < ntable && nf < 32; i++)
            memcpy(full[nf++], table[i], 128);
        for (size_t i = 0; i < nk && nf < 32; i++)
            memcpy(full[nf++], key[i], 128);
        bool keep = array_table ? wanted(full, ntable, paths) : wanted(full, nf, paths);
        struct buf *dst = ntable ? &cur : &root;
        if (keep) {
            buf_append(dst, line + a, without_comment(line + a, b - a));
            buf_putc(dst, '\n');
            if (ntable) cur_any = true;
        }
        keep_cont = keep;
        scan_value(&sc, eq + 1, (size_t)(line + b - eq - 1));
    }
    if (cur_any) {
        if (tables.len) buf_putc(&tables, '\n');
        buf_printf(&tables, "%s\n", header);
        buf_append(&tables, cur.data, cur.len);
    }
    struct buf out;
    buf_init(&out);
    buf_append(&out, root.data, root.len);
    if (root.len && tables.len) buf_putc(&out, '\n');
    buf_append(&out, tables.data, tables.len);
    buf_putc(&out, '\0');
    buf_free(&root);
    buf_free(&tables);
    buf_free(&cur);
    return buf_steal(&out);
}

/* ---- the method ------------------------------------------------------------------ */

struct cfg_work {
    uv_work_t w;
    struct rpc_req *req;
    json_t *paths;    /* configPaths (borrowed from req->params) */
    char *codex_home; /* host_env_codex_home's, found on the worker (realpath) */
    char *file;       /* codex_home/config.toml */
    char *toml;       /* filtered, or NULL when the file is absent/empty/unread */
    char *err;        /* why CODEX_HOME cannot be used, or NULL */
};

static void cfg_run(uv_work_t *w)
{
    struct cfg_work *cw = w->data;
    char *why;
    cw->codex_home = host_env_codex_home(&why);
    if (!cw->codex_home) {
        struct buf b;
        buf_init(&b);
        buf_printf(&b, "failed to find Codex home: %s", why);
        buf_putc(&b, '\0');
        cw->err = buf_steal(&b);
        free(why);
        return;
    }
    struct buf b;
    buf_init(&b);
    buf_printf(&b, "%s/config.toml", cw->codex_home);
    buf_putc(&b, '\0');
    cw->file = buf_steal(&b);
    FILE *f = fopen(cw->file, "rb");
    if (!f) return;
    char *text = xmalloc(CONFIG_MAX);
    size_t n = fread(text, 1, CONFIG_MAX, f);
    bool whole = feof(f);
    fclose(f);
    if (whole) {
        char *t = env_config_filter(text, n, cw->paths);
        if (*t)
            cw->toml = t;
        else
            free(t);
    }
    free(text);
}

static json_t *uri_or_null(const char *path)
{
    char *u = uri_from_path(path, strlen(path));
    json_t *j = json_string(u);
    free(u);
    return j ? j : json_null();
}

static void cfg_free(struct cfg_work *cw)
{
    free(cw->codex_home);
    free(cw->file);
    free(cw->toml);
    free(cw->err);
    free(cw);
}

static void cfg_done(uv_work_t *w, int status)
{
    struct cfg_work *cw = w->data;
    if (cw->err) {
        rpc_reply_error(cw->req, RPC_INTERNAL_ERROR, "%s", cw->err);
        cfg_free(cw);
        return;
    }
    char home_buf[PATH_MAX];
    const char *home = host_env_home(home_buf, sizeof home_buf);
    char host[256] = "";
    gethostname(host, sizeof host - 1);
    json_t *res = json_object();
    if (home) json_object_set_new(res, "userHomeDir", uri_or_null(home));
    json_object_set_new(res, "codexHomeDir", uri_or_null(cw->codex_home));
    json_object_set_new(res, "hostname", json_string(host));
    json_t *layers = json_array();
    if (cw->toml) {
        char src[4200];
        snprintf(src, sizeof src, "user (%s)", cw->file);
        json_t *layer = json_pack("{s:s, s:o, s:s}", "source", src, "baseDir",
                                  uri_or_null(cw->codex_home), "toml", cw->toml);
        if (layer) json_array_append_new(layers, layer);
    }
    json_object_set_new(res, "config",
                        json_pack("{s:o, s:i}", "layers", layers, "cloudInsertionIndex", 0));
    /* We read no managed requirements (/etc/codex/requirements.toml is codex's own). */
    json_object_set_new(res, "requirements",
                        json_pack("{s:[], s:i}", "layers", "cloudInsertionIndex", 0));
    rpc_reply_json(cw->req, res);
    cfg_free(cw);
}

static bool valid_paths(struct pdec *d, json_t *paths)
{
    size_t i, j;
    json_t *p, *k;
    json_array_foreach(paths, i, p)
    {
        if (!json_is_array(p)) {
            char what[128];
            pdec_describe(p, what, sizeof what);
            pdec_fail(d, "invalid type: %s, expected a sequence", what);
            return false;
        }
        json_array_foreach(p, j, k) if (!json_is_string(k))
        {
            char what[128];
            pdec_describe(k, what, sizeof what);
            pdec_fail(d, "invalid type: %s, expected a string", what);
            return false;
        }
    }
    return true;
}

static void handle_config_read(struct rpc_req *req)
{
    struct pdec d;
    pdec_begin(&d, req->params, "EnvironmentConfigReadParams");
    size_t clen = 0;
    const char *cwd = pdec_string_len(&d, "cwd", PDEC_REQUIRED, &clen);
    json_t *config_paths = pdec_array(&d, "configPaths", PDEC_REQUIRED);
    json_t *req_paths = pdec_array(&d, "requirementsPaths", PDEC_REQUIRED);
    if (!d.failed && valid_paths(&d, config_paths)) valid_paths(&d, req_paths);
    if (rpc_reply_if_invalid(req, &d)) return;
    if (!rpc_check_ready(req)) return;
    char *cwd_path = NULL;
    size_t plen;
    struct uri_error ue;
    if (uri_to_path(cwd, clen, false, &cwd_path, &plen, &ue) < 0) {
        rpc_reply_error(req, rpc_uri_error_code(&ue), "%s", ue.message);
        return;
    }
    free(cwd_path);
    if (json_array_size(config_paths) == 0 && json_array_size(req_paths) == 0) {
        rpc_reply_error(req, RPC_INVALID_PARAMS,
                        "at least one config or requirements path is required");
        return;
    }
    struct cfg_work *cw = xcalloc(1, sizeof *cw);
    cw->req = req;
    cw->paths = config_paths;
    cw->w.data = cw;
    uv_queue_work(req->loop, &cw->w, cfg_run, cfg_done);
}

const struct rpc_method env_config_methods[] = {
    {"environmentConfig/read", "environment config", handle_config_read},
    {NULL, NULL, NULL},
};
