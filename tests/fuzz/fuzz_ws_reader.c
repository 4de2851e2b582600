/* libFuzzer target for proto/ws_reader.
 *
 * The first input byte picks the role and the limits, the next two a split
 * pattern; the rest is wire bytes. Fed whole and then again in the pieces the
 * pattern cuts, the reader must never crash, must consume at least one byte per
 * call and everything when it reports nothing, and must report exactly the same
 * events (kind, opcode, code, payload) both ways: where input ends never changes
 * what it means. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "proto/ws_reader.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* The events of one run, serialized: kind, opcode, code, length, payload. */
struct log {
    uint8_t *b;
    size_t n, cap;
};

static void log_put(struct log *l, const void *p, size_t n)
{
    if (l->n + n > l->cap) {
        l->cap = (l->n + n) * 2;
        l->b = realloc(l->b, l->cap);
        if (!l->b) abort();
    }
    memcpy(l->b + l->n, p, n);
    l->n += n;
}

static void run(uint8_t mode, uint16_t pattern, const uint8_t *in, size_t n, struct log *l)
{
    struct ws_reader r;
    uint64_t max_frame = (mode & 2) ? 64 : 1 << 20;
    size_t max_msg = (mode & 4) ? 100 : 1 << 20;
    ws_reader_init(&r, (mode & 1) ? WS_ROLE_CLIENT : WS_ROLE_SERVER, max_frame, max_msg);
    uint8_t *copy = malloc(n + 1);
    memcpy(copy, in, n);
    size_t at = 0, step = 0;
    while (at < n) {
        /* Piece sizes from the pattern (0 = the rest); each in its own allocation
         * so a read past the piece shows up under ASan. */
        size_t len = pattern ? 1 + ((pattern >> (step % 13)) & 0x7) * (1 + (step & 3)) : n - at;
        step++;
        if (len > n - at) len = n - at;
        uint8_t *piece = malloc(len);
        memcpy(piece, copy + at, len);
        uint8_t *q = piece;
        size_t left = len;
        while (left) {
            struct ws_event ev;
            size_t k = ws_reader_feed(&r, q, left, &ev);
            if (k == 0 || k > left) abort();
            q += k;
            left -= k;
            if (ev.kind == WS_EV_NONE) {
                if (left) abort();
                continue;
            }
            int32_t hdr[3] = {(int32_t)ev.kind, ev.opcode, ev.code};
            uint64_t len64 = ev.len;
            log_put(l, hdr, sizeof hdr);
            log_put(l, &len64, sizeof len64);
            if (ev.len) log_put(l, ev.data, ev.len);
        }
        free(piece);
        at += len;
    }
    ws_reader_free(&r);
    free(copy);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 3) return 0;
    uint8_t mode = data[0];
    uint16_t pattern = (uint16_t)(data[1] << 8 | data[2]);
    struct log a = {0}, b = {0};
    run(mode, 0, data + 3, size - 3, &a);
    run(mode, pattern ? pattern : 1, data + 3, size - 3, &b);
    if (a.n != b.n || (a.n && memcmp(a.b, b.b, a.n) != 0)) abort();
    free(a.b);
    free(b.b);
    return 0;
}
