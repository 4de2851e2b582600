/* ec_stdio: the stdio message layer of libexecclient (program mode).
 *
 * The client starts a local program, `exec-server --listen stdio` or anything that
 * ends up running one (`ssh host exec-server --listen stdio`), and speaks JSON-RPC to
 * it as the server's stdio transport does (PROTOCOL.md §1.5): one message per line,
 * '\n' ends it, a '\r' before it is dropped, blank lines are skipped. Everything above
 * the message layer (initialize, calls, process tracking, fs) is ec_client.c's.
 *
 * The program's stdin and stdout are the two ends of one socketpair, not pipes, so
 * the shared connection code (recv/send with MSG_NOSIGNAL, poll) works unchanged and a
 * program that goes away is an EOF, never a SIGPIPE. It runs in a process group of
 * its own (as codex starts it) with default signal dispositions, whatever the host
 * ignores. A stdio server has no resume: the layer says so (no_resume), and a loss
 * reports how the program ended. Dropping the connection shuts our end, waits up to
 * EC_STDIO_GRACE_MS for the program to exit on its own (a server exits at EOF), then
 * kills its group and reaps it: no zombie, no stray process. */
#include "ec_internal.h"

#include "util/mem.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define EC_STDIO_GRACE_MS 2000
#define EC_STDIO_MAX_LINE (64u << 20) /* the server's own limit (PROTOCOL.md §1.5) */

extern char **environ;

struct ec_stdio {
    char **argv, **env; /* owned, NULL-terminated (env: overrides only) */
    char *cwd;
    int stderr_fd;
    pid_t pid;      /* 0: not started; -1: reaped */
    int pidfd;      /* -1 without pidfd_open */
    bool spawned;   /* once: a stdio session cannot be resumed on a new program */
    char note[200]; /* how the program ended */
};

static struct ec_stdio *st_of(ec_client *c)
{
    return c->ml_state;
}

/* environ with the overrides laid on top (same name replaced). Caller frees the array
 * only: the strings are borrowed. */
static char **merged_env(char **over)
{
    size_t n = 0, k = 0, m = 0;
    while (environ && environ[n])
        n++;
    while (over && over[m])
        m++;
    char **out = xcalloc(n + m + 1, sizeof *out);
    for (size_t i = 0; i < n; i++) {
        const char *eq = strchr(environ[i], '=');
        size_t kl = eq ? (size_t)(eq - environ[i]) : strlen(environ[i]);
        bool replaced = false;
        for (size_t j = 0; j < m && !replaced; j++)
            replaced = strncmp(over[j], environ[i], kl) == 0 && over[j][kl] == '=';
        if (!replaced) out[k++] = environ[i];
    }
    for (size_t j = 0; j < m; j++)
        out[k++] = over[j];
    return out;
}

static void note_status(struct ec_stdio *st, int status)
{
    if (WIFEXITED(status))
        snprintf(st->note, sizeof st->note, "program `%s` exited with status %d", st->argv[0],
                 WEXITSTATUS(status));
    else if (WIFSIGNALED(status))
        snprintf(st->note, sizeof st->note, "program `%s` was killed by signal %d", st->argv[0],
                 WTERMSIG(status));
}

/* Waits up to ms for the program to exit; true once it has been reaped. */
static bool reap_within(struct ec_stdio *st, int ms)
{
    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (;;) {
        int status;
        pid_t r = waitpid(st->pid, &status, WNOHANG);
        if (r == st->pid || (r < 0 && errno == ECHILD)) {
            if (r == st->pid)
                note_status(st, status);
            else
                snprintf(st->note, sizeof st->note, "program `%s` exited", st->argv[0]);
            st->pid = -1;
            return true;
        }
        if (r < 0 && errno != EINTR) return false;
        struct timespec t1;
        clock_gettime(CLOCK_MONOTONIC, &t1);
        int left = ms - (int)((t1.tv_sec - t0.tv_sec) * 1000 + (t1.tv_nsec - t0.tv_nsec) / 1000000);
        if (left <= 0) return false;
        if (st->pidfd >= 0) {
            struct pollfd pfd = {.fd = st->pidfd, .events = POLLIN};
            poll(&pfd, 1, left);
        } else {
            poll(NULL, 0, left < 10 ? left : 10); /* no pidfd: a short nap between checks */
        }
    }
}

static void stop_program(struct ec_stdio *st, int grace_ms)
{
    if (st->pid <= 0) return;
    if (!reap_within(st, grace_ms)) {
        kill(-st->pid, SIGKILL);
        kill(st->pid, SIGKILL);
        /* SIGKILL cannot be caught; a process stuck in the kernel is left for later
         * rather than blocking the caller for ever. */
        for (int i = 0; i < 10 && !reap_within(st, 1000); i++) {
        }
    }
    if (st->pidfd >= 0) close(st->pidfd);
    st->pidfd = -1;
}

