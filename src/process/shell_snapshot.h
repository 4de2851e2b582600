/* shell_snapshot: process/start's `shellSnapshot` (capability shellSnapshotV2,
 * PROTOCOL.md §8.3): the state of the user's interactive shell, captured once per
 * key and restored in front of a `[shell, "-lc", SCRIPT]` command. See
 * shell_snapshot.c for the semantics. Used by start_methods.c only. */
#ifndef EXEC_PROCESS_SHELL_SNAPSHOT_H
#define EXEC_PROCESS_SHELL_SNAPSHOT_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <uv.h>

struct pdec;
struct proc_table;
struct spawn_request;
struct sandbox_policy;

enum proc_snapshot_shell { SNAP_BASH, SNAP_ZSH, SNAP_SH };

/* The decoded request and the rest of the cache key (all borrowed from params). */
struct proc_snapshot_req {
    const char *scope;
    size_t scope_len;
    const char *shell_name;
    const char *shell_path;
    enum proc_snapshot_shell shell;
    const char *cwd;    /* the request's cwd URI as given */
    json_t *env_policy; /* the request's envPolicy, or NULL */
    json_t *sandbox;    /* the request's sandbox, or NULL */
};

/* Decodes params.shellSnapshot into *out (start_rpc.c; absent or null: *present =
 * false), with serde's texts for a missing or mistyped member. */
void proc_snapshot_decode(struct pdec *d, struct proc_snapshot_req *out, bool *present);

/* Whether the snapshot applies to this argv: 1 yes (the start waits for the
 * capture), 0 no (run the command as given), -1 invalid params with the reference's
 * text in err (an empty or over-long scope; a shell other than bash, zsh, sh). */
int proc_snapshot_check(struct proc_snapshot_req *r, json_t *argv, char *err, size_t errlen);

/* What a start gets back. */
struct proc_snapshot {
    const char *state; /* shell source that restores functions and options */
    size_t state_len;
    char *const *env; /* the captured environment, policy applied ("K=V", NULL-ended) */
    bool fd_source;   /* the state may be read from /dev/fd/3 in this sandbox */
};

enum proc_snapshot_outcome {
    SNAP_READY,     /* snap is valid for the call only */
    SNAP_FALLBACK,  /* no snapshot: run the plain command */
    SNAP_CANCELLED, /* the session is gone: free the job, reply to nothing */
};
typedef void (*proc_snapshot_done_fn)(void *job, enum proc_snapshot_outcome outcome,
                                      const struct proc_snapshot *snap);

/* Looks the key up, starting a capture when needed (rq: the command as it would
 * be spawned; the capture runs it with SCRIPT replaced, stdin /dev/null, stdout
 * captured, under rq's sandbox). `done` is called exactly once, possibly before
 * this returns, on the loop thread. `id` (borrowed until done) names the waiting
 * process for proc_snapshot_waiting. */
void proc_snapshot_get(uv_loop_t *loop, struct proc_table *t, const char *id,
                       const struct proc_snapshot_req *r, const struct spawn_request *rq,
                       proc_snapshot_done_fn done, void *job);

/* Starts waiting in table t: whether `id` is among them (id NULL: how many). */
unsigned proc_snapshot_waiting(const struct proc_table *t, const char *id);
/* The table is going away: its waiting starts are called back SNAP_CANCELLED. */
void proc_snapshot_cancel_table(struct proc_table *t);
/* Shutdown: kills running captures, cancels every waiter, frees the cache. */
void proc_snapshot_shutdown(void);

/* Pure helpers, unit-tested. The argv and script a command runs with when the
 * snapshot applies: argv[1] becomes the no-startup-files flag and argv[2] the
 * restore prelude followed by SCRIPT; the state is read from fd 3 (fd_source) or
 * from environment variables the prelude unsets (their names and values appended
 * to *extra_env, malloc'd "K=V" strings). Returns the new argv[1] and argv[2]. */
void proc_snapshot_command(enum proc_snapshot_shell shell, const struct proc_snapshot *snap,
                           const char *script, const char **flag, char **new_script,
                           char ***extra_env, size_t *n_extra);
/* The environment of a command run with the snapshot: the captured variables over
 * cenv (the request's environment as built), except names the request's `env`
 * sets; plus `extra` (the state variables of proc_snapshot_command, taken and
 * freed); executor-transport secrets dropped. Free with env_free. */
char **proc_snapshot_env(char *const *cenv, json_t *req_env, const struct proc_snapshot *snap,
                         char **extra, size_t nextra);
/* Parses a capture's stdout: 0 and *state (malloc'd), *env (env_free), *fd_source;
 * or -EINVAL when the record is malformed, -E2BIG when over the size bound. */
int proc_snapshot_parse(enum proc_snapshot_shell shell, const char *out, size_t len, char **state,
                        size_t *state_len, char ***env, bool *fd_source);

#endif
