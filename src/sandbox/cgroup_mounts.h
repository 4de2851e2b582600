/* cgroup_mounts: the cgroup file systems of this process's mount table
 * (/proc/self/mountinfo), read by the view (to seal writable ones read-only) and by
 * the Landlock ruleset (which grants them reading only), so neither of the
 * two reaches into the other for it. */
#ifndef EXEC_SANDBOX_CGROUP_MOUNTS_H
#define EXEC_SANDBOX_CGROUP_MOUNTS_H

#include <stdbool.h>
#include <stdio.h>

/* The next cgroup file system of the mount table f: its mount point, unescaped, in
 * *line's buffer (getline's, grown as needed), and whether it is mounted read-only;
 * NULL at the end. */
char *sandbox_cgroup_mount_next(FILE *f, char **line, size_t *cap, bool *ro);

/* The mount points of every cgroup file system this process sees, a NULL-terminated
 * list into *out (the caller frees each and the list; NULL when none). Returns their
 * count or -errno. */
int sandbox_cgroup_mounts(char ***out);

#endif
