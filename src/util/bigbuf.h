/* bigbuf: large buffers (a received message of megabytes, its decoded bytes, a
 * large reply) that are reused instead of being returned to the kernel at once.
 *
 * Why: a fresh page costs a fault and a zeroing on first touch, and on the
 * virtual machines we run on (a paravirtualised MMU) a 4 KiB fault costs 30-60 us:
 * 32 MiB touched for the first time took 400-500 ms there, and the same memory
 * touched again 7-9 ms (docs/WRITE_PATH.md).
 * glibc gives anything above 32 MiB back with munmap on free and trims its heap
 * top, so each large request paid those faults again. A bigbuf is an anonymous
 * mapping in 2 MiB units with MADV_HUGEPAGE (one fault per 2 MiB where the kernel
 * has transparent huge pages), and freed ones stay in a small cache for the next
 * request of similar size. The cache is bounded (BIGBUF_CACHE_MAX bytes of
 * mappings) and its owner empties it after a few idle seconds (bigbuf_trim; the
 * daemon's main loop does), as jemalloc's decay does, so an idle server holds
 * nothing.
 *
 * Thread-safe: buffers may be taken on one thread and freed on another. Under
 * AddressSanitizer the buffers come from malloc so overruns are still caught. */
#ifndef EXEC_UTIL_BIGBUF_H
#define EXEC_UTIL_BIGBUF_H

#include <stddef.h>
#include <stdint.h>

/* Below this a request goes to malloc: no caching, no huge pages. */
#define BIGBUF_MIN (256u << 10)
/* Bytes of cached (free) mappings kept at most. */
#define BIGBUF_CACHE_MAX (160u << 20)

/* Returns a buffer of at least n bytes (n >= BIGBUF_MIN) and its usable size in
 * *cap (may be NULL). Aborts on exhaustion like xmalloc. Free with bigbuf_free. */
void *bigbuf_alloc(size_t n, size_t *cap);

/* The same for a buffer expected to grow to an unknown size (a message arriving in
 * fragments of at most 16 MiB): the largest cached buffer of at least n bytes, on the
 * guess that it grows as large as the last such one did. Growing a best-fit buffer
 * instead maps fresh pages for the rest, each faulted and zeroed again: a fragmented
 * 43 MB fs/writeFile spent a quarter of its server time there. */
void *bigbuf_alloc_growable(size_t n, size_t *cap);

/* Grows p (from bigbuf_alloc) to at least n bytes, keeping its contents; may move
 * it (without copying the pages where the kernel can remap them). */
void *bigbuf_grow(void *p, size_t n, size_t *cap);

/* The usable size of p. */
size_t bigbuf_cap(const void *p);

/* Gives p back (into the cache, or to the kernel when the cache is full). NULL is
 * ignored. */
void bigbuf_free(void *p);

/* Frees p, whichever allocator it came from: bigbuf_free for a live bigbuf, else
 * free(). For code that frees storage it did not allocate (the transports free
 * what a message was written from). Costs one atomic load while no bigbuf is
 * live. */
void bigbuf_free_any(void *p);

/* Unmaps cached buffers unused for at least idle_ms; returns the bytes still
 * cached. */
size_t bigbuf_trim(uint64_t idle_ms);

/* Bytes of mappings in the cache now. */
size_t bigbuf_cached(void);

#endif
