/* policy: resolving the `sandbox` object (PROTOCOL.md section 10), built entry by
 * entry by its decoder (policy_rpc.c, through policy_internal.h).
 *
 * Resolution follows section 10.3: entries become (absolute path, access) pairs;
 * the most specific entry wins, ties going to none/deny > write > read. Landlock
 * only ever adds rights down a directory tree, so the pairs are then split into
 * what it can say (readable and writable roots) and what needs a mount in a
 * private namespace (read-only subpaths under writable roots, hidden paths under
 * readable ones). Globs are expanded by a bounded scan of the file system; a scan
 * that hits its limits fails closed rather than guess. */
#include "sandbox/policy.h"
#include "sandbox/policy_internal.h"
#include "sandbox/path_rules.h"
#include "sandbox/spec.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/env_vars.h"
#include "proto/uri.h"
#include "util/mem.h"

#define GLOB_MAX_VISITS 10000
/* Resolved entries per policy: classification is quadratic, and thousands of
 * mounts would be no sandbox anyone meant; more fails closed. */
#define MAX_ENTRIES 512

/* A symbolic link a path named in the policy went through on its way to the entry. */
struct crossing {
    char *given; /* the path as named (before realpath) */
    char *link;  /* the link, as a prefix of given */
    char *at;    /* where the link itself is: its directory canonical, then its name */
};

struct entry {
    char *path;
    int access;
    bool implicit;         /* a carve-out added by us, not by the client */
    struct crossing *xing; /* every link crossed by a path that named it */
    size_t nxing;
};

struct entries {
    struct entry *v;
    size_t n, cap;
};

void sandbox_paths_add(struct sb_paths *l, const char *path)
{
    for (size_t i = 0; i < l->n; i++)
        if (strcmp(l->v[i], path) == 0) return;
    if (l->n == l->cap) {
        l->cap = l->cap ? l->cap * 2 : 8;
        l->v = xrealloc(l->v, (l->cap + 1) * sizeof *l->v);
    }
    l->v[l->n++] = xstrdup(path);
    l->v[l->n] = NULL;
}

void sandbox_paths_free(struct sb_paths *l)
{
    for (size_t i = 0; i < l->n; i++)
        free(l->v[i]);
    free(l->v);
    memset(l, 0, sizeof *l);
}

void sandbox_policy_free(struct sandbox_policy *p)
{
    sandbox_paths_free(&p->readable);
    sandbox_paths_free(&p->writable);
    sandbox_paths_free(&p->readonly_sub);
    sandbox_paths_free(&p->denied);
    sandbox_paths_free(&p->protected_names);
    sandbox_paths_free(&p->deny_globs);
    free(p->cwd);
    free(p->refusal);
    memset(p, 0, sizeof *p);
}

/* The canonical form of a resolved path: realpath when it exists (Landlock and
 * mounts act on the object, so comparisons must too); for a missing one, its deepest
 * existing directory's realpath with the rest of the path as named, so that a deny
 * entry for a file made later is the path the file will have (path_rules.h). */
char *sandbox_canonical_path(const char *path)
{
    char *r = realpath(path, NULL);
    if (r || path[0] != '/') return r ? r : xstrdup(path);
    char pre[PATH_MAX];
    size_t n = strlen(path);
    if (n >= sizeof pre) return xstrdup(path);
    memcpy(pre, path, n + 1);
    for (char *slash = strrchr(pre, '/'); slash && slash > pre; slash = strrchr(pre, '/')) {
        *slash = 0;
        char *base = realpath(pre, NULL);
        if (!base) continue;
        char *full =
            xasprintf("%s%s%s", base, strcmp(base, "/") ? "/" : "", path + (slash - pre) + 1);
        free(base);
        return full;
    }
    return xstrdup(path);
}

static char *join(const char *a, const char *b);

static char *canon(const char *path)
{
    return sandbox_canonical_path(path);
}

/* Records in e each symbolic link that path (absolute, as named) goes through, at
 * any component: realpath follows them, so the entry lands where they point today. */
