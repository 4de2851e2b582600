/* capabilities_v2: `capabilities/discoverV2`, the executor's own inventory of the
 * skills and plugins installed on it (capability capabilityDiscoveryV2; behaviour
 * settled answer for answer against codex 0.169.0, PROTOCOL.md §8.3).
 *
 * The params ({"cwd": file URI, "sandbox"?}) are decoded in capabilities_rpc.c, which
 * hands this module a query. The locations come from the server's own environment,
 * never from the request:
 *   - CODEX_HOME (canonicalized; it must exist when set: -32603 `CODEX_HOME points to
 *     "X", but that path does not exist`), else ~/.codex;
 *   - installed plugins: $CODEX_HOME/plugins/cache/<marketplace>/<name>/<version>,
 *     marketplace and name of [A-Za-z0-9_-], ordered by `<name>@<marketplace>`; the
 *     version is `local` when present, else the highest by SemVer (bytewise when a
 *     name is not SemVer) among directory names of [A-Za-z0-9.+_-]; a remote id from
 *     the package's .codex-remote-plugin-install.json ({"schema_version":1,
 *     "remote_plugin_id"}, at most 16 KiB; unreadable: a location warning);
 *   - standalone skill roots: $CODEX_HOME/skills (`codex-home-skills`),
 *     $HOME/.agents/skills (`user-agent-skills`), /etc/codex/skills (`system-skills`).
 * Each existing location is scanned the way capabilityRoots/discoverV1 scans a root
 * (caproots_scan; inside the session's sandbox helper when the request's sandbox
 * restricts reads): every SKILL.md with its agents/openai.yaml (skill_meta.c), the
 * plugin manifest and its MCP/apps files, the namespace manifests. A skill below a
 * plugin manifest is named `<namespace>:<name>` (at most 129 characters); a plugin
 * location without a manifest that parses is dropped. Result {"plugins" (sorted by
 * id), "skills", "warnings"}; every per-location problem collapses into one of two
 * fixed warnings, as on the reference.
 *
 * Answers are cached per sandbox (16) and kept valid by inotify, through fs's path
 * watches (fs/path_watch.h, the ones fs/watchMissing uses): every directory of the
 * scanned trees is watched, and a missing root by its deepest existing ancestor (only
 * the next name on the way counts). Any change drops the whole cache; the next
 * request scans again. When watches cannot be had (limits), every request scans.
 * Scans run on the thread pool (or the sandbox helper); the loop thread only reads
 * inotify events and serves cached answers. */
#include "capabilities/capabilities_v2.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "capabilities/capability_roots.h"
#include "capabilities/caproots_scan.h"
#include "fs/fs_util.h"
#include "fs/path_watch.h"
#include "fs/fs_helper_pool.h"
#include "capabilities/skill_meta.h"
#include "proto/uri.h"
#include "proto/utf8.h"
#include "util/buf.h"
#include "util/mem.h"
#include "util/oserr.h"

#define V2_MAX_LOCATIONS 512
#define V2_MAX_CAPABILITIES 2048
#define V2_MAX_BYTES (4u << 20)
#define V2_MAX_WARNINGS 64
#define V2_MAX_QUALIFIED 129
#define V2_MAX_REMOTE_META 16384
#define V2_MAX_REMOTE_ID 1024
#define V2_MAX_CACHED 16
#define V2_MAX_WATCHES 8192
#define V2_WATCH_DEPTH 10

#define W_LOCATIONS "some capability locations could not be resolved; discovery may be incomplete"
#define W_METADATA "some capability metadata could not be loaded; discovery may be incomplete"

/* ---- versions and names ------------------------------------------------------------------ */

static bool alnum_dash(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-';
}

bool caproots_plugin_segment_ok(const char *s)
{
    if (!*s) return false;
    for (; *s; s++)
        if (!alnum_dash(*s) && *s != '_') return false;
    return true;
}

bool caproots_version_segment_ok(const char *s)
{
    if (!*s || strcmp(s, ".") == 0 || strcmp(s, "..") == 0) return false;
    for (; *s; s++)
        if (!alnum_dash(*s) && *s != '_' && *s != '.' && *s != '+') return false;
    return true;
}

struct semver {
    const char *core[3];
    size_t core_len[3];
    const char *pre, *build; /* without their '-' / '+', or NULL */
    size_t pre_len, build_len;
};

static bool digits(const char *s, size_t n)
{
    if (!n) return false;
    for (size_t i = 0; i < n; i++)
        if (s[i] < '0' || s[i] > '9') return false;
    return true;
}

