/* fs_op_table: what each fs operation is, beside its code: its audit record, whether
 * the sandboxed helper serves it, and the system calls it makes there.
 *
 * The helper runs under a seccomp allowlist (sandbox/seccomp.c, seccomp_build_fs_helper)
 * that fails every call it does not list with ENOSYS. The lists here name what each
 * operation's code calls through glibc (read from the code, and traced with strace one
 * request of each kind on Debian bookworm's glibc: open(3) is openat, stat(3)
 * newfstatat, readdir(3) getdents64), so that tests/unit/test_seccomp.c can hold the
 * allowlist to them: an operation whose entry names a call the allowlist lacks fails
 * that test instead of a client's request at run time. OpenSSH's monitor serves a fixed
 * table of request types the same way. */
#include "fs/fs_request.h"

#include <sys/syscall.h>

/* Every list ends with -1. */
#define CALLS(...) ((const int[]){__VA_ARGS__, -1})

/* glibc makes the legacy path calls where the architecture has them (x86_64: mkdir(3)
 * is mkdir(2)), their *at forms elsewhere: both are listed where both exist. */
#ifdef __NR_mkdir
#define MKDIR __NR_mkdir, __NR_mkdirat
#define READLINK __NR_readlink, __NR_readlinkat
#define SYMLINK __NR_symlink, __NR_symlinkat
#else
#define MKDIR __NR_mkdirat
#define READLINK __NR_readlinkat
#define SYMLINK __NR_symlinkat
#endif

/* The helper's loop, and what any operation's code may do beside its files: its
 * socket (util/fdframe), memory, locks, the end. */
const int fs_op_helper_loop_calls[] = {
    __NR_recvmsg, __NR_sendmsg, __NR_read, __NR_poll,  __NR_close,      __NR_mmap,
    __NR_munmap,  __NR_mremap,  __NR_brk,  __NR_futex, __NR_exit_group, -1,
};

/* Opening what a request names the way fs_ops.c does: its parent without following
 * links (open_parent_nofollow, one openat a component), the leaf, a look at what it is,
 * the descriptor's flags. */
#define OPEN_CALLS __NR_openat, __NR_newfstatat, __NR_fcntl, __NR_close

static const struct fs_op_info ops[FS_OP_COUNT] = {
    [OP_READ_FILE] = {.name = "readFile",
                      .audit = "fs.read",
                      .helper = true,
                      .calls = CALLS(OPEN_CALLS, __NR_read, __NR_madvise)},
    /* a replacing write: a temporary beside the file (getrandom seeds its name), given
     * the old file's owner and mode, renamed over it, unlinked on failure */
    [OP_WRITE_FILE] = {.name = "writeFile",
                       .audit = "fs.write",
                       .changes = true,
                       .helper = true,
                       .calls = CALLS(OPEN_CALLS, __NR_faccessat2, __NR_getrandom, __NR_fchown,
                                      __NR_fchmod, __NR_write, __NR_fsync, __NR_renameat,
                                      __NR_unlinkat)},
    [OP_CREATE_DIR] = {.name = "createDirectory",
                       .audit = "fs.mkdir",
                       .changes = true,
                       .helper = true,
                       .calls = CALLS(OPEN_CALLS, MKDIR)},
    /* the owner's and group's names: glibc asks nscd over a socket first, which the
     * allowlist refuses on purpose, then reads /etc/passwd and /etc/group */
    [OP_METADATA] = {.name = "getMetadata",
                     .audit = "fs.getMetadata",
                     .helper = true,
                     .calls = CALLS(OPEN_CALLS, __NR_statx, __NR_read, __NR_lseek)},
    [OP_CANONICALIZE] = {.name = "canonicalize",
                         .audit = "fs.canonicalize",
                         .helper = true,
                         .calls = CALLS(OPEN_CALLS, READLINK)},
    [OP_READ_DIR] = {.name = "readDirectory",
                     .audit = "fs.readDirectory",
                     .helper = true,
                     .calls = CALLS(OPEN_CALLS, __NR_getdents64)},
    [OP_REMOVE] = {.name = "remove",
                   .audit = "fs.remove",
                   .changes = true,
                   .helper = true,
                   .calls = CALLS(OPEN_CALLS, __NR_getdents64, __NR_unlinkat)},
    [OP_COPY] = {.name = "copy",
                 .audit = "fs.copy",
                 .changes = true,
                 .helper = true,
                 .calls = CALLS(OPEN_CALLS, __NR_getdents64, __NR_read, __NR_write, __NR_fchmod,
                                MKDIR, READLINK, SYMLINK)},
    [OP_WALK] = {.name = "walk",
                 .audit = "fs.walk",
                 .helper = true,
                 .calls = CALLS(OPEN_CALLS, __NR_getdents64)},
    [OP_OPEN] = {.name = "open", .audit = "fs.open", .helper = true, .calls = CALLS(OPEN_CALLS)},
    /* handle I/O runs in the daemon, on the descriptor fs/open passed back */
    [OP_READ_BLOCK] = {.name = "readBlock", .audit = "fs.readBlock", .calls = CALLS(__NR_pread64)},
    [OP_WRITE_BLOCK] = {.name = "writeBlock",
                        .audit = "fs.writeBlock",
                        .changes = true,
                        .calls = CALLS(__NR_pwrite64)},
    [OP_DISCOVER] = {.name = "discover",
                     .helper = true,
                     .calls = CALLS(OPEN_CALLS, __NR_getdents64, __NR_read)},
};

const struct fs_op_info *fs_op_info(uint32_t op)
{
    return op < FS_OP_COUNT && ops[op].name ? &ops[op] : NULL;
}

bool fs_op_helper_serves(uint32_t op)
{
    const struct fs_op_info *i = fs_op_info(op);
    return i && i->helper;
}
