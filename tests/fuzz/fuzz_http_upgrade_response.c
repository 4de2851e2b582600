/* libFuzzer target for http_upgrade_response_parse (proto/http_upgrade), the clients'
 * check of the answer to their upgrade request.
 *
 * Feeds arbitrary bytes as a received response head (to a request sent with the
 * RFC 6455 example key, so the seeds can reach a valid 101). Whatever the parser
 * decides must be a well-formed decision: nothing consumed while incomplete, and
 * only up to the head limit; a decided head is decided the same way from exactly
 * its bytes (what follows belongs to the WebSocket or the body and never changes
 * the answer) and is not decided from one byte less; an upgrade is a 101; a BAD
 * verdict says why. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "proto/http_upgrade.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char KEY[] = "dGhlIHNhbXBsZSBub25jZQ==";

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *d = (const char *)data;
    struct http_response_info info;
    enum http_response_outcome o = http_upgrade_response_parse(d, size, KEY, &info);
    switch (o) {
    case HTTP_RESPONSE_INCOMPLETE:
        if (info.consumed != 0 || size > HTTP_MAX_HEAD) abort();
        return 0;
    case HTTP_RESPONSE_BAD:
        if (!info.error || !*info.error) abort();
        return 0;
    case HTTP_RESPONSE_UPGRADED:
        if (info.status != 101) abort();
        break;
    case HTTP_RESPONSE_REFUSED:
        if (info.status == 101 || info.status < 0 || info.status > 999) abort();
        break;
    default: abort();
    }
    if (info.consumed == 0 || info.consumed > size || info.consumed > HTTP_MAX_HEAD) abort();
    if (info.status_line < d || info.status_line + info.status_line_len > d + info.consumed)
        abort();
    struct http_response_info again;
    if (http_upgrade_response_parse(d, info.consumed, KEY, &again) != o) abort();
    if (again.consumed != info.consumed || again.status != info.status) abort();
    enum http_response_outcome shorter =
        http_upgrade_response_parse(d, info.consumed - 1, KEY, &again);
    if (shorter != HTTP_RESPONSE_INCOMPLETE && shorter != HTTP_RESPONSE_BAD) abort();
    return 0;
}
