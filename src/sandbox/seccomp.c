/* seccomp: the sandboxed child's system-call filter (see seccomp.h).
 *
 * Hand-written BPF rather than libseccomp: the program is installed between vfork
 * and execve, where libseccomp's allocating seccomp_load() may not run; building
 * it is cheap and happens before the vfork.
 *
 * The rules are written one after the other, each self-contained (it starts with
 * `JEQ nr`, jf = the rest of its length, and leaves A = nr when it decides nothing),
 * and the program dispatches to them by a binary search on the call's number
 * (program_build). Installing a filter costs the kernel time in proportion to the
 * paths it emulates for every system call number (the allow-bitmap cache of Linux
 * 5.11) as well as to its length: the rules as one chain, which most numbers walked
 * to its end, were 0.25 ms of every sandboxed command's start. */
#include "sandbox/seccomp.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/audit.h>
#include <linux/seccomp.h>
#include <netinet/in.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "util/fdframe.h"

#if defined(__x86_64__)
#define SC_AUDIT_ARCH AUDIT_ARCH_X86_64
#elif defined(__aarch64__)
#define SC_AUDIT_ARCH AUDIT_ARCH_AARCH64
#endif

#define SC_LOAD_NR BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr))
#define SC_LOAD_ARG_LO(i) BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, args[i]))
#define SC_LOAD_ARG_HI(i)                                                                          \
    BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, args[i]) + 4)
#define SC_ERRNO(e) BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | ((e)&SECCOMP_RET_DATA))

/* nr -> a user notification, answered by the sandbox's init (net_guard.h). */
#define SC_NOTIFY(nr)                                                                              \
    BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (nr), 0, 1),                                               \
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_USER_NOTIF)
/* nr with any of bits set in the low 32 bits of argument i -> a user notification;
 * reloads nr. */
#define SC_NOTIFY_ARG_SET(nr, i, bits)                                                             \
    BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (nr), 0, 4), SC_LOAD_ARG_LO(i),                            \
        BPF_JUMP(BPF_JMP | BPF_JSET | BPF_K, (uint32_t)(bits), 0, 1),                              \
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_USER_NOTIF), SC_LOAD_NR

/* nr with any of bits set in the low 32 bits of argument i -> errno e; reloads nr. */
#define SC_DENY_ARG_SET(nr, i, bits, e)                                                            \
    BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (nr), 0, 4), SC_LOAD_ARG_LO(i),                            \
        BPF_JUMP(BPF_JMP | BPF_JSET | BPF_K, (uint32_t)(bits), 0, 1), SC_ERRNO(e), SC_LOAD_NR
/* nr -> errno e. */
#define SC_DENY(nr, e) BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (nr), 0, 1), SC_ERRNO(e)
/* nr with the low 32 bits of argument i equal to v -> errno e; reloads nr. */
#define SC_DENY_ARG_EQ(nr, i, v, e)                                                                \
    BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (nr), 0, 4), SC_LOAD_ARG_LO(i),                            \
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (uint32_t)(v), 0, 1), SC_ERRNO(e), SC_LOAD_NR
/* nr with argument i's low 32 bits not equal to any of a, b -> errno e; reloads nr. */
#define SC_DENY_ARG_NOT2(nr, i, a, b, e)                                                           \
    BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (nr), 0, 5), SC_LOAD_ARG_LO(i),                            \
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (uint32_t)(a), 2, 0),                                  \
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (uint32_t)(b), 1, 0), SC_ERRNO(e), SC_LOAD_NR

#ifndef __NR_io_uring_setup
#define __NR_io_uring_setup 425
#define __NR_io_uring_enter 426
#define __NR_io_uring_register 427
#endif
#ifndef __NR_open_tree
#define __NR_open_tree 428
#define __NR_move_mount 429
#define __NR_fsopen 430
#define __NR_fsconfig 431
#define __NR_fsmount 432
#define __NR_fspick 433
#endif
#ifndef __NR_mount_setattr
#define __NR_mount_setattr 442
#endif

#define NELEM(a) (sizeof(a) / sizeof((a)[0]))

#ifdef SC_AUDIT_ARCH
static const struct sock_filter prologue[] = {
    BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
    BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SC_AUDIT_ARCH, 1, 0),
    BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS),
    SC_LOAD_NR,
