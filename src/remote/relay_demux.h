/* relay_demux: the executor's virtual streams on one physical rendezvous socket
 * (REMOTE.md §2.6).
 *
 * Every binary message from rendezvous is one RelayMessageFrame. A `handshake`
 * frame opens a pending stream: Noise msg 1 is read (the prologue binds the
 * environment, this registration and the stream id), its payload (the harness-key
 * authorization, UTF-8, at most 4096 bytes) and the harness's static key go to the
 * registry's /validate, and only an explicit {"valid": true} completes the
 * handshake with msg 2 and makes the stream live. A live stream's decrypted
 * messages go to its sink, made by the demux's sink kind when the stream goes live:
 * a `struct conn` (remote/relay_conn.c) on the same dispatch path as WebSocket
 * and stdio, or a forwarder to a destination exec-server (remote/relay_fwd.c, for
 * `exec-server forward`). Data frames go reorder -> decrypt -> reassemble -> sink,
 * the sink's messages go frame -> encrypt -> data frames. Any per-stream error resets that stream
 * with reason `noise_relay_protocol_error`; limits are 128 live and 32 pending streams, and 8
 * failed handshakes close the physical socket (the owner then reconnects).
 * Nothing secret is logged: stream ids only. */
#ifndef EXEC_REMOTE_RELAY_DEMUX_H
#define EXEC_REMOTE_RELAY_DEMUX_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "crypto/noise_ik.h"
#include "remote/registry.h"
#include "remote/rv_ws.h"

#define RELAY_MAX_LIVE_STREAMS 128
#define RELAY_MAX_PENDING_STREAMS 32
#define RELAY_MAX_FAILED_HANDSHAKES 8
#define RELAY_PAUSE_MS 10000 /* handshakes refused after that many failures */
#define RELAY_MAX_AUTHORIZATION 4096
#define RELAY_RESET_REASON "noise_relay_protocol_error"

struct relay_demux;
struct relay_stream;

/* How the demux reaches the world; arg is the owner's. */
struct relay_demux_ops {
    /* Writes one binary WebSocket message (a whole frame). done as rv_ws_send. */
    int (*send)(void *arg, const uint8_t *p, size_t n, rv_ws_sent_fn done, void *done_arg);
    /* Starts /validate; NULL when it cannot start (the handshake then fails). */
    struct registry_call *(*validate)(void *arg, const char *stream_id,
                                      const char *harness_key_json, const char *authorization,
                                      registry_validate_cb cb, void *cb_arg);
    /* Abandons a validation started by validate (its cb is then never called). */
    void (*cancel)(void *arg, struct registry_call *call);
    /* Optional, together (NULL: every data frame is encoded, then copied by send):
     * a binary message built in place, as rv_ws_reserve and rv_ws_commit; and the
     * bytes queued on the socket (rv_ws_queued), to make records only while it has
     * room. An owner that sets them calls relay_demux_drained when the socket drains. */
    uint8_t *(*reserve)(void *arg, size_t n);
    int (*commit)(void *arg, rv_ws_sent_fn done, void *done_arg, size_t done_len);
    size_t (*queued)(void *arg);
};

/* A live stream's sink as the demux drives it; sink is what kind->open returned. */
struct relay_sink_ops {
    /* One complete decrypted inbound message; msg is valid only during the call. The
     * sink may end the stream from here (relay_stream_sink_closed). */
    void (*deliver)(void *sink, const uint8_t *msg, size_t len);
    /* Accounting for one outbound message of n bytes about to go on the socket (as
     * records, now or once it has room): false when the sink is over its backlog
     * limit and closed the stream instead. On true, sent(sink, n, status) follows
     * exactly once, when its last frame was written (or failed). */
    bool (*queued)(void *sink, size_t n);
    rv_ws_sent_fn sent;
    /* The stream is gone (reset, socket lost, demux freed): the sink closes itself
     * and the demux lets go of it. Not called after relay_stream_sink_closed. */
    void (*detach)(void *sink);
    /* After relay_stream_sink_closed: the demux lets go of the sink. */
    void (*release)(void *sink);
};

/* What the demux makes of a stream that just went live. Owners embed it in a
 * larger struct holding their configuration (open gets the kind back). */
struct relay_sink_kind {
    /* The sink for st (kept until detach or release), or NULL to refuse the stream
     * (it is reset). stream_id is the demux's copy (valid while st lives). */
    void *(*open)(const struct relay_sink_kind *kind, uv_loop_t *loop, struct relay_stream *st,
                  const char *stream_id);
    const struct relay_sink_ops *ops;
};

/* A demux for one physical connection. identity and sinks are borrowed (they
 * outlive the demux); the ids are copied. Caller frees with relay_demux_free. */
struct relay_demux *relay_demux_new(uv_loop_t *loop, const struct noise_ik_static_key *identity,
                                    const char *environment_id, const char *registration_id,
                                    const struct relay_demux_ops *ops, void *arg,
                                    const struct relay_sink_kind *sinks);

/* One binary message received on the physical socket. */
void relay_demux_on_message(struct relay_demux *d, const uint8_t *p, size_t n);

/* The physical socket is gone: cancels pending validations and closes every live
 * stream's connection (their sessions stay for resume), then frees d. */
void relay_demux_free(struct relay_demux *d);

/* Counters for tests and logs. */
unsigned relay_demux_live(const struct relay_demux *d);
unsigned relay_demux_pending(const struct relay_demux *d);
unsigned relay_demux_failures(const struct relay_demux *d);
/* Whether handshakes are paused (the failure budget was spent RELAY_PAUSE_MS ago or
 * less). */
bool relay_demux_paused(const struct relay_demux *d);

/* ---- used by the sinks (remote/relay_conn.c, remote/relay_fwd.c) ---- */

/* Frames, encrypts and sends one JSON-RPC message on a live stream: its records go
 * to the socket while it has room, the rest follow as it drains (msg is copied then).
 * The message is accounted on the stream's sink (queued now, sent when its last
 * frame was written). Returns 0 or a negative code (the stream was reset). */
int relay_stream_send(struct relay_stream *st, const uint8_t *msg, size_t len);
/* The same for a message in storage the stream takes (mem, freed with
 * bigbuf_free_any; msg lies inside it): never copied. */
int relay_stream_send_owned(struct relay_stream *st, char *mem, const uint8_t *msg, size_t len);

/* The owner's socket drained (rv_ws_ops.on_drained): waiting streams go on. */
void relay_demux_drained(struct relay_demux *d);
/* The sink ended by itself (a conn shut down as a slow client, a destination that
 * refused or closed): reset the stream; the demux then calls ops->release. */
void relay_stream_sink_closed(struct relay_stream *st);

#endif
