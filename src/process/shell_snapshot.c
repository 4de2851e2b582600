/* shell_snapshot: process/start's `shellSnapshot` (capability shellSnapshotV2).
 *
 * codex runs every model command as `[shell, "-lc", SCRIPT]`. A login shell that is
 * not interactive never reads ~/.bashrc, so what the user exports and defines there
 * would be missing. With `shellSnapshot: {scopeId, shell: {name, path}}` the server
 * captures an interactive shell's state once and restores it in front of SCRIPT
 * (behaviour settled against 0.169.0, PROTOCOL.md §8.3):
 *   - scopeId must be 1..256 bytes (else -32602 "shell snapshot scope must be
 *     non-empty and at most 256 bytes"), checked first;
 *   - it applies only when argv is [shell.path, "-lc", SCRIPT, ...]; otherwise the
 *     command runs as given; then shell.name must be bash, zsh or sh (else -32602
 *     "shell snapshots are unsupported for shell `NAME`");
 *   - one capture per (scopeId, shell, cwd, envPolicy, sandbox), the 16 most recently
 *     used kept: the command itself with SCRIPT replaced by our capture script, run
 *     with the request's environment, cwd and sandbox (through the spawner, like any
 *     child), stdin /dev/null; it sources the interactive startup file (~/.bashrc
 *     unless BASH_ENV is set; ${ZDOTDIR:-$HOME}/.zshrc; $ENV for sh) and prints
 *     functions, shell options and `env -0`; aliases are not kept;
 *   - the command then runs as `SHELL -pc` (bash: no startup files, no functions
 *     imported from the environment; zsh -fc; sh -c) whose script restores that state
 *     from /dev/fd/3 (a memfd; the state's first line closes it) and then runs SCRIPT;
 *     the captured environment is laid under the child's, except that the request's
 *     own `env` wins, PWD and OLDPWD are dropped, and the request's envPolicy filters it;
 *   - a failed capture (exit status, 10 s, over 4 MiB of output or 512 KiB of state)
 *     runs the plain command; it is retried after 1 s, at most 3 attempts a key.
 * Where the capture finds /dev/fd/3 unreadable (a sandbox without /proc), the state
 * travels in environment variables that the prelude unsets before SCRIPT.
 *
 * Everything runs on the loop: the capture is started through the loop's spawner
 * channel like any command (helpers/spawner.h: its outcome is read when the spawner
 * reports it, never waited for), its stdout and exit are polled; the starts that
 * wait for it are parked here and called back. */
#include "process/shell_snapshot.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/mman.h>
#include <unistd.h>
#include <fcntl.h>

#include "core/limits.h"
#include "core/log.h"
#include "process/env_policy.h"
#include "helpers/guardian.h"
#include "process/proc_internal.h"
#include "process/spawn.h"
#include "proto/utf8.h"
#include "sandbox/hold.h"
#include "sandbox/policy.h"
#include "util/buf.h"
#include "util/mem.h"

#define SNAP_MAX_CACHED 16
#define SNAP_MAX_SCOPE 256
#define SNAP_MAX_STATE (512u * 1024)          /* state + environment */
#define SNAP_MAX_OUTPUT (8u * SNAP_MAX_STATE) /* what the capture may print */
#define SNAP_TIMEOUT_MS 10000
#define SNAP_RETRY_MS 1000
#define SNAP_MAX_ATTEMPTS 3
#define SNAP_ENV_CHUNK (60u * 1024) /* one state variable, well under MAX_ARG_STRLEN */
#define SNAP_MARKER "\0EXECSNAP\0"
#define SNAP_MARKER_LEN 10

