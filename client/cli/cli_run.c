/* cli_run: `exec-client run` and `exec-client shell`, made to feel like ssh.
 *
 * Against a server that advertises the terminal extensions (ours, PROTOCOL.md
 * §11 (g)) the remote command gets:
 *   - the local window size at start and on every SIGWINCH (process/resize);
 *   - local stdin as it comes, in every mode, and end of input when it ends
 *     (process/closeStdin: a pipe closes, a PTY gets ^D), so `echo hi | run -- cat`
 *     and `run --tty` with piped input finish; `shell` with piped input or
 *     /dev/null runs a login shell on pipes, as ssh does without a terminal;
 *   - SIGINT, SIGTERM, SIGHUP and SIGQUIT of the client forwarded as the same signal.
 *     After SIGINT the client waits for the command (a third SIGINT terminates it
 *     and gives up); after the others the client is going away, so the command
 *     gets 2 s to exit and is then terminated (the client exits 128+N);
 *   - a login-like environment: HOME, USER, LOGNAME, LANG, SHELL and PATH from the
 *     server (envPolicy inherit "core"), TERM from here, `--env` on top; `shell`
 *     starts a login shell in the remote home;
 *   - the exit status of the remote command, 128+N for a signal death;
 *   - a clean end: on a normal exit the session is closed (session/close), so no
 *     detached session lingers on the server.
 * Against the reference (no extensions) it falls back: piped stdin is read to EOF
 * first (up to 64 MiB) and fed through `head -c N`, so the command still sees EOF;
 * LINES/COLUMNS stand in for the window size; signals other than SIGINT terminate
 * the remote process. */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"

#define STDIN_BLOCK (256u << 10)
#define STDIN_BUFFER_MAX (64u << 20) /* fallback: piped stdin up to this gets an exact EOF */

/* ---- local terminal and signals ------------------------------------------------ */

static struct termios saved_tio;
static volatile sig_atomic_t tio_saved;
static volatile sig_atomic_t pending_sig; /* the last forwarded-kind signal */
static volatile sig_atomic_t sig_count[65];
static volatile sig_atomic_t got_winch;

static void tty_restore(void)
{
    if (tio_saved) {
        tcsetattr(STDIN_FILENO, TCSAFLUSH, &saved_tio);
        tio_saved = 0;
    }
}

static void on_signal(int sig)
{
    if (sig == SIGWINCH) {
        got_winch = 1;
        return;
    }
    pending_sig = sig;
    if (sig > 0 && sig < 65) sig_count[sig]++;
}

/* Handlers without SA_RESTART: a signal interrupts poll() so the loop sees it. */
static void install_signals(void)
{
    struct sigaction sa = {.sa_handler = on_signal};
    sigemptyset(&sa.sa_mask);
    int sigs[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGWINCH};
    for (size_t i = 0; i < sizeof sigs / sizeof *sigs; i++)
        sigaction(sigs[i], &sa, NULL);
}

static void tty_raw(void)
{
    if (tcgetattr(STDIN_FILENO, &saved_tio) != 0) return;
    struct termios raw = saved_tio;
    cfmakeraw(&raw);
    tio_saved = 1;
    atexit(tty_restore);
    tcsetattr(STDIN_FILENO, TCSAFLUSH, &raw);
}

static bool window_size(unsigned short *rows, unsigned short *cols)
{
    struct winsize ws;
    int fds[] = {STDOUT_FILENO, STDIN_FILENO, STDERR_FILENO};
    for (size_t i = 0; i < 3; i++) {
        if (ioctl(fds[i], TIOCGWINSZ, &ws) == 0 && ws.ws_row && ws.ws_col) {
            *rows = ws.ws_row;
            *cols = ws.ws_col;
            return true;
        }
    }
    return false;
}

static const char *signal_name(int sig)
{
    switch (sig) {
    case SIGINT: return "INT";
    case SIGTERM: return "TERM";
    case SIGHUP: return "HUP";
    case SIGQUIT: return "QUIT";
    default: return "TERM";
    }
}

