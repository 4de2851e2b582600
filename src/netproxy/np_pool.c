/* np_pool: the proxy's read buffers (NP_READ_SIZE bytes), recycled. A fresh 64 KiB
 * malloc per read came back from the kernel as new pages every time (glibc trims the
 * heap top after each free), which cost the relay more CPU than the copying itself. A
 * few dozen are kept (2 MiB at most). Shared by the sockets (np_conn.c) and the
 * transparent TCP stack (np_stack.c); the event loop is the only thread. */
#include "netproxy/np_internal.h"

#include <stdlib.h>

#include "util/mem.h"

#define NP_POOL_MAX 32
static char *pool[NP_POOL_MAX];
static int pool_n;

char *np_buf_get(void)
{
    return pool_n ? pool[--pool_n] : xmalloc(NP_READ_SIZE);
}

void np_buf_put(char *p)
{
    if (!p) return;
    if (pool_n < NP_POOL_MAX)
        pool[pool_n++] = p;
    else
        free(p);
}

void np_buf_release(char *data, bool pooled)
{
    if (pooled)
        np_buf_put(data);
    else
        free(data);
}
