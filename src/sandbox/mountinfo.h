/* mountinfo: the cgroup file systems of this process's mount table, read from
 * /proc/self/mountinfo (mount points unescaped). Used by the sandbox's init, which may
 * allocate freely. */
#ifndef EXEC_SANDBOX_MOUNTINFO_H
#define EXEC_SANDBOX_MOUNTINFO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

/* The next cgroup file system of the mount table f (an open /proc/self/mountinfo): its mount point,
 * unescaped, in *line's buffer, and whether it is mounted read-only; NULL at the end. */
char *mountinfo_next_cgroup(FILE *f, char **line, size_t *cap, bool *ro);

/* The mount points of every cgroup file system this process sees, a NULL-terminated
 * list into *out (the caller frees each and the list; NULL when none). Returns their
 * count or -errno. */
int sandbox_cgroup_mounts(char ***out);

#endif