/* ---- options and environment ----------------------------------------------------- */

struct run_opts {
    bool dashdash; /* the command followed `--`: exec it as given */
    bool tty;
    bool no_stdin;
    const char *cwd;
    const char **env; /* "K=V" */
    size_t nenv;
    const char *shown;   /* the command as the user wrote it, for errors */
    bool keep;           /* --keep: the session outlives this client (session/keep) */
    long long keep_secs; /* --keep=SECONDS, or -1: until ended */
    bool detach;         /* -d: start kept and return at once */
};

static void env_add(struct run_opts *ro, const char *kv)
{
    ro->env = realloc(ro->env, (ro->nenv + 2) * sizeof *ro->env);
    ro->env[ro->nenv++] = kv;
    ro->env[ro->nenv] = NULL;
}

static bool env_has(const struct run_opts *ro, const char *key)
{
    size_t k = strlen(key);
    for (size_t i = 0; i < ro->nenv; i++)
        if (strncmp(ro->env[i], key, k) == 0 && ro->env[i][k] == '=') return true;
    return false;
}

/* What a login gives beyond the server's core variables (inherited by envPolicy):
 * TERM for a terminal, and LINES/COLUMNS only where the window cannot be sized. */
static void env_defaults(struct run_opts *ro, bool tty, bool can_size)
{
    if (!tty) return;
    static char term[128], lines[32], cols[32];
    const char *t = getenv("TERM");
    snprintf(term, sizeof term, "TERM=%s", t && *t ? t : "xterm");
    if (!env_has(ro, "TERM")) env_add(ro, term);
    unsigned short r, c;
    if (!can_size && window_size(&r, &c)) {
        snprintf(lines, sizeof lines, "LINES=%u", r);
        snprintf(cols, sizeof cols, "COLUMNS=%u", c);
        if (!env_has(ro, "LINES")) env_add(ro, lines);
        if (!env_has(ro, "COLUMNS")) env_add(ro, cols);
    }
}

/* run's and shell's options, in command-line order, into ro. */
static void run_opts_from(const struct cli_args *a, struct run_opts *ro, bool allow_tty)
{
    const char *name = a->entry->name;
    ro->keep_secs = -1;
    for (int i = 0; i < a->nopts; i++) {
        const char *v = a->opts[i].value;
        switch (a->opts[i].ch) {
        case 'd':
            if (!allow_tty) cli_die_usage("%s: -d needs a command (use run -d)", name);
            ro->detach = ro->keep = true;
            break;
        case 'k': {
            ro->keep = true;
            char *end = NULL;
            if (v && (strtoll(v, &end, 10) < 0 || *end || !*v))
                cli_die_usage("--keep=SECONDS wants a number of seconds, got `%s`", v);
            if (v) ro->keep_secs = strtoll(v, NULL, 10);
            break;
        }
        case 't':
            if (!allow_tty) cli_die_usage("%s: --tty is implied", name);
            ro->tty = true;
            break;
        case 'n': ro->no_stdin = true; break;
        case 'C': ro->cwd = v; break;
        case 'e':
            if (!strchr(v, '=') || v[0] == '=') cli_die_usage("--env expects K=V, got `%s`", v);
            env_add(ro, v);
            break;
        }
    }
    ro->dashdash = a->dashdash;
}

static const struct option run_longs[] = {
    {"tty", no_argument, 0, 't'},        {"detach", no_argument, 0, 'd'},
    {"keep", optional_argument, 0, 'k'}, {"cwd", required_argument, 0, 'C'},
    {"env", required_argument, 0, 'e'},  {0, 0, 0, 0}};

/* Like ssh, one command argument is a command line for the remote user's shell
 * (`run 'echo a; echo b'`, and `run nosuchcmd` is the shell's "not found", 127).
 * Several arguments, and any after `--`, are exec'd as given: no second round of
 * quoting, which ssh's joining of words with spaces needs. */
