/* noise_key: a Noise IK public key's JSON form (see noise_key.h). */
#include "proto/noise_key.h"

#include <errno.h>
#include <string.h>

#include "proto/base64.h"

json_t *noise_ik_public_key_to_json(const struct noise_ik_public_key *pub)
{
    char x[NOISE_IK_X25519_B64_LEN + 1], m[NOISE_IK_MLKEM_B64_LEN + 1];
    x[base64_encode(pub->x25519, sizeof pub->x25519, x)] = '\0';
    m[base64_encode(pub->mlkem, sizeof pub->mlkem, m)] = '\0';
    /* jansson keeps insertion order, so this is also the reference's member order. */
    return json_pack("{s:s, s:s, s:s}", "suite", NOISE_IK_SUITE, "x25519_public_key", x,
                     "mlkem768_public_key", m);
}

/* One base64 member decoding to exactly want bytes. */
static int decode_member(const json_t *obj, const char *name, uint8_t *dst, size_t want)
{
    const json_t *v = json_object_get(obj, name);
    uint8_t tmp[NOISE_IK_MLKEM_B64_LEN / 4 * 3 + 3]; /* base64_decoded_max of the longest */
    char err[64];
    size_t got = 0, slen;
    if (!json_is_string(v)) return -EINVAL;
    slen = json_string_length(v);
    if (slen != base64_encoded_len(want)) return -EINVAL;
    if (base64_decode(json_string_value(v), slen, tmp, &got, err, sizeof err) < 0 || got != want)
        return -EINVAL;
    memcpy(dst, tmp, want);
    return 0;
}

int noise_ik_public_key_from_json(const json_t *obj, struct noise_ik_public_key *pub)
{
    const json_t *suite = json_object_get(obj, "suite");
    struct noise_ik_public_key tmp;
    /* deny_unknown_fields on the reference side: exactly our three members. */
    if (!json_is_object(obj) || json_object_size(obj) != 3 || !json_is_string(suite))
        return -EINVAL;
    if (json_string_length(suite) != strlen(NOISE_IK_SUITE) ||
        memcmp(json_string_value(suite), NOISE_IK_SUITE, strlen(NOISE_IK_SUITE)) != 0)
        return -EINVAL;
    if (decode_member(obj, "x25519_public_key", tmp.x25519, sizeof tmp.x25519) < 0 ||
        decode_member(obj, "mlkem768_public_key", tmp.mlkem, sizeof tmp.mlkem) < 0)
        return -EINVAL;
    *pub = tmp;
    return 0;
}

int noise_ik_public_key_parse(const char *text, size_t len, struct noise_ik_public_key *pub)
{
    json_t *obj = json_loadb(text, len, JSON_REJECT_DUPLICATES, NULL);
    int rc = obj ? noise_ik_public_key_from_json(obj, pub) : -EINVAL;
    json_decref(obj);
    return rc;
}