#if defined(__x86_64__)
    /* x32 numbers share the arch value: refuse them all. */
    BPF_JUMP(BPF_JMP | BPF_JGE | BPF_K, 0x40000000U, 0, 1),
    SC_ERRNO(ENOSYS),
#endif
};

/* What no sandboxed child needs, denied with EPERM like the reference does. */
static const struct sock_filter base_rules[] = {
    /* Other processes and the kernel's attack surface. */
    SC_DENY(__NR_ptrace, EPERM),
    SC_DENY(__NR_process_vm_readv, EPERM),
    SC_DENY(__NR_process_vm_writev, EPERM),
    SC_DENY(__NR_kcmp, EPERM),
    SC_DENY(__NR_io_uring_setup, EPERM),
    SC_DENY(__NR_io_uring_enter, EPERM),
    SC_DENY(__NR_io_uring_register, EPERM),
    SC_DENY(__NR_bpf, EPERM),
    SC_DENY(__NR_perf_event_open, EPERM),
    SC_DENY(__NR_userfaultfd, EPERM),
    SC_DENY(__NR_keyctl, EPERM),
    SC_DENY(__NR_add_key, EPERM),
    SC_DENY(__NR_request_key, EPERM),
    SC_DENY(__NR_open_by_handle_at, EPERM),
    /* The hypervisor's vsock ports (a VM's host side) are never the child's. */
    SC_DENY_ARG_EQ(__NR_socket, 0, AF_VSOCK, EPERM),
    SC_DENY_ARG_EQ(__NR_socketpair, 0, AF_VSOCK, EPERM),
    /* Host-wide state. */
    SC_DENY(__NR_init_module, EPERM),
    SC_DENY(__NR_finit_module, EPERM),
    SC_DENY(__NR_delete_module, EPERM),
    SC_DENY(__NR_kexec_load, EPERM),
    SC_DENY(__NR_kexec_file_load, EPERM),
    SC_DENY(__NR_reboot, EPERM),
    SC_DENY(__NR_swapon, EPERM),
    SC_DENY(__NR_swapoff, EPERM),
    SC_DENY(__NR_acct, EPERM),
    SC_DENY(__NR_settimeofday, EPERM),
    SC_DENY(__NR_clock_settime, EPERM),
    SC_DENY(__NR_clock_adjtime, EPERM),
    SC_DENY(__NR_adjtimex, EPERM),
    SC_DENY(__NR_syslog, EPERM),
    SC_DENY(__NR_sethostname, EPERM),
    SC_DENY(__NR_setdomainname, EPERM),
    SC_DENY(__NR_quotactl, EPERM),
    SC_DENY(__NR_vhangup, EPERM),
#if defined(__x86_64__)
    SC_DENY(__NR_ioperm, EPERM),
    SC_DENY(__NR_iopl, EPERM),
    SC_DENY(__NR_uselib, EPERM),
#endif
    /* The mount table: the view is fixed once the child runs (Landlock refuses
     * mount changes too; this also holds where Landlock is off). */
    SC_DENY(__NR_mount, EPERM),
    SC_DENY(__NR_umount2, EPERM),
    SC_DENY(__NR_pivot_root, EPERM),
    SC_DENY(__NR_open_tree, EPERM),
    SC_DENY(__NR_move_mount, EPERM),
    SC_DENY(__NR_fsopen, EPERM),
    SC_DENY(__NR_fsconfig, EPERM),
    SC_DENY(__NR_fsmount, EPERM),
    SC_DENY(__NR_fspick, EPERM),
    SC_DENY(__NR_mount_setattr, EPERM),
    SC_DENY(__NR_setns, EPERM),
    /* New namespaces are left to the kernel, as the reference leaves them: without
     * capabilities only a nested user namespace can be made, which holds nothing of
     * the host and inherits this filter and the Landlock domain (browsers' own
     * sandboxes need it); chroot likewise fails without the capability it has in
     * such a namespace only. */
    /* Typing into a terminal's input queue. */
    SC_DENY_ARG_EQ(__NR_ioctl, 1, TIOCSTI, EPERM),
    SC_DENY_ARG_EQ(__NR_ioctl, 1, TIOCLINUX, EPERM),
    /* Execution domains that turn off ASLR or change the syscall ABI. */
    SC_DENY_ARG_NOT2(__NR_personality, 0, 0, 0xffffffffu, EPERM),
};

