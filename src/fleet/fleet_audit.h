/* fleet_audit: the registry's audit records (see fleet_audit.c). Loop thread, or the
 * token commands (which write one record and stop). */
#ifndef EXEC_FLEET_FLEET_AUDIT_H
#define EXEC_FLEET_FLEET_AUDIT_H

#include <stdbool.h>

/* What one registry record says; NULL (or -1) members are left out. */
struct fleet_audit_event {
    const char *environment, *registration, *token, *peer, *node;
    const char *harness_key; /* the SHA-256 of the harness's raw public key */
    const char *what;        /* a refusal: what was refused (register, connect, ...) */
    const char *action;      /* a token change: create, revoke */
    const char *role, *expires;
    const char *reason;
    int status; /* a refusal's HTTP status, or 0 */
    int valid;  /* validate: 0 or 1; -1: not a validation */
};

/* Writes the record of type (registry.register, registry.connect, ...). */
void fleet_audit(const char *type, const struct fleet_audit_event *e);

/* `registry token create|revoke` with --audit-log: opens the log for the one record
 * (the chain goes on from its last line, taking its lock in turn with a running
 * registry) and closes it after. Returns 0, or 1 after saying why. */
int fleet_audit_token(const char *action, const char *token_id, const char *role,
                      const char *expires);

#endif
