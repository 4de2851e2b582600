/* base64: standard alphabet (RFC 4648 section 4), padded, strict on decode.
 *
 * Our own table codec rather than a library's: every byte of process output goes
 * through the encoder, and a plain table loop here runs several times faster than
 * libsodium's constant-time one (which we do not need: the data is not secret from
 * the client it is sent to). Decoding requires canonical padding and gives the
 * error texts of the reference server's decoder, e.g. "Invalid symbol 33, offset 0."
 * and "Invalid padding". Pure functions, no I/O. */
#ifndef EXEC_PROTO_BASE64_H
#define EXEC_PROTO_BASE64_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "util/buf.h"

/* Length of the encoding of n bytes (always a multiple of 4). */
static inline size_t base64_encoded_len(size_t n)
{
    return (n + 2) / 3 * 4;
}

/* Upper bound on the decoded length of n base64 characters. */
static inline size_t base64_decoded_max(size_t n)
{
    return n / 4 * 3 + 3;
}

/* Encodes n bytes of src into dst, which must hold base64_encoded_len(n) bytes.
 * Writes no terminating NUL. Returns the number of characters written. */
size_t base64_encode(const void *src, size_t n, char *dst);

/* Decodes n characters of src into dst (base64_decoded_max(n) bytes). On success
 * returns 0 and sets *out_len. On invalid input returns -EINVAL and writes a
 * NUL-terminated description into err (errlen bytes, 64 is plenty). dst may be
 * src itself (decoding in place: the output never overtakes the input still to
 * be read, and error texts are the same); dst's contents are unspecified after an
 * error. */
int base64_decode(const char *src, size_t n, uint8_t *dst, size_t *out_len, char *err,
                  size_t errlen);

/* Appends the encoding of n bytes of src to b (padded, unquoted: the JSON string's
 * body for payloads). */
void base64_append(struct buf *b, const void *src, size_t n);

#endif
