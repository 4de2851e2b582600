/* inflight: the server-wide budget of bytes on their way to clients
 * (--max-inflight-bytes, core/limits.h).
 *
 * Two kinds of bytes count, wherever they are held: reply content being read into
 * memory (the fs read budget, fs/fs_budget.h, moves its bytes here) and every
 * connection's queued output, the message being written included (transport/conn.c).
 * A reply handed to a connection moves from the first kind to the second, so its
 * bytes count all the way from the file to the socket. Without the second kind a
 * client that never read held its whole reply: six clients each asking for a 400 MB
 * file and reading nothing kept 3.2 GB.
 *
 * What it decides: a read that does not fit waits (fs/fs_methods.c parks it) and
 * says how much it waits for (inflight_want); while the bytes held plus the bytes
 * wanted pass the budget, the transport closes the reader that has gone longest
 * without taking a byte (transport/conn_budget.c chooses it, conn.c closes it), and
 * each byte given back calls the room callback so that waiting reads run again.
 *
 * The counters are atomics (reads run on pool threads); the callbacks run on the
 * loop thread. */
#ifndef EXEC_CORE_INFLIGHT_H
#define EXEC_CORE_INFLIGHT_H

#include <stdbool.h>
#include <stddef.h>

/* Bytes queued on connections (transport, loop thread). */
void inflight_queued_add(size_t n);
void inflight_queued_sub(size_t n);
size_t inflight_queued(void);

/* Bytes held by reads for replies (the fs read budget, any thread). */
void inflight_reading_add(size_t n);
void inflight_reading_sub(size_t n);
size_t inflight_reading(void);

/* Both. */
size_t inflight_total(void);

/* The most bytes a waiting read needs now (0: none waits). Loop thread. */
void inflight_want(size_t n);
size_t inflight_wanted(void);

/* Whether what is held and what is wanted pass --max-inflight-bytes. */
bool inflight_over(void);

/* fn runs (loop thread) whenever queued bytes are given back while a read waits:
 * the fs methods install their "run the parked reads" here. */
void inflight_on_room(void (*fn)(void));
/* Called by the transport when queued bytes were given back. */
void inflight_room(void);

#endif
