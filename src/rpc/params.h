/* params: decoding request params with the reference server's error texts.
 *
 * Clients and tests match a few decode errors literally ("missing field `x`",
 * "unknown variant `v`, expected `a` or `b`"), so these helpers reproduce serde's
 * wording. A decoder records the first failure and ignores later calls, so a
 * handler reads every field and then checks d.failed once:
 *
 *     struct pdec d;
 *     pdec_begin(&d, req->params, "ReadParams");
 *     const char *id = pdec_string(&d, "processId", PDEC_REQUIRED);
 *     uint64_t after = pdec_u64(&d, "afterSeq", PDEC_OPTIONAL, 0);
 *     if (rpc_reply_if_invalid(req, &d)) return;
 *
 * Pure functions over jansson values, no I/O. */
#ifndef EXEC_RPC_PARAMS_H
#define EXEC_RPC_PARAMS_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

enum pdec_presence {
    PDEC_REQUIRED,         /* absent: "missing field `k`"; null: "invalid type: null, ..." */
    PDEC_OPTIONAL,         /* absent or null: the default */
    PDEC_OPTIONAL_NONNULL, /* absent: the default; null: "invalid type: null, ..." */
};

struct pdec {
    json_t *obj; /* the params object (borrowed) */
    bool failed; /* a field failed; err holds the message */
    char err[512];
};

/* Starts decoding params as the struct `struct_name`. Anything but an object fails
 * with e.g. "invalid type: null, expected struct ReadParams". Returns !failed. */
bool pdec_begin(struct pdec *d, json_t *params, const char *struct_name);
/* Methods without params accept absent, null or {} only. Returns !failed. */
bool pdec_unit(struct pdec *d, json_t *params);

/* Each returns the value, or the default / NULL when absent or on failure.
 * Strings are borrowed from the params tree. *present (if not NULL) tells
 * whether a non-null value was given. */
const char *pdec_string(struct pdec *d, const char *key, enum pdec_presence p);
/* Like pdec_string, also giving the length (strings may contain NUL bytes). */
const char *pdec_string_len(struct pdec *d, const char *key, enum pdec_presence p, size_t *len);
bool pdec_bool(struct pdec *d, const char *key, enum pdec_presence p, bool def);
uint64_t pdec_u64(struct pdec *d, const char *key, enum pdec_presence p, uint64_t def,
                  bool *present);
int64_t pdec_i64(struct pdec *d, const char *key, enum pdec_presence p, int64_t def, bool *present);
/* Object or array members: borrowed json_t, or NULL when absent/null/failed.
 * `what` names the expected type in messages, e.g. "a map" or "a sequence". */
json_t *pdec_object(struct pdec *d, const char *key, enum pdec_presence p);
json_t *pdec_array(struct pdec *d, const char *key, enum pdec_presence p);
/* A string restricted to `variants` (NULL-terminated). Returns its index, or def
 * when absent/null and optional, or -1 on failure with serde's unknown-variant text. */
int pdec_enum(struct pdec *d, const char *key, enum pdec_presence p, const char *const *variants,
              int def);

/* Records a failure with the given text unless one is recorded already. */
void pdec_fail(struct pdec *d, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* serde's description of a JSON value's type, e.g. `string "x"`, `integer `5``. */
void pdec_describe(const json_t *v, char *out, size_t outlen);

#endif
