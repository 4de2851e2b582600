/* libFuzzer target for remote/relay_demux: the executor's stream table fed whatever a
 * rendezvous peer sends, with the registry's answers interleaved.
 *
 * The input is a script of steps. Each step starts with an op byte:
 *   0 LEN_HI LEN_LO BYTES  one binary WebSocket message (a relay frame, or not)
 *   1                      the oldest pending validation answers {"valid": true}
 *   2                      the oldest pending validation answers false
 *   4                      the oldest pending validation answers 401 (our credentials
 *                          rejected: msg 2 carries the rejection)
 *   3 N                    a genuine msg 1 (built at start-up with fixed keys) for
 *                          stream "s<N % 4>", so validation and live streams are reached
 * Invariants checked after every step: live <= 128, pending <= 32, handshakes paused
 * only after 8 failures. At the end the demux is freed and
 * the loop turned so every stream's connection closes (ASan/LSan see the rest). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

#include "crypto/noise_ik.h"
#include "proto/relay_frame.h"
#include "remote/relay_demux.h"
#include "rpc/dispatch.h"
#include "server/server_methods.h"
#include "remote/relay_conn.h"

#define MAXV 64

static struct noise_ik_static_key exec_key, harness_key;
static uint8_t *genuine[4];
static size_t genuine_len[4];

static registry_validate_cb vcb[MAXV];
static void *varg[MAXV];
static struct registry_call *vcall[MAXV];
static int nv;
static uintptr_t next_call = 1;

static int f_send(void *arg, const uint8_t *p, size_t n, rv_ws_sent_fn done, void *done_arg)
{
    struct relay_frame f;
    if (relay_frame_decode(p, n, &f) != 0) abort(); /* we must only send valid frames */
    if (done) done(done_arg, n, 0);
    return 0;
}

static struct registry_call *f_validate(void *arg, const char *sid, const char *key,
                                        const char *auth, registry_validate_cb cb, void *cb_arg)
{
    if (nv == MAXV) return NULL;
    vcb[nv] = cb;
    varg[nv] = cb_arg;
    vcall[nv] = (struct registry_call *)next_call++;
    return vcall[nv++];
}

static void f_cancel(void *arg, struct registry_call *call)
{
    for (int i = 0; i < nv; i++) {
        if (vcall[i] == call) {
            memmove(&vcb[i], &vcb[i + 1], (size_t)(nv - i - 1) * sizeof vcb[0]);
            memmove(&varg[i], &varg[i + 1], (size_t)(nv - i - 1) * sizeof varg[0]);
            memmove(&vcall[i], &vcall[i + 1], (size_t)(nv - i - 1) * sizeof vcall[0]);
            nv--;
            return;
        }
    }
    abort(); /* cancelling a call that is not pending */
}

static const struct relay_demux_ops ops = {
    .send = f_send, .validate = f_validate, .cancel = f_cancel};

static int det_rng(void *ctx, uint8_t *out, size_t n)
{
    uint8_t *c = ctx;
    for (size_t i = 0; i < n; i++)
        out[i] = (uint8_t)(*c += 0x9d);
    return 0;
}

static struct relay_conn_kind serve_kind; /* streams served by rpc_dispatch */

static void init_once(void)
{
    static int done;
    if (done) return;
    done = 1;
    rpc_dry_run = true; /* a request that gets through is answered without running */
    server_methods_register();
    relay_conn_kind_init(&serve_kind, rpc_dispatch);
    uint8_t seed = 1;
    noise_ik_static_key_generate(&exec_key, det_rng, &seed);
    noise_ik_static_key_generate(&harness_key, det_rng, &seed);
    for (int i = 0; i < 4; i++) {
        char sid[4] = {'s', (char)('0' + i), 0};
        size_t plen;
        uint8_t *pro = noise_ik_prologue("env", "reg", sid, &plen);
        struct noise_ik_handshake *hs;
        noise_ik_initiator_new(&hs, &harness_key, &exec_key.pub, pro, plen, det_rng, &seed);
        free(pro);
        uint8_t m1[NOISE_IK_MSG1_OVERHEAD + 8];
        size_t n;
        noise_ik_write_message1(hs, (const uint8_t *)"hka-auth", 8, m1, sizeof m1, &n);
        noise_ik_handshake_free(hs);
        struct relay_frame f = {.version = 1,
                                .stream_id = {sid, 2},
                                .body = RELAY_BODY_HANDSHAKE,
                                .payload = m1,
                                .payload_len = n};
        relay_frame_encode_alloc(&f, &genuine[i], &genuine_len[i]);
    }
}

static void answer(enum registry_verdict valid)
{
    if (nv == 0) return;
    registry_validate_cb cb = vcb[0];
    void *a = varg[0];
    memmove(&vcb[0], &vcb[1], (size_t)(nv - 1) * sizeof vcb[0]);
    memmove(&varg[0], &varg[1], (size_t)(nv - 1) * sizeof varg[0]);
    memmove(&vcall[0], &vcall[1], (size_t)(nv - 1) * sizeof vcall[0]);
    nv--;
    cb(a, valid);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    init_once();
    nv = 0;
    struct relay_demux *d =
        relay_demux_new(uv_default_loop(), &exec_key, "env", "reg", &ops, NULL, &serve_kind.base);
    size_t i = 0;
    while (i < size) {
        uint8_t op = data[i++];
        switch (op % 5) {
        case 0: {
            if (i + 2 > size) goto out;
            size_t n = (size_t)data[i] << 8 | data[i + 1];
            i += 2;
            if (n > size - i) n = size - i;
            relay_demux_on_message(d, data + i, n);
            i += n;
            break;
        }
        case 1: answer(REGISTRY_VALID); break;
        case 2: answer(REGISTRY_INVALID); break;
        case 3:
            if (i >= size) goto out;
            relay_demux_on_message(d, genuine[data[i] % 4], genuine_len[data[i] % 4]);
            i++;
            break;
        case 4: answer(REGISTRY_CREDENTIALS_REJECTED); break;
        }
        if (relay_demux_live(d) > RELAY_MAX_LIVE_STREAMS ||
            relay_demux_pending(d) > RELAY_MAX_PENDING_STREAMS ||
            (relay_demux_paused(d) && relay_demux_failures(d) < RELAY_MAX_FAILED_HANDSHAKES))
            abort();
    }
out:
    relay_demux_free(d);
    if (nv != 0) abort(); /* every pending validation was cancelled */
    uv_run(uv_default_loop(), UV_RUN_NOWAIT);
    return 0;
}
