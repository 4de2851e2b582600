/* ec_tty: terminal and stdin controls, and ending a session (the server's own
 * extensions, PROTOCOL.md §11 (g)). Each is sent only when environment/info
 * advertises it, so against the reference a caller gets -EC_ERR_USAGE (or a no-op
 * for ec_client_end_session) and keeps its fallback. */
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "ec_internal.h"

static int need(ec_client *c, const char *cap, ec_error *err)
{
    if (ec_client_has_capability(c, cap)) return 0;
    return ec_fail(err, EC_ERR_USAGE, 0, "the server does not support this (no %s capability)",
                   cap);
}

int ec_process_signal(ec_process *p, const char *signal, ec_error *err)
{
    if (!signal || !*signal) return ec_fail(err, EC_ERR_USAGE, 0, "no signal given");
    const char *bare = strncasecmp(signal, "SIG", 3) == 0 ? signal + 3 : signal;
    bool interrupt = strcmp(signal, "interrupt") == 0 || strcasecmp(bare, "INT") == 0 ||
                     strcmp(signal, "2") == 0;
    if (interrupt) return ec_process_interrupt(p, err); /* every server knows this one */
    int rc = need(p->c, "processSignalAny", err);
    if (rc) return rc;
    json_t *params = ec_process_params(p);
    json_object_set_new(params, "signal", json_string(signal));
    return ec_call_kind(p->c, EC_PENDING_CALL, "process/signal", params, NULL, err);
}

int ec_process_resize(ec_process *p, unsigned rows, unsigned cols, ec_error *err)
{
    if (rows < 1 || rows > 65535 || cols < 1 || cols > 65535)
        return ec_fail(err, EC_ERR_USAGE, 0, "rows and cols must be 1-65535");
    int rc = need(p->c, "processResize", err);
    if (rc) return rc;
    json_t *params = ec_process_params(p);
    json_object_set_new(params, "rows", json_integer(rows));
    json_object_set_new(params, "cols", json_integer(cols));
    return ec_call_kind(p->c, EC_PENDING_CALL, "process/resize", params, NULL, err);
}

int ec_process_close_stdin(ec_process *p, ec_error *err)
{
    int rc = need(p->c, "processCloseStdin", err);
    if (rc) return rc;
    /* Retried after a reconnect like a write: the server makes it idempotent, and it
     * must come after every write before it, which keep their order. */
    json_t *params = ec_process_params(p);
    return ec_call_kind(p->c, EC_PENDING_RETRY, "process/closeStdin", params, NULL, err);
}

int ec_client_end_session(ec_client *c, ec_error *err)
{
    if (!ec_client_has_capability(c, "sessionClose")) return 0;
    return ec_call_kind(c, EC_PENDING_CALL, "session/close", json_object(), NULL, err);
}