static void note_crossings(struct entry *e, const char *path)
{
    size_t n = strlen(path);
    if (n >= PATH_MAX) return;
    char pre[PATH_MAX];
    for (size_t k = 1; k <= n; k++) {
        if (k < n && path[k] != '/') continue;
        memcpy(pre, path, k);
        pre[k] = 0;
        struct stat st;
        if (pre[k - 1] == '/' || lstat(pre, &st) < 0 || !S_ISLNK(st.st_mode)) continue;
        char *slash = strrchr(pre, '/');
        *slash = 0;
        char *dir = canon(*pre ? pre : "/");
        *slash = '/';
        e->xing = xrealloc(e->xing, (e->nxing + 1) * sizeof *e->xing);
        e->xing[e->nxing++] = (struct crossing){xstrdup(path), xstrdup(pre), join(dir, slash + 1)};
        free(dir);
    }
}

static void entries_add(struct entries *es, const char *path, int access, bool implicit)
{
    char *c = canon(path);
    for (size_t i = 0; i < es->n; i++) {
        if (strcmp(es->v[i].path, c) == 0) {
            note_crossings(&es->v[i], path);
            /* Same path: none/deny > write > read; an explicit entry beats ours. */
            if (es->v[i].implicit && !implicit) {
                es->v[i].access = access;
                es->v[i].implicit = false;
            } else if (!implicit && access > es->v[i].access) {
                es->v[i].access = access;
            }
            free(c);
            return;
        }
    }
    if (es->n == es->cap) {
        es->cap = es->cap ? es->cap * 2 : 16;
        es->v = xrealloc(es->v, es->cap * sizeof *es->v);
    }
    es->v[es->n] = (struct entry){c, access, implicit, NULL, 0};
    note_crossings(&es->v[es->n++], path);
}

static void entries_free(struct entries *es)
{
    for (size_t i = 0; i < es->n; i++) {
        for (size_t k = 0; k < es->v[i].nxing; k++) {
            free(es->v[i].xing[k].given);
            free(es->v[i].xing[k].link);
            free(es->v[i].xing[k].at);
        }
        free(es->v[i].xing);
        free(es->v[i].path);
    }
    free(es->v);
}

/* Whether `anc` is a strict component-wise ancestor of `p`. */
static bool is_under(const char *anc, const char *p)
{
    size_t n = strlen(anc);
    if (strcmp(anc, "/") == 0) return strcmp(p, "/") != 0;
    return strncmp(anc, p, n) == 0 && p[n] == '/';
}

static char *join(const char *a, const char *b)
{
    size_t la = strlen(a);
    char *r = xmalloc(la + strlen(b) + 2);
    strcpy(r, a);
    if (la == 0 || a[la - 1] != '/') strcat(r, "/");
    strcat(r, b);
    return r;
}

/* Resolves a URI member, reporting the URI error in e. Returns malloc'd path. */
static char *uri_path(const char *uri, struct sandbox_error *e)
{
    char *out = NULL;
    size_t len = 0;
    struct uri_error ue;
    if (uri_to_path(uri, strlen(uri), false, &out, &len, &ue) < 0) {
        e->kind = ue.kind == URI_ERR_HOST ? SANDBOX_ERR_FOREIGN_HOST : SANDBOX_ERR_INVALID;
        snprintf(e->message, sizeof e->message, "%s", ue.message);
        return NULL;
    }
    if (strlen(out) != len) { /* embedded NUL cannot name a file */
        free(out);
        e->kind = SANDBOX_ERR_INVALID;
        snprintf(e->message, sizeof e->message, "'%s' is invalid on 'linux'", uri);
        return NULL;
    }
    return out;
}

/* ---- globs ------------------------------------------------------------------------ */

struct glob_scan {
    const char *pattern; /* relative to base */
    int access;
    int max_depth;
    int visits;
    struct entries *out;
};

/* Walks base (not following symlinks) adding every match. Returns -E2BIG when the
 * scan exceeds its budget. */
