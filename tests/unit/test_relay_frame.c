/* Unit tests for proto/relay_frame: the RelayMessageFrame codec.
 *
 * The byte examples of REMOTE.md section 2.1 are pinned exactly (they are what prost
 * emits upstream), then every section 2.2 rule gets its own error code, then the
 * protobuf corners where prost's behaviour decides (unknown fields, repeated fields,
 * oneof merge/replace, varint truncation). When CMake found protobuf-c, the same
 * frames are also packed and unpacked by protoc-c's code for src/proto/relay_v1.proto
 * and must agree with ours byte for byte. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "proto/relay_frame.h"

#ifdef EXEC_HAVE_PROTOBUF_C
#include "relay_v1.pb-c.h"
#endif

#define S(lit) ((struct relay_str){lit, sizeof(lit) - 1})
#define BYTES(...) ((const uint8_t[]){__VA_ARGS__}), sizeof((const uint8_t[]){__VA_ARGS__})

static struct relay_frame base(enum relay_body body)
{
    struct relay_frame f = {0};
    f.version = RELAY_FRAME_VERSION;
    f.stream_id = S("s1");
    f.body = body;
    return f;
}

/* Encodes f, compares with want[0..n), decodes it back and compares the fields. */
static void expect_bytes(const struct relay_frame *f, const uint8_t *want, size_t n)
{
    uint8_t out[256];
    size_t len = 0;
    assert_int_equal(relay_frame_encoded_len(f), n);
    assert_int_equal(relay_frame_encode(f, out, sizeof out, &len), 0);
    assert_int_equal(len, n);
    assert_memory_equal(out, want, n);

    struct relay_frame d;
    assert_int_equal(relay_frame_decode(want, n, &d), 0);
    assert_int_equal(d.version, f->version);
    assert_int_equal(d.stream_id.len, f->stream_id.len);
    assert_memory_equal(d.stream_id.ptr, f->stream_id.ptr, f->stream_id.len);
    assert_int_equal(d.body, f->body);
    assert_int_equal(d.seq, f->seq);
    assert_int_equal(d.next_seq, f->next_seq);
    assert_int_equal(d.payload_len, f->payload_len);
    if (f->payload_len) assert_memory_equal(d.payload, f->payload, f->payload_len);
    assert_int_equal(d.reason.len, f->reason.len);
    if (f->reason.len) assert_memory_equal(d.reason.ptr, f->reason.ptr, f->reason.len);
    assert_int_equal(d.traceparent.ptr == NULL, f->traceparent.ptr == NULL);
    assert_int_equal(d.traceparent.len, f->traceparent.len);
    assert_int_equal(d.tracestate.ptr == NULL, f->tracestate.ptr == NULL);
    assert_int_equal(d.tracestate.len, f->tracestate.len);
}

/* ---- REMOTE.md section 2.1 examples ---- */

static void test_resume_example(void **state)
{
    struct relay_frame f = base(RELAY_BODY_RESUME);
    expect_bytes(&f, BYTES(0x08, 0x01, 0x12, 0x02, 0x73, 0x31, 0x3a, 0x00));
}

static void test_data_with_traceparent_example(void **state)
{
    struct relay_frame f = base(RELAY_BODY_DATA);
    static const uint8_t payload[] = {0xaa, 0xbb, 0xcc};
    f.payload = payload;
    f.payload_len = 3;
    f.traceparent = S("tp");
    expect_bytes(&f, BYTES(0x08, 0x01, 0x12, 0x02, 0x73, 0x31, 0x2a, 0x07, 0x18, 0x01, 0x22, 0x03,
                           0xaa, 0xbb, 0xcc, 0x5a, 0x02, 0x74, 0x70));
}

static void test_reset_example(void **state)
{
    struct relay_frame f = base(RELAY_BODY_RESET);
    f.reason = S("x");
    expect_bytes(&f, BYTES(0x08, 0x01, 0x12, 0x02, 0x73, 0x31, 0x42, 0x03, 0x0a, 0x01, 0x78));
}

/* Empty oneof members are still written: their presence is the body. */
static void test_empty_members_emitted(void **state)
{
    struct relay_frame f = base(RELAY_BODY_ACK);
    expect_bytes(&f, BYTES(0x08, 0x01, 0x12, 0x02, 0x73, 0x31, 0x32, 0x00));
    f = base(RELAY_BODY_HEARTBEAT);
    expect_bytes(&f, BYTES(0x08, 0x01, 0x12, 0x02, 0x73, 0x31, 0x4a, 0x00));
    f = base(RELAY_BODY_RESUME); /* next_seq 0 is omitted inside, the member is not */
    expect_bytes(&f, BYTES(0x08, 0x01, 0x12, 0x02, 0x73, 0x31, 0x3a, 0x00));
}

