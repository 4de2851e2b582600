/* ec_proto: WebSocket frame encoding, JSON-RPC message encode/classify, and the
 * per-process event tracker (see ec_proto.h). No I/O anywhere in this file. */
#include "ec_proto.h"

#include "proto/base64.h"
#include "util/mem.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- WebSocket frames ---------------------------------------------------------- */

void ec_ws_encode(uint8_t **out, size_t *out_len, size_t *out_cap, int opcode, const void *payload,
                  size_t n, const uint8_t *mask)
{
    size_t need = *out_len + 14 + n;
    if (need > *out_cap) {
        size_t cap = *out_cap ? *out_cap : 256;
        while (cap < need)
            cap *= 2;
        *out = xrealloc(*out, cap);
        *out_cap = cap;
    }
    uint8_t *p = *out + *out_len;
    p += ws_frame_encode(p, true, opcode, n, mask);
    if (n) memcpy(p, payload, n);
    if (mask) ws_frame_unmask(p, n, mask);
    p += n;
    *out_len = (size_t)(p - *out);
}

/* ---- JSON-RPC messages ----------------------------------------------------------- */

char *ec_msg_request(int64_t id, const char *method, json_t *params)
{
    json_t *o = json_object();
    json_object_set_new(o, "id", json_integer(id));
    json_object_set_new(o, "method", json_string(method));
    if (params) json_object_set(o, "params", params);
    char *s = json_dumps(o, JSON_COMPACT);
    json_decref(o);
    return s;
}

/* Consumes the literal `lit` at *p (within end). */
static bool eat(const char **p, const char *end, const char *lit)
{
    size_t n = strlen(lit);
    if ((size_t)(end - *p) < n || memcmp(*p, lit, n) != 0) return false;
    *p += n;
    return true;
}

/* A JSON string's body that needs no unescaping and holds no control byte (else the
 * full parser decides): *s and *n, *p left after its closing quote. */
static bool plain_string(const char **p, const char *end, const char **s, size_t *n)
{
    const char *q = memchr(*p, '"', (size_t)(end - *p));
    if (!q) return false;
    for (const char *c = *p; c < q; c++)
        if (*c == '\\' || (unsigned char)*c < 0x20) return false;
    *s = *p;
    *n = (size_t)(q - *p);
    *p = q + 1;
    return true;
}

/* A base64 string's body, running to the next quote: *b64 and *n, *p left on the
 * quote. The decoder checks the alphabet; an escape (which base64 never needs) sends
 * the message to the full parser. */
static bool plain_b64(const char **p, const char *end, const char **b64, size_t *n)
{
    const char *q = memchr(*p, '"', (size_t)(end - *p));
    if (!q || memchr(*p, '\\', (size_t)(q - *p))) return false;
    *b64 = *p;
    *n = (size_t)(q - *p);
    *p = q;
    return true;
}

int ec_msg_tcp_data_view(const char *text, size_t len, struct ec_tcp_data_view *v)
{
    const char *p = text, *end = text + len;
    if (!eat(&p, end, "{\"method\":\"tcp/data\",\"params\":{\"streamId\":\"")) return 0;
    if (!plain_string(&p, end, &v->id, &v->id_len)) return 0;
    if (!eat(&p, end, ",\"dataBase64\":\"") || !plain_b64(&p, end, &v->b64, &v->b64_len)) return 0;
    if (!eat(&p, end, "\",\"eof\":")) return 0;
    if (eat(&p, end, "true"))
        v->eof = true;
    else if (eat(&p, end, "false"))
        v->eof = false;
    else
        return 0;
    return eat(&p, end, "}}") && p == end;
}