/* The remote user's shell (environment/info), or /bin/sh. */
static const char *remote_shell(struct cli *cli)
{
    json_t *info = ec_client_environment_info(cli->c);
    const char *sh = json_string_value(json_object_get(json_object_get(info, "shell"), "path"));
    return sh && *sh ? sh : "/bin/sh";
}

/* ---- the pump ------------------------------------------------------------------- */

struct pump {
    struct cli *cli;
    ec_process *p;
    bool fwd_stdin;       /* local stdin is forwarded as it comes */
    bool eof_supported;   /* processCloseStdin: stdin's end is passed on */
    bool resize;          /* processResize and a remote PTY */
    const uint8_t *input; /* fallback: buffered stdin fed a block at a time */
    size_t input_len, in_off;
    int dying_sig; /* SIGTERM/SIGHUP/SIGQUIT came: the client is going away */
    int64_t dying_deadline;
    bool escapes;         /* a local terminal in raw mode: ~. and friends (like ssh) */
    bool line_start;      /* the last byte typed ended a line (or nothing typed yet) */
    bool tilde;           /* a ~ at the start of a line waits for its second byte */
    int64_t last_ping_ms; /* keep-alive: when the last Ping went out */
    int64_t ping_at;      /* when the first Ping still unanswered went out, or 0 */
    bool warned;          /* the "not answering" line has been printed */
    bool quit;            /* ~. was typed */
    bool hung_up;         /* ...and the command was hung up on: its session ends too */
    bool keep;            /* --keep: a lost terminal (SIGHUP) detaches instead */
};

#define GRACE_MS 2000 /* how long the remote command may take to follow our signal */

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Forwards a client signal; returns an exit status when the client gives up. */
static int forward_signal(struct pump *pm, int sig)
{
    ec_error e = {0};
    if (sig_count[sig] >= 3) {
        /* The remote side ignores it: stop waiting, like a third Ctrl-C on ssh. */
        tty_restore();
        ec_process_terminate(pm->p, NULL, NULL);
        fprintf(stderr, "\r\nexec-client: terminated the remote process after %s x3\r\n",
                signal_name(sig));
        return 128 + sig;
    }
    if (sig != SIGINT && !pm->dying_sig) {
        /* The client is asked to go away: the remote command gets the same signal
         * and a moment to act on it, then it is terminated (see pump_process). */
        pm->dying_sig = sig;
        pm->dying_deadline = now_ms() + GRACE_MS;
    }
    if (ec_process_signal(pm->p, signal_name(sig), &e) == 0) return -1;
    if (e.kind == EC_ERR_USAGE) {
        /* An older server knows only interrupt: end the command instead. */
        ec_process_terminate(pm->p, NULL, NULL);
        return -1;
    }
    return -1; /* the connection trouble shows up in the event loop */
}

static void send_stdin_eof(struct pump *pm)
{
    pm->fwd_stdin = false;
    if (!pm->eof_supported) return;
    ec_error e = {0};
    ec_process_close_stdin(pm->p, &e); /* an exited process needs no EOF */
}

/* ssh's escapes on typed input: after a newline (or at the very start) `~.`
 * disconnects, `~~` sends one `~`, `~?` lists them; a `~` followed by anything else
 * goes through with it. Filters in[0..n) into out; returns out's length. */
static size_t apply_escapes(struct pump *pm, const char *in, size_t n, char *out)
{
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        char ch = in[i];
        if (pm->tilde) {
            pm->tilde = false;
            if (ch == '.') {
                pm->quit = true;
                return k;
            }
            if (ch == '?') {
                fprintf(stderr, "\r\nSupported escape sequences:\r\n"
                                " ~.  - disconnect\r\n ~?  - this message\r\n"
                                " ~~  - send the escape character by typing it twice\r\n"
                                "(Note that escapes are only recognized immediately after "
                                "newline.)\r\n");
                pm->line_start = false;
                continue;
            }
            if (ch != '~') out[k++] = '~';
        } else if (ch == '~' && pm->line_start) {
            pm->tilde = true;
            continue;
        }
        out[k++] = ch;
        pm->line_start = ch == '\r' || ch == '\n';
    }
    return k;
}

