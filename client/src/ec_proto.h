/* ec_proto: the sans-I/O core of the client library.
 *
 * Three pure pieces that take bytes or JSON in and give bytes or structs out, so the
 * unit tests (and the fault-injecting proxy of the live tests) can drive them without
 * a socket:
 *  - ec_ws_encode: (masked) frames out over proto/ws_frame (frames in go through
 *    proto/ws_reader, the server's own receive state machine, in the client role);
 *  - ec_msg_*: JSON-RPC request encoding and incoming-message classification;
 *  - ec_track_*: the per-process event tracker: seq de-duplication, gap detection,
 *    completion from pushed events, and when one process/read is needed.
 * Nothing here allocates global state; every struct is owned by its caller. */
#ifndef EC_PROTO_H
#define EC_PROTO_H

#include "execclient.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "proto/ws_frame.h"

/* ---- WebSocket frames out (the header codec is the server's: proto/ws_frame.h) ---- */

/* Appends one frame (fin=1) with the payload masked by `mask` (NULL: unmasked, as a
 * server would send) to *out (grown with realloc; *out_len and *out_cap updated). */
void ec_ws_encode(uint8_t **out, size_t *out_len, size_t *out_cap, int opcode, const void *payload,
                  size_t n, const uint8_t *mask);

/* ---- JSON-RPC messages ---- */

/* Compact JSON text of {"id":id,"method":m,"params":p}. Borrows params. Caller frees. */
char *ec_msg_request(int64_t id, const char *method, json_t *params);

enum ec_msg_kind {
    EC_MSG_INVALID,
    EC_MSG_RESPONSE,
    EC_MSG_ERROR,
    EC_MSG_NOTIFICATION,
    EC_MSG_REQUEST
};

struct ec_msg {
    enum ec_msg_kind kind;
    json_t *root; /* owned: the whole message */
    bool id_is_int;
    int64_t id;         /* integer ids (ours); others are not matched */
    const char *method; /* borrowed from root */
    json_t *params;     /* borrowed */
    json_t *result;     /* borrowed */
    int64_t err_code;
    const char *err_message; /* borrowed */
};

/* Classifies one incoming message. Returns 0 (msg->root owned by msg; release with
 * ec_msg_clear) or -1 when it is not a JSON object. */
int ec_msg_parse(const char *text, size_t len, struct ec_msg *msg);
void ec_msg_clear(struct ec_msg *msg);

/* The hot message of TCP forwarding, found without a JSON parser: our server writes
 * every tcp/data notification as exactly
 *   {"method":"tcp/data","params":{"streamId":"ID","dataBase64":"B64","eof":false}}
 * (eof true or false), and parsing 64 KiB of base64 through jansson cost the client
 * more than everything else of a forwarded download. Returns 1 with the parts
 * (pointing into text), or 0 for any other text (the caller parses it in full: an
 * escape in the id, other members, another order). */
struct ec_tcp_data_view {
    const char *id;
    size_t id_len;
    const char *b64;
    size_t b64_len;
    bool eof;
};
int ec_msg_tcp_data_view(const char *text, size_t len, struct ec_tcp_data_view *v);

/* The hot message of process output, found without a JSON parser: every server we
 * speak to (ours writes it by hand, and the reference alike) sends each chunk as
 *   {"method":"process/output","params":{"processId":"ID","seq":N,"stream":"S",
 *    "chunk":"B64"}}
 * or, for a viewer (process/attach), with "sessionId":"SID", as the first member of
 * the params. Parsing each 11 KB chunk through jansson cost the client about 4 s of
 * CPU per 256 MiB of output; this is a scan over the bytes. Returns 1 with the parts
 * (ids and base64 pointing into text), or 0 for any other text, which the caller
 * parses in full (an escape or a control byte in an id, other members, another order,
 * a seq that is not a plain positive integer, an unknown stream). */
struct ec_output_view {
    const char *session_id; /* NULL when absent */
    size_t session_id_len;
    const char *process_id;
    size_t process_id_len;
    uint64_t seq;
    ec_stream stream;
    const char *b64;
    size_t b64_len;
};
int ec_msg_output_view(const char *text, size_t len, struct ec_output_view *v);

/* The replies that carry a file's bytes (fs/readBlock's "chunk", fs/readFile's
 * "dataBase64") read without putting the base64 through a JSON parser: the string
 * value of member `key` is cut out and the rest of the message, with that value
 * emptied, is copied into rest (at most rest_cap bytes, NUL-terminated) for the JSON
 * parser, which then sees a small object. Returns 1 with out->b64 and out->b64_len pointing into
 * text, or 0 (no such member, an escape in the value, or a rest too large) when the
 * caller must parse the text in full. The key is looked for as `"key":"` anywhere,
 * so the caller checks that the rest parses as the reply it expects. */
struct ec_b64_cut {
    const char *b64;
    size_t b64_len;
    size_t rest_len;
};
int ec_msg_cut_b64(const char *text, size_t len, const char *key, char *rest, size_t rest_cap,
                   struct ec_b64_cut *out);

