/* exec-client: the command-line client of exec-server, built on libexecclient.
 *
 *   exec-client [--url URL] run [--tty] [--cwd DIR] [--env K=V]... -- CMD ARGS...
 *   exec-client [--url URL] shell
 *   exec-client [--url URL] fs cat|put|ls|stat|rm|cp|mkdir|walk ...
 *   exec-client [--url URL] rpc [--raw]
 *
 * `run` behaves like `ssh host cmd`: remote stdout/stderr to local stdout/stderr, exit
 * with the remote status (128+N for signal N). The protocol has no way to close a
 * process's stdin, so when local stdin is not a terminal it is read to EOF first (up to
 * 64 MiB) and the command is run as `sh -c 'head -c N | "$@"'`, which gives it exactly
 * those bytes and then EOF; a longer or endless stream is forwarded as it comes, without
 * an EOF at the end (-n skips stdin altogether). Exit codes of the client itself: 2 for usage
 * errors, 1 for a server-side error in fs/rpc, 255 when the server cannot be reached or
 * the connection is lost (also for `run`, like ssh). */
#include "execclient.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
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

#define EXIT_USAGE 2
#define EXIT_REMOTE 1
#define EXIT_CONN 255
#define BIG_FILE (4u << 20)
#define BLOCK (1u << 20)
#define STDIN_BLOCK (256u << 10)
#define STDIN_BUFFER_MAX (64u << 20) /* piped stdin up to this size gets an exact EOF */

static const char *usage_text =
    "usage: exec-client [--url URL] [--token TOKEN] [--timeout-ms N] [--reconnect-ms N]\n"
    "                   COMMAND ...\n"
    "\n"
    "Commands:\n"
    "  run [--tty] [-n] [--cwd DIR] [--env K=V]... -- CMD [ARGS...]\n"
    "        run CMD remotely; stdout/stderr stream back, the exit status is the remote\n"
    "        one (128+N for signal N). Non-tty stdin is sent to CMD (-n: send none).\n"
    "  shell [--cwd DIR] [--env K=V]...\n"
    "        interactive shell on a remote PTY (Ctrl-C goes to the remote side)\n"
    "  fs cat PATH            print a remote file\n"
    "  fs put LOCAL|- PATH    upload a local file (or stdin)\n"
    "  fs ls PATH             list a directory (directories end in /)\n"
    "  fs stat PATH           show metadata\n"
    "  fs rm [-r] [-f] PATH   remove (-r: recursive, -f: no error if missing)\n"
    "  fs cp [-r] SRC DST     copy on the remote side\n"
    "  fs mkdir [-p] PATH     create a directory (-p: with parents)\n"
    "  fs walk [--max-depth N] PATH   list a tree breadth-first\n"
    "  rpc [--raw]            send JSON-RPC lines from stdin, print every message back\n"
    "                         (--raw: skip the initialize handshake)\n"
    "\n"
    "Options:\n"
    "  --url URL        server URL, ws://HOST:PORT (default: $EXEC_SERVER_URL)\n"
    "  --token TOKEN    send Authorization: Bearer TOKEN (default: $EXEC_SERVER_TOKEN)\n"
    "  --timeout-ms N   connect/call timeout (default 10000 / 60000)\n"
    "  --reconnect-ms N run/shell: resume the session for up to N ms when the\n"
    "                   connection drops (default 30000; 0: never)\n"
    "  -h, --help       this text\n"
    "Remote relative paths are taken relative to the server's working directory.\n"
    "Exit status: 2 usage error, 1 remote error (fs, rpc), 255 server unreachable or\n"
    "connection lost; run/shell otherwise exit with the remote command's status.\n";

struct cli {
    const char *url;
    const char *token;
    int timeout_ms;
    int reconnect_ms;
    ec_client *c;
};

static void die_usage(const char *fmt, const char *arg)
{
    fprintf(stderr, "exec-client: ");
    fprintf(stderr, fmt, arg);
    fprintf(stderr, "\n(see exec-client --help)\n");
    exit(EXIT_USAGE);
}

static int err_exit_code(const ec_error *e)
{
    switch (e->kind) {
    case EC_ERR_USAGE:
        return EXIT_USAGE;
    case EC_ERR_SERVER:
        return EXIT_REMOTE;
    default:
        return EXIT_CONN;
    }
}

