/* utf8: the one UTF-8 checker (strict: no overlong forms, surrogates or values
 * above U+10FFFF), used for WebSocket text frames, file: URI hosts and the lossy
 * conversion of byte strings (file names, parser texts) into JSON strings. Pure. */
#ifndef EXEC_PROTO_UTF8_H
#define EXEC_PROTO_UTF8_H

#include <stdbool.h>
#include <stddef.h>

#include "util/buf.h"

/* Whether the n bytes at s are well-formed UTF-8 (an empty string is). */
bool utf8_valid(const void *s, size_t n);

/* Appends s (n bytes) to b as UTF-8, replacing each maximal invalid subpart with
 * U+FFFD, like Rust's String::from_utf8_lossy (and the Unicode "best practice"). */
void utf8_lossy(struct buf *b, const char *s, size_t n);

#endif
