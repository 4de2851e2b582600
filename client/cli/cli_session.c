/* cli_session: work that outlives its client, seen from the command line: `sessions`
 * and `ps` list what a server keeps for this user (session/list, process/list), and
 * `attach` steps into a running process like `tmux attach` (our server's extensions,
 * docs/PROTOCOL.md §11 (i); `run -d` / `run --keep` in cli_run.c start such work).
 *
 * A SESSION argument may be any unique prefix of a session id (ps shows 8
 * characters). `attach` first looks with a connection of its own (whose session ends
 * with it); a detached target is then resumed, so this client holds it as its owner
 * (the session stops counting down) and leaving lets it count down again from its
 * keep time; a target that another client holds is watched as a second viewer
 * instead (process/attach): both see the same output and both may type. Either way
 * the output the server still retains comes first, then the live output with no gap.
 * The local terminal is raw; its size follows (process/resize); the detach key, ^B
 * then d by default as in tmux, leaves the process running; ^B ^B sends one ^B. The
 * exit status is the process's when it ends while attached, 0 after a detach. */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"

/* ---- listing ------------------------------------------------------------------------ */

static json_t *call_or_die(struct cli *cli, const char *method, json_t *params)
{
    json_t *res = NULL;
    ec_error e = {0};
    if (ec_client_call(cli->c, method, params, &res, &e) != 0) cli_die_err(method, &e);
    return res;
}

static void need_cap(struct cli *cli, const char *cap, const char *what)
{
    if (ec_client_has_capability(cli->c, cap)) return;
    fprintf(stderr,
            "exec-client: the server cannot %s (no %s capability; an older or "
            "another server)\n",
            what, cap);
    exit(EXIT_FAILED);
}

/* The sessions this user may see, except the one this command opened. New ref. */
static json_t *other_sessions(struct cli *cli)
{
    need_cap(cli, "sessionList", "list sessions");
    json_t *res = call_or_die(cli, "session/list", json_object());
    json_t *out = json_array();
    size_t i;
    json_t *s;
    json_array_foreach(json_object_get(res, "sessions"), i,
                       s) if (!json_is_true(json_object_get(s, "current")))
        json_array_append(out, s);
    json_decref(res);
    return out;
}

static const char *sid_of(json_t *s)
{
    return json_string_value(json_object_get(s, "sessionId"));
}

/* The one session whose id starts with `prefix` (borrowed from list), or exit. */
static json_t *resolve_session(json_t *list, const char *prefix)
{
    json_t *hit = NULL;
    size_t i, n = 0;
    json_t *s;
    json_array_foreach(list, i, s)
    {
        const char *id = sid_of(s);
        if (id && strncmp(id, prefix, strlen(prefix)) == 0) {
            hit = s;
            n++;
            if (strcmp(id, prefix) == 0) return s; /* exact */
        }
    }
    if (n == 1) return hit;
    fprintf(stderr, "exec-client: %s session matches `%s` (see exec-client sessions)\n",
            n ? "more than one" : "no", prefix);
    exit(EXIT_FAILED);
}

static int64_t wall_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* "45s", "12m", "3h", "2d" for a span in ms. */
static const char *span(int64_t ms, char *buf, size_t n)
{
    int64_t s = ms < 0 ? 0 : ms / 1000;
    if (s < 120)
        snprintf(buf, n, "%llds", (long long)s);
    else if (s < 7200)
        snprintf(buf, n, "%lldm", (long long)(s / 60));
    else if (s < 172800)
        snprintf(buf, n, "%lldh", (long long)(s / 3600));
    else
        snprintf(buf, n, "%lldd", (long long)(s / 86400));
    return buf;
}

static json_t *processes_of(struct cli *cli, const char *sid)
{
    need_cap(cli, "processList", "list processes");
    json_t *res = call_or_die(cli, "process/list", json_pack("{s:s}", "sessionId", sid));
    json_t *list = json_incref(json_object_get(res, "processes"));
    json_decref(res);
    return list ? list : json_array();
}

