/* strmap: a hash table from byte-string keys to pointers, for tables whose keys come
 * from the network (the registry's environments and relay streams): open addressing
 * with linear probing and backward-shift deletion (no tombstones), hashed with
 * SipHash-1-3 under a per-table random key, so a peer that picks its stream ids cannot
 * aim them all at one bucket.
 *
 * The table does not own its keys: a key's bytes must stay valid, unchanged, while it
 * is in the table (callers keep the key inside the value they store). Values are
 * opaque pointers, never NULL. Not thread-safe. */
#ifndef EXEC_UTIL_STRMAP_H
#define EXEC_UTIL_STRMAP_H

#include <stddef.h>
#include <stdint.h>

struct strmap_slot {
    const char *key; /* borrowed; NULL marks an empty slot */
    uint32_t len;    /* key bytes */
    uint32_t hash;   /* low bits of the key's hash (probe start) */
    void *val;
};

struct strmap {
    struct strmap_slot *slots; /* cap slots (a power of two), or NULL before the first put */
    size_t cap;
    size_t n;        /* keys stored */
    uint64_t k0, k1; /* the SipHash key */
};

/* An empty table keyed with seed (16 random bytes: crypto_random_bytes). */
void strmap_init(struct strmap *m, const uint8_t seed[16]);
/* Frees the slots (not the keys or values). */
void strmap_free(struct strmap *m);

/* The value stored for key[0..len), or NULL. */
void *strmap_get(const struct strmap *m, const char *key, size_t len);
/* Stores val (not NULL) for key[0..len) (borrowed, see above), replacing and
 * returning the previous value, or NULL when the key is new. Keys longer than
 * UINT32_MAX are a caller bug (abort). */
void *strmap_put(struct strmap *m, const char *key, size_t len, void *val);
/* Removes key and returns its value, or NULL when it was not there. */
void *strmap_del(struct strmap *m, const char *key, size_t len);

/* Iteration: start with *pos = 0; returns the next value and advances *pos, or NULL
 * at the end. The table must not change during a walk (a deletion shifts entries
 * back): gather what to delete first. */
void *strmap_next(const struct strmap *m, size_t *pos);

/* SipHash-1-3 of data under (k0, k1): the table's hash, exposed for tests. */
uint64_t strmap_hash(uint64_t k0, uint64_t k1, const void *data, size_t len);

#endif
