/* proc_denied: the sandboxDenied verdict of a finished process (PROTOCOL.md 10.5). */
#ifndef EXEC_PROCESS_PROC_DENIED_H
#define EXEC_PROCESS_PROC_DENIED_H

#include <stdbool.h>

#include "process/event_log.h"

/* Computes sandboxDenied once at exit from whether a sandbox was applied, the
 * exit code and the retained output (stdout, stderr and PTY output). Reads log. */
bool proc_denied_verdict(bool sandboxed, int exit_code, const struct event_log *log);

#endif
