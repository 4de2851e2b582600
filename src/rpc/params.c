/* params: serde-worded decoding of request params (see params.h).
 *
 * The texts mirror what serde_json::from_value produces for the reference
 * server's #[derive(Deserialize)] structs, because clients and tests match some
 * of them literally. Where serde's exact output depends on details we do not
 * model (e.g. the shortest float rendering), the wording is best effort. */
#include "rpc/params.h"

#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proto/json_load.h"

void pdec_fail(struct pdec *d, const char *fmt, ...)
{
    if (d->failed) return;
    d->failed = true;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(d->err, sizeof d->err, fmt, ap);
    va_end(ap);
}

/* Appends the Rust Debug rendering of a string (what serde's Unexpected::Str uses),
 * truncating rather than overflowing out. */
static void describe_str(const char *s, size_t n, char *out, size_t outlen)
{
    size_t o = 0;
    const char *prefix = "string \"";
    for (const char *p = prefix; *p && o + 1 < outlen; p++)
        out[o++] = *p;
    for (size_t i = 0; i < n; i++) {
        char esc[8];
        unsigned char c = (unsigned char)s[i];
        switch (c) {
        case '"': strcpy(esc, "\\\""); break;
        case '\\': strcpy(esc, "\\\\"); break;
        case '\n': strcpy(esc, "\\n"); break;
        case '\r': strcpy(esc, "\\r"); break;
        case '\t': strcpy(esc, "\\t"); break;
        case '\0': strcpy(esc, "\\0"); break;
        default:
            if (c < 0x20 || c == 0x7f)
                snprintf(esc, sizeof esc, "\\u{%x}", c);
            else
                esc[0] = (char)c, esc[1] = '\0';
        }
        size_t el = strlen(esc);
        if (o + el + 2 >= outlen) break; /* keep room for the closing quote */
        memcpy(out + o, esc, el);
        o += el;
    }
    if (o + 1 < outlen) out[o++] = '"';
    if (outlen) out[o < outlen ? o : outlen - 1] = '\0';
}

/* Rust's Display for f64: the shortest text that round-trips, never in exponent
 * form, and with a ".0" when it would otherwise look like an integer (serde wraps
 * floats so that `1.0` does not read as the integer 1). */
static void describe_real(double v, char *num, size_t numlen)
{
    if (isnan(v)) {
        snprintf(num, numlen, "NaN");
        return;
    }
    if (isinf(v)) {
        snprintf(num, numlen, v < 0 ? "-inf" : "inf");
        return;
    }
    /* Find the fewest significant digits that round-trip, then lay those digits
     * out positionally (Rust never uses exponent form here). */
    int prec = 1;
    char tmp[64];
    for (; prec <= 17; prec++) {
        snprintf(tmp, sizeof tmp, "%.*e", prec - 1, v);
        if (strtod(tmp, NULL) == v) break;
    }
    char *e = strchr(tmp, 'e');
    int exp10 = atoi(e + 1);
    char digits[32];
    int nd = 0;
    for (const char *p = tmp; p < e && nd < (int)sizeof digits - 1; p++) {
        if (*p >= '0' && *p <= '9') digits[nd++] = *p;
    }
    while (nd > 1 && digits[nd - 1] == '0')
        nd--; /* "1.0e+03" has one digit: 1 */
    char out[400];
    size_t o = 0;
    if (v < 0 || (v == 0 && signbit(v))) out[o++] = '-';
    if (exp10 >= nd - 1) {
        for (int i = 0; i < nd; i++)
            out[o++] = digits[i];
        for (int i = 0; i < exp10 - (nd - 1) && o < sizeof out - 3; i++)
            out[o++] = '0';
        out[o++] = '.';
        out[o++] = '0';
    } else if (exp10 >= 0) {
        for (int i = 0; i < nd; i++) {
            out[o++] = digits[i];
            if (i == exp10) out[o++] = '.';
        }
    } else {
        out[o++] = '0';
        out[o++] = '.';
        for (int i = 0; i < -exp10 - 1 && o < sizeof out - 40; i++)
            out[o++] = '0';
        for (int i = 0; i < nd; i++)
            out[o++] = digits[i];
    }
    out[o] = '\0';
    snprintf(num, numlen, "%s", out);
}

