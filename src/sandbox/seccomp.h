/* seccomp: the system-call filter of a sandboxed child.
 *
 * The filter denies, with an errno the program can handle, the calls the
 * reference's sandbox denies and those that would let a confined process reach
 * past its namespaces: kernel attack surface (io_uring, bpf, perf_event_open,
 * userfaultfd, keyrings, open_by_handle_at), another process's memory (ptrace,
 * process_vm_*), vsock (a VM's line to its hypervisor), the
 * mount table and setns, host-wide knobs (reboot, swap, clocks, modules, kexec,
 * hostname), and terminal input injection (TIOCSTI, TIOCLINUX). With the
 * network restricted it also denies socket(2) for every family: the child's own
 * network namespace is empty and no Unix socket of the host may be reached.
 *
 * Each rule is self-contained (OpenSSH's sandbox-seccomp-filter.c style: no jump
 * offsets to count across rules), and the program reaches a call's rules by a
 * binary search on its number, so that no number's path is long (the kernel
 * emulates every number's path when the filter is installed: seccomp.c). The
 * program first checks the architecture and
 * kills the process on any other (an i386 or x32 entry would dodge the numbers);
 * on an architecture this file does not know, building fails closed. */
#ifndef EXEC_SANDBOX_SECCOMP_H
#define EXEC_SANDBOX_SECCOMP_H

#include <linux/filter.h>
#include <stdbool.h>
#include <stddef.h>

#define SECCOMP_PROG_MAX 512

struct seccomp_prog {
    struct sock_filter insns[SECCOMP_PROG_MAX];
    struct sock_fprog prog;
    bool listener; /* connect(2) is notified: install with a listener (net_guard.h) */
};

enum seccomp_net {
    SECCOMP_NET_OPEN,      /* network enabled: sockets allowed, connect(2) decided by the
                              init (no listener of the server), no TCP Fast Open, no SCTP */
    SECCOMP_NET_NONE,      /* restricted: no socket(2) at all */
    SECCOMP_NET_INET_ONLY, /* managed proxy: IP sockets in the private netns, no
                              Unix sockets (the proxy listens on loopback) */
};

/* What the init decides for the command, beside connect (fs_broker.h): */
enum {
    SECCOMP_BROKER_READS = 1u << 0,  /* every open, rename and link */
    SECCOMP_BROKER_WRITES = 1u << 1, /* every call that changes the file system (opens
                                        only when they write, create or truncate) */
    SECCOMP_NO_NAMESPACES = 1u << 2, /* a sandbox without namespaces (sandbox_mode.h):
                                        what a namespace would have hidden is denied
                                        (System V IPC and POSIX message queues, which
                                        an IPC namespace would have made the
                                        sandbox's own), and signals are the init's to
                                        decide where Landlock cannot scope them */
    SECCOMP_SIGNALS = 1u << 3,       /* with SECCOMP_NO_NAMESPACES: kill(2) and its
                                        kin are notified (Landlock before ABI 6) */
};

/* Builds the filter into *out; broker is a set of the SECCOMP_BROKER_ and NO_NAMESPACES
 * bits. Returns 0, or -EOPNOTSUPP on an architecture the filter does not know (the
 * caller must then refuse to run the child). */
int seccomp_build(enum seccomp_net net, unsigned broker, struct seccomp_prog *out);

/* Builds the sandboxed fs helper's filter into *out: an allowlist (OpenSSH's
 * sandbox-seccomp-filter.c is the model), since the helper runs our own code, which
 * needs files, memory and its one socket, and nothing else: no socket(2), no
 * connect, no process creation, no exec, no mount, no ptrace, no prctl, no ioctl
 * but two harmless queries. Anything not listed fails with ENOSYS (libc then falls
 * back or reports an error; the helper answers the request with it). broker: the
 * calls the init decides for it (as seccomp_build's), before the allowlist. Returns 0
 * or -EOPNOTSUPP on an unknown architecture. */
int seccomp_build_fs_helper(unsigned broker, struct seccomp_prog *out);

/* Installs a filter built by seccomp_build on the calling thread (needs
 * no_new_privs or CAP_SYS_ADMIN). A filter with a listener (p->listener) sends the
 * listener's descriptor over the socket send_listener_to (SCM_RIGHTS, one byte 'L')
 * and closes it; failing to is a failure. Async-signal-safe. Returns 0 or -errno. */
int seccomp_install(const struct seccomp_prog *p, int send_listener_to);

#endif
