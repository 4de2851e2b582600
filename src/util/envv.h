/* envv: a NULL-terminated "NAME=value" array (an envp for execve) edited in place. */
#ifndef EXEC_UTIL_ENVV_H
#define EXEC_UTIL_ENVV_H

/* Sets NAME=value in envp (malloc'd array of malloc'd strings, or NULL): replaces the
 * entry for name, else appends one. Returns the (possibly moved) array. */
char **envv_put(char **envp, const char *name, const char *value);

#endif
