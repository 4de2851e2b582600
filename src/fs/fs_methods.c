/* fs_methods: the filesystem JSON-RPC methods (PROTOCOL.md section 6).
 *
 * Each handler decodes its params, passes the lifecycle gate, validates, and then
 * hands a self-contained struct fs_work (fs_work.h) to the libuv thread pool: the
 * worker runs the blocking operation code in fs_ops.c, which writes the result
 * JSON text straight into the outgoing message buffer (started on the loop thread
 * with rpc_result_begin), or records an error. The after-work callback, back on
 * the loop thread, sends one or the other.
 *
 * Open file handles (fs/open, fs/readBlock, fs/close) live in a per-connection
 * table kept in the connection's fs_slot. A handle is reference counted
 * on the loop thread so an fs/close racing an in-flight fs/readBlock never closes
 * the descriptor under the worker.
 *
 * A request whose sandbox needs enforcement (PROTOCOL.md 10.3) runs the same
 * operation code in the session's sandbox helper instead (fs/fs_helper_pool.h): the
 * worker encodes it as a frame, waits for the helper's reply and, for fs/open,
 * receives the opened fd, so handle I/O then works as for any handle. */
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/inflight.h"
#include "fs/fs_audit.h"
#include "fs/fs_budget.h"
#include "fs/fs_methods.h"
#include "fs/fs_request.h"
#include "fs/fs_sandboxed.h"
#include "fs/fs_walk.h"
#include "fs/fs_wire.h"
#include "fs/fs_work.h"
#include "proto/uri.h"
#include "rpc/dispatch.h"
#include "rpc/params.h"
#include "rpc/rpc.h"
#include "fs/fs_helper_pool.h"
#include "sandbox/path_rules.h"
#include "sandbox/policy.h"
#include "sandbox/sandbox_host.h"
#include "sandbox/sandbox_rpc.h"
#include "session/session.h"
#include "transport/conn.h"
#include "proto/base64.h"
#include "util/buf.h"
#include "util/mem.h"
#include "util/oserr.h"

/* This module's per-connection state: open fs handles. */
static struct conn_slot fs_slot;

#define FS_MAX_HANDLES 128
#define FS_BLOCK_MAX 1048576ull

/* ---- open file handles ------------------------------------------------------- */

struct fs_table {
    int count;
    struct fs_handle *slots[FS_MAX_HANDLES];
};

static void handle_unref(struct fs_handle *h)
{
    if (--h->refs > 0) return;
    close(h->fd);
    pthread_mutex_destroy(&h->write_lock);
    free(h->path);
    free(h);
}

static void table_free(void *p)
{
    struct fs_table *t = p;
    for (int i = 0; i < FS_MAX_HANDLES; i++)
        if (t->slots[i]) handle_unref(t->slots[i]);
    free(t);
}

static struct fs_table *table_get(struct conn *c, bool create)
{
    struct fs_table *t = conn_slot_get(c, &fs_slot);
    if (!t && create && conn_is_open(c)) {
        t = xcalloc(1, sizeof *t);
        conn_slot_set(c, &fs_slot, t, table_free);
    }
    return t;
}

static int table_find(struct fs_table *t, const char *id, size_t len)
{
    if (!t) return -1;
    for (int i = 0; i < FS_MAX_HANDLES; i++) {
        struct fs_handle *h = t->slots[i];
        if (h && h->id_len == len && memcmp(h->id, id, len) == 0) return i;
    }
    return -1;
}
/* ---- the sandbox helper's side and ours ---------------------------------------------- */

int fs_helper_serve(const void *req, size_t len, struct buf *reply, int *fd_out, int *close_after)
{
    *fd_out = -1;
    struct fs_work *fw = xcalloc(1, sizeof *fw);
    fw->fd = -1;
    fw->displaced_fd = -1;
    buf_init(&fw->out);
    int rc = fs_wire_decode_request(req, len, &fw->rq);
    if (rc == 0 && !fs_op_helper_serves(fw->rq.op)) rc = -EPROTO;
    if (rc < 0) {
        fs_work_set_msg(fw, FS_ERR_INTERNAL, "malformed sandbox helper request");
    } else {
        fs_ops_run(fw);
        /* One request at a time here, so a read never waits for another; if it
         * were told to, it is refused rather than stuck. */
        if (fw->budget_wait) fs_work_set_msg(fw, FS_ERR_INTERNAL, "read budget busy");
    }
    fs_budget_give(fw->budget_held);
    bool failed = fs_work_failed(fw);
    struct fs_wire_reply rp = {.err = fw->err,
                               .kind = (int32_t)fw->kind,
                               .msg = fw->msg,
                               .msg_len = fw->msg ? strlen(fw->msg) : 0,
                               .out = fw->out.data,
                               .out_len = failed ? 0 : fw->out.len};
    fs_wire_encode_reply(reply, &rp);
    if (!failed && fw->rq.op == OP_OPEN)
        *fd_out = fw->fd;
    else if (fw->fd >= 0)
        close(fw->fd);
    *close_after = fw->displaced_fd;
    free(fw->rq.path);
    free(fw->rq.path2);
    free(fw->msg);
    buf_free(&fw->out);
    free(fw);
    return rc;
}