int ec_msg_output_view(const char *text, size_t len, struct ec_output_view *v)
{
    const char *p = text, *end = text + len;
    if (!eat(&p, end, "{\"method\":\"process/output\",\"params\":{\"")) return 0;
    v->session_id = NULL;
    v->session_id_len = 0;
    if (eat(&p, end, "sessionId\":\"")) {
        if (!plain_string(&p, end, &v->session_id, &v->session_id_len) || !eat(&p, end, ",\""))
            return 0;
    }
    if (!eat(&p, end, "processId\":\"") ||
        !plain_string(&p, end, &v->process_id, &v->process_id_len) || !eat(&p, end, ",\"seq\":"))
        return 0;
    /* A plain positive integer that fits (what the server writes); anything else goes
     * to the parser, which decides. */
    if (p == end || *p < '1' || *p > '9') return 0;
    uint64_t seq = 0;
    for (int digits = 0; p < end && *p >= '0' && *p <= '9'; p++) {
        if (++digits > 18) return 0;
        seq = seq * 10 + (uint64_t)(*p - '0');
    }
    v->seq = seq;
    if (eat(&p, end, ",\"stream\":\"stdout\""))
        v->stream = EC_STREAM_STDOUT;
    else if (eat(&p, end, ",\"stream\":\"stderr\""))
        v->stream = EC_STREAM_STDERR;
    else if (eat(&p, end, ",\"stream\":\"pty\""))
        v->stream = EC_STREAM_PTY;
    else
        return 0;
    if (!eat(&p, end, ",\"chunk\":\"") || !plain_b64(&p, end, &v->b64, &v->b64_len)) return 0;
    return eat(&p, end, "\"}}") && p == end;
}

int ec_msg_cut_b64(const char *text, size_t len, const char *key, char *rest, size_t rest_cap,
                   struct ec_b64_cut *out)
{
    char pat[48];
    int pn = snprintf(pat, sizeof pat, "\"%s\":\"", key);
    if (pn <= 0 || (size_t)pn >= sizeof pat) return 0;
    const char *k = memmem(text, len, pat, (size_t)pn);
    if (!k) return 0;
    const char *v = k + pn, *end = text + len;
    /* The base64 runs to the next quote; an escape (which base64 never needs) sends
     * the message to the full parser. The decoder checks the alphabet. */
    const char *q = memchr(v, '"', (size_t)(end - v));
    if (!q || memchr(v, '\\', (size_t)(q - v))) return 0;
    size_t head = (size_t)(v - text), tail = (size_t)(end - q);
    if (head + tail + 1 > rest_cap) return 0;
    memcpy(rest, text, head);
    memcpy(rest + head, q, tail);
    rest[head + tail] = 0;
    out->b64 = v;
    out->b64_len = (size_t)(q - v);
    out->rest_len = head + tail;
    return 1;
}

size_t ec_msg_write_block_max(size_t handle_len, size_t n)
{
    return 128 + handle_len + base64_encoded_len(n);
}

size_t ec_msg_write_block(char *out, int64_t id, const char *handle, uint64_t offset,
                          const void *data, size_t n)
{
    int h = sprintf(out,
                    "{\"id\":%lld,\"method\":\"fs/writeBlock\",\"params\":{\"handleId\":\"%s\","
                    "\"offset\":%llu,\"chunk\":\"",
                    (long long)id, handle, (unsigned long long)offset);
    size_t o = (size_t)h + base64_encode(data, n, out + h);
    memcpy(out + o, "\"}}", 3);
    return o + 3;
}

int ec_msg_parse(const char *text, size_t len, struct ec_msg *msg)
{
    memset(msg, 0, sizeof *msg);
    msg->kind = EC_MSG_INVALID;
    json_t *root = json_loadb(text, len, JSON_ALLOW_NUL, NULL);
    if (!root) return -1;
    if (!json_is_object(root)) {
        json_decref(root);
        return -1;
    }
    msg->root = root;
    json_t *id = json_object_get(root, "id");
    if (json_is_integer(id)) {
        msg->id_is_int = true;
        msg->id = json_integer_value(id);
    }
    json_t *method = json_object_get(root, "method");
    if (json_is_string(method)) {
        msg->method = json_string_value(method);
        msg->params = json_object_get(root, "params");
        msg->kind = id ? EC_MSG_REQUEST : EC_MSG_NOTIFICATION;
        return 0;
    }
    json_t *result = json_object_get(root, "result");
    if (result) {
        msg->result = result;
        msg->kind = EC_MSG_RESPONSE;
        return 0;
    }
    json_t *error = json_object_get(root, "error");
    if (json_is_object(error)) {
        msg->kind = EC_MSG_ERROR;
        msg->err_code = json_integer_value(json_object_get(error, "code"));
        const char *m = json_string_value(json_object_get(error, "message"));
        msg->err_message = m ? m : "(no message)";
    }
    return 0;
}

void ec_msg_clear(struct ec_msg *msg)
{
    json_decref(msg->root);
    memset(msg, 0, sizeof *msg);
}

/* ---- per-process event tracking ------------------------------------------------- */

