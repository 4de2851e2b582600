/* libFuzzer target for crypto/noise_ik on the executor's side: every byte a harness
 * (or anyone who reaches the rendezvous) sends before and after authentication.
 *
 * Fixed identities and a deterministic handshake are built once. The first input
 * byte picks what the rest is:
 *   0: a msg 1 for a fresh responder. Only the two genuine msg 1s built at start-up
 *      may read successfully (then msg 2 is written too); anything else must fail,
 *      since every byte of msg 1 is bound by a tag under keys the fuzzer lacks.
 *   1: one transport record for the established responder. Only the next genuine
 *      record may decrypt; a failure must not advance the stream, which the next
 *      genuine record proves.
 *   2: a msg 2 for an initiator that just sent msg 1 (the harness side of the same
 *      parser). Only the genuine msg 2 may complete the handshake.
 * Set NOISE_FUZZ_SEED_DIR to have the start-up write the genuine inputs there as
 * seeds (how tests/fuzz/corpus/noise_responder/ was made). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "crypto/noise_ik.h"

#define NRECORDS 3

/* splitmix64: deterministic bytes; the fuzz target needs repeatability, not secrecy. */
static int det_rng(void *ctx, uint8_t *out, size_t n)
{
    uint64_t *s = ctx;
    for (size_t i = 0; i < n; i++) {
        if (i % 8 == 0) {
            uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);
            z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
            z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
            s[1] = z ^ (z >> 31);
        }
        out[i] = (uint8_t)(s[1] >> (8 * (i % 8)));
    }
    return 0;
}

static const char *PAYLOADS[2] = {"fuzz-harness-key-authorization", ""};

static struct noise_ik_static_key ikey, rkey;
static uint8_t *prologue;
static size_t prologue_len;
static uint8_t msg1[2][NOISE_IK_MSG1_OVERHEAD + 64];
static size_t msg1_len[2];
static uint8_t msg2[NOISE_IK_MSG2_BYTES];
static uint8_t records[NRECORDS][64];
static size_t record_len[NRECORDS];
static struct noise_ik_transport *rt; /* responder transport under test */
static int next_record;               /* index of the record rt expects */

static void check(int ok, const char *what)
{
    if (!ok) {
        fprintf(stderr, "fuzz_noise_responder: %s\n", what);
        abort();
    }
}

/* The initiator side of the fixed handshake, up to msg 1 (payload p). */
static struct noise_ik_handshake *initiator_after_msg1(int p, uint8_t *out, size_t *len)
{
    static uint64_t seed[2];
    struct noise_ik_handshake *ini;
    seed[0] = 0x1000;
    check(noise_ik_initiator_new(&ini, &ikey, &rkey.pub, prologue, prologue_len, det_rng, seed) ==
              0,
          "initiator_new");
    check(noise_ik_write_message1(ini, (const uint8_t *)PAYLOADS[p], strlen(PAYLOADS[p]), out,
                                  NOISE_IK_MSG1_OVERHEAD + 64, len) == 0,
          "write msg 1");
    return ini;
}

static struct noise_ik_handshake *responder(void)
{
    static uint64_t seed[2];
    struct noise_ik_handshake *res;
    seed[0] = 0x2000;
    check(noise_ik_responder_new(&res, &rkey, prologue, prologue_len, det_rng, seed) == 0,
          "responder_new");
    return res;
}

/* A fresh responder transport at record 0 (and the genuine records it expects). */
static void establish(void)
{
    struct noise_ik_handshake *ini = initiator_after_msg1(0, msg1[0], &msg1_len[0]);
    struct noise_ik_handshake *res = responder();
    struct noise_ik_transport *it;
    check(noise_ik_read_message1(res, msg1[0], msg1_len[0], NULL, NULL) == 0, "read msg 1");
    check(noise_ik_write_message2(res, msg2) == 0, "write msg 2");
    check(noise_ik_read_message2(ini, msg2, sizeof msg2) == 0, "read msg 2");
    check(noise_ik_transport_new(ini, &it) == 0 && noise_ik_transport_new(res, &rt) == 0, "split");
    for (int i = 0; i < NRECORDS; i++) {
        char pt[32];
        int n = snprintf(pt, sizeof pt, "{\"record\":%d}", i);
        check(noise_ik_transport_encrypt(it, (const uint8_t *)pt, (size_t)n, records[i],
                                         sizeof records[i], &record_len[i]) == 0,
              "encrypt");
    }
    next_record = 0;
    noise_ik_transport_free(it);
    noise_ik_handshake_free(ini);
    noise_ik_handshake_free(res);
}

