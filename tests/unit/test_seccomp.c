/* Unit tests for sandbox/seccomp: the programs seccomp_build and
 * seccomp_build_fs_helper make, run by a small classic-BPF interpreter here for
 * calls and arguments a sandboxed command or the fs helper makes or an attacker
 * tries: what each decides, and that every number is decided in a short path (the
 * rules behind a binary search, not one chain: the kernel emulates the path of every
 * number when it installs a filter). The escape suite checks the installed filter of
 * live sandboxes against the reference's; this checks the program itself, and that
 * the fs helper's allows every call its operations make (fs/fs_request.h's table). */
#include <errno.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <netinet/in.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <termios.h>

#include <cmocka.h>

#include "fs/fs_request.h"
#include "sandbox/seccomp.h"

struct data {
    uint32_t nr, arch;
    uint64_t ip;
    uint64_t args[6];
};

/* Runs p on d as the kernel would (the instructions the filters use); *steps gets the
 * number of instructions run. A jump out of the program fails the test. */
static uint32_t run(const struct sock_fprog *p, const struct data *d, unsigned *steps)
{
    uint32_t a = 0;
    *steps = 0;
    for (unsigned pc = 0; pc < p->len; pc++) {
        const struct sock_filter *f = &p->filter[pc];
        ++*steps;
        switch (f->code) {
        case BPF_LD | BPF_W | BPF_ABS:
            assert_true(f->k + 4 <= sizeof *d);
            memcpy(&a, (const char *)d + f->k, 4);
            break;
        case BPF_ALU | BPF_AND | BPF_K: a &= f->k; break;
        case BPF_JMP | BPF_JA: pc += f->k; break;
        case BPF_JMP | BPF_JEQ | BPF_K: pc += a == f->k ? f->jt : f->jf; break;
        case BPF_JMP | BPF_JGE | BPF_K: pc += a >= f->k ? f->jt : f->jf; break;
        case BPF_JMP | BPF_JSET | BPF_K: pc += (a & f->k) ? f->jt : f->jf; break;
        case BPF_RET | BPF_K: return f->k;
        default: fail_msg("instruction %u: code %#x not known here", pc, f->code);
        }
    }
    fail_msg("fell off the end of the program");
    return 0;
}

static uint32_t call(const struct seccomp_prog *p, uint32_t nr, uint64_t a0, uint64_t a1,
                     uint64_t a2, uint64_t a3)
{
    struct data d = {.nr = nr, .arch = AUDIT_ARCH_X86_64, .args = {a0, a1, a2, a3}};
    unsigned steps;
    return run(&p->prog, &d, &steps);
}

#define ALLOW SECCOMP_RET_ALLOW
#define ERR(e) (SECCOMP_RET_ERRNO | (e))

static void restricted(void **state)
{
    (void)state;
    static struct seccomp_prog p;
    assert_int_equal(seccomp_build(SECCOMP_NET_NONE, 0, &p), 0);
    assert_false(p.listener);
    assert_int_equal(call(&p, __NR_read, 0, 0, 0, 0), ALLOW);
    assert_int_equal(call(&p, __NR_execve, 0, 0, 0, 0), ALLOW);
    assert_int_equal(call(&p, __NR_clone, 0, 0, 0, 0), ALLOW);
    assert_int_equal(call(&p, __NR_ptrace, 0, 0, 0, 0), ERR(EPERM));
    assert_int_equal(call(&p, __NR_bpf, 0, 0, 0, 0), ERR(EPERM));
    assert_int_equal(call(&p, __NR_mount, 0, 0, 0, 0), ERR(EPERM));
    assert_int_equal(call(&p, __NR_setns, 0, 0, 0, 0), ERR(EPERM));
    assert_int_equal(call(&p, __NR_io_uring_setup, 0, 0, 0, 0), ERR(EPERM));
    assert_int_equal(call(&p, __NR_socket, AF_UNIX, SOCK_STREAM, 0, 0), ERR(EPERM));
    assert_int_equal(call(&p, __NR_socket, AF_INET, SOCK_STREAM, 0, 0), ERR(EPERM));
    assert_int_equal(call(&p, __NR_socketpair, AF_UNIX, SOCK_STREAM, 0, 0), ALLOW);
    assert_int_equal(call(&p, __NR_socketpair, AF_INET, SOCK_STREAM, 0, 0), ERR(EPERM));
    assert_int_equal(call(&p, __NR_connect, 3, 0, 0, 0), ERR(EPERM));
    assert_int_equal(call(&p, __NR_sendmsg, 3, 0, 0, 0), ALLOW);
    assert_int_equal(call(&p, __NR_ioctl, 0, TIOCSTI, 0, 0), ERR(EPERM));
    assert_int_equal(call(&p, __NR_ioctl, 0, TIOCLINUX, 0, 0), ERR(EPERM));
    assert_int_equal(call(&p, __NR_ioctl, 0, TCGETS, 0, 0), ALLOW);
    assert_int_equal(call(&p, __NR_personality, 0, 0, 0, 0), ALLOW);
    assert_int_equal(call(&p, __NR_personality, 0xffffffffu, 0, 0, 0), ALLOW);
    assert_int_equal(call(&p, __NR_personality, 0x0040000, 0, 0, 0), ERR(EPERM));
    /* the highest and lowest numbers, and those beyond every rule */
    assert_int_equal(call(&p, 0, 0, 0, 0, 0), ALLOW);
    assert_int_equal(call(&p, 1000, 0, 0, 0, 0), ALLOW);
    /* x32 numbers, and another architecture */
    assert_int_equal(call(&p, 0x40000000u | __NR_ptrace, 0, 0, 0, 0), ERR(ENOSYS));
    struct data d = {.nr = __NR_read, .arch = AUDIT_ARCH_I386};
    unsigned steps;
    assert_int_equal(run(&p.prog, &d, &steps), SECCOMP_RET_KILL_PROCESS);
}

