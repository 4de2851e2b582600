/* libFuzzer target for proto/base64.
 *
 * Two properties: encoding any bytes and decoding the result gives the bytes back;
 * and since the decoder accepts only canonical padded text, whatever it accepts
 * re-encodes to exactly the same text. Rejections must leave a NUL-terminated error
 * message (it goes into a JSON-RPC reply). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proto/base64.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* encode -> decode is the identity. */
    char *text = malloc(base64_encoded_len(size) + 1);
    size_t tlen = base64_encode(data, size, text);
    if (tlen != base64_encoded_len(size)) abort();
    uint8_t *back = malloc(base64_decoded_max(tlen));
    size_t blen = 0;
    char err[64];
    if (base64_decode(text, tlen, back, &blen, err, sizeof err) != 0) {
        fprintf(stderr, "decode of our own encoding failed: %s\n", err);
        abort();
    }
    if (blen != size || (size && memcmp(back, data, size) != 0)) abort();
    free(back);
    free(text);

    /* decode (arbitrary text) -> encode gives the same text. */
    uint8_t *raw = malloc(base64_decoded_max(size));
    size_t rlen = 0;
    memset(err, 'x', sizeof err);
    if (base64_decode((const char *)data, size, raw, &rlen, err, sizeof err) != 0) {
        if (!memchr(err, '\0', sizeof err) || err[0] == '\0') abort();
        free(raw);
        return 0;
    }
    if (rlen > base64_decoded_max(size)) abort();
    char *again = malloc(base64_encoded_len(rlen) + 1);
    size_t alen = base64_encode(raw, rlen, again);
    if (alen != size || (size && memcmp(again, data, size) != 0)) {
        fprintf(stderr, "accepted non-canonical base64 (%zu chars -> %zu bytes)\n", size, rlen);
        abort();
    }
    free(again);
    free(raw);
    return 0;
}
