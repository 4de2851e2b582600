/* fs_methods: the filesystem JSON-RPC methods (PROTOCOL.md section 6).
 *
 * Each handler decodes its params, passes the lifecycle gate, validates, and then
 * hands a self-contained struct fs_work to the libuv thread pool: the worker does
 * all file I/O and writes the result JSON text straight into the outgoing message
 * buffer (started on the loop thread with rpc_result_begin), or records an error.
 * The after-work callback, back on the loop thread, sends one or the other.
 *
 * Open file handles (fs/open, fs/readBlock, fs/close) live in a per-connection
 * table kept in the connection's CONN_SLOT_FS slot. A handle is reference counted
 * on the loop thread so an fs/close racing an in-flight fs/readBlock never closes
 * the descriptor under the worker. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fs/fs_tree.h"
#include "fs/fs_util.h"
#include "fs/fs_walk.h"
#include "fs/uri.h"
#include "rpc/dispatch.h"
#include "rpc/params.h"
#include "rpc/rpc.h"
#include "transport/conn.h"
#include "util/base64.h"
#include "util/buf.h"
#include "util/mem.h"
#include "util/oserr.h"

#define FS_READ_LIMIT 536870912ull
#define FS_MAX_HANDLES 128
#define FS_HANDLE_ID_MAX 32
#define FS_BLOCK_MAX 1048576ull
#define READDIR_LIMIT 50000

/* ---- open file handles ------------------------------------------------------- */

struct fs_handle {
    int refs;
    int fd;
    size_t id_len;
    char id[FS_HANDLE_ID_MAX + 1];
};

struct fs_table {
    int count;
    struct fs_handle *slots[FS_MAX_HANDLES];
};

static void handle_unref(struct fs_handle *h)
{
    if (--h->refs > 0) return;
    close(h->fd);
    free(h);
}

static void table_free(void *p)
{
    struct fs_table *t = p;
    for (int i = 0; i < FS_MAX_HANDLES; i++)
        if (t->slots[i]) handle_unref(t->slots[i]);
    free(t);
}

static struct fs_table *table_get(struct conn *c, bool create)
{
    struct fs_table *t = conn_slot_get(c, CONN_SLOT_FS);
    if (!t && create && conn_is_open(c)) {
        t = xcalloc(1, sizeof *t);
        conn_slot_set(c, CONN_SLOT_FS, t, table_free);
    }
    return t;
}

static int table_find(struct fs_table *t, const char *id, size_t len)
{
    if (!t) return -1;
    for (int i = 0; i < FS_MAX_HANDLES; i++) {
        struct fs_handle *h = t->slots[i];
        if (h && h->id_len == len && memcmp(h->id, id, len) == 0) return i;
    }
    return -1;
}

/* ---- work items --------------------------------------------------------------- */

enum fs_op {
    OP_READ_FILE,
    OP_WRITE_FILE,
    OP_CREATE_DIR,
    OP_METADATA,
    OP_CANONICALIZE,
    OP_READ_DIR,
    OP_REMOVE,
    OP_COPY,
    OP_WALK,
    OP_OPEN,
    OP_READ_BLOCK,
    OP_WRITE_BLOCK,
};

struct fs_work {
    uv_work_t w;
    struct rpc_req *req;
    enum fs_op op;
    char *path, *path2;
    size_t path_len, path2_len;
    bool recursive, force;
    bool nofollow; /* followSymlinks:false (PROTOCOL.md section 6.13) */
    /* writeFile */
    char *b64;
    size_t b64_len;
    /* walk */
    uint64_t max_depth, max_dirs, max_entries;
    bool follow_dir_links, prune_hidden;
    /* open / readBlock */
    char hid[FS_HANDLE_ID_MAX + 1];
    size_t hid_len;
    int fd;
    struct fs_handle *h;
    uint64_t offset, len;
    bool replace;  /* fs/open mode "replace" */
    uint8_t *data; /* fs/writeBlock: decoded chunk */
    size_t data_len;
    /* outcome */
    struct buf out; /* the reply message, begun on the loop thread */
    int err;        /* errno to report, or 0 */
    int code;       /* validation error code when msg is set */
    char *msg;      /* validation error text */
};

static void set_err(struct fs_work *fw, int e)
{
    if (!fw->err && !fw->msg) fw->err = e ? e : EIO;
}