static void print_command(json_t *argv)
{
    size_t i;
    json_t *a;
    json_array_foreach(argv, i, a) printf("%s%s", i ? " " : "", json_string_value(a));
}

/* The exit statuses of a session's processes when every one has exited ("3",
 * "0,1"), else "" (buf). */
static const char *exit_statuses(struct cli *cli, json_t *s, char *buf, size_t n)
{
    buf[0] = 0;
    json_int_t procs = json_integer_value(json_object_get(s, "processes"));
    if (procs <= 0 || json_integer_value(json_object_get(s, "running")) != 0) return buf;
    json_t *list = processes_of(cli, sid_of(s));
    size_t i, o = 0;
    json_t *p;
    json_array_foreach(list, i, p)
    {
        json_t *code = json_object_get(p, "exitCode");
        if (o + 24 >= n) break;
        if (json_is_integer(code))
            o += (size_t)snprintf(buf + o, n - o, "%s%lld", o ? "," : "",
                                  (long long)json_integer_value(code));
        else
            o += (size_t)snprintf(buf + o, n - o, "%s?", o ? "," : "");
    }
    json_decref(list);
    return buf;
}

/* One row of `sessions`: a session whose processes have all exited says so, with
 * their statuses, instead of looking like work still kept "forever". */
static void print_session_row(struct cli *cli, json_t *s, int64_t now)
{
    bool attached = json_is_true(json_object_get(s, "attached"));
    char keep[24] = "-", exp[24] = "-", procs[24], codes[64];
    if (json_is_true(json_object_get(s, "kept"))) {
        json_t *ks = json_object_get(s, "keepSeconds");
        if (json_is_integer(ks))
            span(json_integer_value(ks) * 1000, keep, sizeof keep);
        else
            snprintf(keep, sizeof keep, "forever");
    }
    json_t *ex = json_object_get(s, "expiresAtMs");
    if (json_is_integer(ex))
        span(json_integer_value(ex) - now, exp, sizeof exp);
    else if (!attached)
        snprintf(exp, sizeof exp, "never");
    snprintf(procs, sizeof procs, "%lld/%lld",
             (long long)json_integer_value(json_object_get(s, "running")),
             (long long)json_integer_value(json_object_get(s, "processes")));
    const char *client = json_string_value(json_object_get(s, "clientName"));
    exit_statuses(cli, s, codes, sizeof codes);
    const char *state = codes[0] ? "exited" : attached ? "attached" : "detached";
    printf("%-36s  %-8s  %-14.14s  %-9s  %-8s  %-7s  %s\n", sid_of(s), state, client ? client : "?",
           procs, keep, exp, codes[0] ? codes : "-");
}

/* --json: the server's objects as they are (sessions gain "exited": every process
 * has ended). */
static void print_json(json_t *v)
{
    char *text = json_dumps(v, JSON_INDENT(2));
    if (text) puts(text);
    free(text);
}

static int cmd_sessions(struct cli *cli, const struct cli_args *a)
{
    const char *end = cli_args_get(a, 'e');
    cli->json = cli_args_has(a, 'j');
    cli_connect_or_die(cli, false, false);
    ec_client_end_session(cli->c, NULL); /* this look leaves nothing behind */
    json_t *list = other_sessions(cli);
    if (end) {
        /* Ending a session: resume it, say we are done, leave. */
        char *id = strdup(sid_of(resolve_session(list, end)));
        json_decref(list);
        ec_client_close(cli->c);
        cli->c = NULL;
        cli->resume_session = id;
        cli_connect_or_die(cli, false, false);
        ec_error e = {0};
        if (ec_client_end_session(cli->c, &e) != 0) cli_die_err("session/close", &e);
        fprintf(stderr, "exec-client: session %s ended (its processes are killed)\n", id);
        cli->resume_session = NULL;
        free(id);
        return 0;
    }
    size_t i;
    json_t *s;
    if (cli->json) {
        json_array_foreach(list, i, s)
        {
            char codes[64];
            exit_statuses(cli, s, codes, sizeof codes);
            json_object_set_new(s, "exited", json_boolean(codes[0] != 0));
        }
        print_json(list);
        json_decref(list);
        return 0;
    }
    printf("%-36s  %-8s  %-14s  %-9s  %-8s  %-7s  %s\n", "SESSION", "STATE", "CLIENT", "RUNNING",
           "KEEP", "EXPIRES", "EXIT");
    int64_t now = wall_ms();
    json_array_foreach(list, i, s) print_session_row(cli, s, now);
    json_decref(list);
    return 0;
}

