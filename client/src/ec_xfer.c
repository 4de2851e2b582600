/* ec_xfer: whole files moved at the protocol's floor (ec_fs_download, ec_fs_upload).
 *
 * A transfer opens a handle (fs/open), keeps a window of fs/readBlock or fs/writeBlock
 * requests in flight (the server runs a connection's requests concurrently, so the
 * file's pread/pwrite, the base64 and the socket overlap instead of taking turns),
 * then closes it. The per-block cost is kept to what the bytes need:
 *  - out: each fs/writeBlock is written by hand (ec_msg_write_block), its base64
 *    encoded by the server's own SIMD codec straight into the buffer that becomes the
 *    WebSocket frame, masked there in place (ec_send_text_inplace) and sent;
 *  - in: each fs/readBlock reply is taken before the JSON parser (the feature's on_raw
 *    hook): its "chunk" is cut out (ec_msg_cut_b64), the small rest parsed, the base64
 *    decoded into the block's slot and the slots written to the file in order.
 * Before this, jansson's dump and parse of each 1.4 MB string were 70% of the
 * client's time (perf, docs/BENCHMARKS.md).
 *
 * Replies may come back in any order: a download keeps one slot per block of the
 * window and writes them with write(2) in file order, so fd may be a pipe. A transfer
 * belongs to one connection (handles do): a loss fails it. One transfer at a time per
 * client (c->xfer); requests of a transfer that ended early (an error) stay in the
 * pending table with xfer NULL, and their replies are dropped when they come.
 *
 * An upload replaces its target the way rsync does (upload_replacing): into a hidden
 * temporary beside it, renamed over it (fs/rename, ours) only once every block is
 * acknowledged, and removed on every other way out while the connection lives, so an
 * interrupted upload leaves the old file whole. */
#include "ec_internal.h"

#include "crypto/random.h"
#include "proto/base64.h"
#include "util/mem.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define XFER_BLOCK_MAX (1u << 20) /* fs/readBlock's and fs/writeBlock's limit */
#define XFER_WINDOW 8
#define XFER_WINDOW_MAX 64

struct xfer_slot {
    bool busy;      /* a request is in flight for it (download: or bytes wait in it) */
    bool ready;     /* download: the reply came, buf holds n bytes */
    bool eof;       /* download: the reply said eof */
    uint64_t block; /* which block (offset / block size) */
    size_t n;       /* bytes in buf (download) or sent (upload) */
    uint8_t *buf;   /* download: decoded bytes (owned; block + 4 bytes) */
};

struct ec_xfer {
    ec_client *c;
    bool download;
    char handle[32];
    size_t block;
    unsigned window;
    struct xfer_slot *slots; /* window of them (owned) */
    unsigned inflight;       /* requests sent and not answered */
    uint64_t done;           /* bytes written to fd / acknowledged by the server */
    bool failed;
    ec_error err;
};

static int xfer_fail(struct ec_xfer *x, ec_err_kind kind, int64_t code, const char *msg)
{
    if (!x->failed) {
        x->failed = true;
        ec_fail(&x->err, kind, code, "%s", msg);
    }
    return -(int)kind;
}

/* A block's bytes arrived (base64 from either path). */
static void read_block_done(struct ec_xfer *x, struct xfer_slot *s, const char *b64, size_t len,
                            bool eof)
{
    x->inflight--;
    if (len > base64_encoded_len(x->block)) {
        xfer_fail(x, EC_ERR_PROTOCOL, 0, "fs/readBlock returned more than was asked");
        return;
    }
    char why[64];
    size_t n = 0;
    if (base64_decode(b64, len, s->buf, &n, why, sizeof why) != 0 || n > x->block) {
        char m[128];
        snprintf(m, sizeof m, "bad base64 from the server: %s", why);
        xfer_fail(x, EC_ERR_PROTOCOL, 0, m);
        return;
    }
    s->n = n;
    s->eof = eof || n < x->block;
    s->ready = true;
}

static struct ec_xfer *xfer_of(struct ec_pending *pd)
{
    return pd->xfer && pd->xfer->c->xfer == pd->xfer ? pd->xfer : NULL;
}

