/* user_shell: which shell this host's user logs in with, for environment/info.
 * See user_shell.h for why passwd and not $SHELL. */
#include "core/user_shell.h"

#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

enum shell_kind user_shell_kind_of(const char *path)
{
    if (!path) return SHELL_UNKNOWN;
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    /* The file stem: "bash.exe" is bash, "bash5.2" is not (its stem is "bash5"). */
    const char *dot = strrchr(base, '.');
    size_t len = dot && dot != base ? (size_t)(dot - base) : strlen(base);
    if (len == 4 && !memcmp(base, "bash", 4)) return SHELL_BASH;
    if (len == 3 && !memcmp(base, "zsh", 3)) return SHELL_ZSH;
    if (len == 2 && !memcmp(base, "sh", 2)) return SHELL_SH;
    return SHELL_UNKNOWN;
}

const char *user_shell_kind_name(enum shell_kind kind)
{
    switch (kind) {
    case SHELL_BASH:
        return "bash";
    case SHELL_ZSH:
        return "zsh";
    default:
        return "sh";
    }
}

static int is_executable_file(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode) && access(path, X_OK) == 0;
}

/* `name` on the colon-separated search path, else at `fallback`; 0 when found. */
static int find_shell(const char *name, const char *path_env, const char *fallback, char *out,
                      size_t n)
{
    for (const char *p = path_env; p && *p;) {
        const char *colon = strchr(p, ':');
        size_t dlen = colon ? (size_t)(colon - p) : strlen(p);
        /* Only absolute entries: a relative one would depend on the server's cwd. */
        if (dlen > 0 && p[0] == '/') {
            int w = snprintf(out, n, "%.*s/%s", (int)dlen, p, name);
            if (w > 0 && (size_t)w < n && is_executable_file(out)) return 0;
        }
        p = colon ? colon + 1 : NULL;
    }
    if (strlen(fallback) >= n || !is_executable_file(fallback)) return -1;
    snprintf(out, n, "%s", fallback);
    return 0;
}

enum shell_kind user_shell_resolve(const char *pw_shell, const char *path_env, char *out, size_t n)
{
    enum shell_kind kind = user_shell_kind_of(pw_shell);
    if (kind != SHELL_UNKNOWN && strlen(pw_shell) < n) {
        snprintf(out, n, "%s", pw_shell);
        return kind;
    }
    if (find_shell("bash", path_env, "/bin/bash", out, n) == 0) return SHELL_BASH;
    if (find_shell("zsh", path_env, "/bin/zsh", out, n) == 0) return SHELL_ZSH;
    snprintf(out, n, "/bin/sh");
    return SHELL_SH;
}

static char cached_path[4096];
static enum shell_kind cached_kind = SHELL_UNKNOWN;

static void resolve_once(void)
{
    if (cached_path[0]) return;
    /* getpwuid_r reads /etc/passwd (or NSS) once, on the first environment/info. */
    struct passwd pw, *found = NULL;
    char buf[4096];
    const char *login = NULL;
    if (getpwuid_r(getuid(), &pw, buf, sizeof buf, &found) == 0 && found) login = pw.pw_shell;
    cached_kind = user_shell_resolve(login, getenv("PATH"), cached_path, sizeof cached_path);
}

const char *user_shell_path(void)
{
    resolve_once();
    return cached_path;
}

const char *user_shell_name(void)
{
    resolve_once();
    return user_shell_kind_name(cached_kind);
}
