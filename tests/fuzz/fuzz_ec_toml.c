/* libFuzzer target for libexecclient's TOML reader (client/src/ec_toml.c) and the
 * environments.toml schema on top of it (ec_envfile.c).
 *
 * Any input: no crash, no leak, no sanitizer report, and an error message for every
 * refusal. Every accepted document must survive a round trip: written back as TOML
 * (one inline `key = value` per top-level key, every string as a basic string with
 * escapes) and read again, it gives the same value, so what the reader builds is
 * always something TOML can say and it reads its own canonical form. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ec_toml.h"
#include "execclient.h"
#include "util/buf.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void put_string(struct buf *b, const char *s, size_t n)
{
    buf_putc(b, '"');
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '"' || c == '\\') {
            buf_putc(b, '\\');
            buf_putc(b, (char)c);
        } else if (c < 0x20 || c == 0x7f) {
            buf_printf(b, "\\u%04x", c);
        } else {
            buf_putc(b, (char)c);
        }
    }
    buf_putc(b, '"');
}

static void put_value(struct buf *b, json_t *v)
{
    switch (json_typeof(v)) {
    case JSON_STRING: put_string(b, json_string_value(v), json_string_length(v)); break;
    case JSON_INTEGER: buf_printf(b, "%lld", (long long)json_integer_value(v)); break;
    case JSON_REAL: {
        char num[64];
        snprintf(num, sizeof num, "%.17g", json_real_value(v));
        buf_puts(b, num);
        if (!strpbrk(num, ".e")) buf_puts(b, ".0");
        break;
    }
    case JSON_TRUE: buf_puts(b, "true"); break;
    case JSON_FALSE: buf_puts(b, "false"); break;
    case JSON_ARRAY:
        buf_putc(b, '[');
        for (size_t i = 0; i < json_array_size(v); i++) {
            if (i) buf_puts(b, ", ");
            put_value(b, json_array_get(v, i));
        }
        buf_putc(b, ']');
        break;
    case JSON_OBJECT: {
        const char *k;
        json_t *x;
        bool first = true;
        buf_putc(b, '{');
        json_object_foreach(v, k, x)
        {
            buf_puts(b, first ? "" : ", ");
            first = false;
            put_string(b, k, strlen(k));
            buf_puts(b, " = ");
            put_value(b, x);
        }
        buf_putc(b, '}');
        break;
    }
    default: abort(); /* the reader never makes null */
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    json_t *doc = NULL;
    char err[300];
    if (ec_toml_parse((const char *)data, size, &doc, err, sizeof err) != 0) {
        if (doc || !err[0]) abort(); /* a refusal always says why */
    } else {
        if (!json_is_object(doc)) abort();
        struct buf b;
        buf_init(&b);
        const char *k;
        json_t *v;
        json_object_foreach(doc, k, v)
        {
            put_string(&b, k, strlen(k));
            buf_puts(&b, " = ");
            put_value(&b, v);
            buf_putc(&b, '\n');
        }
        json_t *again = NULL;
        /* Nesting the reader took is nesting it takes again (one inline level per
         * table), but the round trip may exceed its byte bound: skip those. */
        if (b.len <= EC_TOML_MAX_BYTES) {
            if (ec_toml_parse(b.data ? b.data : "", b.len, &again, err, sizeof err) != 0) {
                if (!strstr(err, "nested too deeply")) abort();
            } else if (!json_equal(doc, again)) {
                abort();
            }
        }
        json_decref(again);
        buf_free(&b);
        json_decref(doc);
    }
    ec_env_file *f = NULL;
    ec_error e = {0};
    if (ec_env_file_parse((const char *)data, size, "/etc/codex", &f, &e) == 0) {
        for (size_t i = 0; i < ec_env_file_count(f); i++)
            if (!ec_env_file_id(f, i) || !ec_env_file_options(f, i)) abort();
        ec_env_file_free(f);
    } else if (f || !e.message[0]) {
        abort();
    }
    return 0;
}
