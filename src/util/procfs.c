/* procfs: one number from a /proc file of "Name:\tvalue" lines (see procfs.h). */
#include "util/procfs.h"

#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

long procfs_field(const char *path, const char *name, int base)
{
    char buf[2048];
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return -1;
    ssize_t n = read(fd, buf, sizeof buf - 1); /* procfs gives a small file in one read */
    close(fd);
    if (n <= 0) return -1;
    buf[n] = 0;
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