/* Dot-separated identifiers of [0-9A-Za-z-], non-empty; numeric ones without
 * leading zeros when `strict_numeric` (pre-release). */
static bool idents_ok(const char *s, size_t n, bool strict_numeric)
{
    if (!n) return false;
    for (size_t i = 0; i <= n;) {
        size_t j = i;
        while (j < n && s[j] != '.')
            j++;
        if (j == i) return false;
        for (size_t k = i; k < j; k++)
            if (!alnum_dash(s[k])) return false;
        if (strict_numeric && digits(s + i, j - i) && j - i > 1 && s[i] == '0') return false;
        i = j + 1;
    }
    return true;
}

static bool semver_parse(const char *s, struct semver *v)
{
    memset(v, 0, sizeof *v);
    size_t n = strlen(s);
    const char *plus = memchr(s, '+', n);
    size_t head = plus ? (size_t)(plus - s) : n;
    const char *dash = memchr(s, '-', head);
    size_t core = dash ? (size_t)(dash - s) : head;
    if (plus) {
        v->build = plus + 1;
        v->build_len = n - head - 1;
        if (!idents_ok(v->build, v->build_len, false)) return false;
    }
    if (dash) {
        v->pre = dash + 1;
        v->pre_len = head - core - 1;
        if (!idents_ok(v->pre, v->pre_len, true)) return false;
    }
    size_t i = 0;
    for (int k = 0; k < 3; k++) {
        size_t j = i;
        while (j < core && s[j] != '.')
            j++;
        if (!digits(s + i, j - i) || (j - i > 1 && s[i] == '0')) return false;
        v->core[k] = s + i;
        v->core_len[k] = j - i;
        if (k < 2 && j >= core) return false;
        i = j + 1;
    }
    return i - 1 == core;
}

static int cmp_num(const char *a, size_t an, const char *b, size_t bn)
{
    if (an != bn) return an < bn ? -1 : 1;
    int c = memcmp(a, b, an);
    return c < 0 ? -1 : c > 0;
}

/* SemVer identifier lists: numeric < alphanumeric, numbers by value, others
 * bytewise, a prefix first. */
static int cmp_idents(const char *a, size_t an, const char *b, size_t bn)
{
    size_t i = 0, j = 0;
    while (i < an && j < bn) {
        size_t ie = i, je = j;
        while (ie < an && a[ie] != '.')
            ie++;
        while (je < bn && b[je] != '.')
            je++;
        bool na = digits(a + i, ie - i), nb = digits(b + j, je - j);
        int c;
        if (na && nb) {
            c = cmp_num(a + i, ie - i, b + j, je - j);
        } else if (na != nb) {
            c = na ? -1 : 1;
        } else {
            size_t l = ie - i < je - j ? ie - i : je - j;
            c = memcmp(a + i, b + j, l);
            if (!c && ie - i != je - j) c = ie - i < je - j ? -1 : 1;
        }
        if (c) return c < 0 ? -1 : 1;
        i = ie + 1;
        j = je + 1;
    }
    bool a_more = i < an, b_more = j < bn;
    return a_more == b_more ? 0 : a_more ? 1 : -1;
}

int caproots_version_cmp(const char *a, const char *b)
{
    struct semver va, vb;
    if (!semver_parse(a, &va) || !semver_parse(b, &vb)) {
        int c = strcmp(a, b);
        return c < 0 ? -1 : c > 0;
    }
    for (int k = 0; k < 3; k++) {
        int c = cmp_num(va.core[k], va.core_len[k], vb.core[k], vb.core_len[k]);
        if (c) return c;
    }
    if (!va.pre != !vb.pre) return va.pre ? -1 : 1;
    if (va.pre) {
        int c = cmp_idents(va.pre, va.pre_len, vb.pre, vb.pre_len);
        if (c) return c;
    }
    if (!va.build != !vb.build) return va.build ? 1 : -1;
    return va.build ? cmp_idents(va.build, va.build_len, vb.build, vb.build_len) : 0;
}

/* ---- the watches ---------------------------------------------------------------------- */

/* The watches of every answer in the cache: one owner in its own inotify instance
 * (path_watch.h). Workers add watches while they scan; the loop thread hears of a
 * change. `overflow`: more than V2_MAX_WATCHES were wanted (or the kernel's limit was
 * hit), so no answer is cached until the next reset. */
static void on_change(struct path_watch_owner *o);

