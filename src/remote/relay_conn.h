/* relay_conn: a relay virtual stream as a `struct conn` (the third transport beside
 * WebSocket and stdio, implemented over transport/conn_impl.h). It is one of the
 * demux's two sink kinds (the other is remote/relay_fwd.c). */
#ifndef EXEC_REMOTE_RELAY_CONN_H
#define EXEC_REMOTE_RELAY_CONN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "remote/relay_demux.h"
#include "transport/conn.h"

/* The demux's sink kind that serves each live stream as a connection (kind
 * "relay", peer "relay:<stream id prefix>") whose messages go to on_message. */
struct relay_conn_kind {
    struct relay_sink_kind base;
    conn_message_fn on_message;
};

/* Fills k (owned by the caller, which keeps it alive as long as any demux using it). */
void relay_conn_kind_init(struct relay_conn_kind *k, conn_message_fn on_message);

#endif