static void set_msg(struct fs_work *fw, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void set_msg(struct fs_work *fw, int code, const char *fmt, ...)
{
    if (fw->err || fw->msg) return;
    struct buf b;
    buf_init(&b);
    va_list ap;
    va_start(ap, fmt);
    buf_vprintf(&b, fmt, ap);
    va_end(ap);
    buf_putc(&b, '\0');
    fw->msg = buf_steal(&b);
    fw->code = code;
}

static bool failed(const struct fs_work *fw)
{
    return fw->err || fw->msg;
}

/* ``path `<path>` is not a file``, the path shown as Rust's Path::display does
 * (invalid UTF-8 replaced, so the reply stays valid JSON). */
static void not_a_file(struct fs_work *fw, const char *path)
{
    struct buf b;
    buf_init(&b);
    fs_utf8_lossy(&b, path, strlen(path));
    buf_putc(&b, '\0');
    set_msg(fw, RPC_INVALID_REQUEST, "path `%s` is not a file", b.data);
    buf_free(&b);
}

/* ---- readFile / writeFile ------------------------------------------------------ */

static bool read_full(int fd, char *p, size_t n, size_t *got, int *err)
{
    size_t done = 0;
    while (done < n) {
        ssize_t r = read(fd, p + done, n - done);
        if (r < 0) {
            if (errno == EINTR) continue;
            *err = errno;
            *got = done;
            return false;
        }
        if (r == 0) break;
        done += (size_t)r;
    }
    *got = done;
    return true;
}

/* followSymlinks:false. Opens the parent directory of path one component at a
 * time without following symlinks (a symlinked component fails with ENOTDIR) and
 * points *leaf at the last component. Returns an O_PATH descriptor, or -1 with
 * errno set. path must be absolute with no trailing slash. */
static int open_parent_nofollow(const char *path, const char **leaf)
{
    const char *last = strrchr(path, '/');
    *leaf = last[1] ? last + 1 : ".";
    int fd = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) return -1;
    const char *p = path + 1;
    while (p < last) {
        const char *e = memchr(p, '/', (size_t)(last - p));
        if (!e) e = last;
        size_t n = (size_t)(e - p);
        if (n > 0) {
            char comp[NAME_MAX + 1];
            if (n > NAME_MAX) {
                close(fd);
                errno = ENAMETOOLONG;
                return -1;
            }
            memcpy(comp, p, n);
            comp[n] = '\0';
            int nfd = openat(fd, comp, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
            int e2 = errno;
            close(fd);
            if (nfd < 0) {
                errno = e2;
                return -1;
            }
            fd = nfd;
        }
        p = e + 1;
    }
    return fd;
}

static int open_regular(struct fs_work *fw, const char *path)
{
    int fd;
    if (fw->nofollow) {
        const char *leaf;
        int pfd = open_parent_nofollow(path, &leaf);
        if (pfd < 0) {
            set_err(fw, errno);
            return -1;
        }
        fd = openat(pfd, leaf, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOFOLLOW);
        int e = errno;
        close(pfd);
        errno = e;
    } else {
        fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    }
    if (fd < 0) {
        set_err(fw, errno);
        return -1;
    }
    struct stat st;
    if (fstat(fd, &st) < 0) {
        set_err(fw, errno);
        close(fd);
        return -1;
    }
    if (!S_ISREG(st.st_mode)) {
        not_a_file(fw, path);
        close(fd);
        return -1;
    }
    int fl = fcntl(fd, F_GETFL);
    if (fl >= 0) fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
    return fd;
}

/* Large reply buffers are filled once, front to back: ask for transparent huge
 * pages so the first touch costs one fault per 2 MiB instead of per 4 KiB. */
static void advise_huge(char *p, size_t n)
{
    const uintptr_t huge = 2u << 20;
    if (n < 2 * huge) return;
    uintptr_t start = ((uintptr_t)p + huge - 1) & ~(huge - 1);
    uintptr_t end = ((uintptr_t)p + n) & ~(huge - 1);
    if (end > start) madvise((void *)start, end - start, MADV_HUGEPAGE);
}

static void do_read_file(struct fs_work *fw)
{
    if (fw->nofollow) fs_path_strip_slashes(fw->path);
    int fd = open_regular(fw, fw->path);
    if (fd < 0) return;
    struct stat st;
    if (fstat(fd, &st) < 0) {
        set_err(fw, errno);
        close(fd);
        return;
    }
    if ((uint64_t)st.st_size > FS_READ_LIMIT) {
        set_msg(fw, RPC_INVALID_REQUEST, "file is too large to read: limit is %llu bytes",
                (unsigned long long)FS_READ_LIMIT);
        close(fd);
        return;
    }
    enum { CHUNK = 3 << 20 };
    char *chunk = xmalloc(CHUNK);
    buf_reserve(&fw->out, base64_encoded_len((size_t)st.st_size) + 64);
    advise_huge(fw->out.data + fw->out.len, fw->out.cap - fw->out.len);
    buf_puts(&fw->out, "{\"dataBase64\":\"");
    uint64_t total = 0;
    for (;;) {
        size_t got;
        int e = 0;
        if (!read_full(fd, chunk, CHUNK, &got, &e)) {
            set_err(fw, e);
            break;
        }
        total += got;
        if (total > FS_READ_LIMIT) {
            set_msg(fw, RPC_INVALID_REQUEST, "file is too large to read: limit is %llu bytes",
                    (unsigned long long)FS_READ_LIMIT);
            break;
        }
        char *dst = buf_extend(&fw->out, base64_encoded_len(got));
        base64_encode(chunk, got, dst);
        if (got < CHUNK) break;
    }
    buf_puts(&fw->out, "\"}");
    free(chunk);
    close(fd);
}

static void do_write_file(struct fs_work *fw)
{
    uint8_t *data = xmalloc(base64_decoded_max(fw->b64_len) + 1);
    size_t n = 0;
    char detail[128];
    if (base64_decode(fw->b64, fw->b64_len, data, &n, detail, sizeof detail) < 0) {
        set_msg(fw, RPC_INVALID_REQUEST, "fs/writeFile requires valid base64 dataBase64: %s",
                detail);
        free(data);
        return;
    }
    free(fw->b64);
    fw->b64 = NULL;
    int fd;
    if (fw->nofollow) {
        const char *leaf;
        fs_path_strip_slashes(fw->path);
        int pfd = open_parent_nofollow(fw->path, &leaf);
        fd = pfd < 0
                 ? -1
                 : openat(pfd, leaf, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0666);
        int e = errno;
        if (pfd >= 0) close(pfd);
        errno = e;
    } else {
        fd = open(fw->path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
    }
    if (fd < 0) {
        set_err(fw, errno);
        free(data);
        return;
    }
    size_t done = 0;
    while (done < n) {
        ssize_t w = write(fd, data + done, n - done);
        if (w < 0) {
            if (errno == EINTR) continue;
            set_err(fw, errno);
            break;
        }
        done += (size_t)w;
    }
    if (close(fd) < 0 && !failed(fw)) set_err(fw, errno);
    free(data);
    if (!failed(fw)) buf_puts(&fw->out, "{}");
}

/* ---- createDirectory / getMetadata / canonicalize ------------------------------ */

static void do_create_dir(struct fs_work *fw)
{
    fs_path_strip_slashes(fw->path);
    if (fw->nofollow) {
        int e = 0;
        if (fw->recursive) {
            e = mkdir_all_nofollow(fw->path);
        } else {
            const char *leaf;
            int pfd = open_parent_nofollow(fw->path, &leaf);
            if (pfd < 0 || mkdirat(pfd, leaf, 0777) < 0) e = errno;
            if (pfd >= 0) close(pfd);
        }
        if (e)
            set_err(fw, e);
        else
            buf_puts(&fw->out, "{}");
        return;
    }
    if (fw->recursive) {
        int e = mkdir_all(fw->path);
        if (e) set_err(fw, e);
    } else if (mkdir(fw->path, 0777) < 0) {
        set_err(fw, errno);
    }
    if (!failed(fw)) buf_puts(&fw->out, "{}");
}

static int64_t ts_ms(int64_t sec, uint32_t nsec)
{
    if (sec < 0) return 0;
    return sec * 1000 + nsec / 1000000;
}

static void do_metadata(struct fs_work *fw)
{
    struct statx sx;
    struct stat lst;
    if (fw->nofollow) {
        const char *leaf;
        fs_path_strip_slashes(fw->path);
        int pfd = open_parent_nofollow(fw->path, &leaf);
        if (pfd < 0) {
            set_err(fw, errno);
            return;
        }
        int r = statx(pfd, leaf, AT_SYMLINK_NOFOLLOW, STATX_BASIC_STATS | STATX_BTIME, &sx);
        int e = errno;
        close(pfd);
        if (r < 0) {
            set_err(fw, e);
            return;
        }
        if (S_ISLNK(sx.stx_mode)) {
            set_msg(fw, RPC_INVALID_REQUEST, "path contains a symbolic link");
            return;
        }
        lst.st_mode = sx.stx_mode;
    } else {
        if (statx(AT_FDCWD, fw->path, 0, STATX_BASIC_STATS | STATX_BTIME, &sx) < 0) {
            set_err(fw, errno);
            return;
        }
        if (lstat(fw->path, &lst) < 0) {
            set_err(fw, errno);
            return;
        }
    }
    int64_t created =
        (sx.stx_mask & STATX_BTIME) ? ts_ms(sx.stx_btime.tv_sec, sx.stx_btime.tv_nsec) : 0;
    buf_printf(&fw->out,
               "{\"isDirectory\":%s,\"isFile\":%s,\"isSymlink\":%s,\"size\":%llu,"
               "\"createdAtMs\":%lld,\"modifiedAtMs\":%lld}",
               S_ISDIR(sx.stx_mode) ? "true" : "false", S_ISREG(sx.stx_mode) ? "true" : "false",
               S_ISLNK(lst.st_mode) ? "true" : "false", (unsigned long long)sx.stx_size,
               (long long)created, (long long)ts_ms(sx.stx_mtime.tv_sec, sx.stx_mtime.tv_nsec));
}

static void put_uri(struct buf *b, const char *path, size_t len)
{
    char *u = uri_from_path(path, len);
    buf_put_json_str(b, u, strlen(u));
    free(u);
}

static void do_canonicalize(struct fs_work *fw)
{
    char *r = realpath(fw->path, NULL);
    if (!r) {
        set_err(fw, errno);
        return;
    }
    buf_puts(&fw->out, "{\"path\":");
    put_uri(&fw->out, r, strlen(r));
    buf_putc(&fw->out, '}');
    free(r);
}

/* ---- readDirectory --------------------------------------------------------------- */

static void do_read_dir(struct fs_work *fw)
{
    DIR *dir = opendir(fw->path);
    if (!dir) {
        set_err(fw, errno);
        return;
    }
    buf_puts(&fw->out, "{\"entries\":[");
    size_t n = 0;
    bool first = true;
    struct buf name;
    buf_init(&name);
    for (;;) {
        errno = 0;
        struct dirent *de = readdir(dir);
        if (!de) {
            if (errno) set_err(fw, errno);
            break;
        }
        if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, "..")) continue;
        n++;
        if (n > READDIR_LIMIT) continue;
        struct stat st;
        if (fstatat(dirfd(dir), de->d_name, &st, 0) < 0) continue;
        if (!first) buf_putc(&fw->out, ',');
        first = false;
        buf_reset(&name);
        fs_utf8_lossy(&name, de->d_name, strlen(de->d_name));
        buf_puts(&fw->out, "{\"fileName\":");
        buf_put_json_str(&fw->out, name.data ? name.data : "", name.len);
        buf_printf(&fw->out, ",\"isDirectory\":%s,\"isFile\":%s}",
                   S_ISDIR(st.st_mode) ? "true" : "false", S_ISREG(st.st_mode) ? "true" : "false");
    }
    buf_free(&name);
    closedir(dir);
    if (n > READDIR_LIMIT)
        set_msg(fw, RPC_INTERNAL_ERROR, "fs/readDirectory returned %zu entries; limit is %d", n,
                READDIR_LIMIT);
    buf_puts(&fw->out, "]}");
}

