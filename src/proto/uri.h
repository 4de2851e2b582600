/* uri: file: URIs <-> native paths (PROTOCOL.md section 6.1).
 *
 * Paths travel as percent-encoded file: URIs, which carry any byte, so file names
 * that are not UTF-8 work both ways. Used by every fs method and by
 * process/start's cwd. Pure functions, no I/O; unit-tested and fuzzed. */
#ifndef EXEC_PROTO_URI_H
#define EXEC_PROTO_URI_H

#include <stdbool.h>
#include <stddef.h>

enum uri_error_kind {
    URI_ERR_SYNTAX,   /* not a URI at all / relative: "invalid URI: ..." (-32602) */
    URI_ERR_SCHEME,   /* "unsupported path URI scheme `http`" (-32602) */
    URI_ERR_QUERY,    /* "query parameters are not allowed in path URIs" (-32602) */
    URI_ERR_FRAGMENT, /* "fragments are not allowed in path URIs" (-32602) */
    URI_ERR_PLATFORM, /* "'<uri>' is invalid on 'linux'": NUL byte (-32602) */
    URI_ERR_HOST,     /* "'<uri>' is invalid on 'linux'": foreign host (-32600) */
    URI_ERR_DRIVE,    /* "'<uri>' is invalid on 'linux'": a Windows drive (-32602) */
};

/* A codec reports what went wrong; the JSON-RPC code each kind gets (shown above,
 * the reference's) is the rpc layer's business: rpc_uri_error_code(). */
struct uri_error {
    enum uri_error_kind kind;
    char message[512]; /* the reference's text */
};

/* Parses uri (len bytes, need not be NUL-terminated) into an absolute native path
 * with dot segments resolved and percent escapes decoded. When allow_bare_path is
 * true a string starting with '/' is taken as a native path as is (process/start's
 * cwd, PROTOCOL.md decision (d)). On success returns 0 and stores a malloc'd,
 * NUL-terminated path (the caller frees it) in *out and its length in *out_len.
 * On failure returns -EINVAL and fills *err. */
int uri_to_path(const char *uri, size_t len, bool allow_bare_path, char **out, size_t *out_len,
                struct uri_error *err);

/* Encodes an absolute native path (len bytes) as a file: URI. Returns a malloc'd
 * NUL-terminated string the caller frees. */
char *uri_from_path(const char *path, size_t len);

#endif