static struct {
    struct path_watch *pw;
    struct path_watch_owner owner;
    atomic_bool overflow;
    uint64_t gen; /* bumped by every invalidation (loop thread) */
} wt = {.owner = {.changed = on_change}};

struct cached {
    char *key;   /* sandbox JSON or "" */
    char *homes; /* codex home NUL user home */
    size_t homes_len;
    struct buf json;
};
static struct cached cache[V2_MAX_CACHED];
static unsigned ncache;

static void cache_clear(void)
{
    for (unsigned i = 0; i < ncache; i++) {
        free(cache[i].key);
        free(cache[i].homes);
        buf_free(&cache[i].json);
    }
    ncache = 0;
}

/* Worker side: whether the watch is had (or its directory is gone meanwhile, which
 * the parent's watch saw); false once over the budget, and from then on. */
static bool watch_ok(int rc)
{
    if (rc == -ENOSPC || rc == -ENOSYS) atomic_store(&wt.overflow, true);
    return !atomic_load(&wt.overflow);
}

/* Every directory below dir (dir included), directory symlinks followed, to a depth. */
static bool watch_tree(const char *dir, int depth)
{
    if (!watch_ok(path_watch_dir(wt.pw, &wt.owner, dir, NULL, V2_MAX_WATCHES))) return false;
    if (depth == 0) return true;
    DIR *d = opendir(dir);
    if (!d) return true;
    struct dirent *e;
    bool ok = true;
    while (ok && (e = readdir(d))) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
        if (e->d_type != DT_DIR && e->d_type != DT_LNK && e->d_type != DT_UNKNOWN) continue;
        char *p = fs_path_join(dir, e->d_name);
        struct stat st;
        if (stat(p, &st) == 0 && S_ISDIR(st.st_mode)) ok = watch_tree(p, depth - 1);
        free(p);
    }
    closedir(d);
    return ok;
}

/* A root: its tree when it is a directory, else as seen from its deepest existing
 * ancestor (the root itself when it is something else). */
static bool watch_root(const char *root)
{
    struct stat st;
    if (stat(root, &st) == 0 && S_ISDIR(st.st_mode)) return watch_tree(root, V2_WATCH_DEPTH);
    return watch_ok(path_watch_missing(wt.pw, &wt.owner, root, V2_MAX_WATCHES, NULL));
}

/* Loop thread: something changed; forget every answer and every watch. */
static void on_change(struct path_watch_owner *o)
{
    (void)o;
    wt.gen++;
    cache_clear();
    path_watch_drop(wt.pw, &wt.owner);
    atomic_store(&wt.overflow, false);
}

static void watch_init(uv_loop_t *loop)
{
    if (!wt.pw) wt.pw = path_watch_new(loop);
}

/* ---- one scan ------------------------------------------------------------------------- */

struct location {
    char *path, *uri;
    const char *disc_id;                   /* standalone roots */
    char *plugin_id, *version, *remote_id; /* plugin locations */
};

struct scan_job {
    uv_work_t w;
    struct caproots_v2_query q;
    caproots_v2_done_fn done;
    void *arg;
    uint64_t gen;
    bool watched;
    struct buf out;
};

static char *uri_of(const char *path)
{
    return uri_from_path(path, strlen(path));
}

static bool is_dir(const char *p)
{
    struct stat st;
    return stat(p, &st) == 0 && S_ISDIR(st.st_mode);
}

/* The package's remote identity: 0 with *id (or NULL when there is none), or -1 with
 * a reason in err. */
