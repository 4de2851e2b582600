/* Unit tests for util/bigbuf: sizes, reuse from the cache (best fit, or the largest
 * for a buffer that will grow), growth
 * keeping the contents, the cache bound, and trimming by idle time. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "util/bigbuf.h"

static void test_alloc_reuse_trim(void **state)
{
    (void)state;
    bigbuf_trim(0);
    assert_int_equal(bigbuf_cached(), 0);
    size_t cap;
    char *a = bigbuf_alloc(3u << 20, &cap);
    assert_true(cap >= 3u << 20);
    assert_int_equal(bigbuf_cap(a), cap);
    memset(a, 1, cap); /* all of it is usable */
    char *b = bigbuf_alloc(BIGBUF_MIN, NULL);
    bigbuf_free(a);
    bigbuf_free(b);
    assert_true(bigbuf_cached() > 0);
    /* Best fit: the small request gets the small buffer back, the large the large. */
    char *c = bigbuf_alloc(BIGBUF_MIN, NULL);
    assert_ptr_equal(c, b);
    char *d = bigbuf_alloc(2u << 20, NULL);
    assert_ptr_equal(d, a);
    bigbuf_free(c);
    bigbuf_free(d);
    bigbuf_free(NULL);
    /* Nothing is older than an hour; everything is older than 0 ms. */
    assert_true(bigbuf_trim(3600000) > 0);
    assert_int_equal(bigbuf_trim(0), 0);
}

/* A buffer that will grow takes the largest cached one, however large: the first
 * 16 MiB fragment of a 43 MB message must land in the 44 MiB buffer the last such
 * message left, not in a fresh one grown page by page. */
static void test_growable_takes_largest(void **state)
{
    (void)state;
    bigbuf_trim(0);
    char *small = bigbuf_alloc(3u << 20, NULL);
    char *big = bigbuf_alloc(44u << 20, NULL);
    bigbuf_free(small);
    bigbuf_free(big);
    char *best = bigbuf_alloc(16u << 20, NULL); /* best fit: neither is within 2x */
    assert_ptr_not_equal(best, big);
    char *g = bigbuf_alloc_growable(16u << 20, NULL);
    assert_ptr_equal(g, big);
    char *g2 = bigbuf_alloc_growable(2u << 20, NULL); /* the largest left: small */
    assert_ptr_equal(g2, small);
    bigbuf_free(best);
    bigbuf_free(g);
    bigbuf_free(g2);
    bigbuf_trim(0);
}

static void test_grow_keeps_contents(void **state)
{
    (void)state;
    size_t cap;
    unsigned char *p = bigbuf_alloc(BIGBUF_MIN, &cap);
    for (size_t i = 0; i < cap; i++)
        p[i] = (unsigned char)(i * 7);
    size_t old = cap;
    p = bigbuf_grow(p, 9u << 20, &cap);
    assert_true(cap >= 9u << 20);
    for (size_t i = 0; i < old; i++)
        assert_int_equal(p[i], (unsigned char)(i * 7));
    p[cap - 1] = 1;
    /* Growing to less than it has changes nothing. */
    unsigned char *q = bigbuf_grow(p, 1u << 20, &cap);
    assert_ptr_equal(p, q);
    bigbuf_free(q);
    bigbuf_trim(0);
}

/* The cache holds at most BIGBUF_CACHE_MAX bytes, dropping the largest first. */
static void test_bound(void **state)
{
    (void)state;
    bigbuf_trim(0);
    enum { N = 40 };
    void *v[N];
    for (int i = 0; i < N; i++)
        v[i] = bigbuf_alloc(8u << 20, NULL);
    for (int i = 0; i < N; i++)
        bigbuf_free(v[i]);
    assert_true(bigbuf_cached() <= BIGBUF_CACHE_MAX);
    assert_true(bigbuf_cached() > 0);
    bigbuf_trim(0);
}

/* bigbuf_free_any tells a bigbuf from a malloc'd block. */
static void test_free_any(void **state)
{
    (void)state;
    bigbuf_trim(0);
    void *m = malloc(100), *b = bigbuf_alloc(BIGBUF_MIN, NULL);
    bigbuf_free_any(m); /* while a bigbuf is live */
    bigbuf_free_any(b);
    assert_true(bigbuf_cached() > 0);
    bigbuf_free_any(malloc(10)); /* while none is */
    bigbuf_free_any(NULL);
    bigbuf_trim(0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_alloc_reuse_trim),
        cmocka_unit_test(test_growable_takes_largest),
        cmocka_unit_test(test_grow_keeps_contents),
        cmocka_unit_test(test_bound),
        cmocka_unit_test(test_free_any),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
