/* user_shell: the shell environment/info reports, the one a client such as codex then
 * runs commands with (`[path, "-lc", script]`) and snapshots (process/start's
 * shellSnapshot). It comes from the passwd entry of the user the server runs as, not
 * from $SHELL: a service manager or a CI runner often starts the server with SHELL
 * unset, and the reference answers from passwd too (PROTOCOL.md §8.1). */
#ifndef EXEC_CORE_USER_SHELL_H
#define EXEC_CORE_USER_SHELL_H

#include <stddef.h>

enum shell_kind { SHELL_UNKNOWN, SHELL_BASH, SHELL_ZSH, SHELL_SH };

/* The kind of a shell path by its file name ("bash", "/usr/bin/zsh", "sh.exe");
 * SHELL_UNKNOWN for anything else (fish, nologin, an empty string). Pure. */
enum shell_kind user_shell_kind_of(const char *path);

/* "bash", "zsh" or "sh". */
const char *user_shell_kind_name(enum shell_kind kind);

/* Resolves the shell for a login shell `pw_shell` (may be NULL) and a search
 * `path_env` (may be NULL): a bash, zsh or sh login shell is taken as it is;
 * otherwise the first of bash (on path_env, then /bin/bash), zsh (path_env, then
 * /bin/zsh) that exists, else /bin/sh. Writes the path to out (n bytes) and returns
 * its kind. Looks at the file system only for the fallbacks. */
enum shell_kind user_shell_resolve(const char *pw_shell, const char *path_env, char *out, size_t n);

/* The server's shell, resolved once from getpwuid(getuid()) and $PATH, then cached
 * (passwd is read once; a later change to it is seen after a restart). */
const char *user_shell_path(void);
const char *user_shell_name(void);

#endif
