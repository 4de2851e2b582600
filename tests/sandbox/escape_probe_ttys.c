/*
 * escape_probe_ttys: the terminal attempts: pushing input into a tty another
 * process reads (TIOCSTI), writing to one, finding and opening /dev/pts entries that are
 * not the sandbox's own, and the virtual console's TIOCLINUX.
 * Part of escape-probe (escape_probe.c); a test tool, not part of the server.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "escape_probe.h"

#ifndef TIOCL_GETSHIFTSTATE
#define TIOCL_GETSHIFTSTATE 6
#endif

#define TEXT_MAX 1024

/* arg "PATH TEXT" (TEXT with escapes): PATH opened with flags into the return value,
 * TEXT unescaped into text (its length in *n); -1 once the failure is reported. */
static int open_with_text(const char *name, const char *arg, int flags, char *path, char *text,
                          size_t *n)
{
    char raw[TEXT_MAX];
    if (!need_arg(name, arg)) return -1;
    split2(arg, path, PATH_MAX, raw, sizeof raw);
    *n = unescape(raw, text, TEXT_MAX);
    int fd = open(path, flags | O_NOCTTY | O_NONBLOCK);
    if (fd < 0) emit(name, errno, "open %s", path);
    return fd;
}

static void at_tiocsti(const char *name, const char *arg)
{
    char path[PATH_MAX], text[TEXT_MAX];
    size_t n;
    int fd = open_with_text(name, arg, O_RDWR, path, text, &n);
    if (fd < 0) return;
    for (size_t i = 0; i < n; i++) {
        if (ioctl(fd, TIOCSTI, &text[i]) < 0) {
            emit(name, errno, "ioctl TIOCSTI after %zu of %zu bytes", i, n);
            close(fd);
            return;
        }
    }
    emit(name, 0, "pushed %zu bytes into %s", n, path);
    close(fd);
}

static void at_ptywrite(const char *name, const char *arg)
{
    char path[PATH_MAX], text[TEXT_MAX];
    size_t n;
    int fd = open_with_text(name, arg, O_WRONLY, path, text, &n);
    if (fd < 0) return;
    ssize_t w = write(fd, text, n);
    emit(name, rc_err(w), "wrote %zd of %zu bytes to %s", w, n, path);
    close(fd);
}

/* Every /dev/pts/N visible here, and which of them open read-write. */
static void at_ptslist(const char *name, const char *arg)
{
    char entries[1024] = "", opened[1024] = "";
    int first_err = 0, numeric = 0, nopen = 0;
    DIR *d = opendir("/dev/pts");
    if (!d) {
        emit(name, errno, "opendir /dev/pts");
        return;
    }
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.') continue;
        size_t l = strlen(entries);
        snprintf(entries + l, sizeof entries - l, "%s%s", l ? "," : "", e->d_name);
        if (e->d_name[0] < '0' || e->d_name[0] > '9') continue;
        numeric++;
        char p[300];
        snprintf(p, sizeof p, "/dev/pts/%s", e->d_name);
        int fd = open(p, O_RDWR | O_NOCTTY | O_NONBLOCK);
        if (fd < 0) {
            if (!first_err) first_err = errno;
            continue;
        }
        close(fd);
        nopen++;
        l = strlen(opened);
        snprintf(opened + l, sizeof opened - l, "%s%s", l ? "," : "", e->d_name);
    }
    closedir(d);
    (void)arg;
    emit(name, nopen ? 0 : numeric ? first_err : ENOENT, "entries=%s opened=%s", entries, opened);
}

static void at_tioclinux(const char *name, const char *arg)
{
    const char *path = arg && *arg ? arg : "/dev/tty0";
    int fd = open(path, O_RDWR | O_NOCTTY | O_NONBLOCK);
    if (fd < 0) {
        emit(name, errno, "open %s", path);
        return;
    }
    char sub[2] = {TIOCL_GETSHIFTSTATE, 0};
    emit(name, rc_err(ioctl(fd, TIOCLINUX, sub)), "ioctl TIOCLINUX on %s", path);
    close(fd);
}

const struct probe_attempt probe_ttys[] = {
    {"tiocsti", at_tiocsti, "PATH:TEXT  push TEXT into a tty's input (TIOCSTI)", 0},
    {"ptywrite", at_ptywrite, "PATH:TEXT  write TEXT to a tty", 0},
    {"ptslist", at_ptslist, "list /dev/pts and open every numbered entry", 0},
    {"tioclinux", at_tioclinux, "[PATH]  TIOCLINUX on a tty (default /dev/tty0)", 0},
    {NULL, NULL, NULL, 0},
};