static int cmd_ps(struct cli *cli, const struct cli_args *a)
{
    const char *want = a->argc ? a->argv[0] : NULL;
    cli->json = cli_args_has(a, 'j');
    cli_connect_or_die(cli, false, false);
    ec_client_end_session(cli->c, NULL);
    json_t *list = other_sessions(cli);
    if (want) {
        json_t *one = json_incref(resolve_session(list, want));
        json_decref(list);
        list = json_array();
        json_array_append_new(list, one);
    }
    size_t i;
    json_t *s;
    if (cli->json) { /* each process object with its "sessionId" */
        json_t *all = json_array();
        json_array_foreach(list, i, s)
        {
            json_t *procs = processes_of(cli, sid_of(s));
            size_t j;
            json_t *p;
            json_array_foreach(procs, j, p)
            {
                json_object_set_new(p, "sessionId", json_string(sid_of(s)));
                json_array_append(all, p);
            }
            json_decref(procs);
        }
        print_json(all);
        json_decref(all);
        json_decref(list);
        return 0;
    }
    printf("%-8s  %-12s  %7s  %-7s  %-3s  %5s  %4s  %s\n", "SESSION", "PROCESS", "PID", "STATE",
           "TTY", "AGE", "EXIT", "COMMAND");
    int64_t now = wall_ms();
    json_array_foreach(list, i, s)
    {
        json_t *procs = processes_of(cli, sid_of(s));
        size_t j;
        json_t *p;
        json_array_foreach(procs, j, p)
        {
            char age[24], ex[16] = "-";
            json_t *code = json_object_get(p, "exitCode");
            if (json_is_integer(code))
                snprintf(ex, sizeof ex, "%lld", (long long)json_integer_value(code));
            printf(
                "%-8.8s  %-12.12s  %7lld  %-7s  %-3s  %5s  %4s  ", sid_of(s),
                json_string_value(json_object_get(p, "processId")),
                (long long)json_integer_value(json_object_get(p, "pid")),
                json_string_value(json_object_get(p, "state")),
                json_is_true(json_object_get(p, "tty")) ? "yes" : "no",
                span(now - json_integer_value(json_object_get(p, "startedAtMs")), age, sizeof age),
                ex);
            print_command(json_object_get(p, "argv"));
            putchar('\n');
        }
        json_decref(procs);
    }
    json_decref(list);
    return 0;
}

/* ---- attach ------------------------------------------------------------------------- */

static struct termios saved;
static bool raw_on;
static volatile sig_atomic_t got_winch, got_stop;

static void restore_tty(void)
{
    if (raw_on) tcsetattr(STDIN_FILENO, TCSAFLUSH, &saved);
    raw_on = false;
}

static void on_sig(int sig)
{
    if (sig == SIGWINCH)
        got_winch = 1;
    else
        got_stop = sig;
}

static void sync_size(ec_process *p, bool can)
{
    struct winsize ws;
    if (!can || ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) != 0 || !ws.ws_row || !ws.ws_col) return;
    ec_process_resize(p, ws.ws_row, ws.ws_col, NULL);
}

