/* proc_start: one process/start, as one struct from its params to its process.
 *
 * start_methods.c fills it once, as it decodes and checks the request: the id, the
 * command (argv, environment, cwd), the resolved sandbox policy, the managed
 * network's settings and proxy, and the shell to snapshot. The same struct waits for
 * a shell snapshot, becomes the spawner's request (spawn.h), and stays through the
 * spawn window (PROTOCOL.md 5.1): the request went to the spawner and the outcome is
 * not in yet. Its id is taken then; process/read says "is starting", process/write
 * "starting", process/terminate cancels it; the table lists it (proc_internal.h).
 * Once the child runs, the process takes over its argv, cwd, hold and proxy; what
 * only the launch needed (the environment, the policy) is let go at the launch. */
#ifndef EXEC_PROCESS_PROC_START_H
#define EXEC_PROCESS_PROC_START_H

#include <jansson.h>
#include <stdbool.h>

#include "netproxy/netproxy.h"
#include "process/shell_snapshot.h"
#include "sandbox/policy.h"
#include "util/buf.h"

struct proc_table;
struct rpc_req;
struct sandbox_hold;
struct spawn_op;

struct proc_start {
    struct proc_start *next, *prev; /* in its table's `starting`, in the spawn window */
    struct proc_table *table;       /* the session's; NULL once the table is gone */
    bool linked;                    /* listed in table->starting (the spawn window) */
    struct rpc_req *req;            /* the pending process/start */
    char *id;
    char *argv0; /* the program (argv[0] as given), for lookup and the log line */
    /* The command, filled once from the params: */
    json_t *env; /* the request's env (borrowed from req's params, until the launch) */
    bool tty, pipe_stdin;
    unsigned short rows, cols; /* a PTY's window at the start (0: the default) */
    char **argv;               /* the child's argv; then process/list's, with cwd */
    char **envp;               /* the child's environment, until the launch */
    char *cwd;
    /* Its sandbox and network: */
    struct sandbox_policy pol; /* resolved from the params (have_pol), until the launch */
    bool have_pol;
    bool sandboxed;                 /* the child is confined by pol */
    int mode;                       /* enum sandbox_mode (sandbox_host.h), when sandboxed */
    struct netproxy_params netp;    /* networkProxy and enforceManagedNetwork, decoded */
    bool transparent;               /* transparent TCP (sandbox/tun.h, netproxy/np_tun.c) */
    struct netproxy *netproxy;      /* its policy proxy (networkProxy), or NULL */
    enum proc_snapshot_shell shell; /* with a shell snapshot: which shell */
    /* The spawn window: */
    bool cancelled; /* process/terminate came first */
    struct sandbox_hold *hold;
    struct spawn_op *op;
    int bridge_fd;         /* the managed-network bridge's server end, or -1 */
    struct buf audit_desc; /* the process.start record's envNames and sandbox
                              (proc_audit_describe), empty without a log */
};

/* process/start (start_methods.c). */
void proc_handle_start(struct rpc_req *req);

#endif
