/* fs_util: small pure helpers for the fs methods. */
#ifndef EXEC_FS_FS_UTIL_H
#define EXEC_FS_FS_UTIL_H

#include <stddef.h>

#include "util/buf.h"

/* Appends s (n bytes) to b as UTF-8, replacing each maximal invalid subpart with
 * U+FFFD, like Rust's String::from_utf8_lossy. */
void fs_utf8_lossy(struct buf *b, const char *s, size_t n);

/* Removes trailing slashes from p in place (keeping a lone "/"); returns p. */
char *fs_path_strip_slashes(char *p);
/* a + "/" + b (no doubled slash when a ends in one); malloc'd, the caller frees. */
char *fs_path_join(const char *a, const char *b);

#endif