int ec_stream_parse(const char *s)
{
    if (!s) return -1;
    if (strcmp(s, "stdout") == 0) return EC_STREAM_STDOUT;
    if (strcmp(s, "stderr") == 0) return EC_STREAM_STDERR;
    if (strcmp(s, "pty") == 0) return EC_STREAM_PTY;
    return -1;
}

void ec_track_init(struct ec_track *t)
{
    memset(t, 0, sizeof *t);
}

/* Output blocks start small (a quiet process keeps 16 KiB) and double, up to 1 MiB
 * (what one pump of the client reads), while the consumer is behind. */
#define EC_OBLOCK_MIN (16u << 10)
#define EC_OBLOCK_MAX (1u << 20)

static void oblock_unref(struct ec_oblock *b)
{
    if (b && --b->refs == 0) free(b);
}

/* Room for n bytes at the end of the tracker's block: the block written again from
 * its start when nothing else holds it, or a new one. */
static uint8_t *oblock_room(struct ec_track *t, size_t n)
{
    struct ec_oblock *b = t->tail;
    if (b && b->refs == 1) b->used = 0;
    if (!b || b->cap - b->used < n) {
        size_t cap = b ? 2 * b->cap : EC_OBLOCK_MIN;
        if (cap > EC_OBLOCK_MAX) cap = EC_OBLOCK_MAX;
        if (cap < n) cap = n;
        oblock_unref(b);
        b = xmalloc(sizeof *b + cap);
        b->refs = 1;
        b->cap = cap;
        b->used = 0;
        t->tail = b;
    }
    return b->data + b->used;
}

void ec_pevent_free(struct ec_pevent *e)
{
    if (!e) return;
    if (e->blk)
        oblock_unref(e->blk);
    else
        free(e->data);
    free(e);
}

void ec_pevent_free_list(struct ec_pevent *e)
{
    while (e) {
        struct ec_pevent *next = e->next;
        ec_pevent_free(e);
        e = next;
    }
}

void ec_track_free(struct ec_track *t)
{
    ec_pevent_free_list(t->held);
    ec_pevent_free_list(t->q_head);
    ec_pevent_free(t->exit_wait);
    ec_pevent_free(t->close_wait);
    oblock_unref(t->tail);
    memset(t, 0, sizeof *t);
}

/* Appends a ready event. Exit and close are queued at most once each, and nothing is
 * queued after close (a late duplicate must not follow the last event). */
static void enqueue(struct ec_track *t, struct ec_pevent *e)
{
    if (t->closed_queued || (e->type == EC_EVENT_EXITED && t->exit_queued)) {
        t->duplicates_dropped++;
        ec_pevent_free(e);
        return;
    }
    if (e->type == EC_EVENT_EXITED && t->exit_unknown) {
        /* An older server's exit: hold it (and the close after it) until one read has
         * told the whole outcome. */
        t->exit_queued = true;
        t->exit_wait = e;
        t->need_read = true;
        return;
    }
    if (e->type == EC_EVENT_CLOSED && t->exit_wait) {
        ec_pevent_free(t->close_wait);
        t->close_wait = e;
        return;
    }
    if (e->type == EC_EVENT_EXITED) t->exit_queued = true;
    if (e->type == EC_EVENT_CLOSED) {
        t->closed_queued = true;
        t->need_read = false;
    }
    t->queued_bytes += e->len;
    e->next = NULL;
    if (t->q_tail)
        t->q_tail->next = e;
    else
        t->q_head = e;
    t->q_tail = e;
}

/* Moves held events that now continue the contiguous prefix into the queue, and
 * drops held ones already covered. */
static void drain_held(struct ec_track *t)
{
    while (t->held) {
        struct ec_pevent *e = t->held;
        if (e->seq <= t->last_seq) {
            t->held = e->next;
            t->duplicates_dropped++;
            ec_pevent_free(e);
            continue;
        }
        if (e->seq != t->last_seq + 1) break;
        t->held = e->next;
        t->last_seq = e->seq;
        enqueue(t, e);
    }
}

/* Takes in one event with a server seq: drop a duplicate, queue the next one in order,
 * or hold one past a gap (and ask for a read). */