/* No network: no socket at all (stricter than the reference, which allows
 * socket(AF_UNIX) and stops its connect), and every call that addresses or
 * configures a socket denied like the reference does, so even a socket this
 * process did not create (an inherited one) is of no use. socketpair(AF_UNIX)
 * stays: it reaches nothing but itself. */
static const struct sock_filter net_none[] = {
    SC_DENY(__NR_socket, EPERM),      SC_DENY_ARG_NOT2(__NR_socketpair, 0, AF_UNIX, AF_UNIX, EPERM),
    SC_DENY(__NR_connect, EPERM),     SC_DENY(__NR_accept, EPERM),
    SC_DENY(__NR_accept4, EPERM),     SC_DENY(__NR_bind, EPERM),
    SC_DENY(__NR_listen, EPERM),      SC_DENY(__NR_sendto, EPERM),
    SC_DENY(__NR_sendmmsg, EPERM),    SC_DENY(__NR_recvmmsg, EPERM),
    SC_DENY(__NR_shutdown, EPERM),    SC_DENY(__NR_getsockname, EPERM),
    SC_DENY(__NR_getpeername, EPERM), SC_DENY(__NR_setsockopt, EPERM),
    SC_DENY(__NR_getsockopt, EPERM),
};

static const struct sock_filter net_inet_only[] = {
    SC_DENY_ARG_NOT2(__NR_socket, 0, AF_INET, AF_INET6, EPERM),
};

/* Network enabled: the host's network, but not this server's listeners. Every
 * connect(2) is decided by the init (net_guard.h); the calls that connect without
 * connect(2) are refused: TCP Fast Open's sendto/sendmsg, and SCTP (its sendmsg and
 * setsockopt connect too; an inet SOCK_SEQPACKET socket is SCTP). */
static const struct sock_filter net_guarded[] = {
    SC_NOTIFY(__NR_connect),
    SC_DENY_ARG_SET(__NR_sendto, 3, MSG_FASTOPEN, EOPNOTSUPP),
    SC_DENY_ARG_SET(__NR_sendmsg, 2, MSG_FASTOPEN, EOPNOTSUPP),
    SC_DENY_ARG_SET(__NR_sendmmsg, 3, MSG_FASTOPEN, EOPNOTSUPP),
    SC_DENY_ARG_EQ(__NR_socket, 2, IPPROTO_SCTP, EPROTONOSUPPORT),
    /* socket(AF_INET or AF_INET6, SOCK_SEQPACKET | flags, 0) */
    BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_socket, 0, 8),
    SC_LOAD_ARG_LO(0),
    BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AF_INET, 1, 0),
    BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AF_INET6, 0, 4),
    SC_LOAD_ARG_LO(1),
    BPF_STMT(BPF_ALU | BPF_AND | BPF_K, 0xf),
    BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SOCK_SEQPACKET, 0, 1),
    SC_ERRNO(EPROTONOSUPPORT),
    SC_LOAD_NR,
};

#ifndef __NR_fchmodat2
#define __NR_fchmodat2 452
#endif
#ifndef __NR_setxattrat
#define __NR_setxattrat 463
#define __NR_removexattrat 466
#endif
#define SC_OPEN_WRITES (O_WRONLY | O_RDWR | O_CREAT | O_TRUNC)

/* The file-system broker (fs_broker.h). Reads: every open, rename and link, decided
 * again at call time against the deny entries. */
static const struct sock_filter broker_reads[] = {
#if defined(__x86_64__)
    SC_NOTIFY(__NR_open),      SC_NOTIFY(__NR_creat),   SC_NOTIFY(__NR_rename),
    SC_NOTIFY(__NR_link),
#endif
    SC_NOTIFY(__NR_openat),    SC_NOTIFY(__NR_openat2), SC_NOTIFY(__NR_renameat),
    SC_NOTIFY(__NR_renameat2), SC_NOTIFY(__NR_linkat),
};

/* Writes, without namespaces: every change of the file system. Opens only when they
 * write, create or truncate (reads stay the kernel's, under Landlock). */