static void test_other_shapes(void **state)
{
    /* handshake, a multi-byte seq, ack fields, tracestate, present-but-empty traceparent */
    struct relay_frame f = base(RELAY_BODY_HANDSHAKE);
    static const uint8_t hs[] = {1, 2};
    f.payload = hs;
    f.payload_len = 2;
    expect_bytes(&f, BYTES(0x08, 0x01, 0x12, 0x02, 0x73, 0x31, 0x52, 0x04, 0x0a, 0x02, 0x01, 0x02));

    f = base(RELAY_BODY_DATA);
    f.seq = 300;
    f.ack = 1;
    f.ack_bits = 2;
    f.payload = hs;
    f.payload_len = 1;
    f.traceparent = (struct relay_str){"", 0};
    f.tracestate = S("a=b");
    expect_bytes(&f, BYTES(0x08, 0x01, 0x12, 0x02, 0x73, 0x31, 0x18, 0x01, 0x20, 0x02, 0x2a, 0x08,
                           0x08, 0xac, 0x02, 0x18, 0x01, 0x22, 0x01, 0x01, 0x5a, 0x00, 0x62, 0x03,
                           0x61, 0x3d, 0x62));

    f = base(RELAY_BODY_RESUME);
    f.next_seq = UINT32_MAX;
    expect_bytes(&f, BYTES(0x08, 0x01, 0x12, 0x02, 0x73, 0x31, 0x3a, 0x06, 0x08, 0xff, 0xff, 0xff,
                           0xff, 0x0f));
}

/* A data frame whose payload brings it to exactly 256 KiB is fine; one byte more is not. */
static void test_size_cap(void **state)
{
    size_t overhead = 6 /* version, stream_id */ + 1 + 3 /* data key, length */ + 2 + 1 + 3;
    size_t plen = RELAY_FRAME_MAX_LEN - overhead;
    uint8_t *payload = calloc(1, plen + 1);
    struct relay_frame f = base(RELAY_BODY_DATA);
    f.payload = payload;
    f.payload_len = plen;
    assert_int_equal(relay_frame_encoded_len(&f), RELAY_FRAME_MAX_LEN);
    uint8_t *out = NULL;
    size_t len = 0;
    assert_int_equal(relay_frame_encode_alloc(&f, &out, &len), 0);
    assert_int_equal(len, RELAY_FRAME_MAX_LEN);
    struct relay_frame d;
    assert_int_equal(relay_frame_decode(out, len, &d), 0);
    assert_int_equal(d.payload_len, plen);
    assert_ptr_equal(d.payload, out + overhead); /* zero copy */
    free(out);

    f.payload_len = plen + 1;
    assert_int_equal(relay_frame_encode_alloc(&f, &out, &len), RELAY_E_TOO_BIG);
    assert_null(out);
    uint8_t *big = calloc(1, RELAY_FRAME_MAX_LEN + 1);
    assert_int_equal(relay_frame_decode(big, RELAY_FRAME_MAX_LEN + 1, &d), RELAY_E_TOO_BIG);
    free(big);
    free(payload);
}

/* A frame built in place: the head, then the payload, is the whole encoding, for the
 * payload lengths whose varints differ in size and for seqs of every width; frames
 * whose payload is not last are refused. */
