/* tty_methods: what a terminal client needs beyond the reference's protocol.
 *
 * Ours (PROTOCOL.md §11 (g)), advertised in environment/info capabilities so a
 * client can check before calling; the reference answers -32601 to each:
 *   - process/start `size: {rows, cols}`: the PTY's initial window (24 x 80 without);
 *   - process/resize {processId, rows, cols}: TIOCSWINSZ on the PTY, so the kernel
 *     sends SIGWINCH to the terminal's foreground process group, as sshd does on a
 *     window-change request;
 *   - process/closeStdin {processId}: end of input. A pipe is closed once every
 *     byte written before it has reached the child; a PTY cannot be half-closed,
 *     so the terminal's VEOF character (normally ^D) is queued after those bytes:
 *     at the start of a line a canonical-mode reader then sees EOF, exactly as if
 *     the user had typed ^D;
 *   - process/signal with any signal: the reference's "interrupt", a name with or
 *     without SIG (case-insensitive: "TERM", "SIGWINCH", "hup"), or a number. Like
 *     interrupt it goes to the whole process group, and an unknown or exited
 *     process is a no-op.
 * Replies are `{}`; an unknown process id is -32600 `unknown process id <id>` for
 * resize and closeStdin (as for process/read). */
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/ioctl.h>
#include <termios.h>

#include "audit/audit.h"
#include "process/proc_internal.h"
#include "rpc/dispatch.h"
#include "rpc/params.h"
#include "session/session.h"
#include "util/mem.h"

static const struct {
    const char *name;
    int sig;
} signal_names[] = {
    {"interrupt", SIGINT}, {"HUP", SIGHUP},       {"INT", SIGINT},   {"QUIT", SIGQUIT},
    {"ILL", SIGILL},       {"TRAP", SIGTRAP},     {"ABRT", SIGABRT}, {"BUS", SIGBUS},
    {"FPE", SIGFPE},       {"KILL", SIGKILL},     {"USR1", SIGUSR1}, {"SEGV", SIGSEGV},
    {"USR2", SIGUSR2},     {"PIPE", SIGPIPE},     {"ALRM", SIGALRM}, {"TERM", SIGTERM},
    {"CHLD", SIGCHLD},     {"CONT", SIGCONT},     {"STOP", SIGSTOP}, {"TSTP", SIGTSTP},
    {"TTIN", SIGTTIN},     {"TTOU", SIGTTOU},     {"URG", SIGURG},   {"XCPU", SIGXCPU},
    {"XFSZ", SIGXFSZ},     {"VTALRM", SIGVTALRM}, {"PROF", SIGPROF}, {"WINCH", SIGWINCH},
    {"IO", SIGIO},         {"PWR", SIGPWR},       {"SYS", SIGSYS},
};

/* The signal named by `v` (string or number), or 0 with an error in d. */
static int decode_signal(struct pdec *d, json_t *v)
{
    if (json_is_integer(v)) {
        json_int_t n = json_integer_value(v);
        if (n >= 1 && n <= SIGRTMAX) return (int)n;
        pdec_fail(d, "signal number %lld is out of range 1-%d", (long long)n, SIGRTMAX);
        return 0;
    }
    if (!json_is_string(v)) {
        char what[128];
        pdec_describe(v, what, sizeof what);
        pdec_fail(d, "invalid type: %s, expected a signal name or number", what);
        return 0;
    }
    const char *name = json_string_value(v);
    const char *bare = strncasecmp(name, "SIG", 3) == 0 ? name + 3 : name;
    for (size_t i = 0; i < sizeof signal_names / sizeof signal_names[0]; i++)
        if (strcasecmp(bare, signal_names[i].name) == 0 || strcmp(name, signal_names[i].name) == 0)
            return signal_names[i].sig;
    pdec_fail(d,
              "unknown signal `%s`: expected `interrupt`, a name such as `TERM` or "
              "`SIGWINCH`, or a number",
              name);
    return 0;
}

