/* no-namespaces: runs a command on a host that refuses new namespaces.
 *
 * Test tool (not installed). It installs a seccomp filter making unshare(2) and
 * clone(2) with any namespace flag fail with EPERM (clone3 with ENOSYS, so libc
 * falls back to clone), then executes argv[1..]. The filter is inherited by
 * everything the command starts, so a server run under it sees exactly what a
 * kernel without user namespaces, or a container forbidding them, shows it: the
 * black-box tests check that sandboxed requests are then refused, never run
 * unconfined. With --user first, only user namespaces are refused: what a root
 * server sees where the kernel refuses root one (its sandboxes then run without one). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#define NS_FLAGS                                                                                   \
    (CLONE_NEWNS | CLONE_NEWUTS | CLONE_NEWIPC | CLONE_NEWUSER | CLONE_NEWPID | CLONE_NEWNET |     \
     CLONE_NEWCGROUP)

int main(int argc, char **argv)
{
    uint32_t refused = NS_FLAGS;
    if (argc > 1 && strcmp(argv[1], "--user") == 0) {
        refused = CLONE_NEWUSER;
        argv++, argc--;
    }
    if (argc < 2) {
        fprintf(stderr, "usage: no-namespaces [--user] COMMAND [ARG...]\n");
        return 2;
    }
    struct sock_filter f[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_clone3, 0, 1),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | ENOSYS),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_unshare, 1, 0),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_clone, 0, 3),
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, args[0])),
        BPF_JUMP(BPF_JMP | BPF_JSET | BPF_K, refused, 0, 1),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EPERM),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
    };
    struct sock_fprog prog = {sizeof f / sizeof f[0], f};
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0 ||
        prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog, 0, 0) < 0) {
        perror("no-namespaces: seccomp");
        return 1;
    }
    execvp(argv[1], argv + 1);
    perror("no-namespaces: exec");
    return 127;
}