static void test_encode_head(void **state)
{
    static uint8_t payload[70000];
    for (size_t i = 0; i < sizeof payload; i++)
        payload[i] = (uint8_t)(i * 7);
    size_t lens[] = {1, 127, 128, 16383, 16384, 65551};
    uint32_t seqs[] = {0, 1, 127, 128, UINT32_MAX};
    for (size_t i = 0; i < sizeof lens / sizeof *lens; i++) {
        for (size_t k = 0; k < sizeof seqs / sizeof *seqs; k++) {
            for (int body = 0; body < 2; body++) {
                struct relay_frame f = base(body ? RELAY_BODY_HANDSHAKE : RELAY_BODY_DATA);
                f.stream_id = S("0f8fad5b-d9cb-469f-a165-70867728950e");
                f.seq = body ? 0 : seqs[k];
                f.payload = payload;
                f.payload_len = lens[i];
                uint8_t *whole = NULL;
                size_t n = 0;
                assert_int_equal(relay_frame_encode_alloc(&f, &whole, &n), 0);
                uint8_t *built = malloc(n);
                size_t hl = 0;
                f.payload = NULL; /* not read */
                assert_int_equal(relay_frame_encode_head(&f, built, &hl), 0);
                assert_int_equal(hl + lens[i], n);
                memcpy(built + hl, payload, lens[i]);
                assert_memory_equal(built, whole, n);
                free(built);
                free(whole);
            }
        }
    }
    uint8_t out[64];
    size_t hl;
    struct relay_frame f = base(RELAY_BODY_DATA);
    f.payload_len = 1;
    f.traceparent = S("00-x");
    assert_int_equal(relay_frame_encode_head(&f, out, &hl), RELAY_E_MALFORMED);
    f = base(RELAY_BODY_RESET);
    f.reason = S("r");
    assert_int_equal(relay_frame_encode_head(&f, out, &hl), RELAY_E_MALFORMED);
    f = base(RELAY_BODY_DATA);
    assert_int_equal(relay_frame_encode_head(&f, out, &hl), RELAY_E_DATA); /* no payload */
}

static void test_encode_errors(void **state)
{
    uint8_t out[64];
    size_t len = 99;
    struct relay_frame f = base(RELAY_BODY_RESUME);
    assert_int_equal(relay_frame_encode(&f, out, 7, &len), RELAY_E_NOSPC);
    assert_int_equal(len, 99);
    assert_int_equal(relay_frame_encode(&f, out, 8, &len), 0);
    assert_int_equal(len, 8);

    f.version = 2;
    assert_int_equal(relay_frame_encode(&f, out, sizeof out, &len), RELAY_E_VERSION);
    f = base(RELAY_BODY_NONE);
    assert_int_equal(relay_frame_encode(&f, out, sizeof out, &len), RELAY_E_NO_BODY);
    f = base(RELAY_BODY_DATA);
    assert_int_equal(relay_frame_encode(&f, out, sizeof out, &len), RELAY_E_DATA);
    f = base(RELAY_BODY_RESET);
    assert_int_equal(relay_frame_encode(&f, out, sizeof out, &len), RELAY_E_RESET);
    f = base(RELAY_BODY_HANDSHAKE);
    assert_int_equal(relay_frame_encode(&f, out, sizeof out, &len), RELAY_E_HANDSHAKE);
    f = base(RELAY_BODY_ACK);
    f.stream_id = S(" \t\n");
    assert_int_equal(relay_frame_encode(&f, out, sizeof out, &len), RELAY_E_STREAM_ID);
    f.stream_id = S("\xff");
    assert_int_equal(relay_frame_encode(&f, out, sizeof out, &len), RELAY_E_UTF8);
    f = base(RELAY_BODY_ACK);
    f.tracestate = S("\xc0\x80");
    assert_int_equal(relay_frame_encode(&f, out, sizeof out, &len), RELAY_E_UTF8);
}

/* ---- section 2.2 rules on decode, one code each ---- */

static int dec(const uint8_t *p, size_t n)
{
    struct relay_frame f;
    return relay_frame_decode(p, n, &f);
}