static int remote_id(const char *pkg, char **id, char *err, size_t errlen)
{
    *id = NULL;
    char *p = fs_path_join(pkg, ".codex-remote-plugin-install.json");
    int fd = open(p, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    free(p);
    if (fd < 0) {
        if (errno == ENOENT) return 0;
        oserr_format(errno, err, errlen);
        return -1;
    }
    struct stat st;
    if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        snprintf(err, errlen, "not a regular file");
        return -1;
    }
    char buf[V2_MAX_REMOTE_META + 1];
    size_t n = 0;
    ssize_t r;
    while (n < sizeof buf && (r = read(fd, buf + n, sizeof buf - n)) > 0)
        n += (size_t)r;
    close(fd);
    if (n > V2_MAX_REMOTE_META) {
        snprintf(err, errlen, "remote installation metadata exceeds its byte limit");
        return -1;
    }
    json_t *j = json_loadb(buf, n, 0, NULL);
    json_t *ver = json_object_get(j, "schema_version");
    const char *rid = json_string_value(json_object_get(j, "remote_plugin_id"));
    int rc = -1;
    if (!j || !json_is_integer(ver) || !rid) {
        snprintf(err, errlen, "failed to parse remote plugin install metadata");
    } else if (json_integer_value(ver) != 1) {
        snprintf(err, errlen, "unsupported remote plugin install metadata schema version: %lld",
                 (long long)json_integer_value(ver));
    } else {
        const char *t = rid;
        size_t tl = strlen(rid);
        while (tl && (*t == ' ' || *t == '\t' || *t == '\n' || *t == '\r'))
            t++, tl--;
        while (tl &&
               (t[tl - 1] == ' ' || t[tl - 1] == '\t' || t[tl - 1] == '\n' || t[tl - 1] == '\r'))
            tl--;
        if (!tl)
            snprintf(err, errlen, "remote plugin id must not be blank");
        else if (tl > V2_MAX_REMOTE_ID)
            snprintf(err, errlen, "remote plugin ID exceeds its byte limit");
        else {
            *id = xstrndup(t, tl);
            rc = 0;
        }
    }
    json_decref(j);
    return rc;
}

/* The active version of a package directory, or NULL. */
static char *active_version(const char *pkg)
{
    DIR *d = opendir(pkg);
    if (!d) return NULL;
    char *best = NULL;
    bool local = false;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_type != DT_DIR) continue; /* the entry's own type: links do not count */
        if (!caproots_version_segment_ok(e->d_name)) continue;
        if (strcmp(e->d_name, "local") == 0) local = true;
        if (!best || caproots_version_cmp(e->d_name, best) > 0) {
            free(best);
            best = xstrdup(e->d_name);
        }
    }
    closedir(d);
    if (local) {
        free(best);
        return xstrdup("local");
    }
    return best;
}

static int cmp_pkg(const void *a, const void *b)
{
    return strcmp(((const struct location *)a)->plugin_id, ((const struct location *)b)->plugin_id);
}

static void location_free(struct location *l)
{
    free(l->path);
    free(l->uri);
    free(l->plugin_id);
    free(l->version);
    free(l->remote_id);
}

/* Installed plugin locations below cache, appended to *locs. */
static void plugin_locations(const char *cache_root, struct location **locs, size_t *n, size_t *cap,
                             bool *loc_warning)
{
    DIR *md = opendir(cache_root);
    if (!md) return;
    struct location *pk = NULL;
    size_t npk = 0, cpk = 0;
    struct dirent *m;
    while ((m = readdir(md))) {
        if (m->d_name[0] == '.' && (!m->d_name[1] || strcmp(m->d_name, "..") == 0)) continue;
        char *mdir = fs_path_join(cache_root, m->d_name);
        DIR *nd = is_dir(mdir) ? opendir(mdir) : NULL;
        struct dirent *p;
        while (nd && (p = readdir(nd))) {
            if (strcmp(p->d_name, ".") == 0 || strcmp(p->d_name, "..") == 0) continue;
            char *pdir = fs_path_join(mdir, p->d_name);
            if (!is_dir(pdir) || !caproots_plugin_segment_ok(p->d_name) ||
                !caproots_plugin_segment_ok(m->d_name)) {
                free(pdir);
                continue;
            }
            if (npk == cpk) {
                cpk = cpk ? cpk * 2 : 16;
                pk = xrealloc(pk, cpk * sizeof *pk);
            }
            memset(&pk[npk], 0, sizeof pk[npk]);
            pk[npk].path = pdir;
            pk[npk].plugin_id = xasprintf("%s@%s", p->d_name, m->d_name);
            npk++;
        }
        if (nd) closedir(nd);
        free(mdir);
    }
    closedir(md);
    if (npk > 1) qsort(pk, npk, sizeof *pk, cmp_pkg);
    size_t added = 0;
    for (size_t i = 0; i < npk; i++) {
        char *ver = added < V2_MAX_LOCATIONS ? active_version(pk[i].path) : NULL;
        if (!ver) {
            if (added >= V2_MAX_LOCATIONS) *loc_warning = true;
            location_free(&pk[i]);
            continue;
        }
        char err[300];
        if (remote_id(pk[i].path, &pk[i].remote_id, err, sizeof err) < 0) *loc_warning = true;
        char *root = fs_path_join(pk[i].path, ver);
        free(pk[i].path);
        pk[i].path = root;
        pk[i].uri = uri_of(root);
        pk[i].version = ver;
        if (*n == *cap) {
            *cap = *cap ? *cap * 2 : 16;
            *locs = xrealloc(*locs, *cap * sizeof **locs);
        }
        (*locs)[(*n)++] = pk[i];
        added++;
    }
    free(pk);
}

