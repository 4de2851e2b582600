/* Unit tests for fs/fs_wire: request and reply frames round trip, a request frame's
 * bytes are where the helper of the same build expects them, and every frame whose
 * lengths do not add up (short, long, overflowing) or whose flag bytes are no bools is
 * refused. */
#include <errno.h>
#include <setjmp.h>
#include <stdbool.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "fs/fs_sandboxed.h"
#include "fs/fs_wire.h"

static void test_request_round_trip(void **state)
{
    struct fs_request rq = {.op = 3,
                            .recursive = true,
                            .nofollow = true,
                            .replace = true,
                            .max_depth = 7,
                            .max_dirs = 1u << 20,
                            .max_entries = 42,
                            .path = (char *)"/tmp/a",
                            .path_len = 6,
                            .path2 = (char *)"/tmp/b\xff",
                            .path2_len = 7};
    struct buf b;
    buf_init(&b);
    fs_wire_encode_request(&b, &rq);
    struct fs_request got;
    assert_int_equal(fs_wire_decode_request(b.data, b.len, &got), 0);
    assert_int_equal(got.op, 3);
    assert_true(got.recursive && got.nofollow && got.replace);
    assert_false(got.force || got.follow_dir_links || got.prune_hidden);
    assert_int_equal(got.max_depth, 7);
    assert_int_equal(got.max_dirs, 1u << 20);
    assert_int_equal(got.max_entries, 42);
    assert_int_equal(got.path_len, 6);
    assert_memory_equal(got.path, "/tmp/a", 6);
    assert_int_equal(got.path2_len, 7);
    assert_memory_equal(got.path2, "/tmp/b\xff", 7);
    /* the paths are C strings for the operation code */
    assert_string_equal(got.path, "/tmp/a");
    assert_string_equal(got.path2, "/tmp/b\xff");
    assert_int_equal(got.b64_len, 0);
    free(got.path);
    free(got.path2);
    /* One byte short or one byte over: refused. */
    assert_int_equal(fs_wire_decode_request(b.data, b.len - 1, &got), -EPROTO);
    buf_putc(&b, 'x');
    assert_int_equal(fs_wire_decode_request(b.data, b.len, &got), -EPROTO);
    assert_int_equal(fs_wire_decode_request(b.data, 3, &got), -EPROTO);
    buf_free(&b);
}

static void test_request_lengths_cannot_wrap(void **state)
{
    struct fs_request rq = {.op = 1, .path = (char *)"abc", .path_len = 3};
    struct buf b;
    buf_init(&b);
    fs_wire_encode_request(&b, &rq);
    /* Forge path2_len and b64_len so that the three add up to the body modulo 2^64. */
    size_t head = b.len - 3;
    uint64_t big = UINT64_MAX - 1;
    memcpy(b.data + head - 16, &big, 8); /* path2_len */
    uint64_t two = 2; /* b64_len: 3 + (2^64 - 2) + 2 wraps to exactly the body, 3 */
    memcpy(b.data + head - 8, &two, 8);
    struct fs_request got;
    assert_int_equal(fs_wire_decode_request(b.data, b.len, &got), -EPROTO);
    buf_free(&b);
}

/* The frame's bytes, pinned: the head laid out as the helper of this build reads it
 * (op, seven flag bytes, zeros to the limits at 16, the lengths at 40), then the
 * strings. A field moved by mistake, or stray memory in the padding, shows here. */
static void test_request_layout(void **state)
{
    struct fs_request rq = {.op = OP_WALK,
                            .force = true,
                            .fsync = true,
                            .max_depth = 9,
                            .max_dirs = 8,
                            .max_entries = 7,
                            .path = (char *)"/p",
                            .path_len = 2,
                            .b64 = "QQ==",
                            .b64_len = 4};
    memset(rq.spare, 0xee, sizeof rq.spare); /* never on the wire */
    struct buf b;
    buf_init(&b);
    fs_wire_encode_request(&b, &rq);
    uint8_t want[64 + 6] = {OP_WALK, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1};
    uint64_t nums[6] = {9, 8, 7, 2, 0, 4};
    memcpy(want + 16, nums, sizeof nums);
    memcpy(want + 64, "/pQQ==", 6);
    assert_int_equal(b.len, sizeof want);
    assert_memory_equal(b.data, want, sizeof want);
    buf_free(&b);
}

