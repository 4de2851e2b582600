/* relay_audit: a harness's login through the rendezvous relay, as an audit record
 * (see relay_audit.c). Loop thread. */
#ifndef EXEC_REMOTE_RELAY_AUDIT_H
#define EXEC_REMOTE_RELAY_AUDIT_H

#include "crypto/noise_ik.h"
#include "remote/registry.h"

/* The login record of the harness on stream_id whose static key is key, as the
 * registry (registration) judged its authorization. */
void relay_audit_login(const char *stream_id, const char *registration,
                       const struct noise_ik_public_key *key, enum registry_verdict verdict);

#endif