/* Scans one location the V1 way, here or in the sandbox helper; a parsed V1 root
 * object, or NULL when the location is to be treated as absent. */
static json_t *scan_location(struct scan_job *j, const struct location *l, bool *warned)
{
    struct stat st;
    if (stat(l->path, &st) < 0) {
        if (errno != ENOENT && errno != EACCES && errno != ENOTDIR) *warned = true;
        return NULL;
    }
    if (!S_ISDIR(st.st_mode)) return NULL;
    struct buf one;
    buf_init(&one);
    char why[256];
    if (caproots_scan_root(l->path, l->uri, j->q.sb, j->q.owner, &one, why, sizeof why) < 0) {
        buf_free(&one);
        *warned = true;
        return NULL;
    }
    json_t *r = json_loadb(one.data ? one.data : "", one.len, 0, NULL);
    buf_free(&one);
    /* Read through a sandbox, a root it does not let us see is simply absent. */
    const char *err = json_string_value(json_object_get(r, "error"));
    if (err && j->q.sb &&
        (strstr(err, "(os error 2)") || strstr(err, "(os error 13)") ||
         strstr(err, "(os error 1)"))) {
        json_decref(r);
        return NULL;
    }
    return r;
}

/* The parent URI (malloc'd), or NULL at the top. */
static char *uri_parent(const char *u)
{
    const char *slash = strrchr(u, '/');
    if (!slash || slash - u < 8) return NULL; /* "file:///" */
    return xstrndup(u, (size_t)(slash - u));
}

static char *uri_basename(const char *u)
{
    const char *slash = strrchr(u, '/');
    char *path = NULL;
    size_t plen;
    struct uri_error ue;
    const char *b = slash ? slash + 1 : u;
    char *tmp = xasprintf("file:///%s", b);
    if (uri_to_path(tmp, strlen(tmp), false, &path, &plen, &ue) < 0) path = NULL;
    free(tmp);
    char *out = path ? xstrdup(path + 1) : xstrdup(b);
    free(path);
    return out;
}

struct ns {
    char *root_uri;
    char *name;
};

static size_t utf8_count(const char *s)
{
    size_t n = 0;
    for (; *s; s++)
        if (((unsigned char)*s & 0xC0) != 0x80) n++;
    return n;
}

