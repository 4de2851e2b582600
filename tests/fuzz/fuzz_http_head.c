/* libFuzzer target for proto/http_head, the one HTTP/1 head tokenizer, and the
 * proxy's heads on top of it (netproxy/np_http).
 *
 * Feeds arbitrary bytes as a head. The tokenizer must agree with itself: a head it
 * finds complete is found complete, with the same end, from exactly its own bytes
 * (what follows never changes it) and never from fewer; every field it hands out
 * lies inside the head, is a token name and a value free of CR, LF and NUL. The
 * proxy's request and response parsers must return the head's length, 0, -EINVAL or
 * -E2BIG, with every header inside the head; a request's target, forwarded head and
 * body framing must then run without fault. */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "netproxy/np_http.h"
#include "proto/http_head.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

struct check {
    const char *data;
    size_t size;
};

static int check_field(void *ctx, struct http_span name, struct http_span value)
{
    const struct check *c = ctx;
    if (name.n == 0 || name.p < c->data || name.p + name.n > c->data + c->size) abort();
    if (value.n && (value.p < c->data || value.p + value.n > c->data + c->size)) abort();
    for (size_t i = 0; i < name.n; i++)
        if (!http_is_tchar((unsigned char)name.p[i])) abort();
    for (size_t i = 0; i < value.n; i++)
        if (value.p[i] == '\r' || value.p[i] == '\n' || value.p[i] == '\0') abort();
    return 0;
}

static void check_tokenizer(const char *d, size_t size)
{
    struct check c = {d, size};
    struct http_head h;
    http_head_scan(d, size, 4096, check_field, &c, &h);
    if (!h.end) return;
    if (h.end > size || h.end > 4096 || !h.has_start) abort();
    struct http_head again;
    http_head_scan(d, h.end, 4096, NULL, NULL, &again);
    if (again.end != h.end || again.bad_field != h.bad_field) abort();
    http_head_scan(d, h.end - 1, 4096, NULL, NULL, &again);
    if (again.end) abort();
}

static void check_np_head(const char *d, size_t size, int rc, const struct np_http_head *r)
{
    if (rc == 0 || rc == -EINVAL || rc == -E2BIG) return;
    if (rc < 0 || (size_t)rc > size || r->head_len != (size_t)rc) abort();
    for (size_t i = 0; i < r->n; i++)
        if (r->h[i].name < d || r->h[i].name + r->h[i].name_len > d + rc) abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *d = (const char *)data;
    check_tokenizer(d, size);
    struct np_http_head *r = malloc(sizeof *r);
    int rc = np_http_parse_response(d, size, r);
    check_np_head(d, size, rc, r);
    rc = np_http_parse_request(d, size, r);
    check_np_head(d, size, rc, r);
    if (rc > 0) {
        struct np_http_target t;
        const char *why;
        if (np_http_target(r, 80, &t, &why) == 0) {
            struct buf out;
            buf_init(&out);
            np_http_forward_head(r, &t, NULL, NULL, &out);
            buf_free(&out);
        }
        struct np_body b;
        if (np_body_init(&b, r) == 0) {
            long n = np_body_feed(&b, d + rc, size - (size_t)rc);
            if ((n < 0 && n != -EINVAL) || n > (long)(size - (size_t)rc)) abort();
        }
    }
    free(r);
    return 0;
}
