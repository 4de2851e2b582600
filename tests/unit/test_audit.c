/* Unit tests for the audit trail's pure parts: a record's JSON text (escaping, bytes
 * that are not UTF-8, cut values), the hash chain and its check (a change, a removal,
 * a broken line, disorder, files in order), and the asciicast lines (escaping, UTF-8
 * split between reads, invalid bytes as asciinema's decoder replaces them). */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>
#include <jansson.h>
#include <openssl/sha.h>

#include "audit/audit_cast.h"
#include "audit/audit_chain.h"
#include "audit/audit_record.h"
#include "proto/hex.h"

/* A record's body made whole (as the writer seals it, without the chain) and parsed. */
static json_t *parse_body(struct buf *b)
{
    struct buf whole;
    buf_init(&whole);
    buf_putc(&whole, '{');
    buf_append(&whole, b->data, b->len);
    json_error_t e;
    json_t *o = json_loadb(whole.data, whole.len, 0, &e);
    if (!o) fail_msg("not JSON (%s): %.*s", e.text, (int)whole.len, whole.data);
    buf_free(&whole);
    return o;
}

static void test_record_fields(void **state)
{
    struct buf b;
    buf_init(&b);
    /* 2024-05-01T12:34:56.123456Z */
    audit_record_begin(&b, 1714566896123456789ull, "process.start");
    audit_put_str(&b, "session", "s-1");
    audit_put_u64(&b, "pid", 4242);
    audit_put_i64(&b, "exitCode", -1);
    audit_put_bool(&b, "tty", true);
    audit_put_str(&b, "missing", NULL);
    char *argv[] = {"sh", "-c", "echo \"hi\"\n\tx\\y\x01", NULL};
    audit_put_strv(&b, "argv", argv);
    audit_put_object(&b, "sandbox");
    audit_put_str(&b, "network", "restricted");
    audit_put_array(&b, "write");
    audit_put_item(&b, "/w");
    audit_put_item(&b, "/tmp");
    audit_put_close(&b, ']');
    audit_put_close(&b, '}');
    audit_record_end(&b);
    json_t *o = parse_body(&b);
    assert_string_equal(json_string_value(json_object_get(o, "time")),
                        "2024-05-01T12:34:56.123456Z");
    assert_string_equal(json_string_value(json_object_get(o, "type")), "process.start");
    assert_string_equal(json_string_value(json_object_get(o, "session")), "s-1");
    assert_int_equal(json_integer_value(json_object_get(o, "pid")), 4242);
    assert_int_equal(json_integer_value(json_object_get(o, "exitCode")), -1);
    assert_true(json_is_true(json_object_get(o, "tty")));
    assert_true(json_is_null(json_object_get(o, "missing")));
    json_t *a = json_object_get(o, "argv");
    assert_int_equal(json_array_size(a), 3);
    assert_string_equal(json_string_value(json_array_get(a, 2)), "echo \"hi\"\n\tx\\y\x01");
    json_t *sb = json_object_get(o, "sandbox");
    assert_string_equal(json_string_value(json_object_get(sb, "network")), "restricted");
    assert_int_equal(json_array_size(json_object_get(sb, "write")), 2);
    /* Keys are in the order written: time and type first. */
    assert_memory_equal(b.data, "\"time\":", 7);
    json_decref(o);
    buf_free(&b);
}

