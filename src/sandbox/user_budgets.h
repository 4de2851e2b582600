/* user_budgets: each sandbox's share of the kernel's per-user counts.
 *
 * The kernel keeps some counts per user rather than per process: inotify instances
 * and watches, fanotify groups and marks, namespaces of each kind ("ucounts"), and
 * queued signals and POSIX message-queue bytes (RLIMIT_SIGPENDING and
 * RLIMIT_MSGQUEUE, counted per user since Linux 5.14). Each is counted per user
 * namespace and uid and charged up the tree of user namespaces, every level against
 * its own limit. A sandbox's command runs in a user namespace of its own
 * (sandbox/sandbox_init.h, step 3), so what it holds is charged to the server's uid as
 * well: one command that calls inotify_init1 until EMFILE and keeps the descriptors
 * took them from the server, from every other sandbox's init (which watches the
 * protected names with one) and, a root server's, from every root process on the host.
 *
 * A user namespace's limits are its /proc/sys/user/max_* files, written by a task with
 * CAP_SYS_RESOURCE in it, and they bound everything charged through it, nested
 * namespaces included. The sandbox's init has that capability until the command drops
 * everything: it sets each to the sandbox's share (user_budgets_apply). The two
 * rlimits become the init's own, which the command inherits and cannot raise. The
 * shares, and why, are in docs/SANDBOX.md ("Per-uid budgets"). Where there is no user
 * namespace of the sandbox's own, only the rlimits can be set. */
#ifndef EXEC_SANDBOX_USER_BUDGETS_H
#define EXEC_SANDBOX_USER_BUDGETS_H

#include <stdbool.h>
#include <sys/resource.h>

/* The per-user-namespace counts, in /proc/sys/user's names (max_ + the name). */
enum user_count {
    USER_COUNT_USER_NS,
    USER_COUNT_PID_NS,
    USER_COUNT_UTS_NS,
    USER_COUNT_IPC_NS,
    USER_COUNT_NET_NS,
    USER_COUNT_MNT_NS,
    USER_COUNT_CGROUP_NS,
    USER_COUNT_TIME_NS,
    USER_COUNT_INOTIFY_INSTANCES,
    USER_COUNT_INOTIFY_WATCHES,
    USER_COUNT_FANOTIFY_GROUPS,
    USER_COUNT_FANOTIFY_MARKS,
    USER_COUNT_N
};

/* One uid's limits (what the server's own side may hold), or a sandbox's share. */
struct user_budgets {
    long count[USER_COUNT_N]; /* -1: unknown (a share then leaves the kernel's) */
    rlim_t sigpending;        /* queued signals; RLIM_INFINITY: none */
    rlim_t msgqueue;          /* message-queue bytes; RLIM_INFINITY: none */
    struct rlimit nofile;     /* descriptors: the spawner's soft limit and the hard one; a
                                 share's are the command's (rlim_max RLIM_INFINITY: leave) */
};

/* One sandbox gets an eighth of each (and at most USER_BUDGET_MAX_NS of each kind of
 * namespace), so that it takes eight sandboxes at their limits at once to use up what
 * one uid may hold. Descriptors are another kind of count: the kernel refuses to pass
 * one over a Unix socket (SCM_RIGHTS) once the uid has more in flight than the
 * *sender's* RLIMIT_NOFILE, and a server that is not root passes every child's to its
 * spawner. So the command's hard limit is seven eighths of the server's, which the
 * server (server_run.c raises its soft limit to it) and the sandboxes' inits (they
 * raise theirs, user_budgets_apply) send under; its soft one stays the spawner's, if
 * not above that. */
#define USER_BUDGET_SHARE 8
#define USER_BUDGET_MAX_NS 1024

/* A sandbox's share of a uid's limits (pure). */
void user_budgets_share(const struct user_budgets *uid, struct user_budgets *share);

/* In the spawner: the share every sandbox gets, from the limits its own user
 * namespace has and the host-wide inotify and fanotify ones (a server in a user
 * namespace of a container's sees its own, where the kernel's defaults are the
 * host's), read once. Never NULL (unknown counts are -1). Not thread-safe; the
 * spawner is single-threaded. */
const struct user_budgets *user_budgets_get(void);

/* In the init, as step 3 ends: the rlimits (its soft RLIMIT_NOFILE raised to the hard
 * one; the command's is set by sandbox_confine from b->nofile), and with own_userns the
 * namespace's limits. Returns 0, or -errno with *what naming the first that could not
 * be set (the caller goes on: the budgets are then the uid's, as without this). */
int user_budgets_apply(const struct user_budgets *b, bool own_userns, const char **what);

/* Something an operator should know about every sandbox of this server, said once in
 * the server's log however many inits meet it: a flag a note, in a page of shared
 * memory the server makes (user_budgets_notes_fd) and passes to each of its spawners
 * at exec; each maps it (user_budgets_notes_attach) and every init, a fork of one,
 * shares it. Without the page each init says it. */
enum user_budgets_note {
    USER_BUDGETS_NOT_SPLIT,    /* the namespace's limits could not be written */
    USER_BUDGETS_NO_USERNS,    /* no user namespace of the sandbox's own */
    USER_BUDGETS_NAMES_POLLED, /* the init got no inotify instance for the names */
    USER_BUDGETS_NOTE_N
};
void user_budgets_note_once(enum user_budgets_note n, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* The server: the notes' page (made on the first call; thread-safe), for the spawner's
 * exec, or -1. */
int user_budgets_notes_fd(void);

/* In a spawner: maps the page inherited as fd, if it is one (a sealed memfd of ours);
 * else one of its own, shared with its inits only. */
void user_budgets_notes_attach(int fd);

#endif
