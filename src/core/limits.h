/* limits: the server-wide resource limits, each settable by a command-line flag
 * (main.c) and read by the module that enforces it. One struct, so the defaults
 * and their reasons live in one place.
 *
 *   max_connections  live TCP connections (any state). One more is accepted and
 *                    answered `503 Service Unavailable` with a text body, so the
 *                    client learns why; past twice the limit a new connection is
 *                    closed at once (the fd bound must hold against a flood).
 *   max_processes    processes of one session that have not yet closed; one more
 *                    process/start fails with -32600 "process limit reached ...".
 *   max_message      bytes of one incoming WebSocket message (or stdio line); a
 *                    single frame is further capped at 16 MiB like the reference.
 *                    Over-limit: WebSocket close 1009 and a log line.
 *   max_queued       bytes of unsent output backlog of one connection. When a new
 *                    message is queued behind a backlog already above it, the client
 *                    is not reading: it is closed as soon as every process output
 *                    chunk still in its queue is also in the retained event logs
 *                    (so a resume loses nothing); until then, or until its backlog
 *                    is back under the limit, its requests are not read. One reply
 *                    of any size always fits (the check is on
 *                    the backlog before it). Process output alone never gets here:
 *                    it pauses at CONN_HIGH_WATER.
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
 *                    default, since it lets a client reach whatever this host can. */
#ifndef EXEC_CORE_LIMITS_H
#define EXEC_CORE_LIMITS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define LIMITS_DEFAULT_MAX_CONNECTIONS 1024u
#define LIMITS_DEFAULT_MAX_PROCESSES 1024u
#define LIMITS_DEFAULT_MAX_MESSAGE (64u << 20)
#define LIMITS_MAX_FRAME (16u << 20)
#define LIMITS_DEFAULT_MAX_QUEUED (256u << 20)
#define LIMITS_DEFAULT_MAX_DETACHED 64u
#define LIMITS_KEEP_FOREVER UINT64_MAX

struct server_limits {
    unsigned max_connections;
    unsigned max_processes;
    size_t max_message;
    size_t max_queued;
    unsigned max_detached;
    uint64_t max_keep_ms;
    bool tcp_forwarding;
};

/* The limits in force; main.c fills it before the loop starts. */
extern struct server_limits server_limits;

#endif