static void die_err(const char *what, const ec_error *e)
{
    if (e->kind == EC_ERR_SERVER)
        fprintf(stderr, "exec-client: %s: %s (code %lld)\n", what, e->message, (long long)e->code);
    else
        fprintf(stderr, "exec-client: %s: %s\n", what, e->message);
    exit(err_exit_code(e));
}

/* resume: run/shell survive a dropped connection by resuming the session. */
static void connect_or_die(struct cli *cli, bool raw, bool resume)
{
    ec_client_options o = {
        .url = cli->url,
        .bearer_token = cli->token,
        .client_name = "exec-client",
        .connect_timeout_ms = cli->timeout_ms > 0 ? cli->timeout_ms : 10000,
        .call_timeout_ms = cli->timeout_ms > 0 ? cli->timeout_ms : 60000,
        .reconnect_timeout_ms = resume ? cli->reconnect_ms : 0,
        .skip_initialize = raw,
    };
    ec_error e = {0};
    if (ec_client_connect(&o, &cli->c, &e) != 0) {
        if (e.kind == EC_ERR_USAGE) {
            fprintf(stderr, "exec-client: %s\n", e.message);
            exit(EXIT_USAGE);
        }
        fprintf(stderr, "exec-client: cannot reach server at %s: %s\n",
                cli->url ? cli->url : "(none)", e.message);
        exit(EXIT_CONN);
    }
}

/* The remote cwd from environmentInfo, as a native path (static storage), or "/". */
static const char *remote_cwd(struct cli *cli)
{
    static char *cached;
    if (cached) return cached;
    json_t *info = ec_client_environment_info(cli->c);
    const char *uri = json_string_value(json_object_get(info, "cwd"));
    cached = uri ? ec_uri_to_path(uri) : NULL;
    if (!cached) cached = strdup("/");
    return cached;
}

/* Remote path for a user argument (caller frees). */
static char *remote_path(struct cli *cli, const char *arg)
{
    if (arg[0] == '/') return strdup(arg);
    const char *cwd = remote_cwd(cli);
    size_t n = strlen(cwd) + strlen(arg) + 2;
    char *p = malloc(n);
    snprintf(p, n, "%s%s%s", cwd, cwd[strlen(cwd) - 1] == '/' ? "" : "/", arg);
    return p;
}

static int write_all(int fd, const void *p, size_t n)
{
    const char *s = p;
    while (n > 0) {
        ssize_t w = write(fd, s, n);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return -1;
        s += w;
        n -= (size_t)w;
    }
    return 0;
}

/* Reads all of fd into memory (caller frees). */
/* Reads fd until EOF or `max` bytes (caller frees *out); *eof tells which. */
static int slurp_max(int fd, size_t max, uint8_t **out, size_t *len, bool *eof)
{
    size_t cap = 65536, n = 0;
    uint8_t *buf = malloc(cap);
    *eof = false;
    while (n < max) {
        if (n == cap) {
            cap = cap * 2 < max ? cap * 2 : max;
            buf = realloc(buf, cap);
        }
        ssize_t r = read(fd, buf + n, cap - n);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) {
            free(buf);
            return -1;
        }
        if (r == 0) {
            *eof = true;
            break;
        }
        n += (size_t)r;
    }
    *out = buf;
    *len = n;
    return 0;
}

static int slurp(int fd, uint8_t **out, size_t *len)
{
    size_t cap = 65536, n = 0;
    uint8_t *buf = malloc(cap);
    for (;;) {
        if (n == cap) {
            cap *= 2;
            buf = realloc(buf, cap);
        }
        ssize_t r = read(fd, buf + n, cap - n);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) {
            free(buf);
            return -1;
        }
        if (r == 0) break;
        n += (size_t)r;
    }
    *out = buf;
    *len = n;
    return 0;
}

/* ---- terminal handling --------------------------------------------------------- */

static struct termios saved_tio;
static volatile sig_atomic_t tio_saved;
static volatile sig_atomic_t got_signal;

static void tty_restore(void)
{
    if (tio_saved) {
        tcsetattr(STDIN_FILENO, TCSAFLUSH, &saved_tio);
        tio_saved = 0;
    }
}