static int glob_walk(struct glob_scan *g, const char *base, const char *rel, int depth)
{
    char *dir = *rel ? join(base, rel) : xstrdup(base);
    DIR *d = opendir(dir);
    free(dir);
    if (!d) return 0;
    int rc = 0;
    struct dirent *de;
    while ((de = readdir(d))) {
        if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, "..")) continue;
        if (++g->visits > GLOB_MAX_VISITS) {
            rc = -E2BIG;
            break;
        }
        char *r = *rel ? join(rel, de->d_name) : xstrdup(de->d_name);
        if (path_rules_glob_match(g->pattern, r) && g->out->n >= MAX_ENTRIES) {
            free(r);
            rc = -E2BIG;
            break;
        }
        if (path_rules_glob_match(g->pattern, r)) {
            char *full = join(base, r);
            entries_add(g->out, full, g->access, false);
            free(full);
        }
        if (de->d_type == DT_DIR && depth + 1 < g->max_depth) rc = glob_walk(g, base, r, depth + 1);
        free(r);
        if (rc) break;
    }
    closedir(d);
    return rc;
}

/* Expands pattern (absolute, or relative to cwd). Returns 0, or -E2BIG with e filled
 * when it matches too many paths. */
static int glob_expand(const char *pattern, const char *cwd, int access, int max_depth,
                       struct entries *out, struct sb_paths *deny_globs, struct sandbox_error *e)
{
    char *abs = pattern[0] == '/' ? xstrdup(pattern) : join(cwd, pattern);
    /* The scan starts at the longest prefix without glob characters. */
    char *meta = strpbrk(abs, "*?[");
    char *base, *pat;
    if (!meta) {
        entries_add(out, abs, access, false);
        free(abs);
        return 0;
    }
    char *slash = meta;
    while (slash > abs && *slash != '/')
        slash--;
    *slash = 0;
    base = xstrdup(*abs ? abs : "/");
    pat = xstrdup(slash + 1);
    free(abs);
    if (access == ACC_DENY) {
        /* Matched again whenever a path is asked (path_rules.h): a file made after the
         * scan is as denied as one found by it. */
        char *cb = canon(base);
        char *whole = join(cb, pat);
        sandbox_paths_add(deny_globs, whole);
        free(whole);
        free(cb);
    }
    struct glob_scan g = {pat, access, max_depth, 0, out};
    int rc = glob_walk(&g, base, "", 0);
    free(base);
    free(pat);
    if (rc < 0) {
        e->kind = SANDBOX_ERR_TOO_MANY;
        snprintf(e->message, sizeof e->message,
                 "sandbox glob pattern `%s` matches too many paths to enforce", pattern);
        return rc;
    }
    return 0;
}

/* ---- building ----------------------------------------------------------------------- */

struct ctx {
    char *cwd;               /* resolved policy cwd or NULL */
    struct sb_paths roots;   /* workspaceRoots, as named */
    struct sb_paths tmpdirs; /* temporaryDirectories */
    bool dynamic;            /* some entry depends on cwd */
};

struct sb_build {
    struct ctx cx;
    struct entries es;
    struct sb_paths deny_globs; /* absolute `none` patterns */
};

struct sb_build *sandbox_build_new(void)
{
    return xcalloc(1, sizeof(struct sb_build));
}

void sandbox_build_free(struct sb_build *b)
{
    if (!b) return;
    entries_free(&b->es);
    sandbox_paths_free(&b->deny_globs);
    free(b->cx.cwd);
    sandbox_paths_free(&b->cx.roots);
    sandbox_paths_free(&b->cx.tmpdirs);
    free(b);
}

static void add_minimal(struct entries *es)
{
    static const char *const dirs[] = {"/bin",   "/sbin",   "/usr", "/etc",  "/lib", "/lib32",
                                       "/lib64", "/libx32", "/dev", "/proc", "/sys", NULL};
    for (int i = 0; dirs[i]; i++) {
        struct stat st;
        if (lstat(dirs[i], &st) == 0) entries_add(es, dirs[i], ACC_READ, false);
    }
}

static int too_many_entries(struct sandbox_error *err)
{
    err->kind = SANDBOX_ERR_TOO_MANY;
    snprintf(err->message, sizeof err->message, "sandbox has too many entries to enforce");
    return -E2BIG;
}

