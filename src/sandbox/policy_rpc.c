/* policy_rpc: decoding the wire's `sandbox` object (PROTOCOL.md section 10) with
 * serde's wording (rpc/params), the reference's errors word for word. Each member
 * is handed to the builder (policy_internal.h) as soon as it is decoded, so errors
 * come in the order the reference reports them; resolution is policy.c's. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rpc/params.h"
#include "sandbox/policy.h"
#include "sandbox/policy_internal.h"
#include "util/mem.h"

static const char *const access_names[] = {"read", "write", "deny", "none", NULL};
static const int access_values[] = {ACC_READ, ACC_WRITE, ACC_DENY, ACC_DENY};

/* Decodes one entry into b. Returns -EINVAL or -E2BIG with e filled on a non-serde
 * error; serde errors go to d. */
static int decode_entry(struct pdec *d, json_t *ent, struct sb_build *b, int glob_depth,
                        struct sandbox_error *e)
{
    struct pdec ed;
    pdec_begin(&ed, ent, "FileSystemSandboxEntry");
    json_t *path = pdec_object(&ed, "path", PDEC_REQUIRED);
    int ai = pdec_enum(&ed, "access", PDEC_REQUIRED, access_names, 0);
    static const char *const mpb[] = {"skip", NULL};
    pdec_enum(&ed, "missing_path_behavior", PDEC_OPTIONAL, mpb, 0);
    if (ed.failed) {
        pdec_fail(d, "%s", ed.err);
        return 0;
    }
    struct sb_entry se = {.access = access_values[ai]};
    struct pdec pd;
    pdec_begin(&pd, path, "FileSystemPath");
    static const char *const types[] = {"path", "glob_pattern", "special", NULL};
    int ty = pdec_enum(&pd, "type", PDEC_REQUIRED, types, 0);
    json_t *value = NULL;
    if (ty == 0) se.path = pdec_string(&pd, "path", PDEC_REQUIRED);
    if (ty == 1) se.pattern = pdec_string(&pd, "pattern", PDEC_REQUIRED);
    if (ty == 2) value = pdec_object(&pd, "value", PDEC_REQUIRED);
    if (value && !pd.failed) {
        struct pdec vd;
        pdec_begin(&vd, value, "FileSystemSpecialPath");
        se.kind = pdec_string(&vd, "kind", PDEC_REQUIRED);
        se.subpath = pdec_string(&vd, "subpath", PDEC_OPTIONAL);
        if (vd.failed) pdec_fail(&pd, "%s", vd.err);
    }
    if (pd.failed) {
        pdec_fail(d, "%s", pd.err);
        return 0;
    }
    return sandbox_build_entry(b, &se, glob_depth, e);
}

/* A managed profile's file_system: restricted (each entry decoded into b) or
 * unrestricted; *restricted says which. Returns -1 when an entry cannot be enforced
 * (err says why), else 0 (a decoding failure is carried into p). */
static int decode_file_system(struct pdec *p, json_t *fsp, struct sb_build *b,
                              struct sandbox_error *err, bool *restricted)
{
    struct pdec f;
    pdec_begin(&f, fsp, "FileSystemPermissions");
    static const char *const ft[] = {"restricted", "unrestricted", NULL};
    int k = pdec_enum(&f, "type", PDEC_REQUIRED, ft, 0);
    json_t *ents = k == 0 ? pdec_array(&f, "entries", PDEC_REQUIRED) : NULL;
    bool has_depth = false;
    uint64_t depth = k == 0 ? pdec_u64(&f, "glob_scan_max_depth", PDEC_OPTIONAL, 0, &has_depth) : 0;
    if (!f.failed && has_depth && depth == 0)
        pdec_fail(&f, "invalid value: integer `0`, expected a nonzero usize");
    if (!f.failed && k == 0) {
        int gd = has_depth ? (depth > 64 ? 64 : (int)depth) : GLOB_DEFAULT_DEPTH;
        size_t i;
        json_t *v;
        json_array_foreach(ents, i, v)
        {
            if (decode_entry(&f, v, b, gd, err) < 0) return -1;
            if (f.failed) break;
        }
    }
    if (f.failed) pdec_fail(p, "%s", f.err);
    *restricted = k == 0;
    return 0;
}

/* The strings of a JSON array (checked to be strings), borrowed: free the array. */
static const char **strings_of(json_t *arr, size_t *n)
{
    *n = json_array_size(arr);
    const char **v = xcalloc(*n + 1, sizeof *v);
    for (size_t i = 0; i < *n; i++)
        v[i] = json_string_value(json_array_get(arr, i));
    return v;
}

/* The context's members: cwd and workspaceRoots (policyContext's when given) and
 * temporaryDirectories, with every other member of the reference's type checked.
 * Returns the permissions object; failures go to s. */
