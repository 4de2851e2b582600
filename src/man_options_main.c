/* man_options_main: prints the OPTIONS section of a man page from its option table, so
 * the pages cannot drift from the options the programs take
 * (tests/docs/test_man_options.py compares; its `--update` rewrites the pages):
 *   exec-server-man-options            man/exec-server.1 (src/server/options.c)
 *   exec-server-man-options registry   man/exec-server-registry.1 (src/fleet/fleet_options.c) */
#include <stdio.h>
#include <string.h>

#include "fleet/fleet_options.h"
#include "server/options.h"

int main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "registry") == 0) {
        fputs(".SH OPTIONS\n", stdout);
        fleet_options_man(stdout);
    } else {
        server_options_man(stdout);
    }
    return ferror(stdout) ? 1 : 0;
}
