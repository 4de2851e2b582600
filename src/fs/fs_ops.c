/* fs_ops: the blocking filesystem operations behind the fs methods (PROTOCOL.md
 * section 6).
 *
 * Each do_* function performs one operation described by a struct fs_work (see
 * fs_work.h): it does all the file I/O and writes the result JSON text straight
 * into fw->out, or records an error with fs_work_set_err/set_msg. fs_ops_run dispatches on
 * the op. This code runs either on a libuv pool thread or, for a sandboxed
 * request, inside the session's sandbox helper (fs_methods.c, fs_sandboxed.h);
 * it never touches the loop, the connection or the handle table. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <pwd.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/limits.h"
#include "crypto/random.h"
#include "fs/fs_budget.h"
#include "fs/fs_sandboxed.h"
#include "fs/fs_tree.h"
#include "fs/fs_util.h"
#include "fs/fs_walk.h"
#include "fs/fs_work.h"
#include "proto/uri.h"
#include "proto/utf8.h"
#include "proto/base64.h"
#include "util/bigbuf.h"
#include "util/buf.h"
#include "util/mem.h"

#define FS_READ_LIMIT 536870912ull
#define READDIR_LIMIT 50000

/* ---- outcome ---------------------------------------------------------------------- */

void fs_work_set_err(struct fs_work *fw, int e)
{
    if (!fw->err && !fw->msg) fw->err = e ? e : EIO;
}

void fs_work_set_msg(struct fs_work *fw, enum fs_err_kind kind, const char *fmt, ...)
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
    fw->kind = kind;
}

bool fs_work_failed(const struct fs_work *fw)
{
    return fw->err || fw->msg;
}

/* ``path `<path>` is not a file``, the path shown as Rust's Path::display does
 * (invalid UTF-8 replaced, so the reply stays valid JSON). */