/* fs/writeBlock written by hand: {"id":ID,"method":"fs/writeBlock","params":{"handleId":
 * "HANDLE","offset":OFF,"chunk":"<base64 of data>"}} into out, which holds
 * ec_msg_write_block_max(strlen(handle), n) bytes. The handle must need no JSON
 * escape (the caller chose it). Returns the length written (no NUL). */
size_t ec_msg_write_block_max(size_t handle_len, size_t n);
size_t ec_msg_write_block(char *out, int64_t id, const char *handle, uint64_t offset,
                          const void *data, size_t n);

/* ---- per-process event tracking ---- */

/* Where output is decoded: blocks that chunks are decoded into one after another, so
 * chunks received in a row lie back to back in memory and a consumer can take them as
 * one span (ec_track_pop_run: one write(2) for many chunks). A block is shared by the
 * events whose bytes it holds and by its tracker while it appends; the last holder
 * frees it, and a block only its tracker holds is written again from its start (the
 * bytes stay in the cache). */
struct ec_oblock {
    unsigned refs;
    size_t cap, used;
    uint8_t data[];
};

struct ec_pevent {
    struct ec_pevent *next;
    ec_event_type type;
    uint64_t seq;
    ec_stream stream;
    uint8_t *data; /* output: inside blk */
    size_t len;
    struct ec_oblock *blk; /* holds data (one reference per event), or NULL */
    int exit_code;
    bool sandbox_denied;
};

struct ec_track {
    uint64_t last_seq;        /* every event with seq <= last_seq has been taken in */
    struct ec_pevent *held;   /* out-of-order events past a gap, ascending seq */
    struct ec_pevent *q_head; /* ready for the user, in order */
    struct ec_pevent *q_tail;
    bool exit_queued, closed_queued;
    bool exit_unknown;            /* the exit lacked sandboxDenied (an older server) */
    struct ec_pevent *exit_wait;  /* that exit, held until a read tells sandboxDenied */
    struct ec_pevent *close_wait; /* close, held behind exit_wait */
    bool need_read;               /* a gap, an exit without sandboxDenied, a resume, lag */
    bool read_in_flight;
    struct ec_oblock *tail; /* the block output is decoded into next (one reference) */
    size_t queued_bytes;    /* output bytes waiting in q_head.. for the user */
    size_t max_queued;      /* over this the tracker lags: 0 means EC_TRACK_MAX_QUEUED */
    bool lagged;            /* pushed events are being dropped until the user catches up */
    uint64_t reads_sent, duplicates_dropped, gaps_detected, resyncs, lags;
};

/* A consumer that falls this far behind stops buffering pushed output; once it has
 * caught up, one process/read(afterSeq) fetches what was skipped (from the server's
 * retained window). Bounds the client's memory per process. */
#define EC_TRACK_MAX_QUEUED (32u << 20)

void ec_track_init(struct ec_track *t);
void ec_track_free(struct ec_track *t);

/* Feeds one process/output|exited|closed notification's params (borrowed). Returns 0,
 * or -1 when the params are malformed (the notification is ignored). */
int ec_track_on_notification(struct ec_track *t, const char *method, json_t *params);

/* Feeds one process/output chunk already cut out of its message (ec_msg_output_view):
 * the base64 is decoded straight into the tracker's output block. 0, or -1 when the
 * base64 is bad (the notification is ignored, as a malformed one is). */
int ec_track_on_output(struct ec_track *t, uint64_t seq, ec_stream stream, const char *b64,
                       size_t b64_len);

/* Applies a process/read result (borrowed): output chunks past last_seq in order, then
 * exited/closed, then the held events that follow. Clears need_read/read_in_flight. */
int ec_track_on_read_result(struct ec_track *t, json_t *result);

/* The read failed (transport or server): allow another one later. */
void ec_track_on_read_failed(struct ec_track *t);

/* After a reconnect: queue an EC_EVENT_RESYNC and ask for one catch-up read. */
void ec_track_on_resume(struct ec_track *t);

/* Whether a process/read should be sent now, and its params (new reference). */
bool ec_track_wants_read(const struct ec_track *t);
json_t *ec_track_read_params(struct ec_track *t, const char *process_id);

/* Pops the next ready event (caller frees it with ec_pevent_free) or NULL. */
struct ec_pevent *ec_track_pop(struct ec_track *t);
/* Like ec_track_pop, but an output event takes the output events queued behind it
 * along while they are of the same stream and continue its bytes in memory: the run
 * is the returned event and its `next` chain (freed with ec_pevent_free_list), its
 * bytes the *len at the first one's data. */
struct ec_pevent *ec_track_pop_run(struct ec_track *t, size_t *len);
void ec_pevent_free(struct ec_pevent *e);
void ec_pevent_free_list(struct ec_pevent *e);

/* Decoded stream name, or -1. */
int ec_stream_parse(const char *s);

#endif
