/* ec_codec: the encodings of the wire that the client's modules share, native path
 * <-> file: URI and base64, depending on nothing of the client but ec_util.
 *
 * Paths go out through the server's own encoder (proto/uri's uri_from_path: `file://`
 * + the percent-encoded absolute path, every byte that is not printable ASCII, or is
 * one a URL parser would read specially, encoded, so any Linux file name survives the
 * trip and the JSON stays valid UTF-8) and come back percent-decoded. */
#include "ec_internal.h"

#include "proto/base64.h"
#include "proto/hex.h"
#include "proto/uri.h"
#include "util/mem.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Resolves "." and ".." segments lexically, as the server's URI parser did with the
 * URIs this client used to send (file:///a/../b named /b: WHATWG path parsing, never
 * above the root, a final dot segment leaving a trailing slash). uri_from_path sends a
 * path with dot segments in its opaque form, taken literally, which would let the
 * kernel resolve ".." after a symlink instead; resolving here first keeps what a path
 * names the same as before. Returns a malloc'd absolute path. */
static char *ec_path_resolve_dots(const char *path)
{
    size_t n = strlen(path);
    char *out = xmalloc(n + 2);
    size_t o = 0;
    const char *s = path + 1; /* past the leading '/' */
    for (;;) {
        const char *e = strchr(s, '/');
        size_t len = e ? (size_t)(e - s) : strlen(s);
        if (len == 2 && s[0] == '.' && s[1] == '.') {
            /* drop the last segment ("/x" of out), never the root */
            while (o > 0 && out[o - 1] != '/')
                o--;
            if (o > 0) o--;
            if (!e) out[o++] = '/';
        } else if (len == 1 && s[0] == '.') {
            if (!e) out[o++] = '/';
        } else {
            out[o++] = '/';
            memcpy(out + o, s, len);
            o += len;
        }
        if (!e) break;
        s = e + 1;
    }
    out[o] = 0;
    return out;
}

/* The server's encoder (proto/uri, from execproto) after resolving dot segments: one
 * encoder on both sides, so a path the server's parser would misread (a first
 * component like "C:", taken as a Windows drive) goes in its opaque form instead. */
char *ec_path_to_uri(const char *path)
{
    if (!path || path[0] != '/') return NULL;
    char *p = ec_path_resolve_dots(path);
    char *uri = uri_from_path(p, strlen(p));
    free(p);
    return uri;
}

char *ec_uri_to_path(const char *uri)
{
    if (!uri || strncmp(uri, "file:", 5) != 0) return NULL;
    const char *p = uri + 5;
    if (strncmp(p, "//", 2) == 0) {
        p += 2;
        if (strncmp(p, "localhost/", 10) == 0)
            p += 9;
        else if (*p != '/')
            return NULL; /* a remote host has no local path */
    }
    char *out = xmalloc(strlen(p) + 1), *o = out;
    for (; *p; p++) {
        int hi = *p == '%' ? hex_value((unsigned char)p[1]) : -1;
        int lo = hi >= 0 ? hex_value((unsigned char)p[2]) : -1;
        if (lo >= 0) {
            *o++ = (char)(hi << 4 | lo);
            p += 2;
        } else {
            *o++ = *p;
        }
    }
    *o = 0;
    return out;
}

int ec_b64_decode(const char *s, uint8_t **data, size_t *len, ec_error *err)
{
    if (!s) return ec_fail(err, EC_ERR_PROTOCOL, 0, "reply without base64 data");
    size_t n = strlen(s);
    uint8_t *buf = xmalloc(base64_decoded_max(n) + 1);
    char detail[64];
    size_t out = 0;
    if (base64_decode(s, n, buf, &out, detail, sizeof detail) != 0) {
        free(buf);
        return ec_fail(err, EC_ERR_PROTOCOL, 0, "bad base64 from the server: %s", detail);
    }
    buf[out] = 0;
    *data = buf;
    *len = out;
    return 0;
}

char *ec_b64_encode(const void *data, size_t len)
{
    char *b = xmalloc(base64_encoded_len(len) + 1);
    b[base64_encode(data, len, b)] = 0;
    return b;
}
