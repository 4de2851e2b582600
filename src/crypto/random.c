/* random: getrandom(2) with short reads and EINTR handled, failing closed (see
 * random.h). */
#include "crypto/random.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/types.h>

void crypto_random_bytes(void *out, size_t n)
{
    uint8_t *p = out;
    while (n > 0) {
        ssize_t got = getrandom(p, n, 0);
        if (got < 0) {
            if (errno == EINTR) continue;
            /* No randomness: ids and keys would be guessable. Stop rather than
             * hand one out (fail closed). */
            fprintf(stderr,
                    "exec-server: getrandom(2) failed (%s); refusing to continue "
                    "without a source of randomness\n",
                    strerror(errno));
            abort();
        }
        p += got;
        n -= (size_t)got;
    }
}
