/* np_audit: the proxy's decisions as audit records (see np_audit.c). Loop thread. */
#ifndef EXEC_NETPROXY_NP_AUDIT_H
#define EXEC_NETPROXY_NP_AUDIT_H

#include "netproxy/netproxy.h"

/* A net.decision record of decision d on a connection of process process_id. */
void np_audit_decision(const char *session, const char *process_id,
                       const struct netproxy_decision *d);

#endif
