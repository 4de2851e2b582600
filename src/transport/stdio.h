/* stdio: the newline-delimited JSON transport on stdin/stdout (PROTOCOL.md 1.5). */
#ifndef EXEC_TRANSPORT_STDIO_H
#define EXEC_TRANSPORT_STDIO_H

#include <uv.h>

#include "transport/conn.h"

/* Starts serving the single stdio connection; each line goes to on_message.
 * on_eof runs once stdin ends and the connection has closed (the server then
 * shuts down: there is no resume). */
int stdio_serve(uv_loop_t *loop, conn_message_fn on_message, void (*on_eof)(void));

#endif
