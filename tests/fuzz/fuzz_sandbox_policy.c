/* libFuzzer target for sandbox/policy.
 *
 * Feeds arbitrary bytes, parsed as JSON, to sandbox_policy_parse with and without a
 * fallback cwd. Whatever it accepts must be a policy the enforcement code can use:
 * every path absolute and NUL-terminated, nothing to enforce unless the profile is
 * managed, and errors carry a JSON-RPC code and a terminated message. */
#include <jansson.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "sandbox/policy.h"
#include "sandbox/sandbox_rpc.h"

static void check_list(const struct sb_paths *l)
{
    for (size_t i = 0; i < l->n; i++)
        if (!l->v[i] || l->v[i][0] != '/') abort();
}

static void check(json_t *j, const char *fallback)
{
    struct sandbox_policy p;
    struct sandbox_error e;
    if (sandbox_policy_parse(j, fallback, &p, &e) != 0) {
        if (!memchr(e.message, '\0', sizeof e.message) || !e.message[0]) abort();
        int code = sandbox_error_code(&e);
        if (code != -32602 && code != -32600) abort();
        if (p.readable.n || p.writable.n || p.cwd) abort(); /* nothing half-filled */
        return;
    }
    check_list(&p.readable);
    check_list(&p.writable);
    check_list(&p.readonly_sub);
    check_list(&p.denied);
    if (!p.enforce_fs && (sandbox_policy_needs_fs(&p, true, true) || p.readable.n || p.writable.n))
        abort();
    if (p.full_write && !p.full_read) abort();
    sandbox_policy_free(&p);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    json_error_t je;
    json_t *j = json_loadb((const char *)data, size, JSON_DECODE_ANY, &je);
    if (!j) return 0;
    check(j, NULL);
    check(j, "/tmp");
    json_decref(j);
    return 0;
}