/* The skills of one scanned location as wire objects, appended to `skills`. */
static void build_skills(json_t *scan, const struct location *l, json_t *skills, bool *warned)
{
    /* Namespaces: the first manifest per plugin root (V1's order), named by its
     * `name`, else by the root's directory name. */
    struct ns nss[64];
    size_t nns = 0;
    size_t i;
    json_t *m;
    json_array_foreach(json_object_get(scan, "namespaceManifests"), i, m)
    {
        const char *mp = json_string_value(json_object_get(m, "path"));
        const char *mc = json_string_value(json_object_get(m, "contents"));
        if (!mp || !mc || nns == sizeof nss / sizeof nss[0]) continue;
        char *dir = uri_parent(mp);
        char *root = dir ? uri_parent(dir) : NULL;
        free(dir);
        json_t *mj = root ? json_loads(mc, JSON_DECODE_ANY, NULL) : NULL;
        json_t *nm = json_object_get(mj, "name");
        if (!json_is_object(mj) || (nm && !json_is_string(nm) && !json_is_null(nm))) {
            json_decref(mj);
            free(root);
            continue;
        }
        const char *nmv = json_string_value(nm);
        char *name =
            nmv && !utf8_all_white_space(nmv, strlen(nmv)) ? xstrdup(nmv) : uri_basename(root);
        json_decref(mj);
        bool dup = false;
        for (size_t k = 0; k < nns && !dup; k++)
            dup = strcmp(nss[k].root_uri, root) == 0;
        if (dup) {
            free(root);
            free(name);
            continue;
        }
        nss[nns].root_uri = root;
        nss[nns].name = name;
        nns++;
    }
    json_t *sk;
    json_array_foreach(json_object_get(scan, "skills"), i, sk)
    {
        json_t *ins = json_object_get(sk, "instructions");
        const char *path = json_string_value(json_object_get(ins, "path"));
        json_t *contents = json_object_get(ins, "contents");
        if (!path || !json_is_string(contents)) continue;
        char *dir = uri_parent(path);
        char *dname = dir ? uri_basename(dir) : xstrdup("");
        char *def = caproots_single_line(dname, strlen(dname));
        free(dname);
        if (!*def) {
            free(def);
            def = xstrdup("skill");
        }
        struct caproots_skill s;
        int rc = caproots_skill_parse(json_string_value(contents), json_string_length(contents),
                                      def, &s);
        free(def);
        if (rc < 0) {
            *warned = true;
            free(dir);
            continue;
        }
        const char *ns_name = NULL;
        for (char *anc = dir; anc && !ns_name;) {
            for (size_t k = 0; k < nns && !ns_name; k++)
                if (strcmp(nss[k].root_uri, anc) == 0) ns_name = nss[k].name;
            char *up = ns_name ? NULL : uri_parent(anc);
            if (anc != dir) free(anc);
            anc = up;
        }
        free(dir);
        char *qualified = ns_name ? xasprintf("%s:%s", ns_name, s.name) : xstrdup(s.name);
        if (ns_name && utf8_count(qualified) > V2_MAX_QUALIFIED) {
            *warned = true;
            free(qualified);
            caproots_skill_free(&s);
            continue;
        }
        json_t *meta = json_object_get(sk, "metadata");
        json_t *deps, *pol;
        const char *mc = json_string_value(json_object_get(meta, "contents"));
        if (mc) {
            caproots_skill_sidecar(mc, strlen(mc), &deps, &pol);
        } else {
            deps = json_null();
            pol = json_null();
        }
        json_t *o = json_object();
        json_object_set_new(o, "name", json_string(qualified));
        json_object_set_new(o, "description", json_string(s.description));
        json_object_set_new(o, "shortDescription",
                            s.short_description ? json_string(s.short_description) : json_null());
        json_object_set_new(o, "path", json_string(path));
        if (l->disc_id)
            json_object_set_new(o, "discoveryRoot",
                                json_pack("{s:s,s:s}", "id", l->disc_id, "path", l->uri));
        json_object_set_new(o, "dependencies", deps);
        json_object_set_new(o, "policy", pol);
        json_array_append_new(skills, o);
        free(qualified);
        caproots_skill_free(&s);
    }
    for (size_t k = 0; k < nns; k++) {
        free(nss[k].root_uri);
        free(nss[k].name);
    }
}

/* A plugin location's wire object, or NULL (no manifest that parses). */
static json_t *build_plugin(json_t *scan, const struct location *l, json_t *skills)
{
    json_t *files = json_object_get(scan, "plugin");
    json_t *manifest = json_object_get(files, "manifest");
    const char *mc = json_string_value(json_object_get(manifest, "contents"));
    json_t *mj = mc ? json_loads(mc, JSON_DECODE_ANY, NULL) : NULL;
    if (!json_is_object(mj)) {
        json_decref(mj);
        return NULL;
    }
    const char *name = json_string_value(json_object_get(mj, "name"));
    char *display = NULL;
    const char *dn =
        json_string_value(json_object_get(json_object_get(mj, "interface"), "displayName"));
    if (dn && !utf8_all_white_space(dn, strlen(dn)))
        display = xstrdup(dn);
    else if (name && !utf8_all_white_space(name, strlen(name)))
        display = xstrdup(name);
    else
        display = uri_basename(l->uri);
    json_decref(mj);
    json_t *p = json_object();
    json_object_set_new(p, "id", json_string(l->plugin_id));
    json_object_set_new(p, "displayName", json_string(display));
    json_object_set_new(p, "remotePluginId",
                        l->remote_id ? json_string(l->remote_id) : json_null());
    json_object_set_new(p, "version", json_string(l->version));
    json_object_set_new(p, "root", json_string(l->uri));
    json_object_set_new(p, "files", json_incref(files));
    json_object_set_new(p, "skills", json_incref(skills));
    free(display);
    return p;
}

static int cmp_plugins(const void *a, const void *b)
{
    json_t *pa = *(json_t *const *)a, *pb = *(json_t *const *)b;
    int c = strcmp(json_string_value(json_object_get(pa, "id")),
                   json_string_value(json_object_get(pb, "id")));
    if (c) return c;
    return strcmp(json_string_value(json_object_get(pa, "root")),
                  json_string_value(json_object_get(pb, "root")));
}

static void add_warning(json_t *warnings, const char *w)
{
    if (json_array_size(warnings) < V2_MAX_WARNINGS)
        json_array_append_new(warnings, json_string(w));
}

