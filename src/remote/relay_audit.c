/* relay_audit: the login record of a harness that reached this executor through the
 * rendezvous relay (audit/audit.h, docs/AUDIT.md): its stream (the connection's peer
 * name, "relay:<stream>"), the registration it came for, the fingerprint of its
 * Noise static key (the SHA-256 of the key's raw bytes, the digest the registry's
 * own records carry) and the registry's verdict. Never its authorization. */
#include "remote/relay_audit.h"

#include <openssl/sha.h>
#include <stdio.h>
#include <string.h>

#include "audit/audit.h"
#include "proto/hex.h"

void relay_audit_login(const char *stream_id, const char *registration,
                       const struct noise_ik_public_key *key, enum registry_verdict verdict)
{
    struct buf *b = audit_begin("login");
    if (!b) return;
    char peer[64], hex[2 * SHA256_DIGEST_LENGTH + 1];
    unsigned char raw[sizeof key->x25519 + sizeof key->mlkem], digest[SHA256_DIGEST_LENGTH];
    memcpy(raw, key->x25519, sizeof key->x25519);
    memcpy(raw + sizeof key->x25519, key->mlkem, sizeof key->mlkem);
    SHA256(raw, sizeof raw, digest);
    hex_encode(digest, sizeof digest, hex);
    snprintf(peer, sizeof peer, "relay:%.40s", stream_id); /* as relay_conn names it */
    audit_put_str(b, "result", verdict == REGISTRY_VALID ? "ok" : "refused");
    audit_put_str(b, "transport", "relay");
    audit_put_str(b, "peer", peer);
    audit_put_str(b, "registration", registration);
    audit_put_str(b, "harnessKey", hex);
    if (verdict != REGISTRY_VALID)
        audit_put_str(b, "reason",
                      verdict == REGISTRY_CREDENTIALS_REJECTED
                          ? "executor credentials rejected by the registry"
                          : "authorization rejected by the registry");
    audit_commit(b);
}
