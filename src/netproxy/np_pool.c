/* np_pool: the proxy's read buffers, recycled. A fresh 64 KiB malloc per read came
 * back from the kernel as new pages every time (glibc trims the heap top after each
 * free), which cost the relay more CPU than the copying itself. A buffer is one of four
 * sizes, NP_READ_SIZE to NP_READ_MAX (a side's reads grow while they fill their buffer:
 * np_conn.c), and says its size in a header before it, so whoever lets go of it needs
 * not know; a few of each size are kept (5 MiB at most). Shared by the sockets
 * (np_conn.c) and the transparent TCP stack (np_stack.c); the event loop is the only
 * thread. */
#include "netproxy/np_internal.h"

#include <stdlib.h>

#include "util/mem.h"

#define CLASSES 4
#define HDR 64 /* the size, and the data cache-line aligned as malloc's */

static const unsigned keep[CLASSES] = {32, 8, 4, 3}; /* 2 + 1 + 1 + 1.5 MiB */
static char *pool[CLASSES][32];
static unsigned pool_n[CLASSES];

static unsigned class_of(size_t size)
{
    unsigned k = 0;
    while (k + 1 < CLASSES && ((size_t)NP_READ_SIZE << k) < size)
        k++;
    return k;
}

char *np_buf_get(size_t size)
{
    unsigned k = class_of(size);
    if (pool_n[k]) return pool[k][--pool_n[k]];
    char *p = xmalloc(HDR + ((size_t)NP_READ_SIZE << k));
    *(size_t *)p = (size_t)NP_READ_SIZE << k;
    return p + HDR;
}

size_t np_buf_size(const char *p)
{
    return *(const size_t *)(p - HDR);
}

void np_buf_put(char *p)
{
    if (!p) return;
    unsigned k = class_of(np_buf_size(p));
    if (pool_n[k] < keep[k])
        pool[k][pool_n[k]++] = p;
    else
        free(p - HDR);
}

void np_buf_release(char *data, bool pooled)
{
    if (pooled)
        np_buf_put(data);
    else
        free(data);
}