/* Plugins by id, then root. */
static void sort_plugins(json_t *plugins)
{
    size_t np = json_array_size(plugins);
    if (np < 2) return;
    json_t **v = xcalloc(np, sizeof *v);
    for (size_t k = 0; k < np; k++)
        v[k] = json_incref(json_array_get(plugins, k));
    qsort(v, np, sizeof *v, cmp_plugins);
    json_array_clear(plugins);
    for (size_t k = 0; k < np; k++)
        json_array_append_new(plugins, v[k]);
    free(v);
}

/* The answer as compact JSON of at most V2_MAX_BYTES. Over the bounds (or truncated
 * already): the limit warning first, then drop from the end, warnings before skills
 * before plugins. */
static char *dump_within_bounds(json_t *res, bool truncated)
{
    json_t *plugins = json_object_get(res, "plugins"), *skills = json_object_get(res, "skills"),
           *warnings = json_object_get(res, "warnings");
    char *text = json_dumps(res, JSON_COMPACT);
    if (!truncated && strlen(text) <= V2_MAX_BYTES) return text;
    while (json_array_size(warnings) >= V2_MAX_WARNINGS)
        json_array_remove(warnings, json_array_size(warnings) - 1);
    json_array_insert_new(warnings, 0, json_string("capability discovery size limit reached"));
    for (;;) {
        free(text);
        text = json_dumps(res, JSON_COMPACT);
        if (strlen(text) <= V2_MAX_BYTES) break;
        if (json_array_size(warnings) > 1) {
            while (json_array_size(warnings) > 1)
                json_array_remove(warnings, 1);
        } else if (json_array_size(skills)) {
            json_array_remove(skills, json_array_size(skills) - 1);
        } else if (json_array_size(plugins)) {
            json_array_remove(plugins, json_array_size(plugins) - 1);
        } else {
            break;
        }
    }
    return text;
}

static void scan_run(uv_work_t *w)
{
    struct scan_job *j = w->data;
    struct location *locs = NULL;
    size_t n = 0, cap = 0;
    bool loc_warning = false;

    char *cache_root = fs_path_join(j->q.codex_home, "plugins/cache");
    char *roots[3];
    static const char *const ids[3] = {"codex-home-skills", "user-agent-skills", "system-skills"};
    roots[0] = fs_path_join(j->q.codex_home, "skills");
    roots[1] = j->q.user_home ? fs_path_join(j->q.user_home, ".agents/skills") : NULL;
    roots[2] = xstrdup("/etc/codex/skills");
    /* Watches first: a change while we scan is then seen and drops this answer. */
    j->watched = watch_root(cache_root);
    for (int k = 0; k < 3; k++)
        if (roots[k] && !watch_root(roots[k])) j->watched = false;

    if (is_dir(cache_root)) plugin_locations(cache_root, &locs, &n, &cap, &loc_warning);
    for (int k = 0; k < 3; k++) {
        bool dup = !roots[k];
        for (int q = 0; q < k && !dup; q++)
            dup = roots[q] && strcmp(roots[q], roots[k]) == 0;
        if (dup || !is_dir(roots[k])) continue;
        if (n == cap) {
            cap = cap ? cap * 2 : 8;
            locs = xrealloc(locs, cap * sizeof *locs);
        }
        memset(&locs[n], 0, sizeof locs[n]);
        locs[n].path = xstrdup(roots[k]);
        locs[n].uri = uri_of(roots[k]);
        locs[n].disc_id = ids[k];
        n++;
    }
    if (n > V2_MAX_LOCATIONS) {
        for (size_t k = V2_MAX_LOCATIONS; k < n; k++)
            location_free(&locs[k]);
        n = V2_MAX_LOCATIONS;
        loc_warning = true;
    }

    json_t *plugins = json_array(), *skills = json_array(), *warnings = json_array();
    if (loc_warning) add_warning(warnings, W_LOCATIONS);
    size_t caps = 0;
    bool truncated = false;
    for (size_t k = 0; k < n && !truncated; k++) {
        struct location *l = &locs[k];
        bool warned = false;
        json_t *scan = scan_location(j, l, &warned);
        if (scan) {
            size_t wi;
            json_t *wv;
            json_array_foreach(json_object_get(scan, "warnings"), wi, wv) warned = true;
            if (json_is_string(json_object_get(scan, "error"))) warned = true;
            json_t *sk = json_array();
            if (l->plugin_id && !json_is_object(json_object_get(scan, "plugin"))) {
                warned = true;
            } else {
                build_skills(scan, l, sk, &warned);
                if (l->plugin_id) {
                    json_t *p = build_plugin(scan, l, sk);
                    if (!p)
                        warned = true;
                    else if (caps + 1 + json_array_size(sk) > V2_MAX_CAPABILITIES) {
                        truncated = true;
                        json_decref(p);
                    } else {
                        caps += 1 + json_array_size(sk);
                        json_array_append_new(plugins, p);
                    }
                } else {
                    size_t si;
                    json_t *sv;
                    json_array_foreach(sk, si, sv)
                    {
                        if (caps == V2_MAX_CAPABILITIES) {
                            truncated = true;
                            break;
                        }
                        caps++;
                        json_array_append(skills, sv);
                    }
                }
            }
            json_decref(sk);
            json_decref(scan);
        }
        if (warned) add_warning(warnings, W_METADATA);
    }
    sort_plugins(plugins);
    json_t *res =
        json_pack("{s:o,s:o,s:o}", "plugins", plugins, "skills", skills, "warnings", warnings);
    char *text = dump_within_bounds(res, truncated);
    buf_puts(&j->out, text);
    free(text);
    json_decref(res);
    for (size_t k = 0; k < n; k++)
        location_free(&locs[k]);
    free(locs);
    free(cache_root);
    for (int k = 0; k < 3; k++)
        free(roots[k]);
}

