/* fleet_api: the registry's three HTTP endpoints, as codex calls them (docs/REMOTE.md
 * §4.1, docs/FLEET.md):
 *
 *   POST /cloud/environment/{id}/register  executor token; {security_profile,
 *        executor_public_key} -> {environment_id, url (role=environment, signed),
 *        security_profile, executor_registration_id}
 *   POST /cloud/environment/{id}/connect   harness token; {harness_public_key} ->
 *        {environment_id, url (role=harness, signed, single use, on the node that holds
 *        the executor), security_profile, executor_registration_id,
 *        executor_public_key, harness_key_authorization}; 409 environment_offline
 *        while no live node holds the executor; 429 past the token's rate
 *   POST /cloud/environment/{id}/validate  executor token; {executor_registration_id,
 *        harness_public_key, harness_key_authorization} -> {valid}
 *
 * Errors are {"error":{"code":..,"message":..}}: 400 bad_request, 401 unauthorized
 * (no, unknown, revoked or expired token), 403 forbidden (another environment's or
 * role's token; too_many_environments), 404, 405, 409 environment_offline, 429
 * rate_limited / too_many_pending_bundles, 503 database_unavailable. Request bodies
 * are checked on the loop (they are small); the token and state checks run as one
 * database job each (fleet_worker). Every registration, connect and refusal is a log
 * line (notice); no token, signature, authorization or key is ever logged. */
#ifndef EXEC_FLEET_API_H
#define EXEC_FLEET_API_H

#include <stddef.h>
#include <uv.h>

#include "fleet/fleet_http.h"

enum fleet_api_endpoint { FLEET_API_REGISTER, FLEET_API_CONNECT, FLEET_API_VALIDATE };

void fleet_api_init(void);
void fleet_api_cleanup(void);
/* Handles a request for environment env (env_len bytes, from the path, not yet
 * checked) at endpoint. Answers now or after a database job. */
void fleet_api_handle(struct fleet_conn *c, const struct fleet_request *req, const char *env,
                      size_t env_len, enum fleet_api_endpoint endpoint);

/* Logs and counts a refusal and answers it: the one path every refusal of a request
 * takes (the relay's upgrades use it too). env and token_id may be "". */
void fleet_api_refuse(struct fleet_conn *c, const char *what, const char *env, const char *token_id,
                      int status, const char *code, const char *reason, const char *message);

/* The Authorization header's bearer token, or NULL (len 0) when there is none. */
const char *fleet_api_bearer(const struct fleet_request *req, size_t *len);

#endif