void proc_handle_signal(struct rpc_req *req)
{
    struct pdec d;
    pdec_begin(&d, req->params, "SignalParams");
    const char *id = pdec_string(&d, "processId", PDEC_REQUIRED);
    const char *sid = pdec_string(&d, "sessionId", PDEC_OPTIONAL);
    json_t *v = d.failed ? NULL : json_object_get(req->params, "signal");
    int sig = 0;
    if (!d.failed && !v) pdec_fail(&d, "missing field `signal`");
    if (!d.failed) sig = decode_signal(&d, v);
    if (rpc_reply_if_invalid(req, &d)) return;
    if (!rpc_check_ready(req)) return;
    struct proc_table *t = proc_request_table(req, sid);
    if (!t) return;
    struct proc *p = proc_find(t, id);
    if (p && p->state == PROC_RUNNING) {
        kill(-p->pid, sig);
        proc_audit_signal(p, "process.signal", sig);
    }
    rpc_reply_json(req, json_object());
}

static unsigned short decode_dim(struct pdec *d, const char *key)
{
    bool present = false;
    uint64_t n = pdec_u64(d, key, PDEC_REQUIRED, 0, &present);
    if (!d->failed && (n < 1 || n > 65535)) {
        pdec_fail(d, "%s must be between 1 and 65535", key);
        return 0;
    }
    return (unsigned short)n;
}

void proc_decode_size(struct pdec *d, unsigned short *rows, unsigned short *cols)
{
    json_t *size = pdec_object(d, "size", PDEC_OPTIONAL);
    if (!size || d->failed) return;
    struct pdec sub;
    if (pdec_begin(&sub, size, "TerminalSize")) {
        *rows = decode_dim(&sub, "rows");
        *cols = decode_dim(&sub, "cols");
    }
    if (sub.failed) pdec_fail(d, "size: %s", sub.err);
}

/* The PTY master of a tty process, or -1 once both of our copies are closed. */
static int pty_fd(const struct proc *p)
{
    if (!p->tty) return -1;
    if (p->in_fd >= 0) return p->in_fd;
    return p->nout > 0 ? p->out[0].fd : -1;
}

void proc_handle_resize(struct rpc_req *req)
{
    struct pdec d;
    pdec_begin(&d, req->params, "ResizeParams");
    const char *id = pdec_string(&d, "processId", PDEC_REQUIRED);
    const char *sid = pdec_string(&d, "sessionId", PDEC_OPTIONAL);
    unsigned short rows = decode_dim(&d, "rows");
    unsigned short cols = decode_dim(&d, "cols");
    if (rpc_reply_if_invalid(req, &d)) return;
    if (!rpc_check_ready(req)) return;
    struct proc *p = proc_request_proc(req, sid, id);
    if (!p) return;
    if (!p->tty) {
        rpc_reply_error(req, RPC_INVALID_REQUEST,
                        "process %s has no terminal to resize (started with tty:false)", id);
        return;
    }
    int fd = pty_fd(p);
    if (fd >= 0) {
        struct winsize ws = {.ws_row = rows, .ws_col = cols};
        ioctl(fd, TIOCSWINSZ, &ws); /* a gone terminal has no window left to size */
    }
    if (p->tty_rec) audit_tty_resize(p->tty_rec, rows, cols);
    rpc_reply_json(req, json_object());
}

void proc_handle_close_stdin(struct rpc_req *req)
{
    struct pdec d;
    pdec_begin(&d, req->params, "CloseStdinParams");
    const char *id = pdec_string(&d, "processId", PDEC_REQUIRED);
    const char *sid = pdec_string(&d, "sessionId", PDEC_OPTIONAL);
    if (rpc_reply_if_invalid(req, &d)) return;
    if (!rpc_check_ready(req)) return;
    struct proc *p = proc_request_proc(req, sid, id);
    if (!p) return;
    if (p->eof_requested || p->in_fd < 0) {
        rpc_reply_json(req, json_object());
        return;
    }
    p->eof_requested = true;
    if (p->tty) {
        struct termios tio;
        unsigned char veof = 4; /* ^D */
        if (tcgetattr(p->in_fd, &tio) == 0 && tio.c_cc[VEOF] != _POSIX_VDISABLE)
            veof = tio.c_cc[VEOF];
        struct wq_item *it = xmalloc(sizeof *it + 1);
        it->len = 1;
        it->data[0] = veof;
        proc_stdin_push(p, it);
    }
    proc_stdin_flush(p);
    rpc_reply_json(req, json_object());
}
