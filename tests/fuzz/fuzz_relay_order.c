/* libFuzzer target for proto/relay_order: the reorder window against a naive model.
 *
 * The input is a script of pushes (3 bytes each: a signed offset from the model's
 * next expected seq, and a 16-bit record length); the first byte may start the
 * sequence just below UINT32_MAX to reach exhaustion. The model is upstream's
 * algorithm written the obvious way (a list searched linearly). After every push the
 * window and the model must agree on the result and on every record delivered: its
 * seq, its length and which copy it was (each record's bytes are its push index). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proto/relay_order.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(int cond, const char *what)
{
    if (!cond) {
        fprintf(stderr, "fuzz_relay_order: %s\n", what);
        abort();
    }
}

struct delivery {
    uint32_t seq;
    size_t len;
    uint8_t fill;
};

struct log {
    struct delivery d[4096];
    size_t n;
};

static int record(struct log *l, uint32_t seq, const uint8_t *rec, size_t len)
{
    check(l->n < 4096, "too many deliveries");
    for (size_t i = 1; i < len; i++)
        check(rec[i] == rec[0], "record bytes mixed up");
    l->d[l->n++] = (struct delivery){seq, len, len ? rec[0] : 0};
    return 0;
}

static int on_deliver(void *ctx, uint32_t seq, const uint8_t *rec, size_t len)
{
    return record(ctx, seq, rec, len);
}

struct model {
    uint32_t next;
    struct delivery pend[128];
    unsigned n;
    size_t bytes;
    int err;
};

static int model_find(struct model *m, uint32_t seq)
{
    for (unsigned i = 0; i < m->n; i++)
        if (m->pend[i].seq == seq) return (int)i;
    return -1;
}

static int model_push(struct model *m, struct log *l, uint32_t seq, size_t len, uint8_t fill)
{
    if (m->err) return m->err;
    if (seq < m->next || model_find(m, seq) >= 0) return 0;
    if (seq > m->next) {
        if (seq - m->next > 64) return m->err = RELAY_E_REORDER_WINDOW;
        if (m->n >= 64 || m->bytes + len > (1u << 20)) return m->err = RELAY_E_REORDER_FULL;
        m->pend[m->n++] = (struct delivery){seq, len, len ? fill : 0};
        m->bytes += len;
        return 0;
    }
    struct delivery cur = {seq, len, len ? fill : 0}; /* an empty record has no bytes */
    for (;;) {
        if (m->next == UINT32_MAX) return m->err = RELAY_E_SEQ_EXHAUSTED;
        m->next++;
        check(l->n < 4096, "model: too many deliveries");
        l->d[l->n++] = cur;
        int i = model_find(m, m->next);
        if (i < 0) return 0;
        cur = m->pend[i];
        m->bytes -= cur.len;
        m->pend[i] = m->pend[--m->n];
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1) return 0;
    static struct log got, want;
    struct relay_order o;
    struct model m = {0};
    relay_order_init(&o);
    if (data[0] & 1) o.next_seq = m.next = UINT32_MAX - 70;
    got.n = want.n = 0;
    uint8_t *rec = malloc(65536);
    for (size_t i = 1, op = 0; i + 3 <= size; i += 3, op++) {
        uint32_t seq = m.next + (uint32_t)(int32_t)(int8_t)data[i];
        size_t len = (size_t)data[i + 1] << 8 | data[i + 2];
        memset(rec, (int)(op & 0xff), len);
        int rc = relay_order_push(&o, seq, rec, len, on_deliver, &got);
        int mrc = model_push(&m, &want, seq, len, (uint8_t)op);
        check(rc == mrc, "result differs from the model");
        check(got.n == want.n, "delivery count differs from the model");
        for (size_t k = 0; k < got.n; k++)
            check(got.d[k].seq == want.d[k].seq && got.d[k].len == want.d[k].len &&
                      got.d[k].fill == want.d[k].fill,
                  "delivered record differs from the model");
        check(rc != 0 || (o.pending == m.n && o.pending_bytes == m.bytes),
              "held records differ from the model");
    }
    free(rec);
    relay_order_free(&o);
    return 0;
}
