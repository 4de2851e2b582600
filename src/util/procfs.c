/* procfs: numbers from /proc files (see procfs.h). */
#include "util/procfs.h"

#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The start of the file at dir/path into buf, NUL-terminated; its length, or -1 (nothing
 * read). procfs gives a small file in one read. */
static ssize_t read_start(int dir, const char *path, char *buf, size_t size)
{
    int fd = openat(dir, path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return -1;
    ssize_t n = read(fd, buf, size - 1);
    close(fd);
    if (n <= 0) return -1;
    buf[n] = 0;
    return n;
}

long procfs_field(const char *path, const char *name, int base)
{
    char buf[2048];
    if (read_start(AT_FDCWD, path, buf, sizeof buf) < 0) return -1;
    size_t len = strlen(name);
    /* At a line's start only: "Pid:" is also the end of "PPid:" and "TracerPid:". */
    for (const char *line = buf; line;) {
        if (!strncmp(line, name, len) && line[len] == ':') {
            char *end;
            long v = strtol(line + len + 1, &end, base);
            return end == line + len + 1 ? -1 : v;
        }
        line = strchr(line, '\n');
        if (line) line++;
    }
    return -1;
}

long procfs_number(int dir, const char *path)
{
    char buf[32], *end;
    if (read_start(dir, path, buf, sizeof buf) < 0) return -1;
    long v = strtol(buf, &end, 10);
    return end == buf || v < 0 ? -1 : v;
}
