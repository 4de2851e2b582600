/* libFuzzer target for the params decoder (rpc/params) over the server's JSON loader
 * (proto/json_load), aimed at integers at the edges of u64 and i64.
 *
 * jansson holds integers as int64: a request with `"afterSeq": 2^64-1` used to fail
 * to parse at all and was answered with id -1 (issue 21). The loader now reads
 * literals outside int64 as serde_json does, and pdec_u64 / pdec_i64 must decode
 * exactly the value written, or fail with the reference's text.
 *
 * The first byte picks the mode.
 *   even: the rest is groups of 9 bytes (a selector and 8 value bytes), each giving
 *         one integer literal near an edge (0, 2^63-1, 2^63, 2^64-1, 2^64, -2^63,
 *         -2^63-1, the 8 bytes as u64, as a negative, times ten...); they are written
 *         as the members of a params object (sometimes beside a 16 KiB string, which
 *         takes the loader's splicing path) and every member is decoded as u64 and
 *         as i64. The outcome is checked against the literal's value, computed here
 *         with 128-bit arithmetic.
 *   odd:  the rest is a JSON text; if it loads as an object, every member is decoded
 *         with every decoder (crashes, leaks and UB only), and a real that
 *         json_load_u64 takes for an integer must be within a double's rounding of it. */
#include <inttypes.h>
#include <jansson.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proto/json_load.h"
#include "rpc/params.h"
#include "util/buf.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MAX_LITS 24

struct lit {
    char text[48];
    __int128 value;
};

static void put_u128(char *out, size_t n, __int128 v)
{
    char tmp[48];
    size_t k = 0;
    int neg = v < 0;
    unsigned __int128 m = neg ? (unsigned __int128)(-(v + 1)) + 1 : (unsigned __int128)v;
    do {
        tmp[k++] = (char)('0' + (int)(m % 10));
        m /= 10;
    } while (m);
    size_t o = 0;
    if (neg && o + 1 < n) out[o++] = '-';
    while (k && o + 1 < n)
        out[o++] = tmp[--k];
    out[o] = '\0';
}

static void make_lit(struct lit *l, uint8_t sel, const uint8_t v8[8])
{
    uint64_t raw;
    memcpy(&raw, v8, 8);
    const __int128 two63 = (__int128)1 << 63, two64 = (__int128)1 << 64;
    __int128 v;
    switch (sel % 12) {
    case 0: v = 0; break;
    case 1: v = two63 - 1; break;
    case 2: v = two63; break;
    case 3: v = two64 - 1; break;
    case 4: v = two64; break;
    case 5: v = -two63; break;
    case 6: v = -two63 - 1; break;
    case 7: v = raw; break;
    case 8: v = -(__int128)raw; break;
    case 9: v = (__int128)raw * 10 + (sel >> 4) % 10; break;
    case 10: v = two63 + (raw & 0xffff) - 0x8000; break;
    default: v = two64 - 1 - (raw & 0xffff); break;
    }
    l->value = v;
    put_u128(l->text, sizeof l->text, v);
}