static void on_signal(int sig)
{
    /* Restore the terminal at once (tcsetattr is async-signal-safe), then let the main
     * loop notice the flag and leave through its normal exit path. */
    tty_restore();
    got_signal = sig;
}

static void tty_raw(void)
{
    if (tcgetattr(STDIN_FILENO, &saved_tio) != 0) return;
    struct termios raw = saved_tio;
    cfmakeraw(&raw);
    tio_saved = 1;
    atexit(tty_restore);
    struct sigaction sa = {.sa_handler = on_signal};
    sigemptyset(&sa.sa_mask);
    int sigs[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT};
    for (size_t i = 0; i < sizeof sigs / sizeof *sigs; i++)
        sigaction(sigs[i], &sa, NULL);
    tcsetattr(STDIN_FILENO, TCSAFLUSH, &raw);
}

/* ---- run / shell ---------------------------------------------------------------- */

struct run_opts {
    bool tty;
    bool no_stdin;
    const char *cwd;
    const char **env; /* "K=V" */
    size_t nenv;
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

/* The remote environment: --env values, then defaults a login would give. */
static void env_defaults(struct run_opts *ro, bool tty)
{
    if (!env_has(ro, "PATH"))
        env_add(ro, "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin");
    if (tty) {
        static char term[128], lines[32], cols[32];
        const char *t = getenv("TERM");
        snprintf(term, sizeof term, "TERM=%s", t && *t ? t : "xterm");
        if (!env_has(ro, "TERM")) env_add(ro, term);
        /* The protocol cannot resize the PTY: pass the size the shell should assume. */
        struct winsize ws;
        if (ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_row && ws.ws_col) {
            snprintf(lines, sizeof lines, "LINES=%u", ws.ws_row);
            snprintf(cols, sizeof cols, "COLUMNS=%u", ws.ws_col);
            if (!env_has(ro, "LINES")) env_add(ro, lines);
            if (!env_has(ro, "COLUMNS")) env_add(ro, cols);
        }
    }
}

/* Drives a started process to its close: first feeds `input` a block at a time,
 * then (fwd_stdin) forwards whatever local stdin delivers. Returns the exit status for
 * the CLI. */
static int pump_process(struct cli *cli, ec_process *p, bool fwd_stdin, const uint8_t *input,
                        size_t input_len)
{
    int exit_code = -1;
    ec_error e = {0};
    bool stdin_open = fwd_stdin;
    size_t in_off = 0;
    for (;;) {
        if (got_signal) {
            tty_restore();
            bool was = false;
            ec_process_terminate(p, &was, NULL);
            return 128 + got_signal;
        }
        ec_event ev;
        int rc;
        if (in_off < input_len) {
            /* Feed buffered input a block at a time and forward the output that came
             * meanwhile before the next block, so the output queue stays short. */
            rc = ec_process_next_event(p, 0, &ev, &e);
            if (rc == -EC_ERR_TIMEOUT) {
                size_t n = input_len - in_off < STDIN_BLOCK ? input_len - in_off : STDIN_BLOCK;
                if (ec_process_write(p, input + in_off, n, &e) != 0) {
                    in_off = input_len; /* exited without reading it all: its status tells */
                    stdin_open = false;
                } else {
                    in_off += n;
                }
                continue;
            }
        } else if (!stdin_open) {
            rc = ec_process_next_event(p, 1000, &ev, &e);
        } else {
            rc = ec_process_next_event(p, 0, &ev, &e);
            if (rc == -EC_ERR_TIMEOUT) {
                struct pollfd pfd[2] = {{.fd = ec_client_fd(cli->c), .events = POLLIN},
                                        {.fd = STDIN_FILENO, .events = POLLIN}};
                int pr = poll(pfd, 2, 1000);
                if (pr < 0 && errno != EINTR) break;
                if (pr > 0 && (pfd[1].revents & (POLLIN | POLLHUP))) {
                    char buf[65536];
                    ssize_t n = read(STDIN_FILENO, buf, sizeof buf);
                    if (n <= 0) {
                        stdin_open = false;
                    } else if (ec_process_write(p, buf, (size_t)n, &e) != 0) {
                        if (e.kind != EC_ERR_SERVER) {
                            tty_restore();
                            die_err("write", &e);
                        }
                        stdin_open = false; /* the process no longer takes input */
                    }
                }
                if (pr > 0 && (pfd[0].revents & (POLLIN | POLLHUP | POLLERR)))
                    ec_client_process_ready(cli->c, NULL);
                continue;
            }
        }
        if (rc == -EC_ERR_TIMEOUT) continue;
        if (rc != 0) {
            tty_restore();
            die_err("connection", &e);
        }
        switch (ev.type) {
        case EC_EVENT_OUTPUT:
            write_all(ev.stream == EC_STREAM_STDERR ? STDERR_FILENO : STDOUT_FILENO, ev.data,
                      ev.len);
            break;
        case EC_EVENT_EXITED:
            exit_code = ev.exit_code;
            break;
        case EC_EVENT_CLOSED:
            tty_restore();
            if (exit_code < 0 || exit_code > 255) return 255;
            return exit_code;
        case EC_EVENT_RESYNC:
            break;
        }
    }
    tty_restore();
    return EXIT_CONN;
}

static int parse_run_opts(int argc, char **argv, struct run_opts *ro, bool allow_tty)
{
    static const struct option longs[] = {{"tty", no_argument, 0, 't'},
                                          {"cwd", required_argument, 0, 'C'},
                                          {"env", required_argument, 0, 'e'},
                                          {"help", no_argument, 0, 'h'},
                                          {0, 0, 0, 0}};
    optind = 1;
    int ch;
    while ((ch = getopt_long(argc, argv, "+tnC:e:h", longs, NULL)) != -1) {
        switch (ch) {
        case 't':
            if (!allow_tty) die_usage("%s: --tty is implied", argv[0]);
            ro->tty = true;
            break;
        case 'n':
            ro->no_stdin = true;
            break;
        case 'C':
            ro->cwd = optarg;
            break;
        case 'e':
            if (!strchr(optarg, '=') || optarg[0] == '=')
                die_usage("--env expects K=V, got `%s`", optarg);
            env_add(ro, optarg);
            break;
        case 'h':
            fputs(usage_text, stdout);
            exit(0);
        default:
            die_usage("%s: bad option", argv[0]);
        }
    }
    return optind;
}

static int cmd_run(struct cli *cli, int argc, char **argv)
{
    struct run_opts ro = {0};
    int i = parse_run_opts(argc, argv, &ro, true);
    if (i >= argc)
        die_usage("%s", "run: missing command (exec-client run [options] -- CMD ARGS...)");
    bool local_tty = isatty(STDIN_FILENO);
    /* Non-tty stdin is read to EOF up front: the protocol cannot send EOF later. */
    uint8_t *input = NULL;
    size_t input_len = 0;
    bool input_eof = true;
    if (!ro.tty && !local_tty && !ro.no_stdin) {
        struct stat st;
        bool devnull = fstat(STDIN_FILENO, &st) == 0 && S_ISCHR(st.st_mode);
        if (!devnull &&
            slurp_max(STDIN_FILENO, STDIN_BUFFER_MAX, &input, &input_len, &input_eof) != 0) {
            fprintf(stderr, "exec-client: reading stdin: %s\n", strerror(errno));
            return EXIT_CONN;
        }
    }
    /* Input that ended within the buffer gets an exact EOF through `head -c`; a longer
     * (or endless) stream is forwarded as it comes, and the command never sees EOF. */
    bool wrap = input_len > 0 && input_eof;
    bool stream = !input_eof;
    connect_or_die(cli, false, true);
    env_defaults(&ro, ro.tty);
    char *cwd = remote_path(cli, ro.cwd ? ro.cwd : ".");
    const char **cargv = calloc((size_t)(argc - i) + 5, sizeof *cargv);
    size_t k = 0;
    char script[64];
    if (wrap) {
        snprintf(script, sizeof script, "head -c %zu | \"$@\"", input_len);
        cargv[k++] = "/bin/sh";
        cargv[k++] = "-c";
        cargv[k++] = script;
        cargv[k++] = "exec-client-stdin";
    }
    for (int j = i; j < argc; j++)
        cargv[k++] = argv[j];
    ec_start_options so = {.argv = cargv,
                           .cwd = cwd,
                           .env = ro.env,
                           .tty = ro.tty,
                           .pipe_stdin = input_len > 0 || stream};
    ec_process *p = NULL;
    ec_error e = {0};
    int rc;
    if (ec_process_start(cli->c, &so, &p, &e) != 0) {
        /* Like a shell: 127 when the command cannot be started remotely. */
        fprintf(stderr, "exec-client: cannot start `%s`: %s\n", argv[i], e.message);
        rc = e.kind == EC_ERR_SERVER ? 127 : err_exit_code(&e);
        free(input);
        goto out;
    }
    bool interactive = ro.tty && local_tty;
    if (interactive) tty_raw();
    rc = pump_process(cli, p, interactive || stream, input, input_len);
    free(input);
    ec_process_free(p);
out:
    free(cargv);
    free(cwd);
    free(ro.env);
    return rc;
}

static int cmd_shell(struct cli *cli, int argc, char **argv)
{
    struct run_opts ro = {0};
    int i = parse_run_opts(argc, argv, &ro, false);
    if (i < argc) die_usage("shell: unexpected argument `%s`", argv[i]);
    connect_or_die(cli, false, true);
    env_defaults(&ro, true);
    json_t *info = ec_client_environment_info(cli->c);
    const char *sh = json_string_value(json_object_get(json_object_get(info, "shell"), "path"));
    if (!sh) sh = "/bin/sh";
    char *cwd = remote_path(cli, ro.cwd ? ro.cwd : ".");
    const char *cargv[] = {sh, "-i", NULL};
    ec_start_options so = {.argv = cargv, .cwd = cwd, .env = ro.env, .tty = true};
    ec_process *p = NULL;
    ec_error e = {0};
    if (ec_process_start(cli->c, &so, &p, &e) != 0) die_err("start shell", &e);
    if (isatty(STDIN_FILENO)) tty_raw();
    int rc = pump_process(cli, p, true, NULL, 0);
    ec_process_free(p);
    free(cwd);
    free(ro.env);
    return rc;
}

/* ---- fs ------------------------------------------------------------------------ */

struct progress {
    bool on;
    uint64_t total;
    int64_t last_ms;
};

static int64_t mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void progress_init(struct progress *pg, uint64_t total)
{
    pg->on = total >= BIG_FILE && isatty(STDERR_FILENO);
    pg->total = total;
    pg->last_ms = 0;
}

static void progress_show(struct progress *pg, uint64_t done, bool final)
{
    if (!pg->on) return;
    int64_t now = mono_ms();
    if (!final && now - pg->last_ms < 100) return;
    pg->last_ms = now;
    int pct = pg->total ? (int)(done * 100 / pg->total) : 100;
    char bar[31];
    int fill = pct * 30 / 100;
    for (int i = 0; i < 30; i++)
        bar[i] = i < fill ? '#' : '.';
    bar[30] = 0;
    fprintf(stderr, "\r[%s] %3d%% %llu/%llu KiB", bar, pct, (unsigned long long)(done >> 10),
            (unsigned long long)(pg->total >> 10));
    if (final) fputc('\n', stderr);
}

static int fs_cat(struct cli *cli, const char *path)
{
    ec_error e = {0};
    ec_metadata md;
    if (ec_fs_get_metadata(cli->c, path, &md, &e) != 0) die_err(path, &e);
    if (md.is_directory) {
        fprintf(stderr, "exec-client: %s: is a directory\n", path);
        return EXIT_REMOTE;
    }
    if (md.size < BIG_FILE) {
        uint8_t *data;
        size_t n;
        if (ec_fs_read_file(cli->c, path, &data, &n, &e) != 0) die_err(path, &e);
        int rc = write_all(STDOUT_FILENO, data, n);
        free(data);
        return rc ? EXIT_REMOTE : 0;
    }
    /* Large file: 1 MiB blocks through a read handle, with a progress bar. */
    const char *h = "exec-client-cat";
    if (ec_fs_open(cli->c, h, path, false, &e) != 0) die_err(path, &e);
    struct progress pg;
    progress_init(&pg, md.size);
    uint64_t off = 0;
    for (;;) {
        uint8_t *data;
        size_t n;
        bool eof = false;
        if (ec_fs_read_block(cli->c, h, off, BLOCK, &data, &n, &eof, &e) != 0) die_err(path, &e);
        int wr = write_all(STDOUT_FILENO, data, n);
        free(data);
        if (wr) return EXIT_REMOTE;
        off += n;
        progress_show(&pg, off, false);
        if (eof || n == 0) break;
    }
    progress_show(&pg, off, true);
    ec_fs_close(cli->c, h, NULL);
    return 0;
}

/* Reads up to n bytes (less only at EOF). Returns the count or -1. */
static ssize_t read_full(int fd, uint8_t *buf, size_t n)
{
    size_t got = 0;
    while (got < n) {
        ssize_t r = read(fd, buf + got, n - got);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) return -1;
        if (r == 0) break;
        got += (size_t)r;
    }
    return (ssize_t)got;
}

