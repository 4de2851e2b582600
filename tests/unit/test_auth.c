/* Unit tests for transport/auth: the pure token check (header forms, verdicts, hex
 * keys, trimming of file content), the token file reader's errors, and the 401 that
 * auth_admit writes in place of the 101. */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cmocka.h>

#include "transport/auth.h"

/* SHA-256("sekret") */
#define SEKRET_HEX "bb757689c39373a6cac9ef6ba55616c6249d7500ca4d443f1130c4766453a412"

static struct auth_key key_of(const char *token)
{
    struct auth_key k;
    assert_int_equal(auth_key_from_token(token, strlen(token), &k), 0);
    return k;
}

static void test_hex_keys(void **state)
{
    struct auth_key a, b, c = key_of("sekret");
    assert_int_equal(auth_key_from_hex(SEKRET_HEX, &a), 0);
    assert_memory_equal(a.sha256, c.sha256, 32);
    char upper[65];
    for (int i = 0; i < 65; i++)
        upper[i] = (char)(SEKRET_HEX[i] >= 'a' ? SEKRET_HEX[i] - 32 : SEKRET_HEX[i]);
    assert_int_equal(auth_key_from_hex(upper, &b), 0);
    assert_memory_equal(a.sha256, b.sha256, 32);
    char bad[66];
    strcpy(bad, SEKRET_HEX);
    bad[63] = '\0';
    assert_int_equal(auth_key_from_hex(bad, &b), -EINVAL); /* 63 digits */
    strcpy(bad, SEKRET_HEX);
    strcat(bad, "0");
    assert_int_equal(auth_key_from_hex(bad, &b), -EINVAL); /* 65 digits */
    strcpy(bad, SEKRET_HEX);
    bad[10] = 'g';
    assert_int_equal(auth_key_from_hex(bad, &b), -EINVAL);
    assert_int_equal(auth_key_from_hex("", &b), -EINVAL);
}

static void test_token_trimming(void **state)
{
    struct auth_key a = key_of("sekret"), b;
    assert_int_equal(auth_key_from_token(" \tsekret\r\n\n", 11, &b), 0);
    assert_memory_equal(a.sha256, b.sha256, 32);
    assert_int_equal(auth_key_from_token("sek ret", 7, &b), 0); /* inner blanks kept */
    assert_memory_not_equal(a.sha256, b.sha256, 32);
    assert_int_equal(auth_key_from_token("\n \r\n", 4, &b), -ENODATA);
    assert_int_equal(auth_key_from_token("", 0, &b), -ENODATA);
    char big[AUTH_TOKEN_MAX + 2];
    memset(big, 'x', sizeof big);
    assert_int_equal(auth_key_from_token(big, AUTH_TOKEN_MAX, &b), 0);
    assert_int_equal(auth_key_from_token(big, AUTH_TOKEN_MAX + 1, &b), -E2BIG);
}

static void test_verdicts(void **state)
{
    struct auth_key k = key_of("sekret");
    assert_int_equal(auth_check(&k, "Bearer sekret"), AUTH_OK);
    assert_int_equal(auth_check(&k, "bearer sekret"), AUTH_OK);
    assert_int_equal(auth_check(&k, "BEARER   sekret  "), AUTH_OK);
    assert_int_equal(auth_check(&k, ""), AUTH_MISSING);
    assert_int_equal(auth_check(&k, "Bearer sekreT"), AUTH_WRONG);
    assert_int_equal(auth_check(&k, "Bearer sekre"), AUTH_WRONG);
    assert_int_equal(auth_check(&k, "Bearer sekret2"), AUTH_WRONG);
    assert_int_equal(auth_check(&k, "Bearer sek ret"), AUTH_WRONG);
    assert_int_equal(auth_check(&k, "Bearer " SEKRET_HEX), AUTH_WRONG); /* the hash is no token */
    assert_int_equal(auth_check(&k, "Basic sekret"), AUTH_BAD_HEADER);
    assert_int_equal(auth_check(&k, "Bearer"), AUTH_BAD_HEADER);
    assert_int_equal(auth_check(&k, "Bearer    "), AUTH_BAD_HEADER);
    assert_int_equal(auth_check(&k, "Bearer\tsekret"), AUTH_BAD_HEADER);
    assert_int_equal(auth_check(&k, "Bearersekret"), AUTH_BAD_HEADER);
    assert_int_equal(auth_check(&k, "sekret"), AUTH_BAD_HEADER);
    assert_string_equal(auth_verdict_text(AUTH_MISSING), "missing websocket bearer token");
    assert_string_equal(auth_verdict_text(AUTH_WRONG), "invalid websocket bearer token");
    assert_string_equal(auth_verdict_text(AUTH_BAD_HEADER), "invalid authorization header");
}

