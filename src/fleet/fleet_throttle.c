/* fleet_throttle: token buckets (see fleet_throttle.h). */
#include "fleet/fleet_throttle.h"

#include <stdlib.h>
#include <string.h>

#include "util/mem.h"

#define KEY_MAX 64

struct fleet_bucket {
    char key[KEY_MAX]; /* the map's key bytes live here */
    size_t len;
    double tokens;
    uint64_t last_ms;
    bool refused; /* refused since last served */
};

void fleet_throttle_init(struct fleet_throttle *t, double rate, double burst, size_t max,
                         const uint8_t seed[16])
{
    strmap_init(&t->map, seed);
    t->rate = rate;
    t->burst = burst < 1 ? 1 : burst;
    t->max = max ? max : 1;
}

static void free_all(struct fleet_throttle *t)
{
    size_t pos = 0;
    struct fleet_bucket *b;
    while ((b = strmap_next(&t->map, &pos)))
        free(b);
}

void fleet_throttle_free(struct fleet_throttle *t)
{
    free_all(t);
    strmap_free(&t->map);
}

static void refill(const struct fleet_throttle *t, struct fleet_bucket *b, uint64_t now)
{
    if (now > b->last_ms) {
        b->tokens += (double)(now - b->last_ms) * t->rate / 1000.0;
        if (b->tokens > t->burst) b->tokens = t->burst;
    }
    b->last_ms = now;
}

/* Forgets every key whose bucket is full again; when none is, every key (a table
 * of max live floods is an attack on the table itself: start over). */
static void sweep(struct fleet_throttle *t, uint64_t now)
{
    struct fleet_bucket **idle = xmalloc(t->map.n * sizeof *idle);
    size_t n = 0, pos = 0;
    struct fleet_bucket *b;
    while ((b = strmap_next(&t->map, &pos))) {
        refill(t, b, now);
        if (b->tokens >= t->burst) idle[n++] = b;
    }
    if (n == 0) {
        free_all(t);
        strmap_free(&t->map);
        strmap_init(&t->map, (const uint8_t[16]){0}); /* re-seeded below */
    }
    for (size_t i = 0; i < n; i++) {
        strmap_del(&t->map, idle[i]->key, idle[i]->len);
        free(idle[i]);
    }
    free(idle);
}

bool fleet_throttle_take(struct fleet_throttle *t, const char *key, size_t len, uint64_t now_ms,
                         uint64_t *retry_ms, bool *first_refusal)
{
    if (len > KEY_MAX) len = KEY_MAX;
    struct fleet_bucket *b = strmap_get(&t->map, key, len);
    if (!b) {
        if (t->map.n >= t->max) {
            uint64_t k0 = t->map.k0, k1 = t->map.k1;
            sweep(t, now_ms);
            t->map.k0 = k0, t->map.k1 = k1; /* keep the random key across a reset */
        }
        b = xcalloc(1, sizeof *b);
        memcpy(b->key, key, len);
        b->len = len;
        b->tokens = t->burst;
        b->last_ms = now_ms;
        strmap_put(&t->map, b->key, len, b);
    }
    refill(t, b, now_ms);
    if (first_refusal) *first_refusal = false;
    if (b->tokens >= 1) {
        b->tokens -= 1;
        b->refused = false;
        return true;
    }
    if (retry_ms) *retry_ms = (uint64_t)((1 - b->tokens) * 1000.0 / t->rate) + 1;
    if (first_refusal) *first_refusal = !b->refused;
    b->refused = true;
    return false;
}
