/* noise-ik-peer: one side of a Noise hybrid-IK session over stdin/stdout, for the
 * live cross-handshake test against the JavaScript model
 * (tests/blackbox/test_noise_ik_oracle.py). Test tool, not installed.
 *
 *   noise-ik-peer initiator|responder
 *
 * Speaks the line protocol of tests/oracle/noise_ik_oracle.mjs's `peer` mode, bytes
 * as hex, with a fresh random static identity:
 *   responder: prints "PUB <json>"; "MSG1 <hex>" -> "REMOTE <json>", "PAYLOAD <hex>",
 *              "MSG2 <hex>".
 *   initiator: "PEER <json>" -> "PUB <json>", "MSG1 <hex>"; "MSG2 <hex>" -> "OK".
 *   after the handshake: "SEND <hex>" -> "REC <hex>"; "REC <hex>" -> "PT <hex>".
 *   any failure -> "ERR <errno>"; the process keeps reading.
 * The prologue comes from NOISE_ENV / NOISE_REG / NOISE_STREAM, the initiator's msg-1
 * payload from NOISE_PAYLOAD. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "crypto/noise_ik.h"
#include "proto/noise_key.h"

static const char *env_or(const char *name, const char *dflt)
{
    const char *v = getenv(name);
    return v ? v : dflt;
}

static void put_hex(const char *tag, const uint8_t *p, size_t n)
{
    printf("%s ", tag);
    for (size_t i = 0; i < n; i++)
        printf("%02x", p[i]);
    printf("\n");
}

/* Decodes hex text into a malloc'd buffer; NULL on odd length or a bad digit. */
static uint8_t *from_hex(const char *s, size_t *n)
{
    size_t len = strlen(s);
    uint8_t *out;
    if (len % 2) return NULL;
    out = malloc(len / 2 + 1);
    for (size_t i = 0; i < len / 2; i++) {
        unsigned v;
        if (sscanf(s + 2 * i, "%2x", &v) != 1) {
            free(out);
            return NULL;
        }
        out[i] = (uint8_t)v;
    }
    *n = len / 2;
    return out;
}

static void put_json(const char *tag, const struct noise_ik_public_key *pub)
{
    json_t *j = noise_ik_public_key_to_json(pub);
    char *text = json_dumps(j, JSON_COMPACT);
    printf("%s %s\n", tag, text);
    free(text);
    json_decref(j);
}

int main(int argc, char **argv)
{
    struct noise_ik_static_key me;
    struct noise_ik_handshake *hs = NULL;
    struct noise_ik_transport *t = NULL;
    size_t prologue_len, cap = 0;
    char *line = NULL;
    int initiator;
    if (argc != 2 || (strcmp(argv[1], "initiator") && strcmp(argv[1], "responder"))) {
        fprintf(stderr, "usage: noise-ik-peer initiator|responder\n");
        return 2;
    }
    initiator = !strcmp(argv[1], "initiator");
    uint8_t *prologue =
        noise_ik_prologue(env_or("NOISE_ENV", "env-1"), env_or("NOISE_REG", "registration-1"),
                          env_or("NOISE_STREAM", "stream-1"), &prologue_len);
    if (noise_ik_static_key_generate(&me, NULL, NULL) < 0) return 1;
    if (!initiator) {
        if (noise_ik_responder_new(&hs, &me, prologue, prologue_len, NULL, NULL) < 0) return 1;
        put_json("PUB", &me.pub);
    }
    fflush(stdout);
    while (getline(&line, &cap, stdin) > 0) {
        char *arg = strchr(line, ' ');
        uint8_t *in = NULL;
        size_t n = 0;
        int rc = 0;
        line[strcspn(line, "\n")] = '\0';
        if (arg)
            *arg++ = '\0';
        else
            arg = line + strlen(line);
        if (!strcmp(line, "PEER") && initiator && !hs) {
            struct noise_ik_public_key peer;
            const char *payload = env_or("NOISE_PAYLOAD", "");
            size_t plen = strlen(payload), mlen;
            uint8_t *msg = malloc(NOISE_IK_MSG1_OVERHEAD + plen);
            if ((rc = noise_ik_public_key_parse(arg, strlen(arg), &peer)) == 0 &&
                (rc = noise_ik_initiator_new(&hs, &me, &peer, prologue, prologue_len, NULL,
                                             NULL)) == 0 &&
                (rc = noise_ik_write_message1(hs, (const uint8_t *)payload, plen, msg,
                                              NOISE_IK_MSG1_OVERHEAD + plen, &mlen)) == 0) {
                put_json("PUB", &me.pub);
                put_hex("MSG1", msg, mlen);
            }
            free(msg);
        } else if (!strcmp(line, "MSG1") && !initiator) {
            const uint8_t *payload;
            size_t plen;
            uint8_t msg2[NOISE_IK_MSG2_BYTES];
            rc = (in = from_hex(arg, &n)) ? 0 : -EINVAL;
            if (rc == 0 && (rc = noise_ik_read_message1(hs, in, n, &payload, &plen)) == 0) {
                /* Here the executor would ask the registry about REMOTE + PAYLOAD. */
                put_json("REMOTE", noise_ik_remote_static(hs));
                put_hex("PAYLOAD", payload, plen);
                if ((rc = noise_ik_write_message2(hs, msg2)) == 0 &&
                    (rc = noise_ik_transport_new(hs, &t)) == 0)
                    put_hex("MSG2", msg2, sizeof msg2);
            }
        } else if (!strcmp(line, "MSG2") && initiator && hs) {
            rc = (in = from_hex(arg, &n)) ? 0 : -EINVAL;
            if (rc == 0 && (rc = noise_ik_read_message2(hs, in, n)) == 0 &&
                (rc = noise_ik_transport_new(hs, &t)) == 0)
                printf("OK\n");
        } else if ((!strcmp(line, "SEND") || !strcmp(line, "REC")) && t) {
            size_t outlen;
            rc = (in = from_hex(arg, &n)) ? 0 : -EINVAL;
            uint8_t *out = malloc(n + NOISE_IK_TAG_BYTES);
            if (rc == 0 && !strcmp(line, "SEND")) {
                if ((rc = noise_ik_transport_encrypt(t, in, n, out, n + NOISE_IK_TAG_BYTES,
                                                     &outlen)) == 0)
                    put_hex("REC", out, outlen);
            } else if (rc == 0) {
                if ((rc = noise_ik_transport_decrypt(t, in, n, out, n, &outlen)) == 0)
                    put_hex("PT", out, outlen);
            }
            free(out);
        } else {
            rc = -EINVAL;
        }
        if (rc < 0) printf("ERR %d\n", rc);
        fflush(stdout);
        free(in);
    }
    free(line);
    free(prologue);
    noise_ik_transport_free(t);
    noise_ik_handshake_free(hs);
    noise_ik_static_key_wipe(&me);
    return 0;
}