static void network_enabled(void **state)
{
    (void)state;
    static struct seccomp_prog p;
    assert_int_equal(seccomp_build(SECCOMP_NET_OPEN, 0, &p), 0);
    assert_true(p.listener);
    assert_int_equal(call(&p, __NR_connect, 3, 0, 0, 0), SECCOMP_RET_USER_NOTIF);
    assert_int_equal(call(&p, __NR_socket, AF_INET, SOCK_STREAM, 0, 0), ALLOW);
    assert_int_equal(call(&p, __NR_socket, AF_INET6, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, 0),
                     ERR(EPROTONOSUPPORT));
    assert_int_equal(call(&p, __NR_socket, AF_INET, SOCK_STREAM, IPPROTO_SCTP, 0),
                     ERR(EPROTONOSUPPORT));
    assert_int_equal(call(&p, __NR_socket, AF_UNIX, SOCK_SEQPACKET, 0, 0), ALLOW);
    assert_int_equal(call(&p, __NR_socket, AF_VSOCK, SOCK_STREAM, 0, 0), ERR(EPERM));
    assert_int_equal(call(&p, __NR_sendto, 3, 0, 0, MSG_FASTOPEN), ERR(EOPNOTSUPP));
    assert_int_equal(call(&p, __NR_sendto, 3, 0, 0, 0), ALLOW);
    assert_int_equal(call(&p, __NR_sendmsg, 3, 0, MSG_FASTOPEN, 0), ERR(EOPNOTSUPP));
    assert_int_equal(call(&p, __NR_ptrace, 0, 0, 0, 0), ERR(EPERM));

    static struct seccomp_prog q;
    assert_int_equal(seccomp_build(SECCOMP_NET_INET_ONLY, 0, &q), 0);
    assert_int_equal(call(&q, __NR_socket, AF_INET, SOCK_STREAM, 0, 0), ALLOW);
    assert_int_equal(call(&q, __NR_socket, AF_UNIX, SOCK_STREAM, 0, 0), ERR(EPERM));
    assert_int_equal(call(&q, __NR_connect, 3, 0, 0, 0), ALLOW);
}

static void fs_helper(void **state)
{
    (void)state;
    static struct seccomp_prog p;
    assert_int_equal(seccomp_build_fs_helper(0, &p), 0);
    assert_int_equal(call(&p, __NR_read, 0, 0, 0, 0), ALLOW);
    assert_int_equal(call(&p, __NR_openat, 0, 0, 0, 0), ALLOW);
    assert_int_equal(call(&p, __NR_exit_group, 0, 0, 0, 0), ALLOW);
    assert_int_equal(call(&p, __NR_execve, 0, 0, 0, 0), ERR(ENOSYS));
    assert_int_equal(call(&p, __NR_socket, AF_UNIX, 0, 0, 0), ERR(ENOSYS));
    assert_int_equal(call(&p, __NR_clone, 0, 0, 0, 0), ERR(ENOSYS));
    assert_int_equal(call(&p, __NR_prctl, 0, 0, 0, 0), ERR(ENOSYS));
    assert_int_equal(call(&p, __NR_ioctl, 0, TCGETS, 0, 0), ALLOW);
    assert_int_equal(call(&p, __NR_ioctl, 0, FIONREAD, 0, 0), ALLOW);
    assert_int_equal(call(&p, __NR_ioctl, 0, TIOCSTI, 0, 0), ERR(ENOSYS));
    /* prlimit64 only as getrlimit: pid 0 and no new limit, all 64 bits */
    assert_int_equal(call(&p, __NR_prlimit64, 0, RLIMIT_NOFILE, 0, 0x7f0000001000), ALLOW);
    assert_int_equal(call(&p, __NR_prlimit64, 1, RLIMIT_NOFILE, 0, 0), ERR(ENOSYS));
    assert_int_equal(call(&p, __NR_prlimit64, 1ULL << 32, RLIMIT_NOFILE, 0, 0), ERR(ENOSYS));
    assert_int_equal(call(&p, __NR_prlimit64, 0, RLIMIT_NOFILE, 0x7f0000000000, 0), ERR(ENOSYS));
    assert_int_equal(call(&p, 1000, 0, 0, 0, 0), ERR(ENOSYS));
}