void pdec_describe(const json_t *v, char *out, size_t outlen)
{
    if (!outlen) return;
    switch (v ? json_typeof(v) : JSON_NULL) {
    case JSON_NULL: snprintf(out, outlen, "null"); break;
    case JSON_TRUE: snprintf(out, outlen, "boolean `true`"); break;
    case JSON_FALSE: snprintf(out, outlen, "boolean `false`"); break;
    case JSON_INTEGER:
        snprintf(out, outlen, "integer `%" JSON_INTEGER_FORMAT "`", json_integer_value(v));
        break;
    case JSON_REAL: {
        uint64_t u;
        if (json_load_u64(v, &u)) { /* an integer literal past int64 (json_load.h) */
            snprintf(out, outlen, "integer `%" PRIu64 "`", u);
            break;
        }
        char num[400];
        describe_real(json_real_value(v), num, sizeof num);
        snprintf(out, outlen, "floating point `%s`", num);
        break;
    }
    case JSON_STRING: describe_str(json_string_value(v), json_string_length(v), out, outlen); break;
    case JSON_ARRAY: snprintf(out, outlen, "sequence"); break;
    case JSON_OBJECT: snprintf(out, outlen, "map"); break;
    }
}

/* Records "invalid type: <found>, expected <what>". */
static void fail_type(struct pdec *d, const json_t *v, const char *what)
{
    char found[400];
    pdec_describe(v, found, sizeof found);
    pdec_fail(d, "invalid type: %s, expected %s", found, what);
}

bool pdec_begin(struct pdec *d, json_t *params, const char *struct_name)
{
    d->obj = NULL;
    d->failed = false;
    d->err[0] = '\0';
    if (params && json_is_object(params)) {
        d->obj = params;
        return true;
    }
    char what[256];
    snprintf(what, sizeof what, "struct %s", struct_name);
    fail_type(d, params, what);
    return false;
}

bool pdec_unit(struct pdec *d, json_t *params)
{
    d->obj = NULL;
    d->failed = false;
    d->err[0] = '\0';
    if (!params || json_is_null(params)) return true;
    if (json_is_object(params) && json_object_size(params) == 0) {
        d->obj = params;
        return true;
    }
    fail_type(d, params, "unit");
    return false;
}

/* The shared presence logic: returns the non-null member to decode, or NULL when
 * the caller should return its default (absent/null and allowed, or failure). */
static json_t *member(struct pdec *d, const char *key, enum pdec_presence p, const char *what)
{
    if (d->failed || !d->obj) return NULL;
    json_t *v = json_object_get(d->obj, key);
    if (!v) {
        if (p == PDEC_REQUIRED) pdec_fail(d, "missing field `%s`", key);
        return NULL;
    }
    if (json_is_null(v)) {
        if (p != PDEC_OPTIONAL) fail_type(d, v, what);
        return NULL;
    }
    return v;
}

const char *pdec_string_len(struct pdec *d, const char *key, enum pdec_presence p, size_t *len)
{
    if (len) *len = 0;
    json_t *v = member(d, key, p, "a string");
    if (!v) return NULL;
    if (!json_is_string(v)) {
        fail_type(d, v, "a string");
        return NULL;
    }
    if (len) *len = json_string_length(v);
    return json_string_value(v);
}

const char *pdec_string(struct pdec *d, const char *key, enum pdec_presence p)
{
    return pdec_string_len(d, key, p, NULL);
}

bool pdec_bool(struct pdec *d, const char *key, enum pdec_presence p, bool def)
{
    json_t *v = member(d, key, p, "a boolean");
    if (!v) return def;
    if (!json_is_boolean(v)) {
        fail_type(d, v, "a boolean");
        return def;
    }
    return json_is_true(v);
}

