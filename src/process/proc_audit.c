/* proc_audit: what the process table tells the audit trail and the terminal
 * recordings (audit/audit.h, docs/AUDIT.md): process.start when a child started (or
 * failed to), process.end once it is over, process.terminate and process.signal;
 * and a PTY process's output, resizes and (with --record-input) input as its
 * recording. The output is lent to the recording's writer from the event log, not
 * copied (event_log_chunk_ref). Never an environment value: the request's variable
 * names only. */
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "audit/audit.h"
#include "core/metrics.h"
#include "process/proc_internal.h"
#include "sandbox/policy.h"

/* A policy's list of roots (counted, not NULL-terminated). */
static void put_paths(struct buf *b, const char *key, const struct sb_paths *l)
{
    audit_put_array(b, key);
    for (size_t i = 0; i < l->n; i++) {
        if (i == AUDIT_LIST_MAX) {
            audit_put_item(b, "...");
            break;
        }
        audit_put_item(b, l->v[i]);
    }
    audit_put_close(b, ']');
}

/* The sandbox in short: what may be read and written, and the network. */
static void put_sandbox(struct buf *b, const struct sandbox_policy *pol)
{
    if (!pol || !pol->sandboxed) {
        audit_put_null(b, "sandbox");
        return;
    }
    audit_put_object(b, "sandbox");
    if (pol->full_read || !pol->enforce_fs)
        audit_put_str(b, "read", "all");
    else
        put_paths(b, "read", &pol->readable);
    if (pol->full_write || !pol->enforce_fs)
        audit_put_str(b, "write", "all");
    else
        put_paths(b, "write", &pol->writable);
    audit_put_str(b, "network", pol->net_restricted ? "restricted" : "enabled");
    audit_put_close(b, '}');
}

void proc_audit_describe(struct buf *out, json_t *env, const struct sandbox_policy *pol, bool proxy)
{
    if (!audit_enabled()) return;
    audit_put_array(out, "envNames");
    const char *k;
    json_t *v;
    size_t n = 0;
    json_object_foreach(env, k, v)
    {
        if (n++ == AUDIT_LIST_MAX) {
            audit_put_item(out, "...");
            break;
        }
        audit_put_item(out, k);
    }
    audit_put_close(out, ']');
    put_sandbox(out, pol);
    audit_put_bool(out, "networkProxy", proxy);
}

/* The fields a start and a failed start share (argv and cwd: the start's, or the
 * process's once they moved to it). */
static void put_start(struct buf *b, const struct proc_start *ps, const char *session,
                      char *const *argv, const char *cwd)
{
    audit_put_str(b, "session", session);
    audit_put_str(b, "process", ps->id);
    audit_put_strv(b, "argv", argv);
    audit_put_str(b, "cwd", cwd);
    audit_put_bool(b, "tty", ps->tty);
    if (ps->audit_desc.len) {
        buf_putc(b, ',');
        buf_append(b, ps->audit_desc.data, ps->audit_desc.len);
    }
}

void proc_audit_started(struct proc *p, const struct proc_start *ps, const char *session)
{
    if (p->tty)
        p->tty_rec = audit_tty_open(session, p->id, ps->rows ? ps->rows : 24,
                                    ps->cols ? ps->cols : 80, p->argv);
    struct buf *b = audit_begin("process.start");
    if (!b) return;
    put_start(b, ps, session, p->argv, p->cwd);
    audit_put_i64(b, "pid", (int64_t)p->pid);
    if (p->tty_rec) audit_put_str(b, "recording", audit_tty_name(p->tty_rec));
    audit_commit(b);
}

void proc_audit_failed(const struct proc_start *ps, const char *session, const char *error)
{
    struct buf *b = audit_begin("process.start");
    if (!b) return;
    put_start(b, ps, session, ps->argv, ps->cwd);
    audit_put_str(b, "error", error);
    audit_commit(b);
}

void proc_audit_output(struct proc *p, struct log_chunk *c)
{
    event_log_chunk_ref(c);
    audit_tty_output(p->tty_rec, c->data, c->len, event_log_chunk_unref, c);
}

/* "SIGTERM" for 15 (a static string: glibc's abbreviation table). */
static const char *sig_name(int sig, char *buf, size_t n)
{
    const char *abbr = sigabbrev_np(sig);
    snprintf(buf, n, "SIG%s", abbr ? abbr : "?");
    return buf;
}

void proc_audit_end(struct proc *p, const char *reason)
{
    if (p->audit_ended) return;
    p->audit_ended = true;
    uint64_t lost = p->tty_rec ? audit_tty_lost(p->tty_rec) : 0;
    if (p->tty_rec) audit_tty_close(p->tty_rec);
    p->tty_rec = NULL;
    struct buf *b = audit_begin("process.end");
    if (!b) return;
    audit_put_str(b, "session", p->table ? p->table->owner_id : NULL);
    audit_put_str(b, "process", p->id);
    audit_put_i64(b, "pid", (int64_t)p->pid);
    audit_put_str(b, "reason", reason);
    bool exited = p->state != PROC_RUNNING;
    char sname[24];
    if (exited && !p->exit_signal)
        audit_put_i64(b, "exitCode", p->exit_code);
    else
        audit_put_null(b, "exitCode");
    if (exited && p->exit_signal)
        audit_put_str(b, "signal", sig_name(p->exit_signal, sname, sizeof sname));
    else
        audit_put_null(b, "signal");
    uint64_t end = exited ? p->exit_ns : metrics_now_ns();
    audit_put_u64(b, "durationMs", (end - p->start_ns) / 1000000u);
    audit_put_u64(b, "bytesOut", p->out_bytes);
    audit_put_bool(b, "terminated", p->terminated);
    if (lost) audit_put_u64(b, "recordingLostBytes", lost);
    audit_commit(b);
}

void proc_audit_signal(struct proc *p, const char *type, int sig)
{
    struct buf *b = audit_begin(type);
    if (!b) return;
    char sname[24];
    audit_put_str(b, "session", p->table ? p->table->owner_id : NULL);
    audit_put_str(b, "process", p->id);
    audit_put_i64(b, "pid", (int64_t)p->pid);
    audit_put_str(b, "signal", sig_name(sig, sname, sizeof sname));
    audit_commit(b);
}