static int fs_put(struct cli *cli, const char *local, const char *path)
{
    int fd = strcmp(local, "-") == 0 ? STDIN_FILENO : open(local, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        fprintf(stderr, "exec-client: %s: %s\n", local, strerror(errno));
        return EXIT_USAGE;
    }
    ec_error e = {0};
    struct stat st;
    bool big_file = fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size >= BIG_FILE;
    if (!big_file || !ec_client_has_capability(cli->c, "fileWriteStreaming")) {
        /* Small, not a regular file, or no write streaming: one fs/writeFile. */
        uint8_t *data;
        size_t n;
        if (slurp(fd, &data, &n) != 0) {
            fprintf(stderr, "exec-client: %s: %s\n", local, strerror(errno));
            return EXIT_USAGE;
        }
        if (fd != STDIN_FILENO) close(fd);
        if (ec_fs_write_file(cli->c, path, data, n, &e) != 0) die_err(path, &e);
        free(data);
        return 0;
    }
    /* A large regular file streams in 1 MiB blocks: memory stays flat. */
    const char *h = "exec-client-put";
    if (ec_fs_open(cli->c, h, path, true, &e) != 0) die_err(path, &e);
    struct progress pg;
    progress_init(&pg, (uint64_t)st.st_size);
    uint8_t *block = malloc(BLOCK);
    uint64_t off = 0;
    for (;;) {
        ssize_t n = read_full(fd, block, BLOCK);
        if (n < 0) {
            fprintf(stderr, "exec-client: %s: %s\n", local, strerror(errno));
            return EXIT_USAGE;
        }
        if (n == 0) break;
        if (ec_fs_write_block(cli->c, h, off, block, (size_t)n, &e) != 0) die_err(path, &e);
        off += (uint64_t)n;
        progress_show(&pg, off, false);
    }
    progress_show(&pg, off, true);
    free(block);
    if (fd != STDIN_FILENO) close(fd);
    if (ec_fs_close(cli->c, h, &e) != 0) die_err(path, &e);
    return 0;
}