/* "^B", "C-b" or a single character: the detach key's byte. */
static int parse_key(const char *k)
{
    if ((k[0] == '^' && k[1] && !k[2]) || (strncasecmp(k, "C-", 2) == 0 && k[2] && !k[3])) {
        char ch = k[0] == '^' ? k[1] : k[2];
        if (ch >= 'a' && ch <= 'z') ch = (char)(ch - 'a' + 'A');
        if (ch >= '@' && ch <= '_') return ch - '@';
    }
    return -1;
}

/* The process to attach to in a session: `want`, else the only one running, else
 * the newest one (to see how it ended). Caller frees. */
static char *pick_process(struct cli *cli, const char *sid, const char *want)
{
    json_t *procs = processes_of(cli, sid);
    const char *hit = NULL;
    size_t running = 0, i;
    int64_t newest = -1;
    json_t *p;
    json_array_foreach(procs, i, p)
    {
        const char *id = json_string_value(json_object_get(p, "processId"));
        if (want) {
            if (strcmp(id, want) == 0) hit = id;
            continue;
        }
        if (strcmp(json_string_value(json_object_get(p, "state")), "running") == 0) running++;
    }
    if (!want) {
        json_array_foreach(procs, i, p)
        {
            bool run = strcmp(json_string_value(json_object_get(p, "state")), "running") == 0;
            int64_t t = json_integer_value(json_object_get(p, "startedAtMs"));
            if ((running == 0 || run) && t > newest) {
                newest = t;
                hit = json_string_value(json_object_get(p, "processId"));
            }
        }
    }
    if (!hit || (!want && running > 1)) {
        if (want)
            fprintf(stderr, "exec-client: session %.8s has no process `%s`\n", sid, want);
        else if (running > 1)
            fprintf(stderr,
                    "exec-client: session %.8s runs %zu processes; name one (exec-client "
                    "ps %.8s)\n",
                    sid, running, sid);
        else
            fprintf(stderr, "exec-client: session %.8s has no process\n", sid);
        exit(EXIT_FAILED);
    }
    char *out = strdup(hit);
    json_decref(procs);
    return out;
}

struct attach_state {
    struct cli *cli;
    ec_process *p;
    int key;     /* the detach key's byte */
    bool prefix; /* the key came; the next byte decides */
    bool fwd_stdin;
    bool detached;
};

/* Typed bytes, with the detach key taken out: key then d detaches, key twice sends
 * one, key then ? lists the bindings; key then anything else sends both. */
static void typed(struct attach_state *st, const char *in, size_t n)
{
    char out[8192];
    size_t k = 0;
    for (size_t i = 0; i < n && !st->detached; i++) {
        char ch = in[i];
        if (st->prefix) {
            st->prefix = false;
            if (ch == 'd') {
                st->detached = true;
                break;
            }
            if (ch == '?') {
                fprintf(stderr, "\r\n[exec-client attach: ^%c d detach, ^%c ^%c send ^%c]\r\n",
                        st->key + '@', st->key + '@', st->key + '@', st->key + '@');
                continue;
            }
            out[k++] = (char)st->key;
            if (ch == (char)st->key) continue;
        } else if (ch == (char)st->key) {
            st->prefix = true;
            continue;
        }
        out[k++] = ch;
        if (k >= sizeof out - 2) {
            if (ec_process_write(st->p, out, k, NULL) != 0) st->fwd_stdin = false;
            k = 0;
        }
    }
    if (k && ec_process_write(st->p, out, k, NULL) != 0) st->fwd_stdin = false;
}

