/* bigbuf: cached huge-page-advised mappings for large buffers (see bigbuf.h). */
#include "util/bigbuf.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include "util/mem.h"

#if defined(__SANITIZE_ADDRESS__)
#define BIGBUF_MALLOC 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define BIGBUF_MALLOC 1
#endif
#endif

#define HUGE (2u << 20)
#define MAGIC 0x6269676275660a01ull
#define CACHE_SLOTS 64

/* In front of every buffer (64 bytes, so the data stays cache-line aligned). */
struct hdr {
    uint64_t magic;
    size_t map_len;    /* bytes of the mapping (header included) */
    uint64_t freed_ms; /* when it entered the cache */
    char pad[40];
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct hdr *cache[CACHE_SLOTS];
static size_t ncache, cached_bytes;

/* The buffers handed out and not yet freed, for bigbuf_free_any: an open
 * addressing set of data pointers (lock held), and their count, read without the
 * lock so the common case (none live) costs one load. */
static void **live;
static size_t live_cap;
static _Atomic size_t live_n;

static size_t slot_of(const void *p, size_t cap)
{
    uint64_t h = (uint64_t)(uintptr_t)p * 0x9E3779B97F4A7C15ull;
    return (size_t)(h >> 20) & (cap - 1);
}

static void live_insert_locked(void *p);

static void live_grow_locked(void)
{
    void **old = live;
    size_t oc = live_cap;
    live_cap = oc ? oc * 2 : 64;
    live = calloc(live_cap, sizeof *live);
    if (!live) abort();
    size_t n = live_n;
    live_n = 0;
    for (size_t i = 0; i < oc; i++)
        if (old[i]) live_insert_locked(old[i]);
    live_n = n;
    free(old);
}

static void live_insert_locked(void *p)
{
    if ((live_n + 1) * 2 > live_cap) live_grow_locked();
    size_t i = slot_of(p, live_cap);
    while (live[i])
        i = (i + 1) & (live_cap - 1);
    live[i] = p;
    live_n++;
}

/* Removes p; false when it is not live. */
static bool live_remove_locked(void *p)
{
    if (!live_cap) return false;
    size_t i = slot_of(p, live_cap);
    while (live[i] && live[i] != p)
        i = (i + 1) & (live_cap - 1);
    if (!live[i]) return false;
    live[i] = NULL;
    live_n--;
    /* Re-place the rest of the run so lookups still find them. */
    for (size_t j = (i + 1) & (live_cap - 1); live[j]; j = (j + 1) & (live_cap - 1)) {
        void *q = live[j];
        live[j] = NULL;
        size_t k = slot_of(q, live_cap);
        while (live[k])
            k = (k + 1) & (live_cap - 1);
        live[k] = q;
    }
    return true;
}

static uint64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static size_t map_len_for(size_t n)
{
    size_t want = n + sizeof(struct hdr);
    return (want + HUGE - 1) / HUGE * HUGE;
}

static struct hdr *hdr_of(const void *p)
{
    return (struct hdr *)((char *)p - sizeof(struct hdr));
}

#ifdef BIGBUF_MALLOC
static struct hdr *map_new(size_t len)
{
    struct hdr *h = xmalloc(len);
    return h;
}

static void map_free(struct hdr *h)
{
    free(h);
}

static struct hdr *map_grow(struct hdr *h, size_t len)
{
    return xrealloc(h, len);
}
#else
static void out_of_memory(size_t len)
{
    fprintf(stderr, "out of memory (mapping %zu bytes)\n", len);
    abort();
}

/* A mapping of len bytes starting on a 2 MiB boundary, so it can be backed by
 * huge pages from its first byte. */
static struct hdr *map_new(size_t len)
{
    char *p = mmap(NULL, len + HUGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) out_of_memory(len);
    char *a = (char *)(((uintptr_t)p + HUGE - 1) & ~(uintptr_t)(HUGE - 1));
    if (a > p) munmap(p, (size_t)(a - p));
    size_t tail = (size_t)(p + len + HUGE - (a + len));
    if (tail) munmap(a + len, tail);
    madvise(a, len, MADV_HUGEPAGE);
    return (struct hdr *)a;
}

static void map_free(struct hdr *h)
{
    munmap(h, h->map_len);
}

static struct hdr *map_grow(struct hdr *h, size_t len)
{
    void *p = mremap(h, h->map_len, len, MREMAP_MAYMOVE);
    if (p == MAP_FAILED) out_of_memory(len);
    madvise(p, len, MADV_HUGEPAGE);
    return p;
}
#endif

/* A cached mapping of at least len bytes, or NULL: the best fit (the smallest large
 * enough, and not more than twice as large: a 3 MiB read chunk must not take the
 * 86 MiB reply buffer the next reply needs), or with `largest` the largest. */
static struct hdr *take_cached(size_t len, bool largest)
{
    struct hdr *h = NULL;
    pthread_mutex_lock(&lock);
    size_t best = CACHE_SLOTS;
    for (size_t i = 0; i < ncache; i++) {
        size_t m = cache[i]->map_len;
        if (m < len || (!largest && m > 2 * len)) continue;
        if (best == CACHE_SLOTS || (largest ? m > cache[best]->map_len : m < cache[best]->map_len))
            best = i;
    }
    if (best < CACHE_SLOTS) {
        h = cache[best];
        cache[best] = cache[--ncache];
        cached_bytes -= h->map_len;
    }
    pthread_mutex_unlock(&lock);
    return h;
}

static void *alloc_from(struct hdr *h, size_t len, size_t *cap)
{
    if (!h) {
        h = map_new(len);
        h->magic = MAGIC;
        h->map_len = len;
    }
    if (cap) *cap = h->map_len - sizeof *h;
    pthread_mutex_lock(&lock);
    live_insert_locked(h + 1);
    pthread_mutex_unlock(&lock);
    return h + 1;
}

void *bigbuf_alloc(size_t n, size_t *cap)
{
    size_t len = map_len_for(n);
    return alloc_from(take_cached(len, false), len, cap);
}

void *bigbuf_alloc_growable(size_t n, size_t *cap)
{
    size_t len = map_len_for(n);
    return alloc_from(take_cached(len, true), len, cap);
}

size_t bigbuf_cap(const void *p)
{
    return hdr_of(p)->map_len - sizeof(struct hdr);
}

void *bigbuf_grow(void *p, size_t n, size_t *cap)
{
    struct hdr *h = hdr_of(p);
    if (h->magic != MAGIC) abort();
    size_t len = map_len_for(n);
    if (len > h->map_len) {
        pthread_mutex_lock(&lock);
        live_remove_locked(p);
        pthread_mutex_unlock(&lock);
        h = map_grow(h, len);
        h->map_len = len;
        pthread_mutex_lock(&lock);
        live_insert_locked(h + 1);
        pthread_mutex_unlock(&lock);
    }
    if (cap) *cap = h->map_len - sizeof *h;
    return h + 1;
}

void bigbuf_free(void *p)
{
    if (!p) return;
    struct hdr *h = hdr_of(p);
    if (h->magic != MAGIC) abort(); /* not ours: a caller's bug */
    h->freed_ms = now_ms();
    pthread_mutex_lock(&lock);
    if (!live_remove_locked(p)) abort(); /* freed twice */
    /* Make room by dropping the largest cached buffers (the rarest sizes). */
    while (ncache > 0 && (ncache == CACHE_SLOTS || cached_bytes + h->map_len > BIGBUF_CACHE_MAX)) {
        size_t big = 0;
        for (size_t i = 1; i < ncache; i++)
            if (cache[i]->map_len > cache[big]->map_len) big = i;
        if (cache[big]->map_len < h->map_len) break; /* this one is the largest */
        struct hdr *v = cache[big];
        cache[big] = cache[--ncache];
        cached_bytes -= v->map_len;
        map_free(v);
    }
    if (ncache < CACHE_SLOTS && cached_bytes + h->map_len <= BIGBUF_CACHE_MAX) {
        cache[ncache++] = h;
        cached_bytes += h->map_len;
        h = NULL;
    }
    pthread_mutex_unlock(&lock);
    if (h) map_free(h);
}

void bigbuf_free_any(void *p)
{
    if (!p) return;
    if (live_n == 0) {
        free(p);
        return;
    }
    pthread_mutex_lock(&lock);
    bool big = false;
    if (live_cap) {
        size_t i = slot_of(p, live_cap);
        while (live[i] && live[i] != p)
            i = (i + 1) & (live_cap - 1);
        big = live[i] != NULL;
    }
    pthread_mutex_unlock(&lock);
    if (big)
        bigbuf_free(p);
    else
        free(p);
}

size_t bigbuf_trim(uint64_t idle_ms)
{
    struct hdr *drop[CACHE_SLOTS];
    size_t nd = 0, left;
    uint64_t now = now_ms();
    pthread_mutex_lock(&lock);
    for (size_t i = 0; i < ncache;) {
        if (now >= cache[i]->freed_ms + idle_ms) {
            drop[nd++] = cache[i];
            cached_bytes -= cache[i]->map_len;
            cache[i] = cache[--ncache];
        } else {
            i++;
        }
    }
    left = cached_bytes;
    pthread_mutex_unlock(&lock);
    for (size_t i = 0; i < nd; i++)
        map_free(drop[i]);
    return left;
}

size_t bigbuf_cached(void)
{
    pthread_mutex_lock(&lock);
    size_t n = cached_bytes;
    pthread_mutex_unlock(&lock);
    return n;
}
