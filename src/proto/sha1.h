/* sha1: SHA-1 (FIPS 180-4) of a byte string, for the WebSocket accept key only.
 *
 * Our own ~60 lines rather than OpenSSL's SHA1(): in OpenSSL 3 that one call
 * initialises the library context and its default provider, which costs the
 * daemon about 2.2 MB of resident memory for hashing 60 bytes once per
 * connection (measured: idle RSS 3.5 MB -> 5.7 MB after the first upgrade). Not for
 * security uses (SHA-1 is broken for those); pure function, no I/O. */
#ifndef EXEC_PROTO_SHA1_H
#define EXEC_PROTO_SHA1_H

#include <stddef.h>
#include <stdint.h>

#define SHA1_LEN 20

/* Writes the 20-byte digest of n bytes of p into out. */
void sha1(const void *p, size_t n, uint8_t out[SHA1_LEN]);

#endif