static void not_a_file(struct fs_work *fw, const char *path)
{
    struct buf b;
    buf_init(&b);
    utf8_lossy(&b, path, strlen(path));
    buf_putc(&b, '\0');
    fs_work_set_msg(fw, FS_ERR_REFUSED, "path `%s` is not a file", b.data);
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
    if (fw->rq.nofollow) {
        const char *leaf;
        int pfd = open_parent_nofollow(path, &leaf);
        if (pfd < 0) {
            fs_work_set_err(fw, errno);
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
        fs_work_set_err(fw, errno);
        return -1;
    }
    struct stat st;
    if (fstat(fd, &st) < 0) {
        fs_work_set_err(fw, errno);
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

/* Takes n bytes of the read budget for fw (fs_budget.h). False when fw must wait
 * (fw->budget_wait; it holds nothing) or has failed (recorded). */
static bool read_budget_take(struct fs_work *fw, size_t n, bool alone_ok)
{
    switch (fs_budget_take(n, fw->budget_held, alone_ok)) {
    case FS_BUDGET_OK: fw->budget_held += n; return true;
    case FS_BUDGET_WAIT:
        fw->budget_wait = true;
        fw->budget_need = n;
        return false;
    default:
        fs_work_set_msg(fw, FS_ERR_REFUSED,
                        "file is larger than its stat size (0 for /proc and /sys files) and "
                        "its content passed the server's read budget of %zu bytes "
                        "(--max-read-buffer-bytes), which the reads in flight share",
                        server_limits.max_read_buffer);
        return false;
    }
}

static void do_read_file(struct fs_work *fw)
{
    if (fw->rq.nofollow) fs_path_strip_slashes(fw->rq.path);
    int fd = open_regular(fw, fw->rq.path);
    if (fd < 0) return;
    struct stat st;
    if (fstat(fd, &st) < 0) {
        fs_work_set_err(fw, errno);
        close(fd);
        return;
    }
    if ((uint64_t)st.st_size > FS_READ_LIMIT) {
        fs_work_set_msg(fw, FS_ERR_REFUSED, "file is too large to read: limit is %llu bytes",
                        (unsigned long long)FS_READ_LIMIT);
        close(fd);
        return;
    }
    /* The known size's reply is taken whole; whatever comes past it (a /proc file
     * says 0), one step at a time, never past the budget. */
    uint64_t known = (uint64_t)st.st_size;
    if (known > 0) {
        if (!read_budget_take(fw, base64_encoded_len((size_t)known) + 64, true)) {
            close(fd);
            return;
        }
        /* The reply is as large as the file and a third more: a cached huge-page
         * buffer (util/bigbuf.h), not fresh pages faulted in one by one. */
        buf_reserve_big(&fw->out, base64_encoded_len((size_t)known) + 64);
    }
    enum { CHUNK = 3 << 20 };
    size_t out0 = fw->out.len;
    char *chunk = bigbuf_alloc(CHUNK, NULL);
    buf_puts(&fw->out, "{\"dataBase64\":\"");
    uint64_t total = 0;
    for (;;) {
        size_t got;
        int e = 0;
        if (!read_full(fd, chunk, CHUNK, &got, &e)) {
            fs_work_set_err(fw, e);
            break;
        }
        total += got;
        if (fs_budget_stopped()) {
            fs_work_set_msg(fw, FS_ERR_INTERNAL, "the server is shutting down");
            break;
        }
        if (total > FS_READ_LIMIT) {
            fs_work_set_msg(fw, FS_ERR_REFUSED, "file is too large to read: limit is %llu bytes",
                            (unsigned long long)FS_READ_LIMIT);
            break;
        }
        if (total > known && !read_budget_take(fw, base64_encoded_len(got), false)) {
            fw->out.len = out0; /* waiting: the reply starts over when it runs again */
            break;
        }
        char *dst = buf_extend(&fw->out, base64_encoded_len(got));
        base64_encode(chunk, got, dst);
        if (got < CHUNK) break;
    }
    if (!fw->budget_wait) buf_puts(&fw->out, "\"}");
    bigbuf_free(chunk);
    close(fd);
}

/* followSymlinks:true: the parent directory of path as an O_PATH descriptor
 * (symlinks in it followed, as open(2) would) and *leaf pointing at the last
 * component; -1 when path has no last component (a trailing slash) or the parent
 * cannot be opened (the in-place write then reports what open(2) says). */
static int open_parent(const char *path, const char **leaf)
{
    const char *last = strrchr(path, '/');
    if (!last || !last[1]) return -1;
    *leaf = last + 1;
    size_t dl = last == path ? 1 : (size_t)(last - path);
    char dir[PATH_MAX];
    if (dl >= sizeof dir) return -1;
    memcpy(dir, path, dl);
    dir[dl] = '\0';
    return open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
}

/* Writes data[0..n) to fd; 0 or an errno. */
static int write_all(int fd, const uint8_t *data, size_t n)
{
    size_t done = 0;
    while (done < n) {
        ssize_t w = write(fd, data + done, n - done);
        if (w < 0) {
            if (errno == EINTR) continue;
            return errno;
        }
        done += (size_t)w;
    }
    return 0;
}

/* fs/writeFile as an editor saves: the new content goes to a file beside the old
 * one in the same directory, which then replaces it with one rename(2), so a write
 * that fails half-way (ENOSPC, EFBIG, EIO) leaves the old content whole instead of
 * a truncated file. It applies to an existing regular file with one link that we
 * may write; it keeps the mode and the owner. It does not apply, and the file is
 * written in place as before, to a new file, a hard-linked file (the other names
 * must see the change), a symlink's target seen through the link, special files,
 * or when the directory does not let us add a file or the owner cannot be kept.
 * Extended attributes (ACLs, security labels) are not carried over, and the file
 * gets a new inode. fw->rq.fsync: the new file and then the directory are fsync'd
 * before the reply. Returns false when it does not apply. */
static unsigned long long temp_name_base;

static void temp_name_seed(void)
{
    crypto_random_bytes((uint8_t *)&temp_name_base, sizeof temp_name_base);
}

/* The next temporary-file suffix (48 bits): a random start drawn once, then a
 * counter. Names need only be unlikely to exist (O_EXCL decides, and a taken one is
 * skipped); a getrandom per write was a system call on every small fs/writeFile. */
static unsigned long long temp_name_next(void)
{
    static _Atomic unsigned long long next;
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, temp_name_seed);
    return (next++ ^ temp_name_base) & 0xffffffffffffull;
}

static bool write_replace(struct fs_work *fw, const uint8_t *data, size_t n)
{
    const char *leaf;
    int pfd = fw->rq.nofollow ? open_parent_nofollow(fw->rq.path, &leaf)
                              : open_parent(fw->rq.path, &leaf);
    if (pfd < 0) return false;
    struct stat st;
    /* Held open across the rename (fw->displaced_fd), so that freeing the old
     * inode happens after the reply. */
    int old = openat(pfd, leaf, O_PATH | O_NOFOLLOW | O_CLOEXEC);
    bool applies;
    if (old >= 0)
        applies = fstat(old, &st) == 0 && S_ISREG(st.st_mode) && st.st_nlink == 1;
    else /* out of fds: still replace, only without holding the old file */
        applies = (errno == EMFILE || errno == ENFILE) &&
                  fstatat(pfd, leaf, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode) &&
                  st.st_nlink == 1;
    /* Only a file we may write in place: a read-only file stays refused. (An
     * append-only or otherwise unreplaceable one fails the rename below and is then
     * written in place, which refuses it as before.) */
    if (applies) applies = faccessat(pfd, leaf, W_OK, AT_EACCESS | AT_SYMLINK_NOFOLLOW) == 0;
    char tmp[NAME_MAX + 1];
    int fd = -1;
    for (int tries = 0; applies && tries < 8; tries++) {
        int keep = (int)strlen(leaf);
        if (keep > NAME_MAX - 24) keep = NAME_MAX - 24;
        snprintf(tmp, sizeof tmp, ".%.*s.%012llx.tmp", keep, leaf, temp_name_next());
        /* Created with the old file's permission bits (less the umask), so that
         * usually no fchmod is needed; never wider than the file it replaces. */
        fd = openat(pfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW,
                    st.st_mode & 0777);
        if (fd >= 0 || errno != EEXIST) break;
    }
    if (fd < 0) {
        int e = errno;
        close(pfd);
        if (old >= 0) close(old);
        if (!applies || (e != ENOSPC && e != EDQUOT)) return false; /* e.g. EACCES: in place */
        fs_work_set_err(fw, e); /* no room for a second file: in place could lose both */
        return true;
    }
    int e = 0;
    struct stat tst;
    if (fstat(fd, &tst) < 0) e = errno;
    /* The owner first: chown clears set-id bits, which fchmod then restores. */
    else if ((tst.st_uid != st.st_uid || tst.st_gid != st.st_gid) &&
             fchown(fd, st.st_uid, st.st_gid) < 0)
        e = -1;
    else if ((tst.st_mode & 07777) != (st.st_mode & 07777) && fchmod(fd, st.st_mode & 07777) < 0)
        e = -1;
    if (e == 0) e = write_all(fd, data, n);
    if (e == 0 && fw->rq.fsync && fsync(fd) < 0) e = errno;
    if (close(fd) < 0 && e == 0) e = errno;
    if (e == 0 && renameat(pfd, tmp, pfd, leaf) < 0)
        e = errno == EACCES || errno == EPERM || errno == EXDEV ? -1 : errno;
    if (e != 0) unlinkat(pfd, tmp, 0);
    if (e == 0 && fw->rq.fsync) {
        int dfd = openat(pfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (dfd < 0 || fsync(dfd) < 0) e = errno;
        if (dfd >= 0) close(dfd);
    }
    close(pfd);
    if (e == 0)
        fw->displaced_fd = old;
    else if (old >= 0)
        close(old);
    if (e < 0) return false; /* the owner, mode or rename were not ours to keep: in place */
    if (e > 0) fs_work_set_err(fw, e);
    return true;
}

/* The bytes of fw's base64 payload: decoded in place when the request's copy is
 * its own (no second buffer of the file's size to fault in), else into *own (free
 * it with payload_free). Returns NULL with the decoder's text in detail when the
 * payload is not valid base64. */
static uint8_t *payload_decode(struct fs_work *fw, size_t *n, uint8_t **own, char *detail,
                               size_t dlen)
{
    size_t max = base64_decoded_max(fw->rq.b64_len) + 1;
    uint8_t *data;
    *own = NULL;
    if (fw->b64_writable)
        data = (uint8_t *)fw->rq.b64;
    else
        data = *own = max >= BIGBUF_MIN ? bigbuf_alloc(max, NULL) : xmalloc(max);
    if (base64_decode(fw->rq.b64, fw->rq.b64_len, data, n, detail, dlen) < 0) return NULL;
    return data;
}

static void payload_free(struct fs_work *fw, uint8_t *own)
{
    if (own && base64_decoded_max(fw->rq.b64_len) + 1 >= BIGBUF_MIN)
        bigbuf_free(own);
    else
        free(own);
}

static void do_write_file(struct fs_work *fw)
{
    size_t n = 0;
    uint8_t *own;
    char detail[128];
    uint8_t *data = payload_decode(fw, &n, &own, detail, sizeof detail);
    if (!data) {
        fs_work_set_msg(fw, FS_ERR_REFUSED, "fs/writeFile requires valid base64 dataBase64: %s",
                        detail);
        payload_free(fw, own);
        return;
    }
    if (fw->rq.nofollow) fs_path_strip_slashes(fw->rq.path);
    if (write_replace(fw, data, n)) {
        payload_free(fw, own);
        if (!fs_work_failed(fw)) buf_puts(&fw->out, "{}");
        return;
    }
    /* In place (not a regular file we may replace): never blocking, as a FIFO a
     * sandboxed command left where the client writes would hold this pool thread (or
     * the policy's shared sandbox helper) until a reader came; it gets ENXIO. */
    int fd;
    if (fw->rq.nofollow) {
        const char *leaf;
        int pfd = open_parent_nofollow(fw->rq.path, &leaf);
        fd = pfd < 0
                 ? -1
                 : openat(pfd, leaf,
                          O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK, 0666);
        int e = errno;
        if (pfd >= 0) close(pfd);
        errno = e;
    } else {
        fd = open(fw->rq.path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NONBLOCK, 0666);
    }
    if (fd < 0) {
        fs_work_set_err(fw, errno);
        payload_free(fw, own);
        return;
    }
    int e = write_all(fd, data, n);
    if (e) fs_work_set_err(fw, e);
    if (!e && fw->rq.fsync && fsync(fd) < 0) fs_work_set_err(fw, errno);
    if (close(fd) < 0 && !fs_work_failed(fw)) fs_work_set_err(fw, errno);
    payload_free(fw, own);
    if (!fs_work_failed(fw)) buf_puts(&fw->out, "{}");
}

/* ---- createDirectory / getMetadata / canonicalize ------------------------------ */

static void do_create_dir(struct fs_work *fw)
{
    fs_path_strip_slashes(fw->rq.path);
    if (fw->rq.nofollow) {
        int e = 0;
        if (fw->rq.recursive) {
            e = -fs_tree_mkdir_all_nofollow(fw->rq.path);
        } else {
            const char *leaf;
            int pfd = open_parent_nofollow(fw->rq.path, &leaf);
            if (pfd < 0 || mkdirat(pfd, leaf, 0777) < 0) e = errno;
            if (pfd >= 0) close(pfd);
        }
        if (e)
            fs_work_set_err(fw, e);
        else
            buf_puts(&fw->out, "{}");
        return;
    }
    if (fw->rq.recursive) {
        int e = -fs_tree_mkdir_all(fw->rq.path);
        if (e) fs_work_set_err(fw, e);
    } else if (mkdir(fw->rq.path, 0777) < 0) {
        fs_work_set_err(fw, errno);
    }
    if (!fs_work_failed(fw)) buf_puts(&fw->out, "{}");
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
    if (fw->rq.nofollow) {
        const char *leaf;
        fs_path_strip_slashes(fw->rq.path);
        int pfd = open_parent_nofollow(fw->rq.path, &leaf);
        if (pfd < 0) {
            fs_work_set_err(fw, errno);
            return;
        }
        int r = statx(pfd, leaf, AT_SYMLINK_NOFOLLOW, STATX_BASIC_STATS | STATX_BTIME, &sx);
        int e = errno;
        close(pfd);
        if (r < 0) {
            fs_work_set_err(fw, e);
            return;
        }
        if (S_ISLNK(sx.stx_mode)) {
            fs_work_set_msg(fw, FS_ERR_REFUSED, "path contains a symbolic link");
            return;
        }
        lst.st_mode = sx.stx_mode;
    } else {
        if (statx(AT_FDCWD, fw->rq.path, 0, STATX_BASIC_STATS | STATX_BTIME, &sx) < 0) {
            fs_work_set_err(fw, errno);
            return;
        }
        if (lstat(fw->rq.path, &lst) < 0) {
            fs_work_set_err(fw, errno);
            return;
        }
    }
    int64_t created =
        (sx.stx_mask & STATX_BTIME) ? ts_ms(sx.stx_btime.tv_sec, sx.stx_btime.tv_nsec) : 0;
    buf_printf(&fw->out,
               "{\"isDirectory\":%s,\"isFile\":%s,\"isSymlink\":%s,\"size\":%llu,"
               "\"createdAtMs\":%lld,\"modifiedAtMs\":%lld",
               S_ISDIR(sx.stx_mode) ? "true" : "false", S_ISREG(sx.stx_mode) ? "true" : "false",
               S_ISLNK(lst.st_mode) ? "true" : "false", (unsigned long long)sx.stx_size,
               (long long)created, (long long)ts_ms(sx.stx_mtime.tv_sec, sx.stx_mtime.tv_nsec));
    /* Ours (PROTOCOL.md §11 (h)): permission bits and owner, for `ls -l`-like
     * clients and for keeping modes across copies. Names only when this host can
     * resolve them (a sandboxed helper may not read the user database). */
    buf_printf(&fw->out, ",\"mode\":%u,\"uid\":%u,\"gid\":%u", (unsigned)(sx.stx_mode & 07777),
               (unsigned)sx.stx_uid, (unsigned)sx.stx_gid);
    char nb[1024];
    struct passwd pw, *pwp = NULL;
    if (getpwuid_r(sx.stx_uid, &pw, nb, sizeof nb, &pwp) == 0 && pwp) {
        buf_puts(&fw->out, ",\"owner\":");
        buf_put_json_str(&fw->out, pwp->pw_name, strlen(pwp->pw_name));
    }
    struct group gr, *grp = NULL;
    if (getgrgid_r(sx.stx_gid, &gr, nb, sizeof nb, &grp) == 0 && grp) {
        buf_puts(&fw->out, ",\"group\":");
        buf_put_json_str(&fw->out, grp->gr_name, strlen(grp->gr_name));
    }
    buf_putc(&fw->out, '}');
}

static void put_uri(struct buf *b, const char *path, size_t len)
{
    char *u = uri_from_path(path, len);
    buf_put_json_str(b, u, strlen(u));
    free(u);
}

static void do_canonicalize(struct fs_work *fw)
{
    char *r = realpath(fw->rq.path, NULL);
    if (!r) {
        fs_work_set_err(fw, errno);
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
    DIR *dir = opendir(fw->rq.path);
    if (!dir) {
        fs_work_set_err(fw, errno);
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
            if (errno) fs_work_set_err(fw, errno);
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
        utf8_lossy(&name, de->d_name, strlen(de->d_name));
        buf_puts(&fw->out, "{\"fileName\":");
        buf_put_json_str(&fw->out, name.data ? name.data : "", name.len);
        buf_printf(&fw->out, ",\"isDirectory\":%s,\"isFile\":%s}",
                   S_ISDIR(st.st_mode) ? "true" : "false", S_ISREG(st.st_mode) ? "true" : "false");
    }
    buf_free(&name);
    closedir(dir);
    if (n > READDIR_LIMIT)
        fs_work_set_msg(fw, FS_ERR_INTERNAL, "fs/readDirectory returned %zu entries; limit is %d",
                        n, READDIR_LIMIT);
    buf_puts(&fw->out, "]}");
}

/* ---- remove ----------------------------------------------------------------------- */

static void do_remove_nofollow(struct fs_work *fw)
{
    const char *leaf;
    fs_path_strip_slashes(fw->rq.path);
    int pfd = open_parent_nofollow(fw->rq.path, &leaf);
    struct stat st;
    int e = 0;
    if (pfd < 0 || fstatat(pfd, leaf, &st, AT_SYMLINK_NOFOLLOW) < 0) {
        e = errno;
    } else if (fw->rq.recursive) {
        fs_work_set_msg(fw, FS_ERR_INTERNAL, "recursive no-follow removal is unsupported");
    } else if (S_ISLNK(st.st_mode)) {
        fs_work_set_msg(fw, FS_ERR_REFUSED, "path contains a symbolic link");
    } else if (unlinkat(pfd, leaf, S_ISDIR(st.st_mode) ? AT_REMOVEDIR : 0) < 0) {
        e = errno;
    }
    if (pfd >= 0) close(pfd);
    if (e == ENOENT && fw->rq.force) e = 0;
    if (e) fs_work_set_err(fw, e);
    if (!fs_work_failed(fw)) buf_puts(&fw->out, "{}");
}

static void do_remove(struct fs_work *fw)
{
    if (fw->rq.nofollow) {
        do_remove_nofollow(fw);
        return;
    }
    struct stat st;
    if (lstat(fw->rq.path, &st) < 0) {
        if (errno == ENOENT && fw->rq.force) {
            buf_puts(&fw->out, "{}");
            return;
        }
        fs_work_set_err(fw, errno);
        return;
    }
    int e = 0;
    if (S_ISDIR(st.st_mode)) {
        if (fw->rq.recursive)
            e = -fs_tree_remove_at(AT_FDCWD, fw->rq.path);
        else if (rmdir(fw->rq.path) < 0)
            e = errno;
    } else if (unlink(fw->rq.path) < 0) {
        e = errno;
    }
    if (e == ENOENT && fw->rq.force) e = 0;
    if (e)
        fs_work_set_err(fw, e);
    else
        buf_puts(&fw->out, "{}");
}

/* ---- copy ------------------------------------------------------------------------- */

static void do_copy(struct fs_work *fw)
{
    struct stat st;
    if (lstat(fw->rq.path, &st) < 0) {
        fs_work_set_err(fw, errno);
        return;
    }
    int e = 0;
    if (S_ISREG(st.st_mode)) {
        e = -fs_tree_copy_file(fw->rq.path, fw->rq.path2);
    } else if (S_ISLNK(st.st_mode)) {
        e = -fs_tree_copy_link(fw->rq.path, fw->rq.path2);
    } else if (S_ISDIR(st.st_mode)) {
        if (!fw->rq.recursive) {
            fs_work_set_msg(fw, FS_ERR_REFUSED,
                            "fs/copy requires recursive: true when sourcePath is a directory");
            return;
        }
        char *s = realpath(fw->rq.path, NULL);
        if (!s) {
            fs_work_set_err(fw, errno);
            return;
        }
        char *d = fs_tree_resolve_existing_prefix(fw->rq.path2);
        size_t sl = strlen(s);
        bool inside = d && strncmp(d, s, sl) == 0 &&
                      (d[sl] == '\0' || d[sl] == '/' || (sl == 1 && s[0] == '/'));
        free(s);
        free(d);
        if (inside) {
            fs_work_set_msg(fw, FS_ERR_REFUSED,
                            "fs/copy cannot copy a directory to itself or one of its descendants");
            return;
        }
        fs_path_strip_slashes(fw->rq.path2);
        e = -fs_tree_mkdir_all(fw->rq.path2);
        if (!e) e = -fs_tree_copy(fw->rq.path, fw->rq.path2);
    } else {
        fs_work_set_msg(fw, FS_ERR_REFUSED,
                        "fs/copy only supports regular files, directories, and symlinks");
        return;
    }
    if (e)
        fs_work_set_err(fw, e);
    else
        buf_puts(&fw->out, "{}");
}

/* ---- open / readBlock ----------------------------------------------------------- */

static void do_open(struct fs_work *fw)
{
    if (!fw->rq.replace) {
        fw->fd = open_regular(fw, fw->rq.path);
        return;
    }
    /* O_NONBLOCK: a FIFO without a reader fails (ENXIO) instead of blocking. */
    int fd = open(fw->rq.path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NONBLOCK, 0666);
    if (fd < 0) {
        fs_work_set_err(fw, errno);
        return;
    }
    struct stat st;
    if (fstat(fd, &st) < 0) {
        fs_work_set_err(fw, errno);
        close(fd);
        return;
    }
    if (!S_ISREG(st.st_mode)) {
        not_a_file(fw, fw->rq.path);
        close(fd);
        return;
    }
    int fl = fcntl(fd, F_GETFL);
    if (fl >= 0) fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
    fw->fd = fd;
}

static void do_write_block(struct fs_work *fw)
{
    size_t n = 0;
    uint8_t *own;
    char detail[96];
    uint8_t *data = payload_decode(fw, &n, &own, detail, sizeof detail);
    if (!data) {
        fs_work_set_msg(fw, FS_ERR_PARAMS, "%s", detail);
        goto out;
    }
    if (fw->offset > (uint64_t)INT64_MAX) {
        fs_work_set_err(fw, EINVAL);
        goto out;
    }
    size_t done = 0;
    pthread_mutex_lock(&fw->h->write_lock);
    while (done < n) {
        ssize_t w = pwrite(fw->h->fd, data + done, n - done, (off_t)(fw->offset + done));
        if (w < 0) {
            if (errno == EINTR) continue;
            fs_work_set_err(fw, errno);
            break;
        }
        done += (size_t)w;
    }
    pthread_mutex_unlock(&fw->h->write_lock);
    if (fs_work_failed(fw)) goto out;
    /* An empty chunk still reports a read-only handle. */
    if (n == 0 && pwrite(fw->h->fd, "", 0, (off_t)fw->offset) < 0) {
        fs_work_set_err(fw, errno);
        goto out;
    }
    buf_puts(&fw->out, "{}");
out:
    payload_free(fw, own);
}

static void do_read_block(struct fs_work *fw)
{
    if (fw->offset > (uint64_t)INT64_MAX) {
        fs_work_set_err(fw, EINVAL);
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
            fs_work_set_err(fw, errno);
            free(data);
            return;
        }
        if (r == 0) break;
        done += (size_t)r;
    }
    buf_reserve_big(&fw->out, base64_encoded_len(done) + 40);
    buf_puts(&fw->out, "{\"chunk\":\"");
    base64_append(&fw->out, data, done);
    buf_printf(&fw->out, "\",\"eof\":%s}", done < fw->len ? "true" : "false");
    free(data);
}

/* ---- dispatch ------------------------------------------------------------------- */

static fs_discover_fn discover_scan;

void fs_set_discover(fs_discover_fn scan)
{
    discover_scan = scan;
}

static void do_discover(struct fs_work *fw)
{
    if (!discover_scan) {
        fs_work_set_err(fw, ENOSYS);
        return;
    }
    discover_scan(fw->rq.path, fw->rq.path2 ? fw->rq.path2 : "", &fw->out);
}

void fs_ops_run(struct fs_work *fw)
{
    switch (fw->rq.op) {
    case OP_READ_FILE: do_read_file(fw); break;
    case OP_WRITE_FILE: do_write_file(fw); break;
    case OP_CREATE_DIR: do_create_dir(fw); break;
    case OP_METADATA: do_metadata(fw); break;
    case OP_CANONICALIZE: do_canonicalize(fw); break;
    case OP_READ_DIR: do_read_dir(fw); break;
    case OP_REMOVE: do_remove(fw); break;
    case OP_COPY: do_copy(fw); break;
    case OP_WALK: {
        struct fs_walk_opts o = {fw->rq.max_depth, fw->rq.max_dirs, fw->rq.max_entries,
                                 fw->rq.follow_dir_links, fw->rq.prune_hidden};
        int e = fs_walk(fw->rq.path, &o, &fw->out);
        if (e) fs_work_set_err(fw, e);
        break;
    }
    case OP_OPEN: do_open(fw); break;
    case OP_READ_BLOCK: do_read_block(fw); break;
    case OP_WRITE_BLOCK: do_write_block(fw); break;
    case OP_DISCOVER: do_discover(fw); break;
    case FS_OP_COUNT: fs_work_set_err(fw, ENOSYS); break; /* no operation */
    }
}
