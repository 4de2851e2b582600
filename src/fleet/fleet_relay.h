/* fleet_relay: the rendezvous. Executors hold one WebSocket each
 * (GET /rendezvous/v1/environment/{id}?role=environment&reg=..&exp=..&sig=..);
 * harnesses open one per connection attempt with a single-use URL from /connect
 * (role=harness, plus a nonce). Both are binary WebSockets of RelayMessageFrames
 * (proto/relay_frame, at most --max-frame-bytes), routed by stream_id:
 *
 *   harness -> executor  the first frame of a stream id claims it for that harness
 *                        socket (at most --max-streams-per-environment at once); the
 *                        frame goes on unchanged to its environment's socket; a stream
 *                        id held by another socket is not theirs to use (dropped)
 *   executor -> harness  to the socket that holds the stream id (unknown ids dropped)
 *   reset frames         forwarded, and the stream id is free again
 *   a harness leaves     the executor gets reset{"harness_disconnected"} for each of
 *                        its streams, so the session behind it can be resumed at once
 *   the executor leaves  each harness gets reset{"environment_disconnected"} and its
 *                        socket closes (1001): codex reconnects through /connect and
 *                        resumes its session once the executor is back
 *
 * Frames are parsed for their routing fields only (version, stream id, which body);
 * the payload (Noise ciphertext) is never decrypted, copied for inspection or logged.
 * A malformed or text frame from a harness closes its socket (1002/1003); from an
 * executor it is dropped and counted (one bad frame must not cut every stream).
 * Back-pressure: a socket whose write queue passes 4 MiB stops the reading of the
 * sockets that feed it until it drains. A harness socket that sends nothing within
 * --claim-timeout, or relays nothing for --idle-timeout, is closed.
 *
 * Single-use harness URLs: the nonce is taken out of the database (fleet_store
 * bundles) before the 101, so a replayed URL gets 401 on any node. */
#ifndef EXEC_FLEET_RELAY_H
#define EXEC_FLEET_RELAY_H

#include <stddef.h>

#include "fleet/fleet_http.h"
#include "fleet/fleet_store.h"

/* on_streams: called when a stream opens or closes (the count the heartbeat writes
 * has changed), so the server can write it soon instead of at the next beat. */
void fleet_relay_init(void (*on_streams)(void));
/* A GET of /rendezvous/v1/environment/{env}: checks and answers the upgrade. */
void fleet_relay_upgrade(struct fleet_conn *c, const struct fleet_request *req, const char *env,
                         size_t env_len);

/* The environments this node holds, for the heartbeat: malloc'd array of *n entries
 * whose strings are copies (free with fleet_relay_held_free). */
struct fleet_held *fleet_relay_held(size_t *n);
void fleet_relay_held_free(struct fleet_held *h, size_t n);
/* After a heartbeat: ok says whether it was written (when not, every stream count
 * is sent again next time). */
void fleet_relay_heartbeat_done(int ok);
/* The database says this node must let env go (taken over elsewhere, superseded,
 * its token revoked): its socket closes. */
void fleet_relay_drop(const char *env, const char *why);

/* The node is stopping: closing sockets records nothing per environment (the node's
 * leave does it for all at once). */
void fleet_relay_shutdown(void);

/* Environments attached here. */
size_t fleet_relay_count(void);

#endif
