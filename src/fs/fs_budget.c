/* fs_budget: the server-wide budget of file content in memory (see fs_budget.h). */
#include "fs/fs_budget.h"

#include <pthread.h>

#include "core/limits.h"

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static size_t used;

enum fs_budget_verdict fs_budget_take(size_t n, size_t held, bool alone_ok)
{
    size_t limit = server_limits.max_read_buffer;
    enum fs_budget_verdict v;
    pthread_mutex_lock(&mu);
    if (used + n <= limit || (alone_ok && used == held)) {
        used += n;
        v = FS_BUDGET_OK;
    } else {
        /* Waiting helps only a read that holds nothing, behind others that will
         * give room back; one that holds room must not wait for room (two such
         * reads would wait for each other forever). */
        v = held == 0 && used > 0 ? FS_BUDGET_WAIT : FS_BUDGET_NEVER;
    }
    pthread_mutex_unlock(&mu);
    return v;
}

void fs_budget_force(size_t n)
{
    pthread_mutex_lock(&mu);
    used += n;
    pthread_mutex_unlock(&mu);
}

void fs_budget_give(size_t n)
{
    pthread_mutex_lock(&mu);
    used = n < used ? used - n : 0;
    pthread_mutex_unlock(&mu);
}

bool fs_budget_fits(size_t n)
{
    pthread_mutex_lock(&mu);
    bool fits = used == 0 || used + n <= server_limits.max_read_buffer;
    pthread_mutex_unlock(&mu);
    return fits;
}

size_t fs_budget_used(void)
{
    pthread_mutex_lock(&mu);
    size_t u = used;
    pthread_mutex_unlock(&mu);
    return u;
}