int proc_snapshot_check(struct proc_snapshot_req *r, json_t *argv, char *err, size_t errlen)
{
    if (r->scope_len == 0 || r->scope_len > SNAP_MAX_SCOPE) {
        snprintf(err, errlen, "shell snapshot scope must be non-empty and at most %d bytes",
                 SNAP_MAX_SCOPE);
        return -1;
    }
    const char *a0 = json_string_value(json_array_get(argv, 0));
    const char *a1 = json_string_value(json_array_get(argv, 1));
    if (json_array_size(argv) < 3 || !a0 || strcmp(a0, r->shell_path) != 0 || !a1 ||
        strcmp(a1, "-lc") != 0)
        return 0;
    if (strcmp(r->shell_name, "bash") == 0)
        r->shell = SNAP_BASH;
    else if (strcmp(r->shell_name, "zsh") == 0)
        r->shell = SNAP_ZSH;
    else if (strcmp(r->shell_name, "sh") == 0)
        r->shell = SNAP_SH;
    else {
        snprintf(err, errlen, "shell snapshots are unsupported for shell `%s`", r->shell_name);
        return -1;
    }
    return 1;
}

/* ---- the capture script and its output ----------------------------------------------- */

/* Our own capture scripts. Each first does what an interactive shell of its kind
 * would read at start, then prints: the marker, whether /dev/fd/3 opens here, the
 * functions (bash: and `shopt -p`), the options, the environment; NUL between them.
 * Output the startup files print comes before the marker and is skipped; a last
 * NUL keeps `env` from being the script's last command, which the shell would exec
 * in its own place (lowering SHLVL). The
 * redirect on an empty `case` tests the open without running any command a startup
 * file may have replaced with a function. */
static const char capture_bash[] =
    "if [ -z \"${BASH_ENV-}\" ] && [ -n \"${HOME-}\" ] && [ -r \"$HOME/.bashrc\" ]; then\n"
    "  . \"$HOME/.bashrc\"\n"
    "fi\n"
    "builtin printf '\\0EXECSNAP\\0'\n"
    "if case x in x) ;; esac </dev/fd/3 2>/dev/null; then builtin printf 1; "
    "else builtin printf 0; fi\n"
    "builtin printf '\\0'\n"
    "builtin shopt -p\n"
    "builtin declare -f\n"
    "builtin printf '\\0'\n"
    "builtin set +o\n"
    "builtin printf '\\0'\n"
    "if command -v env >/dev/null 2>&1; then env -0; else command -p env -0; fi\n"
    "builtin printf '\\0'\n";

static const char capture_zsh[] =
    "__exec_rc=\"${ZDOTDIR:-${HOME-}}/.zshrc\"\n"
    "if [ -n \"${HOME-}\" ] && [ -r \"$__exec_rc\" ]; then\n"
    "  . \"$__exec_rc\"\n"
    "fi\n"
    "builtin unset __exec_rc\n"
    "builtin printf '\\0EXECSNAP\\0'\n"
    "if case x in x) ;; esac </dev/fd/3 2>/dev/null; then builtin printf 1; "
    "else builtin printf 0; fi\n"
    "builtin printf '\\0'\n"
    "builtin functions\n"
    "builtin printf '\\0'\n"
    "builtin setopt\n"
    "builtin printf '\\0'\n"
    "if command -v env >/dev/null 2>&1; then env -0; else command -p env -0; fi\n"
    "builtin printf '\\0'\n";

static const char capture_sh[] =
    "if [ -n \"${ENV-}\" ] && [ -r \"$ENV\" ] && [ ! -d \"$ENV\" ]; then\n"
    "  . \"$ENV\"\n"
    "fi\n"
    "printf '\\0EXECSNAP\\0'\n"
    "if case x in x) ;; esac </dev/fd/3 2>/dev/null; then printf 1; else printf 0; fi\n"
    "printf '\\0'\n"
    "printf '\\0'\n"
    "set +o\n"
    "printf '\\0'\n"
    "if command -v env >/dev/null 2>&1; then env -0; else command -p env -0; fi\n"
    "printf '\\0'\n";

static const char *capture_script(enum proc_snapshot_shell sh)
{
    return sh == SNAP_BASH ? capture_bash : sh == SNAP_ZSH ? capture_zsh : capture_sh;
}

static const char *next_record(const char **p, const char *end, size_t *len)
{
    const char *start = *p;
    const char *nul = memchr(start, '\0', (size_t)(end - start));
    if (!nul) return NULL;
    *len = (size_t)(nul - start);
    *p = nul + 1;
    return start;
}