static const struct sock_filter broker_writes[] = {
#if defined(__x86_64__)
    SC_NOTIFY_ARG_SET(__NR_open, 1, SC_OPEN_WRITES),
    SC_NOTIFY(__NR_creat),
    SC_NOTIFY(__NR_mkdir),
    SC_NOTIFY(__NR_mknod),
    SC_NOTIFY(__NR_symlink),
    SC_NOTIFY(__NR_link),
    SC_NOTIFY(__NR_unlink),
    SC_NOTIFY(__NR_rmdir),
    SC_NOTIFY(__NR_rename),
    SC_NOTIFY(__NR_chmod),
    SC_NOTIFY(__NR_chown),
    SC_NOTIFY(__NR_lchown),
    SC_NOTIFY(__NR_utime),
    SC_NOTIFY(__NR_utimes),
    SC_NOTIFY(__NR_futimesat),
#endif
    SC_NOTIFY_ARG_SET(__NR_openat, 2, SC_OPEN_WRITES),
    SC_NOTIFY(__NR_openat2),
    SC_NOTIFY(__NR_mkdirat),
    SC_NOTIFY(__NR_mknodat),
    SC_NOTIFY(__NR_symlinkat),
    SC_NOTIFY(__NR_linkat),
    SC_NOTIFY(__NR_unlinkat),
    SC_NOTIFY(__NR_renameat),
    SC_NOTIFY(__NR_renameat2),
    SC_NOTIFY(__NR_truncate),
    SC_NOTIFY(__NR_fchmodat),
    SC_NOTIFY(__NR_fchmodat2),
    SC_NOTIFY(__NR_fchmod),
    SC_NOTIFY(__NR_fchownat),
    SC_NOTIFY(__NR_fchown),
    SC_NOTIFY(__NR_utimensat),
    SC_NOTIFY(__NR_setxattr),
    SC_NOTIFY(__NR_lsetxattr),
    SC_NOTIFY(__NR_fsetxattr),
    SC_NOTIFY(__NR_removexattr),
    SC_NOTIFY(__NR_lremovexattr),
    SC_NOTIFY(__NR_fremovexattr),
    SC_NOTIFY(__NR_setxattrat),
    SC_NOTIFY(__NR_removexattrat),
};

/* Without namespaces: what an IPC namespace would have made the sandbox's own is the
 * host's, so it is not the command's (another process's System V shared memory,
 * semaphores and queues, POSIX message queues, keyed by guessable numbers and names). */
static const struct sock_filter no_namespaces[] = {
    SC_DENY(__NR_shmget, EPERM),
    SC_DENY(__NR_shmat, EPERM),
    SC_DENY(__NR_shmctl, EPERM),
    SC_DENY(__NR_semget, EPERM),
    SC_DENY(__NR_semop, EPERM),
    SC_DENY(__NR_semtimedop, EPERM),
    SC_DENY(__NR_semctl, EPERM),
    SC_DENY(__NR_msgget, EPERM),
    SC_DENY(__NR_msgsnd, EPERM),
    SC_DENY(__NR_msgrcv, EPERM),
    SC_DENY(__NR_msgctl, EPERM),
    SC_DENY(__NR_mq_open, EPERM),
    SC_DENY(__NR_mq_unlink, EPERM),
    /* Calls that act on another process by its number, which a PID namespace would
     * have kept out of reach: only the caller itself (0), so the server and the host's
     * other processes of the uid keep their limits, CPUs and priorities. */
    SC_DENY_ARG_NOT2(__NR_prlimit64, 0, 0, 0, EPERM),
    SC_DENY_ARG_NOT2(__NR_sched_setaffinity, 0, 0, 0, EPERM),
    SC_DENY_ARG_NOT2(__NR_sched_setscheduler, 0, 0, 0, EPERM),
    SC_DENY_ARG_NOT2(__NR_sched_setparam, 0, 0, 0, EPERM),
    SC_DENY_ARG_NOT2(__NR_sched_setattr, 0, 0, 0, EPERM),
    SC_DENY_ARG_NOT2(__NR_migrate_pages, 0, 0, 0, EPERM),
    SC_DENY_ARG_NOT2(__NR_move_pages, 0, 0, 0, EPERM),
    SC_DENY_ARG_NOT2(__NR_setpriority, 0, 0 /* PRIO_PROCESS */, 0, EPERM),
    SC_DENY_ARG_NOT2(__NR_setpriority, 1, 0, 0, EPERM),
    SC_DENY_ARG_NOT2(__NR_ioprio_set, 0, 1 /* IOPRIO_WHO_PROCESS */, 1, EPERM),
    SC_DENY_ARG_NOT2(__NR_ioprio_set, 1, 0, 0, EPERM),
    /* CLONE_INTO_CGROUP takes any cgroup directory opened for reading, which Landlock
     * does not stop, and without a cgroup namespace the process cap's cgroup would be
     * left through it; libc falls back to clone(2), as under Docker's own filter. */
    SC_DENY(__NR_clone3, ENOSYS),
};