/* One read of local stdin, forwarded. */
static void pump_stdin(struct pump *pm)
{
    char raw[65536], buf[65536];
    ssize_t n = read(STDIN_FILENO, raw, sizeof raw);
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) return;
    if (n <= 0) {
        send_stdin_eof(pm);
        return;
    }
    if (pm->escapes) {
        n = (ssize_t)apply_escapes(pm, raw, (size_t)n, buf);
        if (n == 0) return;
    } else {
        memcpy(buf, raw, (size_t)n);
    }
    ec_error e = {0};
    if (ec_process_write(pm->p, buf, (size_t)n, &e) != 0) {
        if (e.kind != EC_ERR_SERVER) {
            tty_restore();
            cli_die_err("write", &e);
        }
        pm->fwd_stdin = false; /* the process no longer takes input */
    }
}

/* ssh's ServerAlive, always on: a server silent for keepalive_ms gets a Ping (a live
 * one answers at once, even while its processes are quiet); silent for 3x that, it is
 * given up on with exit 255, instead of waiting on a server that hangs. Returns -1
 * to go on, or the exit status. */
static int keepalive(struct pump *pm)
{
    int ka = pm->cli->keepalive_ms;
    int idle = ec_client_idle_ms(pm->cli->c);
    if (ka <= 0 || idle < 0) return -1; /* off, or between reconnects */
    int64_t now = now_ms();
    if (pm->ping_at && idle <= now - pm->ping_at) {
        /* Something arrived since the first unanswered Ping (on loopback the Pong
         * can come within the same millisecond). */
        if (pm->warned) fprintf(stderr, "\r\nexec-client: the server answers again\r\n");
        pm->ping_at = 0;
        pm->warned = false;
    }
    if (idle < ka) return -1;
    if (!pm->ping_at || now - pm->last_ping_ms >= ka) {
        if (!pm->ping_at) pm->ping_at = now;
        pm->last_ping_ms = now;
        ec_client_ping(pm->cli->c, NULL);
        return -1;
    }
    int waited = (int)(now - pm->ping_at);
    const char *where = pm->cli->remote ? pm->cli->remote : pm->cli->url;
    if (waited >= ka && !pm->warned && isatty(STDERR_FILENO)) {
        pm->warned = true;
        fprintf(stderr,
                "\r\nexec-client: no answer from %s for %d s; giving up in %d s "
                "(~. disconnects now)\r\n",
                where, (idle + 500) / 1000, (2 * ka - waited + 999) / 1000);
    }
    if (waited < 2 * ka) return -1;
    tty_restore();
    fprintf(stderr,
            "\r\nexec-client: no answer from %s for %d s; giving up "
            "(--keepalive-ms)\n",
            where, (idle + 500) / 1000);
    return EXIT_CONN;
}

/* --keep: say where the command goes on. */
static void detach_hint(struct pump *pm, const char *why)
{
    const char *sid = ec_client_session_id(pm->cli->c);
    fprintf(stderr,
            "\r\nexec-client: detached (%s); `%s` goes on in session %s: exec-client "
            "attach %.8s %s\r\n",
            why, ec_process_id(pm->p), sid, sid, ec_process_id(pm->p));
}

/* ~. without --keep, as sshd hangs up on ~.: SIGHUP to the command's process group
 * (a login shell passes it on to its jobs, as bash does), up to GRACE_MS for it to
 * end, then it is terminated; its output meanwhile is not shown. The caller then
 * ends the session, so nothing waits on the server for a resume. A server without
 * signals by name (the reference) has the command terminated at once. */
static void hang_up(struct pump *pm)
{
    pm->hung_up = true;
    ec_error e = {0};
    if (ec_process_signal(pm->p, "HUP", &e) != 0) {
        ec_process_terminate(pm->p, NULL, NULL);
        return;
    }
    int64_t deadline = now_ms() + GRACE_MS;
    ec_event ev;
    for (int64_t left; (left = deadline - now_ms()) > 0;) {
        int rc = ec_process_next_event(pm->p, (int)left, &ev, &e);
        if (rc == 0 && ev.type == EC_EVENT_CLOSED) return;
        if (rc != 0 && rc != -EC_ERR_TIMEOUT) return; /* the link went: the session ends */
    }
    ec_process_terminate(pm->p, NULL, NULL);
}