int proc_snapshot_parse(enum proc_snapshot_shell shell, const char *out, size_t len,
                        char **state_out, size_t *state_len, char ***env_out, bool *fd_source)
{
    const char *m = memmem(out, len, SNAP_MARKER, SNAP_MARKER_LEN);
    if (!m) return -EINVAL;
    const char *p = m + SNAP_MARKER_LEN, *end = out + len;
    size_t plen, flen, olen;
    const char *probe = next_record(&p, end, &plen);
    const char *funcs = probe ? next_record(&p, end, &flen) : NULL;
    const char *opts = funcs ? next_record(&p, end, &olen) : NULL;
    if (!opts || plen != 1 || (probe[0] != '0' && probe[0] != '1')) return -EINVAL;
    if (!utf8_valid(funcs, flen) || !utf8_valid(opts, olen)) return -EINVAL;

    struct buf st;
    buf_init(&st);
    buf_puts(&st, "# exec-server shell snapshot\n");
    buf_append(&st, funcs, flen);
    if (flen && funcs[flen - 1] != '\n') buf_putc(&st, '\n');
    /* Options last, in one group parsed before any of it runs, so `verbose` or
     * `xtrace` coming on does not echo the rest of the state. Only options that are
     * on: the command's shell starts with the defaults. */
    bool any = false;
    for (const char *l = opts, *oend = opts + olen; l < oend;) {
        const char *nl = memchr(l, '\n', (size_t)(oend - l));
        size_t n = nl ? (size_t)(nl - l) : (size_t)(oend - l);
        const char *name = NULL;
        size_t name_len = 0;
        if (shell == SNAP_ZSH) {
            name = l;
            name_len = n;
        } else if (n > 7 && memcmp(l, "set -o ", 7) == 0) {
            name = l + 7;
            name_len = n - 7;
        }
        bool plain = name_len > 0;
        for (size_t i = 0; i < name_len && plain; i++)
            plain = (name[i] >= 'a' && name[i] <= 'z') || (name[i] >= 'A' && name[i] <= 'Z') ||
                    (name[i] >= '0' && name[i] <= '9') || name[i] == '-' || name[i] == '_';
        if (plain) {
            if (!any) buf_puts(&st, "{\n");
            any = true;
            buf_printf(&st, shell == SNAP_ZSH ? "setopt %.*s 2>/dev/null\n" : "set -o %.*s\n",
                       (int)name_len, name);
        }
        l += n + (nl != NULL);
    }
    if (any) buf_puts(&st, "}\n");

    /* The environment: NAME=value records; not UTF-8, nameless or the directory
     * pair: skipped. */
    size_t cap = 32, n = 0, env_bytes = 0;
    char **env = xcalloc(cap, sizeof *env);
    while (p < end) {
        size_t elen;
        const char *e = next_record(&p, end, &elen);
        if (!e) {
            e = p;
            elen = (size_t)(end - p);
            p = end;
        }
        const char *eq = memchr(e, '=', elen);
        if (!eq || eq == e || !utf8_valid(e, elen)) continue;
        size_t nlen = (size_t)(eq - e);
        if ((nlen == 3 && memcmp(e, "PWD", 3) == 0) || (nlen == 6 && memcmp(e, "OLDPWD", 6) == 0))
            continue;
        if (n + 1 >= cap) {
            cap *= 2;
            env = xrealloc(env, cap * sizeof *env);
        }
        env[n++] = xstrndup(e, elen);
        env[n] = NULL;
        env_bytes += elen;
    }
    if (st.len + env_bytes > SNAP_MAX_STATE) {
        buf_free(&st);
        env_free(env);
        return -E2BIG;
    }
    *state_len = st.len;
    buf_putc(&st, '\0');
    *state_out = buf_steal(&st);
    *env_out = env;
    *fd_source = probe[0] == '1';
    return 0;
}