/* Without namespaces and before Landlock ABI 6: every signal to another process is the
 * init's to decide (sig_guard.h): a PID namespace would have kept the rest out of
 * reach, and Landlock scopes signals only from ABI 6. */
static const struct sock_filter signals_notified[] = {
    SC_NOTIFY(__NR_kill),
    SC_NOTIFY(__NR_tkill),
    SC_NOTIFY(__NR_tgkill),
    SC_NOTIFY(__NR_rt_sigqueueinfo),
    SC_NOTIFY(__NR_rt_tgsigqueueinfo),
    SC_NOTIFY(__NR_pidfd_send_signal),
};

/* A managed network without a namespace of its own: the host's network is right
 * there, so the command's IP is a TCP connect to the proxy and nothing else (the init
 * decides each connect: net_guard.h): no datagrams (a sendto reaches any address), no
 * listening on the host's ports. */
static const struct sock_filter net_proxy_only[] = {
    /* socket(any, SOCK_DGRAM | flags, any) */
    BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_socket, 0, 5),
    SC_LOAD_ARG_LO(1),
    BPF_STMT(BPF_ALU | BPF_AND | BPF_K, 0xf),
    BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SOCK_STREAM, 1, 0),
    SC_ERRNO(EPERM),
    SC_LOAD_NR,
    SC_DENY(__NR_bind, EPERM),
    SC_DENY(__NR_listen, EPERM),
};

/* nr -> allowed. */
#define SC_ALLOW(nr)                                                                               \
    BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (nr), 0, 1), BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW)
/* nr allowed only when the low 32 bits of argument i equal v; reloads nr. */
#define SC_ALLOW_ARG_EQ(nr, i, v)                                                                  \
    BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (nr), 0, 4), SC_LOAD_ARG_LO(i),                            \
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (uint32_t)(v), 0, 1),                                  \
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW), SC_LOAD_NR

