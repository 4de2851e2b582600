/* options: every command-line option of exec-server, declared once as data.
 *
 * One row per option (redis's static_configs[] is the model): its long and short
 * names, the kind of value and its bounds, the default, where the value goes, the
 * help text and which command (`exec-server`, `exec-server forward`) takes it.
 * Everything else is derived from the table: getopt_long's option array, the value
 * checks with their error texts, `--help`, and the OPTIONS section of
 * man/exec-server.1 (exec-server-man-options prints it; tests/docs/test_man.py
 * fails when the page differs). Rules that tie several options together (auth
 * modes, remote mode, the listen URL) live in server/config.c. */
#ifndef EXEC_SERVER_OPTIONS_H
#define EXEC_SERVER_OPTIONS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

enum opt_kind {
    OPT_ACTION,  /* --help, --version: config_parse acts on them */
    OPT_FLAG,    /* no value: the bool target becomes true */
    OPT_STRING,  /* the value itself (const char *; the last one given wins) */
    OPT_LIST,    /* repeatable: each value is appended to a struct opt_list */
    OPT_COUNT,   /* decimal digits within [min, max] */
    OPT_BYTES,   /* a count with an optional K, M or G suffix (powers of 1024) */
    OPT_SECONDS, /* decimal seconds, a fraction allowed, within [min, max]: stored in ms */
    OPT_CHOICE,  /* one of choices[]: its index (int); -1 when not given */
    OPT_PARSE,   /* parse(value, target, &why) decides (0 or -EINVAL with a reason) */
};

/* Which command takes an option. */
enum opt_mode { OPT_SERVE = 1u, OPT_FORWARD = 2u, OPT_BOTH = 3u };

/* How a bad value is reported: our house wording ("invalid --NAME `V`; expected X")
 * or, for the flags the reference's argument parser checks, its wording ("invalid
 * value 'V' for '--NAME <META>'" + tail). */
enum opt_style { OPT_OURS, OPT_CLAP };

/* What a set environment variable (env) means for a flag. */
enum opt_env_rule {
    OPT_ENV_NONE,
    OPT_ENV_TRUTHY, /* set and not "", "0" or "false": on */
    OPT_ENV_BOOL,   /* "true" or "false", anything else is an error (as the reference) */
};

struct opt_list {
    const char **v;
    size_t n;
};

struct opt_spec {
    const char *name; /* long name without "--" */
    char short_name;  /* 'h', or 0 */
    const char *meta; /* value placeholder in help texts ("URL"); NULL: no value */
    enum opt_kind kind;
    unsigned modes;   /* enum opt_mode bits */
    unsigned section; /* index into options_sections[] */
    void *target;     /* where the value goes (a field of server_config or limits) */
    size_t size;      /* sizeof *target for the numeric kinds (4 or 8) */
    unsigned long long min, max;
    const char *const *choices; /* OPT_CHOICE: NULL-terminated */
    /* OPT_PARSE: 0, or -EINVAL with *why set (the error's tail in OPT_CLAP style) */
    int (*parse)(const char *value, void *target, const char **why);
    enum opt_style style;
    const char *bad;      /* the error's verb ("invalid" when NULL) or, OPT_CLAP, its tail */
    const char *expect;   /* OPT_OURS: what a good value is, for the error text */
    const char *def;      /* default, parsed into target at reset and shown in help */
    const char *def_note; /* shown after the default in help, e.g. "any free port" */
    const char *env;      /* environment variable with the same meaning, or NULL */
    enum opt_env_rule env_rule;
    const char *help; /* --help and man text; `x` is set in bold in the man page */
    const char *more; /* further man-page-only text, or NULL */
};

struct opt_section {
    const char *title; /* --help heading and man .SS heading */
    const char *intro; /* a line under the heading, or NULL */
};

/* The table, in help order; options_count rows. */
extern const struct opt_spec options_table[];
extern const size_t options_count;
extern const struct opt_section options_sections[];
extern const size_t options_section_count;

/* The row for a long name, or NULL. */
const struct opt_spec *options_find(const char *name);

/* Parses value into o's target by o's kind and bounds. Returns 0, or -EINVAL after
 * writing o's error text (without the "exec-server: " prefix) to err. */
int options_store(const struct opt_spec *o, const char *value, char *err, size_t errlen);

/* Resets every target to its default (parsing def; zero/NULL/-1 when none). */
void options_reset(void);

/* Writes `exec-server [forward] --help` for the options of mode. */
void options_print_help(FILE *out, unsigned mode);

/* Writes the OPTIONS section of the man page (roff), from ".SH OPTIONS" on. */
void options_print_man(FILE *out);

/* The same for another command's table (`exec-server registry`, src/fleet): reset
 * its targets to their defaults, print its rows as --help does and as the man page's
 * .TP entries do. */
void options_reset_rows(const struct opt_spec *rows, size_t count);
void options_print_rows(FILE *out, const struct opt_spec *rows, size_t count);
void options_print_man_rows(FILE *out, const struct opt_spec *rows, size_t count);

/* ---- environment variables ---- */

/* One environment variable the server acts on (beside the flags' own .env, which
 * options_apply_env reads): where its value goes, the flag it stands in for (or NULL)
 * and what it does, for docs/FLAGS.md, which lists every row. */
struct opt_env {
    const char *name;    /* "TMPDIR" */
    const char *flag;    /* "--aws-region", or NULL */
    const char **target; /* a field of env_vars (core/env_vars.h) */
    const char *help;
};

extern const struct opt_env options_env_table[];
extern const size_t options_env_count;

/* Copies every variable of options_env_table into env_vars: the only reading of the
 * environment (tests/arch/test_getenv.py), once at the start of each role of the
 * program (main.c, exec-server registry), before any thread. */
void options_read_env(void);

/* Applies the flags' environment variables (.env) of the rows not given on the
 * command line (given[i]: row i's position there, 0 when absent). Returns CONFIG_OK
 * or an exit status after saying why. */
int options_apply_env(const unsigned *given);

#endif
