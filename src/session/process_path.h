/* process_path: the private directory holding `rg` that the server prepends to
 * its own PATH and reports as environment/info `prependPathDirs` (see
 * process_path.c). */
#ifndef EXEC_SESSION_PROCESS_PATH_H
#define EXEC_SESSION_PROCESS_PATH_H

/* Makes the directory and prepends it to this process's PATH. Call once at start,
 * before any thread or child exists (it calls setenv). Returns 0, or a negative
 * errno when ripgrep is not installed or the directory cannot be made (then
 * nothing is prepended and nothing reported). */
int process_path_init(void);

/* The directory, or NULL when process_path_init did not make one. */
const char *process_path_dir(void);

#endif