/* Whether path (as the request names it; the link itself too with followSymlinks
 * false) is under a deny entry or matches a deny glob of sb, asked now: the helper's
 * view covers what was denied when it started, and a file made since (by the host, by
 * a sandboxed command) is denied all the same, as the reference refuses it. The
 * helper asks again of each object it opens (a link swapped in meanwhile). */
static bool denied_now(const struct fs_sandbox *sb, const char *path, bool nofollow)
{
    if (!path || (!sb->pol.denied.n && !sb->pol.deny_globs.n)) return false;
    struct sandbox_spec spec;
    sandbox_policy_spec(&sb->pol, &spec);
    char *c = sandbox_canonical_path(path);
    bool denied = path_rules_denied(&spec, c);
    free(c);
    const char *slash = strrchr(path, '/');
    if (!denied && nofollow && slash && slash[1]) {
        char *dir = xstrndup(path, slash == path ? 1 : (size_t)(slash - path));
        char *cd = sandbox_canonical_path(dir);
        char *lex = xasprintf("%s%s%s", cd, strcmp(cd, "/") ? "/" : "", slash + 1);
        denied = path_rules_denied(&spec, lex);
        free(lex);
        free(cd);
        free(dir);
    }
    return denied;
}

/* Whether a request that looks at a path without opening it (fs/getMetadata,
 * fs/canonicalize) names one outside every root of a sandbox without namespaces: Landlock decides
 * opens, not stat(2), so the helper there would answer what a view of the policy's roots does not
 * show (the reference's answer for such a path: not found). */
static bool hidden_now(const struct fs_work *fw)
{
    const struct sandbox_policy *p = &fw->sb->pol;
    if ((fw->rq.op != OP_METADATA && fw->rq.op != OP_CANONICALIZE) || !p->enforce_fs ||
        sandbox_host_mode_for(p->legacy_landlock) != SANDBOX_MODE_LANDLOCK)
        return false;
    struct sandbox_spec spec;
    sandbox_policy_spec(p, &spec);
    char *c = sandbox_canonical_path(fw->rq.path);
    bool hidden = path_rules_access(&spec, c) == PATH_NONE;
    free(c);
    return hidden;
}

/* Runs fw in the sandbox helper of its session and policy (on a pool thread). */
static void run_sandboxed(struct fs_work *fw)
{
    if (denied_now(fw->sb, fw->rq.path, fw->rq.nofollow) ||
        denied_now(fw->sb, fw->rq.path2, fw->rq.nofollow)) {
        fs_work_set_err(fw, EACCES);
        return;
    }
    if (hidden_now(fw)) {
        fs_work_set_err(fw, ENOENT);
        return;
    }
    struct buf rq, rp;
    buf_init(&rq);
    buf_init(&rp);
    fs_wire_encode_request(&rq, &fw->rq);
    int fd = -1;
    char why[512];
    int rc = fs_helper_pool_call(fw->sb_owner, fw->sb, rq.data, rq.len, &rp, &fd, why, sizeof why);
    buf_free(&rq);
    struct fs_wire_reply r;
    if (rc == FS_HELPER_CALL_UNENFORCEABLE || rc == FS_HELPER_CALL_REFUSED) {
        fs_work_set_msg(fw, FS_ERR_REFUSED, "%s", why);
    } else if (rc == FS_HELPER_CALL_NO_RESOURCES) {
        fs_work_set_msg(fw, FS_ERR_INTERNAL, "%s", why);
    } else if (rc == FS_HELPER_CALL_CLOSED) {
        fs_work_set_msg(fw, FS_ERR_INTERNAL, "session closed");
    } else if (rc < 0) {
        fs_work_set_msg(fw, FS_ERR_INTERNAL, "%s",
                        why[0] ? why : "sandbox helper exited during the request");
    } else if (fs_wire_decode_reply(rp.data, rp.len, &r) < 0) {
        fs_work_set_msg(fw, FS_ERR_INTERNAL, "malformed sandbox helper reply");
    } else if (r.msg_len) {
        fs_work_set_msg(fw, (enum fs_err_kind)r.kind, "%.*s", (int)r.msg_len, r.msg);
    } else if (r.err) {
        fs_work_set_err(fw, r.err);
    } else {
        buf_append(&fw->out, r.out, r.out_len);
        if (fw->rq.op == OP_READ_FILE) { /* in memory here too: counted, though late */
            fs_budget_force(r.out_len);
            fw->budget_held += r.out_len;
        }
        if (fw->rq.op == OP_OPEN && fd >= 0) {
            fw->fd = fd;
            fd = -1;
        }
    }
    if (fd >= 0) close(fd);
    if (fw->rq.op == OP_OPEN && !fs_work_failed(fw) && fw->fd < 0)
        fs_work_set_msg(fw, FS_ERR_INTERNAL, "sandbox helper returned no file");
    buf_free(&rp);
}

