/* path_rules: a resolved policy asked of one path (see path_rules.h). */
#include "sandbox/path_rules.h"

#include <fnmatch.h>
#include <limits.h>
#include <string.h>

/* Whether anc is path or a component-wise ancestor of it. */
static bool at_or_under(const char *anc, const char *path)
{
    size_t n = strlen(anc);
    if (n == 1 && anc[0] == '/') return path[0] == '/';
    return strncmp(anc, path, n) == 0 && (path[n] == '/' || path[n] == 0);
}

/* Whether path lies strictly under anc. */
static bool strictly_under(const char *anc, const char *path)
{
    return at_or_under(anc, path) && strcmp(anc, path) != 0;
}

bool path_rules_glob_match(const char *pat, const char *str)
{
    while (*pat == '/')
        pat++;
    while (*str == '/')
        str++;
    if (!*pat) return !*str;
    const char *pe = strchr(pat, '/');
    size_t pl = pe ? (size_t)(pe - pat) : strlen(pat);
    if (pl == 2 && pat[0] == '*' && pat[1] == '*') {
        for (const char *s = str;;) {
            if (path_rules_glob_match(pat + 2, s)) return true;
            const char *n = strchr(s, '/');
            if (!n) return false;
            s = n + 1;
        }
    }
    if (!*str) return false;
    const char *se = strchr(str, '/');
    size_t sl = se ? (size_t)(se - str) : strlen(str);
    char ps[NAME_MAX + 1], ss[NAME_MAX + 1];
    if (pl > NAME_MAX || sl > NAME_MAX) return false;
    memcpy(ps, pat, pl);
    ps[pl] = 0;
    memcpy(ss, str, sl);
    ss[sl] = 0;
    if (fnmatch(ps, ss, FNM_PERIOD) != 0) return false;
    return path_rules_glob_match(pat + pl, str + sl);
}

/* Whether a glob matches path or one of its ancestors (a matched directory denies
 * what is in it). */
static bool glob_covers(const char *pattern, const char *path)
{
    char pre[PATH_MAX];
    size_t n = strlen(path);
    if (n >= sizeof pre) return true; /* cannot be judged: fail closed */
    memcpy(pre, path, n + 1);
    for (;;) {
        if (path_rules_glob_match(pattern, pre)) return true;
        char *slash = strrchr(pre, '/');
        if (!slash || slash == pre) return false;
        *slash = 0;
    }
}

bool path_rules_denied(const struct sandbox_spec *s, const char *path)
{
    for (const char *const *p = s->denied; p && *p; p++)
        if (at_or_under(*p, path)) return true;
    for (const char *const *g = s->deny_globs; g && *g; g++)
        if (glob_covers(*g, path)) return true;
    return false;
}

/* The longest entry of list at or above path: its length, or 0. */
static size_t longest(const char *const *list, const char *path)
{
    size_t best = 0;
    for (const char *const *p = list; p && *p; p++) {
        size_t n = strlen(*p);
        if (n > best && at_or_under(*p, path)) best = n;
    }
    return best;
}

enum path_access path_rules_access(const struct sandbox_spec *s, const char *path)
{
    return path_rules_denied(s, path) ? PATH_NONE : path_rules_granted(s, path);
}

enum path_access path_rules_granted(const struct sandbox_spec *s, const char *path)
{
    if (path[0] != '/') return PATH_NONE;
    if (!s->enforce_fs) return PATH_WRITE;
    size_t ro = longest(s->readonly_sub, path), pn = longest(s->protected_names, path);
    if (pn > ro) ro = pn;
    size_t w = longest(s->writable, path), r = longest(s->readable, path);
    /* Ties cannot happen between lists of one policy (each path is classified once);
     * a read-only carve-out is always under a writable root, so longer. */
    if (ro && ro >= w && ro >= r) return PATH_READ;
    if (w && w >= r) return PATH_WRITE;
    return r ? PATH_READ : PATH_NONE;
}

/* A glob's base: the directory its fixed part names (everything before the segment
 * with the first wildcard), into base. Returns the offset of the rest of the pattern. */
static size_t glob_base(const char *glob, char *base, size_t cap)
{
    const char *meta = strpbrk(glob, "*?[");
    size_t fixed = meta ? (size_t)(meta - glob) : strlen(glob);
    while (fixed > 0 && glob[fixed - 1] != '/')
        fixed--;
    size_t bl = fixed > 1 ? fixed - 1 : 1;
    if (bl >= cap) bl = cap - 1;
    memcpy(base, glob, bl);
    base[bl] = 0;
    return fixed;
}

/* Whether what a glob matches below a directory moved from `from` to `to` stays
 * matched: the glob is BASE, then a `**` segment, then one name pattern (any depth,
 * no other slash), and both ends are inside BASE, or the move does not touch BASE's tree. */
static bool glob_kept(const char *glob, const char *from, const char *to)
{
    char base[PATH_MAX];
    size_t rest = glob_base(glob, base, sizeof base);
    if (!at_or_under(base, from) && !at_or_under(from, base)) return true;
    const char *tail = glob + rest;
    bool any_depth_name = strncmp(tail, "**/", 3) == 0 && !strchr(tail + 3, '/');
    return any_depth_name && strictly_under(base, from) && strictly_under(base, to);
}

bool path_rules_rename_keeps(const struct sandbox_spec *s, const char *from, const char *to)
{
    const char *const *lists[] = {s->denied, s->readonly_sub, s->protected_names};
    for (size_t i = 0; i < sizeof lists / sizeof lists[0]; i++)
        for (const char *const *p = lists[i]; p && *p; p++)
            if (strictly_under(from, *p)) return false;
    for (const char *const *g = s->deny_globs; g && *g; g++)
        if (!glob_kept(*g, from, to)) return false;
    return true;
}