/* The fs helper's calls (in any order: the program searches them by number). */
static const struct sock_filter fs_helper_allow[] = {
    /* its socket and the request loop */
    SC_ALLOW(__NR_read),
    SC_ALLOW(__NR_write),
    SC_ALLOW(__NR_recvmsg),
    SC_ALLOW(__NR_sendmsg),
    SC_ALLOW(__NR_poll),
    SC_ALLOW(__NR_ppoll),
    SC_ALLOW(__NR_readv),
    SC_ALLOW(__NR_writev),
    /* files */
    SC_ALLOW(__NR_openat),
    SC_ALLOW(__NR_close),
    SC_ALLOW(__NR_newfstatat),
    SC_ALLOW(__NR_fstat),
    SC_ALLOW(__NR_statx),
    SC_ALLOW(__NR_getdents64),
    SC_ALLOW(__NR_lseek),
    SC_ALLOW(__NR_pread64),
    SC_ALLOW(__NR_pwrite64),
    SC_ALLOW(__NR_preadv),
    SC_ALLOW(__NR_pwritev),
    SC_ALLOW(__NR_fcntl),
    SC_ALLOW(__NR_dup),
    SC_ALLOW(__NR_dup3),
    SC_ALLOW(__NR_close_range),
    SC_ALLOW(__NR_openat2),
    SC_ALLOW(__NR_readlinkat),
    SC_ALLOW(__NR_faccessat),
    SC_ALLOW(__NR_faccessat2),
    SC_ALLOW(__NR_mkdirat),
    SC_ALLOW(__NR_unlinkat),
    SC_ALLOW(__NR_renameat),
    SC_ALLOW(__NR_renameat2),
    SC_ALLOW(__NR_linkat),
    SC_ALLOW(__NR_symlinkat),
    SC_ALLOW(__NR_fchmod),
    SC_ALLOW(__NR_fchmodat),
    SC_ALLOW(__NR_fchown),
    SC_ALLOW(__NR_fchownat),
    SC_ALLOW(__NR_utimensat),
    SC_ALLOW(__NR_ftruncate),
    SC_ALLOW(__NR_truncate),
    SC_ALLOW(__NR_fallocate),
    SC_ALLOW(__NR_fsync),
    SC_ALLOW(__NR_fdatasync),
    SC_ALLOW(__NR_copy_file_range),
    SC_ALLOW(__NR_sendfile),
    SC_ALLOW(__NR_fadvise64),
    SC_ALLOW(__NR_flock),
    SC_ALLOW(__NR_getcwd),
    SC_ALLOW(__NR_chdir),
    SC_ALLOW(__NR_fchdir),
    SC_ALLOW(__NR_statfs),
    SC_ALLOW(__NR_fstatfs),
    SC_ALLOW(__NR_umask),
    SC_ALLOW(__NR_getxattr),
    SC_ALLOW(__NR_lgetxattr),
    SC_ALLOW(__NR_fgetxattr),
    SC_ALLOW(__NR_listxattr),
    SC_ALLOW(__NR_llistxattr),
    SC_ALLOW(__NR_flistxattr),
#if defined(__x86_64__)
    /* the legacy path calls glibc still makes on x86_64 */
    SC_ALLOW(__NR_open),
    SC_ALLOW(__NR_stat),
    SC_ALLOW(__NR_lstat),
    SC_ALLOW(__NR_access),
    SC_ALLOW(__NR_readlink),
    SC_ALLOW(__NR_mkdir),
    SC_ALLOW(__NR_rmdir),
    SC_ALLOW(__NR_unlink),
    SC_ALLOW(__NR_rename),
    SC_ALLOW(__NR_link),
    SC_ALLOW(__NR_symlink),
    SC_ALLOW(__NR_chmod),
    SC_ALLOW(__NR_chown),
    SC_ALLOW(__NR_lchown),
    SC_ALLOW(__NR_getdents),
    SC_ALLOW(__NR_dup2),
    SC_ALLOW(__NR_getrlimit),
#endif
    /* memory */
    SC_ALLOW(__NR_mmap),
    SC_ALLOW(__NR_munmap),
    SC_ALLOW(__NR_mremap),
    SC_ALLOW(__NR_brk),
    SC_ALLOW(__NR_mprotect),
    SC_ALLOW(__NR_madvise),
    /* itself: threads' locks, time, ids, signals to itself (abort), the end */
    SC_ALLOW(__NR_futex),
    SC_ALLOW(__NR_clock_gettime),
    SC_ALLOW(__NR_clock_getres),
    SC_ALLOW(__NR_gettimeofday),
    SC_ALLOW(__NR_nanosleep),
    SC_ALLOW(__NR_clock_nanosleep),
    SC_ALLOW(__NR_sched_yield),
    SC_ALLOW(__NR_sched_getaffinity),
    SC_ALLOW(__NR_getrandom),
    SC_ALLOW(__NR_getpid),
    SC_ALLOW(__NR_gettid),
    SC_ALLOW(__NR_getppid),
    SC_ALLOW(__NR_getuid),
    SC_ALLOW(__NR_geteuid),
    SC_ALLOW(__NR_getgid),
    SC_ALLOW(__NR_getegid),
    SC_ALLOW(__NR_getgroups),
    SC_ALLOW(__NR_getresuid),
    SC_ALLOW(__NR_getresgid),
    SC_ALLOW(__NR_uname),
    SC_ALLOW(__NR_sysinfo),
    SC_ALLOW(__NR_rt_sigaction),
    SC_ALLOW(__NR_rt_sigprocmask),
    SC_ALLOW(__NR_rt_sigreturn),
    SC_ALLOW(__NR_sigaltstack),
    SC_ALLOW(__NR_tgkill),
    SC_ALLOW(__NR_tkill),
    SC_ALLOW(__NR_set_robust_list),
    SC_ALLOW(__NR_exit),
    SC_ALLOW(__NR_exit_group),
    /* reading its own limits (glibc's getrlimit): prlimit64(0, r, NULL, old), both
     * halves of the pid and of the new limit's pointer checked (a pointer whose low
     * half is 0, 0x7f0000000000 say, would otherwise pass as NULL and set limits, of
     * any process of the uid) */
    BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_prlimit64, 0, 10),
    SC_LOAD_ARG_LO(0),
    BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, 0, 0, 7),
    SC_LOAD_ARG_HI(0),
    BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, 0, 0, 5),
    SC_LOAD_ARG_LO(2),
    BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, 0, 0, 3),
    SC_LOAD_ARG_HI(2),
    BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, 0, 0, 1),
    BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
    SC_LOAD_NR,
    /* isatty and "how much is there to read": nothing else of ioctl */
    SC_ALLOW_ARG_EQ(__NR_ioctl, 1, TCGETS),
    SC_ALLOW_ARG_EQ(__NR_ioctl, 1, FIONREAD),
};

