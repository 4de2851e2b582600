/* hex: the one hexadecimal codec (digits either case in, lower or upper case out).
 *
 * Every parser of hex text in the tree goes through hex_value: the capability-token
 * digest (--ws-token-sha256), percent escapes in file: URIs and SigV4 query strings,
 * the W3C traceparent check and the client's URI decoder. Pure functions, no I/O. */
#ifndef EXEC_PROTO_HEX_H
#define EXEC_PROTO_HEX_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* "0123456789abcdef" and "0123456789ABCDEF", indexed by a nibble. */
extern const char hex_lower[17];
extern const char hex_upper[17];

/* The value (0-15) of one hex digit of either case, or -1 when c is not one. */
int hex_value(int c);

/* Decodes exactly n hex characters (n even) into n / 2 bytes of out. Returns 0, or
 * -EINVAL for an odd n or a character that is not a hex digit (out is then partly
 * written). */
int hex_decode(const char *s, size_t n, uint8_t *out);

/* Writes 2n lower-case digits and a NUL to out (2n + 1 bytes). */
void hex_encode(const uint8_t *p, size_t n, char *out);

/* Whether s[0..n) are all lower-case hex digits (traceparent fields are). */
bool hex_is_lower(const char *s, size_t n);

#endif
