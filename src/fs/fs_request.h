/* fs_request: one fs operation as the daemon validated it, the one description of it
 * that the request handlers fill (fs_methods.c), the operation code reads (fs_ops.c,
 * on a pool thread or in the sandboxed helper) and the helper's wire carries whole
 * (fs_wire.h), and the table of the operations: their audit records, which the helper
 * serves and the system calls each makes there (fs_op_table.c).
 *
 * A flag or limit added to the head below crosses to the helper with no other edit:
 * fs_wire.c copies the head as it lies in memory (both ends are one build) and checks
 * its flag bytes on decode. Pure data, no I/O: the codec's tests and fuzzer use it. */
#ifndef EXEC_FS_FS_REQUEST_H
#define EXEC_FS_FS_REQUEST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum fs_op {
    OP_READ_FILE,
    OP_WRITE_FILE,
    OP_CREATE_DIR,
    OP_METADATA,
    OP_CANONICALIZE,
    OP_READ_DIR,
    OP_REMOVE,
    OP_COPY,
    OP_WALK,
    OP_OPEN,
    OP_READ_BLOCK,
    OP_WRITE_BLOCK,
    OP_DISCOVER, /* capabilityRoots/discoverV1, one root (capability_roots.h) */
    FS_OP_COUNT
};

struct fs_request {
    /* ---- the head: on the wire byte for byte (fs_wire.c), so no pointer in it ---- */
    enum fs_op op;
    /* Flags, one byte each. A new one goes at the end of this line and takes a byte
     * of spare (the static assertion below fails until it does). */
    bool recursive, force, nofollow, follow_dir_links, prune_hidden, replace, fsync;
    uint8_t spare[5]; /* always zero on the wire: the head has no hidden padding */
    uint64_t max_depth, max_dirs, max_entries; /* fs/walk's limits */
    size_t path_len, path2_len, b64_len;       /* the byte strings after the head */
    /* ---- after the head on the wire: its byte strings, in this order ---- */
    char *path;      /* the native path: owned, NUL-terminated (NULL for handle I/O) */
    char *path2;     /* copy's destination (capability discovery: the root's URI), or NULL */
    const char *b64; /* writeFile dataBase64, writeBlock chunk: borrowed from the request
                        (or the helper's request frame), which outlives the operation */
};

/* What crosses as it is: the head, up to the first byte string's pointer. */
#define FS_REQUEST_HEAD_SIZE offsetof(struct fs_request, path)

_Static_assert(sizeof(enum fs_op) == sizeof(uint32_t), "the op is 32 bits on the wire");
_Static_assert(offsetof(struct fs_request, spare) + sizeof((struct fs_request *)0)->spare ==
                   offsetof(struct fs_request, max_depth),
               "a new flag takes a byte of spare: the head keeps no hidden padding");

/* One operation's entry in the table (fs_op_table.c). */
struct fs_op_info {
    const char *name;  /* as logs and tests name it */
    const char *audit; /* its audit record's type (docs/AUDIT.md), or NULL for none */
    bool changes;      /* it changes files: always recorded (a read only with
                          --audit-fs-reads; fs/open: by its mode) */
    bool helper;       /* the sandboxed helper serves it (path-based: handle I/O stays in
                          the daemon, on the fd fs/open passed back) */
    /* The system calls (numbers, <sys/syscall.h>) it makes in the helper, beside those
     * of the helper's own loop (fs_op_helper_loop_calls); -1 ends the list. Checked
     * against the helper's seccomp allowlist by tests/unit/test_seccomp.c, so a call
     * missing there fails a test, not a request with ENOSYS. */
    const int *calls;
};

/* The entry of op, or NULL for a number that is no operation (a frame's op is not
 * trusted). */
const struct fs_op_info *fs_op_info(uint32_t op);
/* Whether the sandboxed helper serves op. */
bool fs_op_helper_serves(uint32_t op);
/* The calls of the helper's request loop and of every operation (memory, its socket,
 * its signals), -1 ended. */
extern const int fs_op_helper_loop_calls[];

#endif
