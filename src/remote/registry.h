/* registry: the executor's calls to the environment registry (REMOTE.md §4.1):
 * POST {base}/cloud/environment/{id}/register and .../validate, JSON bodies, over
 * libcurl's multi interface on the loop (outbound/curl_loop.c). No redirects are
 * followed (the auth header must not travel elsewhere), every call carries a
 * fresh W3C traceparent, and neither URLs with signatures, authorizations nor
 * response bodies are logged. The body builders and response parsers are pure
 * functions so the unit tests check the exact JSON. */
#ifndef EXEC_REMOTE_REGISTRY_H
#define EXEC_REMOTE_REGISTRY_H

#include <stdbool.h>
#include <stddef.h>
#include <uv.h>

#define REGISTRY_SECURITY_PROFILE "noise_hybrid_ik_v1"
#define REGISTRY_DIRECT_TRANSPORT "direct_jsonrpc_v1"
#define REGISTRY_VALIDATE_TIMEOUT_MS 10000

struct registry_registration {
    char *environment_id;  /* as returned (equal to the requested one) */
    char *url;             /* rendezvous websocket URL (signed: never log the query) */
    char *registration_id; /* executor_registration_id */
};
void registry_registration_clear(struct registry_registration *r);

/* JSON body of /register: security_profile and executor_public_key (the key
 * object parsed from key_json). Returns a malloc'd string or NULL when key_json is
 * not a JSON object. */
char *registry_register_body(const char *key_json);
/* JSON body of /validate. NULL when harness_key_json is not a JSON object. */
char *registry_validate_body(const char *registration_id, const char *harness_key_json,
                             const char *authorization);
/* Checks a /register response (environment id and security profile must match,
 * url and registration id non-blank) and fills out (caller clears). 0 or -EPROTO
 * with a reason in why (static text). */
int registry_parse_register(const char *body, size_t n, const char *environment_id,
                            struct registry_registration *out, const char **why);
/* Checks a /direct/register response (docs/REMOTE.md §8.6): environment id and
 * transport "direct_jsonrpc_v1" must match, registration_id and url be non-blank,
 * and the url be wss://, or ws:// to a loopback host. Fills out as above. */
int registry_parse_direct_register(const char *body, size_t n, const char *environment_id,
                                   struct registry_registration *out, const char **why);
/* A /validate response: true only for an explicit "valid": true. */
bool registry_parse_validate(const char *body, size_t n);

/* The client: base URL (trailing '/' removed) and the auth header lines sent with
 * every call (e.g. "Authorization: Bearer ..."). */
struct registry_client;
struct registry_client *registry_client_new(uv_loop_t *loop, const char *base_url,
                                            const char *environment_id,
                                            const char *const *auth_headers);
void registry_client_free(struct registry_client *rc);

struct registry_call;

/* result: 0 with reg filled (the callee owns reg and clears it after the call), or
 * a negative code with why (static text, no secrets); http_status 0 when no
 * response arrived. */
typedef void (*registry_register_cb)(void *arg, int result, int http_status,
                                     struct registry_registration *reg, const char *why);
/* Starts /register. Returns the call (cb runs once, asynchronously, unless it is
 * cancelled with registry_call_cancel) or NULL when it could not start. */
struct registry_call *registry_register(struct registry_client *rc, const char *key_json,
                                        registry_register_cb cb, void *arg);

/* Starts POST .../direct/register with {"transport":"direct_jsonrpc_v1"}, signed
 * with SigV4 (key borrowed for the call only) over content-type, host and
 * x-amz-date at the current time. cb as for registry_register (reg.url is the
 * direct WebSocket URL). NULL when it could not start. */
struct sigv4_key;
struct registry_call *registry_direct_register(struct registry_client *rc,
                                               const struct sigv4_key *key, registry_register_cb cb,
                                               void *arg);

/* What /validate said: REGISTRY_VALID only for an explicit {"valid": true};
 * REGISTRY_CREDENTIALS_REJECTED when it answered 401 (our own credentials, not the
 * harness's authorization, were refused); REGISTRY_INVALID for any other answer,
 * error or timeout (10 s). */
enum registry_verdict {
    REGISTRY_INVALID = 0,
    REGISTRY_VALID = 1,
    REGISTRY_CREDENTIALS_REJECTED = 2
};
typedef void (*registry_validate_cb)(void *arg, enum registry_verdict verdict);
/* Starts /validate for the harness on stream_id (sent as x-codex-noise-stream-id, as
 * 0.169.0 does; the caller guarantees it is visible ASCII of at most 128 bytes).
 * Returns the call (cancel it with registry_call_cancel; cb is then never called)
 * or NULL when it could not start. */
struct registry_call *registry_validate(struct registry_client *rc, const char *registration_id,
                                        const char *stream_id, const char *harness_key_json,
                                        const char *authorization, registry_validate_cb cb,
                                        void *arg);
void registry_call_cancel(struct registry_call *call);

#endif