/* ---- remove ----------------------------------------------------------------------- */

static void do_remove_nofollow(struct fs_work *fw)
{
    const char *leaf;
    fs_path_strip_slashes(fw->path);
    int pfd = open_parent_nofollow(fw->path, &leaf);
    struct stat st;
    int e = 0;
    if (pfd < 0 || fstatat(pfd, leaf, &st, AT_SYMLINK_NOFOLLOW) < 0) {
        e = errno;
    } else if (fw->recursive) {
        set_msg(fw, RPC_INTERNAL_ERROR, "recursive no-follow removal is unsupported");
    } else if (S_ISLNK(st.st_mode)) {
        set_msg(fw, RPC_INVALID_REQUEST, "path contains a symbolic link");
    } else if (unlinkat(pfd, leaf, S_ISDIR(st.st_mode) ? AT_REMOVEDIR : 0) < 0) {
        e = errno;
    }
    if (pfd >= 0) close(pfd);
    if (e == ENOENT && fw->force) e = 0;
    if (e) set_err(fw, e);
    if (!failed(fw)) buf_puts(&fw->out, "{}");
}

static void do_remove(struct fs_work *fw)
{
    if (fw->nofollow) {
        do_remove_nofollow(fw);
        return;
    }
    struct stat st;
    if (lstat(fw->path, &st) < 0) {
        if (errno == ENOENT && fw->force) {
            buf_puts(&fw->out, "{}");
            return;
        }
        set_err(fw, errno);
        return;
    }
    int e = 0;
    if (S_ISDIR(st.st_mode)) {
        if (fw->recursive)
            e = remove_tree_at(AT_FDCWD, fw->path);
        else if (rmdir(fw->path) < 0)
            e = errno;
    } else if (unlink(fw->path) < 0) {
        e = errno;
    }
    if (e == ENOENT && fw->force) e = 0;
    if (e)
        set_err(fw, e);
    else
        buf_puts(&fw->out, "{}");
}

