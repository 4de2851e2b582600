/* cgroup_mounts: the cgroup file systems in this process's mount table.
 *
 * A sandbox without namespaces, capped by cgroups, must not write to them: the
 * Landlock ruleset carves their mount points out of every write (landlock.c), and a
 * view seals the ones it shows read-only (view.c). Both read the same table, here. */
#ifndef EXEC_SANDBOX_CGROUP_MOUNTS_H
#define EXEC_SANDBOX_CGROUP_MOUNTS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

/* The next cgroup file system of the mount table f (/proc/self/mountinfo): its mount
 * point, unescaped, in *line's buffer (getline's, *cap its size), and whether it is
 * mounted read-only; NULL at the end. */
char *sandbox_cgroup_mount_next(FILE *f, char **line, size_t *cap, bool *ro);

/* The mount points of every cgroup file system this process sees, a NULL-terminated
 * list into *out (the caller frees each and the list; NULL when none). Returns their
 * count or -errno. */
int sandbox_cgroup_mounts(char ***out);

#endif
