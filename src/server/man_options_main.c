/* man_options_main: prints the OPTIONS section of man/exec-server.1 from the option
 * table, so the page cannot drift from the options the server takes
 * (tests/docs/test_man_options.py compares; its `--update` rewrites the page). */
#include <stdio.h>

#include "server/options.h"

int main(void)
{
    options_print_man(stdout);
    return ferror(stdout) ? 1 : 0;
}
