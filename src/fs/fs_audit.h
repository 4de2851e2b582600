/* fs_audit: the fs methods' audit records (see fs_audit.c). Loop thread. */
#ifndef EXEC_FS_FS_AUDIT_H
#define EXEC_FS_FS_AUDIT_H

#include <stddef.h>
#include <stdint.h>

#include "fs/fs_work.h"

/* The record of a finished operation (nothing when it is not recorded). */
void fs_audit_op(const struct fs_work *fw);
/* The bytes a base64 payload of len characters holds (before the worker decodes
 * it in place). */
uint64_t fs_audit_payload_bytes(const char *b64, size_t len);
/* A copy of an opened handle's path for its later records (NULL without a log). */
char *fs_audit_handle_path(const char *path);
/* fs/setPermissions: path, the mode asked for, the result (0 or -errno). */
void fs_audit_chmod(const char *session, const char *path, unsigned mode, int result);
/* fs/rename: source, destination, the error's errno (0 when it worked). */
void fs_audit_rename(const char *session, const char *src, const char *dst, int err);

#endif