static void take(struct ec_track *t, struct ec_pevent *e)
{
    size_t max = t->max_queued ? t->max_queued : EC_TRACK_MAX_QUEUED;
    if (!t->lagged && e->type == EC_EVENT_OUTPUT && !t->closed_queued &&
        t->queued_bytes + e->len > max) {
        t->lagged = true;
        t->lags++;
    }
    if (t->lagged) {
        /* Everything pushed while lagging is dropped; the catch-up read recovers it. */
        ec_pevent_free(e);
        return;
    }
    if (e->seq <= t->last_seq) {
        t->duplicates_dropped++;
        ec_pevent_free(e);
        return;
    }
    if (e->seq == t->last_seq + 1) {
        t->last_seq = e->seq;
        enqueue(t, e);
        drain_held(t);
        return;
    }
    /* Past a gap: keep it sorted in the held list, unless it is a duplicate there. */
    struct ec_pevent **pp = &t->held;
    while (*pp && (*pp)->seq < e->seq)
        pp = &(*pp)->next;
    if (*pp && (*pp)->seq == e->seq) {
        t->duplicates_dropped++;
        ec_pevent_free(e);
        return;
    }
    e->next = *pp;
    *pp = e;
    if (!t->need_read && !t->read_in_flight) t->gaps_detected++;
    t->need_read = true;
}

static struct ec_pevent *pevent_new(ec_event_type type, uint64_t seq)
{
    struct ec_pevent *e = xcalloc(1, sizeof *e);
    e->type = type;
    e->seq = seq;
    return e;
}

/* An output event of stream with b64 decoded into the tracker's block, or NULL when
 * the base64 is bad. */
static struct ec_pevent *output_event(struct ec_track *t, uint64_t seq, ec_stream stream,
                                      const char *b64, size_t n)
{
    uint8_t *dst = oblock_room(t, base64_decoded_max(n));
    char detail[64];
    size_t len = 0;
    if (base64_decode(b64, n, dst, &len, detail, sizeof detail) != 0) return NULL;
    struct ec_pevent *e = pevent_new(EC_EVENT_OUTPUT, seq);
    e->stream = stream;
    e->data = dst;
    e->len = len;
    e->blk = t->tail;
    e->blk->refs++;
    e->blk->used += len;
    return e;
}

int ec_track_on_output(struct ec_track *t, uint64_t seq, ec_stream stream, const char *b64,
                       size_t b64_len)
{
    if (seq < 1) return -1;
    /* What take() would drop is not decoded first. */
    if (t->lagged) return 0;
    if (seq <= t->last_seq) {
        t->duplicates_dropped++;
        return 0;
    }
    struct ec_pevent *e = output_event(t, seq, stream, b64, b64_len);
    if (!e) return -1;
    take(t, e);
    return 0;
}

int ec_track_on_notification(struct ec_track *t, const char *method, json_t *params)
{
    json_t *jseq = json_object_get(params, "seq");
    if (!json_is_integer(jseq) || json_integer_value(jseq) < 1) return -1;
    uint64_t seq = (uint64_t)json_integer_value(jseq);
    if (strcmp(method, "process/output") == 0) {
        int stream = ec_stream_parse(json_string_value(json_object_get(params, "stream")));
        json_t *chunk = json_object_get(params, "chunk");
        if (stream < 0 || !json_is_string(chunk)) return -1;
        return ec_track_on_output(t, seq, (ec_stream)stream, json_string_value(chunk),
                                  json_string_length(chunk));
    }
    if (strcmp(method, "process/exited") == 0) {
        json_t *code = json_object_get(params, "exitCode");
        if (!json_is_integer(code)) return -1;
        struct ec_pevent *e = pevent_new(EC_EVENT_EXITED, seq);
        e->exit_code = (int)json_integer_value(code);
        json_t *denied = json_object_get(params, "sandboxDenied");
        e->sandbox_denied = json_is_true(denied);
        /* An older server omits sandboxDenied: only a read tells the whole outcome. */
        if (!json_is_boolean(denied) && !t->exit_queued) t->exit_unknown = true;
        take(t, e);
        return 0;
    }
    if (strcmp(method, "process/closed") == 0) {
        take(t, pevent_new(EC_EVENT_CLOSED, seq));
        return 0;
    }
    return -1;
}