static json_t *decode_context(struct pdec *s, const char **cwd, json_t **roots, json_t **tmps,
                              bool *legacy_landlock)
{
    json_t *perm = pdec_object(s, "permissions", PDEC_REQUIRED);
    static const char *const wl[] = {"disabled", "restricted-token", "elevated", "mxc", NULL};
    *cwd = pdec_string(s, "cwd", PDEC_OPTIONAL);
    *roots = pdec_array(s, "workspaceRoots", PDEC_OPTIONAL);
    json_t *pctx = pdec_object(s, "policyContext", PDEC_OPTIONAL);
    pdec_enum(s, "windowsSandboxLevel", PDEC_REQUIRED, wl, 0);
    pdec_bool(s, "windowsSandboxPrivateDesktop", PDEC_OPTIONAL, false);
    *legacy_landlock = pdec_bool(s, "useLegacyLandlock", PDEC_OPTIONAL, false);
    static const char *const pm[] = {"reconcile", "preserve", NULL};
    pdec_enum(s, "windowsSandboxProxySettingsMode", PDEC_OPTIONAL, pm, 0);
    pdec_string(s, "userHomeDir", PDEC_OPTIONAL);
    *tmps = pdec_array(s, "temporaryDirectories", PDEC_OPTIONAL);
    if (pctx && !s->failed) {
        struct pdec c;
        pdec_begin(&c, pctx, "PolicyContext");
        const char *c_cwd = pdec_string(&c, "cwd", PDEC_OPTIONAL);
        json_t *c_roots = pdec_array(&c, "workspaceRoots", PDEC_OPTIONAL);
        if (c.failed) pdec_fail(s, "%s", c.err);
        if (c_cwd) *cwd = c_cwd;
        if (c_roots) *roots = c_roots;
    }
    if (!s->failed) {
        json_t *arrs[2] = {*roots, *tmps};
        size_t i;
        json_t *v;
        for (int a = 0; a < 2; a++) {
            json_array_foreach(arrs[a], i, v) if (!json_is_string(v))
            {
                char what[128];
                pdec_describe(v, what, sizeof what);
                pdec_fail(s, "invalid type: %s, expected a string", what);
                break;
            }
        }
    }
    return perm;
}

static int build_context(struct sb_build *b, const char *cwd, const char *fallback_cwd,
                         json_t *roots, json_t *tmps, struct sandbox_error *err)
{
    size_t nroots, ntmps;
    const char **rv = strings_of(roots, &nroots), **tv = strings_of(tmps, &ntmps);
    int rc = sandbox_build_context(b, cwd, fallback_cwd, rv, nroots, tv, ntmps, err);
    free(rv);
    free(tv);
    return rc;
}

/* The permission profile into b. Returns -1 when it cannot be enforced (err says
 * why), else 0 with *net_restricted and *enforce_fs (a decoding failure goes to s). */
static int decode_profile(struct pdec *s, json_t *perm, struct sb_build *b,
                          struct sandbox_error *err, bool *net_restricted, bool *enforce_fs)
{
    struct pdec p;
    pdec_begin(&p, perm, "PermissionProfile");
    static const char *const types[] = {"managed", "disabled", "external", NULL};
    int ty = pdec_enum(&p, "type", PDEC_REQUIRED, types, 0);
    static const char *const nets[] = {"restricted", "enabled", NULL};
    if (ty == 2) {
        pdec_enum(&p, "network", PDEC_REQUIRED, nets, 0);
    } else if (ty == 0) { /* ty == 1, disabled: no sandbox at all */
        json_t *fsp = pdec_object(&p, "file_system", PDEC_REQUIRED);
        int net = pdec_enum(&p, "network", PDEC_REQUIRED, nets, 0);
        if (!p.failed) {
            bool restricted = false;
            if (decode_file_system(&p, fsp, b, err, &restricted) < 0) return -1;
            if (!p.failed) {
                *net_restricted = net == 0;
                *enforce_fs = restricted;
            }
        }
    }
    if (p.failed) pdec_fail(s, "%s", p.err);
    return 0;
}

int sandbox_policy_parse(json_t *sandbox, const char *fallback_cwd, struct sandbox_policy *out,
                         struct sandbox_error *err)
{
    memset(out, 0, sizeof *out);
    memset(err, 0, sizeof *err);
    if (!sandbox || json_is_null(sandbox)) return 0;
    struct sb_build *b = sandbox_build_new();
    struct pdec s;
    pdec_begin(&s, sandbox, "FileSystemSandboxContext");
    const char *cwd;
    json_t *roots, *tmps;
    bool legacy = false;
    json_t *perm = decode_context(&s, &cwd, &roots, &tmps, &legacy);
    bool net_restricted = false, enforce_fs = false;
    int rc = -EINVAL;
    if (s.failed) goto decode_fail;
    if (build_context(b, cwd, fallback_cwd, roots, tmps, err) < 0) goto done;
    if (decode_profile(&s, perm, b, err, &net_restricted, &enforce_fs) < 0) goto done;
    if (s.failed) goto decode_fail;
    rc = sandbox_build_finish(b, net_restricted, enforce_fs, out, err);
    out->legacy_landlock = legacy;
    goto done;
decode_fail:
    err->kind = SANDBOX_ERR_INVALID;
    snprintf(err->message, sizeof err->message, "%s", s.err);
done:
    sandbox_build_free(b);
    if (rc < 0) {
        sandbox_policy_free(out);
        return -EINVAL;
    }
    return 0;
}
