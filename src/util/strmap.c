/* strmap: open-addressing string-keyed table with SipHash-1-3 (see strmap.h). */
#include "util/strmap.h"

#include <stdlib.h>
#include <string.h>

#include "util/mem.h"

#define ROTL(x, b) (uint64_t)(((x) << (b)) | ((x) >> (64 - (b))))
#define SIPROUND(v0, v1, v2, v3)                                                                   \
    do {                                                                                           \
        v0 += v1;                                                                                  \
        v1 = ROTL(v1, 13);                                                                         \
        v1 ^= v0;                                                                                  \
        v0 = ROTL(v0, 32);                                                                         \
        v2 += v3;                                                                                  \
        v3 = ROTL(v3, 16);                                                                         \
        v3 ^= v2;                                                                                  \
        v0 += v3;                                                                                  \
        v3 = ROTL(v3, 21);                                                                         \
        v3 ^= v0;                                                                                  \
        v2 += v1;                                                                                  \
        v1 = ROTL(v1, 17);                                                                         \
        v1 ^= v2;                                                                                  \
        v2 = ROTL(v2, 32);                                                                         \
    } while (0)

static uint64_t load64_le(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = (v << 8) | p[i];
    return v;
}

/* SipHash with one compression and three finalization rounds: what hash tables
 * keyed by untrusted strings use (Python, Rust's std before 1.x used 1-3 too). */
uint64_t strmap_hash(uint64_t k0, uint64_t k1, const void *data, size_t len)
{
    const uint8_t *p = data;
    uint64_t v0 = 0x736f6d6570736575ULL ^ k0, v1 = 0x646f72616e646f6dULL ^ k1,
             v2 = 0x6c7967656e657261ULL ^ k0, v3 = 0x7465646279746573ULL ^ k1;
    size_t full = len & ~(size_t)7;
    for (size_t i = 0; i < full; i += 8) {
        uint64_t m = load64_le(p + i);
        v3 ^= m;
        SIPROUND(v0, v1, v2, v3);
        v0 ^= m;
    }
    uint64_t b = (uint64_t)len << 56;
    for (size_t i = 0; i < (len & 7); i++)
        b |= (uint64_t)p[full + i] << (8 * i);
    v3 ^= b;
    SIPROUND(v0, v1, v2, v3);
    v0 ^= b;
    v2 ^= 0xff;
    SIPROUND(v0, v1, v2, v3);
    SIPROUND(v0, v1, v2, v3);
    SIPROUND(v0, v1, v2, v3);
    return v0 ^ v1 ^ v2 ^ v3;
}

void strmap_init(struct strmap *m, const uint8_t seed[16])
{
    memset(m, 0, sizeof *m);
    m->k0 = load64_le(seed);
    m->k1 = load64_le(seed + 8);
}

void strmap_free(struct strmap *m)
{
    free(m->slots);
    m->slots = NULL;
    m->cap = m->n = 0;
}

static uint32_t key_hash(const struct strmap *m, const char *key, size_t len)
{
    return (uint32_t)strmap_hash(m->k0, m->k1, key, len);
}

/* The slot holding key, or the empty slot where it would go. */
static struct strmap_slot *find(const struct strmap *m, const char *key, size_t len, uint32_t h)
{
    size_t mask = m->cap - 1;
    for (size_t i = h & mask;; i = (i + 1) & mask) {
        struct strmap_slot *s = &m->slots[i];
        if (!s->key) return s;
        if (s->hash == h && s->len == len && memcmp(s->key, key, len) == 0) return s;
    }
}

void *strmap_get(const struct strmap *m, const char *key, size_t len)
{
    if (!m->n) return NULL;
    struct strmap_slot *s = find(m, key, len, key_hash(m, key, len));
    return s->key ? s->val : NULL;
}

/* Doubles the table (at most 3/4 full before a put). */
static void grow(struct strmap *m)
{
    struct strmap_slot *old = m->slots;
    size_t oldcap = m->cap;
    m->cap = oldcap ? oldcap * 2 : 16;
    m->slots = xcalloc(m->cap, sizeof *m->slots);
    for (size_t i = 0; i < oldcap; i++)
        if (old[i].key) *find(m, old[i].key, old[i].len, old[i].hash) = old[i];
    free(old);
}

void *strmap_put(struct strmap *m, const char *key, size_t len, void *val)
{
    if (len > UINT32_MAX) abort();
    if ((m->n + 1) * 4 > m->cap * 3) grow(m);
    uint32_t h = key_hash(m, key, len);
    struct strmap_slot *s = find(m, key, len, h);
    if (s->key) {
        void *prev = s->val;
        s->key = key; /* the new owner's bytes (equal to the old ones) */
        s->val = val;
        return prev;
    }
    *s = (struct strmap_slot){key, (uint32_t)len, h, val};
    m->n++;
    return NULL;
}

void *strmap_del(struct strmap *m, const char *key, size_t len)
{
    if (!m->n) return NULL;
    struct strmap_slot *s = find(m, key, len, key_hash(m, key, len));
    if (!s->key) return NULL;
    void *val = s->val;
    size_t mask = m->cap - 1, hole = (size_t)(s - m->slots);
    /* Backward shift: pull later entries of the run into the hole while that does
     * not move one before its home slot. */
    for (size_t j = (hole + 1) & mask; m->slots[j].key; j = (j + 1) & mask) {
        size_t home = m->slots[j].hash & mask;
        if (((j - home) & mask) >= ((j - hole) & mask)) {
            m->slots[hole] = m->slots[j];
            hole = j;
        }
    }
    m->slots[hole] = (struct strmap_slot){0};
    m->n--;
    return val;
}

void *strmap_next(const struct strmap *m, size_t *pos)
{
    while (*pos < m->cap) {
        struct strmap_slot *s = &m->slots[(*pos)++];
        if (s->key) return s->val;
    }
    return NULL;
}