/* One entry's special path (kind, subpath) into es. */
static int add_special(struct ctx *cx, const char *kind, const char *subpath, int access,
                       struct entries *es, struct sandbox_error *e)
{
    if (!strcmp(kind, "root")) {
        entries_add(es, "/", access, false);
    } else if (!strcmp(kind, "minimal")) {
        if (access == ACC_DENY) return 0; /* denying the defaults denies nothing more */
        add_minimal(es);
    } else if (!strcmp(kind, "current_working_directory") || !strcmp(kind, "project_roots")) {
        cx->dynamic = true;
        for (size_t i = 0; i < cx->roots.n; i++) {
            if (subpath && *subpath) {
                if (subpath[0] == '/' || strstr(subpath, "..")) {
                    e->kind = SANDBOX_ERR_INVALID;
                    snprintf(e->message, sizeof e->message,
                             "project root subpath `%s` must be relative", subpath);
                    return -EINVAL;
                }
                char *j = join(cx->roots.v[i], subpath);
                entries_add(es, j, access, false);
                free(j);
            } else {
                entries_add(es, cx->roots.v[i], access, false);
            }
        }
    } else if (!strcmp(kind, "tmpdir")) {
        if (cx->tmpdirs.n) {
            for (size_t i = 0; i < cx->tmpdirs.n; i++)
                entries_add(es, cx->tmpdirs.v[i], access, false);
        } else {
            const char *t = env_vars.tmpdir;
            if (t && t[0] == '/') entries_add(es, t, access, false);
        }
    } else if (!strcmp(kind, "slash_tmp")) {
        entries_add(es, "/tmp", access, false);
    }
    /* Other kinds ("unknown" and future ones) are ignored, as the reference does. */
    return 0;
}

static int add_entry(struct ctx *cx, const struct sb_entry *ent, int glob_depth, struct entries *es,
                     struct sb_paths *deny_globs, struct sandbox_error *e)
{
    if (ent->path) {
        char *np = uri_path(ent->path, e);
        if (!np) return -EINVAL; /* uri_path filled e */
        entries_add(es, np, ent->access, false);
        free(np);
        return 0;
    }
    if (ent->pattern) {
        if (ent->pattern[0] != '/') {
            cx->dynamic = true;
            if (!cx->cwd) return 0; /* reported as "requires cwd" by sandbox_build_finish */
        }
        return glob_expand(ent->pattern, cx->cwd, ent->access, glob_depth, es, deny_globs, e);
    }
    return add_special(cx, ent->kind, ent->subpath, ent->access, es, e);
}

int sandbox_build_entry(struct sb_build *b, const struct sb_entry *ent, int glob_depth,
                        struct sandbox_error *e)
{
    int rc = add_entry(&b->cx, ent, glob_depth, &b->es, &b->deny_globs, e);
    if (rc < 0) return rc;
    return b->es.n > MAX_ENTRIES ? too_many_entries(e) : 0;
}

/* The git dir a `.git` file points to (worktrees, submodules), or NULL. Opened
 * without blocking and without following a link: this runs on the loop thread, and
 * a `.git` inside a writable root is whatever a sandboxed command made it (a FIFO
 * there held the open, and with it the whole server, until a writer came). A link is
 * refused by protect_root anyway. */
static char *gitdir_of(const char *root)
{
    char *gf = join(root, ".git");
    int fd = open(gf, O_RDONLY | O_NONBLOCK | O_NOFOLLOW | O_CLOEXEC);
    FILE *f = fd >= 0 ? fdopen(fd, "r") : NULL;
    if (fd >= 0 && !f) close(fd);
    char *res = NULL;
    struct stat st;
    if (f && fstat(fileno(f), &st) == 0 && S_ISREG(st.st_mode)) {
        char line[PATH_MAX + 16];
        if (fgets(line, sizeof line, f) && !strncmp(line, "gitdir:", 7)) {
            char *v = line + 7;
            while (*v == ' ')
                v++;
            v[strcspn(v, "\r\n")] = 0;
            if (*v) res = v[0] == '/' ? xstrdup(v) : join(root, v);
        }
    }
    if (f) fclose(f);
    free(gf);
    return res;
}

const char *const sandbox_protected_names[] = {".agents", ".aws", ".codex", ".git", NULL};

/* The explicit entry for exactly path, or NULL. */
static const struct entry *entry_for(const struct entries *es, const char *path)
{
    for (size_t i = 0; i < es->n; i++)
        if (!strcmp(es->v[i].path, path)) return &es->v[i];
    return NULL;
}