void proc_snapshot_command(enum proc_snapshot_shell shell, const struct proc_snapshot *snap,
                           const char *script, const char **flag, char **new_script,
                           char ***extra_env, size_t *n_extra)
{
    struct buf b;
    buf_init(&b);
    *flag = shell == SNAP_BASH ? "-pc" : shell == SNAP_ZSH ? "-fc" : "-c";
    /* bash -p reads no startup file and imports no function from the environment;
     * privileged mode has done its part once the prelude runs. */
    if (shell == SNAP_BASH) buf_puts(&b, "set +o privileged\n");
    *extra_env = NULL;
    *n_extra = 0;
    if (snap->fd_source) {
        buf_puts(&b, "if ! . /dev/fd/3 >/dev/null; then");
    } else {
        /* The state in variables of at most SNAP_ENV_CHUNK bytes, cut on UTF-8
         * boundaries, unset before it is evaluated. */
        struct buf names, refs;
        buf_init(&names);
        buf_init(&refs);
        size_t cap = 0;
        for (size_t off = 0; off < snap->state_len;) {
            size_t take = snap->state_len - off;
            if (take > SNAP_ENV_CHUNK) {
                take = SNAP_ENV_CHUNK;
                while (take > 0 && ((unsigned char)snap->state[off + take] & 0xC0) == 0x80)
                    take--;
            }
            if (*n_extra + 1 >= cap) {
                cap = cap ? cap * 2 : 8;
                *extra_env = xrealloc(*extra_env, cap * sizeof **extra_env);
            }
            size_t k = (*n_extra)++;
            (*extra_env)[k] =
                xasprintf("__EXEC_SHELL_SNAPSHOT_%zu=%.*s", k, (int)take, snap->state + off);
            buf_printf(&names, " __EXEC_SHELL_SNAPSHOT_%zu", k);
            buf_printf(&refs, "${__EXEC_SHELL_SNAPSHOT_%zu}", k);
            off += take;
        }
        buf_putc(&names, '\0');
        buf_putc(&refs, '\0');
        buf_printf(&b, "if ! eval \"unset%s\n%s\" >/dev/null; then", names.data, refs.data);
        buf_free(&names);
        buf_free(&refs);
    }
    buf_puts(&b, " printf 'failed to restore shell snapshot\\n' >&2; fi\n");
    buf_puts(&b, script);
    buf_putc(&b, '\0');
    *new_script = buf_steal(&b);
}

/* Names that never pass from a captured environment to a command (secrets of the
 * executor's own transports; the reference keeps the same names out). */
static const char *const non_inheritable[] = {"CODEX_EXEC_SERVER_NOISE_AUTH_TOKEN",
                                              "NODE_REPL_AUTH_TOKEN", NULL};

static bool is_non_inheritable(const char *name)
{
    for (const char *const *n = non_inheritable; *n; n++)
        if (strcasecmp(*n, name) == 0) return true;
    return false;
}

char **proc_snapshot_env(char *const *cenv, json_t *req_env, const struct proc_snapshot *snap,
                         char **extra, size_t nextra)
{
    json_t *over = json_object();
    for (char *const *kv = snap->env; kv && *kv; kv++) {
        const char *eq = strchr(*kv, '=');
        char *name = xstrndup(*kv, (size_t)(eq - *kv));
        if (!json_object_get(req_env, name) && !is_non_inheritable(name))
            json_object_set_new(over, name, json_string(eq + 1));
        free(name);
    }
    for (size_t i = 0; i < nextra; i++) {
        const char *eq = strchr(extra[i], '=');
        char *name = xstrndup(extra[i], (size_t)(eq - extra[i]));
        json_object_set_new(over, name, json_string(eq + 1));
        free(name);
        free(extra[i]);
    }
    free(extra);
    json_t *excl = json_array();
    for (const char *const *n = non_inheritable; *n; n++)
        json_array_append_new(excl, json_string(*n));
    struct env_policy pass = {
        .inherit = ENV_INHERIT_ALL, .ignore_default_excludes = true, .exclude = excl};
    char **out = env_build(cenv, &pass, over);
    json_decref(excl);
    json_decref(over);
    return out;
}

/* ---- the cache ------------------------------------------------------------------------ */

struct snap_waiter {
    struct snap_waiter *next;
    struct proc_table *t;
    char *id;
    proc_snapshot_done_fn done;
    void *job;
};

enum entry_state { E_CAPTURING, E_READY, E_FAILED };

struct capture;

