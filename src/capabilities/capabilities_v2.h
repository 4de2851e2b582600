/* capabilities_v2: `capabilities/discoverV2` (capability capabilityDiscoveryV2),
 * the skills and plugins installed on the executor itself (PROTOCOL.md §8.3); see
 * capabilities_v2.c. The method's params are decoded and its reply made in
 * capabilities_rpc.c. */
#ifndef EXEC_CAPABILITIES_CAPABILITIES_V2_H
#define EXEC_CAPABILITIES_CAPABILITIES_V2_H

#include <stdbool.h>
#include <uv.h>

#include "util/buf.h"

struct fs_sandbox;

/* Where to look and how to read. */
struct caproots_v2_query {
    char *codex_home;      /* canonical (core/host_env.h) */
    char *user_home;       /* or NULL */
    struct fs_sandbox *sb; /* the sandbox to read through, or NULL */
    char owner[40];        /* the session id, whose sandbox helper reads */
};

/* The answer: status 0 and the result object's JSON text (valid during the call), or
 * a libuv error the thread pool gave. Called on the loop thread. */
typedef void (*caproots_v2_done_fn)(void *arg, int status, const struct buf *answer);

/* Answers q (loop thread): from the cache at once (done is called before this
 * returns), else from a scan on the thread pool. Takes what q holds. 0, or a libuv
 * error when the scan could not be queued (done is not called). */
int caproots_v2_discover(uv_loop_t *loop, struct caproots_v2_query *q, caproots_v2_done_fn done,
                         void *arg);

/* Compares plugin version directory names as the reference does: SemVer 2.0 order
 * (then build metadata) when both parse, bytewise otherwise. */
int caproots_version_cmp(const char *a, const char *b);

/* Whether s is a plugin id segment ([A-Za-z0-9_-]+) / a version directory name
 * ([A-Za-z0-9.+_-]+, not `.` or `..`). */
bool caproots_plugin_segment_ok(const char *s);
bool caproots_version_segment_ok(const char *s);

#endif