static const struct sock_filter fs_helper_default[] = {
    SC_ERRNO(ENOSYS),
};

static const struct sock_filter epilogue[] = {
    BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
};

static size_t put(struct seccomp_prog *out, size_t at, const struct sock_filter *f, size_t n)
{
    memcpy(out->insns + at, f, n * sizeof *f);
    return at + n;
}

/* ---- the binary search ------------------------------------------------------------ */

#define RULES_MAX 256
#define LEAF_NRS 8 /* numbers whose rules a leaf tries one after the other */

/* One self-contained rule of the chain: its number, where it starts, its length, and
 * its place in the chain (rules of one number keep their order). */
struct rule {
    uint32_t nr;
    unsigned at, len, order;
};

struct program {
    struct seccomp_prog *out;
    size_t n;                        /* instructions so far */
    const struct sock_filter *chain; /* the rules, as written */
    const struct rule *rule;         /* sorted by number */
    const struct sock_filter *dflt;  /* a number no rule decides */
};

static int rule_cmp(const void *a, const void *b)
{
    const struct rule *x = a, *y = b;
    if (x->nr != y->nr) return x->nr < y->nr ? -1 : 1;
    return x->order < y->order ? -1 : x->order > y->order;
}

/* Cuts the chain into its rules (each `JEQ nr, 0, len - 1` and its body). Returns
 * their count, or -EINVAL where the chain is not made of such rules. */
static int rules_of(const struct sock_filter *chain, size_t n, struct rule *rule)
{
    int k = 0;
    for (size_t i = 0; i < n; k++) {
        const struct sock_filter *f = &chain[i];
        if (k == RULES_MAX || f->code != (BPF_JMP | BPF_JEQ | BPF_K) || f->jt != 0 ||
            i + 1 + f->jf > n)
            return -EINVAL;
        rule[k] =
            (struct rule){.nr = f->k, .at = (unsigned)i, .len = 1u + f->jf, .order = (unsigned)k};
        i += 1u + f->jf;
    }
    return k;
}

static int emit(struct program *p, const struct sock_filter *f, size_t n)
{
    if (p->n + n > SECCOMP_PROG_MAX) return -E2BIG;
    p->n = put(p->out, p->n, f, n);
    return 0;
}

/* The search over the rules [lo, hi) (whole numbers: a number's rules never split):
 * a leaf tries its rules in order and ends with the default; a node sends numbers
 * at or above its middle one to the right half (JGE, then a JA over the left half:
 * conditional jumps reach only 255 instructions). */
static int emit_search(struct program *p, size_t lo, size_t hi, size_t nrs)
{
    int rc = 0;
    if (nrs <= LEAF_NRS) {
        for (size_t i = lo; i < hi && !rc; i++)
            rc = emit(p, p->chain + p->rule[i].at, p->rule[i].len);
        return rc ? rc : emit(p, p->dflt, 1);
    }
    /* the middle number's first rule */
    size_t mid = lo, seen = 0;
    for (size_t i = lo; i < hi && seen <= nrs / 2; i++)
        if (i == lo || p->rule[i].nr != p->rule[i - 1].nr) {
            mid = i;
            seen++;
        }
    struct sock_filter node[] = {BPF_JUMP(BPF_JMP | BPF_JGE | BPF_K, p->rule[mid].nr, 0, 1),
                                 BPF_STMT(BPF_JMP | BPF_JA, 0)};
    if ((rc = emit(p, node, 2)) < 0) return rc;
    size_t ja = p->n - 1;
    if ((rc = emit_search(p, lo, mid, nrs / 2)) < 0) return rc;
    p->out->insns[ja].k = (uint32_t)(p->n - ja - 1);
    return emit_search(p, mid, hi, nrs - nrs / 2);
}

/* The whole program: the prologue, then the rules of the chain (the parts in parts,
 * one after the other) behind the search, and dflt for a number none decides. */
