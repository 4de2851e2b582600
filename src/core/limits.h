/* limits: the server-wide resource limits, each settable by a command-line flag
 * (main.c) and read by the module that enforces it. One struct, so the defaults
 * and their reasons live in one place.
 *
 *   max_connections  live TCP connections (any state). One more is accepted and
 *                    answered `503 Service Unavailable` with a text body, so the
 *                    client learns why; past twice the limit a new connection is
 *                    closed at once (the fd bound must hold against a flood).
 *   max_connections_per_peer
 *                    live TCP connections from one peer IP address; one more is
 *                    answered 503 like the above, so one peer cannot take every
 *                    slot (half of the default max_connections).
 *   max_processes    processes of one session that have not yet closed; one more
 *                    process/start fails with -32600 "process limit reached ...".
 *   max_total_processes
 *                    the same over every session of the server: --max-processes
 *                    alone let each new session start another 1,024.
 *   max_read_buffer  bytes of file content being read into memory for fs/readFile
 *                    replies at once, server-wide (fs/fs_budget.h): a file of known
 *                    size waits for its whole reply's room (alone, it may exceed the
 *                    budget: one reply of any size fits); a file whose size is
 *                    unknown (stat says 0: /proc, /sys) is read in steps against the
 *                    budget and fails once a step does not fit. Without it, four
 *                    reads of /proc/self/pagemap held 2.5 GiB.
 *   max_message      bytes of one incoming WebSocket message (or stdio line); a
 *                    single frame is further capped at 16 MiB like the reference.
 *                    Over-limit: WebSocket close 1009 and a log line.
 *   max_queued       bytes of unsent output backlog of one connection: what is
 *                    queued behind the message the kernel is taking now. When a new
 *                    message is queued behind a backlog already above it, the client
 *                    is not reading: it is closed as soon as every process output
 *                    chunk still in its queue is also in the retained event logs
 *                    (so a resume loses nothing); until then, or until its backlog
 *                    is back under the limit, its requests are not read. A single
 *                    reply of any size (a 256 MiB fs/readFile) is never counted
 *                    while it is the one being written, so a client that reads gets
 *                    it and the replies after it. Process output alone never gets
 *                    here: it pauses at CONN_HIGH_WATER.
 *   max_inflight     bytes on their way to clients, server-wide (core/inflight.h):
 *                    reply content being read plus every connection's queued output,
 *                    the message being written included. A read that does not fit
 *                    waits; while the bytes held and wanted pass it, the connection
 *                    that has gone longest without taking a byte is closed. Default
 *                    768 MiB: with the bigbuf cache (160 MiB) and the rest, the server
 *                    stays under 1 GiB whatever its clients do, and one reply of the
 *                    largest file fs/readFile serves (512 MiB, 683 MiB encoded) fits.
 *   max_detached     detached sessions kept for resume. When one more detaches,
 *                    the session detached longest ago expires at once (its
 *                    processes are killed), so a reconnect storm cannot pile up
 *                    sessions, while the newest disconnects stay resumable. Kept
 *                    sessions (session/keep) count too and are never the ones
 *                    expired early: at most max_detached sessions may be kept.
 *   max_keep_ms      the longest detached lifetime session/keep may ask for;
 *                    LIMITS_KEEP_FOREVER allows "until terminated", 0 turns
 *                    session/keep off (--max-session-keep).
 *   tcp_forwarding   tcp/connect is allowed (--allow-tcp-forwarding): off by
 *                    default, since it lets a client reach whatever this host can.
 *   sandbox_max_processes
 *                    processes and threads one sandbox may hold at once (its init
 *                    included): RLIMIT_NPROC in the sandbox's own user namespace,
 *                    where it counts that sandbox's tasks only. A fork past it fails
 *                    with EAGAIN. The default is above what a parallel build of a
 *                    large tree holds (make -j64: about 5 tasks a job; a wide cargo
 *                    build's threads) and far below what a fork bomb reaches.
 *   sandbox_max_memory
 *                    bytes of memory (and swap) one sandbox may use, a memory cgroup
 *                    per sandbox (--sandbox-max-memory); 0, the default: no cap, since
 *                    no figure suits both a linker and a unit test, and the kernel's
 *                    OOM killer already picks the biggest process, never the server.
 *   max_concurrent_requests
 *                    requests of one connection running at once
 *                    (--concurrent-requests); later ones wait in arrival order
 *                    (rpc/dispatch.c). 0: no limit.
 *
 * And two startup policies the command line sets for modules that read them:
 *   sandbox_pid_namespace   --linux-sandbox-pid-namespace: whether sandboxed
 *                    children get their own PID namespace (isolate, the default)
 *                    or share ours (inherit: they may signal other processes of
 *                    the same user). Requests cannot change it.
 *   sandbox_mode     --sandbox-mode: auto (0), namespaces (1) or landlock (2)
 *                    (sandbox/sandbox_host.h decides from it and the start-time probe).
 *   proxy_private_ips_via_upstream  --proxy-private-ips-via-upstream: permitted
 *                    private-IP destinations may use the configured upstream
 *                    proxy (for the managed network proxy).
 *   sandbox_transparent_tcp  --linux-sandbox-transparent-tcp: every sandboxed
 *                    start with enforceManagedNetwork runs as if its networkProxy
 *                    asked for transparentTcp.
 *   tcp_upstream_proxy  --tcp-upstream-proxy HOST:PORT: the HTTP CONNECT proxy every
 *                    raw TCP connection of the managed proxy's SOCKS5 side (and of
 *                    transparent TCP) must leave through; host "" when not given. */