static void test_token_file(void **state)
{
    char path[] = "/tmp/test_auth_XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, "sekret-0123456789\n", 18), 18);
    close(fd);
    struct auth_key k, want = key_of("sekret-0123456789");
    char err[512] = "";
    assert_int_equal(auth_key_from_file(path, &k, err, sizeof err), 0);
    assert_memory_equal(k.sha256, want.sha256, 32);
    char expect[600];

    /* As sshd refuses a key file: open to group or others is refused, with the fix. */
    chmod(path, 0644);
    assert_int_equal(auth_key_from_file(path, &k, err, sizeof err), -EACCES);
    snprintf(expect, sizeof expect, "run `chmod 600 %s`", path);
    assert_non_null(strstr(err, expect));
    assert_non_null(strstr(err, "is open to group or others (mode 0644)"));
    chmod(path, 0600);

    /* A word is not a secret: under 16 bytes is refused, with how to make one. */
    fd = open(path, O_WRONLY | O_TRUNC);
    assert_int_equal(write(fd, "sekret\n", 7), 7);
    close(fd);
    assert_int_equal(auth_key_from_file(path, &k, err, sizeof err), -EINVAL);
    assert_non_null(strstr(err, "is 6 bytes, too short to be a secret"));
    assert_non_null(strstr(err, "openssl rand -hex 32"));

    fd = open(path, O_WRONLY | O_TRUNC);
    assert_int_equal(write(fd, "\n", 1), 1);
    close(fd);
    assert_int_equal(auth_key_from_file(path, &k, err, sizeof err), -ENODATA);
    snprintf(expect, sizeof expect, "websocket auth secret %s must not be empty", path);
    assert_string_equal(err, expect);
    unlink(path);

    assert_int_equal(auth_key_from_file(path, &k, err, sizeof err), -ENOENT);
    snprintf(expect, sizeof expect,
             "failed to read websocket auth secret %s: No such file or directory (os error 2)",
             path);
    assert_string_equal(err, expect);
}

static void test_admit(void **state)
{
    struct buf reply;
    buf_init(&reply);
    buf_puts(&reply, "HTTP/1.1 101 Switching Protocols\r\n\r\n");
    auth_configure(NULL);
    assert_false(auth_enabled());
    assert_true(auth_admit("", &reply, NULL)); /* off: everything passes, reply untouched */
    assert_int_equal(reply.len, 36);

    struct auth_key k = key_of("sekret");
    auth_configure(&k);
    assert_true(auth_enabled());
    assert_true(auth_admit("Bearer sekret", &reply, NULL));
    assert_int_equal(reply.len, 36);
    struct auth_refusal why = {0};
    assert_false(auth_admit("Bearer nope", &reply, &why));
    assert_string_equal(why.reason, "invalid_token");
    assert_string_equal(why.text, "invalid websocket bearer token");
    buf_putc(&reply, '\0');
    assert_string_equal(reply.data,
                        "HTTP/1.1 401 Unauthorized\r\ncontent-length: 30\r\nconnection: close\r\n"
                        "content-type: text/plain; charset=utf-8\r\nwww-authenticate: Bearer\r\n"
                        "\r\ninvalid websocket bearer token");
    auth_configure(NULL);
    buf_free(&reply);
}

static void write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
    chmod(path, 0600); /* a secret is its owner's alone (auth_key_from_file) */
}

/* SIGHUP's auth_reload: the token file is read again; a file that no longer holds a
 * token leaves the old one in force. */
static void test_reload_token_file(void **state)
{
    char dir[] = "/tmp/test_auth_XXXXXX";
    assert_non_null(mkdtemp(dir));
    char path[64];
    snprintf(path, sizeof path, "%s/token", dir);
    write_file(path, "first-0123456789ab\n");
    struct auth_key k;
    char err[256];
    assert_int_equal(auth_key_from_file(path, &k, err, sizeof err), 0);
    auth_configure(&k);
    auth_set_token_file(path);
    struct buf reply;
    buf_init(&reply);
    struct auth_refusal why = {0};
    assert_true(auth_admit("Bearer first-0123456789ab", &reply, NULL));
    assert_false(auth_admit("", &reply, &why));
    assert_string_equal(why.reason, "missing_token");

    write_file(path, "second-0123456789a\n");
    assert_int_equal(auth_reload(err, sizeof err), 0);
    assert_true(auth_admit("Bearer second-0123456789a", &reply, NULL));
    assert_false(auth_admit("Bearer first-0123456789ab", &reply, NULL));

    write_file(path, "  \n");
    assert_int_equal(auth_reload(err, sizeof err), -ENODATA);
    assert_non_null(strstr(err, path));
    assert_true(auth_admit("Bearer second-0123456789a", &reply, NULL));

    auth_set_token_file(NULL);
    auth_configure(NULL);
    buf_free(&reply);
    unlink(path);
    rmdir(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_hex_keys),       cmocka_unit_test(test_reload_token_file),
        cmocka_unit_test(test_token_trimming), cmocka_unit_test(test_verdicts),
        cmocka_unit_test(test_token_file),     cmocka_unit_test(test_admit),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
