/* cli_xfer: the lower half of `exec-client fs`, what cli_fs.c (the command, its
 * arguments and the listing subcommands) takes from cli_xfer.c: the options, errors,
 * cat, get, put, the download's temporary file and remote patterns. */
#ifndef EXEC_CLIENT_CLI_XFER_H
#define EXEC_CLIENT_CLI_XFER_H

#include <stdbool.h>
#include <stddef.h>

#include "cli.h"

struct cli_fs_opts {
    bool r;             /* -r: recursive (rm, cp, get, put) */
    bool f;             /* -f: rm's force */
    bool p;             /* -p: mkdir's parents; get/put: keep times (and modes) */
    bool l;             /* -l: ls's long form */
    bool a;             /* -a, -A: ls lists names that start with a dot too */
    bool q;             /* -q: no progress line */
    unsigned max_depth; /* walk --max-depth */
};

/* "exec-client: fs SUB PATH: reason" and exit (cli_err_exit_code: 1 or 255). */
void cli_fs_die(const char *sub, const char *path, const ec_error *e) __attribute__((noreturn));
/* Orders ec_dirent by name (qsort). */
int cli_fs_cmp_dirent(const void *a, const void *b);

void cli_fs_guard_install(void);
const char *cli_fs_base_name(const char *path); /* static storage */
char *cli_fs_join(const char *dir, const char *name);
bool cli_fs_ends_with_slash(const char *p);
int cli_fs_cat(struct cli *cli, const struct cli_fs_opts *o, const char *path);
int cli_fs_get_one(struct cli *cli, const struct cli_fs_opts *o, const char *path,
                   const char *local);
int cli_fs_put_one(struct cli *cli, const struct cli_fs_opts *o, const char *local,
                   const char *path);
/* The remote paths matching an absolute pattern, sorted (the path itself when it has
 * no pattern characters); *n is 0 when nothing matches. Free with cli_fs_strv_free. */
char **cli_fs_remote_glob(struct cli *cli, const char *path, size_t *n);
void cli_fs_strv_free(char **v, size_t n);

#endif
