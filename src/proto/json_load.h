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

/* jansson spends ~125 instructions per byte of a string value (callgrind, a
 * 4 KiB fs/writeFile: 80% of the server's instructions), the splice a memcpy:
 * worth it from a few hundred bytes on. */
#define JSON_LOAD_BIG_STRING 512u
#define JSON_LOAD_MAX_BIG 16 /* messages carry one payload string; more is unusual */

/* Same contract as json_loadb(data, len, flags, err): a new reference or NULL. */
json_t *json_load_message(const char *data, size_t len, size_t flags, json_error_t *err);

/* The exact value of a non-negative integer in a loaded message: a jansson integer
 * >= 0, or a real that json_load_message made from a literal in [2^63, 2^64). False
 * for anything else (negative, a real the client wrote as one, not a number). */
bool json_load_u64(const json_t *v, uint64_t *out);
/* The large plain string values of a message, as slices of its bytes. */
struct json_load_bigs {
    int n;
    struct {
        const char *p; /* the value's text (between the quotes) in the message */
        size_t n;
    } v[JSON_LOAD_MAX_BIG];
};

/* The most values one incoming JSON-RPC message may hold, as the reference: objects,
 * arrays, strings, numbers and literals each count one (keys do not). A message of
 * more is refused before a tree is built, so a 64 MiB message of `0,0,0,...` cannot
 * make jansson allocate 32 million values (1.5 GB). */
#define JSON_LOAD_MAX_VALUES 262144u

/* json_load_message in two steps, for a caller that wants to keep one large value
 * as a slice of the message instead of a jansson copy: the tree comes back with
 * each large value still a short placeholder string (bigs says which slices they
 * stand for), and json_load_splice then puts the values in, all but one if the
 * caller likes. Until then the tree is only for finding the placeholders.
 * max_values (0: no limit) refuses a message of more values with the reference's
 * text, "JSON-RPC message exceeds the limit of N JSON values", placed where serde
 * stops: the line, and the column of the byte before the first value too many.
 * Counted in the same pass that finds the large values. */
json_t *json_load_message_split(const char *data, size_t len, size_t flags, json_error_t *err,
                                struct json_load_bigs *bigs, size_t max_values);
/* Which slice the string v is a placeholder for, or -1 (not a placeholder). */
int json_load_big_index(const json_t *v, const struct json_load_bigs *bigs);
/* Replaces every placeholder under root except keep (may be NULL) by its value.
 * False when not every slice's placeholder was found where a value can be (the
 * caller then parses the message with json_loadb instead). */
bool json_load_splice(json_t *root, const struct json_load_bigs *bigs, const json_t *keep);

/* json_loadb for a message jansson refused for a NUL (`\u0000`) in an object key
 * (it cannot hold one): each such escape in a key is read as U+0001, so the
 * message's id and method can still be known and its request answered. NULL when
 * it fails for another reason too. */
json_t *json_load_nul_keys(const char *data, size_t len, size_t flags, json_error_t *err);

/* End of the JSON string whose opening quote is at p (the byte after the closing
 * quote; memchr jumps over escape-free values), or NULL when e comes first. A pointer
 * into the caller's bytes. Also the bench driver's scanner. */
const char *json_load_string_end(const char *p, const char *e);

#endif
