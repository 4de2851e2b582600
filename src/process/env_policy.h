/* env_policy: the child's environment from process/start's `envPolicy` and `env`.
 *
 * PROTOCOL.md §5.1.3. The codex client sends `envPolicy:{inherit:"all",...}` with
 * every start and expects the child to see the server's environment (HOME, PATH,
 * LANG, ...) filtered by the policy, with `env` laid on top. Without a policy the
 * environment is exactly `env` (§5.1.1).
 *
 * Steps: inherit (all | core | none) from the server's environ; drop *KEY*,
 * *SECRET*, *TOKEN* unless ignoreDefaultExcludes; drop `exclude` matches; apply
 * `set`; keep only `includeOnly` matches when that list is non-empty; overlay `env`.
 * Name patterns are case-insensitive globs with `*` and `?`.
 *
 * Pure: decoding (start_rpc.c) works on jansson values with serde-worded errors
 * (rpc/params), building works on a given environ array, so both are unit-tested
 * without a process. */
#ifndef EXEC_PROCESS_ENV_POLICY_H
#define EXEC_PROCESS_ENV_POLICY_H

#include <jansson.h>
#include <stdbool.h>

struct pdec;

enum env_inherit { ENV_INHERIT_CORE, ENV_INHERIT_ALL, ENV_INHERIT_NONE };

struct env_policy {
    enum env_inherit inherit;
    bool ignore_default_excludes;
    json_t *exclude;      /* array of pattern strings (borrowed) */
    json_t *set;          /* object string -> string (borrowed) */
    json_t *include_only; /* array of pattern strings (borrowed) */
};

/* Decodes params.envPolicy (start_rpc.c; absent or null: *present = false).
 * Every member is required when the object is present, as the reference requires;
 * failures go into `d` with serde's wording ("missing field `set`", "unknown variant ..."). */
void env_policy_decode(struct pdec *d, struct env_policy *out, bool *present);

/* The policy of an envPolicy object env_policy_decode accepted before (its
 * members borrowed), for a holder that kept the JSON (the shell snapshot's cache). */
void env_policy_from_json(json_t *obj, struct env_policy *out);

/* Builds the NULL-terminated "NAME=value" array for execve. `server_env` is the
 * daemon's environ; `policy` may be NULL (no policy: only `env`); `env` is the
 * request's object (string values, already checked). The result and its strings
 * are malloc'd; free with env_free(). */
char **env_build(char *const *server_env, const struct env_policy *policy, json_t *env);
void env_free(char **envp);

/* W3C trace context (PROTOCOL.md §2.1): when `trace` (a request's trace object) has
 * a valid `traceparent`, the child gets TRACEPARENT and, if valid, TRACESTATE, unless
 * the request's env already names them. Returns the (possibly reallocated) envp. */
char **env_add_trace(char **envp, json_t *trace);
/* Whether s is a W3C traceparent: version-traceid-parentid-flags in lowercase hex,
 * version not ff, ids not all zero. */
bool env_trace_parent_valid(const char *s);

/* The value of NAME in an envp array, or NULL. */
const char *env_get(char *const *envp, const char *name);

/* Case-insensitive glob (`*` any run, `?` one byte) over a whole name. */
bool env_name_matches(const char *pattern, const char *name);

#endif
