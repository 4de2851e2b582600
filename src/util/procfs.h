/* procfs: one number from a /proc file of "Name:\tvalue" lines (a process's status, a
 * descriptor's fdinfo). The sandbox's init reads them to know who is calling it: the
 * caller's pid, thread group and umask, the process a pidfd stands for. */
#ifndef EXEC_UTIL_PROCFS_H
#define EXEC_UTIL_PROCFS_H

/* The number after "name:" on the line of path that begins with it, read in base (10;
 * 8 for Umask), or -1 when the file cannot be read or has no such line. Only the
 * file's first 2 KiB are read: the fields the callers want come before the long
 * ones (groups, CPU lists). */
long procfs_field(const char *path, const char *name, int base);

#endif