/* Drives a started process to its close; returns the CLI's exit status. */
static int pump_process(struct pump *pm)
{
    int exit_code = -1;
    ec_error e = {0};
    for (;;) {
        if (pending_sig) {
            int sig = pending_sig;
            pending_sig = 0;
            if (pm->keep && sig == SIGHUP) {
                tty_restore();
                detach_hint(pm, "SIGHUP");
                return EXIT_CONN; /* the session is not ended: it is kept */
            }
            int rc = forward_signal(pm, sig);
            if (rc >= 0) return rc;
        }
        if (pm->dying_sig && now_ms() >= pm->dying_deadline) {
            tty_restore();
            ec_process_terminate(pm->p, NULL, NULL);
            return 128 + pm->dying_sig;
        }
        if (got_winch) {
            got_winch = 0;
            unsigned short r, c;
            if (pm->resize && window_size(&r, &c)) ec_process_resize(pm->p, r, c, NULL);
        }
        ec_event ev;
        int rc = ec_process_next_event(pm->p, 0, &ev, &e);
        if (rc == -EC_ERR_TIMEOUT) {
            if (pm->in_off < pm->input_len) {
                size_t n = pm->input_len - pm->in_off;
                if (n > STDIN_BLOCK) n = STDIN_BLOCK;
                if (ec_process_write(pm->p, pm->input + pm->in_off, n, &e) != 0)
                    pm->in_off = pm->input_len; /* exited without reading it all */
                else
                    pm->in_off += n;
                continue;
            }
            struct pollfd pfd[2] = {{.fd = ec_client_fd(pm->cli->c), .events = POLLIN},
                                    {.fd = STDIN_FILENO, .events = POLLIN}};
            int ka = pm->cli->keepalive_ms;
            int wait = pm->dying_sig ? 100 : ka > 0 && ka < 2000 ? ka / 2 : 1000;
            int hint = ec_client_wait_hint_ms(pm->cli->c); /* a remote-mode Ping due */
            if (hint >= 0 && hint < wait) wait = hint;
            int pr = poll(pfd, pm->fwd_stdin ? 2 : 1, wait);
            if (pr < 0 && errno != EINTR) break;
            if (pr > 0 && pm->fwd_stdin && (pfd[1].revents & (POLLIN | POLLHUP | POLLERR)))
                pump_stdin(pm);
            if (pm->quit) {
                tty_restore();
                fprintf(stderr, "\r\nexec-client: connection to %s closed (~.)\n",
                        pm->cli->remote ? pm->cli->remote : pm->cli->url);
                if (pm->keep)
                    detach_hint(pm, "~.");
                else
                    hang_up(pm);
                return EXIT_CONN;
            }
            int rc_alive = keepalive(pm);
            if (rc_alive >= 0) return rc_alive;
            if (pr > 0 && (pfd[0].revents & (POLLIN | POLLHUP | POLLERR)))
                ec_client_process_ready(pm->cli->c, NULL);
            else if (pfd[0].fd < 0)
                ec_client_process_ready(pm->cli->c, NULL); /* resumes a dropped link */
            continue;
        }
        if (rc != 0) {
            tty_restore();
            cli_die_err("connection", &e);
        }
        switch (ev.type) {
        case EC_EVENT_OUTPUT:
            cli_write_all(ev.stream == EC_STREAM_STDERR ? STDERR_FILENO : STDOUT_FILENO, ev.data,
                          ev.len);
            break;
        case EC_EVENT_EXITED: exit_code = ev.exit_code; break;
        case EC_EVENT_CLOSED:
            tty_restore();
            if (pm->dying_sig) return 128 + pm->dying_sig; /* as if the signal killed us */
            if (exit_code < 0 || exit_code > 255) return 255;
            return exit_code;
        case EC_EVENT_RESYNC: break;
        }
    }
    tty_restore();
    return EXIT_CONN;
}

