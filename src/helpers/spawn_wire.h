/* spawn_wire: the request the daemon sends its spawner, as bytes (no I/O).
 *
 * A request says what to execute (program path, argv, envp, cwd), how the child's
 * standard streams are wired (a PTY slave, or pipe ends), and, for a sandboxed
 * child, the resolved sandbox as the daemon built it (struct sandbox_spec,
 * sandbox/spec.h), carried whole: the spawner hands the decoded spec to the
 * sandbox's init as it is. The descriptors themselves travel beside the bytes
 * (util/fdframe); the request only counts them.
 *
 * Layout (native endian, the two ends are one program): a fixed header, exe and cwd,
 * argv and envp, then with SPAWN_F_SANDBOX the spec: a u32 of its yes/no members (bit
 * i the i-th of SANDBOX_SPEC_FLAGS), max_procs, and its lists in SANDBOX_SPEC_LISTS's
 * order. A string is (u32 length, bytes, NUL), a list a u32 count and that many
 * strings. No pointer crosses: decoding points into the frame buffer, so a decoded
 * request lives as long as the buffer does. */
#ifndef EXEC_HELPERS_SPAWN_WIRE_H
#define EXEC_HELPERS_SPAWN_WIRE_H

#include <stddef.h>
#include <stdint.h>

#include "sandbox/spec.h"
#include "util/buf.h"

#define SPAWN_WIRE_MAGIC 0x45585350u /* "EXSP" */
#define SPAWN_WIRE_VERSION 5u

/* How the request's descriptors are laid out, and what the child runs. */
enum {
    SPAWN_F_TTY = 1u << 0,         /* fds: status, slave */
    SPAWN_F_PIPE_STDIN = 1u << 1,  /* stdin is a pipe's read end (else /dev/null) */
    SPAWN_F_SANDBOX = 1u << 2,     /* confined as spec says, by the sandbox's init */
    SPAWN_F_PROXY = 1u << 3,       /* init fd 0 is the managed proxy's socket, relayed on
                                      proxy_ports */
    SPAWN_F_REFUSE = 1u << 4,      /* no exec: the child writes exe (a message) to
                                      stderr and exits 1, as the reference's sandbox
                                      wrapper does when it cannot build the sandbox */
    SPAWN_F_CGROUP = 1u << 5,      /* the last init fd (or the one before, with
                                      SPAWN_F_CGROUP2) is what the init joins a cgroup
                                      by before anything else (sandbox/cgroup_caps.h:
                                      v1 its tasks, v2 its directory) */
    SPAWN_F_TRANSPARENT = 1u << 6, /* with SPAWN_F_PROXY: the init makes the TUN device
                                      (sandbox/tun.h) from init fd 1, an O_PATH
                                      descriptor of /dev/net/tun */
    SPAWN_F_CGROUP2 = 1u << 7,     /* with SPAWN_F_CGROUP: a second cgroup's, the last
                                      init fd (cgroup v1's memory hierarchy) */
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
    const char *exe;         /* the resolved program path */
    const char *cwd;
    const char *const *argv, *const *envp; /* NULL-terminated; NULL = empty */
    struct sandbox_spec spec;              /* with SPAWN_F_SANDBOX: the sandbox, whole */
};

/* Appends the encoding of r to out. */
void spawn_wire_encode(struct buf *out, const struct spawn_wire_req *r);

/* Decodes p[0..n) into *r. The string pointers point into p; the list arrays are
 * allocated into *arena (one block; free it with free()). Returns 0 or -EPROTO for
 * anything malformed (bad magic or version, truncation, a missing NUL, a string
 * with an inner NUL, an absurd count, unknown flags, a count of init fds other
 * than the flags name, trailing bytes). */
int spawn_wire_decode(const char *p, size_t n, struct spawn_wire_req *r, void **arena);

#endif
