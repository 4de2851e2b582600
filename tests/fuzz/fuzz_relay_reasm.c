/* libFuzzer target for proto/relay_framing: the inbound reassembler and the framer.
 *
 * The input is a plaintext byte stream (length-prefixed messages, possibly invalid).
 * Its first byte seeds how the rest is cut into records of 0..61,440 bytes; feeding
 * those records must yield exactly what a one-shot parse of the whole stream yields:
 * the same messages in order, and the length error if the stream has one (by the end
 * of the input at the latest). Separately, the whole input framed as one message and
 * reassembled must come back unchanged. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proto/relay_framing.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(int cond, const char *what)
{
    if (!cond) {
        fprintf(stderr, "fuzz_relay_reasm: %s\n", what);
        abort();
    }
}

/* The one-shot parse's messages, consumed in order by on_msg. */
struct want {
    const uint8_t *msg[4096];
    size_t len[4096];
    size_t count;
    size_t next;
};

static int on_msg(void *ctx, const uint8_t *msg, size_t len)
{
    struct want *w = ctx;
    check(w->next < w->count, "more messages than the one-shot parse");
    check(len == w->len[w->next] && memcmp(msg, w->msg[w->next], len) == 0,
          "message differs from the one-shot parse");
    w->next++;
    return 0;
}

/* Returns 0, or RELAY_E_MSG_LEN when a complete prefix is bad. */
static int parse_whole(const uint8_t *p, size_t n, struct want *w)
{
    while (n >= 4 && w->count < 4096) {
        size_t len = (size_t)p[0] << 24 | (size_t)p[1] << 16 | (size_t)p[2] << 8 | p[3];
        if (len == 0 || len > RELAY_MESSAGE_MAX) return RELAY_E_MSG_LEN;
        if (n - 4 < len) break;
        w->msg[w->count] = p + 4;
        w->len[w->count++] = len;
        p += 4 + len;
        n -= 4 + len;
    }
    return 0;
}

static int echo(void *ctx, const uint8_t *msg, size_t len)
{
    const uint8_t **expect = ctx;
    check(*expect != NULL, "framed message delivered twice");
    check(memcmp(msg, *expect, len) == 0, "framed message changed");
    *expect = NULL;
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1) return 0;
    uint32_t rng = data[0] * 2654435761u + 1;
    const uint8_t *stream = data + 1;
    size_t n = size - 1;

    static struct want w;
    memset(&w, 0, sizeof w);
    int want_rc = parse_whole(stream, n, &w);
    if (w.count == 4096) return 0; /* beyond what this harness tracks */

    struct relay_reasm r;
    relay_reasm_init(&r);
    int rc = 0;
    size_t off = 0;
    while (off < n && rc == 0) {
        rng = rng * 1103515245u + 12345u;
        size_t cut = (rng >> 8) % 3 == 0 ? (rng >> 12) % 8 : (rng >> 12) % 200;
        if ((rng & 0xff) == 0) cut = RELAY_RECORD_PLAINTEXT_MAX;
        if (cut > n - off) cut = n - off;
        uint8_t *rec = malloc(cut ? cut : 1); /* exact size: ASan sees overreads */
        memcpy(rec, stream + off, cut);
        rc = relay_reasm_push(&r, rec, cut, on_msg, &w);
        free(rec);
        off += cut;
    }
    check(rc == want_rc, "error differs from the one-shot parse");
    if (rc == 0) check(w.next == w.count, "fewer messages than the one-shot parse");
    check(r.cap <= RELAY_MESSAGE_MAX, "buffer above the message limit");
    relay_reasm_free(&r);

    /* framer -> records -> reassembler is the identity on one message */
    if (n > 0) {
        struct relay_framer f;
        struct relay_chunk c;
        uint8_t rec[RELAY_RECORD_PLAINTEXT_MAX];
        const uint8_t *expect = stream;
        relay_reasm_init(&r);
        check(relay_framer_init(&f, stream, n) == 0, "framer_init");
        while (relay_framer_next(&f, &c)) {
            check(c.head_len + c.body_len <= sizeof rec, "chunk above the record size");
            memcpy(rec, c.head, c.head_len);
            memcpy(rec + c.head_len, c.body, c.body_len);
            check(relay_reasm_push(&r, rec, c.head_len + c.body_len, echo, &expect) == 0,
                  "framed message rejected");
        }
        check(expect == NULL, "framed message not delivered");
        relay_reasm_free(&r);
    }
    return 0;
}
