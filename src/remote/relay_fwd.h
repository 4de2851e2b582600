/* relay_fwd: `exec-server forward`'s sink for relay streams (docs/REMOTE.md §8.7).
 *
 * Instead of serving a live stream with our own rpc, the forwarder dials the
 * destination exec-server's WebSocket once per stream (right after msg 2, with the
 * bare upgrade 0.169.0 sends) and relays the decrypted JSON-RPC messages both ways
 * unchanged: stream -> destination as text messages in 8 MiB fragments, destination
 * -> stream (text or binary, at most 64 MiB) through relay_stream_send. A destination
 * that refuses or closes resets the stream (`noise_relay_protocol_error`); a stream
 * that is reset or lost closes the destination socket. Back-pressure is bounded both
 * ways: the destination is not read while more than RELAY_FWD_HIGH_WATER bytes of its
 * answers wait on the rendezvous socket, and a destination that does not take what
 * the harness sends (more than RELAY_FWD_MAX_PENDING bytes unwritten, or before it
 * opened more than RELAY_FWD_MAX_HELD messages) gets the stream reset, as the
 * reference resets a stream whose inbound queue is full. */
#ifndef EXEC_REMOTE_RELAY_FWD_H
#define EXEC_REMOTE_RELAY_FWD_H

#include "remote/relay_demux.h"

#define RELAY_FWD_FRAGMENT (8u * 1024u * 1024u)
#define RELAY_FWD_MAX_MESSAGE (64u * 1024u * 1024u)
#define RELAY_FWD_HIGH_WATER (4u * 1024u * 1024u)
#define RELAY_FWD_LOW_WATER (1u * 1024u * 1024u)
#define RELAY_FWD_MAX_PENDING (128u * 1024u * 1024u)
#define RELAY_FWD_MAX_HELD 128

/* The sink kind: one destination URL (ws://HOST:PORT[/PATH]) for every stream. */
struct relay_fwd_kind {
    struct relay_sink_kind base;
    char url[2048];
};

/* Fills k for url (copied; -EINVAL when it is not a ws:// URL rv_ws can dial).
 * The caller keeps k alive as long as any demux using it. */
int relay_fwd_kind_init(struct relay_fwd_kind *k, const char *url);

/* Destination sockets currently open or opening (for tests and logs). */
unsigned relay_fwd_open_count(void);

#endif