/* ---- run / shell ------------------------------------------------------------------ */

static bool stdin_is_devnull(void)
{
    struct stat st, dn;
    return fstat(STDIN_FILENO, &st) == 0 && stat("/dev/null", &dn) == 0 && S_ISCHR(st.st_mode) &&
           st.st_rdev == dn.st_rdev;
}

/* Starts argv (already built) and pumps it; frees nothing of the caller's. */
static int start_and_pump(struct cli *cli, const char **cargv, const char *cwd, struct run_opts *ro,
                          bool fwd_stdin, bool pipe_stdin, const uint8_t *input, size_t input_len)
{
    ec_client *c = cli->c;
    bool resize = ro->tty && ec_client_has_capability(c, "processResize");
    ec_start_options so = {.argv = cargv,
                           .cwd = cwd,
                           .env = ro->env,
                           .tty = ro->tty,
                           .pipe_stdin = pipe_stdin,
                           .env_inherit = "core"};
    if (ro->tty) window_size(&so.rows, &so.cols);
    ec_process *p = NULL;
    ec_error e = {0};
    if (ec_process_start(c, &so, &p, &e) != 0) {
        /* Nothing started, nothing to keep (even with --keep or -d). */
        if (e.kind == EC_ERR_SERVER || e.kind == EC_ERR_USAGE) ec_client_end_session(c, NULL);
        /* Like a shell: 127 when the command cannot be started remotely. The server's
         * errno does not say whether the program or the directory is missing: ask. */
        ec_metadata md;
        ec_error me = {0};
        if (e.kind == EC_ERR_SERVER &&
            (strstr(e.message, "No such file") || strstr(e.message, "Not a directory"))) {
            int gr = ec_fs_get_metadata(c, cwd, &md, &me);
            const char *why = gr != 0 && me.kind == EC_ERR_SERVER ? "No such file or directory"
                              : gr == 0 && !md.is_directory       ? "Not a directory"
                                                                  : NULL;
            if (why) {
                fprintf(stderr, "exec-client: %s %s: %s\n", ro->cwd ? "--cwd" : "remote home", cwd,
                        why);
                return 127;
            }
        }
        fprintf(stderr, "exec-client: cannot start `%s`: %s\n", ro->shown ? ro->shown : cargv[0],
                e.message);
        return e.kind == EC_ERR_SERVER ? 127 : cli_err_exit_code(&e);
    }
    if (ro->detach) {
        /* Like tmux new -d: it runs on, and this prints how to find it. */
        const char *sid = ec_client_session_id(c);
        printf("%s %s\n", sid, ec_process_id(p));
        fflush(stdout);
        if (isatty(STDERR_FILENO))
            fprintf(stderr, "exec-client: started in session %s (exec-client attach %.8s %s)\n",
                    sid, sid, ec_process_id(p));
        ec_process_free(p);
        return 0;
    }
    if (ro->tty && isatty(STDIN_FILENO) && fwd_stdin) tty_raw();
    ec_process_set_merge_output(p, true); /* one write per batch of output, not per chunk */
    struct pump pm = {.cli = cli,
                      .keep = ro->keep,
                      .p = p,
                      .escapes = tio_saved,
                      .line_start = true,
                      .last_ping_ms = now_ms(),
                      .fwd_stdin = fwd_stdin,
                      .eof_supported = ec_client_has_capability(c, "processCloseStdin"),
                      .resize = resize,
                      .input = input,
                      .input_len = input_len};
    if (resize) {
        unsigned short r, cl;
        /* The window may have changed between the start and now. */
        if (window_size(&r, &cl) && (r != so.rows || cl != so.cols))
            ec_process_resize(p, r, cl, NULL);
    }
    int rc = pump_process(&pm);
    ec_process_free(p);
    /* A finished call (or one hung up on by ~.) leaves nothing behind on the server. */
    if (rc != EXIT_CONN || pm.hung_up) ec_client_end_session(c, NULL);
    return rc;
}

