/* fleet_throttle: token buckets by key (the registry throttles /connect per bearer
 * token: a flood from one token gets 429 before it costs a database call, and other
 * tokens are served as before). Pure: the caller passes the time. The key is the
 * digest of the whole presented secret, so nobody can spend another token's budget
 * without holding that token. Memory is bounded: at most `max` keys; when full, the
 * keys whose buckets have refilled (idle ones) are forgotten first. */
#ifndef EXEC_FLEET_THROTTLE_H
#define EXEC_FLEET_THROTTLE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "util/strmap.h"

struct fleet_throttle {
    struct strmap map; /* key -> struct fleet_bucket */
    double rate;       /* tokens added per second */
    double burst;      /* bucket size */
    size_t max;        /* keys kept at most */
};

/* rate per second, burst, at most max keys; seed: 16 random bytes. */
void fleet_throttle_init(struct fleet_throttle *t, double rate, double burst, size_t max,
                         const uint8_t seed[16]);
void fleet_throttle_free(struct fleet_throttle *t);
/* Takes one token from key's bucket at now_ms: true when there was one; false with
 * *retry_ms (when not NULL) the wait until the next. *first_refusal tells whether
 * this is the first refusal since the key was last served (for one log line per
 * burst of refusals). */
bool fleet_throttle_take(struct fleet_throttle *t, const char *key, size_t len, uint64_t now_ms,
                         uint64_t *retry_ms, bool *first_refusal);

#endif
