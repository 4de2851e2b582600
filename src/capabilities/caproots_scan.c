/* caproots_scan: the scan of one capability root for capabilityRoots/discoverV1 and
 * capabilities/discoverV2 (see caproots_scan.h). Per root, as the reference does
 * (checked against 0.169.0):
 *   - the root must be a directory (stat, symlinks followed);
 *   - one breadth-first walk (fs_walk: depth 6, 2000 directories, 20000 entries,
 *     directory symlinks followed); its errors and truncation become warnings;
 *   - every file named SKILL.md is a skill (sorted by URI), with its sibling
 *     agents/openai.yaml as metadata when present;
 *   - a manifest at <root>/.codex-plugin|.claude-plugin|.cursor-plugin/plugin.json
 *     (first found) makes the root a plugin: its mcpServers / apps declarations
 *     ("./relative" paths below the root; inline mcpServers objects need no file;
 *     .mcp.json by default) are read too;
 *   - namespaceManifests: the root's manifest, or else the nearest ancestor's, then
 *     every other plugin manifest found by the walk, one per plugin directory;
 *   - files are read whole if they are UTF-8 and at most 1 MiB, up to 16 MiB per root.
 * Blocking; it runs on a pool thread or inside a sandbox helper (as the fs operation
 * OP_DISCOVER), so it knows nothing of requests. */
#include "capabilities/caproots_scan.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fs/fs_util.h"
#include "fs/fs_walk.h"
#include "proto/uri.h"
#include "proto/utf8.h"
#include "util/mem.h"
#include "util/oserr.h"

/* Plugin manifest locations below a plugin root, in priority order. */
static const char *const manifest_dirs[] = {".codex-plugin", ".claude-plugin", ".cursor-plugin"};
#define N_MANIFEST_DIRS 3

/* ---- pure helpers ----------------------------------------------------------------- */

int caproots_declared_path(const char *decl, const char **rel)
{
    if (strncmp(decl, "./", 2) != 0) return 1;
    const char *r = decl + 2;
    if (!*r || *r == '/') return 2; /* empty, or an absolute path that join would take */
    for (const char *c = r; *c;) {
        size_t len = strcspn(c, "/\\");
        if (len == 2 && c[0] == '.' && c[1] == '.') return 2;
        c += len;
        if (*c) c++;
    }
    *rel = r;
    return 0;
}

/* ---- one root --------------------------------------------------------------------- */

struct scan {
    const char *canon; /* our encoding of the root's path */
    size_t canon_len;
    const char *spelled; /* the root URI as the caller spelled it, no trailing '/' */
    size_t spelled_len;
    size_t budget;       /* bytes of file text kept so far */
    struct buf warnings; /* JSON strings, comma separated */
    bool any_warning;
};