struct snap_entry {
    /* the key */
    char *scope;
    size_t scope_len;
    char *shell_name, *shell_path, *cwd;
    json_t *env_policy, *sandbox; /* copies, or NULL */
    enum proc_snapshot_shell shell;
    /* the value */
    enum entry_state st;
    unsigned attempts;
    uint64_t retry_at;
    char *state;
    size_t state_len;
    char **env;
    bool fd_source;
    struct snap_waiter *waiters;
    struct capture *cap;
    bool evicted; /* out of the cache, on `orphans`; freed once its capture ends */
    struct snap_entry *next_orphan;
};

struct capture {
    struct snap_entry *e;
    uv_loop_t *loop;
    struct spawn_op *op; /* while the spawner starts it (capture_started) */
    int out_fd;          /* the read end of its stdout */
    pid_t pid;
    int pidfd;
    uv_poll_t pid_poll, out_poll;
    uv_timer_t timer;
    int open_handles;
    struct buf out;
    bool eof, exited, failed, finished;
    int status;
    struct sandbox_hold *hold;
};

static struct snap_entry *cache[SNAP_MAX_CACHED]; /* least recently used first */
static unsigned ncache;
/* Evicted entries still capturing (their waiters are called back when it ends);
 * as many as captures running, which the starts waiting for them bound. */
static struct snap_entry *orphans;
static bool shutting_down;

static bool json_same(json_t *a, json_t *b)
{
    if (json_is_null(a)) a = NULL;
    if (json_is_null(b)) b = NULL;
    return (!a && !b) || (a && b && json_equal(a, b));
}

static bool entry_matches(const struct snap_entry *e, const struct proc_snapshot_req *r)
{
    return e->scope_len == r->scope_len && memcmp(e->scope, r->scope, r->scope_len) == 0 &&
           strcmp(e->shell_name, r->shell_name) == 0 && strcmp(e->shell_path, r->shell_path) == 0 &&
           strcmp(e->cwd, r->cwd) == 0 && json_same(e->env_policy, r->env_policy) &&
           json_same(e->sandbox, r->sandbox);
}

static void entry_free(struct snap_entry *e)
{
    free(e->scope);
    free(e->shell_name);
    free(e->shell_path);
    free(e->cwd);
    json_decref(e->env_policy);
    json_decref(e->sandbox);
    free(e->state);
    env_free(e->env);
    free(e);
}

static uint64_t now_ms(uv_loop_t *loop)
{
    return uv_now(loop);
}

/* Calls back every waiter of e with what e now holds. */
static void entry_notify(struct snap_entry *e)
{
    struct snap_waiter *w = e->waiters;
    e->waiters = NULL;
    struct proc_snapshot snap = {
        .state = e->state, .state_len = e->state_len, .env = e->env, .fd_source = e->fd_source};
    while (w) {
        struct snap_waiter *n = w->next;
        w->done(w->job, e->st == E_READY ? SNAP_READY : SNAP_FALLBACK, &snap);
        free(w->id);
        free(w);
        w = n;
    }
}

/* The captured environment through the request's policy (inherit forced to all:
 * the policy filters what the shell exported, it does not drop it wholesale). */
static char **filter_env(char **captured, json_t *env_policy)
{
    if (!env_policy) return captured;
    struct env_policy pol;
    env_policy_from_json(env_policy, &pol);
    pol.inherit = ENV_INHERIT_ALL;
    json_t *none = json_object();
    char **out = env_build(captured, &pol, none);
    json_decref(none);
    env_free(captured);
    return out;
}

static void capture_handle_closed(uv_handle_t *h)
{
    struct capture *c = h->data;
    if (--c->open_handles == 0) {
        buf_free(&c->out);
        free(c);
    }
}

static void remove_orphan(struct snap_entry *e)
{
    for (struct snap_entry **pp = &orphans; *pp; pp = &(*pp)->next_orphan) {
        if (*pp == e) {
            *pp = e->next_orphan;
            return;
        }
    }
}

/* e's capture is over, one way or another: its waiters are called back. */
static void capture_ended(struct snap_entry *e)
{
    e->cap = NULL;
    entry_notify(e);
    if (e->evicted) {
        remove_orphan(e);
        entry_free(e);
    }
}

