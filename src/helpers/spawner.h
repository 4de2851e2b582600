/* spawner: the small process every child of the daemon is started from.
 *
 * Forking from the daemon itself costs in proportion to the daemon: its fd table
 * (one socket per connection) is copied into each child and closed again there,
 * which with 10,000 connections made a one-shot command 4x slower, and a sandbox
 * needs its init process to be a real copy of something small. So at start the
 * daemon executes itself once more as the spawner (argv[1] "--internal-spawner",
 * a socket on fd 3): a process with a handful of fds that, for each request
 * (helpers/spawn_wire), starts the child with clone(CLONE_PARENT), so the child is
 * still the daemon's own and reaped through its pidfd exactly as before.
 *
 * A request carries the child's descriptors and the write end of a status pipe;
 * the spawner and the child report on it with fixed 5-byte records (a tag and a
 * native int32): 'P' pid, then 'S' (the program is running) or 'E' errno (exec
 * failed) or 'F' errno (the sandbox could not be set up), the last two after a 'W'
 * naming the step that failed (enum spawn_step). The pipe's reader decides the
 * start at 'S', 'E' or 'F'. A spawner that dies is restarted on the next request
 * (or, on the loop's channel, as soon as a send finds it gone). */
#ifndef EXEC_HELPERS_SPAWNER_H
#define EXEC_HELPERS_SPAWNER_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include <uv.h>

#include "helpers/spawn_wire.h"

#define SPAWNER_ARG "--internal-spawner"
#define SPAWNER_SOCK_FD 3
#define SPAWNER_PORTS_FD 4 /* the daemon's listening ports, read-only (core/own_ports.h) */
#define SPAWNER_NOTES_FD 5 /* the sandboxes' log notes said once (sandbox/user_budgets.h) */

enum {
    SPAWN_REC_PID = 'P',
    SPAWN_REC_STARTED = 'S',
    SPAWN_REC_EXEC = 'E',
    SPAWN_REC_SETUP = 'F',
    SPAWN_REC_STEP = 'W'
};
#define SPAWN_REC_LEN 5

/* The steps of a child's start, each checked (as libuv's uv__process_child_init
 * checks its own): a failure ends the child with _exit(127) and reports the step
 * and its errno. */
enum spawn_step {
    SPAWN_STEP_NONE,
    SPAWN_STEP_CLONE,     /* clone / vfork */
    SPAWN_STEP_SESSION,   /* setsid: its own session and process group */
    SPAWN_STEP_DEATHSIG,  /* prctl(PR_SET_PDEATHSIG) */
    SPAWN_STEP_SUBREAPER, /* prctl(PR_SET_CHILD_SUBREAPER), the init without a PID namespace */
    SPAWN_STEP_TTY,       /* ioctl(TIOCSCTTY) */
    SPAWN_STEP_STDIO,     /* dup2 of 0, 1, 2 and the extra descriptors */
    SPAWN_STEP_CWD,       /* chdir */
    SPAWN_STEP_CONFINE,   /* sandbox_confine: Landlock, seccomp, capabilities */
    SPAWN_STEP_SIGNALS,   /* sigaction, sigprocmask, signalfd */
    SPAWN_STEP_SANDBOX,   /* sandbox_setup: namespaces, mounts */
    SPAWN_STEP_PROXY,     /* the managed network's loopback listeners */
    SPAWN_STEP_EXEC,      /* execve */
};
/* The step's name for a log line ("setsid", "chdir", ...). */
const char *spawner_step_name(int step);

/* Starts the loop thread's spawner. Call early, before any thread and listener
 * exists. Returns 0 or -errno. */
int spawner_start(void);

/* After the loop is closed: drops what still waits, closes the spawners' sockets
 * (they exit on EOF) and reaps them. */
void spawner_stop(void);

/* Two channels, each to a spawner process of its own, so that neither waits for
 * the other:
 *
 * The loop thread's (spawner_submit) never blocks. A request goes straight to
 * the socket (MSG_DONTWAIT) when nothing waits before it and the socket has room;
 * else it is queued, in order, with duplicates of its fds, and the loop sends the
 * queue as the socket drains (a uv_poll for writability). A spawner that is
 * stopped or slow only makes the queue wait; one that died (EPIPE) is replaced:
 * its socket closed, the process reaped later through its pidfd, a new one
 * started (posix_spawn: the moment of its exec) and the queue sent to it.
 *
 * Every other thread's (spawner_request: libuv's pool, where the warm fs helpers
 * start) blocks on a socket of its own under a mutex, and restarts its own
 * spawner, started on first use; the loop thread never takes that mutex. */

/* The loop thread: sends or queues one request with fds (the status pipe's write
 * end first). Returns 0, *ticket non-zero while the request waits in the queue
 * untouched, or -errno (no spawner could be started, out of descriptors). */
int spawner_submit(uv_loop_t *loop, const struct spawn_wire_req *r, const int *fds, int nfds,
                   uint64_t *ticket);

/* The loop thread: takes a request that is still wholly in the queue back out (a
 * start that timed out or was cancelled): true when it never reaches the spawner
 * (its fds are closed, so its status pipe ends without a verdict); false when it
 * was sent or has begun to be. */
bool spawner_withdraw(uint64_t ticket);

/* Any other thread: sends one request with fds, blocking. Restarts a dead spawner
 * once. Returns 0 or -errno. */
int spawner_request(const struct spawn_wire_req *r, const int *fds, int nfds);

struct spawn_outcome {
    pid_t pid;         /* > 0 once 'P' arrived */
    int err;           /* errno of 'E' or 'F', 0 when started */
    int step;          /* enum spawn_step: what failed ('W'), SPAWN_STEP_NONE when unsaid */
    bool setup_failed; /* 'F': the sandbox, not the program, failed */
};

/* Reads status records from status_r until the start is decided, waiting at most
 * timeout_ms. Returns 0 (see o->err), -ETIMEDOUT, or -EPIPE when the pipe ended
 * without a decision. */
int spawner_wait(int status_r, int timeout_ms, struct spawn_outcome *o);

/* The same without blocking, for a caller that polls status_r itself (the loop):
 * the records read so far. */
struct spawner_status {
    struct spawn_outcome o; /* pid and verdict as far as known */
    bool decided;           /* a verdict ('S', 'E' or 'F') arrived */
    char rec[SPAWN_REC_LEN];
    size_t have; /* bytes of a record split across reads */
};
void spawner_status_init(struct spawner_status *st);
/* Reads what the (non-blocking) pipe holds now. Returns 1 once it has ended (the
 * outcome is then final: decided, or no verdict at all), 0 when more is to come,
 * or a negative errno. */
int spawner_status_read(int status_r, struct spawner_status *st);

/* What a serving sandbox (spec.serve) runs once confined: serves on sock, returns an exit
 * status. */
typedef int (*spawner_serve_fn)(int sock);

/* The spawner process: serves requests from sock until EOF. serve is what a
 * serving sandbox runs (the top layer passes the sandboxed fs helper's loop,
 * so this module needs no knowledge of it). Returns the exit status. */
int spawner_main(int sock, spawner_serve_fn serve);

/* Writes one status record (async-signal-safe). */
void spawner_record(int fd, char tag, int value);

#endif
