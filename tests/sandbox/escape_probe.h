/*
 * escape_probe.h: what the parts of escape-probe share (escape_probe.c describes the
 * tool): the one result line an attempt prints, the helpers that read an attempt's
 * argument, and the table of attempts each part adds to the dispatch, in the order
 * `escape_probe help` lists them.
 * Not part of the server: a test tool, built by CMake into the build directory.
 */
#ifndef ESCAPE_PROBE_H
#define ESCAPE_PROBE_H

#include <stddef.h>
#include <sys/types.h>

/* ---- output (escape_probe_common.c) ------------------------------------------------ */

/* The errno's name (EPERM, ...), "ok" for 0, "E<n>" for a number without a name. */
const char *probe_errname(int err);

/* One result line, written with a single write(2) so lines of concurrent children never
 * interleave. Tabs and newlines in the detail become spaces. */
void emit_res(const char *name, const char *result, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#define emit(name, err, ...) emit_res((name), probe_errname(err), __VA_ARGS__)

/* errno of a call's result: 0 when it succeeded (r >= 0). */
int rc_err(long r);

/* ---- argument helpers (escape_probe_common.c) -------------------------------------- */

/* Split "A:B" at the first ':' into two strings (B may be empty). */
void split2(const char *arg, char *a, size_t an, char *b, size_t bn);

/* "\n", "\r", "\t" and "\\" escapes, so a shell-free argv can carry a newline. */
size_t unescape(const char *in, char *out, size_t n);

/* The pid an argument names ("self" or nothing: this process). */
pid_t arg_pid(const char *arg);

/* 1 when arg is given, else prints EINVAL "missing argument" for name and returns 0. */
int need_arg(const char *name, const char *arg);

/* ---- the attempts ----------------------------------------------------------------- */

typedef void (*probe_fn)(const char *name, const char *arg);

struct probe_attempt {
    const char *name;
    probe_fn fn;
    const char *help;
    int in_process; /* run in the probe itself, not in a forked child with a 10 s alarm:
                       the whole-table tools fork or trace for themselves, and run long */
};

/* Each part's attempts, ended by an entry whose name is NULL. */
extern const struct probe_attempt probe_ttys[];    /* escape_probe_ttys.c */
extern const struct probe_attempt probe_files[];   /* escape_probe_files.c */
extern const struct probe_attempt probe_procs[];   /* escape_probe_procs.c */
extern const struct probe_attempt probe_kernel[];  /* escape_probe_kernel.c */
extern const struct probe_attempt probe_sockets[]; /* escape_probe_sockets.c */
extern const struct probe_attempt probe_creds[];   /* escape_probe_creds.c */
extern const struct probe_attempt probe_tables[];  /* escape_probe_tables.c */
extern const struct probe_attempt probe_budgets[]; /* escape_probe_budgets.c */

#endif