/* --keep / -d: the session outlives this client (session/keep, ours). */
static void keep_session(struct cli *cli, const struct run_opts *ro)
{
    if (!ec_client_has_capability(cli->c, "sessionKeep")) {
        fprintf(stderr, "exec-client: the server cannot keep a session after its client leaves "
                        "(no sessionKeep capability)\n");
        exit(EXIT_FAILED);
    }
    json_t *params = json_object();
    if (ro->keep_secs >= 0) json_object_set_new(params, "ttlSeconds", json_integer(ro->keep_secs));
    json_t *res = NULL;
    ec_error e = {0};
    if (ec_client_call(cli->c, "session/keep", params, &res, &e) != 0)
        cli_die_err("session/keep", &e);
    json_t *granted = json_object_get(res, "ttlSeconds");
    if (ro->keep_secs < 0 ? json_is_integer(granted) : json_integer_value(granted) < ro->keep_secs)
        fprintf(stderr, "exec-client: the server keeps this session %lld s at most\n",
                (long long)json_integer_value(granted));
    json_decref(res);
}

static int cmd_run(struct cli *cli, const struct cli_args *a)
{
    struct run_opts ro = {0};
    run_opts_from(a, &ro, true);
    int argc = a->argc, i = 0;
    char **argv = a->argv;
    install_signals();
    cli_connect_or_die(cli, false, true);
    if (ro.keep) keep_session(cli, &ro);
    if (ro.detach) ro.no_stdin = true;
    bool eof_ok = ec_client_has_capability(cli->c, "processCloseStdin");
    env_defaults(&ro, ro.tty, ec_client_has_capability(cli->c, "processResize"));
    /* Like ssh: the remote home unless --cwd says otherwise. */
    char *cwd = cli_remote_path(cli, ro.cwd ? ro.cwd : ".");
    const char **cargv = calloc((size_t)(argc - i) + 5, sizeof *cargv);
    size_t k = 0;
    char script[64];
    uint8_t *input = NULL;
    size_t input_len = 0;
    bool fwd = !ro.no_stdin && !stdin_is_devnull();
    bool pipe_stdin = fwd && !ro.tty;
    if (fwd && !eof_ok && !ro.tty) {
        /* Fallback without closeStdin: a terminal is not forwarded (it could never
         * end); a pipe is read to EOF up to 64 MiB and fed through `head -c N`. */
        bool input_eof = true;
        if (isatty(STDIN_FILENO)) {
            fwd = pipe_stdin = false;
        } else if (cli_slurp_max(STDIN_FILENO, STDIN_BUFFER_MAX, &input, &input_len, &input_eof) !=
                   0) {
            fprintf(stderr, "exec-client: reading stdin: %s\n", strerror(errno));
            free(cargv);
            free(cwd);
            free(ro.env);
            return EXIT_CONN;
        }
        if (input_len > 0 && input_eof) {
            snprintf(script, sizeof script, "head -c %zu | \"$@\"", input_len);
            cargv[k++] = "/bin/sh";
            cargv[k++] = "-c";
            cargv[k++] = script;
            cargv[k++] = "exec-client-stdin";
        }
        fwd = !input_eof; /* a longer stream goes on as it comes, without an EOF */
        pipe_stdin = input_len > 0 || fwd;
    }
    if (!ro.dashdash && argc - i == 1) {
        cargv[k++] = remote_shell(cli);
        cargv[k++] = "-c";
        ro.shown = argv[i];
    }
    for (int j = i; j < argc; j++)
        cargv[k++] = argv[j];
    int rc = start_and_pump(cli, cargv, cwd, &ro, fwd, pipe_stdin, input, input_len);
    free(input);
    free(cargv);
    free(cwd);
    free(ro.env);
    return rc;
}

