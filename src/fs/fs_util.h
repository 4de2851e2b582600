/* fs_util: small pure path helpers for the fs methods. */
#ifndef EXEC_FS_FS_UTIL_H
#define EXEC_FS_FS_UTIL_H

#include <stddef.h>

/* Removes trailing slashes from p in place (keeping a lone "/"); returns p. */
char *fs_path_strip_slashes(char *p);
/* a + "/" + b (no doubled slash when a ends in one); malloc'd, the caller frees. */
char *fs_path_join(const char *a, const char *b);

#endif
