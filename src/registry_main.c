/* registry_main: `exec-server-registry`, the program `exec-server registry` runs
 * (src/main.c execs it from its own directory): the environment registry and
 * rendezvous of a self-hosted fleet (src/fleet, docs/FLEET.md). It can be run directly
 * as well; argv[0] is not read. */
#include "fleet/fleet_command.h"

int main(int argc, char **argv)
{
    return fleet_command_main(argc, argv);
}