static void test_record_bytes_and_cuts(void **state)
{
    struct buf b;
    buf_init(&b);
    audit_record_begin(&b, 0, "fs.write");
    /* A file name with a byte that is not UTF-8 between two valid characters. */
    audit_put_strn(&b, "path", "/tmp/a\xff\xc3\xa9", 9);
    char *big = malloc(AUDIT_VALUE_MAX + 100);
    memset(big, 'a', AUDIT_VALUE_MAX + 100);
    /* An "é" right at the cut: it is not split. */
    big[AUDIT_VALUE_MAX - 1] = '\xc3';
    big[AUDIT_VALUE_MAX] = '\xa9';
    audit_put_strn(&b, "long", big, AUDIT_VALUE_MAX + 100);
    char **many = calloc(AUDIT_LIST_MAX + 11, sizeof *many);
    for (int i = 0; i < AUDIT_LIST_MAX + 10; i++)
        many[i] = "x";
    audit_put_strv(&b, "argv", many);
    audit_record_end(&b);
    json_t *o = parse_body(&b);
    assert_string_equal(json_string_value(json_object_get(o, "path")), "/tmp/a\\xff\xc3\xa9");
    const char *l = json_string_value(json_object_get(o, "long"));
    assert_int_equal(strlen(l), AUDIT_VALUE_MAX - 1 + 3);
    assert_string_equal(l + AUDIT_VALUE_MAX - 1, "...");
    json_t *a = json_object_get(o, "argv");
    assert_int_equal(json_array_size(a), AUDIT_LIST_MAX + 1);
    assert_string_equal(json_string_value(json_array_get(a, AUDIT_LIST_MAX)), "...");
    json_decref(o);
    free(big);
    free(many);
    buf_free(&b);
}

/* ---- the chain ---- */

/* n records sealed into one text (lines with their newlines). */
static void seal_n(struct audit_chain *c, struct buf *out, int n)
{
    for (int i = 0; i < n; i++) {
        struct buf b;
        buf_init(&b);
        audit_record_begin(&b, 1000000000ull * (uint64_t)(i + 1), "fs.write");
        audit_put_u64(&b, "i", (uint64_t)i);
        audit_record_end(&b);
        audit_chain_seal(c, b.data, b.len, out);
        buf_free(&b);
    }
}

/* The lines of text (NUL-terminated copies). */
static int split_lines(const struct buf *text, char **lines, int max)
{
    int n = 0;
    const char *p = text->data, *end = text->data + text->len;
    while (p < end && n < max) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        size_t len = nl ? (size_t)(nl - p) : (size_t)(end - p);
        lines[n] = strndup(p, len);
        n++;
        p += len + 1;
    }
    return n;
}

struct check {
    struct audit_finding f[32];
    int n;
    uint64_t problems;
};

static void check_lines(struct audit_verifier *v, char **lines, int n, struct check *c)
{
    for (int i = 0; i < n; i++) {
        struct audit_finding out[3];
        int k = audit_verifier_line(v, (uint64_t)i + 1, lines[i], strlen(lines[i]), out);
        for (int j = 0; j < k && c->n < 32; j++)
            c->f[c->n++] = out[j];
    }
    c->problems = v->problems;
}

static void test_chain_links(void **state)
{
    struct audit_chain c;
    audit_chain_init(&c);
    struct buf text;
    buf_init(&text);
    seal_n(&c, &text, 3);
    char *lines[8] = {0};
    assert_int_equal(split_lines(&text, lines, 8), 3);
    uint8_t prev[AUDIT_HASH_LEN], want[AUDIT_HASH_LEN] = {0};
    uint64_t seq;
    for (int i = 0; i < 3; i++) {
        assert_int_equal(audit_chain_parse_head(lines[i], strlen(lines[i]), &seq, prev), 0);
        assert_int_equal(seq, (uint64_t)i + 1);
        assert_memory_equal(prev, want, AUDIT_HASH_LEN);
        SHA256((const unsigned char *)lines[i], strlen(lines[i]), want);
        json_t *o = json_loads(lines[i], 0, NULL);
        assert_non_null(o);
        assert_int_equal(json_integer_value(json_object_get(o, "seq")), i + 1);
        json_decref(o);
    }
    /* A writer that finds the file's last line goes on from it. */
    struct audit_chain d;
    audit_chain_init(&d);
    assert_int_equal(audit_chain_follow(&d, lines[2], strlen(lines[2])), 0);
    assert_int_equal(d.seq, 3);
    assert_memory_equal(d.prev, c.prev, AUDIT_HASH_LEN);
    assert_int_equal(audit_chain_follow(&d, "garbage", 7), -EINVAL);
    assert_int_equal(d.seq, 3); /* kept; the hash is the garbage line's */
    for (int i = 0; i < 3; i++)
        free(lines[i]);
    buf_free(&text);
}

