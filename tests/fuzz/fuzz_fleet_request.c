/* libFuzzer target for what `exec-server registry` reads from strangers before anything
 * else: a request head (proto/http_upgrade's http_request_scan with the registry's
 * fields), the rendezvous URL query in it (fleet_url_verify), and a bearer token and a
 * harness-key authorization in the body (fleet_token_split, fleet_authorization_ok).
 *
 * Properties: the scan's spans lie inside the input (but the path "/" of an absolute-form
 * target with none) and the head ends where it says;
 * verification answers only 0, -EINVAL or -ETIMEDOUT, and a query it accepts is exactly
 * the one signing its claims again gives (no second spelling of a signed URL). */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fleet/fleet_sign.h"
#include "proto/http_upgrade.h"

static const uint8_t secret[FLEET_SECRET_LEN] = {7, 7, 7};

static void inside(const char *base, size_t len, const char *p, size_t n)
{
    if (n && (p < base || p + n > base + len)) abort();
}

static void check_query(const char *q, size_t n)
{
    struct fleet_url_claims c;
    int r = fleet_url_verify(secret, "env-1", q, n, 1000, &c);
    if (r != 0 && r != -EINVAL && r != -ETIMEDOUT) abort();
    if (r != 0) return;
    char again[512];
    if (fleet_url_sign(secret, "env-1", &c, again, sizeof again) != 0) abort();
    /* The members may come in another order; the signed claims may not differ. */
    struct fleet_url_claims c2;
    if (fleet_url_verify(secret, "env-1", again, strlen(again), 1000, &c2) != 0 ||
        memcmp(&c, &c2, sizeof c) != 0)
        abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *d = (const char *)data;
    struct http_field f[4] = {{"content-length", false, NULL, 0},
                              {"authorization", false, NULL, 0},
                              {"sec-websocket-key", false, NULL, 0},
                              {"connection", false, NULL, 0}};
    struct http_request_head h;
    enum http_scan_result r = http_request_scan(d, size, f, 4, &h);
    if (r == HTTP_SCAN_OK) {
        if (h.consumed == 0 || h.consumed > size) abort();
        inside(d, size, h.method, h.method_len);
        /* An absolute-form target without a path is the path "/" (a static string). */
        if (!(h.path_len == 1 && h.path[0] == '/')) inside(d, size, h.path, h.path_len);
        inside(d, size, h.query, h.query_len);
        for (int i = 0; i < 4; i++)
            if (f[i].seen) inside(d, size, f[i].value, f[i].len);
        if (f[3].seen) (void)http_list_has(f[3].value, f[3].len, "upgrade");
        if (f[2].seen) (void)http_ws_key_ok(f[2].value, f[2].len);
        check_query(h.query ? h.query : "", h.query_len);
        const char *body = d + h.consumed;
        size_t blen = size - h.consumed;
        char id[FLEET_TOKEN_ID_LEN + 1], digest[FLEET_DIGEST_HEX + 1];
        if (fleet_token_split(body, blen, id, digest) == 0 && strlen(id) != FLEET_TOKEN_ID_LEN)
            abort();
        (void)fleet_authorization_ok(secret, "env-1", "reg-1", digest, body, blen, 1000);
    }
    /* The whole input as a query too (most of it is not a request head). */
    check_query(d, size);
    return 0;
}
