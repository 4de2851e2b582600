/* env_policy: the child environment of process/start (PROTOCOL.md section 5.1.3).
 *
 * The codex client sends `envPolicy` ({inherit, ignoreDefaultExcludes, exclude, set,
 * includeOnly}) plus `env` on every start and expects the child to see the server's
 * environment filtered by the policy, with `env` laid on top. Without `envPolicy`
 * the child's environment is exactly `env` (section 5.1.1).
 *
 * Pure: decoding works on the params tree (serde's wording via rpc/params), and the
 * builder takes the server's environment as an argument, so both are unit-tested
 * without touching the real environ. */
#ifndef EXEC_PROCESS_ENV_POLICY_H
#define EXEC_PROCESS_ENV_POLICY_H

#include <jansson.h>
#include <stdbool.h>

#include "rpc/params.h"

enum env_inherit { ENV_INHERIT_ALL, ENV_INHERIT_CORE, ENV_INHERIT_NONE };

struct env_policy {
    bool present;                 /* a non-null envPolicy was given */
    enum env_inherit inherit;
    bool ignore_default_excludes;
    json_t *exclude;      /* array of pattern strings (borrowed from params) */
    json_t *set;          /* object string -> string (borrowed) */
    json_t *include_only; /* array of pattern strings (borrowed) */
};

/* Decodes params[key] into *out. Absent or null gives present=false. Every member
 * is required when the object is present (the reference's serde struct has no
 * defaults). On failure records serde's text in d and returns false. */
bool env_policy_decode(struct pdec *d, const char *key, struct env_policy *out);

/* Builds the child's envp (NULL-terminated, malloc'd "NAME=value" strings, sorted
 * by name) from the server's environment `server_env` (NULL-terminated "NAME=value";
 * entries without '=' are skipped, the first of duplicate names wins), the policy
 * (NULL or !present: nothing inherited) and the request's `env` object, which wins
 * over everything. */
char **env_policy_build(const struct env_policy *pol, char *const *server_env, json_t *env);

/* Case-insensitive glob match of a variable name: `*` any run, `?` one character. */
bool env_pattern_match(const char *pattern, const char *name);

/* The value of `name` in envp, or NULL. */
const char *env_lookup(char *const *envp, const char *name);

/* Frees what env_policy_build returned. */
void env_free(char **envp);

#endif
