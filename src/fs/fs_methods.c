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
 * the descriptor under the worker.
 *
 * A request whose sandbox needs enforcement (PROTOCOL.md 10.3) runs the same
 * operation code in the session's sandbox helper instead (sandbox/helper.h): the
 * worker encodes it as a frame, waits for the helper's reply and, for fs/open,
 * receives the opened fd, so handle I/O then works as for any handle. */
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

#include "fs/fs_sandboxed.h"
#include "fs/fs_tree.h"
#include "fs/fs_util.h"
#include "fs/fs_walk.h"
#include "fs/uri.h"
#include "rpc/dispatch.h"
#include "rpc/params.h"
#include "rpc/rpc.h"
#include "sandbox/enforce.h"
#include "sandbox/helper.h"
#include "sandbox/policy.h"
#include "session/session.h"
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
    /* sandboxed: run in the session's helper for this policy (sandbox/helper.h) */
    char *sb_json;     /* owned: the sandbox object as compact JSON, or NULL */
    char sb_owner[40]; /* the session id */
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

static void run_op(struct fs_work *fw)
{
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

/* ---- the sandbox helper's side and ours ---------------------------------------------- */

/* The request frame: this header, then path, path2 and b64 bytes. Both ends are the
 * same build, so the layout is native. */
struct fs_wire_req {
    uint32_t op;
    uint8_t recursive, force, nofollow, follow_dir_links, prune_hidden, replace, pad[2];
    uint64_t max_depth, max_dirs, max_entries;
    uint64_t path_len, path2_len, b64_len;
};

/* The reply frame: this header, then msg_len bytes of message, out_len of result. */
struct fs_wire_rep {
    int32_t err, code;
    uint64_t msg_len, out_len;
};

/* The operations a helper serves: path-based ones; handle I/O stays in the daemon
 * on the fd fs/open passed back. */
static bool op_served_by_helper(uint32_t op)
{
    return op <= OP_OPEN && op != OP_READ_BLOCK && op != OP_WRITE_BLOCK;
}

int fs_helper_serve(const void *req, size_t len, struct buf *reply, int *fd_out)
{
    *fd_out = -1;
    struct fs_wire_req h;
    struct fs_work *fw = xcalloc(1, sizeof *fw);
    fw->fd = -1;
    buf_init(&fw->out);
    int rc = -1;
    const char *p = (const char *)req + sizeof h;
    if (len < sizeof h) goto bad;
    memcpy(&h, req, sizeof h);
    if (h.path_len > len || h.path2_len > len || h.b64_len > len ||
        h.path_len + h.path2_len + h.b64_len != len - sizeof h || !op_served_by_helper(h.op))
        goto bad;
    fw->op = (enum fs_op)h.op;
    fw->recursive = h.recursive;
    fw->force = h.force;
    fw->nofollow = h.nofollow;
    fw->follow_dir_links = h.follow_dir_links;
    fw->prune_hidden = h.prune_hidden;
    fw->replace = h.replace;
    fw->max_depth = h.max_depth;
    fw->max_dirs = h.max_dirs;
    fw->max_entries = h.max_entries;
    fw->path = xmemdup(p, h.path_len + 1);
    fw->path[h.path_len] = 0;
    fw->path_len = h.path_len;
    p += h.path_len;
    fw->path2 = xmemdup(p, h.path2_len + 1);
    fw->path2[h.path2_len] = 0;
    fw->path2_len = h.path2_len;
    p += h.path2_len;
    fw->b64 = xmemdup(p, h.b64_len + 1);
    fw->b64[h.b64_len] = 0;
    fw->b64_len = h.b64_len;
    run_op(fw);
    rc = 0;
    goto out;
bad:
    set_msg(fw, RPC_INTERNAL_ERROR, "malformed sandbox helper request");
out:;
    struct fs_wire_rep r = {fw->err, fw->code, fw->msg ? strlen(fw->msg) : 0,
                            failed(fw) ? 0 : fw->out.len};
    buf_append(reply, &r, sizeof r);
    if (fw->msg) buf_append(reply, fw->msg, r.msg_len);
    if (r.out_len) buf_append(reply, fw->out.data, r.out_len);
    if (!failed(fw) && fw->op == OP_OPEN) *fd_out = fw->fd;
    else if (fw->fd >= 0) close(fw->fd);
    free(fw->path);
    free(fw->path2);
    free(fw->b64);
    free(fw->msg);
    buf_free(&fw->out);
    free(fw);
    return rc;
}

/* Runs fw in the sandbox helper of its session and policy (on a pool thread). */
static void run_sandboxed(struct fs_work *fw)
{
    struct fs_wire_req h = {
        .op = fw->op, .recursive = fw->recursive, .force = fw->force, .nofollow = fw->nofollow,
        .follow_dir_links = fw->follow_dir_links, .prune_hidden = fw->prune_hidden,
        .replace = fw->replace, .max_depth = fw->max_depth, .max_dirs = fw->max_dirs,
        .max_entries = fw->max_entries, .path_len = fw->path_len,
        .path2_len = fw->path2 ? fw->path2_len : 0, .b64_len = fw->b64 ? fw->b64_len : 0};
    struct buf rq, rp;
    buf_init(&rq);
    buf_init(&rp);
    buf_reserve(&rq, sizeof h + h.path_len + h.path2_len + h.b64_len);
    buf_append(&rq, &h, sizeof h);
    buf_append(&rq, fw->path, h.path_len);
    if (h.path2_len) buf_append(&rq, fw->path2, h.path2_len);
    if (h.b64_len) buf_append(&rq, fw->b64, h.b64_len);
    int fd = -1;
    int rc = sandbox_helper_call(fw->sb_owner, fw->sb_json, rq.data, rq.len, &rp, &fd);
    buf_free(&rq);
    struct fs_wire_rep r;
    if (rc == SB_CALL_UNENFORCEABLE) {
        set_msg(fw, RPC_INVALID_REQUEST, "filesystem sandbox cannot be enforced on this executor");
    } else if (rc == SB_CALL_CLOSED) {
        set_msg(fw, RPC_INTERNAL_ERROR, "session closed");
    } else if (rc < 0) {
        set_msg(fw, RPC_INTERNAL_ERROR, "sandbox helper exited during the request");
    } else if (rp.len < sizeof r || (memcpy(&r, rp.data, sizeof r), 0) ||
               r.msg_len > rp.len - sizeof r || r.out_len != rp.len - sizeof r - r.msg_len) {
        set_msg(fw, RPC_INTERNAL_ERROR, "malformed sandbox helper reply");
    } else if (r.msg_len) {
        set_msg(fw, r.code, "%.*s", (int)r.msg_len, rp.data + sizeof r);
    } else if (r.err) {
        set_err(fw, r.err);
    } else {
        buf_append(&fw->out, rp.data + sizeof r + r.msg_len, r.out_len);
        if (fw->op == OP_OPEN && fd >= 0) {
            fw->fd = fd;
            fd = -1;
        }
    }
    if (fd >= 0) close(fd);
    if (fw->op == OP_OPEN && !failed(fw) && fw->fd < 0)
        set_msg(fw, RPC_INTERNAL_ERROR, "sandbox helper returned no file");
    buf_free(&rp);
}

static void work_cb(uv_work_t *w)
{
    struct fs_work *fw = w->data;
    if (fw->sb_json) run_sandboxed(fw);
    else run_op(fw);
}

static void fw_free(struct fs_work *fw)
{
    free(fw->path);
    free(fw->path2);
    free(fw->b64);
    free(fw->data);
    free(fw->msg);
    free(fw->sb_json);
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

/* The optional sandbox member (serde errors into d): borrowed, or NULL. */
static json_t *decode_sandbox(struct pdec *d)
{
    return pdec_object(d, "sandbox", PDEC_OPTIONAL);
}

/* Hands fw to the session's sandbox helper for this policy. */
static void fw_sandbox(struct fs_work *fw, json_t *sb)
{
    fw->sb_json = json_dumps(sb, JSON_COMPACT | JSON_SORT_KEYS);
    snprintf(fw->sb_owner, sizeof fw->sb_owner, "%s", fw->req->session->id);
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

/* Common tail of params checking: decode errors, the sandbox, the gate. Returns -1
 * when it replied, 1 when the operation (reading and/or writing) needs the sandbox
 * (PROTOCOL.md 10.3: full-disk access for it runs directly), else 0. */
static int check_common(struct rpc_req *req, struct pdec *d, json_t *sb, bool reads, bool writes)
{
    if (d->failed) {
        rpc_reply_error(req, RPC_INVALID_PARAMS, "%s", d->err);
        return -1;
    }
    struct sandbox_policy pol;
    struct sandbox_error se;
    if (sandbox_policy_parse(sb, NULL, &pol, &se) < 0) {
        rpc_reply_error(req, se.code, "%s", se.message);
        return -1;
    }
    bool need = sandbox_policy_needs_fs(&pol, reads, writes);
    sandbox_policy_free(&pol);
    if (!rpc_check_ready(req)) return -1;
    if (need && sandbox_landlock_abi() < 1) {
        rpc_reply_error(req, RPC_INVALID_REQUEST,
                        "filesystem sandbox cannot be enforced on this executor");
        return -1;
    }
    return need;
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
    json_t *sbj = decode_sandbox(&d);
    bool writes = op == OP_CREATE_DIR || op == OP_REMOVE;
    int sb = check_common(req, &d, sbj, !writes, writes);
    if (sb < 0) return;
    struct fs_work *fw = fw_new(req, op);
    if (!to_path(req, uri, ulen, &fw->path, &fw->path_len)) {
        fw_free(fw);
        return;
    }
    if (sb) fw_sandbox(fw, sbj);
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
    json_t *sbj = decode_sandbox(&d);
    int sb = check_common(req, &d, sbj, false, true);
    if (sb < 0) return;
    struct fs_work *fw = fw_new(req, OP_WRITE_FILE);
    if (!to_path(req, uri, ulen, &fw->path, &fw->path_len)) {
        fw_free(fw);
        return;
    }
    if (sb) fw_sandbox(fw, sbj);
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
    json_t *sbj = decode_sandbox(&d);
    int sb = check_common(req, &d, sbj, true, true);
    if (sb < 0) return;
    struct fs_work *fw = fw_new(req, OP_COPY);
    if (!to_path(req, src, l1, &fw->path, &fw->path_len) ||
        !to_path(req, dst, l2, &fw->path2, &fw->path2_len)) {
        fw_free(fw);
        return;
    }
    if (sb) fw_sandbox(fw, sbj);
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
    json_t *sbj = decode_sandbox(&d);
    int sb = check_common(req, &d, sbj, true, false);
    if (sb < 0) return;
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
    if (sb) fw_sandbox(fw, sbj);
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
    json_t *sbj = decode_sandbox(&d);
    int sb = check_common(req, &d, sbj, mode != 1, mode == 1);
    if (sb < 0) return;
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
    if (sb) fw_sandbox(fw, sbj);
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
