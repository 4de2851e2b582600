/* http_request: the http/request method (libcurl's multi interface on the loop,
 * loaded on first use). Its table, registered with rpc. */
#ifndef EXEC_HTTP_HTTP_REQUEST_H
#define EXEC_HTTP_HTTP_REQUEST_H

#include "rpc/rpc.h"

extern const struct rpc_method http_methods[];

#endif
