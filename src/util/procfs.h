/* procfs: numbers from /proc files. Two shapes: a file of "Name:\tvalue" lines (a
 * process's status, a descriptor's fdinfo), which the sandbox's init reads to know who
 * is calling it (the caller's pid, thread group and umask, the process a pidfd stands
 * for); and a file of one number (a sysctl), which the spawner reads for the kernel's
 * per-user limits (sandbox/user_budgets.h). */
#ifndef EXEC_UTIL_PROCFS_H
#define EXEC_UTIL_PROCFS_H

/* The number after "name:" on the line of path that begins with it, read in base (10;
 * 8 for Umask), or -1 when the file cannot be read or has no such line. Only the
 * file's first 2 KiB are read: the fields the callers want come before the long
 * ones (groups, CPU lists). */
long procfs_field(const char *path, const char *name, int base);

/* The number a file of one holds, at path relative to the directory descriptor dir (or
 * AT_FDCWD), or -1 when it cannot be read or holds no number from 0 up. */
long procfs_number(int dir, const char *path);

#endif