static void test_verify_intact_and_across_files(void **state)
{
    struct audit_chain c;
    audit_chain_init(&c);
    struct buf one, two;
    buf_init(&one);
    buf_init(&two);
    seal_n(&c, &one, 4);
    seal_n(&c, &two, 3); /* the rotated file's successor */
    char *a[8] = {0}, *b[8] = {0};
    int na = split_lines(&one, a, 8), nb = split_lines(&two, b, 8);
    struct audit_verifier v;
    audit_verifier_init(&v);
    struct check k = {0};
    check_lines(&v, a, na, &k);
    audit_verifier_next_file(&v);
    check_lines(&v, b, nb, &k);
    assert_int_equal(k.problems, 0);
    assert_int_equal(v.records, 7);
    assert_int_equal(k.n, 1);
    assert_int_equal(k.f[0].kind, AUDIT_FIND_START);
    assert_int_equal(k.f[0].seq, 1);
    /* The second file alone starts mid-chain: said, not a break. */
    audit_verifier_init(&v);
    struct check k2 = {0};
    check_lines(&v, b, nb, &k2);
    assert_int_equal(k2.problems, 0);
    assert_int_equal(k2.f[0].kind, AUDIT_FIND_START);
    assert_int_equal(k2.f[0].seq, 5);
    /* The files in the wrong order: seq goes back. */
    audit_verifier_init(&v);
    struct check k3 = {0};
    check_lines(&v, b, nb, &k3);
    audit_verifier_next_file(&v);
    check_lines(&v, a, na, &k3);
    assert_true(k3.problems >= 1);
    assert_int_equal(k3.f[1].kind, AUDIT_FIND_DISORDER);
    for (int i = 0; i < na; i++)
        free(a[i]);
    for (int i = 0; i < nb; i++)
        free(b[i]);
    buf_free(&one);
    buf_free(&two);
}

static void test_verify_names_a_change_and_a_removal(void **state)
{
    struct audit_chain c;
    audit_chain_init(&c);
    struct buf text;
    buf_init(&text);
    seal_n(&c, &text, 10);
    char *l[16] = {0};
    int n = split_lines(&text, l, 16);
    /* Record seq 4 (line 4) is edited: its own line still parses. */
    char *at = strstr(l[3], "\"i\":3");
    assert_non_null(at);
    at[4] = '7';
    /* Record seq 8 (line 8) is removed. */
    assert_int_equal(n, 10);
    free(l[7]);
    memmove(&l[7], &l[8], 2 * sizeof *l);
    n = 9;
    struct audit_verifier v;
    audit_verifier_init(&v);
    struct check k = {0};
    check_lines(&v, l, n, &k);
    assert_int_equal(k.problems, 2);
    assert_int_equal(k.n, 3);
    assert_int_equal(k.f[1].kind, AUDIT_FIND_CHANGED);
    assert_int_equal(k.f[1].line, 4);
    assert_int_equal(k.f[1].seq, 4);
    assert_int_equal(k.f[1].other_line, 5);
    assert_int_equal(k.f[2].kind, AUDIT_FIND_MISSING);
    assert_int_equal(k.f[2].line, 8); /* seq 9 is on line 8 now */
    assert_int_equal(k.f[2].other_line, 7);
    assert_int_equal(k.f[2].seq, 8);
    assert_int_equal(k.f[2].seq_to, 8);
    for (int i = 0; i < n; i++)
        free(l[i]);
    buf_free(&text);
}

