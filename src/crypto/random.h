/* random: the one source of randomness in the tree: the kernel's CSPRNG through
 * getrandom(2), for every key, ephemeral, nonce, session id, token, request id,
 * WebSocket masking key and placeholder tag, in the server and the client library
 * alike. It fails closed: there is no fallback (an unseeded random(), a constant,
 * another generator), because a predictable session id lets a client take over a
 * session on resume, so when the kernel will not give random bytes the process
 * stops instead of carrying on with guessable ones. `tests/arch/test_random.py`
 * (ctest arch/random) fails on any other call to getrandom, random, rand,
 * arc4random or OpenSSL's RAND_bytes. */
#ifndef EXEC_CRYPTO_RANDOM_H
#define EXEC_CRYPTO_RANDOM_H

#include <stddef.h>

/* Fills out[0..n) with random bytes (short reads and EINTR handled). Never fails:
 * if getrandom(2) refuses (ENOSYS on a pre-3.17 kernel, EFAULT), it logs why on
 * stderr and aborts. */
void crypto_random_bytes(void *out, size_t n);

#endif