static void warn(struct scan *sc, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void warn(struct scan *sc, const char *fmt, ...)
{
    /* Two URIs of at most PATH_MAX bytes each, percent-encoded, fit. */
    static _Thread_local char text[32768];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(text, sizeof text, fmt, ap);
    va_end(ap);
    if (n < 0) return;
    if (sc->any_warning) buf_putc(&sc->warnings, ',');
    sc->any_warning = true;
    struct buf s;
    buf_init(&s);
    utf8_lossy(&s, text, strnlen(text, sizeof text));
    buf_put_json_str(&sc->warnings, s.data ? s.data : "", s.len);
    buf_free(&s);
}

static bool budget_fits(const struct scan *sc, size_t n)
{
    return n <= CAPROOTS_MAX_BUNDLE && sc->budget <= CAPROOTS_MAX_BUNDLE - n;
}

/* The URI of a file below the root, spelled with the caller's root URI so it joins
 * the way the reference's does (percent escapes, doubled slashes kept); malloc'd. */
static char *respell(const struct scan *sc, char *u)
{
    size_t n = strlen(u);
    if (!sc->canon || n < sc->canon_len || memcmp(u, sc->canon, sc->canon_len) != 0 ||
        (n > sc->canon_len && u[sc->canon_len] != '/' && sc->canon[sc->canon_len - 1] != '/'))
        return u;
    struct buf b;
    buf_init(&b);
    buf_append(&b, sc->spelled, sc->spelled_len);
    const char *rest = u + sc->canon_len;
    if (sc->canon[sc->canon_len - 1] == '/' && *rest) buf_putc(&b, '/');
    buf_puts(&b, rest);
    buf_putc(&b, '\0');
    free(u);
    return buf_steal(&b);
}

static char *scan_uri(const struct scan *sc, const char *path)
{
    return respell(sc, uri_from_path(path, strlen(path)));
}

/* A recognized file as read: path URI and UTF-8 contents (both malloc'd). */
struct text_file {
    char *uri;
    char *data;
    size_t len;
};

static void text_file_free(struct text_file *f)
{
    free(f->uri);
    free(f->data);
    f->uri = f->data = NULL;
}

static void put_text_file(struct buf *out, const struct text_file *f)
{
    if (!f->uri) {
        buf_puts(out, "null");
        return;
    }
    buf_puts(out, "{\"path\":");
    buf_put_json_str(out, f->uri, strlen(f->uri));
    buf_puts(out, ",\"contents\":");
    buf_put_json_str(out, f->data, f->len);
    buf_putc(out, '}');
}

/* Reads an optional capability file: a missing path or a non-file is silently
 * absent; anything else that keeps it out becomes a warning. Returns true with *f
 * filled when the file was read. */
static bool read_optional(struct scan *sc, const char *path, struct text_file *f)
{
    f->uri = f->data = NULL;
    char os[256];
    char *uri = scan_uri(sc, path);
    struct stat st;
    if (stat(path, &st) < 0) {
        if (errno != ENOENT) {
            oserr_format(errno, os, sizeof os);
            warn(sc, "failed to inspect capability file %s: %s", uri, os);
        }
        free(uri);
        return false;
    }
    if (!S_ISREG(st.st_mode)) {
        free(uri);
        return false;
    }
    size_t size = (size_t)st.st_size;
    if (size > CAPROOTS_MAX_FILE) {
        warn(sc, "capability file %s exceeds the %u-byte limit", uri, CAPROOTS_MAX_FILE);
        free(uri);
        return false;
    }
    if (!budget_fits(sc, size)) {
        warn(sc, "capability root bundle exceeds the %u-byte limit", CAPROOTS_MAX_BUNDLE);
        free(uri);
        return false;
    }
    /* Not blocking: the file may have been swapped for a FIFO since the stat (a
     * pool thread would wait for a writer); what is opened must still be a file. */
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd >= 0 && (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode))) {
        close(fd);
        free(uri);
        return false;
    }
    if (fd < 0) {
        oserr_format(errno, os, sizeof os);
        warn(sc, "failed to read capability file %s: %s", uri, os);
        free(uri);
        return false;
    }
    /* The file may grow between stat and read: read one byte past the limit to see. */
    char *data = xmalloc(CAPROOTS_MAX_FILE + 2);
    size_t got = 0;
    int err = 0;
    while (got < CAPROOTS_MAX_FILE + 1) {
        ssize_t r = read(fd, data + got, CAPROOTS_MAX_FILE + 1 - got);
        if (r < 0) {
            if (errno == EINTR) continue;
            err = errno;
            break;
        }
        if (r == 0) break;
        got += (size_t)r;
    }
    close(fd);
    bool ok = false;
    size_t bad_at, bad_len;
    if (err) {
        oserr_format(err, os, sizeof os);
        warn(sc, "failed to read capability file %s: %s", uri, os);
    } else if (got > CAPROOTS_MAX_FILE || !budget_fits(sc, got)) {
        warn(sc, "capability file %s exceeded its read limit", uri);
    } else if (!utf8_check(data, got, &bad_at, &bad_len)) {
        if (bad_len)
            warn(sc,
                 "capability file %s is not UTF-8: invalid utf-8 sequence of %zu bytes from "
                 "index %zu",
                 uri, bad_len, bad_at);
        else
            warn(sc,
                 "capability file %s is not UTF-8: incomplete utf-8 byte sequence from "
                 "index %zu",
                 uri, bad_at);
    } else {
        ok = true;
    }
    if (!ok) {
        free(data);
        free(uri);
        return false;
    }
    data[got] = '\0';
    sc->budget += got;
    f->uri = uri;
    f->data = data;
    f->len = got;
    return true;
}