static int attach_loop(struct attach_state *st, const char *sid)
{
    int code = -1;
    ec_error e = {0};
    /* A pipe process has no window: the server says so and nothing changes. */
    bool resize = ec_client_has_capability(st->cli->c, "processResize");
    sync_size(st->p, resize);
    ec_process_set_merge_output(st->p, true); /* one write per batch of output */
    for (;;) {
        if (got_stop) {
            st->detached = true; /* SIGTERM/SIGHUP: leave it running */
            got_stop = 0;
        }
        if (st->detached) {
            restore_tty();
            fprintf(stderr, "\r\n[detached from session %.8s process %s]\r\n", sid,
                    ec_process_id(st->p));
            return 0;
        }
        if (got_winch) {
            got_winch = 0;
            sync_size(st->p, resize);
        }
        ec_event ev;
        int rc = ec_process_next_event(st->p, 0, &ev, &e);
        if (rc == 0) {
            if (ev.type == EC_EVENT_OUTPUT)
                cli_write_all(ev.stream == EC_STREAM_STDERR ? STDERR_FILENO : STDOUT_FILENO,
                              ev.data, ev.len);
            else if (ev.type == EC_EVENT_EXITED)
                code = ev.exit_code;
            else if (ev.type == EC_EVENT_CLOSED) {
                restore_tty();
                fprintf(stderr, "\r\n[process %s exited with status %d]\r\n", ec_process_id(st->p),
                        code);
                return code < 0 || code > 255 ? 255 : code;
            }
            continue;
        }
        if (rc != -EC_ERR_TIMEOUT) {
            restore_tty();
            fprintf(stderr, "\r\nexec-client: attach: %s\r\n", e.message);
            return e.kind == EC_ERR_SESSION_LOST ? EXIT_FAILED : EXIT_CONN;
        }
        struct pollfd pfd[2] = {{.fd = ec_client_fd(st->cli->c), .events = POLLIN},
                                {.fd = st->fwd_stdin ? STDIN_FILENO : -1, .events = POLLIN}};
        int pr = poll(pfd, 2, 1000);
        if (pr < 0 && errno != EINTR) break;
        if (pr > 0 && (pfd[1].revents & (POLLIN | POLLHUP | POLLERR))) {
            char buf[4096];
            ssize_t n = read(STDIN_FILENO, buf, sizeof buf);
            if (n > 0)
                typed(st, buf, (size_t)n);
            else if (n == 0 || (errno != EINTR && errno != EAGAIN))
                st->fwd_stdin = false;
        }
        if (pfd[0].fd < 0 || (pr > 0 && pfd[0].revents)) ec_client_process_ready(st->cli->c, NULL);
    }
    restore_tty();
    return EXIT_CONN;
}