static void write_seed(const char *dir, const char *name, uint8_t mode, const uint8_t *p, size_t n)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    if (!f) return;
    fputc(mode, f);
    fwrite(p, 1, n, f);
    fclose(f);
}

static void init(void)
{
    uint64_t si[2] = {0x11}, sr[2] = {0x22};
    check(noise_ik_static_key_generate(&ikey, det_rng, si) == 0, "initiator key");
    check(noise_ik_static_key_generate(&rkey, det_rng, sr) == 0, "responder key");
    prologue = noise_ik_prologue("env-fuzz", "registration-fuzz", "stream-fuzz", &prologue_len);
    establish();
    noise_ik_handshake_free(initiator_after_msg1(1, msg1[1], &msg1_len[1]));
    const char *dir = getenv("NOISE_FUZZ_SEED_DIR");
    if (dir) {
        write_seed(dir, "msg1_auth", 0, msg1[0], msg1_len[0]);
        write_seed(dir, "msg1_empty", 0, msg1[1], msg1_len[1]);
        write_seed(dir, "record0", 1, records[0], record_len[0]);
        write_seed(dir, "msg2", 2, msg2, sizeof msg2);
    }
}

static int equals(const uint8_t *a, size_t an, const uint8_t *b, size_t bn)
{
    return an == bn && memcmp(a, b, an) == 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static int inited;
    if (!inited) {
        init();
        inited = 1;
    }
    if (size == 0) return 0;
    const uint8_t *in = data + 1;
    size_t n = size - 1;
    switch (data[0] % 3) {
    case 0: {
        struct noise_ik_handshake *res = responder();
        const uint8_t *payload;
        size_t plen;
        if (noise_ik_read_message1(res, in, n, &payload, &plen) == 0) {
            int which = equals(in, n, msg1[0], msg1_len[0]) ? 0 : 1;
            check(equals(in, n, msg1[which], msg1_len[which]), "accepted a forged msg 1");
            check(equals(payload, plen, (const uint8_t *)PAYLOADS[which], strlen(PAYLOADS[which])),
                  "wrong msg-1 payload");
            uint8_t out[NOISE_IK_MSG2_BYTES];
            check(noise_ik_write_message2(res, out) == 0, "write msg 2");
        } else {
            check(noise_ik_remote_static(res) == NULL, "failed msg 1 left a remote key");
        }
        noise_ik_handshake_free(res);
        break;
    }
    case 1: {
        static uint8_t out[NOISE_IK_MAX_MESSAGE];
        size_t olen;
        if (noise_ik_transport_decrypt(rt, in, n, out, sizeof out, &olen) == 0) {
            check(equals(in, n, records[next_record], record_len[next_record]),
                  "accepted a forged record");
            next_record++;
        } else {
            /* The stream did not move: the genuine record still opens. */
            check(noise_ik_transport_decrypt(rt, records[next_record], record_len[next_record], out,
                                             sizeof out, &olen) == 0,
                  "a failed record desynchronised the stream");
            next_record++;
        }
        if (next_record == NRECORDS) {
            noise_ik_transport_free(rt);
            establish();
        }
        break;
    }
    default: {
        uint8_t m1[NOISE_IK_MSG1_OVERHEAD + 64];
        size_t m1len;
        struct noise_ik_handshake *ini = initiator_after_msg1(0, m1, &m1len);
        if (noise_ik_read_message2(ini, in, n) == 0)
            check(equals(in, n, msg2, sizeof msg2), "accepted a forged msg 2");
        else
            check(!noise_ik_handshake_complete(ini), "failed msg 2 completed the handshake");
        noise_ik_handshake_free(ini);
        break;
    }
    }
    return 0;
}
