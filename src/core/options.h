/* options: the engine behind every option table of the program, and its one reader
 * of the environment.
 *
 * A command declares its options once as data, one row per option (redis's
 * static_configs[] is the model): its long and short names, the kind of value and its
 * bounds, the default, where the value goes, the help text and which of the command's
 * modes take it. Everything else is derived here from such a table: the value checks
 * with their error texts, the defaults, `--help`, the OPTIONS entries of a man page
 * (exec-server-man-options prints them; tests/docs/test_man_options.py fails when a
 * page differs) and the flags' environment variables. The tables live with their
 * commands: the daemon's in server/options.c, `exec-server registry`'s in
 * fleet/fleet_options.c; neither depends on the other. Rules that tie several options
 * together live with their command too (server/config.c). */
#ifndef EXEC_CORE_OPTIONS_H
#define EXEC_CORE_OPTIONS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

enum opt_kind {
    OPT_ACTION,  /* --help, --version: the command's parser acts on them */
    OPT_FLAG,    /* no value: the bool target becomes true */
    OPT_STRING,  /* the value itself (const char *; the last one given wins) */
    OPT_LIST,    /* repeatable: each value is appended to a struct opt_list */
    OPT_COUNT,   /* decimal digits within [min, max] */
    OPT_BYTES,   /* a count with an optional K, M or G suffix (powers of 1024) */
    OPT_SECONDS, /* decimal seconds, a fraction allowed, within [min, max]: stored in ms */
    OPT_CHOICE,  /* one of choices[]: its index (int); -1 when not given */
    OPT_PARSE,   /* parse(value, target, &why) decides (0 or -EINVAL with a reason) */
};

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
    unsigned modes;   /* which of its command's modes take it (the command's own bits) */
    unsigned section; /* index into its table's sections[] */
    void *target;     /* where the value goes (a field of the command's config) */
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

/* One command's options: its rows in help order and, when it groups them, the
 * sections they name (NULL: one list without headings). */
struct opt_table {
    const struct opt_spec *rows;
    size_t count;
    const struct opt_section *sections;
    size_t section_count;
    /* The man page adds lone_note (`x` bold) under a row whose modes are exactly
     * lone_modes (the daemon's: "Not with `exec-server forward`."); NULL: none. */
    unsigned lone_modes;
    const char *lone_note;
};

/* The row of t for a long name, or NULL. */
const struct opt_spec *options_find(const struct opt_table *t, const char *name);

/* Parses value into o's target by o's kind and bounds. Returns 0, or -EINVAL after
 * writing o's error text (without the program's prefix) to err. */
int options_store(const struct opt_spec *o, const char *value, char *err, size_t errlen);

/* Resets every target of t to its default (parsing def; zero/NULL/-1 when none). */
void options_reset(const struct opt_table *t);

/* Writes the options of t that mode takes as --help lists them: under their
 * sections' headings, or as one list when t has no sections. */
void options_print_help(FILE *out, const struct opt_table *t, unsigned mode);

/* Writes the man page's entries (roff) for every row of t: a .SS per section with
 * its rows, or the .TP entries alone when t has no sections. */
void options_print_man(FILE *out, const struct opt_table *t);

/* Copies every variable of env_vars_table (core/env_vars.h) into env_vars: the only
 * reading of the environment (tests/arch/test_getenv.py), once at the start of each
 * role of the program (main.c, exec-server registry), before any thread. */
void options_read_env(void);

/* Applies the flags' environment variables (.env) of t's rows not given on the
 * command line (given[i]: row i's position there, 0 when absent). Returns 0, or
 * -EINVAL after saying why on standard error. */
int options_apply_env(const struct opt_table *t, const unsigned *given);

#endif
