/* host_env: what environment/info says about the host's user and directories, the way
 * the reference derives them, since a client such as codex acts on them:
 *   - the shell: codex runs every command as `[path, "-lc", script]` and snapshots
 *     it (process/start's shellSnapshot). It is the login shell of the user the server
 *     runs as, from the password database, not $SHELL: a service manager or a CI
 *     runner often starts the server with SHELL unset;
 *   - the home directory: $HOME, else (unset or empty) the password entry's;
 *   - the temporary directory: $TMPDIR, else /tmp; a set $TMPDIR is also listed in
 *     temporaryDirectories (codex makes the temporary directories writable in a
 *     workspace-write sandbox).
 * Paths are absolute and lexically normalised (a relative one is taken from the
 * server's working directory; ".", "..", doubled and trailing slashes resolved), as
 * the reference reports them (PROTOCOL.md §8.1). */
#ifndef EXEC_CORE_HOST_ENV_H
#define EXEC_CORE_HOST_ENV_H

#include <stddef.h>

enum shell_kind { SHELL_UNKNOWN, SHELL_BASH, SHELL_ZSH, SHELL_SH };

/* The kind of a shell path by its file name ("bash", "/usr/bin/zsh", "sh.exe");
 * SHELL_UNKNOWN for anything else (fish, nologin, an empty string). Pure. */
enum shell_kind host_env_shell_kind_of(const char *path);

/* "bash", "zsh" or "sh". */
const char *host_env_shell_kind_name(enum shell_kind kind);

/* Resolves the shell for a login shell `pw_shell` (may be NULL) and a search
 * `path_env` (may be NULL): a bash, zsh or sh login shell is taken as it is;
 * otherwise the first of bash (on path_env, then /bin/bash), zsh (path_env, then
 * /bin/zsh) that exists, else /bin/sh. Writes the path to out (n bytes) and returns
 * its kind. Looks at the file system only for the fallbacks. */
enum shell_kind host_env_shell_resolve(const char *pw_shell, const char *path_env, char *out,
                                       size_t n);

/* Writes `path` made absolute against `cwd` (when relative; cwd is absolute) and
 * lexically normalised into out: no ".", no empty component, ".." removes the one
 * before it (at the root it stays the root), no trailing slash. Returns 0, or -1 when
 * out is too small or path is empty. Pure. */
int host_env_path_normalize(const char *path, const char *cwd, char *out, size_t n);

/* The server's shell, resolved once from getpwuid(getuid()) and $PATH (server_run does
 * it at start), then cached: a later change to passwd is seen after a restart. */
const char *host_env_shell_path(void);
const char *host_env_shell_name(void);

/* The home directory into out, normalised: $HOME when set and not empty (NULL when
 * relative: the reference then reports none), else the password entry's (read once).
 * Returns out or NULL. */
const char *host_env_home(char *out, size_t n);

/* The Codex home as the reference finds it: $CODEX_HOME when set and not empty, which
 * must name an existing directory and is returned canonical (symlinks resolved,
 * relative to the working directory; blocking: realpath), else .codex in the home
 * directory, which need not exist. Returns a malloc'd path, or NULL with the
 * reference's reason in *why (malloc'd): `CODEX_HOME points to "X", but that path
 * does not exist` (or `is not a directory`), X quoted as Rust's Debug form does. */
char *host_env_codex_home(char **why);

/* The temporary directory into out: $TMPDIR when set and not empty (relative ones
 * against cwd), else /tmp; *from_env says which. Returns out. */
const char *host_env_temp_dir(const char *cwd, char *out, size_t n, int *from_env);

#endif