void fs_work_run(struct fs_work *fw)
{
    if (fw->sb)
        run_sandboxed(fw);
    else
        fs_ops_run(fw);
}

static void work_cb(uv_work_t *w)
{
    fs_work_run(w->data);
}

static void resume_parked(void);

static void fw_free(struct fs_work *fw)
{
    if (fw->budget_held) {
        fs_budget_give(fw->budget_held);
        resume_parked();
    }
    free(fw->rq.path);
    free(fw->rq.path2);
    free(fw->msg);
    fs_sandbox_free(fw->sb);
    buf_free(&fw->out);
    if (fw->displaced_fd >= 0) close(fw->displaced_fd);
    free(fw);
}

/* The displaced file's close, on a pool thread once the reply is out (fs_work.h). */
static void close_displaced(uv_work_t *w)
{
    struct fs_work *fw = w->data;
    close(fw->displaced_fd);
    fw->displaced_fd = -1;
}

static void close_displaced_done(uv_work_t *w, int status)
{
    fw_free(w->data);
}

static void open_finish(struct fs_work *fw)
{
    struct rpc_req *req = fw->req;
    if (!conn_is_open(req->conn)) {
        close(fw->fd);
        fs_work_set_msg(fw, FS_ERR_INTERNAL, "connection closed");
        return;
    }
    struct fs_table *t = table_get(req->conn, true);
    if (!t) {
        close(fw->fd);
        fs_work_set_msg(fw, FS_ERR_INTERNAL, "connection closed");
        return;
    }
    if (table_find(t, fw->hid, fw->hid_len) >= 0) {
        close(fw->fd);
        fs_work_set_msg(fw, FS_ERR_REFUSED, "file handle `%s` already exists", fw->hid);
        return;
    }
    if (t->count >= FS_MAX_HANDLES) {
        close(fw->fd);
        fs_work_set_msg(fw, FS_ERR_REFUSED, "at most %d file handles may be open per connection",
                        FS_MAX_HANDLES);
        return;
    }
    struct fs_handle *h = xcalloc(1, sizeof *h);
    pthread_mutex_init(&h->write_lock, NULL);
    h->refs = 1;
    h->fd = fw->fd;
    h->id_len = fw->hid_len;
    memcpy(h->id, fw->hid, fw->hid_len);
    h->path = fs_audit_handle_path(fw->rq.path);
    for (int i = 0; i < FS_MAX_HANDLES; i++) {
        if (!t->slots[i]) {
            t->slots[i] = h;
            break;
        }
    }
    t->count++;
    buf_puts(&fw->out, "{\"handleId\":");
    buf_put_json_str(&fw->out, fw->hid, fw->hid_len);
    buf_putc(&fw->out, '}');
}

/* ---- idle helpers ------------------------------------------------------------------ */

/* A warm helper serves a burst of requests (an apply_patch's writes); idle longer
 * than this it is retired, and with it the empty placeholder directories its view
 * mounts on, so the workspace is back as it was soon after the burst. */
#define HELPER_IDLE_MS 3000

static uv_timer_t sweep_timer;
static bool sweep_init, sweep_busy;
static uv_work_t sweep_work;
static int sweep_left;

static void sweep_run(uv_work_t *w)
{
    sweep_left = fs_helper_pool_sweep(HELPER_IDLE_MS);
}

