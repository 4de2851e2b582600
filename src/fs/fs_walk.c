/* fs_walk: the breadth-first directory walk of fs/walk (PROTOCOL.md section 6.11).
 *
 * Runs on the thread pool: plain blocking file-system calls, no loop state. Names
 * are sorted per directory (byte order), symlinks are skipped unless they lead to a
 * directory and following is on, and each limit stops or trims the walk the way the
 * reference does, setting "truncated". */
#include <dirent.h>
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "fs/fs_util.h"
#include "fs/fs_walk.h"
#include "proto/uri.h"
#include "util/mem.h"
#include "util/oserr.h"

struct walk_dir {
    char *path;
    uint64_t depth;
};

struct idset {
    uint64_t *keys; /* dev/ino pairs hashed into slots of 2 */
    size_t cap, n;
};

static bool idset_add(struct idset *s, dev_t dev, ino_t ino)
{
    if ((s->n + 1) * 2 > s->cap) {
        size_t ncap = s->cap ? s->cap * 2 : 64;
        uint64_t *nk = xcalloc(ncap * 2, sizeof *nk);
        for (size_t i = 0; i < s->cap; i++) {
            uint64_t d = s->keys[2 * i], n = s->keys[2 * i + 1];
            if (!d && !n) continue;
            size_t j = (size_t)((d * 0x9E3779B97F4A7C15ull) ^ n) % ncap;
            while (nk[2 * j] || nk[2 * j + 1])
                j = (j + 1) % ncap;
            nk[2 * j] = d;
            nk[2 * j + 1] = n;
        }
        free(s->keys);
        s->keys = nk;
        s->cap = ncap;
    }
    uint64_t d = (uint64_t)dev + 1, n = (uint64_t)ino;
    size_t j = (size_t)((d * 0x9E3779B97F4A7C15ull) ^ n) % s->cap;
    while (s->keys[2 * j] || s->keys[2 * j + 1]) {
        if (s->keys[2 * j] == d && s->keys[2 * j + 1] == n) return false;
        j = (j + 1) % s->cap;
    }
    s->keys[2 * j] = d;
    s->keys[2 * j + 1] = n;
    s->n++;
    return true;
}

static bool idset_has(struct idset *s, dev_t dev, ino_t ino)
{
    if (!s->cap) return false;
    uint64_t d = (uint64_t)dev + 1, n = (uint64_t)ino;
    size_t j = (size_t)((d * 0x9E3779B97F4A7C15ull) ^ n) % s->cap;
    while (s->keys[2 * j] || s->keys[2 * j + 1]) {
        if (s->keys[2 * j] == d && s->keys[2 * j + 1] == n) return true;
        j = (j + 1) % s->cap;
    }
    return false;
}

/* A directory entry as readdir gave it: its name and, when the file system
 * reports it, its type, which spares an lstat for most entries. */
struct name_ent {
    char *name;
    unsigned char type; /* DT_* from readdir; DT_UNKNOWN means "lstat to know" */
};

static int cmp_names(const void *a, const void *b)
{
    return strcmp(((const struct name_ent *)a)->name, ((const struct name_ent *)b)->name);
}

struct walk {
    struct buf entries, errors;
    bool first_entry, first_error;
    size_t budget;
    bool truncated;
};

/* Returns false when the budget is exhausted (the walk stops). */
static bool walk_error(struct walk *wk, const char *path, int e)
{
    char msg[256];
    oserr_format(e, msg, sizeof msg);
    char *u = uri_from_path(path, strlen(path));
    size_t cost = strlen(u) + strlen(msg) + 64;
    if (wk->budget + cost > WALK_BUDGET) {
        free(u);
        wk->truncated = true;
        return false;
    }
    wk->budget += cost;
    if (!wk->first_error) buf_putc(&wk->errors, ',');
    wk->first_error = false;
    buf_puts(&wk->errors, "{\"path\":");
    buf_put_json_str(&wk->errors, u, strlen(u));
    buf_puts(&wk->errors, ",\"message\":");
    buf_put_json_str(&wk->errors, msg, strlen(msg));
    buf_putc(&wk->errors, '}');
    free(u);
    return true;
}

static bool walk_entry(struct walk *wk, const char *path, bool dir)
{
    char *u = uri_from_path(path, strlen(path));
    size_t cost = strlen(u) + 64;
    if (wk->budget + cost > WALK_BUDGET) {
        free(u);
        wk->truncated = true;
        return false;
    }
    wk->budget += cost;
    if (!wk->first_entry) buf_putc(&wk->entries, ',');
    wk->first_entry = false;
    buf_puts(&wk->entries, "{\"path\":");
    buf_put_json_str(&wk->entries, u, strlen(u));
    buf_puts(&wk->entries, dir ? ",\"kind\":\"directory\"}" : ",\"kind\":\"file\"}");
    free(u);
    return true;
}

