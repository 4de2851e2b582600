/* cgroup_mounts: reading the cgroup file systems from the mount table (see
 * cgroup_mounts.h). */
#include "sandbox/cgroup_mounts.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "util/mem.h"

/* mountinfo's octal escapes ("\040" for a space) decoded in place. */
static void mountinfo_unescape(char *s)
{
    char *o = s;
    for (char *i = s; *i; i++) {
        if (i[0] == '\\' && i[1] >= '0' && i[1] <= '3' && i[2] >= '0' && i[2] <= '7' &&
            i[3] >= '0' && i[3] <= '7') {
            *o++ = (char)((i[1] - '0') * 64 + (i[2] - '0') * 8 + (i[3] - '0'));
            i += 3;
        } else {
            *o++ = *i;
        }
    }
    *o = 0;
}

char *sandbox_cgroup_mount_next(FILE *f, char **line, size_t *cap, bool *ro)
{
    while (getline(line, cap, f) > 0) {
        /* ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTS ... - FSTYPE SOURCE SUPEROPTS */
        char *dash = strstr(*line, " - "), *mnt = *line;
        if (!dash || (strncmp(dash + 3, "cgroup ", 7) && strncmp(dash + 3, "cgroup2 ", 8)))
            continue;
        for (int field = 0; field < 4 && mnt; field++)
            mnt = strchr(mnt, ' ') ? strchr(mnt, ' ') + 1 : NULL;
        char *end = mnt ? strchr(mnt, ' ') : NULL;
        if (!end) continue;
        *end = 0;
        const char *opts = end + 1;
        *ro = !strncmp(opts, "ro", 2) && (opts[2] == ',' || opts[2] == ' ');
        mountinfo_unescape(mnt);
        return mnt;
    }
    return NULL;
}

int sandbox_cgroup_mounts(char ***out)
{
    *out = NULL;
    FILE *f = fopen("/proc/self/mountinfo", "re");
    if (!f) return -errno;
    char *line = NULL, *mnt;
    size_t cap = 0, n = 0;
    bool ro;
    while ((mnt = sandbox_cgroup_mount_next(f, &line, &cap, &ro))) {
        *out = xrealloc(*out, (n + 2) * sizeof **out);
        (*out)[n++] = xstrdup(mnt);
        (*out)[n] = NULL;
    }
    free(line);
    fclose(f);
    return (int)n;
}