static void sweep_done(uv_work_t *w, int status)
{
    sweep_busy = false;
    if (status == 0 && sweep_left == 0) uv_timer_stop(&sweep_timer);
}

static void sweep_tick(uv_timer_t *t)
{
    if (sweep_busy) return;
    sweep_busy = uv_queue_work(t->loop, &sweep_work, sweep_run, sweep_done) == 0;
}

/* Starts the sweep after a sandboxed request (it stops once no helper is left). */
void fs_helper_sweep_arm(uv_loop_t *loop)
{
    if (!sweep_init) {
        uv_timer_init(loop, &sweep_timer);
        uv_unref((uv_handle_t *)&sweep_timer); /* never what keeps the loop alive */
        sweep_init = true;
    }
    if (!uv_is_active((uv_handle_t *)&sweep_timer))
        uv_timer_start(&sweep_timer, sweep_tick, HELPER_IDLE_MS / 2, HELPER_IDLE_MS / 2);
}

/* ---- reads waiting for the read budget (fs_budget.h) ------------------------------
 * A read told to wait holds nothing; it is parked here, on the loop thread, and run
 * again when room is given back, so no pool thread ever blocks on the budget. */

static struct fs_work *parked, **parked_tail = &parked;

static void after_cb(uv_work_t *w, int status);

static void run_again(struct fs_work *fw)
{
    int r = uv_queue_work(fw->req->loop, &fw->w, work_cb, after_cb);
    if (r < 0) {
        fs_work_set_msg(fw, FS_ERR_INTERNAL, "%s", uv_strerror(r));
        after_cb(&fw->w, 0);
    }
}

/* A parked read whose client has gone (or a server that stops) is answered at once
 * instead of being run: reading 400 MB for nobody would hold the budget, and the
 * exit, for seconds. Returns whether fw was finished. */
static bool finish_if_gone(struct fs_work *fw)
{
    if (conn_is_open(fw->req->conn) && !fs_budget_stopped()) return false;
    fs_work_set_msg(fw, FS_ERR_INTERNAL, "connection closed");
    after_cb(&fw->w, 0);
    return true;
}

static void park(struct fs_work *fw)
{
    fw->budget_wait = false;
    if (finish_if_gone(fw)) return;
    if (fs_budget_fits(fw->budget_need)) { /* room was given back meanwhile */
        run_again(fw);
        return;
    }
    fw->next_parked = NULL;
    *parked_tail = fw;
    parked_tail = &fw->next_parked;
    /* Connections that give back queued bytes run the parked reads again; the
     * first one's need is what the in-flight budget is short of. */
    inflight_on_room(resume_parked);
    inflight_want(parked->budget_need);
}

/* Room was given back: the parked reads that fit now run again, in order. */
static void resume_parked(void)
{
    struct fs_work *list = parked;
    parked = NULL;
    parked_tail = &parked;
    while (list) {
        struct fs_work *fw = list;
        list = fw->next_parked;
        if (finish_if_gone(fw)) continue;
        if (fs_budget_fits(fw->budget_need)) {
            run_again(fw);
        } else {
            fw->next_parked = NULL;
            *parked_tail = fw;
            parked_tail = &fw->next_parked;
        }
    }
    inflight_want(parked ? parked->budget_need : 0);
}

/* The JSON-RPC code of an operation's refusal. */
static int err_code(enum fs_err_kind kind)
{
    switch (kind) {
    case FS_ERR_REFUSED: return RPC_INVALID_REQUEST;
    case FS_ERR_PARAMS: return RPC_INVALID_PARAMS;
    case FS_ERR_INTERNAL: break;
    }
    return RPC_INTERNAL_ERROR;
}

static void after_cb(uv_work_t *w, int status)
{
    struct fs_work *fw = w->data;
    struct rpc_req *req = fw->req;
    uv_loop_t *loop = req->loop; /* the reply frees req */
    if (fw->budget_wait && status == 0 && !fs_work_failed(fw)) {
        park(fw);
        return;
    }
    if (fw->sb) fs_helper_sweep_arm(req->loop);
    if (fw->rq.op == OP_OPEN && !fs_work_failed(fw)) open_finish(fw);
    if (fw->h) handle_unref(fw->h);
    if (status < 0 && !fs_work_failed(fw))
        fs_work_set_msg(fw, FS_ERR_INTERNAL, "%s", uv_strerror(status));
    fs_audit_op(fw);
    if (fw->msg) {
        rpc_reply_error(req, err_code(fw->kind), "%s", fw->msg);
    } else if (fw->err) {
        rpc_reply_errno(req, fw->err);
    } else {
        rpc_result_finish(req, &fw->out);
    }
    if (fw->displaced_fd >= 0 &&
        uv_queue_work(loop, &fw->w, close_displaced, close_displaced_done) == 0)
        return;
    fw_free(fw);
}

