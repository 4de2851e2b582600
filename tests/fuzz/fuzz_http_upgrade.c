/* libFuzzer target for proto/http_upgrade.
 *
 * Feeds arbitrary bytes as a received request head. Whatever the parser decides
 * must be a well-formed decision: no reply while incomplete; otherwise one complete
 * HTTP/1.1 response whose status line matches info->status; an upgrade consumes
 * part of the input and is decided the same way from exactly that part (so bytes
 * after the head, which belong to the WebSocket, never change the answer); the
 * Authorization copy is always a NUL-terminated string. Accepted upgrades then go
 * through the capability-token check (transport/auth, token "sekret"): a refusal must
 * turn the 101 into a complete 401. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "transport/auth.h"
#include "proto/http_upgrade.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_reply(enum http_outcome o, const struct http_request_info *info,
                        const struct buf *reply)
{
    if (!memchr(info->authorization, '\0', sizeof info->authorization)) abort();
    if (o == HTTP_INCOMPLETE) {
        if (reply->len != 0) abort();
        return;
    }
    /* GET/HEAD /metrics is answered by the caller (auth first, then the text). */
    if (o == HTTP_METRICS) {
        if (reply->len != 0) abort();
        return;
    }
    char want[32];
    int n = snprintf(want, sizeof want, "HTTP/1.1 %d ", info->status);
    if (info->status < 100 || info->status > 599) abort();
    if (reply->len < (size_t)n || memcmp(reply->data, want, (size_t)n) != 0) abort();
    /* The head of the response ends with an empty line. */
    const char *end = memmem(reply->data, reply->len, "\r\n\r\n", 4);
    if (!end) abort();
    if ((o == HTTP_WEBSOCKET) != (info->status == 101)) abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct http_request_info info;
    struct buf reply;
    buf_init(&reply);
    enum http_outcome o = http_upgrade_parse((const char *)data, size, &info, &reply);
    check_reply(o, &info, &reply);
    if (o == HTTP_WEBSOCKET) {
        if (info.consumed == 0 || info.consumed > size) abort();
        struct http_request_info again;
        struct buf reply2;
        buf_init(&reply2);
        if (http_upgrade_parse((const char *)data, info.consumed, &again, &reply2) !=
            HTTP_WEBSOCKET)
            abort();
        if (reply2.len != reply.len || memcmp(reply2.data, reply.data, reply.len) != 0) abort();
        if (strcmp(again.authorization, info.authorization) != 0) abort();
        buf_free(&reply2);
        static struct auth_key key;
        static bool have_key;
        if (!have_key) {
            have_key = true;
            if (auth_key_from_token("sekret", 6, &key) != 0) abort();
            auth_configure(&key);
        }
        enum auth_verdict v = auth_check(&key, info.authorization);
        if (v != AUTH_OK && v != AUTH_MISSING && v != AUTH_BAD_HEADER && v != AUTH_WRONG) abort();
        if (auth_admit(info.authorization, &reply, NULL) != (v == AUTH_OK)) abort();
        if (v != AUTH_OK) {
            const char *body = auth_verdict_text(v);
            size_t bl = strlen(body);
            if (reply.len < 40 || memcmp(reply.data, "HTTP/1.1 401 ", 13) != 0 ||
                memcmp(reply.data + reply.len - bl, body, bl) != 0)
                abort();
        }
    }
    buf_free(&reply);
    return 0;
}