static int cmp_dirent(const void *a, const void *b)
{
    return strcmp(((const ec_dirent *)a)->name, ((const ec_dirent *)b)->name);
}

static int cmd_fs(struct cli *cli, int argc, char **argv)
{
    if (argc < 2)
        die_usage("%s", "fs: missing subcommand (cat, put, ls, stat, rm, cp, mkdir, walk)");
    const char *sub = argv[1];
    bool rflag = false, fflag = false, pflag = false;
    unsigned max_depth = 0;
    static const struct option longs[] = {{"max-depth", required_argument, 0, 'd'},
                                          {"recursive", no_argument, 0, 'r'},
                                          {"force", no_argument, 0, 'f'},
                                          {"parents", no_argument, 0, 'p'},
                                          {0, 0, 0, 0}};
    optind = 2;
    int ch;
    while ((ch = getopt_long(argc, argv, "+rRfp", longs, NULL)) != -1) {
        switch (ch) {
        case 'r':
        case 'R':
            rflag = true;
            break;
        case 'f':
            fflag = true;
            break;
        case 'p':
            pflag = true;
            break;
        case 'd':
            max_depth = (unsigned)atoi(optarg);
            break;
        default:
            die_usage("fs %s: bad option", sub);
        }
    }
    int nargs = argc - optind;
    char **args = argv + optind;
    int want = strcmp(sub, "put") == 0 || strcmp(sub, "cp") == 0 ? 2 : 1;
    if (strcmp(sub, "cat") && strcmp(sub, "put") && strcmp(sub, "ls") && strcmp(sub, "stat") &&
        strcmp(sub, "rm") && strcmp(sub, "cp") && strcmp(sub, "mkdir") && strcmp(sub, "walk"))
        die_usage("fs: unknown subcommand `%s`", sub);
    if (nargs != want) die_usage("fs %s: wrong number of arguments", sub);
    connect_or_die(cli, false, false);
    ec_error e = {0};
    int rc = 0;
    char *path = remote_path(cli, args[want - 1]);
    if (strcmp(sub, "cat") == 0) {
        rc = fs_cat(cli, path);
    } else if (strcmp(sub, "put") == 0) {
        rc = fs_put(cli, args[0], path);
    } else if (strcmp(sub, "ls") == 0) {
        ec_dirent *ents;
        size_t n;
        if (ec_fs_read_directory(cli->c, path, &ents, &n, &e) != 0) die_err(path, &e);
        qsort(ents, n, sizeof *ents, cmp_dirent);
        for (size_t i = 0; i < n; i++)
            printf("%s%s\n", ents[i].name, ents[i].is_directory ? "/" : "");
        ec_dirents_free(ents, n);
    } else if (strcmp(sub, "stat") == 0) {
        ec_metadata md;
        if (ec_fs_get_metadata(cli->c, path, &md, &e) != 0) die_err(path, &e);
        printf("path: %s\ntype: %s\nsymlink: %s\nsize: %llu\nmodifiedAtMs: %lld\n"
               "createdAtMs: %lld\n",
               path,
               md.is_directory ? "directory"
               : md.is_file    ? "file"
                               : "other",
               md.is_symlink ? "yes" : "no", (unsigned long long)md.size,
               (long long)md.modified_at_ms, (long long)md.created_at_ms);
    } else if (strcmp(sub, "rm") == 0) {
        if (ec_fs_remove(cli->c, path, rflag, fflag, &e) != 0) die_err(path, &e);
    } else if (strcmp(sub, "cp") == 0) {
        char *src = remote_path(cli, args[0]);
        if (ec_fs_copy(cli->c, src, path, rflag, &e) != 0) die_err(src, &e);
        free(src);
    } else if (strcmp(sub, "mkdir") == 0) {
        if (ec_fs_create_directory(cli->c, path, pflag, &e) != 0) die_err(path, &e);
    } else if (strcmp(sub, "walk") == 0) {
        ec_walk_options wo = {.max_depth = max_depth ? max_depth : 64};
        ec_walk_entry *ents;
        size_t n;
        bool trunc = false;
        if (ec_fs_walk(cli->c, path, &wo, &ents, &n, &trunc, &e) != 0) die_err(path, &e);
        for (size_t i = 0; i < n; i++)
            printf("%s%s\n", ents[i].path, ents[i].is_directory ? "/" : "");
        if (trunc) fprintf(stderr, "exec-client: walk truncated at the server's limits\n");
        ec_walk_entries_free(ents, n);
    }
    free(path);
    fflush(stdout);
    return rc;
}