static int stdio_open(ec_client *c, int64_t deadline, ec_error *err)
{
    (void)deadline;
    struct ec_stdio *st = st_of(c);
    if (st->spawned) /* handle_loss never asks (no_resume); kept as a guard */
        return ec_fail(err, EC_ERR_TRANSPORT, 0, "a stdio session cannot be resumed");
    st->spawned = true;
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0)
        return ec_fail(err, EC_ERR_TRANSPORT, 0, "socketpair: %s", strerror(errno));
    posix_spawn_file_actions_t fa;
    posix_spawnattr_t at;
    posix_spawn_file_actions_init(&fa);
    posix_spawnattr_init(&at);
    posix_spawn_file_actions_adddup2(&fa, sv[1], 0);
    posix_spawn_file_actions_adddup2(&fa, sv[1], 1);
    if (st->stderr_fd < 0)
        posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
    else if (st->stderr_fd > 0 && st->stderr_fd != 2)
        posix_spawn_file_actions_adddup2(&fa, st->stderr_fd, 2);
    if (st->cwd) posix_spawn_file_actions_addchdir_np(&fa, st->cwd);
    /* Its own process group (closing kills all of it), no blocked signals, and the
     * default action for those a host commonly ignores or catches. */
    sigset_t none, defs;
    sigemptyset(&none);
    sigemptyset(&defs);
    int reset[] = {SIGPIPE, SIGINT, SIGQUIT, SIGTERM, SIGHUP, SIGCHLD, SIGTSTP, SIGTTIN, SIGTTOU};
    for (size_t i = 0; i < sizeof reset / sizeof reset[0]; i++)
        sigaddset(&defs, reset[i]);
    posix_spawnattr_setflags(&at, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK |
                                      POSIX_SPAWN_SETSIGDEF);
    posix_spawnattr_setpgroup(&at, 0);
    posix_spawnattr_setsigmask(&at, &none);
    posix_spawnattr_setsigdefault(&at, &defs);
    char **envp = merged_env(st->env);
    pid_t pid;
    int rc = posix_spawnp(&pid, st->argv[0], &fa, &at, st->argv, envp);
    free(envp);
    posix_spawn_file_actions_destroy(&fa);
    posix_spawnattr_destroy(&at);
    close(sv[1]);
    if (rc != 0) {
        close(sv[0]);
        snprintf(st->note, sizeof st->note, "cannot start program `%s`: %s", st->argv[0],
                 strerror(rc));
        return ec_fail(err, EC_ERR_TRANSPORT, 0, "%s", st->note);
    }
    st->pid = pid;
    st->pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
    c->fd = sv[0];
    return 0;
}

static int stdio_send(ec_client *c, const char *text, size_t len, ec_error *err)
{
    if (memchr(text, '\n', len))
        return ec_fail(err, EC_ERR_USAGE, 0, "a message sent over stdio cannot contain a newline");
    char *line = xmalloc(len + 1);
    memcpy(line, text, len);
    line[len] = '\n';
    int rc = ec_conn_send_raw(c, line, len + 1, err);
    free(line);
    return rc;
}

/* The JSON lines in rbuf, each to c->deliver; a partial line stays. */
static int stdio_on_input(ec_client *c)
{
    size_t off = 0;
    while (c->fd >= 0 && off < c->rlen) {
        uint8_t *start = c->rbuf + off;
        uint8_t *nl = memchr(start, '\n', c->rlen - off);
        if (!nl) break;
        size_t n = (size_t)(nl - start);
        off += n + 1;
        if (n && start[n - 1] == '\r') n--;
        if (n) c->deliver(c, (const char *)start, n);
    }
    if (off) {
        memmove(c->rbuf, c->rbuf + off, c->rlen - off);
        c->rlen -= off;
    }
    if (c->rlen > EC_STDIO_MAX_LINE) {
        snprintf(st_of(c)->note, sizeof st_of(c)->note, "program `%s` sent a line over %u bytes",
                 st_of(c)->argv[0], EC_STDIO_MAX_LINE);
        return -1;
    }
    return 0;
}

/* The connection is going: the program sees EOF on its stdin first, then has the
 * grace period to exit before its group is killed. */
static void stdio_on_drop(ec_client *c)
{
    struct ec_stdio *st = st_of(c);
    shutdown(c->fd, SHUT_WR);
    stop_program(st, EC_STDIO_GRACE_MS);
}

static void stdio_on_close(ec_client *c)
{
    ec_conn_drop(c); /* no WebSocket Close to send: the EOF is the goodbye */
}

static const char *stdio_loss_reason(ec_client *c)
{
    struct ec_stdio *st = st_of(c);
    if (st->pid > 0) reap_within(st, 0); /* an exit not noticed yet */
    return st->note[0] ? st->note : NULL;
}

static void stdio_destroy(ec_client *c)
{
    struct ec_stdio *st = st_of(c);
    if (!st) return;
    stop_program(st, 0);
    if (st->pidfd >= 0) close(st->pidfd);
    ec_strv_free(st->argv);
    ec_strv_free(st->env);
    free(st->cwd);
    free(st);
    c->ml_state = NULL;
}

static const struct ec_msg_layer stdio_layer = {
    .open = stdio_open,
    .send = stdio_send,
    .on_close = stdio_on_close,
    .on_drop = stdio_on_drop,
    .destroy = stdio_destroy,
    .on_input = stdio_on_input,
    .loss_reason = stdio_loss_reason,
    .no_resume = true,
};

int ec_program_init(ec_client *c, const ec_client_options *o, ec_error *err)
{
    if (!o->program_argv[0] || !*o->program_argv[0])
        return ec_fail(err, EC_ERR_USAGE, 0, "program mode needs a program to run");
    for (size_t i = 0; o->program_env && o->program_env[i]; i++) {
        const char *eq = strchr(o->program_env[i], '=');
        if (!eq || eq == o->program_env[i])
            return ec_fail(err, EC_ERR_USAGE, 0, "program environment entry `%s` is not K=V",
                           o->program_env[i]);
    }
    if (o->program_cwd && o->program_cwd[0] != '/')
        return ec_fail(err, EC_ERR_USAGE, 0, "program cwd `%s` must be an absolute path",
                       o->program_cwd);
    struct ec_stdio *st = xcalloc(1, sizeof *st);
    st->argv = ec_strv_dup(o->program_argv);
    st->env = ec_strv_dup(o->program_env);
    st->cwd = o->program_cwd ? xstrdup(o->program_cwd) : NULL;
    st->stderr_fd = o->program_stderr_fd;
    st->pidfd = -1;
    c->ml = &stdio_layer;
    c->ml_state = st;
    return 0;
}
