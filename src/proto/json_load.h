/* json_load: json_loadb for incoming messages, fast on large string values.
 *
 * jansson's lexer reads a string value character by character with UTF-8
 * validation, about 100 MB/s: a 1 MiB fs/writeBlock spends most of its server
 * time there (perf: 75% in libjansson). Payload strings (base64 chunks) are plain
 * printable ASCII, so this loader finds string values of at least
 * JSON_LOAD_BIG_STRING bytes that are printable ASCII without escapes, parses a
 * copy of the message in which each is replaced by a short placeholder, and puts
 * the real value back with json_stringn_nocheck (one memcpy, no per-character
 * work). Anything unusual, and every parse error, falls back to json_loadb on the
 * original bytes, so results and error texts are exactly json_loadb's.
 *
 * One exception to "exactly json_loadb's": integers outside int64. jansson holds
 * integers as int64 and fails the whole message ("too big integer"), so a request
 * with `"afterSeq": 18446744073709551615` lost its id; the reference (serde_json)
 * reads the full u64 range and takes larger numbers as floats. So when jansson
 * fails that way, each such integer literal is parsed as a real (its nearest
 * double), and one in [2^63, 2^64) is also recorded with its exact value, which
 * json_load_u64 gives back to the params decoder. */
#ifndef EXEC_PROTO_JSON_LOAD_H
#define EXEC_PROTO_JSON_LOAD_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define JSON_LOAD_BIG_STRING (16u * 1024)

/* Same contract as json_loadb(data, len, flags, err): a new reference or NULL. */
json_t *json_load_message(const char *data, size_t len, size_t flags, json_error_t *err);

/* The exact value of a non-negative integer in a loaded message: a jansson integer
 * >= 0, or a real that json_load_message made from a literal in [2^63, 2^64). False
 * for anything else (negative, a real the client wrote as one, not a number). */
bool json_load_u64(const json_t *v, uint64_t *out);

/* End of the JSON string whose opening quote is at p (the byte after the closing
 * quote; memchr jumps over escape-free values), or NULL when e comes first. A pointer
 * into the caller's bytes. Also the bench driver's scanner. */
const char *json_load_string_end(const char *p, const char *e);

#endif