static void test_verify_broken_line_and_lost(void **state)
{
    struct audit_chain c;
    audit_chain_init(&c);
    struct buf text;
    buf_init(&text);
    seal_n(&c, &text, 2);
    struct buf lost;
    buf_init(&lost);
    audit_record_begin(&lost, 5, "audit.lost");
    audit_put_u64(&lost, "records", 7);
    audit_record_end(&lost);
    audit_chain_seal(&c, lost.data, lost.len, &text);
    seal_n(&c, &text, 2);
    char *l[8] = {0};
    int n = split_lines(&text, l, 8);
    assert_int_equal(n, 5);
    /* Line 2 cut short (a crash mid-write, or an edit that broke it). */
    l[1][20] = '\0';
    struct audit_verifier v;
    audit_verifier_init(&v);
    struct check k = {0};
    check_lines(&v, l, n, &k);
    assert_int_equal(k.problems, 1); /* the broken line, not again at the next one */
    assert_int_equal(k.f[1].kind, AUDIT_FIND_MALFORMED);
    assert_int_equal(k.f[1].line, 2);
    assert_int_equal(k.f[2].kind, AUDIT_FIND_LOST);
    assert_int_equal(k.f[2].seq, 7);
    for (int i = 0; i < n; i++)
        free(l[i]);
    buf_free(&lost);
    buf_free(&text);
}

/* ---- asciicast ---- */

/* The "o" texts of the event lines in out, concatenated (as `asciinema cat` prints
 * them); the lines' count in *events. */
static char *cast_text(const struct buf *out, int *events)
{
    struct buf all;
    buf_init(&all);
    *events = 0;
    const char *p = out->data, *end = out->data + out->len;
    while (p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        assert_non_null(nl);
        json_error_t e;
        json_t *ev = json_loadb(p, (size_t)(nl - p), JSON_ALLOW_NUL, &e);
        if (!ev) fail_msg("bad event line (%s): %.*s", e.text, (int)(nl - p), p);
        assert_int_equal(json_array_size(ev), 3);
        assert_true(json_is_real(json_array_get(ev, 0)));
        if (strcmp(json_string_value(json_array_get(ev, 1)), "o") == 0)
            buf_append(&all, json_string_value(json_array_get(ev, 2)),
                       json_string_length(json_array_get(ev, 2)));
        json_decref(ev);
        ++*events;
        p = nl + 1;
    }
    buf_putc(&all, '\0');
    return buf_steal(&all);
}

static void test_cast_header_and_escapes(void **state)
{
    struct buf out;
    buf_init(&out);
    audit_cast_put_header(&out, 80, 24, 1717171717, "bash -i \"x\"");
    json_t *h = json_loadb(out.data, out.len - 1, 0, NULL);
    assert_non_null(h);
    assert_int_equal(json_integer_value(json_object_get(h, "version")), 2);
    assert_int_equal(json_integer_value(json_object_get(h, "width")), 80);
    assert_int_equal(json_integer_value(json_object_get(h, "height")), 24);
    assert_int_equal(json_integer_value(json_object_get(h, "timestamp")), 1717171717);
    assert_string_equal(json_string_value(json_object_get(h, "command")), "bash -i \"x\"");
    json_decref(h);
    buf_reset(&out);
    struct audit_cast_enc e = {0};
    /* Every escape class, long enough for the eight-byte path and its tail. */
    static const char text[] =
        "plain text, then \"quotes\" \\ \x1b[1mbold\x1b[0m\r\n\t\x00\x7f end";
    audit_cast_put_event(&e, &out, 1500000, 'o', text, sizeof text - 1);
    assert_memory_equal(out.data, "[1.500000,\"o\",\"", 15);
    int events;
    char *got = cast_text(&out, &events);
    assert_int_equal(events, 1);
    /* Everything but the NUL, which a terminal does not show (audit_cast.h). */
    static const char shown[] = "plain text, then \"quotes\" \\ \x1b[1mbold\x1b[0m\r\n\t\x7f end";
    assert_int_equal(strlen(got), sizeof shown - 1);
    assert_memory_equal(got, shown, sizeof shown);
    free(got);
    /* Runs of NULs (binary output) whole words at a time, and around them. */
    buf_reset(&out);
    char nuls[40] = "ab";
    nuls[30] = 'z';
    audit_cast_put_event(&e, &out, 0, 'o', nuls, sizeof nuls);
    got = cast_text(&out, &events);
    assert_string_equal(got, "abz");
    free(got);
    /* Nothing but NULs: no event at all. */
    buf_reset(&out);
    memset(nuls, 0, sizeof nuls);
    audit_cast_put_event(&e, &out, 0, 'o', nuls, sizeof nuls);
    assert_int_equal(out.len, 0);
    /* Input keeps them: Ctrl-@ is a key. */
    audit_cast_put_event(&e, &out, 0, 'i', "a\0b", 3);
    static const char typed[] = "[0.000000,\"i\",\"a\\u0000b\"]\n";
    assert_int_equal(out.len, sizeof typed - 1);
    assert_memory_equal(out.data, typed, sizeof typed - 1);
    buf_reset(&out);
    audit_cast_put_resize(&out, 2000001, 100, 30);
    assert_string_equal(out.data, "[2.000001,\"r\",\"100x30\"]\n");
    buf_free(&out);
}