/* Keeps the protected names under one writable root read-only: each goes on the
 * protected list whatever its state now (the sandbox's setup decides at mount time,
 * when it is too late for the host to change it under the decision: an existing
 * one is bound read-only onto itself, a missing one made and covered); a symlink
 * is a refusal (a read-only bind would protect the link's target, and the link
 * itself could be replaced: the reference refuses the same way). */
static void protect_root(struct entries *es, const char *root, struct sandbox_policy *out)
{
    for (int k = 0; sandbox_protected_names[k]; k++) {
        char *j = join(root, sandbox_protected_names[k]);
        const struct entry *own = entry_for(es, j);
        struct stat st;
        if (own && !own->implicit && own->access == ACC_WRITE) {
            /* The client made it writable on purpose. */
        } else if (lstat(j, &st) == 0 && S_ISLNK(st.st_mode)) {
            if (!out->refusal)
                out->refusal = xasprintf("cannot enforce sandbox read-only path %s because it "
                                         "crosses writable symlink %s",
                                         j, j);
        } else {
            sandbox_paths_add(&out->protected_names, j);
        }
        free(j);
    }
    char *gd = gitdir_of(root);
    if (gd) {
        struct stat st;
        if (stat(gd, &st) == 0) entries_add(es, gd, ACC_READ, true);
        free(gd);
    }
}

/* A path named through a symbolic link that lies in a writable root: whoever could
 * write that root chose where the entry lands, a sandboxed command of an earlier
 * start included. Moving the real directory aside and leaving a link in its place,
 * it would have the next start with the same policy hide or protect the link's target
 * while the original, now elsewhere in the root, is open (a deny or read-only entry,
 * as the reference refuses them), or make the target writable (a writable root under
 * another: a workspace under a writable /tmp becomes /root). Refused, in the
 * reference's words; a link under a writable "/" is not looked at (the whole disk is
 * the command's already, and merged-/usr links such as /lib64 are everywhere). */
static void refuse_planted_links(const struct entries *es, struct sandbox_policy *out)
{
    static const int order[] = {ACC_READ, ACC_DENY, ACC_WRITE};
    static const char *const words[] = {"read-only", "deny-read", "writable"};
    for (int o = 0; o < 3 && !out->refusal; o++) {
        for (size_t i = 0; i < es->n && !out->refusal; i++) {
            const struct entry *en = &es->v[i];
            for (size_t k = 0; en->access == order[o] && k < en->nxing && !out->refusal; k++) {
                const struct crossing *x = &en->xing[k];
                for (size_t j = 0; j < es->n; j++) {
                    const struct entry *w = &es->v[j];
                    if (w->access != ACC_WRITE || !strcmp(w->path, "/") ||
                        !is_under(w->path, x->at))
                        continue;
                    out->refusal = xasprintf("cannot enforce sandbox %s path %s because it "
                                             "crosses writable symlink %s",
                                             words[o], x->given, x->link);
                    break;
                }
            }
        }
    }
}

/* Splits resolved entries into what Landlock and the mounts enforce. */
static void classify(struct entries *es, struct sandbox_policy *out)
{
    /* Carve-outs for each explicit writable root, as entries of their own so the
     * normal precedence applies (an explicit entry for the same path wins). */
    size_t n0 = es->n;
    for (size_t i = 0; i < n0; i++) {
        if (es->v[i].access != ACC_WRITE || es->v[i].implicit) continue;
        if (!strcmp(es->v[i].path, "/")) continue; /* full write: nothing to keep */
        char *root = xstrdup(es->v[i].path);
        protect_root(es, root, out);
        free(root);
    }
    refuse_planted_links(es, out);
    bool any_deny = false, root_read = false, root_write = false;
    for (size_t i = 0; i < es->n; i++) {
        struct entry *en = &es->v[i];
        if (en->access == ACC_DENY) any_deny = true;
        if (!strcmp(en->path, "/")) {
            if (en->access >= ACC_READ && en->access != ACC_DENY) root_read = true;
            if (en->access == ACC_WRITE) root_write = true;
        }
        /* The nearest ancestor entry decides what the kernel must add. */
        const struct entry *anc = NULL;
        for (size_t j = 0; j < es->n; j++) {
            if (j == i || !is_under(es->v[j].path, en->path)) continue;
            if (!anc || strlen(es->v[j].path) > strlen(anc->path)) anc = &es->v[j];
        }
        int parent = anc ? anc->access : 0;
        switch (en->access) {
        case ACC_READ:
            if (parent == ACC_WRITE)
                sandbox_paths_add(&out->readonly_sub, en->path);
            else
                sandbox_paths_add(&out->readable, en->path);
            break;
        case ACC_WRITE: sandbox_paths_add(&out->writable, en->path); break;
        case ACC_DENY:
            /* Outside every granted root Landlock already denies. */
            if (parent == ACC_READ || parent == ACC_WRITE)
                sandbox_paths_add(&out->denied, en->path);
            break;
        }
    }
    out->full_read = root_read && !any_deny;
    out->full_write = root_write && !any_deny;
}

