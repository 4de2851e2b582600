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
 * original bytes, so results and error texts are exactly json_loadb's. */
#ifndef EXEC_PROTO_JSON_LOAD_H
#define EXEC_PROTO_JSON_LOAD_H

#include <jansson.h>
#include <stddef.h>

#define JSON_LOAD_BIG_STRING (16u * 1024)

/* Same contract as json_loadb(data, len, flags, err): a new reference or NULL. */
json_t *json_load_message(const char *data, size_t len, size_t flags, json_error_t *err);

/* End of the JSON string whose opening quote is at p (the byte after the closing
 * quote; memchr jumps over escape-free values), or NULL when e comes first. A pointer
 * into the caller's bytes. Also the bench driver's scanner. */
const char *json_load_string_end(const char *p, const char *e);

#endif
