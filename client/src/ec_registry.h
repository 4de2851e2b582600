/* ec_registry: the harness's /connect call to the environment registry, the connect
 * bundle it returns, and the retry policy of REMOTE.md §4.5. Not installed. */
#ifndef EC_REGISTRY_H
#define EC_REGISTRY_H

#include "ec_internal.h"

#include "crypto/noise_ik.h"

#define EC_SECURITY_PROFILE "noise_hybrid_ik_v1"

/* One physical connection's credentials, single use. Strings owned (ec_bundle_clear). */
struct ec_bundle {
    char *url;                               /* rendezvous ws(s) URL, role=harness, signed */
    char *registration_id;                   /* executor_registration_id (prologue) */
    char *authorization;                     /* harness_key_authorization (msg-1 payload) */
    struct noise_ik_public_key executor_key; /* the key to pin */
};

struct ec_registry_req {
    const char *base_url;       /* --remote value (http:// or https://) */
    const char *environment_id; /* path segment; percent-encoded here */
    const char *bearer_token;   /* Authorization: Bearer, or NULL */
    const char *ca_file;        /* https trust, or NULL: the system store */
};

/* POST {base}/cloud/environment/{env}/connect {"harness_public_key": harness_key}
 * (borrowed) with §4.5's retries of transient failures, within 14 s and the caller's
 * deadline. On success *out holds a checked bundle (caller clears it). A refusal fails
 * with code = the HTTP status: EC_ERR_TRANSPORT for 401/403, EC_ERR_SERVER otherwise. */
int ec_registry_connect(const struct ec_registry_req *rq, const json_t *harness_key,
                        int64_t deadline, struct ec_bundle *out, ec_error *err);

/* Pure pieces, exposed for the unit tests. */
/* A /connect answer body -> bundle, with §4.1's checks (environment id equal to the
 * requested one, the security profile, non-blank url / registration / authorization,
 * a strictly valid executor key). */
int ec_bundle_parse(const char *body, size_t len, const char *environment_id, struct ec_bundle *out,
                    ec_error *err);
void ec_bundle_clear(struct ec_bundle *b);
/* Whether a failed attempt may be retried: no answer (http_status 0), 5xx, 408, 429,
 * or 409 with error code environment_offline. */
bool ec_registry_transient(int http_status, const char *error_code);
/* Delay before retry number attempt+1: 500 ms * 2^min(attempt, 4), capped at 5 s,
 * plus a deterministic jitter of up to +50 %. */
int ec_registry_backoff_ms(unsigned attempt);

#endif
