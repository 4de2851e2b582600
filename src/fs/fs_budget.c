/* fs_budget: the server-wide budget of file content in memory (see fs_budget.h). */
#include "fs/fs_budget.h"

#include <pthread.h>
#include <stdatomic.h>

#include "core/inflight.h"
#include "core/limits.h"

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static size_t used;
static atomic_bool stopped;

void fs_budget_stop(void)
{
    atomic_store(&stopped, true);
}

bool fs_budget_stopped(void)
{
    return atomic_load_explicit(&stopped, memory_order_relaxed);
}

/* Whether n more bytes for a read holding `held` fit the in-flight budget
 * (core/inflight.h) beside what the connections hold queued. A read that holds room
 * already only grows within the read budget: only new room waits for queues. */
static bool flight_fits(size_t n, size_t held, bool alone_ok)
{
    size_t q = inflight_queued();
    return held > 0 || used + q + n <= server_limits.max_inflight ||
           (alone_ok && used == 0 && q == 0);
}

enum fs_budget_verdict fs_budget_take(size_t n, size_t held, bool alone_ok)
{
    size_t limit = server_limits.max_read_buffer;
    enum fs_budget_verdict v;
    pthread_mutex_lock(&mu);
    if ((used + n <= limit || (alone_ok && used == held)) && flight_fits(n, held, alone_ok)) {
        used += n;
        inflight_reading_add(n);
        v = FS_BUDGET_OK;
    } else {
        /* Waiting helps only a read that holds nothing, behind others that will
         * give room back (reads, or queued output being written or dropped); one
         * that holds room must not wait for room (two such reads would wait for
         * each other forever). */
        v = held == 0 && (used > 0 || inflight_queued() > 0) ? FS_BUDGET_WAIT : FS_BUDGET_NEVER;
    }
    pthread_mutex_unlock(&mu);
    return v;
}

void fs_budget_force(size_t n)
{
    pthread_mutex_lock(&mu);
    used += n;
    inflight_reading_add(n);
    pthread_mutex_unlock(&mu);
}

void fs_budget_give(size_t n)
{
    pthread_mutex_lock(&mu);
    if (n > used) n = used;
    used -= n;
    inflight_reading_sub(n);
    pthread_mutex_unlock(&mu);
}

bool fs_budget_fits(size_t n)
{
    pthread_mutex_lock(&mu);
    bool fits = (used == 0 || used + n <= server_limits.max_read_buffer) && flight_fits(n, 0, true);
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
