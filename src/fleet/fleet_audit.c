/* fleet_audit: what `exec-server registry --audit-log PATH` records (audit/audit.h,
 * docs/AUDIT.md): executors' registrations and their sockets attaching and going,
 * harnesses' connects, the executors' validations of a harness, every refusal, and
 * the token commands' changes. Token ids, never tokens; the harness's key digest,
 * never its authorization. */
#include "fleet/fleet_audit.h"

#include <stdio.h>

#include "audit/audit.h"
#include "fleet/fleet_config.h"

void fleet_audit(const char *type, const struct fleet_audit_event *e)
{
    struct buf *b = audit_begin(type);
    if (!b) return;
    const struct {
        const char *key, *value;
    } fields[] = {{"action", e->action},
                  {"what", e->what},
                  {"environment", e->environment},
                  {"registration", e->registration},
                  {"token", e->token},
                  {"role", e->role},
                  {"expires", e->expires},
                  {"node", e->node},
                  {"peer", e->peer},
                  {"harnessKey", e->harness_key}};
    for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++)
        if (fields[i].value && *fields[i].value) audit_put_str(b, fields[i].key, fields[i].value);
    if (e->valid >= 0) audit_put_bool(b, "valid", e->valid);
    if (e->status) audit_put_i64(b, "status", e->status);
    if (e->reason) audit_put_str(b, "reason", e->reason);
    audit_commit(b);
}

int fleet_audit_token(const char *action, const char *token_id, const char *role,
                      const char *expires)
{
    if (!fleet_cfg.audit_log) return 0;
    struct audit_options o = {.log_path = fleet_cfg.audit_log, .program = "exec-server registry"};
    char err[600];
    if (audit_start(NULL, &o, err, sizeof err) < 0) {
        fprintf(stderr, "exec-server registry: %s\n", err);
        return 1;
    }
    struct fleet_audit_event e = {.action = action,
                                  .token = token_id,
                                  .environment = fleet_cfg.environment,
                                  .role = role,
                                  .expires = expires,
                                  .valid = -1};
    fleet_audit("registry.token", &e);
    audit_stop();
    return 0;
}