/* ---- copy ------------------------------------------------------------------------- */

static void do_copy(struct fs_work *fw)
{
    struct stat st;
    if (lstat(fw->path, &st) < 0) {
        set_err(fw, errno);
        return;
    }
    int e = 0;
    if (S_ISREG(st.st_mode)) {
        e = copy_file(fw->path, fw->path2);
    } else if (S_ISLNK(st.st_mode)) {
        e = copy_link(fw->path, fw->path2);
    } else if (S_ISDIR(st.st_mode)) {
        if (!fw->recursive) {
            set_msg(fw, RPC_INVALID_REQUEST,
                    "fs/copy requires recursive: true when sourcePath is a directory");
            return;
        }
        char *s = realpath(fw->path, NULL);
        if (!s) {
            set_err(fw, errno);
            return;
        }
        char *d = resolve_existing_prefix(fw->path2);
        size_t sl = strlen(s);
        bool inside = d && strncmp(d, s, sl) == 0 &&
                      (d[sl] == '\0' || d[sl] == '/' || (sl == 1 && s[0] == '/'));
        free(s);
        free(d);
        if (inside) {
            set_msg(fw, RPC_INVALID_REQUEST,
                    "fs/copy cannot copy a directory to itself or one of its descendants");
            return;
        }
        fs_path_strip_slashes(fw->path2);
        e = mkdir_all(fw->path2);
        if (!e) e = copy_tree(fw->path, fw->path2);
    } else {
        set_msg(fw, RPC_INVALID_REQUEST,
                "fs/copy only supports regular files, directories, and symlinks");
        return;
    }
    if (e)
        set_err(fw, e);
    else
        buf_puts(&fw->out, "{}");
}

/* ---- open / readBlock ----------------------------------------------------------- */

static void do_open(struct fs_work *fw)
{
    if (!fw->replace) {
        fw->fd = open_regular(fw, fw->path);
        return;
    }
    /* O_NONBLOCK: a FIFO without a reader fails (ENXIO) instead of blocking. */
    int fd = open(fw->path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NONBLOCK, 0666);
    if (fd < 0) {
        set_err(fw, errno);
        return;
    }
    struct stat st;
    if (fstat(fd, &st) < 0) {
        set_err(fw, errno);
        close(fd);
        return;
    }
    if (!S_ISREG(st.st_mode)) {
        not_a_file(fw, fw->path);
        close(fd);
        return;
    }
    int fl = fcntl(fd, F_GETFL);
    if (fl >= 0) fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
    fw->fd = fd;
}

