/* server_methods: see server_methods.h. */
#include "server/server_methods.h"

#include <stdio.h>
#include <string.h>

#include "audit/audit.h"
#include "capabilities/capabilities_rpc.h"
#include "fs/fs_methods.h"
#include "fs/fs_watch_rpc.h"
#include "http/http_methods.h"
#include "netproxy/netproxy_rpc.h"
#include "process/process_rpc.h"
#include "rpc/dispatch.h"
#include "sandbox/sandbox_rpc.h"
#include "session/session.h"
#include "tcp/tcp_methods.h"

/* What --audit-required refuses while the audit log cannot take records: the
 * methods that do work an audit record is made of (docs/AUDIT.md); the fs reads
 * only when they are recorded (--audit-fs-reads). Reading output, listing and
 * stopping (process/terminate, session/close) always go on. */
static const char *const audited[] = {"process/start",
                                      "process/write",
                                      "process/signal",
                                      "fs/writeFile",
                                      "fs/createDirectory",
                                      "fs/remove",
                                      "fs/copy",
                                      "fs/rename",
                                      "fs/open",
                                      "fs/writeBlock",
                                      "fs/setPermissions",
                                      "http/request",
                                      "tcp/connect",
                                      NULL};
static const char *const audited_reads[] = {
    "fs/readFile",     "fs/readDirectory", "fs/walk", "fs/getMetadata",
    "fs/canonicalize", "fs/readBlock",     NULL};

static bool listed(const char *const *list, const char *method)
{
    for (; *list; list++)
        if (strcmp(*list, method) == 0) return true;
    return false;
}

static const char *audit_gate(const char *method)
{
    if (!listed(audited, method) && !(audit_fs_reads() && listed(audited_reads, method)))
        return NULL;
    const char *why = audit_refusal();
    if (!why) return NULL;
    static char text[160];
    snprintf(text, sizeof text, "%s (--audit-required)", why);
    return text;
}

void server_methods_gate_audit(void)
{
    rpc_set_work_gate(audit_gate);
}

/* Every domain's record (rpc.h), in the order rpc looks methods up: the process and
 * fs methods first, the requests that come most often. */
static const struct rpc_domain *const domains[] = {
    &process_domain,          &fs_domain,  &session_domain,  &http_domain,
    &capability_roots_domain, &tcp_domain, &netproxy_domain, &sandbox_domain,
};

void server_methods_register(void)
{
    for (size_t i = 0; i < sizeof domains / sizeof domains[0]; i++)
        session_register_domain(domains[i]);
    /* What the domains keep per session, in the order a session's end frees it. */
    session_register_part(&proc_session_part);
    session_register_part(&fs_session_part);
}