/* ---- rpc ----------------------------------------------------------------------- */

struct rpc_state {
    long outstanding; /* requests sent whose reply has not been printed yet */
};

static void rpc_print(void *ud, const char *text, size_t len)
{
    struct rpc_state *st = ud;
    fwrite(text, 1, len, stdout);
    fputc('\n', stdout);
    fflush(stdout);
    json_t *m = json_loadb(text, len, 0, NULL);
    if (m && json_object_get(m, "id") && !json_object_get(m, "method")) st->outstanding--;
    json_decref(m);
}

static int cmd_rpc(struct cli *cli, int argc, char **argv)
{
    bool raw = argc > 1 && strcmp(argv[1], "--raw") == 0;
    if (argc > (raw ? 2 : 1)) die_usage("rpc: unexpected argument `%s`", argv[raw ? 2 : 1]);
    connect_or_die(cli, raw, false);
    struct rpc_state st = {0};
    ec_client_set_message_hook(cli->c, rpc_print, &st);
    if (!raw) fprintf(stderr, "exec-client: session %s\n", ec_client_session_id(cli->c));
    char *line = NULL;
    size_t cap = 0;
    ec_error e = {0};
    bool in_open = true;
    int64_t drain_deadline = 0;
    for (;;) {
        struct pollfd pfd[2] = {{.fd = ec_client_fd(cli->c), .events = POLLIN},
                                {.fd = in_open ? STDIN_FILENO : -1, .events = POLLIN}};
        if (pfd[0].fd < 0) break;
        int timeout = -1;
        if (!in_open) {
            if (st.outstanding <= 0) break;
            timeout = (int)(drain_deadline - mono_ms());
            if (timeout <= 0) break;
        }
        int pr = poll(pfd, 2, timeout);
        if (pr < 0 && errno != EINTR) break;
        if (pr > 0 && pfd[0].revents) {
            if (ec_client_process_ready(cli->c, &e) != 0) {
                fprintf(stderr, "exec-client: %s\n", e.message);
                return st.outstanding > 0 ? EXIT_CONN : 0;
            }
        }
        if (pr > 0 && pfd[1].revents) {
            ssize_t n = getline(&line, &cap, stdin);
            if (n < 0) {
                in_open = false;
                drain_deadline = mono_ms() + (cli->timeout_ms > 0 ? cli->timeout_ms : 10000);
                continue;
            }
            while (n > 0 && (line[n - 1] == '\n' || line[n - 1] == '\r'))
                line[--n] = 0;
            if (n == 0) continue;
            json_t *m = json_loadb(line, (size_t)n, 0, NULL);
            if (m && json_object_get(m, "id") && json_object_get(m, "method")) st.outstanding++;
            json_decref(m);
            if (ec_client_send_text(cli->c, line, (size_t)n, &e) != 0) {
                fprintf(stderr, "exec-client: %s\n", e.message);
                free(line);
                return EXIT_CONN;
            }
        }
    }
    free(line);
    return 0;
}