static void test_decode_rules(void **state)
{
    /* version missing (0) or 2 */
    assert_int_equal(dec(BYTES(0x12, 0x02, 0x73, 0x31, 0x32, 0x00)), RELAY_E_VERSION);
    assert_int_equal(dec(BYTES(0x08, 0x02, 0x12, 0x02, 0x73, 0x31, 0x32, 0x00)), RELAY_E_VERSION);
    /* stream_id missing, blank ASCII, blank Unicode (U+3000, U+00A0) */
    assert_int_equal(dec(BYTES(0x08, 0x01, 0x32, 0x00)), RELAY_E_STREAM_ID);
    assert_int_equal(dec(BYTES(0x08, 0x01, 0x12, 0x02, 0x20, 0x09, 0x32, 0x00)), RELAY_E_STREAM_ID);
    assert_int_equal(dec(BYTES(0x08, 0x01, 0x12, 0x05, 0xe3, 0x80, 0x80, 0xc2, 0xa0, 0x32, 0x00)),
                     RELAY_E_STREAM_ID);
    /* ...but a stream id with white space around text is fine (trim is only a test) */
    assert_int_equal(dec(BYTES(0x08, 0x01, 0x12, 0x03, 0x20, 0x61, 0x20, 0x32, 0x00)), 0);
    /* no body */
    assert_int_equal(dec(BYTES(0x08, 0x01, 0x12, 0x02, 0x73, 0x31)), RELAY_E_NO_BODY);
    /* data: segment_count missing (0), 2; segment_index 1; payload missing */
    assert_int_equal(dec(BYTES(0x08, 0x01, 0x12, 0x02, 0x73, 0x31, 0x2a, 0x03, 0x22, 0x01, 0xaa)),
                     RELAY_E_DATA);
    assert_int_equal(
        dec(BYTES(0x08, 0x01, 0x12, 0x02, 0x73, 0x31, 0x2a, 0x05, 0x18, 0x02, 0x22, 0x01, 0xaa)),
        RELAY_E_DATA);
    assert_int_equal(dec(BYTES(0x08, 0x01, 0x12, 0x02, 0x73, 0x31, 0x2a, 0x07, 0x10, 0x01, 0x18,
                               0x01, 0x22, 0x01, 0xaa)),
                     RELAY_E_DATA);
    assert_int_equal(dec(BYTES(0x08, 0x01, 0x12, 0x02, 0x73, 0x31, 0x2a, 0x02, 0x18, 0x01)),
                     RELAY_E_DATA);
    assert_int_equal(
        dec(BYTES(0x08, 0x01, 0x12, 0x02, 0x73, 0x31, 0x2a, 0x04, 0x18, 0x01, 0x22, 0x00)),
        RELAY_E_DATA);
    /* reset without reason, handshake without payload */
    assert_int_equal(dec(BYTES(0x08, 0x01, 0x12, 0x02, 0x73, 0x31, 0x42, 0x00)), RELAY_E_RESET);
    assert_int_equal(dec(BYTES(0x08, 0x01, 0x12, 0x02, 0x73, 0x31, 0x42, 0x02, 0x0a, 0x00)),
                     RELAY_E_RESET);
    assert_int_equal(dec(BYTES(0x08, 0x01, 0x12, 0x02, 0x73, 0x31, 0x52, 0x00)), RELAY_E_HANDSHAKE);
    /* invalid UTF-8: stream id, reason, traceparent (a surrogate, an overlong, a lone byte) */
    assert_int_equal(dec(BYTES(0x08, 0x01, 0x12, 0x03, 0xed, 0xa0, 0x80, 0x32, 0x00)),
                     RELAY_E_UTF8);
    assert_int_equal(
        dec(BYTES(0x08, 0x01, 0x12, 0x02, 0x73, 0x31, 0x42, 0x04, 0x0a, 0x02, 0xc1, 0xbf)),
        RELAY_E_UTF8);
    assert_int_equal(dec(BYTES(0x08, 0x01, 0x12, 0x02, 0x73, 0x31, 0x32, 0x00, 0x5a, 0x01, 0x80)),
                     RELAY_E_UTF8);
    /* valid 4-byte UTF-8 (U+10FFFF) in a stream id; one above it is not */
    assert_int_equal(dec(BYTES(0x08, 0x01, 0x12, 0x04, 0xf4, 0x8f, 0xbf, 0xbf, 0x32, 0x00)), 0);
    assert_int_equal(dec(BYTES(0x08, 0x01, 0x12, 0x04, 0xf4, 0x90, 0x80, 0x80, 0x32, 0x00)),
                     RELAY_E_UTF8);
    /* the empty input has no version */
    assert_int_equal(relay_frame_decode(NULL, 0, &(struct relay_frame){0}), RELAY_E_VERSION);
}

