/* utf8: the one UTF-8 checker (strict: no overlong forms, surrogates or values
 * above U+10FFFF), used for WebSocket text frames, file: URI hosts, relay frame
 * strings, Noise authorizations, capability files (with Rust's error position) and
 * the lossy conversion of byte strings (file names, parser texts) into JSON strings.
 * Pure. */
#ifndef EXEC_PROTO_UTF8_H
#define EXEC_PROTO_UTF8_H

#include <stdbool.h>
#include <stddef.h>

#include "util/buf.h"

/* Whether the n bytes at s are well-formed UTF-8 (an empty string is). */
bool utf8_valid(const void *s, size_t n);

/* utf8_valid with the position of the first error, as Rust's Utf8Error reports it:
 * *valid_up_to is the length of the valid prefix; *error_len is the length of the
 * invalid sequence there, or 0 when the input ends inside a sequence that could still
 * be completed. Returns true (and sets neither) when all of it is valid. */
bool utf8_check(const void *s, size_t n, size_t *valid_up_to, size_t *error_len);

/* Whether every code point of the valid UTF-8 string s (n bytes) is Unicode
 * White_Space, what Rust's char::is_whitespace and str::trim use (true when empty). */
bool utf8_all_white_space(const void *s, size_t n);

/* Appends s (n bytes) to b as UTF-8, replacing each maximal invalid subpart with
 * U+FFFD, like Rust's String::from_utf8_lossy (and the Unicode "best practice"). */
void utf8_lossy(struct buf *b, const char *s, size_t n);

#endif