int sandbox_build_context(struct sb_build *b, const char *cwd, const char *fallback_cwd,
                          const char *const *roots, size_t nroots, const char *const *tmps,
                          size_t ntmps, struct sandbox_error *err)
{
    struct ctx *cx = &b->cx;
    if (cwd) {
        cx->cwd = uri_path(cwd, err);
        if (!cx->cwd) return -EINVAL;
    } else if (fallback_cwd) {
        cx->cwd = xstrdup(fallback_cwd);
    }
    if (nroots + ntmps > MAX_ENTRIES) return too_many_entries(err);
    for (size_t i = 0; i < nroots; i++) {
        char *r = uri_path(roots[i], err);
        if (!r) return -EINVAL;
        sandbox_paths_add(&cx->roots, r); /* as named: entries_add resolves it */
        free(r);
    }
    for (size_t i = 0; i < ntmps; i++) {
        char *r = uri_path(tmps[i], err);
        if (!r) return -EINVAL;
        sandbox_paths_add(&cx->tmpdirs, r);
        free(r);
    }
    return 0;
}

int sandbox_build_finish(struct sb_build *b, bool net_restricted, bool enforce_fs,
                         struct sandbox_policy *out, struct sandbox_error *err)
{
    if (b->cx.dynamic && !b->cx.cwd) {
        err->kind = SANDBOX_ERR_INVALID;
        snprintf(err->message, sizeof err->message,
                 "file system sandbox context with dynamic permissions requires cwd");
        return -EINVAL;
    }
    out->sandboxed = true;
    out->net_restricted = net_restricted;
    out->enforce_fs = enforce_fs;
    if (enforce_fs) classify(&b->es, out);
    if (enforce_fs && b->deny_globs.n) {
        out->deny_globs = b->deny_globs;
        memset(&b->deny_globs, 0, sizeof b->deny_globs);
        out->full_read = out->full_write = false;
    }
    out->cwd = b->cx.cwd;
    b->cx.cwd = NULL;
    return 0;
}

bool sandbox_policy_needs_fs(const struct sandbox_policy *p, bool reads, bool writes)
{
    /* Even with full-disk access for the operation, a restricted policy runs it in
     * the helper: the server itself (often root) could otherwise read what no
     * sandboxed process can, /proc/<pid>/environ of the server and every other
     * process, a raw disk under /dev, /proc/kcore. The helper's view has its own
     * /proc and /dev and no capabilities (the reference reads these directly). */
    (void)reads;
    (void)writes;
    return p->enforce_fs;
}

bool sandbox_policy_needs_process(const struct sandbox_policy *p)
{
    return p->enforce_fs || p->net_restricted;
}

void sandbox_policy_spec(const struct sandbox_policy *p, struct sandbox_spec *out)
{
    memset(out, 0, sizeof *out);
    out->enforce_fs = p->enforce_fs;
    out->net_restricted = p->net_restricted;
    out->readable = (const char *const *)p->readable.v;
    out->writable = (const char *const *)p->writable.v;
    out->readonly_sub = (const char *const *)p->readonly_sub.v;
    out->denied = (const char *const *)p->denied.v;
    out->protected_names = (const char *const *)p->protected_names.v;
    out->deny_globs = (const char *const *)p->deny_globs.v;
}