static void xfer_on_reply(ec_client *c, struct ec_pending *pd, struct ec_msg *m)
{
    (void)c;
    struct ec_xfer *x = xfer_of(pd);
    if (!x) return;
    struct xfer_slot *s = &x->slots[pd->xfer_slot];
    if (m->kind != EC_MSG_RESPONSE) {
        x->inflight--;
        char msg[300];
        snprintf(msg, sizeof msg, "%s", m->err_message ? m->err_message : "error");
        xfer_fail(x, EC_ERR_SERVER, m->err_code, msg);
        return;
    }
    if (!x->download) {
        x->inflight--;
        x->done += s->n;
        s->busy = false;
        return;
    }
    /* A reply the fast path did not take (an escape in it): the same, from JSON. */
    json_t *chunk = json_object_get(m->result, "chunk");
    if (!json_is_string(chunk)) {
        x->inflight--;
        xfer_fail(x, EC_ERR_PROTOCOL, 0, "fs/readBlock reply without a chunk");
        return;
    }
    read_block_done(x, s, json_string_value(chunk), json_string_length(chunk),
                    json_is_true(json_object_get(m->result, "eof")));
}

/* fs/readBlock replies without a JSON tree of their base64. */
static bool xfer_on_raw(ec_client *c, const char *text, size_t len);

static void xfer_on_loss(ec_client *c)
{
    if (c->xfer) xfer_fail(c->xfer, EC_ERR_TRANSPORT, 0, "connection lost during the transfer");
}

static const struct ec_feature xfer_feature = {
    .on_raw = xfer_on_raw,
    .on_reply = xfer_on_reply,
    .on_loss = xfer_on_loss,
};

static bool xfer_on_raw(ec_client *c, const char *text, size_t len)
{
    struct ec_xfer *x = c->xfer;
    if (!x || !x->download || x->inflight == 0) return false;
    char rest[512];
    struct ec_b64_cut cut;
    if (!ec_msg_cut_b64(text, len, "chunk", rest, sizeof rest, &cut)) return false;
    struct ec_msg m;
    if (ec_msg_parse(rest, cut.rest_len, &m) != 0) return false;
    bool taken = false;
    if (m.kind == EC_MSG_RESPONSE && m.id_is_int) {
        for (struct ec_pending *pd = c->pending; pd; pd = pd->next) {
            if (pd->id != m.id || pd->kind != EC_PENDING_FEATURE || pd->owner != &xfer_feature)
                continue;
            if (xfer_of(pd))
                read_block_done(x, &x->slots[pd->xfer_slot], cut.b64, cut.b64_len,
                                json_is_true(json_object_get(m.result, "eof")));
            ec_pending_unlink_free(c, pd);
            taken = true;
            break;
        }
    }
    ec_msg_clear(&m);
    return taken;
}

/* ---- the two directions ------------------------------------------------------------ */

static struct ec_pending *block_request(struct ec_xfer *x, unsigned slot, const char *method)
{
    struct ec_pending *pd = ec_pending_new(x->c, EC_PENDING_FEATURE, method, NULL);
    pd->owner = &xfer_feature;
    pd->xfer = x;
    pd->xfer_slot = slot;
    return pd;
}

/* Waits for the server once (up to the call timeout since the last progress), then
 * tells the caller where things stand. */
static int xfer_wait(struct ec_xfer *x, int64_t *deadline, uint64_t before,
                     const ec_transfer_options *o)
{
    int left = ec_remaining(*deadline);
    if (left == 0) return xfer_fail(x, EC_ERR_TIMEOUT, 0, "the transfer stalled (timed out)");
    ec_error pe = {0};
    if (ec_pump(x->c, left, &pe) != 0) return xfer_fail(x, pe.kind, pe.code, pe.message);
    if (x->done != before)
        *deadline = ec_deadline(x->c->call_timeout_ms < 0 ? -1 : x->c->call_timeout_ms);
    if (o->progress && o->progress(o->progress_ud, x->done) != 0)
        return xfer_fail(x, EC_ERR_USAGE, 0, "transfer cancelled");
    return 0;
}

