/* np_audit: the managed-network proxy's decisions in the audit trail (audit/audit.h,
 * docs/AUDIT.md): one net.decision record per connection the proxy decided, with who
 * decided it (the policy, the client's answer, the mode guard, the server's own
 * ports). Host, port and method only: never a header, a body or a credential. */
#include "netproxy/np_audit.h"

#include "audit/audit.h"

void np_audit_decision(const char *session, const char *process_id,
                       const struct netproxy_decision *d)
{
    struct buf *b = audit_begin("net.decision");
    if (!b) return;
    audit_put_str(b, "session", session);
    audit_put_str(b, "process", process_id);
    audit_put_str(b, "protocol", d->protocol);
    audit_put_str(b, "host", d->host);
    audit_put_u64(b, "port", d->port);
    if (d->method) audit_put_str(b, "method", d->method);
    audit_put_str(b, "decision", d->decision);
    audit_put_str(b, "source", d->source);
    audit_put_str(b, "reason", d->reason);
    audit_put_bool(b, "policyOverride", d->override);
    audit_commit(b);
}