void fs_session_id(const struct rpc_req *req, char out[FS_SESSION_ID_LEN])
{
    struct session *s = session_of(req->conn);
    snprintf(out, FS_SESSION_ID_LEN, "%s", s ? s->id : "");
}

static void submit(struct fs_work *fw)
{
    if (!fw->sb_owner[0]) fs_session_id(fw->req, fw->sb_owner);
    rpc_result_begin(fw->req, &fw->out);
    fw->w.data = fw;
    int r = uv_queue_work(fw->req->loop, &fw->w, work_cb, after_cb);
    if (r < 0) {
        fs_work_set_msg(fw, FS_ERR_INTERNAL, "%s", uv_strerror(r));
        after_cb(&fw->w, 0);
    }
}

static struct fs_work *fw_new(struct rpc_req *req, enum fs_op op)
{
    struct fs_work *fw = xcalloc(1, sizeof *fw);
    fw->req = req;
    fw->rq.op = op;
    fw->fd = -1;
    fw->displaced_fd = -1;
    buf_init(&fw->out);
    return fw;
}

/* ---- param helpers ------------------------------------------------------------- */

/* The optional sandbox member (serde errors into d): borrowed, or NULL. */
static json_t *decode_sandbox(struct pdec *d)
{
    return pdec_object(d, "sandbox", PDEC_OPTIONAL);
}

/* Hands fw (and sb, when the operation needs it) to the session's sandbox helper for
 * this policy. */
static void fw_sandbox(struct fs_work *fw, struct fs_sandbox *sb)
{
    if (!sb) return;
    fw->sb = sb;
    fs_session_id(fw->req, fw->sb_owner);
}

/* Converts a URI param to a native path, replying on failure. */
bool fs_param_path(struct rpc_req *req, const char *uri, size_t len, char **out, size_t *out_len)
{
    struct uri_error ue;
    if (uri_to_path(uri, len, false, out, out_len, &ue) < 0) {
        rpc_reply_error(req, rpc_uri_error_code(&ue), "%s", ue.message);
        return false;
    }
    return true;
}

/* Common tail of params checking: decode errors, the sandbox, the gate. Returns
 * -EINVAL when it replied (with the error), else 0 with *out the sandbox the operation
 * (reading and/or writing) runs in, parsed once here, or NULL when it needs none
 * (PROTOCOL.md 10.3: full-disk access for it runs directly). */
static int check_common(struct rpc_req *req, struct pdec *d, json_t *sb, bool reads, bool writes,
                        struct fs_sandbox **out)
{
    *out = NULL;
    if (d->failed) {
        rpc_reply_error(req, RPC_INVALID_PARAMS, "%s", d->err);
        return -EINVAL;
    }
    struct sandbox_error se;
    if (fs_sandbox_decode(sb, reads, writes, out, &se) < 0) {
        rpc_reply_error(req, sandbox_error_code(&se), "%s", se.message);
        return -EINVAL;
    }
    if (!rpc_check_ready(req)) {
        fs_sandbox_free(*out);
        *out = NULL;
        return -EINVAL;
    }
    return 0;
}

/* Handlers for the simple one-path methods. */
static void simple_path_method(struct rpc_req *req, enum fs_op op, const char *sname,
                               bool has_follow, bool has_recursive, bool has_force)
{
    struct pdec d;
    pdec_begin(&d, req->params, sname);
    size_t ulen = 0;
    const char *uri = pdec_string_len(&d, "path", PDEC_REQUIRED, &ulen);
    bool recursive = has_recursive ? pdec_bool(&d, "recursive", PDEC_OPTIONAL, true) : false;
    bool force = has_force ? pdec_bool(&d, "force", PDEC_OPTIONAL, true) : false;
    bool follow = has_follow ? pdec_bool(&d, "followSymlinks", PDEC_OPTIONAL, true) : true;
    json_t *sbj = decode_sandbox(&d);
    bool writes = op == OP_CREATE_DIR || op == OP_REMOVE;
    struct fs_sandbox *sb;
    if (check_common(req, &d, sbj, !writes, writes, &sb) < 0) return;
    struct fs_work *fw = fw_new(req, op);
    fw_sandbox(fw, sb);
    if (!fs_param_path(req, uri, ulen, &fw->rq.path, &fw->rq.path_len)) {
        fw_free(fw);
        return;
    }
    fw->rq.recursive = recursive;
    fw->rq.force = force;
    fw->rq.nofollow = !follow;
    submit(fw);
}

