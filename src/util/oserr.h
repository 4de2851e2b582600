/* oserr: errno values as the reference server words them.
 *
 * The reference is built on musl, and clients and tests see its texts, so we give
 * musl's wording ("Symbolic link loop", not glibc's "Too many levels of symbolic
 * links") followed by " (os error N)". */
#ifndef EXEC_UTIL_OSERR_H
#define EXEC_UTIL_OSERR_H

#include <stddef.h>

/* musl's strerror text for errnum (never NULL). */
const char *oserr_text(int errnum);
/* Writes "<text> (os error <errnum>)" into out. */
void oserr_format(int errnum, char *out, size_t outlen);

#endif