/* Whether the fs helper's programs let nr through (allowed, or notified to the init,
 * which decides): the name says which entry of the table wants it. */
static void helper_allows(const struct seccomp_prog *progs, size_t n, const char *who, int nr)
{
    for (size_t i = 0; i < n; i++) {
        uint32_t r = call(&progs[i], (uint32_t)nr, 0, 0, 0, 0);
        if (r != ALLOW && r != SECCOMP_RET_USER_NOTIF)
            fail_msg("%s needs system call %d, which the fs helper's allowlist (%zu) answers "
                     "%#x: add it to fs_helper_allow in src/sandbox/seccomp.c",
                     who, nr, i, r);
    }
}

/* Each operation the fs helper serves (fs_op_table.c) names the system calls it makes,
 * and the helper's filter allows every one, with and without the init's notifications:
 * a call missing there would fail a client's request with ENOSYS. */
static void fs_helper_allows_its_operations(void **state)
{
    (void)state;
    static struct seccomp_prog progs[3];
    assert_int_equal(seccomp_build_fs_helper(0, &progs[0]), 0);
    assert_int_equal(
        seccomp_build_fs_helper(SECCOMP_BROKER_READS | SECCOMP_BROKER_WRITES, &progs[1]), 0);
    assert_int_equal(
        seccomp_build_fs_helper(SECCOMP_BROKER_WRITES | SECCOMP_NO_NAMESPACES | SECCOMP_SIGNALS,
                                &progs[2]),
        0);
    for (const int *c = fs_op_helper_loop_calls; *c >= 0; c++)
        helper_allows(progs, 3, "the helper's loop", *c);
    int served = 0;
    for (uint32_t op = 0; op < FS_OP_COUNT; op++) {
        const struct fs_op_info *info = fs_op_info(op);
        if (!info) fail_msg("fs operation %u has no entry in src/fs/fs_op_table.c", op);
        assert_true(info->calls && info->calls[0] >= 0);
        if (!info->helper) continue;
        served++;
        for (const int *c = info->calls; *c >= 0; c++)
            helper_allows(progs, 3, info->name, *c);
    }
    assert_true(served >= 10);
    /* handle I/O is the daemon's, and a number past the table no operation */
    assert_false(fs_op_helper_serves(OP_READ_BLOCK));
    assert_false(fs_op_helper_serves(OP_WRITE_BLOCK));
    assert_true(fs_op_helper_serves(OP_DISCOVER));
    assert_null(fs_op_info(FS_OP_COUNT));
    assert_false(fs_op_helper_serves(UINT32_MAX));
}

/* Every number's path is short: the kernel runs each one's when it installs the
 * filter, and the one chain was a path of up to 150 instructions per number. */
static void paths_are_short(void **state)
{
    (void)state;
    static struct seccomp_prog progs[4];
    assert_int_equal(seccomp_build(SECCOMP_NET_NONE, 0, &progs[0]), 0);
    assert_int_equal(seccomp_build(SECCOMP_NET_OPEN, 0, &progs[1]), 0);
    assert_int_equal(seccomp_build(SECCOMP_NET_INET_ONLY, 0, &progs[2]), 0);
    assert_int_equal(seccomp_build_fs_helper(0, &progs[3]), 0);
    for (int i = 0; i < 4; i++) {
        unsigned longest = 0;
        for (uint32_t nr = 0; nr < 600; nr++) {
            struct data d = {.nr = nr, .arch = AUDIT_ARCH_X86_64};
            unsigned steps;
            run(&progs[i].prog, &d, &steps);
            if (steps > longest) longest = steps;
        }
        print_message("program %d: %u instructions, longest path %u\n", i, progs[i].prog.len,
                      longest);
        assert_true(longest <= 40);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(restricted),      cmocka_unit_test(network_enabled),
        cmocka_unit_test(fs_helper),       cmocka_unit_test(fs_helper_allows_its_operations),
        cmocka_unit_test(paths_are_short),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