static void test_decode_malformed(void **state)
{
    /* truncated varint, truncated length, length past the end (top level and nested) */
    assert_int_equal(dec(BYTES(0x08)), RELAY_E_MALFORMED);
    assert_int_equal(dec(BYTES(0x08, 0x81)), RELAY_E_MALFORMED);
    assert_int_equal(dec(BYTES(0x08, 0x01, 0x12, 0x05, 0x73, 0x31)), RELAY_E_MALFORMED);
    assert_int_equal(dec(BYTES(0x08, 0x01, 0x12, 0x02, 0x73, 0x31, 0x2a, 0x03, 0x22, 0x05, 0xaa)),
                     RELAY_E_MALFORMED);
    /* field number 0; wire types 6 and 7; a lone end-group; an unterminated group */
    assert_int_equal(dec(BYTES(0x00, 0x01)), RELAY_E_MALFORMED);
    assert_int_equal(dec(BYTES(0x7e)), RELAY_E_MALFORMED);
    assert_int_equal(dec(BYTES(0x7f)), RELAY_E_MALFORMED);
    assert_int_equal(dec(BYTES(0x7c)), RELAY_E_MALFORMED);
    assert_int_equal(dec(BYTES(0x7b, 0x08, 0x01)), RELAY_E_MALFORMED);
    /* a group closed by another field's end tag */
    assert_int_equal(dec(BYTES(0x7b, 0x74)), RELAY_E_MALFORMED);
    /* known fields with the wrong wire type */
    assert_int_equal(dec(BYTES(0x0a, 0x01, 0x01)), RELAY_E_MALFORMED); /* version as bytes */
    assert_int_equal(dec(BYTES(0x10, 0x01)), RELAY_E_MALFORMED);       /* stream_id as varint */
    assert_int_equal(dec(BYTES(0x28, 0x01)), RELAY_E_MALFORMED);       /* data as varint */
    assert_int_equal(dec(BYTES(0x08, 0x01, 0x12, 0x02, 0x73, 0x31, 0x3a, 0x02, 0x0a, 0x00)),
                     RELAY_E_MALFORMED); /* next_seq as bytes */
    /* varints: 11 bytes; 10 bytes whose last is 2 */
    assert_int_equal(
        dec(BYTES(0x08, 0x81, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x00)),
        RELAY_E_MALFORMED);
    assert_int_equal(dec(BYTES(0x08, 0x81, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x02)),
                     RELAY_E_MALFORMED);
    /* a key above 32 bits */
    assert_int_equal(dec(BYTES(0x80, 0x80, 0x80, 0x80, 0x80, 0x01, 0x00)), RELAY_E_MALFORMED);
}

/* ---- protobuf corners, decided the way prost decides them ---- */

static void test_decode_prost_semantics(void **state)
{
    struct relay_frame f;
    /* Unknown fields of every wire type are skipped, at the top and inside a body:
     * field 15 varint, 16 fixed64, 17 bytes, 18 group holding a varint, 19 fixed32. */
    static const uint8_t unk[] = {0x78, 0x05, 0x81, 0x01, 1,    2,    3,    4,    5,    6,
                                  7,    8,    0x8a, 0x01, 0x01, 0xff, 0x93, 0x01, 0x08, 0x07,
                                  0x94, 0x01, 0x9d, 0x01, 1,    2,    3,    4,    0x08, 0x01,
                                  0x12, 0x02, 0x73, 0x31, 0x2a, 0x0b, 0x18, 0x01, 0x22, 0x01,
                                  0xaa, 0x38, 0x09, 0x43, 0x08, 0x01, 0x44};
    assert_int_equal(relay_frame_decode(unk, sizeof unk, &f), 0);
    assert_int_equal(f.body, RELAY_BODY_DATA);
    assert_int_equal(f.payload_len, 1);
    assert_int_equal(f.payload[0], 0xaa);

    /* The last value of a repeated scalar or string wins. */
    assert_int_equal(relay_frame_decode(BYTES(0x08, 0x05, 0x08, 0x01, 0x12, 0x01, 0x61, 0x12, 0x02,
                                              0x73, 0x31, 0x32, 0x00),
                                        &f),
                     0);
    assert_int_equal(f.stream_id.len, 2);
    assert_memory_equal(f.stream_id.ptr, "s1", 2);

    /* uint32 fields keep the low 32 bits of a wider varint (2^32 + 1 -> 1). */
    assert_int_equal(
        relay_frame_decode(
            BYTES(0x08, 0x81, 0x80, 0x80, 0x80, 0x10, 0x12, 0x02, 0x73, 0x31, 0x32, 0x00), &f),
        0);
    assert_int_equal(f.version, 1);

    /* Two occurrences of the data member merge: seq from the first, the rest later. */
    assert_int_equal(relay_frame_decode(BYTES(0x08, 0x01, 0x12, 0x02, 0x73, 0x31, 0x2a, 0x02, 0x08,
                                              0x07, 0x2a, 0x05, 0x18, 0x01, 0x22, 0x01, 0xbb),
                                        &f),
                     0);
    assert_int_equal(f.body, RELAY_BODY_DATA);
    assert_int_equal(f.seq, 7);
    assert_int_equal(f.payload[0], 0xbb);

    /* Another member replaces the body, and switching back starts from defaults: the
     * data's segment_count does not survive a resume in between. */
    assert_int_equal(relay_frame_decode(BYTES(0x08, 0x01, 0x12, 0x02, 0x73, 0x31, 0x2a, 0x05, 0x18,
                                              0x01, 0x22, 0x01, 0xaa, 0x3a, 0x02, 0x08, 0x04),
                                        &f),
                     0);
    assert_int_equal(f.body, RELAY_BODY_RESUME);
    assert_int_equal(f.next_seq, 4);
    assert_int_equal(f.payload_len, 0);
    assert_int_equal(
        relay_frame_decode(BYTES(0x08, 0x01, 0x12, 0x02, 0x73, 0x31, 0x2a, 0x05, 0x18, 0x01, 0x22,
                                 0x01, 0xaa, 0x3a, 0x00, 0x2a, 0x03, 0x22, 0x01, 0xaa),
                           &f),
        RELAY_E_DATA);

    /* Body members without fields ignore what they carry. */
    assert_int_equal(
        relay_frame_decode(BYTES(0x08, 0x01, 0x12, 0x02, 0x73, 0x31, 0x4a, 0x02, 0x08, 0x01), &f),
        0);
    assert_int_equal(f.body, RELAY_BODY_HEARTBEAT);
}

