/* spawn_wire: the request the daemon sends its spawner, as bytes (no I/O).
 *
 * A request says what to execute (program path, argv, envp, cwd), how the child's
 * standard streams are wired (a PTY slave, or pipe ends), and, for a sandboxed
 * child, the resolved sandbox: which flags and which path lists (PROTOCOL.md
 * section 10 after resolution, see sandbox/policy.h). The descriptors themselves
 * travel beside the bytes (util/fdframe); the request only counts them.
 *
 * Layout (native endian, the two ends are one program): a fixed header, then
 * SPAWN_WIRE_NLISTS string lists in a fixed order, each a u32 count followed by
 * that many (u32 length, bytes, NUL) strings. Decoding points into the frame
 * buffer, so a decoded request lives as long as the buffer does. */
#ifndef EXEC_HELPERS_SPAWN_WIRE_H
#define EXEC_HELPERS_SPAWN_WIRE_H

#include <stddef.h>
#include <stdint.h>

#include "util/buf.h"

#define SPAWN_WIRE_MAGIC 0x45585350u /* "EXSP" */
#define SPAWN_WIRE_VERSION 4u

enum {
    SPAWN_F_TTY = 1u << 0,            /* fds: status, slave */
    SPAWN_F_PIPE_STDIN = 1u << 1,     /* stdin is a pipe's read end (else /dev/null) */
    SPAWN_F_SANDBOX = 1u << 2,        /* confine: namespaces, no capabilities, seccomp */
    SPAWN_F_ENFORCE_FS = 1u << 3,     /* the file system view and Landlock rules apply */
    SPAWN_F_NET_RESTRICTED = 1u << 4, /* own network namespace, no sockets */
    SPAWN_F_PID_INHERIT = 1u << 5,    /* --linux-sandbox-pid-namespace inherit */
    SPAWN_F_PROXY = 1u << 6,          /* the init passes connections on proxy_ports */
    SPAWN_F_REFUSE = 1u << 7,         /* no exec: the child writes exe (a message) to
                                         stderr and exits 1, as the reference's sandbox
                                         wrapper does when it cannot build the sandbox */
    SPAWN_F_SERVE = 1u << 8,          /* no exec: the sandbox's init confines itself and
                                         runs the spawner's serve function on extra fd 0
                                         (the sandboxed fs helper) */
    SPAWN_F_CGROUP = 1u << 9,         /* the last init fd (or the one before, with
                                         SPAWN_F_CGROUP2) is what the init joins a cgroup
                                         by before anything else (sandbox/cgroup_caps.h:
                                         v1 its tasks, v2 its directory) */
    SPAWN_F_TRANSPARENT = 1u << 10,   /* with SPAWN_F_PROXY: the init makes the TUN device
                                        (sandbox/tun.h) from init fd 1, an O_PATH
                                        descriptor of /dev/net/tun */
    SPAWN_F_CGROUP2 = 1u << 11,       /* with SPAWN_F_CGROUP: a second cgroup's, the last
                                         init fd (cgroup v1's memory hierarchy) */
    SPAWN_F_LANDLOCK_ONLY = 1u << 12, /* no namespaces: Landlock, seccomp and the init's
                                         broker (sandbox/sandbox_mode.h) */
};

/* The lists, in wire order. */
enum spawn_list {
    SPAWN_L_ARGV,
    SPAWN_L_ENVP,
    SPAWN_L_READABLE,     /* Landlock read rules */
    SPAWN_L_WRITABLE,     /* read-write binds and rules */
    SPAWN_L_READONLY_SUB, /* read-only binds under writable roots */
    SPAWN_L_DENIED,       /* covered */
    SPAWN_L_PROTECTED,    /* protected names: kept read-only, made when missing */
    SPAWN_L_DENY_GLOBS,   /* `none` glob patterns, asked again after the start */
    SPAWN_WIRE_NLISTS
};

struct spawn_wire_req {
    uint32_t flags;          /* SPAWN_F_* */
    uint16_t rows, cols;     /* the PTY's initial size */
    uint16_t proxy_ports[2]; /* with SPAWN_F_PROXY: 127.0.0.1 ports in the child's netns
                                (HTTP, SOCKS5; 0 = none) */
    uint32_t n_extra_fds;    /* descriptors the child gets at 3, 4, ... */
    uint32_t n_init_fds;     /* descriptors for the sandbox init: the proxy socket
                                (SPAWN_F_PROXY), /dev/net/tun (SPAWN_F_TRANSPARENT),
                                then the cgroups' (SPAWN_F_CGROUP, SPAWN_F_CGROUP2) */
    uint32_t refuse_code;    /* with SPAWN_F_REFUSE: the exit status */
    uint32_t max_procs;      /* with SPAWN_F_SANDBOX: the sandbox's process cap (0: none) */
    const char *exe;         /* the resolved program path */
    const char *cwd;
    const char *const *list[SPAWN_WIRE_NLISTS]; /* NULL-terminated; NULL = empty */
    size_t nlist[SPAWN_WIRE_NLISTS];
};

/* Appends the encoding of r to out. */
void spawn_wire_encode(struct buf *out, const struct spawn_wire_req *r);

/* Decodes p[0..n) into *r. The string pointers point into p; the list arrays are
 * allocated into *arena (one block; free it with free()). Returns 0 or -EPROTO for
 * anything malformed (bad magic or version, truncation, a missing NUL, a string
 * with an inner NUL, an absurd count). */
int spawn_wire_decode(const char *p, size_t n, struct spawn_wire_req *r, void **arena);

#endif