/* Writes the ready slots to fd in block order; true once the last block is written. */
static bool flush_slots(struct ec_xfer *x, int fd, uint64_t *write_block)
{
    for (;;) {
        struct xfer_slot *s = &x->slots[*write_block % x->window];
        if (!s->busy || !s->ready || s->block != *write_block) return false;
        const uint8_t *p = s->buf;
        for (size_t left = s->n; left > 0;) {
            ssize_t w = write(fd, p, left);
            if (w < 0 && errno == EINTR) continue;
            if (w <= 0) {
                char m[200];
                snprintf(m, sizeof m, "write: %s", strerror(w < 0 ? errno : EIO));
                xfer_fail(x, EC_ERR_USAGE, 0, m);
                return false;
            }
            p += w;
            left -= (size_t)w;
        }
        x->done += s->n;
        s->busy = s->ready = false;
        (*write_block)++;
        if (s->eof) return true;
    }
}

static void download_loop(struct ec_xfer *x, int fd, const ec_transfer_options *o)
{
    uint64_t next_block = 0, write_block = 0;
    bool end_seen = false; /* a reply said eof: no block past it is asked for */
    int64_t deadline = ec_deadline(x->c->call_timeout_ms < 0 ? -1 : x->c->call_timeout_ms);
    for (;;) {
        while (!x->failed && !end_seen && next_block - write_block < x->window) {
            unsigned i = (unsigned)(next_block % x->window);
            struct xfer_slot *s = &x->slots[i];
            struct ec_pending *pd = block_request(x, i, "fs/readBlock");
            char text[160];
            int n = snprintf(text, sizeof text,
                             "{\"id\":%lld,\"method\":\"fs/readBlock\",\"params\":{\"handleId\":"
                             "\"%s\",\"offset\":%llu,\"len\":%zu}}",
                             (long long)pd->id, x->handle,
                             (unsigned long long)(next_block * x->block), x->block);
            *s = (struct xfer_slot){.busy = true, .block = next_block, .buf = s->buf};
            ec_error se = {0};
            if (x->c->ml->send(x->c, text, (size_t)n, &se) != 0) {
                xfer_fail(x, se.kind, se.code, se.message);
                break;
            }
            pd->sent = true;
            x->inflight++;
            next_block++;
        }
        uint64_t flushed_from = write_block;
        if (!x->failed && flush_slots(x, fd, &write_block)) return;
        for (unsigned i = 0; i < x->window; i++)
            if (x->slots[i].ready && x->slots[i].eof) end_seen = true;
        /* Slots written out are asked for again before waiting: with the whole window
         * written at once (a fast fd such as /dev/null) nothing would be in flight,
         * and the wait would last until the server's next Ping. */
        if (!x->failed && write_block != flushed_from && !end_seen) continue;
        if (x->failed || xfer_wait(x, &deadline, x->done, o) != 0) return;
    }
}

/* Reads up to n bytes (fewer only at the end). A signal before any byte came is the
 * caller's (-1, EINTR): a slow pipe must not hold off a cancel. */
static ssize_t read_full(int fd, uint8_t *buf, size_t n)
{
    size_t got = 0;
    while (got < n) {
        ssize_t r = read(fd, buf + got, n - got);
        if (r < 0 && errno == EINTR && got > 0) continue;
        if (r < 0) return -1;
        if (r == 0) break;
        got += (size_t)r;
    }
    return (ssize_t)got;
}