static int cmd_shell(struct cli *cli, const struct cli_args *a)
{
    struct run_opts ro = {0};
    run_opts_from(a, &ro, false);
    install_signals();
    cli_connect_or_die(cli, false, true);
    if (ro.keep) keep_session(cli, &ro);
    bool eof_ok = ec_client_has_capability(cli->c, "processCloseStdin");
    /* Like ssh: a terminal gets a remote PTY; piped input (or /dev/null) is run by a
     * login shell on pipes and ends it at EOF. (The terminal's EOF character would be
     * lost if it reached the PTY before the shell switched its line editor on.) */
    ro.tty = isatty(STDIN_FILENO) || !eof_ok;
    env_defaults(&ro, ro.tty, ec_client_has_capability(cli->c, "processResize"));
    const char *sh = remote_shell(cli);
    /* Like a login: the remote home unless --cwd says otherwise. */
    char *cwd = cli_remote_path(cli, ro.cwd ? ro.cwd : ".");
    /* Like sshd: USER and LOGNAME from the password database (the server's own
     * environment may have neither, e.g. under systemd), then the login shell. */
    const char *cargv[] = {"/bin/sh", "-c",
                           "if u=$(id -un 2>/dev/null); then USER=$u LOGNAME=$u; "
                           "export USER LOGNAME; fi; exec \"$0\" -l",
                           sh, NULL};
    ro.shown = sh;
    bool fwd = !stdin_is_devnull() || eof_ok;
    int rc = start_and_pump(cli, cargv, cwd, &ro, fwd, !ro.tty, NULL, 0);
    free(cwd);
    free(ro.env);
    return rc;
}

const struct cli_cmd_entry cli_run_entry = {
    .name = "run",
    .usage = "run [--tty] [-n] [-d|--keep[=SECS]] [--cwd DIR] [--env K=V]... 'SHELL CMD'\n"
             "run [options] -- CMD [ARGS...]",
    .summary = "run a command remotely: one argument is a command line for the remote "
               "user's shell (like ssh); several, or any after --, are run as given (no shell). "
               "stdout/stderr stream back, the exit status is the remote one (128+N for "
               "signal N). stdin is sent to CMD as it comes and its end is passed on (-n: "
               "send none); Ctrl-C, SIGTERM and SIGHUP are forwarded; --tty: a remote PTY "
               "sized like this window, resized with it; --keep: the command outlives this "
               "client (its session is kept for SECONDS, default until ended; a lost "
               "terminal (SIGHUP) or ~. detaches); -d: start it kept and return at once, "
               "printing SESSION PROCESS",
    .text = "Runs a command remotely, like ssh HOST CMD: one argument is a command line for "
            "the\nremote user's shell; several, or any after --, are run as given. stdout, "
            "stderr and\nthe exit status are the remote command's; stdin is sent as it comes "
            "(-n: none).\n--tty: a remote PTY sized like this window; --keep: the command "
            "outlives this\nclient; -d: start it kept and return at once, printing SESSION "
            "PROCESS.\n",
    .flags = "+tdnC:e:",
    .longs = run_longs,
    .lower = 1,
    .upper = -1,
    .too_few = "run: missing command (exec-client run [options] 'SHELL COMMAND' or "
               "exec-client run [options] -- CMD ARGS...)",
    .exec = cmd_run,
};

const struct cli_cmd_entry cli_shell_entry = {
    .name = "shell",
    .usage = "shell [--keep[=SECS]] [--cwd DIR] [--env K=V]...",
    .summary = "login shell on a remote PTY in the remote home (Ctrl-C goes to the remote "
               "side; end of input ends it; ~. or a lost terminal hangs it up and ends its "
               "session, unless --keep)",
    .text = "A login shell on a remote PTY in the remote home, like ssh HOST. When this "
            "client\nleaves (~., a lost terminal), the shell is hung up on as sshd does: "
            "SIGHUP to its\nprocess group (bash passes it to its jobs), and its session "
            "ends with it. With\n--keep[=SECS] the shell runs on in a kept session instead "
            "(exec-client attach).\n",
    .flags = "+tdnC:e:",
    .longs = run_longs,
    .upper = 0,
    .too_many = "shell: unexpected argument `%s`",
    .exec = cmd_shell,
};