static void do_write_block(struct fs_work *fw)
{
    if (fw->offset > (uint64_t)INT64_MAX) {
        set_err(fw, EINVAL);
        return;
    }
    size_t done = 0;
    while (done < fw->data_len) {
        ssize_t w =
            pwrite(fw->h->fd, fw->data + done, fw->data_len - done, (off_t)(fw->offset + done));
        if (w < 0) {
            if (errno == EINTR) continue;
            set_err(fw, errno);
            return;
        }
        done += (size_t)w;
    }
    /* An empty chunk still reports a read-only handle. */
    if (fw->data_len == 0 && pwrite(fw->h->fd, "", 0, (off_t)fw->offset) < 0) {
        set_err(fw, errno);
        return;
    }
    buf_puts(&fw->out, "{}");
}

static void do_read_block(struct fs_work *fw)
{
    if (fw->offset > (uint64_t)INT64_MAX) {
        set_err(fw, EINVAL);
        return;
    }
    char *data = xmalloc(fw->len);
    size_t done = 0;
    while (done < fw->len) {
        uint64_t off = fw->offset + done;
        if (off > (uint64_t)INT64_MAX) break;
        ssize_t r = pread(fw->h->fd, data + done, fw->len - done, (off_t)off);
        if (r < 0) {
            if (errno == EINTR) continue;
            set_err(fw, errno);
            free(data);
            return;
        }
        if (r == 0) break;
        done += (size_t)r;
    }
    buf_reserve(&fw->out, base64_encoded_len(done) + 40);
    buf_puts(&fw->out, "{\"chunk\":\"");
    buf_put_base64(&fw->out, data, done);
    buf_printf(&fw->out, "\",\"eof\":%s}", done < fw->len ? "true" : "false");
    free(data);
}

/* ---- plumbing ------------------------------------------------------------------- */

static void work_cb(uv_work_t *w)
{
    struct fs_work *fw = w->data;
    switch (fw->op) {
    case OP_READ_FILE:
        do_read_file(fw);
        break;
    case OP_WRITE_FILE:
        do_write_file(fw);
        break;
    case OP_CREATE_DIR:
        do_create_dir(fw);
        break;
    case OP_METADATA:
        do_metadata(fw);
        break;
    case OP_CANONICALIZE:
        do_canonicalize(fw);
        break;
    case OP_READ_DIR:
        do_read_dir(fw);
        break;
    case OP_REMOVE:
        do_remove(fw);
        break;
    case OP_COPY:
        do_copy(fw);
        break;
    case OP_WALK: {
        struct fs_walk_opts o = {fw->max_depth, fw->max_dirs, fw->max_entries, fw->follow_dir_links,
                                 fw->prune_hidden};
        int e = fs_walk(fw->path, &o, &fw->out);
        if (e) set_err(fw, e);
        break;
    }
    case OP_OPEN:
        do_open(fw);
        break;
    case OP_READ_BLOCK:
        do_read_block(fw);
        break;
    case OP_WRITE_BLOCK:
        do_write_block(fw);
        break;
    }
}

static void fw_free(struct fs_work *fw)
{
    free(fw->path);
    free(fw->path2);
    free(fw->b64);
    free(fw->data);
    free(fw->msg);
    buf_free(&fw->out);
    free(fw);
}

static void open_finish(struct fs_work *fw)
{
    struct rpc_req *req = fw->req;
    if (!conn_is_open(req->conn)) {
        close(fw->fd);
        set_msg(fw, RPC_INTERNAL_ERROR, "connection closed");
        return;
    }
    struct fs_table *t = table_get(req->conn, true);
    if (!t) {
        close(fw->fd);
        set_msg(fw, RPC_INTERNAL_ERROR, "connection closed");
        return;
    }
    if (table_find(t, fw->hid, fw->hid_len) >= 0) {
        close(fw->fd);
        set_msg(fw, RPC_INVALID_REQUEST, "file handle `%s` already exists", fw->hid);
        return;
    }
    if (t->count >= FS_MAX_HANDLES) {
        close(fw->fd);
        set_msg(fw, RPC_INVALID_REQUEST, "at most %d file handles may be open per connection",
                FS_MAX_HANDLES);
        return;
    }
    struct fs_handle *h = xcalloc(1, sizeof *h);
    h->refs = 1;
    h->fd = fw->fd;
    h->id_len = fw->hid_len;
    memcpy(h->id, fw->hid, fw->hid_len);
    for (int i = 0; i < FS_MAX_HANDLES; i++) {
        if (!t->slots[i]) {
            t->slots[i] = h;
            break;
        }
    }
    t->count++;
    buf_puts(&fw->out, "{\"handleId\":");
    buf_put_json_str(&fw->out, fw->hid, fw->hid_len);
    buf_putc(&fw->out, '}');
}

static void after_cb(uv_work_t *w, int status)
{
    struct fs_work *fw = w->data;
    struct rpc_req *req = fw->req;
    if (fw->op == OP_OPEN && !failed(fw)) open_finish(fw);
    if (fw->h) handle_unref(fw->h);
    if (status < 0 && !failed(fw)) set_msg(fw, RPC_INTERNAL_ERROR, "%s", uv_strerror(status));
    if (fw->msg) {
        rpc_reply_error(req, fw->code, "%s", fw->msg);
    } else if (fw->err) {
        rpc_reply_errno(req, fw->err);
    } else {
        rpc_result_finish(req, &fw->out);
    }
    fw_free(fw);
}