/* Feeds data cut at every given point and returns the concatenated "o" text. */
static char *feed_split(const char *data, size_t n, const size_t *cuts, int ncuts, int *events)
{
    struct buf out;
    buf_init(&out);
    struct audit_cast_enc e = {0};
    size_t at = 0;
    for (int i = 0; i <= ncuts; i++) {
        size_t to = i < ncuts ? cuts[i] : n;
        audit_cast_put_event(&e, &out, (uint64_t)i, 'o', data + at, to - at);
        at = to;
    }
    audit_cast_put_finish(&e, &out, 99, 'o');
    char *t = cast_text(&out, events);
    buf_free(&out);
    return t;
}

static void test_cast_utf8_split_between_reads(void **state)
{
    /* "é" (C3 A9), "€" (E2 82 AC) and "😀" (F0 9F 98 80) cut inside each. */
    static const char s[] = "a\xc3\xa9"
                            "b\xe2\x82\xac"
                            "c\xf0\x9f\x98\x80"
                            "d";
    const size_t n = sizeof s - 1;
    for (size_t cut = 1; cut < n; cut++) {
        int events;
        char *t = feed_split(s, n, &cut, 1, &events);
        assert_string_equal(t, s);
        free(t);
    }
    /* The emoji a byte at a time: nothing shows until it is whole. */
    size_t cuts[] = {8, 9, 10, 11};
    int events;
    char *t = feed_split(s, n, cuts, 4, &events);
    assert_string_equal(t, s);
    assert_int_equal(events, 2); /* "a..c", then the emoji with "d" */
    free(t);
}

static void test_cast_invalid_bytes_replaced(void **state)
{
    /* As Python's incremental UTF-8 decoder with errors="replace" (asciinema's):
     * each maximal invalid subpart is one U+FFFD, also across a split. */
    static const char s[] = "x\xff"
                            "y\xf0\x90\x80"
                            "A\xe2\x82"
                            "B\xc3";
    const size_t n = sizeof s - 1;
    static const char want[] = "x\xef\xbf\xbd"
                               "y\xef\xbf\xbd"
                               "A\xef\xbf\xbd"
                               "B\xef\xbf\xbd";
    for (size_t cut = 0; cut <= n; cut++) {
        int events;
        char *t = feed_split(s, n, &cut, 1, &events);
        assert_string_equal(t, want);
        free(t);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_record_fields),
        cmocka_unit_test(test_record_bytes_and_cuts),
        cmocka_unit_test(test_chain_links),
        cmocka_unit_test(test_verify_intact_and_across_files),
        cmocka_unit_test(test_verify_names_a_change_and_a_removal),
        cmocka_unit_test(test_verify_broken_line_and_lost),
        cmocka_unit_test(test_cast_header_and_escapes),
        cmocka_unit_test(test_cast_utf8_split_between_reads),
        cmocka_unit_test(test_cast_invalid_bytes_replaced),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
