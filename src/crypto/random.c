/* random: getrandom(2) with short reads and EINTR handled (see random.h). */
#include "crypto/random.h"

#include <errno.h>
#include <stdint.h>
#include <sys/random.h>
#include <sys/types.h>

int crypto_random_bytes(void *out, size_t n)
{
    uint8_t *p = out;
    while (n > 0) {
        ssize_t got = getrandom(p, n, 0);
        if (got < 0) {
            if (errno == EINTR) continue;
            return -EIO;
        }
        p += got;
        n -= (size_t)got;
    }
    return 0;
}