/* The first plugin manifest of dir, in priority order. */
static bool read_first_manifest(struct scan *sc, const char *dir, struct text_file *f)
{
    for (int i = 0; i < N_MANIFEST_DIRS; i++) {
        char *m = fs_path_join(dir, manifest_dirs[i]);
        char *p = fs_path_join(m, "plugin.json");
        free(m);
        bool got = read_optional(sc, p, f);
        free(p);
        if (got) return true;
    }
    return false;
}

/* The parent of an absolute path ("/a/b" -> "/a", "/a" -> "/"), or NULL for "/". */
static char *parent_of(const char *p)
{
    const char *slash = strrchr(p, '/');
    if (!slash || strcmp(p, "/") == 0) return NULL;
    if (slash == p) return xstrdup("/");
    size_t n = (size_t)(slash - p);
    char *r = xmalloc(n + 1);
    memcpy(r, p, n);
    r[n] = '\0';
    return r;
}

/* The last component of a URI or path (points into s). */
static const char *base_of(const char *s, size_t n, size_t *len)
{
    size_t e = n, b;
    b = e;
    while (b > 0 && s[b - 1] != '/')
        b--;
    *len = e - b;
    return s + b;
}

/* Manifest priority of a walk entry (0..2), or -1 when it is no plugin manifest. */
static int manifest_priority(const char *uri)
{
    size_t n = strlen(uri), blen;
    const char *base = base_of(uri, n, &blen);
    if (blen != 11 || memcmp(base, "plugin.json", 11) != 0) return -1;
    size_t dn = (size_t)(base - uri);
    if (dn < 2) return -1;
    size_t dlen;
    const char *dir = base_of(uri, dn - 1, &dlen);
    for (int i = 0; i < N_MANIFEST_DIRS; i++)
        if (dlen == strlen(manifest_dirs[i]) && memcmp(dir, manifest_dirs[i], dlen) == 0) return i;
    return -1;
}