static void upload_loop(struct ec_xfer *x, int fd, const ec_transfer_options *o)
{
    uint8_t *raw = xmalloc(x->block);
    size_t cap = EC_WS_HEADROOM + ec_msg_write_block_max(strlen(x->handle), x->block);
    char *msg = xmalloc(cap), *text = msg + EC_WS_HEADROOM;
    uint64_t off = 0;
    bool at_end = false;
    int64_t deadline = ec_deadline(x->c->call_timeout_ms < 0 ? -1 : x->c->call_timeout_ms);
    for (;;) {
        while (!x->failed && !at_end && x->inflight < x->window) {
            ssize_t n = read_full(fd, raw, x->block);
            if (n < 0 && errno == EINTR) {
                if (o->progress && o->progress(o->progress_ud, x->done) != 0)
                    xfer_fail(x, EC_ERR_USAGE, 0, "transfer cancelled");
                continue;
            }
            if (n < 0) {
                char m[200];
                snprintf(m, sizeof m, "read: %s", strerror(errno));
                xfer_fail(x, EC_ERR_USAGE, 0, m);
                break;
            }
            if ((size_t)n < x->block) at_end = true;
            if (n == 0) break;
            unsigned i = 0;
            while (x->slots[i].busy)
                i++;
            x->slots[i] = (struct xfer_slot){.busy = true, .n = (size_t)n};
            struct ec_pending *pd = block_request(x, i, "fs/writeBlock");
            size_t len = ec_msg_write_block(text, pd->id, x->handle, off, raw, (size_t)n);
            ec_error se = {0};
            if (ec_send_text_inplace(x->c, text, len, &se) != 0) {
                xfer_fail(x, se.kind, se.code, se.message);
                break;
            }
            pd->sent = true;
            x->inflight++;
            off += (uint64_t)n;
        }
        if (x->failed || (at_end && x->inflight == 0)) break;
        if (xfer_wait(x, &deadline, x->done, o) != 0) break;
    }
    free(raw);
    free(msg);
}

/* Open, run one direction, close; the one entry of both public calls. *opened (may be
 * NULL): whether fs/open made the file. */
static int xfer_run(ec_client *c, const char *path, int fd, bool download,
                    const ec_transfer_options *o, uint64_t *bytes, bool *opened, ec_error *err)
{
    ec_transfer_options def = {0};
    if (!o) o = &def;
    if (bytes) *bytes = 0;
    if (opened) *opened = false;
    if (c->xfer) return ec_fail(err, EC_ERR_USAGE, 0, "a transfer is already under way");
    if (c->dead) {
        if (err) *err = c->dead_err;
        return -(int)c->dead_err.kind;
    }
    struct ec_xfer x = {.c = c, .download = download};
    x.block = o->block && o->block < XFER_BLOCK_MAX ? o->block : XFER_BLOCK_MAX;
    x.window =
        o->window ? (o->window < XFER_WINDOW_MAX ? o->window : XFER_WINDOW_MAX) : XFER_WINDOW;
    snprintf(x.handle, sizeof x.handle, "ec-xfer-%u", ++c->xfer_counter);
    int rc = ec_fs_open(c, x.handle, path, !download, err);
    if (rc) return rc;
    if (opened) *opened = true;
    ec_client_use_feature(c, &xfer_feature);
    x.slots = xcalloc(x.window, sizeof *x.slots);
    for (unsigned i = 0; download && i < x.window; i++)
        x.slots[i].buf = xmalloc(x.block + 4);
    c->xfer = &x;
    if (download)
        download_loop(&x, fd, o);
    else
        upload_loop(&x, fd, o);
    c->xfer = NULL;
    for (struct ec_pending *pd = c->pending; pd; pd = pd->next)
        if (pd->xfer == &x) pd->xfer = NULL; /* a late reply is dropped */
    for (unsigned i = 0; download && i < x.window; i++)
        free(x.slots[i].buf);
    free(x.slots);
    if (bytes) *bytes = x.done;
    /* The handle goes either way (a failed transfer too, while the link lives); a
     * failed close after an upload means the bytes may not all be there. */
    ec_error ce = {0};
    int crc = !c->dead ? ec_fs_close(c, x.handle, &ce) : 0;
    if (x.failed) {
        if (err) *err = x.err;
        return -(int)x.err.kind;
    }
    if (crc && !download) {
        if (err) *err = ce;
        return crc;
    }
    return 0;
}

int ec_fs_download(ec_client *c, const char *path, int fd, const ec_transfer_options *o,
                   uint64_t *bytes, ec_error *err)
{
    return xfer_run(c, path, fd, true, o, bytes, NULL, err);
}