/* The capture is over (exit seen, and output read or given up on). */
static void capture_finish(struct capture *c)
{
    if (c->finished) return;
    c->finished = true;
    struct snap_entry *e = c->e;
    uv_close((uv_handle_t *)&c->timer, capture_handle_closed);
    uv_close((uv_handle_t *)&c->out_poll, capture_handle_closed);
    close(c->out_fd);
    c->out_fd = -1;
    uv_close((uv_handle_t *)&c->pid_poll, capture_handle_closed);
    close(c->pidfd);
    guardian_untrack(c->pid);
    sandbox_hold_release(c->hold);
    c->hold = NULL;

    int rc = -EIO;
    if (!c->failed && c->status == 0)
        rc = proc_snapshot_parse(e->shell, c->out.data ? c->out.data : "", c->out.len, &e->state,
                                 &e->state_len, &e->env, &e->fd_source);
    if (rc == 0) {
        e->env = filter_env(e->env, e->env_policy);
        e->st = E_READY;
    } else if (!shutting_down) {
        log_warn("shell snapshot capture for %s failed (%s); running commands without it",
                 e->shell_path,
                 c->failed   ? "timed out or too much output"
                 : c->status ? "the shell exited unsuccessfully"
                             : "its output was not a snapshot");
    }
    if (rc != 0) {
        e->st = E_FAILED;
        e->retry_at = now_ms(c->loop) + SNAP_RETRY_MS;
    }
    capture_ended(e);
}

static void capture_kill(struct capture *c)
{
    kill(-c->pid, SIGKILL);
    kill(c->pid, SIGKILL);
}

static void on_capture_timeout(uv_timer_t *t)
{
    struct capture *c = t->data;
    c->failed = true;
    if (c->exited)
        capture_finish(c);
    else
        capture_kill(c); /* its exit finishes it */
}

static void on_capture_exit(uv_poll_t *h, int status, int events)
{
    struct capture *c = h->data;
    siginfo_t si;
    memset(&si, 0, sizeof si);
    int r = spawn_wait(c->pidfd, &si);
    if (r == 0 && si.si_pid == 0) return; /* not yet */
    uv_poll_stop(h);
    c->exited = true;
    c->status = r < 0 ? 255 : si.si_code == CLD_EXITED ? si.si_status : 128 + si.si_status;
    /* Whatever it left behind in its group goes with it: through its pidfd, as it is
     * reaped and its number may already be a stranger's (spawn_group_signal). */
    spawn_group_signal(c->pidfd, SIGKILL);
    if (c->eof || c->failed) capture_finish(c);
}

static void on_capture_output(uv_poll_t *h, int status, int events)
{
    struct capture *c = h->data;
    char buf[16384];
    for (;;) {
        ssize_t n = read(c->out_fd, buf, sizeof buf);
        if (n > 0) {
            if (c->out.len + (size_t)n > SNAP_MAX_OUTPUT) {
                c->failed = true;
                capture_kill(c);
                break;
            }
            buf_append(&c->out, buf, (size_t)n);
            continue;
        }
        if (n < 0 && (errno == EAGAIN || errno == EINTR)) return;
        break; /* EOF or an error: nothing more to read */
    }
    uv_poll_stop(h);
    c->eof = true;
    if (c->exited) capture_finish(c);
}

/* A capture that could not be started (err, an errno, 0 at shutdown): the entry has
 * failed and is retried later. */
static void capture_failed(struct capture *c, int err)
{
    struct snap_entry *e = c->e;
    if (!shutting_down)
        log_warn("cannot start the shell snapshot capture for %s: %s", e->shell_path,
                 strerror(err ? err : EIO));
    if (c->out_fd >= 0) close(c->out_fd);
    sandbox_hold_release(c->hold);
    e->cap = NULL;
    e->st = E_FAILED;
    e->retry_at = now_ms(c->loop) + SNAP_RETRY_MS;
    free(c);
}

/* The spawner's outcome (spawn_done_fn): the capture runs, its output and exit are
 * watched; or its start failed, and the starts waiting for it run without it. */