#ifndef EXEC_CORE_LIMITS_H
#define EXEC_CORE_LIMITS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define LIMITS_DEFAULT_MAX_CONNECTIONS 1024u
#define LIMITS_DEFAULT_MAX_CONNECTIONS_PER_PEER 512u
#define LIMITS_DEFAULT_MAX_PROCESSES 1024u
#define LIMITS_DEFAULT_MAX_TOTAL_PROCESSES 4096u
#define LIMITS_DEFAULT_MAX_READ_BUFFER (256u << 20)
#define LIMITS_DEFAULT_MAX_MESSAGE (64u << 20)
#define LIMITS_MAX_FRAME (16u << 20)
#define LIMITS_DEFAULT_MAX_QUEUED (256u << 20)
#define LIMITS_DEFAULT_MAX_INFLIGHT (768u << 20)
#define LIMITS_DEFAULT_MAX_DETACHED 64u
#define LIMITS_DEFAULT_SANDBOX_MAX_PROCESSES 4096u
#define LIMITS_KEEP_FOREVER UINT64_MAX

enum limits_pid_namespace { LIMITS_PID_NS_ISOLATE = 0, LIMITS_PID_NS_INHERIT = 1 };

/* A HOST:PORT as --tcp-upstream-proxy takes it: a DNS name or an IP literal
 * (without brackets), and a nonzero port. */
struct limits_endpoint {
    char host[256];
    uint16_t port;
};

struct server_limits {
    unsigned max_connections;
    unsigned max_connections_per_peer;
    unsigned max_processes;
    unsigned max_total_processes;
    size_t max_read_buffer;
    size_t max_message;
    size_t max_queued;
    size_t max_inflight;
    unsigned max_detached;
    uint64_t max_concurrent_requests;
    int sandbox_pid_namespace; /* enum limits_pid_namespace */
    int sandbox_mode;          /* --sandbox-mode: 0 auto, 1 namespaces, 2 landlock */
    bool proxy_private_ips_via_upstream;
    bool sandbox_transparent_tcp;
    struct limits_endpoint tcp_upstream_proxy;
    uint64_t max_keep_ms;
    bool tcp_forwarding;
    unsigned sandbox_max_processes;
    uint64_t sandbox_max_memory;
};

/* The limits in force; server/config.c fills it before the loop starts. */
extern struct server_limits server_limits;

/* --linux-sandbox-pid-namespace (LIMITS_PID_NS_ISOLATE unless inherit was given). */
enum limits_pid_namespace limits_sandbox_pid_namespace(void);
/* --proxy-private-ips-via-upstream (or CODEX_EXEC_SERVER_PROXY_PRIVATE_IPS_VIA_UPSTREAM). */
bool limits_proxy_private_ips_via_upstream(void);
/* --linux-sandbox-transparent-tcp. */
bool limits_sandbox_transparent_tcp(void);
/* --tcp-upstream-proxy, or NULL when it was not given. */
const struct limits_endpoint *limits_tcp_upstream_proxy(void);

#endif
