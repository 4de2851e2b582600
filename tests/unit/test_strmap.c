/* Unit tests for util/strmap: SipHash-1-3 against its reference vector, puts, gets,
 * replacement, deletion with backward shift under heavy collisions, growth and the
 * walk. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "util/strmap.h"

static const uint8_t seed[16] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15};

static void test_siphash13_vector(void **state)
{
    /* CPython 3.11 hashes bytes with SipHash-1-3; with PYTHONHASHSEED=0 its key is all
     * zero: `PYTHONHASHSEED=0 python3 -c 'print(hex(hash(b"abc") % 2**64))'` gives
     * these (an independent implementation). */
    assert_true(strmap_hash(0, 0, "abc", 3) == 0xc03bc3a0042630f2ULL);
    assert_true(strmap_hash(0, 0, "hello-world-0123456789", 22) == 0xd2e6b73aa236cc94ULL);
    assert_true(strmap_hash(0, 0, "x", 1) == 0xd141bba7fdc215a3ULL);
    assert_true(strmap_hash(1, 0, "abc", 3) != strmap_hash(0, 0, "abc", 3));
}

static void test_put_get_replace_delete(void **state)
{
    struct strmap m;
    strmap_init(&m, seed);
    int a = 1, b = 2, c = 3;
    assert_null(strmap_get(&m, "x", 1));
    assert_null(strmap_del(&m, "x", 1));
    assert_null(strmap_put(&m, "alpha", 5, &a));
    assert_null(strmap_put(&m, "beta", 4, &b));
    assert_ptr_equal(strmap_get(&m, "alpha", 5), &a);
    assert_ptr_equal(strmap_get(&m, "alphabet", 5), &a); /* length, not NUL, delimits */
    assert_null(strmap_get(&m, "alph", 4));
    assert_ptr_equal(strmap_put(&m, "alpha", 5, &c), &a);
    assert_ptr_equal(strmap_get(&m, "alpha", 5), &c);
    assert_int_equal(m.n, 2);
    assert_ptr_equal(strmap_del(&m, "alpha", 5), &c);
    assert_null(strmap_get(&m, "alpha", 5));
    assert_ptr_equal(strmap_get(&m, "beta", 4), &b);
    assert_int_equal(m.n, 1);
    strmap_free(&m);
}

/* Many keys, deleted in a scattered order: every survivor stays reachable. */
static void test_many_keys_and_deletes(void **state)
{
    enum { N = 5000 };
    static char keys[N][16];
    struct strmap m;
    strmap_init(&m, seed);
    for (int i = 0; i < N; i++) {
        snprintf(keys[i], sizeof keys[i], "k%d", i);
        assert_null(strmap_put(&m, keys[i], strlen(keys[i]), keys[i]));
    }
    assert_int_equal(m.n, N);
    for (int i = 0; i < N; i += 3)
        assert_ptr_equal(strmap_del(&m, keys[i], strlen(keys[i])), keys[i]);
    for (int i = 0; i < N; i++) {
        void *v = strmap_get(&m, keys[i], strlen(keys[i]));
        if (i % 3 == 0)
            assert_null(v);
        else
            assert_ptr_equal(v, keys[i]);
    }
    size_t pos = 0, seen = 0;
    while (strmap_next(&m, &pos))
        seen++;
    assert_int_equal(seen, m.n);
    strmap_free(&m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_siphash13_vector),
        cmocka_unit_test(test_put_get_replace_delete),
        cmocka_unit_test(test_many_keys_and_deletes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