int main(int argc, char **argv)
{
    struct cli cli = {.url = getenv("EXEC_SERVER_URL"),
                      .token = getenv("EXEC_SERVER_TOKEN"),
                      .reconnect_ms = 30000};
    static const struct option longs[] = {{"url", required_argument, 0, 'u'},
                                          {"token", required_argument, 0, 'T'},
                                          {"timeout-ms", required_argument, 0, 'm'},
                                          {"reconnect-ms", required_argument, 0, 'R'},
                                          {"help", no_argument, 0, 'h'},
                                          {0, 0, 0, 0}};
    int ch;
    while ((ch = getopt_long(argc, argv, "+h", longs, NULL)) != -1) {
        switch (ch) {
        case 'u':
            cli.url = optarg;
            break;
        case 'T':
            cli.token = optarg;
            break;
        case 'm':
            cli.timeout_ms = atoi(optarg);
            break;
        case 'R':
            cli.reconnect_ms = atoi(optarg);
            break;
        case 'h':
            fputs(usage_text, stdout);
            return 0;
        default:
            fputs(usage_text, stderr);
            return EXIT_USAGE;
        }
    }
    if (optind >= argc) {
        fputs(usage_text, stderr);
        return EXIT_USAGE;
    }
    if (!cli.url || !*cli.url) {
        fprintf(stderr, "exec-client: no server URL: pass --url ws://HOST:PORT or set "
                        "EXEC_SERVER_URL\n");
        return EXIT_USAGE;
    }
    const char *cmd = argv[optind];
    int sub_argc = argc - optind;
    char **sub_argv = argv + optind;
    int rc;
    if (strcmp(cmd, "run") == 0)
        rc = cmd_run(&cli, sub_argc, sub_argv);
    else if (strcmp(cmd, "shell") == 0)
        rc = cmd_shell(&cli, sub_argc, sub_argv);
    else if (strcmp(cmd, "fs") == 0)
        rc = cmd_fs(&cli, sub_argc, sub_argv);
    else if (strcmp(cmd, "rpc") == 0)
        rc = cmd_rpc(&cli, sub_argc, sub_argv);
    else {
        fprintf(stderr, "exec-client: unknown command `%s`\n(see exec-client --help)\n", cmd);
        return EXIT_USAGE;
    }
    ec_client_close(cli.c);
    return rc;
}
