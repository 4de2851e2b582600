/* fs_walk: the directory walk behind fs/walk (PROTOCOL.md section 6.11). */
#ifndef EXEC_FS_FS_WALK_H
#define EXEC_FS_FS_WALK_H

#include <stdbool.h>
#include <stdint.h>

#include "util/buf.h"

/* The hard maxima of the options, and the response budget. */
#define WALK_MAX_DEPTH 64
#define WALK_MAX_DIRS 10000
#define WALK_MAX_ENTRIES 50000
#define WALK_BUDGET (4u << 20)

struct fs_walk_opts {
    uint64_t max_depth;    /* directories deeper than this are listed, not entered */
    uint64_t max_dirs;     /* directories entered, the root included (>= 1) */
    uint64_t max_entries;  /* names examined (>= 1) */
    bool follow_dir_links; /* walk symlinks that lead to directories */
    bool prune_hidden;     /* list but do not enter directories named ".*" */
};

/* Walks root (a native path; trailing slashes are stripped in place) and appends the
 * result object {"entries":[...],"errors":[...],"truncated":b} to out. Returns 0, or
 * the errno of lstat(root) with nothing appended. Blocking; call off the loop. */
int fs_walk(char *root, const struct fs_walk_opts *o, struct buf *out);

#endif
