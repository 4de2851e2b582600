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

/* One walk's state: its output so far and its queue of directories to enter. */
struct walk {
    const struct fs_walk_opts *o;
    struct buf entries, errors;
    bool first_entry, first_error;
    size_t budget;
    bool truncated;
    bool stop;          /* the response budget or the entry limit ended the walk */
    struct idset seen;  /* the directories queued, when links are followed */
    struct walk_dir *q; /* breadth first: entered from qhead, queued at qlen */
    size_t qhead, qlen, qcap;
    uint64_t ndirs, nentries;
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

/* The names in directory path but "." and "..", sorted (byte order), *n of them; NULL
 * with *n 0 when it does not open. Either error is recorded (a read error keeps the
 * names read before it). */
static struct name_ent *dir_names_sorted(struct walk *wk, const char *path, size_t *n)
{
    *n = 0;
    DIR *dir = opendir(path);
    if (!dir) {
        if (!walk_error(wk, path, errno)) wk->stop = true;
        return NULL;
    }
    struct name_ent *names = NULL;
    size_t nn = 0, ncap = 0;
    for (;;) {
        errno = 0;
        struct dirent *de = readdir(dir);
        if (!de) {
            if (errno && !walk_error(wk, path, errno)) wk->stop = true;
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
    *n = nn;
    return names;
}

/* Whether child (readdir's type t) is listed: a regular file, a directory, or with
 * following on a link to a directory; *isdir says which, *cst holds its identity where
 * following needs it. An lstat that fails is recorded and the child left out. */
static bool child_listed(struct walk *wk, const char *child, unsigned char t, struct stat *cst,
                         bool *isdir)
{
    bool follow = wk->o->follow_dir_links;
    *isdir = false;
    /* Without symlink following no directory can be reached twice (there are no
     * directory hard links), so the identity set and the lstat it needs are skipped
     * whenever readdir already told the type. */
    if (!follow && (t == DT_REG || t == DT_DIR)) {
        *isdir = t == DT_DIR;
        cst->st_dev = 0;
        cst->st_ino = 0;
        return true;
    }
    if (!follow && t != DT_UNKNOWN && t != DT_LNK) return false; /* FIFOs, sockets, devices */
    if (lstat(child, cst) < 0) {
        if (!walk_error(wk, child, errno)) wk->stop = true;
        return false;
    }
    if (S_ISLNK(cst->st_mode)) {
        *isdir = follow && stat(child, cst) == 0 && S_ISDIR(cst->st_mode);
        return *isdir;
    }
    *isdir = S_ISDIR(cst->st_mode);
    return *isdir || S_ISREG(cst->st_mode);
}

/* Queues path (owned) to be entered at depth. */
static void queue_push(struct walk *wk, char *path, uint64_t depth)
{
    if (wk->qlen == wk->qcap) {
        wk->qcap = wk->qcap ? wk->qcap * 2 : 16;
        wk->q = xrealloc(wk->q, wk->qcap * sizeof *wk->q);
    }
    wk->q[wk->qlen++] = (struct walk_dir){path, depth};
}

/* Whether directory child (listed, with identity *cst) is entered later: within the
 * depth, not pruned, not seen, and below the directory limit (which truncates the
 * walk). Takes child when it returns true. */
static bool dir_queued(struct walk *wk, const struct walk_dir *cur, const char *name, char *child,
                       const struct stat *cst)
{
    const struct fs_walk_opts *o = wk->o;
    if (cur->depth >= o->max_depth || (o->prune_hidden && name[0] == '.') ||
        (o->follow_dir_links && idset_has(&wk->seen, cst->st_dev, cst->st_ino)))
        return false;
    if (wk->ndirs >= o->max_dirs) {
        wk->truncated = true;
        return false;
    }
    wk->ndirs++;
    if (o->follow_dir_links) idset_add(&wk->seen, cst->st_dev, cst->st_ino);
    queue_push(wk, child, cur->depth + 1);
    return true;
}

/* Lists the entries of one directory of the queue, queueing those to enter. */
static void walk_dir_entries(struct walk *wk, const struct walk_dir *cur)
{
    size_t nn;
    struct name_ent *names = dir_names_sorted(wk, cur->path, &nn);
    for (size_t i = 0; i < nn && !wk->stop; i++) {
        if (wk->nentries >= wk->o->max_entries) {
            wk->truncated = true;
            wk->stop = true;
            break;
        }
        wk->nentries++;
        char *child = fs_path_join(cur->path, names[i].name);
        struct stat cst;
        bool isdir;
        if (child_listed(wk, child, names[i].type, &cst, &isdir) && !wk->stop) {
            if (!walk_entry(wk, child, isdir))
                wk->stop = true;
            else if (isdir && dir_queued(wk, cur, names[i].name, child, &cst))
                child = NULL;
        }
        free(child);
    }
    for (size_t i = 0; i < nn; i++)
        free(names[i].name);
    free(names);
}

int fs_walk(char *root, const struct fs_walk_opts *o, struct buf *out)
{
    struct stat st;
    if (lstat(root, &st) < 0) return errno;
    struct walk wk = {.o = o, .first_entry = true, .first_error = true};
    buf_init(&wk.entries);
    buf_init(&wk.errors);
    bool walkable = S_ISDIR(st.st_mode);
    if (S_ISLNK(st.st_mode) && o->follow_dir_links && stat(root, &st) == 0 && S_ISDIR(st.st_mode))
        walkable = true;
    if (walkable) {
        idset_add(&wk.seen, st.st_dev, st.st_ino);
        wk.ndirs = 1;
        fs_path_strip_slashes(root);
        queue_push(&wk, xstrdup(root), 0);
    }
    while (!wk.stop && wk.qhead < wk.qlen) {
        struct walk_dir cur = wk.q[wk.qhead++]; /* a copy: the queue may move */
        walk_dir_entries(&wk, &cur);
        free(cur.path);
    }
    for (; wk.qhead < wk.qlen; wk.qhead++)
        free(wk.q[wk.qhead].path);
    free(wk.q);
    free(wk.seen.keys);
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
