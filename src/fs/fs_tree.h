/* fs_tree: blocking whole-tree helpers for fs/remove and fs/copy (run on the
 * thread pool only). Each returns 0 or a positive errno. */
#ifndef EXEC_FS_FS_TREE_H
#define EXEC_FS_FS_TREE_H

#include <stdbool.h>

/* Removes `name` under the directory fd `parent`, recursively, never following links. */
int remove_tree_at(int parent, const char *name);
/* Copies a regular file's content and permission bits, overwriting dst. */
int copy_file(const char *src, const char *dst);
/* Re-creates the symlink src at dst with the same target text. */
int copy_link(const char *src, const char *dst);
/* Copies a directory tree without following symlinks (mkdir -p, merge). */
int copy_tree(const char *src, const char *dst);
/* realpath of the longest existing prefix of p plus the rest (malloc'd), or NULL. */
char *resolve_existing_prefix(const char *p);
/* Whether path is a directory (following links). */
bool is_dir(const char *path);
/* mkdir -p of path (modified in place while walking it, restored). */
int mkdir_all(char *path);
/* mkdir -p that refuses to pass through a symlinked component. */
int mkdir_all_nofollow(const char *path);

#endif