static int program_build(struct seccomp_prog *out, const struct sock_filter *const *parts,
                         const size_t *lens, size_t nparts, const struct sock_filter *dflt)
{
    struct sock_filter chain[SECCOMP_PROG_MAX];
    struct rule rule[RULES_MAX];
    size_t n = 0;
    for (size_t i = 0; i < nparts; i++) {
        if (n + lens[i] > SECCOMP_PROG_MAX) return -E2BIG;
        memcpy(chain + n, parts[i], lens[i] * sizeof *chain);
        n += lens[i];
    }
    int nrules = rules_of(chain, n, rule);
    if (nrules < 0) return nrules;
    qsort(rule, (size_t)nrules, sizeof *rule, rule_cmp);
    size_t nrs = 0;
    for (int i = 0; i < nrules; i++)
        nrs += i == 0 || rule[i].nr != rule[i - 1].nr;
    struct program p = {.out = out, .chain = chain, .rule = rule, .dflt = dflt};
    int rc = emit(&p, prologue, NELEM(prologue));
    if (!rc) rc = emit_search(&p, 0, (size_t)nrules, nrs);
    if (rc < 0) return rc;
    out->prog.len = (unsigned short)p.n;
    out->prog.filter = out->insns;
    return 0;
}

#define PART(a) (parts[n] = (a), lens[n++] = NELEM(a))

/* The broker's and sig_guard's notifications of broker (seccomp.h) into parts and
 * lens from n on; returns the new count. They come first: of two rules for one
 * number the first decides, and the broker's reads (every open) before its writes. */
static size_t notified_parts(unsigned broker, const struct sock_filter **parts, size_t *lens,
                             size_t n)
{
    if (broker & SECCOMP_BROKER_READS) PART(broker_reads);
    if (broker & SECCOMP_BROKER_WRITES) PART(broker_writes);
    if ((broker & SECCOMP_NO_NAMESPACES) && (broker & SECCOMP_SIGNALS)) PART(signals_notified);
    return n;
}

static bool notified(unsigned broker)
{
    return broker & (SECCOMP_BROKER_READS | SECCOMP_BROKER_WRITES | SECCOMP_SIGNALS);
}
#endif

int seccomp_build(enum seccomp_net net, unsigned broker, struct seccomp_prog *out)
{
    memset(out, 0, sizeof *out);
#ifndef SC_AUDIT_ARCH
    (void)net;
    (void)broker;
    return -EOPNOTSUPP;
#else
    /* Of two rules for one number, the first decides: the notifications, then the
     * network's, then the rest. */
    const struct sock_filter *parts[8];
    size_t lens[8];
    size_t n = notified_parts(broker, parts, lens, 0);
    bool proxy_only = net == SECCOMP_NET_INET_ONLY && (broker & SECCOMP_NO_NAMESPACES);
    if (net == SECCOMP_NET_NONE)
        PART(net_none);
    else if (net == SECCOMP_NET_INET_ONLY)
        PART(net_inet_only);
    if (proxy_only) PART(net_proxy_only);
    if (net == SECCOMP_NET_OPEN || proxy_only) PART(net_guarded);
    if (broker & SECCOMP_NO_NAMESPACES) PART(no_namespaces);
    PART(base_rules);
    out->listener = net == SECCOMP_NET_OPEN || proxy_only || notified(broker);
    return program_build(out, parts, lens, n, epilogue);
#endif
}

int seccomp_build_fs_helper(unsigned broker, struct seccomp_prog *out)
{
    memset(out, 0, sizeof *out);
#ifndef SC_AUDIT_ARCH
    (void)broker;
    return -EOPNOTSUPP;
#else
    /* The notifications first: they decide before the allowlist allows. */
    const struct sock_filter *parts[4];
    size_t lens[4];
    size_t n = notified_parts(broker, parts, lens, 0);
    PART(fs_helper_allow);
    out->listener = notified(broker);
    return program_build(out, parts, lens, n, fs_helper_default);
#endif
}
#undef PART

int seccomp_install(const struct seccomp_prog *p, int send_listener_to)
{
    if (p->prog.len == 0) return -EINVAL;
    if (!p->listener)
        return prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &p->prog, 0, 0) < 0 ? -errno : 0;
    /* The listener goes to the init over send_listener_to and is closed here: the
     * command must never hold the descriptor that answers its own calls. */
    long fd =
        syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_NEW_LISTENER, &p->prog);
    if (fd < 0) return -errno;
    int lfd = (int)fd;
    int err = send_listener_to >= 0 ? -fdframe_send_tagged(send_listener_to, 'L', &lfd, 1) : EBADF;
    close(lfd);
    /* Installed, but with no one to answer: every connect would wait forever. */
    return err ? -err : 0;
}
