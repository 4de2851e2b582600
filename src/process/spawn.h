/* spawn: fork/exec of one child on a PTY or on pipes (DESIGN.md pitfalls 2-5). */
#ifndef EXEC_PROCESS_SPAWN_H
#define EXEC_PROCESS_SPAWN_H

#include <signal.h>
#include <stdbool.h>
#include <sys/types.h>

struct sandbox_prepared;

struct spawn_request {
    const char *program;   /* argv[0] as given: resolved on PATH unless it has a '/' */
    char *const *argv;     /* NULL-terminated; argv[0] may be the arg0 override */
    char *const *envp;     /* NULL-terminated, exactly the child's environment */
    const char *path_env;  /* PATH from envp, or NULL */
    const char *cwd;       /* absolute directory */
    bool tty;
    unsigned short rows, cols; /* the PTY's initial size; 0 = 24 x 80 */
    bool pipe_stdin;
    const struct sandbox_prepared *sandbox; /* applied in the child before exec, or NULL */
};

struct spawn_result {
    pid_t pid;
    int pidfd;
    int out_fd;   /* stdout pipe, or the PTY master */
    int err_fd;   /* stderr pipe, or -1 with a PTY */
    int in_fd;    /* stdin pipe, a dup of the PTY master, or -1 */
};

/* Starts the child. Returns 0, or a negative errno describing why it could not
 * be started (program not found, cwd missing, exec format error...). All returned
 * fds are non-blocking and close-on-exec. */
int spawn_child(const struct spawn_request *rq, struct spawn_result *out);

/* waitid(P_PIDFD, pidfd, si, WEXITED | WNOHANG) for a pidfd from spawn_child,
 * also when it is the eventfd of the no-pidfd_open fallback. si->si_pid is 0
 * while the child runs. Returns 0 or a negative errno. */
int spawn_wait(int pidfd, siginfo_t *si);

#endif
