/* mem: allocation wrappers that abort on exhaustion.
 *
 * The daemon cannot do anything useful when malloc fails (every reply and every
 * output chunk needs memory), so like redis' zmalloc we stop loudly instead of
 * threading ENOMEM through every call site. Bounded state (retained logs, queued
 * output) is what keeps us away from exhaustion in the first place. */
#ifndef EXEC_UTIL_MEM_H
#define EXEC_UTIL_MEM_H

#include <stddef.h>

void *xmalloc(size_t n);
void *xcalloc(size_t n, size_t size);
void *xrealloc(void *p, size_t n);
char *xstrdup(const char *s);
char *xstrndup(const char *s, size_t n);
void *xmemdup(const void *p, size_t n);
/* printf into a new string. */
char *xasprintf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif
