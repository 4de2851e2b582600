/* start_rpc: decoding process/start's `envPolicy` and `shellSnapshot` members with
 * serde's wording (rpc/params), the reference's texts word for word. What they
 * decode into is plain (env_policy.h, shell_snapshot.h); building the environment
 * and taking the snapshot never see the request. */
#include <stdio.h>
#include <string.h>

#include "process/env_policy.h"
#include "process/shell_snapshot.h"
#include "rpc/params.h"

/* ---- envPolicy ---------------------------------------------------------------------- */

/* serde's text for a non-string where a string belongs, as the reference words it
 * for policy members (it decodes them through an untyped value: "number"). */
static bool check_string(struct pdec *d, json_t *v)
{
    if (json_is_string(v)) return true;
    char what[128];
    if (json_is_number(v))
        snprintf(what, sizeof what, "number");
    else
        pdec_describe(v, what, sizeof what);
    pdec_fail(d, "invalid type: %s, expected a string", what);
    return false;
}

/* Every member of an array or every value of an object is a string. */
static bool check_strings(struct pdec *d, json_t *container)
{
    const char *k;
    size_t i;
    json_t *v;
    if (json_is_array(container)) {
        json_array_foreach(container, i, v) if (!check_string(d, v)) return false;
    } else {
        json_object_foreach(container, k, v) if (!check_string(d, v)) return false;
    }
    return true;
}

void env_policy_decode(struct pdec *d, struct env_policy *out, bool *present)
{
    memset(out, 0, sizeof *out);
    *present = false;
    /* Non-object values: the reference's texts, which name the struct and call any
     * number just "number" (it decodes from a parsed value, not from text). */
    json_t *raw = json_is_object(d->obj) ? json_object_get(d->obj, "envPolicy") : NULL;
    if (!d->failed && raw && !json_is_null(raw) && !json_is_object(raw)) {
        char what[128];
        if (json_is_number(raw))
            snprintf(what, sizeof what, "number");
        else
            pdec_describe(raw, what, sizeof what);
        if (json_is_array(raw) && json_array_size(raw) != 5)
            pdec_fail(d, "invalid length %zu, expected struct ExecEnvPolicy with 5 elements",
                      json_array_size(raw));
        else
            pdec_fail(d, "invalid type: %s, expected struct ExecEnvPolicy", what);
        return;
    }
    json_t *obj = pdec_object(d, "envPolicy", PDEC_OPTIONAL);
    if (!obj || d->failed) return;
    struct pdec sub;
    static const char *const variants[] = {"core", "all", "none", NULL};
    if (pdec_begin(&sub, obj, "ShellEnvironmentPolicy")) {
        int inherit = pdec_enum(&sub, "inherit", PDEC_REQUIRED, variants, 0);
        out->ignore_default_excludes =
            pdec_bool(&sub, "ignoreDefaultExcludes", PDEC_REQUIRED, false);
        out->exclude = pdec_array(&sub, "exclude", PDEC_REQUIRED);
        out->set = pdec_object(&sub, "set", PDEC_REQUIRED);
        out->include_only = pdec_array(&sub, "includeOnly", PDEC_REQUIRED);
        if (!sub.failed) {
            out->inherit = inherit == 1   ? ENV_INHERIT_ALL
                           : inherit == 2 ? ENV_INHERIT_NONE
                                          : ENV_INHERIT_CORE;
            if (check_strings(&sub, out->exclude) && check_strings(&sub, out->set))
                check_strings(&sub, out->include_only);
        }
    }
    if (sub.failed) {
        pdec_fail(d, "%s", sub.err);
        return;
    }
    *present = true;
}

/* ---- shellSnapshot --------------------------------------------------------------- */

/* The reference decodes this member from a buffered JSON value, so a number is
 * reported as "number" rather than serde's `integer `1``. */
static const char *snap_string(struct pdec *d, const char *key, size_t *len)
{
    json_t *v = d->obj && !d->failed ? json_object_get(d->obj, key) : NULL;
    if (json_is_number(v)) {
        pdec_fail(d, "invalid type: number, expected a string");
        return NULL;
    }
    return len ? pdec_string_len(d, key, PDEC_REQUIRED, len) : pdec_string(d, key, PDEC_REQUIRED);
}

void proc_snapshot_decode(struct pdec *d, struct proc_snapshot_req *out, bool *present)
{
    *present = false;
    memset(out, 0, sizeof *out);
    json_t *obj = pdec_object(d, "shellSnapshot", PDEC_OPTIONAL);
    if (!obj || d->failed) return;
    struct pdec sub;
    if (pdec_begin(&sub, obj, "ShellSnapshotRequest")) {
        out->scope = snap_string(&sub, "scopeId", &out->scope_len);
        json_t *shell = pdec_object(&sub, "shell", PDEC_REQUIRED);
        if (shell && !sub.failed) {
            struct pdec sh;
            if (pdec_begin(&sh, shell, "ShellInfo")) {
                out->shell_name = snap_string(&sh, "name", NULL);
                out->shell_path = snap_string(&sh, "path", NULL);
            }
            if (sh.failed) pdec_fail(&sub, "%s", sh.err);
        }
    }
    if (sub.failed) {
        pdec_fail(d, "%s", sub.err);
        return;
    }
    *present = true;
}