static void handle_read_file(struct rpc_req *req)
{
    simple_path_method(req, OP_READ_FILE, "ReadFileParams", true, false, false);
}

static void handle_create_dir(struct rpc_req *req)
{
    simple_path_method(req, OP_CREATE_DIR, "CreateDirectoryParams", true, true, false);
}

static void handle_metadata(struct rpc_req *req)
{
    simple_path_method(req, OP_METADATA, "GetMetadataParams", true, false, false);
}

static void handle_canonicalize(struct rpc_req *req)
{
    simple_path_method(req, OP_CANONICALIZE, "CanonicalizeParams", false, false, false);
}

static void handle_read_dir(struct rpc_req *req)
{
    simple_path_method(req, OP_READ_DIR, "ReadDirectoryParams", false, false, false);
}

static void handle_remove(struct rpc_req *req)
{
    simple_path_method(req, OP_REMOVE, "RemoveParams", true, true, true);
}

static void handle_write_file(struct rpc_req *req)
{
    struct pdec d;
    pdec_begin(&d, req->params, "WriteFileParams");
    size_t ulen = 0, blen = 0;
    bool writable = false;
    const char *uri = pdec_string_len(&d, "path", PDEC_REQUIRED, &ulen);
    const char *b64 = rpc_param_payload(req, &d, "dataBase64", PDEC_REQUIRED, &blen, &writable);
    bool follow = pdec_bool(&d, "followSymlinks", PDEC_OPTIONAL, true);
    bool sync = pdec_bool(&d, "fsync", PDEC_OPTIONAL, false); /* ours */
    json_t *sbj = decode_sandbox(&d);
    struct fs_sandbox *sb;
    if (check_common(req, &d, sbj, false, true, &sb) < 0) return;
    struct fs_work *fw = fw_new(req, OP_WRITE_FILE);
    fw_sandbox(fw, sb);
    fw->rq.fsync = sync;
    if (!fs_param_path(req, uri, ulen, &fw->rq.path, &fw->rq.path_len)) {
        fw_free(fw);
        return;
    }
    fw->rq.nofollow = !follow;
    /* No copy: the text stays the request's (params or the message it arrived in)
     * until the reply, and a large one is decoded where it lies. */
    fw->rq.b64 = b64;
    fw->rq.b64_len = blen;
    fw->b64_writable = writable;
    fw->audit_bytes = fs_audit_payload_bytes(b64, blen);
    submit(fw);
}

static void handle_copy(struct rpc_req *req)
{
    struct pdec d;
    pdec_begin(&d, req->params, "CopyParams");
    size_t l1 = 0, l2 = 0;
    const char *src = pdec_string_len(&d, "sourcePath", PDEC_REQUIRED, &l1);
    const char *dst = pdec_string_len(&d, "destinationPath", PDEC_REQUIRED, &l2);
    bool recursive = pdec_bool(&d, "recursive", PDEC_REQUIRED, false);
    json_t *sbj = decode_sandbox(&d);
    struct fs_sandbox *sb;
    if (check_common(req, &d, sbj, true, true, &sb) < 0) return;
    struct fs_work *fw = fw_new(req, OP_COPY);
    fw_sandbox(fw, sb);
    if (!fs_param_path(req, src, l1, &fw->rq.path, &fw->rq.path_len) ||
        !fs_param_path(req, dst, l2, &fw->rq.path2, &fw->rq.path2_len)) {
        fw_free(fw);
        return;
    }
    fw->rq.recursive = recursive;
    submit(fw);
}

