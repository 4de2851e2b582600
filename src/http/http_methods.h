/* http_methods: the http/request method (libcurl's multi interface on the loop,
 * loaded on first use). Its table, registered with rpc. */
#ifndef EXEC_HTTP_HTTP_METHODS_H
#define EXEC_HTTP_HTTP_METHODS_H

#include "rpc/rpc.h"

extern const struct rpc_method http_methods[];

/* The http domain's record (rpc.h): http_methods and httpHeaderEnvVars. */
extern const struct rpc_domain http_domain;

#endif