int ec_track_on_read_result(struct ec_track *t, json_t *result)
{
    t->read_in_flight = false;
    json_t *chunks = json_object_get(result, "chunks");
    json_t *next = json_object_get(result, "nextSeq");
    if (!json_is_array(chunks) || !json_is_integer(next)) {
        t->need_read = true;
        return -1;
    }
    size_t i;
    json_t *c;
    json_array_foreach(chunks, i, c)
    {
        json_t *jseq = json_object_get(c, "seq");
        int stream = ec_stream_parse(json_string_value(json_object_get(c, "stream")));
        json_t *chunk = json_object_get(c, "chunk");
        if (!json_is_integer(jseq) || stream < 0 || !json_is_string(chunk)) continue;
        uint64_t seq = (uint64_t)json_integer_value(jseq);
        if (seq <= t->last_seq) {
            t->duplicates_dropped++;
            continue;
        }
        struct ec_pevent *e = output_event(t, seq, (ec_stream)stream, json_string_value(chunk),
                                           json_string_length(chunk));
        if (!e) continue;
        /* Chunks skip the seqs of exit/close, so take them as they come. */
        t->last_seq = seq;
        enqueue(t, e);
    }
    uint64_t nx = (uint64_t)json_integer_value(next);
    bool exited = json_is_true(json_object_get(result, "exited"));
    bool closed = json_is_true(json_object_get(result, "closed"));
    /* Held exit/close events at or below nextSeq-1 are superseded by the flags below,
     * but a held exit carries the same data: let it through first when in range. */
    /* A result that says exited tells sandboxDenied too: no exit needs another read. */
    if (exited) t->exit_unknown = false;
    if (exited && !t->exit_queued) {
        struct ec_pevent *e = pevent_new(EC_EVENT_EXITED, 0);
        e->exit_code = (int)json_integer_value(json_object_get(result, "exitCode"));
        e->sandbox_denied = json_is_true(json_object_get(result, "sandboxDenied"));
        enqueue(t, e);
    }
    if (t->exit_wait && exited) {
        /* The read answered what the old server's exit left out. */
        struct ec_pevent *x = t->exit_wait, *cl = t->close_wait;
        t->exit_wait = t->close_wait = NULL;
        x->sandbox_denied = json_is_true(json_object_get(result, "sandboxDenied"));
        t->exit_queued = false;
        enqueue(t, x);
        if (cl) enqueue(t, cl);
    }
    if (nx > 0 && nx - 1 > t->last_seq) t->last_seq = nx - 1;
    if (closed) enqueue(t, pevent_new(EC_EVENT_CLOSED, nx ? nx - 1 : 0));
    drain_held(t);
    /* Anything still held is past another gap that opened after this read. */
    t->need_read = t->held != NULL && !t->closed_queued;
    return 0;
}

void ec_track_on_read_failed(struct ec_track *t)
{
    t->read_in_flight = false;
    t->need_read = !t->closed_queued;
}

void ec_track_on_resume(struct ec_track *t)
{
    if (t->closed_queued) return;
    t->resyncs++;
    t->read_in_flight = false;
    t->need_read = true;
    struct ec_pevent *e = pevent_new(EC_EVENT_RESYNC, t->last_seq);
    /* The resync marker is not a server event: append it without the seq checks. */
    if (t->q_tail)
        t->q_tail->next = e;
    else
        t->q_head = e;
    t->q_tail = e;
}

bool ec_track_wants_read(const struct ec_track *t)
{
    return t->need_read && !t->read_in_flight && !t->closed_queued;
}

json_t *ec_track_read_params(struct ec_track *t, const char *process_id)
{
    t->read_in_flight = true;
    t->reads_sent++;
    return json_pack("{s:s, s:I, s:i}", "processId", process_id, "afterSeq",
                     (json_int_t)t->last_seq, "waitMs", 0);
}

struct ec_pevent *ec_track_pop(struct ec_track *t)
{
    struct ec_pevent *e = t->q_head;
    if (!e) return NULL;
    t->q_head = e->next;
    if (!t->q_head) t->q_tail = NULL;
    e->next = NULL;
    t->queued_bytes -= e->len;
    /* Caught up after lagging: one read fetches what was dropped meanwhile. */
    if (t->lagged && !t->q_head) {
        t->lagged = false;
        t->need_read = true;
    }
    return e;
}

struct ec_pevent *ec_track_pop_run(struct ec_track *t, size_t *len)
{
    struct ec_pevent *e = ec_track_pop(t);
    if (!e) return NULL;
    *len = e->len;
    struct ec_pevent *last = e;
    while (e->type == EC_EVENT_OUTPUT && t->q_head && t->q_head->type == EC_EVENT_OUTPUT &&
           t->q_head->stream == e->stream && t->q_head->blk == last->blk &&
           t->q_head->data == last->data + last->len) {
        last->next = ec_track_pop(t);
        last = last->next;
        *len += last->len;
    }
    return e;
}