static void handle_walk(struct rpc_req *req)
{
    struct pdec d;
    pdec_begin(&d, req->params, "WalkParams");
    size_t ulen = 0;
    const char *uri = pdec_string_len(&d, "path", PDEC_REQUIRED, &ulen);
    json_t *opts = pdec_object(&d, "options", PDEC_REQUIRED);
    uint64_t depth = 0, dirs = 0, entries = 0;
    bool follow = false, prune = false;
    if (!d.failed) {
        struct pdec o;
        pdec_begin(&o, opts, "WalkOptions");
        depth = pdec_u64(&o, "maxDepth", PDEC_REQUIRED, 0, NULL);
        dirs = pdec_u64(&o, "maxDirectories", PDEC_REQUIRED, 0, NULL);
        entries = pdec_u64(&o, "maxEntries", PDEC_REQUIRED, 0, NULL);
        follow = pdec_bool(&o, "followDirectorySymlinks", PDEC_REQUIRED, false);
        prune = pdec_bool(&o, "pruneHiddenDirectories", PDEC_OPTIONAL, false);
        if (o.failed) pdec_fail(&d, "%s", o.err);
    }
    json_t *sbj = decode_sandbox(&d);
    struct fs_sandbox *sb;
    if (check_common(req, &d, sbj, true, false, &sb) < 0) return;
    if (dirs == 0 || entries == 0) {
        fs_sandbox_free(sb);
        rpc_reply_error(req, RPC_INVALID_REQUEST,
                        "filesystem walk limits must be greater than zero");
        return;
    }
    if (depth > WALK_MAX_DEPTH || dirs > WALK_MAX_DIRS || entries > WALK_MAX_ENTRIES) {
        fs_sandbox_free(sb);
        rpc_reply_error(req, RPC_INVALID_REQUEST,
                        "filesystem walk limits exceed maximums: depth=%d, "
                        "directories=%d, entries=%d",
                        WALK_MAX_DEPTH, WALK_MAX_DIRS, WALK_MAX_ENTRIES);
        return;
    }
    struct fs_work *fw = fw_new(req, OP_WALK);
    fw_sandbox(fw, sb);
    if (!fs_param_path(req, uri, ulen, &fw->rq.path, &fw->rq.path_len)) {
        fw_free(fw);
        return;
    }
    fw->rq.max_depth = depth;
    fw->rq.max_dirs = dirs;
    fw->rq.max_entries = entries;
    fw->rq.follow_dir_links = follow;
    fw->rq.prune_hidden = prune;
    submit(fw);
}

static bool check_handle_id(struct rpc_req *req, size_t len)
{
    if (len > FS_HANDLE_ID_MAX) {
        rpc_reply_error(req, RPC_INVALID_REQUEST, "file handle ID must not exceed %d bytes",
                        FS_HANDLE_ID_MAX);
        return false;
    }
    return true;
}

static void handle_open(struct rpc_req *req)
{
    struct pdec d;
    pdec_begin(&d, req->params, "OpenParams");
    size_t hlen = 0, ulen = 0;
    const char *hid = pdec_string_len(&d, "handleId", PDEC_REQUIRED, &hlen);
    const char *uri = pdec_string_len(&d, "path", PDEC_REQUIRED, &ulen);
    static const char *const modes[] = {"read", "replace", NULL};
    int mode = pdec_enum(&d, "mode", PDEC_OPTIONAL, modes, 0);
    json_t *sbj = decode_sandbox(&d);
    struct fs_sandbox *sb;
    if (check_common(req, &d, sbj, mode != 1, mode == 1, &sb) < 0) return;
    if (!check_handle_id(req, hlen)) {
        fs_sandbox_free(sb);
        return;
    }
    struct fs_table *t = table_get(req->conn, false);
    if (table_find(t, hid, hlen) >= 0) {
        fs_sandbox_free(sb);
        rpc_reply_error(req, RPC_INVALID_REQUEST, "file handle `%s` already exists", hid);
        return;
    }
    if (t && t->count >= FS_MAX_HANDLES) {
        fs_sandbox_free(sb);
        rpc_reply_error(req, RPC_INVALID_REQUEST,
                        "at most %d file handles may be open per connection", FS_MAX_HANDLES);
        return;
    }
    struct fs_work *fw = fw_new(req, OP_OPEN);
    fw_sandbox(fw, sb);
    if (!fs_param_path(req, uri, ulen, &fw->rq.path, &fw->rq.path_len)) {
        fw_free(fw);
        return;
    }
    memcpy(fw->hid, hid, hlen);
    fw->hid_len = hlen;
    fw->rq.replace = mode == 1;
    submit(fw);
}

