/* netproxy_rpc: the managed-network proxy's side that speaks JSON-RPC, for the
 * process/start handler: decoding the start's managed-network params with the
 * reference's wording (np_params_rpc.c) and the proxy's client for a session, which
 * asks network/policyRequest and sends network/policyDecision on whatever connection
 * the session is attached to at the time (np_client_rpc.c). The rest of src/netproxy
 * knows neither rpc/ nor session/. */
#ifndef EXEC_NETPROXY_NETPROXY_RPC_H
#define EXEC_NETPROXY_NETPROXY_RPC_H

#include "netproxy/netproxy.h"

struct pdec;
struct session;

/* Decodes enforceManagedNetwork, managedNetwork (shape only) and networkProxy from
 * the ExecParams object d is decoding; failures are recorded in d with serde's
 * wording. */
void netproxy_params_decode(struct pdec *d, struct netproxy_params *p);

/* The client a proxy started for a process of session s asks and tells (for
 * netproxy_start). NULL s: nobody. */
struct netproxy_client netproxy_session_client(struct session *s);

/* The managed network proxy's record (rpc.h): no methods of its own, the
 * capabilities of process/start's networkProxy (np_params_rpc.c). */
extern const struct rpc_domain netproxy_domain;

#endif