static void job_free(struct scan_job *j)
{
    free(j->q.codex_home);
    free(j->q.user_home);
    fs_sandbox_free(j->q.sb);
    buf_free(&j->out);
    free(j);
}

static void cache_put(const char *key, const char *homes, size_t homes_len, const struct buf *json)
{
    if (ncache == V2_MAX_CACHED) {
        free(cache[0].key);
        free(cache[0].homes);
        buf_free(&cache[0].json);
        memmove(&cache[0], &cache[1], (ncache - 1) * sizeof cache[0]);
        ncache--;
    }
    struct cached *c = &cache[ncache++];
    c->key = xstrdup(key);
    c->homes = xmemdup(homes, homes_len);
    c->homes_len = homes_len;
    buf_init(&c->json);
    buf_append(&c->json, json->data, json->len);
}

static char *homes_key(const char *codex_home, const char *user_home, size_t *len)
{
    size_t a = strlen(codex_home), b = user_home ? strlen(user_home) : 0;
    char *k = xmalloc(a + b + 2);
    memcpy(k, codex_home, a + 1);
    if (user_home) memcpy(k + a + 1, user_home, b);
    k[a + b + 1] = '\0';
    *len = a + b + 2;
    return k;
}

static void scan_done(uv_work_t *w, int status)
{
    struct scan_job *j = w->data;
    if (status < 0) {
        j->done(j->arg, status, NULL);
        job_free(j);
        return;
    }
    /* Cache only an answer no change has overtaken, backed by complete watches. */
    if (j->watched && !atomic_load(&wt.overflow) && j->gen == wt.gen && wt.pw) {
        size_t hl;
        char *hk = homes_key(j->q.codex_home, j->q.user_home, &hl);
        cache_put(j->q.sb ? j->q.sb->key : "", hk, hl, &j->out);
        free(hk);
    }
    j->done(j->arg, 0, &j->out);
    job_free(j);
}

/* ---- a request ------------------------------------------------------------------------ */

int caproots_v2_discover(uv_loop_t *loop, struct caproots_v2_query *q, caproots_v2_done_fn done,
                         void *arg)
{
    size_t hl;
    char *hk = homes_key(q->codex_home, q->user_home, &hl);
    const char *key = q->sb ? q->sb->key : "";
    for (unsigned i = 0; i < ncache; i++) {
        if (strcmp(cache[i].key, key) == 0 && cache[i].homes_len == hl &&
            memcmp(cache[i].homes, hk, hl) == 0) {
            free(hk);
            free(q->codex_home);
            free(q->user_home);
            fs_sandbox_free(q->sb);
            done(arg, 0, &cache[i].json);
            return 0;
        }
    }
    free(hk);
    watch_init(loop);
    struct scan_job *j = xcalloc(1, sizeof *j);
    j->q = *q;
    j->done = done;
    j->arg = arg;
    j->gen = wt.gen;
    buf_init(&j->out);
    j->w.data = j;
    int r = uv_queue_work(loop, &j->w, scan_run, scan_done);
    if (r < 0) job_free(j);
    return r;
}