static void handle_read_block(struct rpc_req *req)
{
    struct pdec d;
    pdec_begin(&d, req->params, "ReadBlockParams");
    size_t hlen = 0;
    const char *hid = pdec_string_len(&d, "handleId", PDEC_REQUIRED, &hlen);
    uint64_t off = pdec_u64(&d, "offset", PDEC_REQUIRED, 0, NULL);
    uint64_t len = pdec_u64(&d, "len", PDEC_REQUIRED, 0, NULL);
    if (rpc_reply_if_invalid(req, &d)) return;
    if (!rpc_check_ready(req)) return;
    if (!check_handle_id(req, hlen)) return;
    if (len < 1 || len > FS_BLOCK_MAX) {
        rpc_reply_error(req, RPC_INVALID_REQUEST,
                        "file read block length must be between 1 and %llu",
                        (unsigned long long)FS_BLOCK_MAX);
        return;
    }
    struct fs_table *t = table_get(req->conn, false);
    int i = table_find(t, hid, hlen);
    if (i < 0) {
        rpc_reply_error(req, RPC_NOT_FOUND, "unknown file handle `%s`", hid);
        return;
    }
    struct fs_work *fw = fw_new(req, OP_READ_BLOCK);
    fw->h = t->slots[i];
    fw->h->refs++;
    fw->offset = off;
    fw->len = len;
    submit(fw);
}

static void handle_write_block(struct rpc_req *req)
{
    struct pdec d;
    pdec_begin(&d, req->params, "WriteBlockParams");
    size_t hlen = 0, clen = 0;
    bool writable = false;
    const char *hid = pdec_string_len(&d, "handleId", PDEC_REQUIRED, &hlen);
    uint64_t off = pdec_u64(&d, "offset", PDEC_REQUIRED, 0, NULL);
    const char *chunk = rpc_param_payload(req, &d, "chunk", PDEC_REQUIRED, &clen, &writable);
    if (rpc_reply_if_invalid(req, &d)) return;
    if (!rpc_check_ready(req)) return;
    if (!check_handle_id(req, hlen)) return;
    struct fs_table *t = table_get(req->conn, false);
    int i = table_find(t, hid, hlen);
    if (i < 0) {
        /* A chunk that is not base64 is a params error, reported before the
         * handle is looked at; the worker decodes it for a known handle. */
        uint8_t *data = xmalloc(base64_decoded_max(clen) + 1);
        size_t n = 0;
        char err[96];
        int rc = base64_decode(chunk, clen, data, &n, err, sizeof err);
        free(data);
        if (rc < 0) {
            rpc_reply_error(req, RPC_INVALID_PARAMS, "%s", err);
            return;
        }
        rpc_reply_error(req, RPC_NOT_FOUND, "unknown file handle `%s`", hid);
        return;
    }
    struct fs_work *fw = fw_new(req, OP_WRITE_BLOCK);
    fw->h = t->slots[i];
    fw->h->refs++;
    fw->offset = off;
    fw->rq.b64 = chunk;
    fw->rq.b64_len = clen;
    fw->b64_writable = writable;
    fw->audit_bytes = fs_audit_payload_bytes(chunk, clen);
    submit(fw);
}

static void handle_close(struct rpc_req *req)
{
    struct pdec d;
    pdec_begin(&d, req->params, "CloseParams");
    size_t hlen = 0;
    const char *hid = pdec_string_len(&d, "handleId", PDEC_REQUIRED, &hlen);
    if (rpc_reply_if_invalid(req, &d)) return;
    if (!rpc_check_ready(req)) return;
    if (!check_handle_id(req, hlen)) return;
    struct fs_table *t = table_get(req->conn, false);
    int i = table_find(t, hid, hlen);
    if (i >= 0) {
        handle_unref(t->slots[i]);
        t->slots[i] = NULL;
        t->count--;
    }
    rpc_reply_json(req, json_object());
}

const struct rpc_method fs_methods[] = {
    {"fs/readFile", "filesystem", handle_read_file},
    {"fs/writeFile", "filesystem", handle_write_file},
    {"fs/createDirectory", "filesystem", handle_create_dir},
    {"fs/getMetadata", "filesystem", handle_metadata},
    {"fs/canonicalize", "filesystem", handle_canonicalize},
    {"fs/readDirectory", "filesystem", handle_read_dir},
    {"fs/remove", "filesystem", handle_remove},
    {"fs/copy", "filesystem", handle_copy},
    {"fs/walk", "filesystem", handle_walk},
    {"fs/open", "filesystem", handle_open},
    {"fs/readBlock", "filesystem", handle_read_block},
    {"fs/writeBlock", "filesystem", handle_write_block},
    {"fs/close", "filesystem", handle_close},
    {NULL, NULL, NULL},
};

/* The payloads decoded where they arrived (rpc_param_payload). */
const struct rpc_payload fs_payloads[] = {
    {"fs/writeFile", "dataBase64"},
    {"fs/writeBlock", "chunk"},
    {NULL, NULL},
};