static void submit(struct fs_work *fw)
{
    rpc_result_begin(fw->req, &fw->out);
    fw->w.data = fw;
    int r = uv_queue_work(fw->req->loop, &fw->w, work_cb, after_cb);
    if (r < 0) {
        set_msg(fw, RPC_INTERNAL_ERROR, "%s", uv_strerror(r));
        after_cb(&fw->w, 0);
    }
}

static struct fs_work *fw_new(struct rpc_req *req, enum fs_op op)
{
    struct fs_work *fw = xcalloc(1, sizeof *fw);
    fw->req = req;
    fw->op = op;
    fw->fd = -1;
    buf_init(&fw->out);
    return fw;
}

/* ---- param helpers ------------------------------------------------------------- */

enum sb_need { SB_NONE, SB_ENFORCE };

/* Decodes the optional sandbox member (serde errors into d) and tells whether it
 * needs enforcement. */
static enum sb_need decode_sandbox(struct pdec *d)
{
    json_t *sb = pdec_object(d, "sandbox", PDEC_OPTIONAL);
    if (!sb || d->failed) return SB_NONE;
    struct pdec s;
    pdec_begin(&s, sb, "FileSystemSandboxContext");
    json_t *perm = pdec_object(&s, "permissions", PDEC_REQUIRED);
    static const char *const wl[] = {"disabled", "restricted-token", "elevated", "mxc", NULL};
    pdec_enum(&s, "windowsSandboxLevel", PDEC_REQUIRED, wl, 0);
    enum sb_need need = SB_ENFORCE;
    if (!s.failed) {
        struct pdec p;
        pdec_begin(&p, perm, "PermissionProfile");
        static const char *const types[] = {"managed", "disabled", "external", NULL};
        int ty = pdec_enum(&p, "type", PDEC_REQUIRED, types, 0);
        if (ty == 1 || ty == 2) {
            need = SB_NONE;
        } else if (ty == 0) {
            json_t *fsp = pdec_object(&p, "file_system", PDEC_REQUIRED);
            if (!p.failed) {
                struct pdec f;
                pdec_begin(&f, fsp, "FileSystemPermissions");
                static const char *const ft[] = {"restricted", "unrestricted", NULL};
                int k = pdec_enum(&f, "type", PDEC_REQUIRED, ft, 0);
                if (k == 1) need = SB_NONE;
                if (f.failed) pdec_fail(&p, "%s", f.err);
            }
        }
        if (p.failed) pdec_fail(&s, "%s", p.err);
    }
    if (s.failed) pdec_fail(d, "%s", s.err);
    return need;
}

/* Converts a URI param to a native path, replying on failure. */
static bool to_path(struct rpc_req *req, const char *uri, size_t len, char **out, size_t *out_len)
{
    struct uri_error ue;
    if (uri_to_path(uri, len, false, out, out_len, &ue) < 0) {
        rpc_reply_error(req, ue.code, "%s", ue.message);
        return false;
    }
    return true;
}

/* Common tail of params checking: decode errors, the gate, the sandbox. */
static bool check_common(struct rpc_req *req, struct pdec *d, enum sb_need sb)
{
    if (d->failed) {
        rpc_reply_error(req, RPC_INVALID_PARAMS, "%s", d->err);
        return false;
    }
    if (!rpc_check_ready(req)) return false;
    if (sb == SB_ENFORCE) {
        rpc_reply_error(req, RPC_INVALID_REQUEST,
                        "filesystem sandbox cannot be enforced on this executor");
        return false;
    }
    return true;
}

/* Handlers for the simple one-path methods. */
static void simple_path_method(struct rpc_req *req, enum fs_op op, const char *sname,
                               bool has_follow, bool has_recursive, bool has_force)
{
    struct pdec d;
    pdec_begin(&d, req->params, sname);
    size_t ulen = 0;
    const char *uri = pdec_string_len(&d, "path", PDEC_REQUIRED, &ulen);
    bool recursive = has_recursive ? pdec_bool(&d, "recursive", PDEC_OPTIONAL, true) : false;
    bool force = has_force ? pdec_bool(&d, "force", PDEC_OPTIONAL, true) : false;
    bool follow = has_follow ? pdec_bool(&d, "followSymlinks", PDEC_OPTIONAL, true) : true;
    enum sb_need sb = decode_sandbox(&d);
    if (!check_common(req, &d, sb)) return;
    struct fs_work *fw = fw_new(req, op);
    if (!to_path(req, uri, ulen, &fw->path, &fw->path_len)) {
        fw_free(fw);
        return;
    }
    fw->recursive = recursive;
    fw->force = force;
    fw->nofollow = !follow;
    submit(fw);
}

static void handle_read_file(struct rpc_req *req)
{
    simple_path_method(req, OP_READ_FILE, "ReadFileParams", true, false, false);
}

static void handle_create_dir(struct rpc_req *req)
{
    simple_path_method(req, OP_CREATE_DIR, "CreateDirectoryParams", true, true, false);
}

static void handle_metadata(struct rpc_req *req)
{
    simple_path_method(req, OP_METADATA, "GetMetadataParams", true, false, false);
}

static void handle_canonicalize(struct rpc_req *req)
{
    simple_path_method(req, OP_CANONICALIZE, "CanonicalizeParams", false, false, false);
}

static void handle_read_dir(struct rpc_req *req)
{
    simple_path_method(req, OP_READ_DIR, "ReadDirectoryParams", false, false, false);
}

