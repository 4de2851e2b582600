/* audit_cast: the lines of an asciicast v2 recording (a terminal session as
 * asciinema writes it, https://docs.asciinema.org/manual/asciicast/v2/).
 *
 *   {"version":2,"width":80,"height":24,"timestamp":1717171717,"command":"bash -i"}
 *   [0.102345,"o","$ "]
 *   [1.503000,"r","100x30"]
 *
 * The first line is the header (the terminal's size when the process started, the
 * start's Unix time); each next line an event: seconds since the start, "o" for
 * output, "i" for input, "r" for a resize ("COLSxROWS"). Output bytes become a JSON
 * string as asciinema's own recorder makes them: decoded as UTF-8, a sequence split
 * between two reads carried to the next event, each maximal invalid subpart replaced
 * by U+FFFD. Output leaves out its NULs: ECMA-48's fill character, which "may be
 * inserted into, or removed from, a data stream without affecting the information
 * content", and which terminals and asciinema's player do not show; spelt \u0000
 * in JSON it made each one six bytes of the file, and the recording of a stream of
 * them cost a fifth of its rate (docs/AUDIT.md). Input keeps them (Ctrl-@ is a key).
 * For output that is UTF-8 (a terminal's), `asciinema cat` of the file gives back
 * exactly the bytes the process wrote, but the NULs.
 *
 * Pure: bytes in, text out. The writer thread (audit_writer.c) keeps one encoder per
 * direction of each recording. */
#ifndef EXEC_AUDIT_AUDIT_CAST_H
#define EXEC_AUDIT_AUDIT_CAST_H

#include <stddef.h>
#include <stdint.h>

#include "util/buf.h"

/* One direction's decoder state: the start of a UTF-8 sequence the last bytes
 * ended inside. */
struct audit_cast_enc {
    uint8_t carry[4];
    uint8_t ncarry;
};

/* The header line (with its newline) into out. command may be NULL. */
void audit_cast_put_header(struct buf *out, unsigned width, unsigned height, uint64_t unix_s,
                           const char *command);

/* One event line for n bytes of data (kind 'o' or 'i') at t_us microseconds after
 * the start, into out; nothing when all of it is carried to the next call. */
void audit_cast_put_event(struct audit_cast_enc *e, struct buf *out, uint64_t t_us, char kind,
                          const void *data, size_t n);

/* A resize event: [t, "r", "COLSxROWS"]. */
void audit_cast_put_resize(struct buf *out, uint64_t t_us, unsigned cols, unsigned rows);

/* The end of a direction: a sequence still carried becomes U+FFFD (as asciinema's
 * decoder would have it at the end), in one last event. */
void audit_cast_put_finish(struct audit_cast_enc *e, struct buf *out, uint64_t t_us, char kind);

#endif