/* Length of the plugin directory part of a manifest URI (two components up). */
static size_t plugin_root_len(const char *uri)
{
    size_t n = strlen(uri);
    for (int k = 0; k < 2 && n > 0; k++) {
        while (n > 0 && uri[n - 1] != '/')
            n--;
        if (n > 0) n--;
    }
    return n;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static int cmp_manifest(const void *a, const void *b)
{
    const char *x = *(char *const *)a, *y = *(char *const *)b;
    size_t lx = plugin_root_len(x), ly = plugin_root_len(y);
    int c = memcmp(x, y, lx < ly ? lx : ly);
    if (c) return c;
    if (lx != ly) return lx < ly ? -1 : 1;
    return manifest_priority(x) - manifest_priority(y);
}

/* A declared mcpServers/apps file, or NULL (with a warning when it is refused). */
static char *declared_file(struct scan *sc, const char *root, json_t *decl, const char *field,
                           const char *manifest_uri)
{
    if (!json_is_string(decl)) return NULL;
    const char *rel = NULL;
    int r = caproots_declared_path(json_string_value(decl), &rel);
    if (r == 1) {
        warn(sc, "ignoring %s in %s: path must start with `./`", field, manifest_uri);
        return NULL;
    }
    if (r == 2) {
        warn(sc, "ignoring %s in %s: path must remain below the capability root", field,
             manifest_uri);
        return NULL;
    }
    return fs_path_join(root, rel);
}

struct strv {
    char **v;
    size_t n, cap;
};

static void strv_push(struct strv *s, char *p)
{
    if (s->n == s->cap) {
        s->cap = s->cap ? s->cap * 2 : 16;
        s->v = xrealloc(s->v, s->cap * sizeof *s->v);
    }
    s->v[s->n++] = p;
}

static void strv_free(struct strv *s)
{
    for (size_t i = 0; i < s->n; i++)
        free(s->v[i]);
    free(s->v);
}

static bool strv_has(const struct strv *s, const char *p, size_t len)
{
    for (size_t i = 0; i < s->n; i++)
        if (strlen(s->v[i]) == len && memcmp(s->v[i], p, len) == 0) return true;
    return false;
}

/* Native path of a URI the walk produced (it produced it from a path, so it parses). */
static char *path_of(const char *uri)
{
    char *p = NULL;
    size_t len;
    struct uri_error ue;
    if (uri_to_path(uri, strlen(uri), false, &p, &len, &ue) < 0) return NULL;
    return p;
}

static void finish(struct buf *out, const struct text_file *plugin_files, bool plugin,
                   struct buf *skills, struct buf *ns, struct scan *sc, const char *error)
{
    buf_puts(out, "{\"plugin\":");
    if (plugin) {
        buf_puts(out, "{\"manifest\":");
        put_text_file(out, &plugin_files[0]);
        buf_puts(out, ",\"mcpConfig\":");
        put_text_file(out, &plugin_files[1]);
        buf_puts(out, ",\"appsConfig\":");
        put_text_file(out, &plugin_files[2]);
        buf_putc(out, '}');
    } else {
        buf_puts(out, "null");
    }
    buf_puts(out, ",\"skills\":[");
    if (skills && skills->len) buf_append(out, skills->data, skills->len);
    buf_puts(out, "],\"namespaceManifests\":[");
    if (ns && ns->len) buf_append(out, ns->data, ns->len);
    buf_puts(out, "],\"warnings\":[");
    if (sc->warnings.len) buf_append(out, sc->warnings.data, sc->warnings.len);
    buf_puts(out, "],\"error\":");
    if (error) {
        struct buf s;
        buf_init(&s);
        utf8_lossy(&s, error, strlen(error));
        buf_put_json_str(out, s.data ? s.data : "", s.len);
        buf_free(&s);
    } else {
        buf_puts(out, "null");
    }
    buf_putc(out, '}');
}

/* From the walk's result: a warning per unreadable path (and for a truncated walk),
 * the SKILL.md files and the plugin manifests, each list sorted. */
static void collect_uris(struct scan *sc, json_t *walk, const char *root_uri,
                         struct strv *skill_uris, struct strv *manifest_uris)
{
    size_t i;
    json_t *it;
    json_array_foreach(json_object_get(walk, "errors"), i, it)
    {
        const char *ep = json_string_value(json_object_get(it, "path"));
        char *eu = respell(sc, xstrdup(ep ? ep : ""));
        warn(sc, "failed to scan capability path %s: %s", eu,
             json_string_value(json_object_get(it, "message")));
        free(eu);
    }
    if (json_is_true(json_object_get(walk, "truncated")))
        warn(sc, "capability scan reached its traversal limit (root: %s)", root_uri);
    json_array_foreach(json_object_get(walk, "entries"), i, it)
    {
        const char *kind = json_string_value(json_object_get(it, "kind"));
        const char *u = json_string_value(json_object_get(it, "path"));
        if (!kind || !u || strcmp(kind, "file") != 0) continue;
        size_t blen;
        const char *b = base_of(u, strlen(u), &blen);
        if (blen == 8 && memcmp(b, "SKILL.md", 8) == 0) strv_push(skill_uris, xstrdup(u));
        if (manifest_priority(u) >= 0) strv_push(manifest_uris, respell(sc, xstrdup(u)));
    }
    if (skill_uris->n > 1) qsort(skill_uris->v, skill_uris->n, sizeof *skill_uris->v, cmp_str);
    if (manifest_uris->n > 1)
        qsort(manifest_uris->v, manifest_uris->n, sizeof *manifest_uris->v, cmp_manifest);
}

/* Marks the plugin root of manifest uri u as seen; false when it was already. */
static bool first_of_plugin(struct strv *seen, const char *u)
{
    size_t l = plugin_root_len(u);
    if (strv_has(seen, u, l)) return false;
    char *lone = xmalloc(l + 1);
    memcpy(lone, u, l);
    lone[l] = '\0';
    strv_push(seen, lone);
    return true;
}

/* The namespace manifests, one per plugin root: first the root's own (own_manifest)
 * or else its nearest ancestor's, then those found below it in order. */
static void put_namespaces(struct scan *sc, const char *root, const struct text_file *own_manifest,
                           const struct strv *manifest_uris, struct buf *ns)
{
    struct text_file inherited = {0};
    bool have_inherited = false;
    if (!own_manifest) {
        for (char *anc = parent_of(root); anc && !have_inherited;) {
            have_inherited = read_first_manifest(sc, anc, &inherited);
            char *next = have_inherited ? NULL : parent_of(anc);
            free(anc);
            anc = next;
        }
    }
    struct strv seen = {0};
    const struct text_file *first_ns = own_manifest     ? own_manifest
                                       : have_inherited ? &inherited
                                                        : NULL;
    if (first_ns) {
        first_of_plugin(&seen, first_ns->uri);
        put_text_file(ns, first_ns);
    }
    for (size_t i = 0; i < manifest_uris->n; i++) {
        const char *u = manifest_uris->v[i];
        if (!first_of_plugin(&seen, u)) continue;
        char *p = path_of(u);
        struct text_file f;
        if (p && read_optional(sc, p, &f)) {
            if (ns->len) buf_putc(ns, ',');
            put_text_file(ns, &f);
            text_file_free(&f);
        }
        free(p);
    }
    text_file_free(&inherited);
    strv_free(&seen);
}

/* A plugin root's MCP and apps configs (pf[1], pf[2]): the files its manifest
 * (pf[0]) declares, or .mcp.json when it declares no MCP servers at all. */
static void read_plugin_files(struct scan *sc, const char *root, struct text_file pf[3])
{
    char *mcp = NULL, *apps = NULL;
    bool inline_mcp = false;
    json_t *m = json_loadb(pf[0].data, pf[0].len, JSON_DECODE_ANY, NULL);
    if (json_is_object(m)) {
        json_t *servers = json_object_get(m, "mcpServers");
        inline_mcp = json_is_object(servers);
        mcp = declared_file(sc, root, servers, "mcpServers", pf[0].uri);
        apps = declared_file(sc, root, json_object_get(m, "apps"), "apps", pf[0].uri);
    }
    json_decref(m);
    if (!inline_mcp && !mcp) mcp = fs_path_join(root, ".mcp.json");
    if (mcp) read_optional(sc, mcp, &pf[1]);
    if (apps) read_optional(sc, apps, &pf[2]);
    free(mcp);
    free(apps);
}

/* Each readable SKILL.md with its agents/openai.yaml metadata, as JSON objects. */
static void put_skills(struct scan *sc, const struct strv *skill_uris, struct buf *skills)
{
    for (size_t i = 0; i < skill_uris->n; i++) {
        char *p = path_of(skill_uris->v[i]);
        struct text_file ins, meta = {0};
        if (!p || !read_optional(sc, p, &ins)) {
            free(p);
            continue;
        }
        char *slash = strrchr(p, '/');
        if (slash) {
            *slash = '\0';
            char *mp = fs_path_join(*p ? p : "/", "agents/openai.yaml");
            read_optional(sc, mp, &meta);
            free(mp);
        }
        if (skills->len) buf_putc(skills, ',');
        buf_puts(skills, "{\"instructions\":");
        put_text_file(skills, &ins);
        buf_puts(skills, ",\"metadata\":");
        put_text_file(skills, &meta);
        buf_putc(skills, '}');
        text_file_free(&ins);
        text_file_free(&meta);
        free(p);
    }
}

void caproots_scan(const char *root_in, const char *root_uri, struct buf *out)
{
    struct scan sc = {0};
    buf_init(&sc.warnings);
    char os[256], msg[4600];
    char *root = fs_path_strip_slashes(xstrdup(root_in));
    char *canon = uri_from_path(root, strlen(root));
    sc.canon = canon;
    sc.canon_len = strlen(canon);
    sc.spelled = root_uri;
    sc.spelled_len = strlen(root_uri);
    while (sc.spelled_len > 8 && root_uri[sc.spelled_len - 1] == '/')
        sc.spelled_len--;
    struct text_file pf[3] = {{0}};
    struct stat st;
    if (stat(root, &st) < 0) {
        oserr_format(errno, os, sizeof os);
        snprintf(msg, sizeof msg, "failed to inspect capability root %s: %s", root_uri, os);
        finish(out, pf, false, NULL, NULL, &sc, msg);
        goto done_early;
    }
    if (!S_ISDIR(st.st_mode)) {
        snprintf(msg, sizeof msg, "capability root %s is not a directory", root_uri);
        finish(out, pf, false, NULL, NULL, &sc, msg);
        goto done_early;
    }

    struct fs_walk_opts wo = {CAPROOTS_MAX_DEPTH, CAPROOTS_MAX_DIRS, CAPROOTS_MAX_ENTRIES, true,
                              false};
    struct buf wb;
    buf_init(&wb);
    char *walk_root = xstrdup(root);
    int e = fs_walk(walk_root, &wo, &wb);
    free(walk_root);
    json_t *walk = e ? NULL : json_loadb(wb.data, wb.len, 0, NULL);
    buf_free(&wb);
    if (!walk) {
        oserr_format(e ? e : EIO, os, sizeof os);
        snprintf(msg, sizeof msg, "failed to scan capability root %s: %s", root_uri, os);
        finish(out, pf, false, NULL, NULL, &sc, msg);
        goto done_early;
    }
    struct strv skill_uris = {0}, manifest_uris = {0};
    collect_uris(&sc, walk, root_uri, &skill_uris, &manifest_uris);
    json_decref(walk);

    /* The root's own manifest, else the nearest ancestor's, names the namespace. */
    bool plugin = read_first_manifest(&sc, root, &pf[0]);
    struct buf ns;
    buf_init(&ns);
    put_namespaces(&sc, root, plugin ? &pf[0] : NULL, &manifest_uris, &ns);
    if (plugin) read_plugin_files(&sc, root, pf);
    struct buf skills;
    buf_init(&skills);
    put_skills(&sc, &skill_uris, &skills);
    finish(out, pf, plugin, &skills, &ns, &sc, NULL);
    buf_free(&skills);
    buf_free(&ns);
    strv_free(&skill_uris);
    strv_free(&manifest_uris);
done_early:
    for (int k = 0; k < 3; k++)
        text_file_free(&pf[k]);
    buf_free(&sc.warnings);
    free(root);
    free(canon);
}

/* A root's entry that holds only an error. */
void caproots_put_error(struct buf *out, const char *error)
{
    struct scan sc = {0};
    buf_init(&sc.warnings);
    struct text_file none[3] = {{0}};
    finish(out, none, false, NULL, NULL, &sc, error);
    buf_free(&sc.warnings);
}