static void handle_remove(struct rpc_req *req)
{
    simple_path_method(req, OP_REMOVE, "RemoveParams", true, true, true);
}

static void handle_write_file(struct rpc_req *req)
{
    struct pdec d;
    pdec_begin(&d, req->params, "WriteFileParams");
    size_t ulen = 0, blen = 0;
    const char *uri = pdec_string_len(&d, "path", PDEC_REQUIRED, &ulen);
    const char *b64 = pdec_string_len(&d, "dataBase64", PDEC_REQUIRED, &blen);
    bool follow = pdec_bool(&d, "followSymlinks", PDEC_OPTIONAL, true);
    enum sb_need sb = decode_sandbox(&d);
    if (!check_common(req, &d, sb)) return;
    struct fs_work *fw = fw_new(req, OP_WRITE_FILE);
    if (!to_path(req, uri, ulen, &fw->path, &fw->path_len)) {
        fw_free(fw);
        return;
    }
    fw->nofollow = !follow;
    fw->b64 = xmemdup(b64, blen + 1);
    fw->b64_len = blen;
    submit(fw);
}

static void handle_copy(struct rpc_req *req)
{
    struct pdec d;
    pdec_begin(&d, req->params, "CopyParams");
    size_t l1 = 0, l2 = 0;
    const char *src = pdec_string_len(&d, "sourcePath", PDEC_REQUIRED, &l1);
    const char *dst = pdec_string_len(&d, "destinationPath", PDEC_REQUIRED, &l2);
    bool recursive = pdec_bool(&d, "recursive", PDEC_REQUIRED, false);
    enum sb_need sb = decode_sandbox(&d);
    if (!check_common(req, &d, sb)) return;
    struct fs_work *fw = fw_new(req, OP_COPY);
    if (!to_path(req, src, l1, &fw->path, &fw->path_len) ||
        !to_path(req, dst, l2, &fw->path2, &fw->path2_len)) {
        fw_free(fw);
        return;
    }
    fw->recursive = recursive;
    submit(fw);
}

static void handle_walk(struct rpc_req *req)
{
    struct pdec d;
    pdec_begin(&d, req->params, "WalkParams");
    size_t ulen = 0;
    const char *uri = pdec_string_len(&d, "path", PDEC_REQUIRED, &ulen);
    json_t *opts = pdec_object(&d, "options", PDEC_REQUIRED);
    uint64_t depth = 0, dirs = 0, entries = 0;
    bool follow = false, prune = false;
    if (!d.failed) {
        struct pdec o;
        pdec_begin(&o, opts, "WalkOptions");
        depth = pdec_u64(&o, "maxDepth", PDEC_REQUIRED, 0, NULL);
        dirs = pdec_u64(&o, "maxDirectories", PDEC_REQUIRED, 0, NULL);
        entries = pdec_u64(&o, "maxEntries", PDEC_REQUIRED, 0, NULL);
        follow = pdec_bool(&o, "followDirectorySymlinks", PDEC_REQUIRED, false);
        prune = pdec_bool(&o, "pruneHiddenDirectories", PDEC_OPTIONAL, false);
        if (o.failed) pdec_fail(&d, "%s", o.err);
    }
    enum sb_need sb = decode_sandbox(&d);
    if (!check_common(req, &d, sb)) return;
    if (dirs == 0 || entries == 0)
        return rpc_reply_error(req, RPC_INVALID_REQUEST,
                               "filesystem walk limits must be greater than zero");
    if (depth > WALK_MAX_DEPTH || dirs > WALK_MAX_DIRS || entries > WALK_MAX_ENTRIES)
        return rpc_reply_error(req, RPC_INVALID_REQUEST,
                               "filesystem walk limits exceed maximums: depth=%d, "
                               "directories=%d, entries=%d",
                               WALK_MAX_DEPTH, WALK_MAX_DIRS, WALK_MAX_ENTRIES);
    struct fs_work *fw = fw_new(req, OP_WALK);
    if (!to_path(req, uri, ulen, &fw->path, &fw->path_len)) {
        fw_free(fw);
        return;
    }
    fw->max_depth = depth;
    fw->max_dirs = dirs;
    fw->max_entries = entries;
    fw->follow_dir_links = follow;
    fw->prune_hidden = prune;
    submit(fw);
}

static bool check_handle_id(struct rpc_req *req, size_t len)
{
    if (len > FS_HANDLE_ID_MAX) {
        rpc_reply_error(req, RPC_INVALID_REQUEST, "file handle ID must not exceed %d bytes",
                        FS_HANDLE_ID_MAX);
        return false;
    }
    return true;
}

