/* audit_record: the text of one audit record, written field by field into a buf.
 *
 * A record is one JSON object on one line (docs/AUDIT.md). The hooks in the domain
 * modules build its body on the loop thread with these writers, never a jansson
 * tree: `"time":"...","type":"..."` first (audit_record_begin), then their fields,
 * then the closing brace. The writer thread puts `{"seq":N,"prev":"...",` in front
 * (audit_chain.h). Every writer adds the comma a field needs by looking at the byte
 * before it, so fields and nested objects or arrays are written in any order.
 *
 * Strings are bytes on Linux (argv, paths): a value that is valid UTF-8 is written
 * as it is, JSON-escaped; a byte that is not part of valid UTF-8 is written as the
 * four characters \xNN (Python's backslashreplace), so every line stays valid JSON
 * for jq. Long values are cut (AUDIT_VALUE_MAX bytes, at a character boundary, with
 * "..." after) and long lists too (AUDIT_LIST_MAX items), so a record stays small
 * whatever a client sends. Pure: no I/O, no clock. */
#ifndef EXEC_AUDIT_AUDIT_RECORD_H
#define EXEC_AUDIT_AUDIT_RECORD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "util/buf.h"

#define AUDIT_VALUE_MAX 4096 /* bytes of one string value before it is cut */
#define AUDIT_LIST_MAX 256   /* items of one list (argv) before it is cut */

/* Starts a record's body in b (emptied): "time" (RFC 3339, UTC, microseconds, from
 * unix_ns) and "type". */
void audit_record_begin(struct buf *b, uint64_t unix_ns, const char *type);
/* Wall-clock time in nanoseconds: what every record (the loop's and the writer's) carries. */
uint64_t audit_unix_ns(void);
/* Ends the body (the closing brace of the record). */
void audit_record_end(struct buf *b);

/* "key":"value" with value's n bytes escaped as above (cut at AUDIT_VALUE_MAX). */
void audit_put_strn(struct buf *b, const char *key, const void *value, size_t n);
/* The same for a C string; NULL writes null. */
void audit_put_str(struct buf *b, const char *key, const char *value);
void audit_put_u64(struct buf *b, const char *key, uint64_t v);
void audit_put_i64(struct buf *b, const char *key, int64_t v);
void audit_put_bool(struct buf *b, const char *key, bool v);
void audit_put_null(struct buf *b, const char *key);
/* An array of strings from a NULL-terminated vector (at most AUDIT_LIST_MAX items;
 * a cut list ends with the item "..."). */
void audit_put_strv(struct buf *b, const char *key, char *const *v);
/* Nesting: "key":{ ... } and "key":[ ... ]; a NULL key opens an unnamed value (an
 * object inside an array). */
void audit_put_object(struct buf *b, const char *key);
void audit_put_array(struct buf *b, const char *key);
void audit_put_close(struct buf *b, char closer); /* '}' or ']' */
/* An array item: a string. */
void audit_put_item(struct buf *b, const char *value);

/* s (n bytes) as a JSON string's content (no quotes), escaped as above, at most max
 * bytes of s (then "..."). */
void audit_json_escape(struct buf *b, const void *s, size_t n, size_t max);

/* Walks s (n bytes) as UTF-8: each valid run goes to valid(b, run, len), each maximal
 * invalid subpart to invalid(b, part, len); a sequence s ends inside (one that may
 * yet be completed) is left unused when keep_unfinished, else it is invalid. Returns
 * the bytes used. The record escaper and the asciicast decoder (audit_cast.c) differ
 * only in what they do with each kind. */
size_t audit_utf8_walk(struct buf *b, const unsigned char *s, size_t n,
                       void (*valid)(struct buf *, const unsigned char *, size_t),
                       void (*invalid)(struct buf *, const unsigned char *, size_t),
                       bool keep_unfinished);

/* Formats unix_ns as 2024-05-01T12:34:56.123456Z into out (28 bytes with the NUL). */
#define AUDIT_TIME_LEN 28
void audit_time_format(uint64_t unix_ns, char out[AUDIT_TIME_LEN]);

#endif
