/* main: the exec-server daemon's entry point.
 *
 *   exec-server [--listen URL] [OPTIONS]
 *   exec-server --remote URL --environment-id ID [OPTIONS]
 *   exec-server forward --connect ws://HOST:PORT --remote URL --environment-id ID ...
 *   exec-server registry --database URL ...   (fleet/fleet_command.h)
 *
 * Three steps (docs/ARCHITECTURE.md, top layer): config_parse reads the command
 * line through the option table (server/options.c: every option once, with its
 * help, bounds and default), config_validate checks it as a whole
 * (server/config.c) and server_run starts the loop (server/server_run.c). */
#include <string.h>

#include "fleet/fleet_command.h"
#include "fs/fs_sandboxed.h"
#include "process/spawner.h"
#include "server/config.h"
#include "server/server_run.h"

int main(int argc, char **argv)
{
    /* The spawner is this same program, started once by the daemon (spawner.h). */
    if (argc == 2 && strcmp(argv[1], SPAWNER_ARG) == 0)
        return spawner_main(SPAWNER_SOCK_FD, fs_helper_run);
    /* The registry and rendezvous of a self-hosted fleet: a command of its own. */
    if (argc > 1 && strcmp(argv[1], "registry") == 0) return fleet_command_main(argc - 1, argv + 1);
    int status = config_parse(argc, argv);
    if (status == CONFIG_OK) status = config_validate();
    if (status == CONFIG_OK) status = server_run();
    config_free();
    return status;
}
