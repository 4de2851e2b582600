/* server_run: the event loop of the daemon, once config_validate has accepted the
 * command line (server/config.h). Starts the guardian, the signal handlers, remote
 * mode and the listener (WebSocket or stdio), runs until SIGTERM/SIGINT, the end of
 * stdio, a fatal remote error or (--exit-on-stdin-close) the parent's pipe closing,
 * then kills every managed process group. In WebSocket mode the bound URL is
 * printed as one line on stdout once listening; everything else goes to stderr. */
#ifndef EXEC_SERVER_SERVER_RUN_H
#define EXEC_SERVER_SERVER_RUN_H

/* Runs the server described by server_config. Returns the process exit status. */
int server_run(void);

#endif
