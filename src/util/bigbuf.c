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
    size_t map_len;     /* bytes of the mapping (header included) */
    uint64_t freed_ms;  /* when it entered the cache */
    char pad[40];
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct hdr *cache[CACHE_SLOTS];
static size_t ncache, cached_bytes;
static void (*cached_hook)(void);

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

void *bigbuf_alloc(size_t n, size_t *cap)
{
    size_t len = map_len_for(n);
    struct hdr *h = NULL;
    pthread_mutex_lock(&lock);
    /* Best fit among the cached: the smallest that is large enough. */
    size_t best = CACHE_SLOTS;
    for (size_t i = 0; i < ncache; i++)
        if (cache[i]->map_len >= len && (best == CACHE_SLOTS || cache[i]->map_len < cache[best]->map_len))
            best = i;
    if (best < CACHE_SLOTS) {
        h = cache[best];
        cache[best] = cache[--ncache];
        cached_bytes -= h->map_len;
    }
    pthread_mutex_unlock(&lock);
    if (!h) {
        h = map_new(len);
        h->magic = MAGIC;
        h->map_len = len;
    }
    if (cap) *cap = h->map_len - sizeof *h;
    return h + 1;
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
        h = map_grow(h, len);
        h->map_len = len;
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
    bool first = false;
    pthread_mutex_lock(&lock);
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
        first = ncache == 0;
        cache[ncache++] = h;
        cached_bytes += h->map_len;
        h = NULL;
    }
    void (*hook)(void) = cached_hook;
    pthread_mutex_unlock(&lock);
    if (h) map_free(h);
    else if (first && hook) hook();
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
    for (size_t i = 0; i < nd; i++) map_free(drop[i]);
    return left;
}

size_t bigbuf_cached(void)
{
    pthread_mutex_lock(&lock);
    size_t n = cached_bytes;
    pthread_mutex_unlock(&lock);
    return n;
}

void bigbuf_set_cached_hook(void (*fn)(void))
{
    pthread_mutex_lock(&lock);
    cached_hook = fn;
    pthread_mutex_unlock(&lock);
}