int fs_walk(char *root, const struct fs_walk_opts *o, struct buf *out)
{
    struct stat st;
    if (lstat(root, &st) < 0) return errno;
    struct walk wk = {.first_entry = true, .first_error = true};
    buf_init(&wk.entries);
    buf_init(&wk.errors);
    struct idset seen = {0};
    struct walk_dir *q = NULL;
    size_t qhead = 0, qlen = 0, qcap = 0;
    bool walkable = S_ISDIR(st.st_mode);
    if (S_ISLNK(st.st_mode) && o->follow_dir_links && stat(root, &st) == 0 && S_ISDIR(st.st_mode))
        walkable = true;
    uint64_t ndirs = 0, nentries = 0;
    if (walkable) {
        idset_add(&seen, st.st_dev, st.st_ino);
        ndirs = 1;
        qcap = 16;
        q = xmalloc(qcap * sizeof *q);
        fs_path_strip_slashes(root);
        q[qlen++] = (struct walk_dir){xstrdup(root), 0};
    }
    bool stop = false;
    while (!stop && qhead < qlen) {
        struct walk_dir cur = q[qhead++];
        DIR *dir = opendir(cur.path);
        if (!dir) {
            if (!walk_error(&wk, cur.path, errno)) stop = true;
            free(cur.path);
            continue;
        }
        struct name_ent *names = NULL;
        size_t nn = 0, ncap = 0;
        for (;;) {
            errno = 0;
            struct dirent *de = readdir(dir);
            if (!de) {
                if (errno && !walk_error(&wk, cur.path, errno)) stop = true;
                break;
            }
            if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, "..")) continue;
            if (nn == ncap) {
                ncap = ncap ? ncap * 2 : 32;
                names = xrealloc(names, ncap * sizeof *names);
            }
            names[nn++] = (struct name_ent){xstrdup(de->d_name), de->d_type};
        }
        closedir(dir);
        if (nn > 1) qsort(names, nn, sizeof *names, cmp_names);
        for (size_t i = 0; i < nn && !stop; i++) {
            if (nentries >= o->max_entries) {
                wk.truncated = true;
                stop = true;
                break;
            }
            nentries++;
            char *child = fs_path_join(cur.path, names[i].name);
            struct stat cst;
            bool keep = true, isdir = false;
            unsigned char t = names[i].type;
            /* Without symlink following no directory can be reached twice (there are
             * no directory hard links), so the identity set and the lstat it needs
             * are skipped whenever readdir already told the type. */
            if (!o->follow_dir_links && (t == DT_REG || t == DT_DIR)) {
                isdir = t == DT_DIR;
                cst.st_dev = 0;
                cst.st_ino = 0;
            } else if (!o->follow_dir_links && t != DT_UNKNOWN && t != DT_LNK) {
                keep = false; /* FIFOs, sockets, devices: never listed */
            } else if (lstat(child, &cst) < 0) {
                if (!walk_error(&wk, child, errno)) stop = true;
                keep = false;
            } else if (S_ISLNK(cst.st_mode)) {
                if (o->follow_dir_links && stat(child, &cst) == 0 && S_ISDIR(cst.st_mode))
                    isdir = true;
                else
                    keep = false;
            } else if (S_ISDIR(cst.st_mode)) {
                isdir = true;
            } else if (!S_ISREG(cst.st_mode)) {
                keep = false;
            }
            if (keep && !stop) {
                if (!walk_entry(&wk, child, isdir)) {
                    stop = true;
                } else if (isdir && cur.depth < o->max_depth &&
                           !(o->prune_hidden && names[i].name[0] == '.') &&
                           (!o->follow_dir_links || !idset_has(&seen, cst.st_dev, cst.st_ino))) {
                    if (ndirs >= o->max_dirs) {
                        wk.truncated = true;
                    } else {
                        ndirs++;
                        if (o->follow_dir_links) idset_add(&seen, cst.st_dev, cst.st_ino);
                        if (qlen == qcap) {
                            qcap *= 2;
                            q = xrealloc(q, qcap * sizeof *q);
                        }
                        q[qlen++] = (struct walk_dir){child, cur.depth + 1};
                        child = NULL;
                    }
                }
            }
            free(child);
        }
        for (size_t i = 0; i < nn; i++)
            free(names[i].name);
        free(names);
        free(cur.path);
    }
    for (; qhead < qlen; qhead++)
        free(q[qhead].path);
    free(q);
    free(seen.keys);
    buf_reserve(out, wk.entries.len + wk.errors.len + 64);
    buf_puts(out, "{\"entries\":[");
    if (wk.entries.len) buf_append(out, wk.entries.data, wk.entries.len);
    buf_puts(out, "],\"errors\":[");
    if (wk.errors.len) buf_append(out, wk.errors.data, wk.errors.len);
    buf_printf(out, "],\"truncated\":%s}", wk.truncated ? "true" : "false");
    buf_free(&wk.entries);
    buf_free(&wk.errors);
    return 0;
}