#ifdef EXEC_HAVE_PROTOBUF_C
typedef Codex__ExecServer__Relay__V1__RelayMessageFrame PbFrame;

/* protoc-c packs f; our encoder must produce the very same bytes, and protoc-c must
 * read ours back to the same fields. */
static void oracle_check(const struct relay_frame *f)
{
    Codex__ExecServer__Relay__V1__RelayData data = CODEX__EXEC_SERVER__RELAY__V1__RELAY_DATA__INIT;
    Codex__ExecServer__Relay__V1__RelayAck ack = CODEX__EXEC_SERVER__RELAY__V1__RELAY_ACK__INIT;
    Codex__ExecServer__Relay__V1__RelayResume resume =
        CODEX__EXEC_SERVER__RELAY__V1__RELAY_RESUME__INIT;
    Codex__ExecServer__Relay__V1__RelayReset reset =
        CODEX__EXEC_SERVER__RELAY__V1__RELAY_RESET__INIT;
    Codex__ExecServer__Relay__V1__RelayHeartbeat hb =
        CODEX__EXEC_SERVER__RELAY__V1__RELAY_HEARTBEAT__INIT;
    Codex__ExecServer__Relay__V1__RelayHandshake hs =
        CODEX__EXEC_SERVER__RELAY__V1__RELAY_HANDSHAKE__INIT;
    PbFrame m = CODEX__EXEC_SERVER__RELAY__V1__RELAY_MESSAGE_FRAME__INIT;
    char sid[64], reason[64], tp[64], ts[64];
    snprintf(sid, sizeof sid, "%.*s", (int)f->stream_id.len, f->stream_id.ptr);
    snprintf(reason, sizeof reason, "%.*s", (int)f->reason.len, f->reason.ptr ? f->reason.ptr : "");
    snprintf(tp, sizeof tp, "%.*s", (int)f->traceparent.len,
             f->traceparent.ptr ? f->traceparent.ptr : "");
    snprintf(ts, sizeof ts, "%.*s", (int)f->tracestate.len,
             f->tracestate.ptr ? f->tracestate.ptr : "");
    m.version = f->version;
    m.stream_id = sid;
    m.ack = f->ack;
    m.ack_bits = f->ack_bits;
    m.traceparent = tp;
    m.tracestate = ts;
    switch (f->body) {
    case RELAY_BODY_DATA:
        data.seq = f->seq;
        data.segment_count = 1;
        data.payload.data = (uint8_t *)f->payload;
        data.payload.len = f->payload_len;
        m.body_case = CODEX__EXEC_SERVER__RELAY__V1__RELAY_MESSAGE_FRAME__BODY_DATA;
        m.data = &data;
        break;
    case RELAY_BODY_ACK:
        m.body_case = CODEX__EXEC_SERVER__RELAY__V1__RELAY_MESSAGE_FRAME__BODY_ACK_FRAME;
        m.ack_frame = &ack;
        break;
    case RELAY_BODY_RESUME:
        resume.next_seq = f->next_seq;
        m.body_case = CODEX__EXEC_SERVER__RELAY__V1__RELAY_MESSAGE_FRAME__BODY_RESUME;
        m.resume = &resume;
        break;
    case RELAY_BODY_RESET:
        reset.reason = reason;
        m.body_case = CODEX__EXEC_SERVER__RELAY__V1__RELAY_MESSAGE_FRAME__BODY_RESET;
        m.reset = &reset;
        break;
    case RELAY_BODY_HEARTBEAT:
        m.body_case = CODEX__EXEC_SERVER__RELAY__V1__RELAY_MESSAGE_FRAME__BODY_HEARTBEAT;
        m.heartbeat = &hb;
        break;
    default:
        hs.payload.data = (uint8_t *)f->payload;
        hs.payload.len = f->payload_len;
        m.body_case = CODEX__EXEC_SERVER__RELAY__V1__RELAY_MESSAGE_FRAME__BODY_HANDSHAKE;
        m.handshake = &hs;
        break;
    }
    size_t plen = codex__exec_server__relay__v1__relay_message_frame__get_packed_size(&m);
    uint8_t *theirs = malloc(plen);
    codex__exec_server__relay__v1__relay_message_frame__pack(&m, theirs);
    uint8_t ours[512];
    size_t olen = 0;
    assert_int_equal(relay_frame_encode(f, ours, sizeof ours, &olen), 0);
    assert_int_equal(olen, plen);
    assert_memory_equal(ours, theirs, plen);
    free(theirs);

    PbFrame *u = codex__exec_server__relay__v1__relay_message_frame__unpack(NULL, olen, ours);
    assert_non_null(u);
    assert_int_equal(u->version, f->version);
    assert_string_equal(u->stream_id, sid);
    assert_int_equal(u->body_case, CODEX__EXEC_SERVER__RELAY__V1__RELAY_MESSAGE_FRAME__BODY_DATA +
                                       (f->body - RELAY_BODY_DATA));
    if (f->body == RELAY_BODY_DATA) {
        assert_int_equal(u->data->seq, f->seq);
        assert_int_equal(u->data->segment_index, 0);
        assert_int_equal(u->data->segment_count, 1);
        assert_int_equal(u->data->payload.len, f->payload_len);
        assert_memory_equal(u->data->payload.data, f->payload, f->payload_len);
    }
    assert_string_equal(u->traceparent, tp);
    codex__exec_server__relay__v1__relay_message_frame__free_unpacked(u, NULL);
}