static void capture_started(void *arg, int rc, const struct spawn_result *sr, int sberr)
{
    struct capture *c = arg;
    c->op = NULL;
    if (rc < 0) {
        struct snap_entry *e = c->e;
        capture_failed(c, rc == SPAWN_ERR_SANDBOX ? sberr : -rc);
        capture_ended(e);
        return;
    }
    int fl = fcntl(c->out_fd, F_GETFL);
    fcntl(c->out_fd, F_SETFL, fl | O_NONBLOCK);
    c->pid = sr->pid;
    c->pidfd = sr->pidfd;
    c->pid_poll.data = c->out_poll.data = c->timer.data = c;
    uv_poll_init(c->loop, &c->pid_poll, c->pidfd);
    uv_poll_init(c->loop, &c->out_poll, c->out_fd);
    uv_timer_init(c->loop, &c->timer);
    c->open_handles = 3;
    uv_poll_start(&c->pid_poll, UV_READABLE, on_capture_exit);
    uv_poll_start(&c->out_poll, UV_READABLE | UV_DISCONNECT, on_capture_output);
    uv_timer_start(&c->timer, on_capture_timeout, SNAP_TIMEOUT_MS, 0);
}

/* The capture's stdout pipe, its stdin and stderr (/dev/null) and the fd 3 probe
 * (a memfd). Returns 0 or -errno; the caller closes what was made either way. */
static int capture_fds(int outp[2], int *devnull, int *probe)
{
    if (pipe2(outp, O_CLOEXEC) < 0) return -errno;
    *devnull = open("/dev/null", O_RDWR | O_CLOEXEC);
    if (*devnull < 0) return -errno;
    *probe = memfd_create("exec-server-snapshot-probe", MFD_CLOEXEC);
    return *probe < 0 ? -errno : 0;
}

/* Starts the capture for e with rq as the template: the request goes to the spawner
 * like any start's (never waiting for it), and the loop learns the outcome in
 * capture_started. When it cannot even be sent, the entry has failed at once. */
static void capture_start(uv_loop_t *loop, struct snap_entry *e, const struct spawn_request *rq)
{
    int outp[2] = {-1, -1}, devnull = -1, probe = -1;
    struct capture *c = xcalloc(1, sizeof *c);
    c->e = e;
    c->loop = loop;
    buf_init(&c->out);
    int err = capture_fds(outp, &devnull, &probe);
    c->out_fd = outp[0];
    size_t argc = 0;
    while (rq->argv[argc])
        argc++;
    char **argv = xcalloc(argc + 1, sizeof *argv);
    for (size_t i = 0; i < argc; i++)
        argv[i] = rq->argv[i];
    argv[2] = (char *)capture_script(e->shell);
    int stdio[3] = {devnull, outp[1], devnull};
    struct spawn_request crq = *rq;
    crq.argv = argv;
    crq.tty = false;
    crq.pipe_stdin = false;
    crq.stdio = stdio;
    crq.extra_fds = &probe;
    crq.n_extra_fds = 1;
    if (!err && crq.sandbox) {
        c->hold = sandbox_hold_acquire(crq.sandbox, server_limits.sandbox_max_processes,
                                       server_limits.sandbox_max_memory, &err);
        sandbox_hold_cgroup_fds(c->hold, crq.cgroup_fds);
    }
    if (!err) err = spawn_child_async(loop, &crq, capture_started, c, &c->op);
    free(argv);
    int fds[] = {outp[1], devnull, probe};
    for (size_t i = 0; i < sizeof fds / sizeof fds[0]; i++)
        if (fds[i] >= 0) close(fds[i]);
    if (err < 0) {
        capture_failed(c, -err);
        return;
    }
    e->cap = c;
    e->st = E_CAPTURING;
}

static void cache_evict_oldest(void)
{
    struct snap_entry *old = cache[0];
    memmove(&cache[0], &cache[1], (ncache - 1) * sizeof cache[0]);
    ncache--;
    if (!old->cap) {
        entry_free(old);
        return;
    }
    old->evicted = true;
    old->next_orphan = orphans;
    orphans = old;
}

