/* fs_op_table: what each fs operation is, beside its code: whether the sandboxed
 * helper serves it, and the system calls it makes there.
 *
 * The helper runs under a seccomp allowlist (sandbox/seccomp.c, seccomp_build_fs_helper)
 * that fails every call it does not list with ENOSYS. The lists here name what each
 * operation's code calls through glibc (traced with strace on this build, and read from
 * the code: open(2) is openat, stat(2) newfstatat, readdir(3) getdents64), so that
 * tests/unit/test_seccomp.c can hold the allowlist to them: a new operation, or a new
 * call in an old one, that the allowlist misses fails that test instead of a client's
 * request at run time. OpenSSH's monitor serves a fixed table of request types the
 * same way. */
#include "fs/fs_request.h"

#include <sys/syscall.h>

/* Every list ends with -1. */
#define CALLS(...) ((const int[]){__VA_ARGS__, -1})

/* The helper's loop and what any operation's code does besides its files: its socket,
 * memory, locks, time, the read budget's clock, itself. */
const int fs_op_helper_loop_calls[] = {
    __NR_recvmsg,    __NR_sendmsg,       __NR_read,           __NR_write,  __NR_close,
    __NR_mmap,       __NR_munmap,        __NR_mremap,         __NR_brk,    __NR_madvise,
    __NR_futex,      __NR_clock_gettime, __NR_getrandom,      __NR_getpid, __NR_gettid,
    __NR_exit_group, __NR_rt_sigaction,  __NR_rt_sigprocmask, -1,
};

/* Opening a path the way fs_ops.c does: the parent without following links
 * (open_parent_nofollow), the leaf, a look at what it is. */
#define OPEN_CALLS __NR_openat, __NR_newfstatat, __NR_fstat, __NR_fcntl, __NR_close

static const struct fs_op_info ops[FS_OP_COUNT] = {
    [OP_READ_FILE] = {"readFile", true, CALLS(OPEN_CALLS, __NR_read, __NR_pread64)},
    [OP_WRITE_FILE] = {"writeFile", true,
                       CALLS(OPEN_CALLS, __NR_write, __NR_pwrite64, __NR_fchmod, __NR_fchown,
                             __NR_renameat, __NR_unlinkat, __NR_fsync, __NR_ftruncate)},
    [OP_CREATE_DIR] = {"createDirectory", true, CALLS(OPEN_CALLS, __NR_mkdirat)},
    [OP_METADATA] = {"getMetadata", true, CALLS(OPEN_CALLS, __NR_statx)},
    [OP_CANONICALIZE] = {"canonicalize", true, CALLS(OPEN_CALLS, __NR_readlinkat)},
    [OP_READ_DIR] = {"readDirectory", true, CALLS(OPEN_CALLS, __NR_getdents64)},
    [OP_REMOVE] = {"remove", true, CALLS(OPEN_CALLS, __NR_getdents64, __NR_unlinkat)},
    [OP_COPY] = {"copy", true,
                 CALLS(OPEN_CALLS, __NR_getdents64, __NR_read, __NR_write, __NR_mkdirat,
                       __NR_fchmod, __NR_readlinkat, __NR_symlinkat, __NR_unlinkat)},
    [OP_WALK] = {"walk", true, CALLS(OPEN_CALLS, __NR_getdents64)},
    [OP_OPEN] = {"open", true, CALLS(OPEN_CALLS, __NR_ftruncate)},
    [OP_READ_BLOCK] = {"readBlock", false, CALLS(__NR_pread64)},
    [OP_WRITE_BLOCK] = {"writeBlock", false, CALLS(__NR_pwrite64)},
    [OP_DISCOVER] = {"discover", true, CALLS(OPEN_CALLS, __NR_getdents64, __NR_read)},
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
