/* process_path: the directory the server puts first on the PATH its children
 * inherit (environment/info `prependPathDirs`, PROTOCOL.md §8.3).
 *
 * The reference ships ripgrep in a `codex-path` directory beside its binary,
 * prepends that directory to its own PATH at start and reports it, so a model's
 * `rg` works on hosts without ripgrep. We depend on Debian's ripgrep instead and
 * expose it the same way: a private directory (mkdtemp, mode 0700) holding only a
 * symlink `rg` to the installed binary, so nothing else of /usr/bin is prepended a
 * second time. Only children that inherit the server's PATH (envPolicy `all` or
 * `core` without a PATH of their own) see it; an explicit PATH is left alone, as
 * on the reference. The directory is removed when the process exits normally. */
#include "session/process_path.h"

#include <errno.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/env_vars.h"
#include "core/log.h"
#include "util/mem.h"

static char dir_path[PATH_MAX];
static char link_path[PATH_MAX + 4];
static pid_t owner_pid;

static bool is_exec_file(const char *p)
{
    struct stat st;
    return stat(p, &st) == 0 && S_ISREG(st.st_mode) && access(p, X_OK) == 0;
}

/* Debian's ripgrep, else the first `rg` on the PATH we were started with. */
static bool find_rg(char *out, size_t n)
{
    if (is_exec_file("/usr/bin/rg")) {
        snprintf(out, n, "/usr/bin/rg");
        return true;
    }
    const char *path = env_vars.path;
    while (path && *path) {
        size_t len = strcspn(path, ":");
        if (len > 0 && path[0] == '/' && len + 4 < n) {
            snprintf(out, n, "%.*s/rg", (int)len, path);
            if (is_exec_file(out)) return true;
        }
        path += len + (path[len] == ':');
    }
    return false;
}

static void remove_dir(void)
{
    /* Only the process that made it: a forked child that exits must not. */
    if (!dir_path[0] || getpid() != owner_pid) return;
    unlink(link_path);
    rmdir(dir_path);
    dir_path[0] = 0;
}

int process_path_init(void)
{
    if (dir_path[0]) return 0;
    char rg[PATH_MAX];
    if (!find_rg(rg, sizeof rg)) {
        log_warn("ripgrep (rg) not found: environment/info reports no prependPathDirs");
        return -ENOENT;
    }
    const char *tmp = env_vars.tmpdir;
    if (!tmp || tmp[0] != '/') tmp = "/tmp";
    char templ[PATH_MAX];
    if (strlen(tmp) > sizeof templ - 64) return -ENAMETOOLONG;
    snprintf(templ, sizeof templ, "%s/exec-server-path.XXXXXX", tmp);
    if (!mkdtemp(templ)) {
        int e = errno;
        log_warn("cannot make the rg directory in %s: %s", tmp, strerror(e));
        return -e;
    }
    snprintf(dir_path, sizeof dir_path, "%s", templ);
    snprintf(link_path, sizeof link_path, "%s/rg", templ);
    if (symlink(rg, link_path) < 0) {
        int e = errno;
        rmdir(dir_path);
        dir_path[0] = 0;
        log_warn("cannot link %s into the rg directory: %s", rg, strerror(e));
        return -e;
    }
    owner_pid = getpid();
    atexit(remove_dir);
    /* The PATH children inherit, and the one read from here on (host_env's shell
     * fallback): env_vars takes the new string. */
    const char *old = env_vars.path;
    char *np = old && *old ? xasprintf("%s:%s", dir_path, old) : xstrdup(dir_path);
    setenv("PATH", np, 1);
    free((char *)env_vars.path);
    env_vars.path = np;
    return 0;
}

const char *process_path_dir(void)
{
    return dir_path[0] ? dir_path : NULL;
}
