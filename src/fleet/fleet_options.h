/* fleet_options: the option table of `exec-server registry` (core/options.h's row
 * format, so values are checked, --help printed and the man page written by the same
 * engine as the daemon's), and its parser: `exec-server registry [COMMAND] [OPTIONS]`,
 * options anywhere, the command words in order. */
#ifndef EXEC_FLEET_OPTIONS_H
#define EXEC_FLEET_OPTIONS_H

#include <stdio.h>

#include "core/options.h"

/* Which commands take an option (opt_spec.modes bits of this table). */
enum {
    FLEET_OPT_SERVE = 1u << 4,
    FLEET_OPT_TOKEN = 1u << 5,
    FLEET_OPT_ENVS = 1u << 6,
    FLEET_OPT_ALL = FLEET_OPT_SERVE | FLEET_OPT_TOKEN | FLEET_OPT_ENVS,
};

extern const struct opt_table fleet_options;

#define FLEET_MAX_WORDS 4
/* Parses argv (argv[0] is "registry") into fleet_cfg after resetting it; the command
 * words go to words[] (*nwords). Returns -1 to go on, else an exit status (2 after a
 * usage error it printed, 0 after --help or --version). */
int fleet_options_parse(int argc, char **argv, const char **words, int *nwords);
/* `exec-server registry --help`. */
void fleet_options_help(FILE *out);
/* The man page's REGISTRY OPTIONS entries (roff). */
void fleet_options_man(FILE *out);

#endif
