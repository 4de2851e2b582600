/* Unit tests for helpers/spawn_wire: the spawner request codec, the sandbox spec
 * carried whole, and a malformed request refused. */
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
    static const char *globs[] = {"/ws/**/*.pem", "/ws/secret", NULL};
    memset(r, 0, sizeof *r);
    r->flags = SPAWN_F_SANDBOX | SPAWN_F_TTY | SPAWN_F_PROXY | SPAWN_F_CGROUP;
    r->rows = 40;
    r->cols = 132;
    r->proxy_ports[1] = 1080;
    r->n_extra_fds = 1;
    r->n_init_fds = 2;
    r->exe = "/bin/sh";
    r->cwd = "/ws";
    r->argv = argv;
    r->envp = envp;
    r->spec.enforce_fs = true;
    r->spec.seal_cgroups = true;
    r->spec.max_procs = 4096;
    r->spec.readonly_sub = ro;
    r->spec.deny_globs = globs;
}

static void encode(const struct spawn_wire_req *r, struct buf *b)
{
    buf_init(b);
    spawn_wire_encode(b, r);
}

static size_t count(const char *const *v)
{
    size_t n = 0;
    while (v[n])
        n++;
    return n;
}

static void test_round_trip(void **state)
{
    (void)state;
    struct spawn_wire_req r, d;
    fill(&r);
    struct buf b;
    encode(&r, &b);
    void *arena;
    assert_int_equal(spawn_wire_decode(b.data, b.len, &d, &arena), 0);
    assert_int_equal(d.flags, r.flags);
    assert_int_equal(d.rows, 40);
    assert_int_equal(d.cols, 132);
    assert_int_equal(d.proxy_ports[1], 1080);
    assert_int_equal(d.n_extra_fds, 1);
    assert_int_equal(d.n_init_fds, 2);
    assert_string_equal(d.exe, "/bin/sh");
    assert_string_equal(d.cwd, "/ws");
    assert_int_equal(count(d.argv), 3);
    assert_string_equal(d.argv[2], "echo hi");
    assert_null(d.argv[3]); /* NULL-terminated for execve */
    assert_string_equal(d.envp[1], "A=");
    /* The spec, whole: its yes/no members, its cap, every list (an absent one empty). */
    assert_true(d.spec.enforce_fs);
    assert_true(d.spec.seal_cgroups);
    assert_false(d.spec.net_restricted || d.spec.net_proxy || d.spec.pid_inherit || d.spec.serve ||
                 d.spec.landlock_only);
    assert_int_equal(d.spec.max_procs, 4096);
    assert_int_equal(count(d.spec.writable), 0);
    assert_int_equal(count(d.spec.readable), 0);
    assert_int_equal(count(d.spec.denied), 0);
    assert_int_equal(count(d.spec.protected_names), 0);
    assert_int_equal(count(d.spec.readonly_sub), 1);
    assert_string_equal(d.spec.readonly_sub[0], "/ws/.git");
    assert_int_equal(count(d.spec.deny_globs), 2);
    assert_string_equal(d.spec.deny_globs[1], "/ws/secret");
    free(arena);
    buf_free(&b);
}

/* Each yes/no member of the spec crosses alone, and lands on itself. */
static void test_each_spec_flag(void **state)
{
    (void)state;
    static const size_t offs[] = {
        offsetof(struct sandbox_spec, enforce_fs),  offsetof(struct sandbox_spec, net_restricted),
        offsetof(struct sandbox_spec, net_proxy),   offsetof(struct sandbox_spec, pid_inherit),
        offsetof(struct sandbox_spec, serve),       offsetof(struct sandbox_spec, landlock_only),
        offsetof(struct sandbox_spec, seal_cgroups)};
    for (size_t i = 0; i < sizeof offs / sizeof offs[0]; i++) {
        struct spawn_wire_req r, d;
        fill(&r);
        memset(&r.spec, 0, sizeof r.spec);
        *(bool *)((char *)&r.spec + offs[i]) = true;
        struct buf b;
        encode(&r, &b);
        void *arena;
        assert_int_equal(spawn_wire_decode(b.data, b.len, &d, &arena), 0);
        for (size_t k = 0; k < sizeof offs / sizeof offs[0]; k++)
            assert_int_equal(*(bool *)((char *)&d.spec + offs[k]), k == i);
        free(arena);
        buf_free(&b);
    }
}

/* An unsandboxed request carries no spec: it decodes to an empty one. */
static void test_plain_has_no_spec(void **state)
{
    (void)state;
    struct spawn_wire_req r, d;
    fill(&r);
    r.flags = SPAWN_F_PIPE_STDIN;
    r.n_init_fds = 0;
    struct buf b;
    encode(&r, &b);
    void *arena;
    assert_int_equal(spawn_wire_decode(b.data, b.len, &d, &arena), 0);
    assert_false(d.spec.enforce_fs);
    assert_int_equal(d.spec.max_procs, 0);
    assert_null(d.spec.readonly_sub);
    assert_string_equal(d.argv[0], "sh");
    free(arena);
    buf_free(&b);
}

/* A header whose flags and descriptor counts disagree is refused: the spawner would
 * take a descriptor for one it is not. */
static void test_inconsistent_header_refused(void **state)
{
    (void)state;
    struct {
        uint32_t flags, n_init_fds;
    } bad[] = {
        {SPAWN_F_SANDBOX | SPAWN_F_PROXY, 0},       /* the proxy's fd missing */
        {SPAWN_F_SANDBOX | SPAWN_F_PROXY, 2},       /* one too many */
        {SPAWN_F_SANDBOX | SPAWN_F_TRANSPARENT, 1}, /* a TUN device without a proxy */
        {SPAWN_F_PROXY, 1},                         /* init fds without a sandbox */
        {SPAWN_F_SANDBOX | (1u << 30), 0},          /* an unknown flag */
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        struct spawn_wire_req r, d;
        fill(&r);
        r.flags = bad[i].flags;
        r.n_init_fds = bad[i].n_init_fds;
        struct buf b;
        encode(&r, &b);
        void *arena;
        assert_int_equal(spawn_wire_decode(b.data, b.len, &d, &arena), -EPROTO);
        assert_null(arena);
        buf_free(&b);
    }
}

/* Bits beyond the spec's yes/no members are refused, not dropped. */
static void test_unknown_spec_bit_refused(void **state)
{
    (void)state;
    struct spawn_wire_req r, d;
    fill(&r);
    struct buf b;
    encode(&r, &b);
    /* The spec's bits follow the 32-byte header and the two strings exe and cwd. */
    size_t at = 32 + (4 + strlen(r.exe) + 1) + (4 + strlen(r.cwd) + 1);
    uint32_t bits;
    memcpy(&bits, b.data + at, sizeof bits);
    assert_int_equal(bits, 1u | 1u << 6); /* enforce_fs, seal_cgroups */
    bits |= 1u << 31;
    memcpy(b.data + at, &bits, sizeof bits);
    void *arena;
    assert_int_equal(spawn_wire_decode(b.data, b.len, &d, &arena), -EPROTO);
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
    encode(&r, &b);
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
    encode(&r, &b);
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
        cmocka_unit_test(test_each_spec_flag),
        cmocka_unit_test(test_plain_has_no_spec),
        cmocka_unit_test(test_inconsistent_header_refused),
        cmocka_unit_test(test_unknown_spec_bit_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