/* A flag byte other than 0 or 1 (a compromised or confused peer) is no bool, and a
 * spare byte is zero: anything else is refused. */
static void test_request_flags_are_bools(void **state)
{
    struct fs_request rq = {.op = OP_READ_FILE, .path = (char *)"/x", .path_len = 2};
    struct buf b;
    buf_init(&b);
    fs_wire_encode_request(&b, &rq);
    struct fs_request got;
    for (size_t at = 4; at < 16; at++) {
        b.data[at] = 2;
        assert_int_equal(fs_wire_decode_request(b.data, b.len, &got), -EPROTO);
        b.data[at] = 1;
        bool flag = at < 11; /* seven flags, then the spare */
        assert_int_equal(fs_wire_decode_request(b.data, b.len, &got), flag ? 0 : -EPROTO);
        if (flag) {
            free(got.path);
            free(got.path2);
        }
        b.data[at] = 0;
    }
    buf_free(&b);
}

/* The helper serves only what its table gives it: handle I/O (the daemon's, on the fd
 * fs/open passed back) and a number that is no operation get an error reply and run
 * nothing. */
static void test_helper_refuses_what_it_does_not_serve(void **state)
{
    uint32_t ops[] = {OP_READ_BLOCK, OP_WRITE_BLOCK, FS_OP_COUNT, 0xffffffffu};
    for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++) {
        struct fs_request rq = {.path = (char *)"/", .path_len = 1};
        memcpy(&rq.op, &ops[i], sizeof ops[i]); /* any 32 bits, as a peer may send */
        struct buf frame, reply;
        buf_init(&frame);
        buf_init(&reply);
        fs_wire_encode_request(&frame, &rq);
        int fd = 0, after = 0;
        assert_int_equal(fs_helper_serve(frame.data, frame.len, &reply, &fd, &after), -EPROTO);
        assert_int_equal(fd, -1);
        assert_int_equal(after, -1);
        struct fs_wire_reply rp;
        assert_int_equal(fs_wire_decode_reply(reply.data, reply.len, &rp), 0);
        assert_int_equal(rp.out_len, 0);
        const char *want = "malformed sandbox helper request";
        assert_int_equal(rp.msg_len, strlen(want));
        assert_memory_equal(rp.msg, want, rp.msg_len);
        buf_free(&frame);
        buf_free(&reply);
    }
}

static void test_reply_round_trip(void **state)
{
    struct buf b;
    buf_init(&b);
    struct fs_wire_reply rp = {.err = 0, .kind = 1, .msg = "nope", .msg_len = 4};
    fs_wire_encode_reply(&b, &rp);
    struct fs_wire_reply got;
    assert_int_equal(fs_wire_decode_reply(b.data, b.len, &got), 0);
    assert_int_equal(got.kind, 1);
    assert_int_equal(got.msg_len, 4);
    assert_memory_equal(got.msg, "nope", 4);
    assert_int_equal(got.out_len, 0);
    assert_int_equal(fs_wire_decode_reply(b.data, b.len - 1, &got), -EPROTO);
    buf_reset(&b);
    struct fs_wire_reply ok = {.out = "{\"x\":1}", .out_len = 7};
    fs_wire_encode_reply(&b, &ok);
    assert_int_equal(fs_wire_decode_reply(b.data, b.len, &got), 0);
    assert_int_equal(got.err, 0);
    assert_int_equal(got.msg_len, 0);
    assert_memory_equal(got.out, "{\"x\":1}", 7);
    buf_reset(&b);
    struct fs_wire_reply e = {.err = ENOENT};
    fs_wire_encode_reply(&b, &e);
    assert_int_equal(fs_wire_decode_reply(b.data, b.len, &got), 0);
    assert_int_equal(got.err, ENOENT);
    assert_int_equal(fs_wire_decode_reply(b.data, 2, &got), -EPROTO);
    buf_free(&b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_request_round_trip),
        cmocka_unit_test(test_request_lengths_cannot_wrap),
        cmocka_unit_test(test_request_layout),
        cmocka_unit_test(test_request_flags_are_bools),
        cmocka_unit_test(test_helper_refuses_what_it_does_not_serve),
        cmocka_unit_test(test_reply_round_trip),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