static void check_edges(const uint8_t *data, size_t size)
{
    struct lit lits[MAX_LITS];
    size_t n = 0;
    for (; n < MAX_LITS && size >= 9; n++, data += 9, size -= 9)
        make_lit(&lits[n], data[0], data + 1);
    if (n == 0) return;
    struct buf b;
    buf_init(&b);
    buf_puts(&b, "{\"id\":7,\"method\":\"m\",\"params\":{");
    for (size_t i = 0; i < n; i++)
        buf_printf(&b, "%s\"k%zu\": %s", i ? "," : "", i, lits[i].text);
    if (lits[0].text[0] == '1') { /* now and then, a string long enough to be spliced */
        buf_puts(&b, ",\"big\":\"");
        for (int i = 0; i < (int)JSON_LOAD_BIG_STRING; i++)
            buf_putc(&b, 'A');
        buf_putc(&b, '"');
    }
    buf_puts(&b, "}}");
    json_error_t err;
    json_t *msg = json_load_message(b.data, b.len, JSON_REJECT_DUPLICATES, &err);
    buf_free(&b);
    if (!msg) {
        fprintf(stderr, "edge literals failed to load: %s\n", err.text);
        abort();
    }
    if (json_integer_value(json_object_get(msg, "id")) != 7) abort(); /* the id is kept */
    json_t *params = json_object_get(msg, "params");
    const __int128 two63 = (__int128)1 << 63, two64 = (__int128)1 << 64;
    for (size_t i = 0; i < n; i++) {
        char key[16];
        snprintf(key, sizeof key, "k%zu", i);
        struct pdec d;
        bool present = false;
        pdec_begin(&d, params, "S");
        uint64_t u = pdec_u64(&d, key, PDEC_REQUIRED, 42, &present);
        __int128 v = lits[i].value;
        if (v >= 0 && v < two64) {
            if (d.failed || !present || u != (uint64_t)v) {
                fprintf(stderr, "u64 %s decoded as %" PRIu64 " (%s)\n", lits[i].text, u, d.err);
                abort();
            }
        } else if (!d.failed || strcmp(d.err, "invalid number") != 0 || present) {
            fprintf(stderr, "u64 %s: want invalid number, got `%s`\n", lits[i].text, d.err);
            abort();
        }
        pdec_begin(&d, params, "S");
        int64_t s = pdec_i64(&d, key, PDEC_REQUIRED, 42, &present);
        if (v >= -two63 && v < two63) {
            if (d.failed || s != (int64_t)v) abort();
        } else if (!d.failed) {
            abort();
        } else if (v >= two63 && v < two64) {
            char want[96];
            snprintf(want, sizeof want, "invalid value: integer `%s`, expected i64", lits[i].text);
            if (strcmp(d.err, want) != 0) {
                fprintf(stderr, "i64 %s: got `%s`\n", lits[i].text, d.err);
                abort();
            }
        }
        char what[128];
        pdec_describe(json_object_get(params, key), what, sizeof what);
    }
    json_decref(msg);
}

static void decode_everything(const uint8_t *data, size_t size)
{
    json_error_t err;
    json_t *v = json_load_message((const char *)data, size, JSON_REJECT_DUPLICATES, &err);
    if (!v) return;
    if (json_is_object(v)) {
        static const char *const variants[] = {"a", "b", "c", NULL};
        const char *k;
        json_t *x;
        json_object_foreach(v, k, x)
        {
            struct pdec d;
            pdec_begin(&d, v, "S");
            (void)pdec_u64(&d, k, PDEC_OPTIONAL, 0, NULL);
            pdec_begin(&d, v, "S");
            (void)pdec_i64(&d, k, PDEC_OPTIONAL_NONNULL, 0, NULL);
            pdec_begin(&d, v, "S");
            size_t len;
            (void)pdec_string_len(&d, k, PDEC_REQUIRED, &len);
            pdec_begin(&d, v, "S");
            (void)pdec_bool(&d, k, PDEC_OPTIONAL, false);
            pdec_begin(&d, v, "S");
            (void)pdec_object(&d, k, PDEC_OPTIONAL);
            pdec_begin(&d, v, "S");
            (void)pdec_array(&d, k, PDEC_OPTIONAL);
            pdec_begin(&d, v, "S");
            (void)pdec_enum(&d, k, PDEC_OPTIONAL, variants, 0);
            uint64_t u;
            if (json_is_real(x) && json_load_u64(x, &u) &&
                fabs(json_real_value(x) - (double)u) > 4096.0)
                abort();
        }
    } else {
        struct pdec d;
        pdec_begin(&d, v, "S");
        pdec_unit(&d, v);
    }
    json_decref(v);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0) return 0;
    if (data[0] & 1)
        decode_everything(data + 1, size - 1);
    else
        check_edges(data + 1, size - 1);
    return 0;
}
