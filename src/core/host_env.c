/* host_env: the host's shell, home and temporary directory for environment/info.
 * See host_env.h for why each comes from where it does. */
#include "core/host_env.h"

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/env_vars.h"
#include "util/buf.h"
#include "util/mem.h"

enum shell_kind host_env_shell_kind_of(const char *path)
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

const char *host_env_shell_kind_name(enum shell_kind kind)
{
    switch (kind) {
    case SHELL_BASH: return "bash";
    case SHELL_ZSH: return "zsh";
    default: return "sh";
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

enum shell_kind host_env_shell_resolve(const char *pw_shell, const char *path_env, char *out,
                                       size_t n)
{
    enum shell_kind kind = host_env_shell_kind_of(pw_shell);
    if (kind != SHELL_UNKNOWN && strlen(pw_shell) < n) {
        snprintf(out, n, "%s", pw_shell);
        return kind;
    }
    if (find_shell("bash", path_env, "/bin/bash", out, n) == 0) return SHELL_BASH;
    if (find_shell("zsh", path_env, "/bin/zsh", out, n) == 0) return SHELL_ZSH;
    snprintf(out, n, "/bin/sh");
    return SHELL_SH;
}

/* Appends one component (len bytes) to the normalised prefix out[0..*len). */
static int push_component(char *out, size_t n, size_t *len, const char *c, size_t clen)
{
    if (clen == 0 || (clen == 1 && c[0] == '.')) return 0;
    if (clen == 2 && c[0] == '.' && c[1] == '.') {
        while (*len > 0 && out[*len - 1] != '/')
            (*len)--;
        if (*len > 0) (*len)--; /* the slash before it */
        return 0;
    }
    if (*len + 1 + clen >= n) return -1;
    out[(*len)++] = '/';
    memcpy(out + *len, c, clen);
    *len += clen;
    return 0;
}

static int push_path(char *out, size_t n, size_t *len, const char *p)
{
    while (*p) {
        size_t clen = strcspn(p, "/");
        if (push_component(out, n, len, p, clen) < 0) return -1;
        p += clen;
        while (*p == '/')
            p++;
    }
    return 0;
}

int host_env_path_normalize(const char *path, const char *cwd, char *out, size_t n)
{
    if (!path || !*path || n < 2) return -1;
    size_t len = 0;
    if (path[0] != '/' && (!cwd || push_path(out, n, &len, cwd) < 0)) return -1;
    if (push_path(out, n, &len, path) < 0) return -1;
    if (len == 0) out[len++] = '/';
    out[len] = '\0';
    return 0;
}

/* The password entry of the server's user, read once (getpwuid_r reads /etc/passwd
 * or asks NSS: not something to repeat per request on the loop thread). */
static pthread_once_t pw_once_flag = PTHREAD_ONCE_INIT;
static struct {
    char shell_path[4096];
    enum shell_kind shell_kind;
    char home[4096];
} pw_cache;

static void pw_read(void)
{
    struct passwd pw, *found = NULL;
    char buf[8192];
    const char *login = NULL;
    if (getpwuid_r(getuid(), &pw, buf, sizeof buf, &found) == 0 && found) {
        login = pw.pw_shell;
        if (pw.pw_dir && pw.pw_dir[0] == '/')
            (void)host_env_path_normalize(pw.pw_dir, NULL, pw_cache.home, sizeof pw_cache.home);
    }
    pw_cache.shell_kind = host_env_shell_resolve(login, env_vars.path, pw_cache.shell_path,
                                                 sizeof pw_cache.shell_path);
}

/* Any thread may ask first (fs workers do). */
static void pw_once(void)
{
    pthread_once(&pw_once_flag, pw_read);
}

const char *host_env_shell_path(void)
{
    pw_once();
    return pw_cache.shell_path;
}

const char *host_env_shell_name(void)
{
    pw_once();
    return host_env_shell_kind_name(pw_cache.shell_kind);
}

const char *host_env_home(char *out, size_t n)
{
    const char *home = env_vars.home;
    if (home && *home) {
        if (home[0] != '/') return NULL;
        return host_env_path_normalize(home, NULL, out, n) == 0 ? out : NULL;
    }
    pw_once();
    if (!pw_cache.home[0] || strlen(pw_cache.home) >= n) return NULL;
    memcpy(out, pw_cache.home, strlen(pw_cache.home) + 1);
    return out;
}

const char *host_env_temp_dir(const char *cwd, char *out, size_t n, int *from_env)
{
    const char *tmp = env_vars.tmpdir;
    *from_env = 0;
    /* An empty TMPDIR counts as unset (ours; the reference then reports its cwd). */
    if (tmp && *tmp && host_env_path_normalize(tmp, cwd, out, n) == 0) {
        *from_env = 1;
        return out;
    }
    snprintf(out, n, "/tmp");
    return out;
}

/* s quoted as Rust's Debug form quotes a string (the reference's errors name
 * CODEX_HOME so). */
static void quote_debug(struct buf *b, const char *s)
{
    buf_putc(b, '"');
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\')
            buf_printf(b, "\\%c", c);
        else if (c == '\n')
            buf_puts(b, "\\n");
        else if (c == '\r')
            buf_puts(b, "\\r");
        else if (c == '\t')
            buf_puts(b, "\\t");
        else if (c < 0x20 || c == 0x7f)
            buf_printf(b, "\\u{%x}", c);
        else
            buf_putc(b, (char)c);
    }
    buf_putc(b, '"');
}

char *host_env_codex_home(char **why)
{
    *why = NULL;
    const char *env = env_vars.codex_home;
    if (!env || !*env) {
        char home[PATH_MAX];
        struct buf b;
        buf_init(&b);
        const char *h = host_env_home(home, sizeof home);
        buf_printf(&b, "%s/.codex", h && strcmp(h, "/") ? h : "");
        buf_putc(&b, '\0');
        return buf_steal(&b);
    }
    char real[PATH_MAX];
    struct stat st;
    const char *path_is = NULL; /* "does not exist", "is not a directory" */
    int err = 0;
    if (!realpath(env, real)) {
        if (errno == ENOENT)
            path_is = "does not exist";
        else
            err = errno;
    } else if (stat(real, &st) < 0 || !S_ISDIR(st.st_mode)) {
        path_is = "is not a directory";
    } else {
        return xstrdup(real);
    }
    struct buf b;
    buf_init(&b);
    buf_puts(&b, "CODEX_HOME points to ");
    quote_debug(&b, env);
    if (path_is)
        buf_printf(&b, ", but that path %s", path_is);
    else
        buf_printf(&b, ", which cannot be resolved: %s", strerror(err));
    buf_putc(&b, '\0');
    *why = buf_steal(&b);
    return NULL;
}
