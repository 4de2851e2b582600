/* libFuzzer target for proto/relay_frame: arbitrary bytes as a RelayMessageFrame.
 *
 * Properties: decoding never reads outside the input and never crashes; whatever
 * decodes re-encodes without error, the re-encoding decodes to the same frame, and
 * encoding that again gives the same bytes (the canonical form is a fixed point).
 * With protobuf-c available (the build links protoc-c's code for relay_v1.proto),
 * every input both decoders accept must agree field by field; protobuf-c is more
 * lenient (it checks no UTF-8 and none of the REMOTE.md 2.2 rules), and stricter
 * only about groups, which it does not support, so only agreement is demanded. On
 * the raw input the body's contents are not compared: when the same body member
 * occurs twice, protobuf-c keeps the last one while prost (the peer) and we merge
 * them, as prost-derive's oneof code does. Our canonical re-encoding has one member,
 * so there the body is compared too. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proto/relay_frame.h"

#ifdef EXEC_HAVE_PROTOBUF_C
#include "relay_v1.pb-c.h"
#endif

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(int cond, const char *what)
{
    if (!cond) {
        fprintf(stderr, "fuzz_relay_frame: %s\n", what);
        abort();
    }
}

static int str_eq(struct relay_str a, struct relay_str b)
{
    return (a.ptr == NULL) == (b.ptr == NULL) && a.len == b.len &&
           (a.len == 0 || memcmp(a.ptr, b.ptr, a.len) == 0);
}

static int frame_eq(const struct relay_frame *a, const struct relay_frame *b)
{
    return a->version == b->version && str_eq(a->stream_id, b->stream_id) && a->ack == b->ack &&
           a->ack_bits == b->ack_bits && a->body == b->body && a->seq == b->seq &&
           a->next_seq == b->next_seq && a->payload_len == b->payload_len &&
           (a->payload_len == 0 || memcmp(a->payload, b->payload, a->payload_len) == 0) &&
           str_eq(a->reason, b->reason) && str_eq(a->traceparent, b->traceparent) &&
           str_eq(a->tracestate, b->tracestate);
}

#ifdef EXEC_HAVE_PROTOBUF_C
/* protobuf-c's NUL-terminated copy against our (ptr, len); an absent field of ours is
 * protobuf-c's empty string (the oracle schema has no `optional`). */
static int pb_str_eq(const char *theirs, struct relay_str ours)
{
    size_t n = strlen(theirs); /* stops at an embedded NUL, which UTF-8 allows */
    if (n > ours.len || (n && memcmp(theirs, ours.ptr, n) != 0)) return 0;
    return n == ours.len || ours.ptr[n] == '\0';
}

static void oracle(const uint8_t *data, size_t size, const struct relay_frame *f, int body)
{
    Codex__ExecServer__Relay__V1__RelayMessageFrame *m =
        codex__exec_server__relay__v1__relay_message_frame__unpack(NULL, size, data);
    if (!m) return; /* e.g. a skipped group, which protobuf-c cannot parse */
    check(m->version == f->version, "oracle: version");
    check(pb_str_eq(m->stream_id, f->stream_id), "oracle: stream_id");
    check(m->ack == f->ack && m->ack_bits == f->ack_bits, "oracle: ack");
    check((int)m->body_case == 5 + (int)(f->body - RELAY_BODY_DATA), "oracle: body case");
    switch (body ? f->body : RELAY_BODY_NONE) {
    case RELAY_BODY_DATA:
        check(m->data->seq == f->seq && m->data->segment_index == 0 &&
                  m->data->segment_count == 1 && m->data->payload.len == f->payload_len &&
                  memcmp(m->data->payload.data, f->payload, f->payload_len) == 0,
              "oracle: data");
        break;
    case RELAY_BODY_RESUME: check(m->resume->next_seq == f->next_seq, "oracle: next_seq"); break;
    case RELAY_BODY_RESET: check(pb_str_eq(m->reset->reason, f->reason), "oracle: reason"); break;
    case RELAY_BODY_HANDSHAKE:
        check(m->handshake->payload.len == f->payload_len &&
                  memcmp(m->handshake->payload.data, f->payload, f->payload_len) == 0,
              "oracle: handshake");
        break;
    default: break;
    }
    check(pb_str_eq(m->traceparent, f->traceparent), "oracle: traceparent");
    check(pb_str_eq(m->tracestate, f->tracestate), "oracle: tracestate");
    codex__exec_server__relay__v1__relay_message_frame__free_unpacked(m, NULL);
}
#endif

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* A private copy, exactly sized, so ASan sees any read past the end. */
    uint8_t *in = malloc(size ? size : 1);
    if (size) memcpy(in, data, size);
    struct relay_frame f;
    int rc = relay_frame_decode(in, size, &f);
    if (rc != 0) {
        check(rc < 0 && strcmp(relay_strerror(rc), "unknown relay error") != 0,
              "decode: unknown error code");
        free(in);
        return 0;
    }
    check(relay_frame_check(&f) == 0, "decoded frame fails relay_frame_check");

    uint8_t *out = NULL;
    size_t olen = 0;
    check(relay_frame_encode_alloc(&f, &out, &olen) == 0, "re-encode failed");
    check(olen == relay_frame_encoded_len(&f), "encoded_len disagrees with encode");
    struct relay_frame g;
    check(relay_frame_decode(out, olen, &g) == 0, "decode of re-encoding failed");
    check(frame_eq(&f, &g), "decode(encode(frame)) differs");
    uint8_t *again = NULL;
    size_t alen = 0;
    check(relay_frame_encode_alloc(&g, &again, &alen) == 0, "second encode failed");
    check(alen == olen && memcmp(again, out, olen) == 0, "canonical form is not a fixed point");
#ifdef EXEC_HAVE_PROTOBUF_C
    oracle(in, size, &f, 0);
    oracle(out, olen, &g, 1);
#endif
    free(again);
    free(out);
    free(in);
    return 0;
}