static void handle_open(struct rpc_req *req)
{
    struct pdec d;
    pdec_begin(&d, req->params, "OpenParams");
    size_t hlen = 0, ulen = 0;
    const char *hid = pdec_string_len(&d, "handleId", PDEC_REQUIRED, &hlen);
    const char *uri = pdec_string_len(&d, "path", PDEC_REQUIRED, &ulen);
    static const char *const modes[] = {"read", "replace", NULL};
    int mode = pdec_enum(&d, "mode", PDEC_OPTIONAL, modes, 0);
    enum sb_need sb = decode_sandbox(&d);
    if (!check_common(req, &d, sb)) return;
    if (!check_handle_id(req, hlen)) return;
    struct fs_table *t = table_get(req->conn, false);
    if (table_find(t, hid, hlen) >= 0)
        return rpc_reply_error(req, RPC_INVALID_REQUEST, "file handle `%s` already exists", hid);
    if (t && t->count >= FS_MAX_HANDLES)
        return rpc_reply_error(req, RPC_INVALID_REQUEST,
                               "at most %d file handles may be open per connection",
                               FS_MAX_HANDLES);
    struct fs_work *fw = fw_new(req, OP_OPEN);
    if (!to_path(req, uri, ulen, &fw->path, &fw->path_len)) {
        fw_free(fw);
        return;
    }
    memcpy(fw->hid, hid, hlen);
    fw->hid_len = hlen;
    fw->replace = mode == 1;
    submit(fw);
}

static void handle_read_block(struct rpc_req *req)
{
    struct pdec d;
    pdec_begin(&d, req->params, "ReadBlockParams");
    size_t hlen = 0;
    const char *hid = pdec_string_len(&d, "handleId", PDEC_REQUIRED, &hlen);
    uint64_t off = pdec_u64(&d, "offset", PDEC_REQUIRED, 0, NULL);
    uint64_t len = pdec_u64(&d, "len", PDEC_REQUIRED, 0, NULL);
    if (d.failed) return rpc_reply_error(req, RPC_INVALID_PARAMS, "%s", d.err);
    if (!rpc_check_ready(req)) return;
    if (!check_handle_id(req, hlen)) return;
    if (len < 1 || len > FS_BLOCK_MAX)
        return rpc_reply_error(req, RPC_INVALID_REQUEST,
                               "file read block length must be between 1 and %llu",
                               (unsigned long long)FS_BLOCK_MAX);
    struct fs_table *t = table_get(req->conn, false);
    int i = table_find(t, hid, hlen);
    if (i < 0) return rpc_reply_error(req, RPC_NOT_FOUND, "unknown file handle `%s`", hid);
    struct fs_work *fw = fw_new(req, OP_READ_BLOCK);
    fw->h = t->slots[i];
    fw->h->refs++;
    fw->offset = off;
    fw->len = len;
    submit(fw);
}

static void handle_write_block(struct rpc_req *req)
{
    struct pdec d;
    pdec_begin(&d, req->params, "WriteBlockParams");
    size_t hlen = 0, clen = 0;
    const char *hid = pdec_string_len(&d, "handleId", PDEC_REQUIRED, &hlen);
    uint64_t off = pdec_u64(&d, "offset", PDEC_REQUIRED, 0, NULL);
    const char *chunk = pdec_string_len(&d, "chunk", PDEC_REQUIRED, &clen);
    if (d.failed) return rpc_reply_error(req, RPC_INVALID_PARAMS, "%s", d.err);
    if (!rpc_check_ready(req)) return;
    if (!check_handle_id(req, hlen)) return;
    uint8_t *data = xmalloc(base64_decoded_max(clen) + 1);
    size_t n = 0;
    char err[96];
    if (base64_decode(chunk, clen, data, &n, err, sizeof err) < 0) {
        free(data);
        return rpc_reply_error(req, RPC_INVALID_PARAMS, "%s", err);
    }
    struct fs_table *t = table_get(req->conn, false);
    int i = table_find(t, hid, hlen);
    if (i < 0) {
        free(data);
        return rpc_reply_error(req, RPC_NOT_FOUND, "unknown file handle `%s`", hid);
    }
    struct fs_work *fw = fw_new(req, OP_WRITE_BLOCK);
    fw->h = t->slots[i];
    fw->h->refs++;
    fw->offset = off;
    fw->data = data;
    fw->data_len = n;
    submit(fw);
}

static void handle_close(struct rpc_req *req)
{
    struct pdec d;
    pdec_begin(&d, req->params, "CloseParams");
    size_t hlen = 0;
    const char *hid = pdec_string_len(&d, "handleId", PDEC_REQUIRED, &hlen);
    if (d.failed) return rpc_reply_error(req, RPC_INVALID_PARAMS, "%s", d.err);
    if (!rpc_check_ready(req)) return;
    if (!check_handle_id(req, hlen)) return;
    struct fs_table *t = table_get(req->conn, false);
    int i = table_find(t, hid, hlen);
    if (i >= 0) {
        handle_unref(t->slots[i]);
        t->slots[i] = NULL;
        t->count--;
    }
    rpc_reply_json(req, json_object());
}

const struct rpc_method fs_methods[] = {
    {"fs/readFile", "filesystem", handle_read_file},
    {"fs/writeFile", "filesystem", handle_write_file},
    {"fs/createDirectory", "filesystem", handle_create_dir},
    {"fs/getMetadata", "filesystem", handle_metadata},
    {"fs/canonicalize", "filesystem", handle_canonicalize},
    {"fs/readDirectory", "filesystem", handle_read_dir},
    {"fs/remove", "filesystem", handle_remove},
    {"fs/copy", "filesystem", handle_copy},
    {"fs/walk", "filesystem", handle_walk},
    {"fs/open", "filesystem", handle_open},
    {"fs/readBlock", "filesystem", handle_read_block},
    {"fs/writeBlock", "filesystem", handle_write_block},
    {"fs/close", "filesystem", handle_close},
    {NULL, NULL, NULL},
};
