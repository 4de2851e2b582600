/* fs_tree: blocking whole-tree helpers for fs/remove and fs/copy (run on the
 * thread pool only). Each returns 0 or a negative errno, like libuv. */
#ifndef EXEC_FS_FS_TREE_H
#define EXEC_FS_FS_TREE_H

#include <stdbool.h>

/* Removes `name` under the directory fd `parent`, recursively, never following links. */
int fs_tree_remove_at(int parent, const char *name);
/* Copies a regular file's content and permission bits, overwriting dst. */
int fs_tree_copy_file(const char *src, const char *dst);
/* Re-creates the symlink src at dst with the same target text. */
int fs_tree_copy_link(const char *src, const char *dst);
/* Copies a directory tree without following symlinks (mkdir -p, merge). */
int fs_tree_copy(const char *src, const char *dst);
/* realpath of the longest existing prefix of p plus the rest (malloc'd), or NULL. */
char *fs_tree_resolve_existing_prefix(const char *p);
/* Whether path is a directory (following links). */
bool fs_tree_is_dir(const char *path);
/* mkdir -p of path (modified in place while walking it, restored). */
int fs_tree_mkdir_all(char *path);
/* mkdir -p that refuses to pass through a symlinked component. */
int fs_tree_mkdir_all_nofollow(const char *path);

#endif
