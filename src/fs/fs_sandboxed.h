/* fs_sandboxed: the entry point the sandbox helper uses to run fs operations.
 *
 * fs_methods.c encodes a validated fs request as a frame; the helper decodes it
 * and runs the very same operation code the daemon runs on its thread pool, then
 * returns the result JSON text or the error as a reply frame. */
#ifndef EXEC_FS_FS_SANDBOXED_H
#define EXEC_FS_FS_SANDBOXED_H

#include <stddef.h>

#include "util/buf.h"

/* Serves one request frame: appends the reply frame to *reply and sets *fd_out to
 * an fd to pass back (fs/open) or -1, and *close_after to an fd to close once the
 * reply is sent (a file a write displaced, fs_work.h) or -1. Only the operations
 * fs_op_table.c gives the helper are run; anything else gets an error reply. Returns 0, or
 * -EPROTO for a malformed frame or an operation the helper does not serve (the reply
 * then says so). */
int fs_helper_serve(const void *req, size_t len, struct buf *reply, int *fd_out, int *close_after);

/* The scan OP_DISCOVER runs (capabilities/caproots_scan.h): one capability root read
 * into a JSON object appended to out. Capability discovery sits above fs, yet its scan
 * must run inside the sandbox helper like any fs operation, so main installs it first
 * thing, in the daemon and in the spawner (the same program started again, whose
 * children the helpers are). Unset, OP_DISCOVER fails with ENOSYS. */
typedef void (*fs_discover_fn)(const char *root, const char *root_uri, struct buf *out);
void fs_set_discover(fs_discover_fn scan);

/* The helper's whole life on its socket (fs_helper_loop.c): says "ok", then serves
 * request frames until EOF. Returns an exit status. */
int fs_helper_run(int sock);

#endif