char *ec_temp_name(const char *path, char *out, size_t n)
{
    static const char digits[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
    const char *slash = strrchr(path, '/');
    const char *name = slash ? slash + 1 : path;
    int dir_len = (int)(name - path), name_len = (int)strlen(name);
    if (name_len > NAME_MAX - 24) name_len = NAME_MAX - 24; /* "." ".exec-client." 10 */
    uint8_t r[10];
    crypto_random_bytes(r, sizeof r);
    char suffix[sizeof r + 1];
    for (size_t i = 0; i < sizeof r; i++)
        suffix[i] = digits[r[i] % (sizeof digits - 1)];
    suffix[sizeof r] = '\0';
    int k = snprintf(out, n, "%.*s.%.*s.exec-client.%s", dir_len, path, name_len, name, suffix);
    return k > 0 && (size_t)k < n ? out : NULL;
}

/* The temporary of an upload that did not complete: removed while the connection
 * lives (a cancel's too: the blocks in flight write to its handle, not its name);
 * else err says where it is left. */
static void temp_discard(ec_client *c, const char *tmp, ec_error *err)
{
    if (!c->dead && ec_fs_remove(c, tmp, false, true, NULL) == 0) return;
    if (err) {
        /* A name too long for the message is cut: the message stays one line. */
        size_t len = strlen(err->message);
        if (snprintf(err->message + len, sizeof err->message - len, "; the part sent is left in %s",
                     tmp) < 0)
            err->message[len] = '\0';
    }
}

/* Whether a failed fs/open of the temporary was the directory's refusal (it lets us
 * write the file but add none beside it): then the file is written in place. */
static bool dir_refused(int rc, const ec_error *e)
{
    return rc == -EC_ERR_SERVER &&
           (strstr(e->message, "(os error 13)") || strstr(e->message, "(os error 1)") ||
            strstr(e->message, "(os error 30)"));
}

/* rsync's way (see ec_fs_upload): the temporary beside the file `path` names (through
 * a symbolic link), renamed over it once complete and flushed, or discarded. */
static int upload_replacing(ec_client *c, int fd, const char *path, const ec_transfer_options *o,
                            uint64_t *bytes, ec_error *err)
{
    ec_metadata md;
    ec_error e = {0};
    char *real = NULL, tmp[PATH_MAX + 64];
    uint64_t sent = 0;
    bool exists = ec_fs_get_metadata(c, path, &md, &e) == 0, opened = false;
    int rc = exists || e.kind == EC_ERR_SERVER ? 0 : -(int)e.kind;
    if (rc == 0 && exists && md.is_directory)
        rc = ec_fail(&e, EC_ERR_SERVER, -32600, "path `%s` is not a file", path);
    if (rc == 0 && exists && md.is_symlink && ec_fs_canonicalize(c, path, &real, NULL) != 0)
        real = NULL;
    const char *target = real ? real : path;
    if (rc == 0 && !ec_temp_name(target, tmp, sizeof tmp))
        rc = ec_fail(&e, EC_ERR_USAGE, 0, "`%s`: path too long", target);
    if (rc == 0) rc = xfer_run(c, tmp, fd, false, o, &sent, &opened, &e);
    if (rc != 0 && !opened && exists && dir_refused(rc, &e)) {
        rc = xfer_run(c, target, fd, false, o, &sent, NULL, &e);
    } else if (opened) {
        /* Cancelled after the last block (a signal at the end of a pipe's input) is
         * cancelled all the same: nothing replaces the old file. */
        if (rc == 0 && o && o->progress && o->progress(o->progress_ud, sent) != 0)
            rc = ec_fail(&e, EC_ERR_USAGE, 0, "transfer cancelled");
        if (rc == 0)
            rc = ec_fs_rename(c, tmp, target, EC_RENAME_KEEP_ATTRIBUTES | EC_RENAME_FSYNC, &e);
        if (rc != 0) temp_discard(c, tmp, &e);
    }
    if (bytes) *bytes = sent;
    if (rc != 0 && err) *err = e;
    free(real);
    return rc;
}

int ec_fs_upload(ec_client *c, int fd, const char *path, const ec_transfer_options *o,
                 uint64_t *bytes, ec_error *err)
{
    if (!ec_client_has_capability(c, "fileWriteStreaming"))
        return ec_fail(err, EC_ERR_USAGE, 0,
                       "the server does not support this (no fileWriteStreaming capability)");
    if (!ec_client_has_capability(c, "fsRename"))
        return xfer_run(c, path, fd, false, o, bytes, NULL, err);
    return upload_replacing(c, fd, path, o, bytes, err);
}
