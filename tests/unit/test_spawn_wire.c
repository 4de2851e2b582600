/* Unit tests for helpers/spawn_wire: the spawner request codec. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "helpers/spawn_wire.h"

static void fill(struct spawn_wire_req *r)
{
    static const char *argv[] = {"sh", "-c", "echo hi", NULL};
    static const char *envp[] = {"PATH=/bin", "A=", NULL};
    static const char *ro[] = {"/ws/.git", NULL};
    memset(r, 0, sizeof *r);
    r->flags = SPAWN_F_SANDBOX | SPAWN_F_ENFORCE_FS | SPAWN_F_TTY;
    r->rows = 40;
    r->cols = 132;
    r->proxy_ports[1] = 1080;
    r->n_extra_fds = 1;
    r->exe = "/bin/sh";
    r->cwd = "/ws";
    r->list[SPAWN_L_ARGV] = argv;
    r->nlist[SPAWN_L_ARGV] = 3;
    r->list[SPAWN_L_ENVP] = envp;
    r->nlist[SPAWN_L_ENVP] = 2;
    r->list[SPAWN_L_READONLY_SUB] = ro;
    r->nlist[SPAWN_L_READONLY_SUB] = 1;
}

static void test_round_trip(void **state)
{
    (void)state;
    struct spawn_wire_req r, d;
    fill(&r);
    struct buf b;
    buf_init(&b);
    spawn_wire_encode(&b, &r);
    void *arena;
    assert_int_equal(spawn_wire_decode(b.data, b.len, &d, &arena), 0);
    assert_int_equal(d.flags, r.flags);
    assert_int_equal(d.rows, 40);
    assert_int_equal(d.cols, 132);
    assert_int_equal(d.proxy_ports[1], 1080);
    assert_int_equal(d.n_extra_fds, 1);
    assert_string_equal(d.exe, "/bin/sh");
    assert_string_equal(d.cwd, "/ws");
    assert_int_equal(d.nlist[SPAWN_L_ARGV], 3);
    assert_string_equal(d.list[SPAWN_L_ARGV][2], "echo hi");
    assert_null(d.list[SPAWN_L_ARGV][3]); /* NULL-terminated for execve */
    assert_string_equal(d.list[SPAWN_L_ENVP][1], "A=");
    assert_int_equal(d.nlist[SPAWN_L_WRITABLE], 0);
    assert_null(d.list[SPAWN_L_WRITABLE][0]);
    assert_string_equal(d.list[SPAWN_L_READONLY_SUB][0], "/ws/.git");
    free(arena);
    buf_free(&b);
}

/* Every truncation and every corrupted byte is refused or decodes to something
 * well-formed; never a read past the end (ASan watches). */
static void test_truncated_and_corrupt(void **state)
{
    (void)state;
    struct spawn_wire_req r, d;
    fill(&r);
    struct buf b;
    buf_init(&b);
    spawn_wire_encode(&b, &r);
    void *arena;
    for (size_t n = 0; n < b.len; n++) {
        char *copy = malloc(n ? n : 1);
        memcpy(copy, b.data, n);
        assert_int_equal(spawn_wire_decode(copy, n, &d, &arena), -EPROTO);
        assert_null(arena);
        free(copy);
    }
    for (size_t i = 0; i < b.len; i++) {
        char *copy = malloc(b.len);
        memcpy(copy, b.data, b.len);
        copy[i] ^= 0x5a;
        if (spawn_wire_decode(copy, b.len, &d, &arena) == 0) free(arena);
        free(copy);
    }
    buf_free(&b);
}

static void test_inner_nul_refused(void **state)
{
    (void)state;
    struct spawn_wire_req r, d;
    fill(&r);
    r.cwd = "/w";
    struct buf b;
    buf_init(&b);
    spawn_wire_encode(&b, &r);
    char *at = memmem(b.data, b.len, "/w", 3);
    assert_non_null(at);
    at[1] = 0; /* "/\0" then the terminator: a string with an inner NUL */
    void *arena;
    assert_int_equal(spawn_wire_decode(b.data, b.len, &d, &arena), -EPROTO);
    buf_free(&b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_round_trip),
        cmocka_unit_test(test_truncated_and_corrupt),
        cmocka_unit_test(test_inner_nul_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