static void test_protobuf_c_oracle(void **state)
{
    static const uint8_t pl[300] = {1, 2, 3};
    struct relay_frame f = base(RELAY_BODY_RESUME);
    oracle_check(&f);
    f.next_seq = 70000;
    oracle_check(&f);
    f = base(RELAY_BODY_ACK);
    f.ack = 5;
    f.ack_bits = 0xffffffffu;
    oracle_check(&f);
    f = base(RELAY_BODY_HEARTBEAT);
    oracle_check(&f);
    f = base(RELAY_BODY_RESET);
    f.reason = S("noise_relay_protocol_error");
    oracle_check(&f);
    f = base(RELAY_BODY_HANDSHAKE);
    f.payload = pl;
    f.payload_len = sizeof pl;
    oracle_check(&f);
    f = base(RELAY_BODY_DATA);
    f.stream_id = S("9b2f1c1e-4a55-4f6e-8d3c-2f0e6c1b7a90");
    f.seq = 1u << 31;
    f.payload = pl;
    f.payload_len = 200;
    f.traceparent = S("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01");
    f.tracestate = S("congo=t61rcWkgMzE");
    oracle_check(&f);
}
#endif

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_resume_example),
        cmocka_unit_test(test_data_with_traceparent_example),
        cmocka_unit_test(test_reset_example),
        cmocka_unit_test(test_empty_members_emitted),
        cmocka_unit_test(test_other_shapes),
        cmocka_unit_test(test_size_cap),
        cmocka_unit_test(test_encode_errors),
        cmocka_unit_test(test_encode_head),
        cmocka_unit_test(test_decode_rules),
        cmocka_unit_test(test_decode_malformed),
        cmocka_unit_test(test_decode_prost_semantics),
#ifdef EXEC_HAVE_PROTOBUF_C
        cmocka_unit_test(test_protobuf_c_oracle),
#endif
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
