/* options: every command-line option of exec-server, declared once as data.
 *
 * One row per option in core/options.h's format: its long and short names, the kind
 * of value and its bounds, the default, where the value goes (server_config or the
 * limits), the help text and which command (`exec-server`, `exec-server forward`)
 * takes it. The engine in core/options.c derives the rest from the table: getopt's
 * option array (server/config.c), the value checks with their error texts, `--help`,
 * the OPTIONS section of man/exec-server.1 (exec-server-man-options prints it;
 * tests/docs/test_man_options.py fails when the page differs) and the flags'
 * environment variables. Rules that tie several options together (auth modes, remote
 * mode, the listen URL) live in server/config.c. */
#ifndef EXEC_SERVER_OPTIONS_H
#define EXEC_SERVER_OPTIONS_H

#include <stdio.h>

#include "core/options.h"

/* Which command takes an option (opt_spec.modes bits of this table). */
enum opt_mode { OPT_SERVE = 1u, OPT_FORWARD = 2u, OPT_BOTH = 3u };

/* The table, in help order, with its sections. */
extern const struct opt_table server_options;

/* Writes `exec-server [forward] --help` for the options of mode. */
void server_options_help(FILE *out, unsigned mode);

/* Writes the OPTIONS section of man/exec-server.1 (roff), from ".SH OPTIONS" on. */
void server_options_man(FILE *out);

#endif