static int cmd_attach(struct cli *cli, const struct cli_args *a)
{
    const char *key_arg = cli_args_has(a, 'k') ? cli_args_get(a, 'k') : "^B";
    const char *want_sid = a->argc > 0 ? a->argv[0] : NULL;
    const char *want_proc = a->argc > 1 ? a->argv[1] : NULL;
    int key = parse_key(key_arg);
    if (key < 0)
        cli_die_usage("attach: --detach-key wants a control key such as ^B or C-a, not `%s`",
                      key_arg);
    cli_connect_or_die(cli, false, false);
    ec_client_end_session(cli->c, NULL); /* the look-up session ends with its connection */
    json_t *list = other_sessions(cli);
    json_t *target = NULL;
    if (want_sid) {
        target = resolve_session(list, want_sid);
    } else {
        size_t i, n = 0;
        json_t *s;
        json_array_foreach(list, i, s) if (json_integer_value(json_object_get(s, "running")) > 0)
        {
            target = s;
            n++;
        }
        if (n != 1) {
            fprintf(stderr, "exec-client: %s; name the session (exec-client sessions)\n",
                    n ? "several sessions run processes" : "no session runs a process");
            return EXIT_FAILED;
        }
    }
    char *sid = strdup(sid_of(target));
    bool detached = !json_is_true(json_object_get(target, "attached"));
    json_decref(list);
    char *pid = pick_process(cli, sid, want_proc);
    ec_process *p = NULL;
    ec_error e = {0};
    if (detached) {
        /* Resume it: this client becomes its owner (re-attaching is the resume). */
        ec_client_close(cli->c);
        cli->c = NULL;
        cli->resume_session = sid;
        cli->resume_quiet = true;
        cli_connect_or_die(cli, false, true);
        if (!cli->c) { /* someone else took it meanwhile: watch it instead */
            cli->resume_session = NULL;
            cli_connect_or_die(cli, false, false);
            ec_client_end_session(cli->c, NULL);
            detached = false;
        }
    }
    if (ec_process_attach(cli->c, detached ? NULL : sid, pid, &p, &e) != 0)
        cli_die_err("attach", &e);
    bool tty = isatty(STDIN_FILENO);
    struct sigaction sa = {.sa_handler = on_sig};
    sigemptyset(&sa.sa_mask);
    sigaction(SIGWINCH, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);
    if (tty && tcgetattr(STDIN_FILENO, &saved) == 0) {
        struct termios r = saved;
        cfmakeraw(&r);
        raw_on = tcsetattr(STDIN_FILENO, TCSAFLUSH, &r) == 0;
        atexit(restore_tty);
    }
    fprintf(stderr, "[attached to session %.8s process %s%s; detach with ^%c d]\r\n", sid, pid,
            detached ? "" : " as a second viewer", key + '@');
    struct attach_state st = {.cli = cli, .p = p, .key = key, .fwd_stdin = true};
    int rc = attach_loop(&st, sid);
    ec_process_free(p);
    cli->resume_session = NULL;
    free(pid);
    free(sid);
    return rc;
}

/* sessions, ps and attach take their options anywhere among their operands. */
static const struct option json_longs[] = {{"json", no_argument, 0, 'j'}, {0, 0, 0, 0}};

static const struct option sessions_longs[] = {
    {"json", no_argument, 0, 'j'}, {"end", required_argument, 0, 'e'}, {0, 0, 0, 0}};

const struct cli_cmd_entry cli_sessions_entry = {
    .name = "sessions",
    .usage = "sessions [--json] [--end SESSION]",
    .summary = "the sessions the server keeps for you (exited: every process has ended; "
               "--end: end one, killing its processes)",
    .text = "The sessions the server keeps for you; STATE is attached, detached or exited "
            "(every\nprocess has ended; EXIT then shows the status). --end ends one, killing "
            "its\nprocesses; --json prints the server's objects.\n",
    .flags = "",
    .longs = sessions_longs,
    .upper = 0,
    .bad_option = "sessions: unexpected argument `%s` (sessions [--json] [--end SESSION])",
    .exec = cmd_sessions,
};

const struct cli_cmd_entry cli_ps_entry = {
    .name = "ps",
    .usage = "ps [--json] [SESSION]",
    .summary = "their processes (SESSION: any unique prefix of its id)",
    .text = "The processes of your sessions (SESSION: a unique prefix of its id).\n",
    .flags = "",
    .longs = json_longs,
    .upper = 1,
    .bad_option = "ps: unexpected argument `%s` (ps [--json] [SESSION])",
    .exec = cmd_ps,
};

static const struct option attach_longs[] = {{"detach-key", required_argument, 0, 'k'},
                                             {0, 0, 0, 0}};

const struct cli_cmd_entry cli_attach_entry = {
    .name = "attach",
    .usage = "attach [--detach-key ^B] [SESSION [PROCESS]]",
    .summary = "step into a running process like tmux attach: its retained output, then "
               "live; raw terminal, resized with this one; ^B d detaches and leaves it "
               "running. A session another client holds is watched as a second viewer",
    .text = "Steps into a running process like tmux attach (^B d detaches).\n",
    .flags = "",
    .longs = attach_longs,
    .upper = 2,
    .bad_option = "attach: unknown option `%s`",
    .too_many = "attach: unexpected argument `%s` (attach [SESSION [PROCESS]])",
    .exec = cmd_attach,
};
