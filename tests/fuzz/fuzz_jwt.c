/* libFuzzer target for transport/jwt and session/env_config's TOML filter: both read
 * untrusted text (a bearer token from any peer, a config file anyone may have edited).
 *
 * The first byte picks the target. jwt_verify must return one of its verdicts and
 * never accept a token that is not signed with the secret: a random input verifying
 * as JWT_OK would mean a forged token. The filter must return a NUL-terminated string
 * no longer than its input plus the blank lines it may add between sections. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "session/env_config.h"
#include "transport/jwt.h"

#define SECRET "fuzz-secret-of-at-least-thirty-two-bytes"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0) return 0;
    const char *text = (const char *)data + 1;
    size_t n = size - 1;
    if (data[0] & 1) {
        enum jwt_verdict v = jwt_verify(text, n, (const uint8_t *)SECRET, strlen(SECRET), "iss",
                                        "aud", 30, 1700000000);
        if (v > JWT_AUDIENCE) abort();
        /* Accepting needs a valid HMAC: impossible for fuzzed bytes without the key. */
        if (v == JWT_OK) abort();
        return 0;
    }
    json_t *paths = json_pack("[[s],[s,s],[s]]", "mcp_servers", "other", "k", "model");
    char *out = env_config_filter(text, n, paths);
    size_t len = strlen(out);
    if (len > 2 * n + 64) abort();
    free(out);
    json_decref(paths);
    return 0;
}
