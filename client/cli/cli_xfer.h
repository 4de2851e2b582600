/* cli_xfer: the lower half of `exec-client fs`, what cli_fs.c (the command, its
 * arguments and the listing subcommands) takes from cli_xfer.c: the options, errors,
 * cat, get, put, the download's temporary file and remote patterns. */
#ifndef EXEC_CLIENT_CLI_XFER_H
#define EXEC_CLIENT_CLI_XFER_H

#include <stdbool.h>
#include <stddef.h>

#include "cli.h"

struct fs_opts {
    bool r;             /* -r: recursive (rm, cp, get, put) */
    bool f;             /* -f: rm's force */
    bool p;             /* -p: mkdir's parents; get/put: keep times (and modes) */
    bool l;             /* -l: ls's long form */
    bool q;             /* -q: no progress line */
    unsigned max_depth; /* walk --max-depth */
};

/* "exec-client: fs SUB PATH: reason" and exit (1 server, 2 usage, 255 connection). */
void fs_die(const char *sub, const char *path, const ec_error *e) __attribute__((noreturn));
/* Orders ec_dirent by name (qsort). */
int fs_cmp_dirent(const void *a, const void *b);

void fs_guard_install(void);
const char *fs_base_name(const char *path); /* static storage */
char *fs_join(const char *dir, const char *name);
bool fs_ends_with_slash(const char *p);
int fs_cat(struct cli *cli, const struct fs_opts *o, const char *path);
int fs_get_one(struct cli *cli, const struct fs_opts *o, const char *path, const char *local);
int fs_put_one(struct cli *cli, const struct fs_opts *o, const char *local, const char *path);
/* The remote paths matching an absolute pattern, sorted (the path itself when it has
 * no pattern characters); *n is 0 when nothing matches. Free with fs_strv_free. */
char **fs_remote_glob(struct cli *cli, const char *path, size_t *n);
void fs_strv_free(char **v, size_t n);

#endif