uint64_t pdec_u64(struct pdec *d, const char *key, enum pdec_presence p, uint64_t def,
                  bool *present)
{
    if (present) *present = false;
    json_t *v = member(d, key, p, "u64");
    if (!v) return def;
    uint64_t u;
    if (json_load_u64(v, &u)) { /* the full range, 2^63 and up included */
        if (present) *present = true;
        return u;
    }
    /* The reference reports negatives and reals for unsigned fields as a bare
     * "invalid number" (PROTOCOL.md 2.4), not serde's usual invalid-type text. */
    if (json_is_number(v))
        pdec_fail(d, "invalid number");
    else
        fail_type(d, v, "u64");
    return def;
}

int64_t pdec_i64(struct pdec *d, const char *key, enum pdec_presence p, int64_t def, bool *present)
{
    if (present) *present = false;
    json_t *v = member(d, key, p, "i64");
    if (!v) return def;
    uint64_t u;
    if (json_is_real(v) && json_load_u64(v, &u)) {
        pdec_fail(d, "invalid value: integer `%" PRIu64 "`, expected i64", u);
        return def;
    }
    if (!json_is_integer(v)) {
        fail_type(d, v, "i64");
        return def;
    }
    if (present) *present = true;
    return (int64_t)json_integer_value(v);
}

json_t *pdec_object(struct pdec *d, const char *key, enum pdec_presence p)
{
    json_t *v = member(d, key, p, "a map");
    if (!v) return NULL;
    if (!json_is_object(v)) {
        fail_type(d, v, "a map");
        return NULL;
    }
    return v;
}

json_t *pdec_array(struct pdec *d, const char *key, enum pdec_presence p)
{
    json_t *v = member(d, key, p, "a sequence");
    if (!v) return NULL;
    if (!json_is_array(v)) {
        fail_type(d, v, "a sequence");
        return NULL;
    }
    return v;
}

/* Looks name[0..n) up in variants; on a miss records serde's unknown-variant text. */
static int find_variant(struct pdec *d, const char *name, size_t n, const char *const *variants)
{
    int count = 0;
    for (; variants[count]; count++) {
        if (strlen(variants[count]) == n && memcmp(variants[count], name, n) == 0) return count;
    }
    char expected[400];
    size_t o = 0;
    if (count == 0) {
        snprintf(expected, sizeof expected, "there are no variants");
    } else if (count == 1) {
        snprintf(expected, sizeof expected, "expected `%s`", variants[0]);
    } else if (count == 2) {
        snprintf(expected, sizeof expected, "expected `%s` or `%s`", variants[0], variants[1]);
    } else {
        o = (size_t)snprintf(expected, sizeof expected, "expected one of ");
        for (int i = 0; i < count && o < sizeof expected; i++) {
            o += (size_t)snprintf(expected + o, sizeof expected - o, "%s`%s`", i ? ", " : "",
                                  variants[i]);
        }
    }
    pdec_fail(d, "unknown variant `%.*s`, %s", (int)(n > 80 ? 80 : n), name, expected);
    return -1;
}

int pdec_enum(struct pdec *d, const char *key, enum pdec_presence p, const char *const *variants,
              int def)
{
    json_t *v = member(d, key, p, "string or map");
    if (!v) return d->failed ? -1 : def;
    if (json_is_string(v)) {
        return find_variant(d, json_string_value(v), json_string_length(v), variants);
    }
    /* serde_json also accepts the externally tagged form {"variant": null} for a
     * unit variant; mirror that rather than rejecting what the reference takes. */
    if (json_is_object(v)) {
        if (json_object_size(v) != 1) {
            pdec_fail(d, "invalid value: map, expected map with a single key");
            return -1;
        }
        const char *k = json_object_iter_key(json_object_iter(v));
        json_t *payload = json_object_iter_value(json_object_iter(v));
        int idx = find_variant(d, k, strlen(k), variants);
        if (idx < 0) return -1;
        if (!json_is_null(payload)) {
            fail_type(d, payload, "unit");
            return -1;
        }
        return idx;
    }
    fail_type(d, v, "string or map");
    return -1;
}
