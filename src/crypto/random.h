/* random: the kernel's CSPRNG for keys, ephemerals and nonces-to-be (getrandom(2)).
 * One place so that every caller handles short reads and EINTR the same way. */
#ifndef EXEC_CRYPTO_RANDOM_H
#define EXEC_CRYPTO_RANDOM_H

#include <stddef.h>

/* Fills out[0..n) with random bytes. Returns 0, or -EIO when the kernel refuses. */
int crypto_random_bytes(void *out, size_t n);

#endif
