/* noise_key: the JSON form of a remote-mode Noise IK public key (§3.5 of the remote spec),
 * {"suite":…,"x25519_public_key":…,"mlkem768_public_key":…} with standard padded
 * base64: what the registry stores for an executor and a harness presents. A codec
 * beside base64 rather than part of crypto/noise_ik, which stays bytes in, bytes out
 * (so crypto sits below proto). Pure functions, no I/O. */
#ifndef EXEC_PROTO_NOISE_KEY_H
#define EXEC_PROTO_NOISE_KEY_H

#include <jansson.h>
#include <stddef.h>

#include "crypto/noise_ik.h"

/* Length of the public-key JSON members' base64 text. */
#define NOISE_IK_X25519_B64_LEN 44
#define NOISE_IK_MLKEM_B64_LEN 1580

/* Public-key JSON, §3.5: {"suite":…,"x25519_public_key":…,"mlkem768_public_key":…}
 * with standard padded base64. Returns a new object (caller owns the reference). */
json_t *noise_ik_public_key_to_json(const struct noise_ik_public_key *pub);
/* Strict decode: an object with exactly those three members, the suite equal to
 * NOISE_IK_SUITE, canonical base64 of exactly 32 and 1184 bytes. 0 or -EINVAL. */
int noise_ik_public_key_from_json(const json_t *obj, struct noise_ik_public_key *pub);
/* Same, from JSON text (len bytes, no NUL needed). 0 or -EINVAL. */
int noise_ik_public_key_parse(const char *text, size_t len, struct noise_ik_public_key *pub);

#endif