void proc_snapshot_get(uv_loop_t *loop, struct proc_table *t, const char *id,
                       const struct proc_snapshot_req *r, const struct spawn_request *rq,
                       proc_snapshot_done_fn done, void *job)
{
    struct snap_entry *e = NULL;
    for (unsigned i = 0; i < ncache; i++) {
        if (entry_matches(cache[i], r)) {
            e = cache[i];
            /* Most recently used last. */
            memmove(&cache[i], &cache[i + 1], (ncache - i - 1) * sizeof cache[0]);
            cache[ncache - 1] = e;
            break;
        }
    }
    if (!e) {
        if (ncache == SNAP_MAX_CACHED) cache_evict_oldest();
        e = xcalloc(1, sizeof *e);
        e->scope = xmemdup(r->scope, r->scope_len);
        e->scope_len = r->scope_len;
        e->shell_name = xstrdup(r->shell_name);
        e->shell_path = xstrdup(r->shell_path);
        e->cwd = xstrdup(r->cwd);
        e->env_policy =
            json_is_null(r->env_policy) || !r->env_policy ? NULL : json_deep_copy(r->env_policy);
        e->sandbox = json_is_null(r->sandbox) || !r->sandbox ? NULL : json_deep_copy(r->sandbox);
        e->shell = r->shell;
        e->st = E_FAILED;
        cache[ncache++] = e;
        e->attempts = 1;
        capture_start(loop, e, rq); /* a failure sets retry_at */
    } else if (e->st == E_FAILED && e->attempts < SNAP_MAX_ATTEMPTS &&
               now_ms(loop) >= e->retry_at) {
        e->attempts++;
        capture_start(loop, e, rq);
    }
    struct proc_snapshot snap = {
        .state = e->state, .state_len = e->state_len, .env = e->env, .fd_source = e->fd_source};
    if (e->st != E_CAPTURING) {
        done(job, e->st == E_READY ? SNAP_READY : SNAP_FALLBACK, &snap);
        return;
    }
    struct snap_waiter *w = xcalloc(1, sizeof *w);
    w->t = t;
    w->id = xstrdup(id);
    w->done = done;
    w->job = job;
    w->next = e->waiters;
    e->waiters = w;
}

static unsigned count_waiting(struct snap_entry *e, const struct proc_table *t, const char *id)
{
    unsigned n = 0;
    for (struct snap_waiter *w = e ? e->waiters : NULL; w; w = w->next)
        if (w->t == t && (!id || strcmp(w->id, id) == 0)) n++;
    return n;
}

unsigned proc_snapshot_waiting(const struct proc_table *t, const char *id)
{
    unsigned n = 0;
    for (unsigned i = 0; i < ncache; i++)
        n += count_waiting(cache[i], t, id);
    for (struct snap_entry *e = orphans; e; e = e->next_orphan)
        n += count_waiting(e, t, id);
    return n;
}

static void cancel_in(struct snap_entry *e, struct proc_table *t)
{
    struct snap_waiter **pp = &e->waiters;
    while (*pp) {
        struct snap_waiter *w = *pp;
        if (t && w->t != t) {
            pp = &w->next;
            continue;
        }
        *pp = w->next;
        w->done(w->job, SNAP_CANCELLED, NULL);
        free(w->id);
        free(w);
    }
}

void proc_snapshot_cancel_table(struct proc_table *t)
{
    for (unsigned i = 0; i < ncache; i++)
        cancel_in(cache[i], t);
    for (struct snap_entry *e = orphans; e; e = e->next_orphan)
        cancel_in(e, t);
}

static void shutdown_entry(struct snap_entry *e)
{
    cancel_in(e, NULL);
    struct capture *c = e->cap;
    if (c && c->op) {
        /* Still with the spawner: the start is cancelled (a child that starts after
         * all is stopped then, and the hold ends with it). */
        spawn_cancel(c->op, c->hold);
        c->hold = NULL;
        capture_failed(c, 0);
    } else if (c) {
        capture_kill(c);
        c->failed = true;
        /* Finish now: the handles close and the entry can go. */
        e->evicted = false;
        capture_finish(c);
    }
    entry_free(e);
}

void proc_snapshot_shutdown(void)
{
    shutting_down = true;
    while (orphans) {
        struct snap_entry *e = orphans;
        orphans = e->next_orphan;
        e->evicted = false;
        shutdown_entry(e);
    }
    while (ncache)
        shutdown_entry(cache[--ncache]);
    shutting_down = false;
}
