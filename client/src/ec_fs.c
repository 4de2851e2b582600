/* ec_fs: typed wrappers for the fs methods, and native path <-> file: URI.
 *
 * Paths go out through the server's own encoder (proto/uri's uri_from_path: `file://`
 * + the percent-encoded absolute path, every byte that is not printable ASCII, or is
 * one a URL parser would read specially, encoded, so any Linux file name survives the
 * trip and the JSON stays valid UTF-8) and come back percent-decoded. None of these calls is
 * replayed after a reconnect (they fail with EC_ERR_TRANSPORT instead). */
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

/* {"<key>": uri(path)} or NULL (with err filled) for a relative path. */
static json_t *path_params(const char *key, const char *path, ec_error *err)
{
    char *uri = ec_path_to_uri(path);
    if (!uri) {
        ec_fail(err, EC_ERR_USAGE, 0, "`%s` is not an absolute path", path ? path : "(null)");
        return NULL;
    }
    json_t *o = json_object();
    json_object_set_new(o, key, json_string(uri));
    free(uri);
    return o;
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

int ec_fs_read_file(ec_client *c, const char *path, uint8_t **data, size_t *len, ec_error *err)
{
    *data = NULL;
    *len = 0;
    json_t *params = path_params("path", path, err);
    if (!params) return -EC_ERR_USAGE;
    json_t *res = NULL;
    int rc = ec_client_call(c, "fs/readFile", params, &res, err);
    if (rc == 0)
        rc = ec_b64_decode(json_string_value(json_object_get(res, "dataBase64")), data, len, err);
    json_decref(res);
    return rc;
}

int ec_fs_write_file(ec_client *c, const char *path, const void *data, size_t len, ec_error *err)
{
    json_t *params = path_params("path", path, err);
    if (!params) return -EC_ERR_USAGE;
    char *b = ec_b64_encode(data, len);
    json_object_set_new(params, "dataBase64", json_string(b));
    free(b);
    return ec_client_call(c, "fs/writeFile", params, NULL, err);
}

int ec_fs_create_directory(ec_client *c, const char *path, bool recursive, ec_error *err)
{
    json_t *params = path_params("path", path, err);
    if (!params) return -EC_ERR_USAGE;
    json_object_set_new(params, "recursive", json_boolean(recursive));
    return ec_client_call(c, "fs/createDirectory", params, NULL, err);
}

int ec_fs_get_metadata(ec_client *c, const char *path, ec_metadata *out, ec_error *err)
{
    memset(out, 0, sizeof *out);
    json_t *params = path_params("path", path, err);
    if (!params) return -EC_ERR_USAGE;
    json_t *res = NULL;
    int rc = ec_client_call(c, "fs/getMetadata", params, &res, err);
    if (rc == 0) {
        out->is_directory = json_is_true(json_object_get(res, "isDirectory"));
        out->is_file = json_is_true(json_object_get(res, "isFile"));
        out->is_symlink = json_is_true(json_object_get(res, "isSymlink"));
        out->size = (uint64_t)json_integer_value(json_object_get(res, "size"));
        out->created_at_ms = json_integer_value(json_object_get(res, "createdAtMs"));
        out->modified_at_ms = json_integer_value(json_object_get(res, "modifiedAtMs"));
        json_t *mode = json_object_get(res, "mode");
        out->has_mode = json_is_integer(mode);
        out->mode = (unsigned)json_integer_value(mode);
        out->uid = (unsigned)json_integer_value(json_object_get(res, "uid"));
        out->gid = (unsigned)json_integer_value(json_object_get(res, "gid"));
        const char *o = json_string_value(json_object_get(res, "owner"));
        const char *g = json_string_value(json_object_get(res, "group"));
        snprintf(out->owner, sizeof out->owner, "%s", o ? o : "");
        snprintf(out->group, sizeof out->group, "%s", g ? g : "");
    }
    json_decref(res);
    return rc;
}

int ec_fs_set_permissions(ec_client *c, const char *path, unsigned mode, ec_error *err)
{
    if (!ec_client_has_capability(c, "fsPermissions"))
        return ec_fail(err, EC_ERR_USAGE, 0,
                       "the server does not support this (no fsPermissions capability)");
    json_t *params = path_params("path", path, err);
    if (!params) return -EC_ERR_USAGE;
    json_object_del(params, "sandbox");
    json_object_set_new(params, "mode", json_integer(mode & 07777));
    return ec_client_call(c, "fs/setPermissions", params, NULL, err);
}

int ec_fs_remove(ec_client *c, const char *path, bool recursive, bool force, ec_error *err)
{
    json_t *params = path_params("path", path, err);
    if (!params) return -EC_ERR_USAGE;
    json_object_set_new(params, "recursive", json_boolean(recursive));
    json_object_set_new(params, "force", json_boolean(force));
    return ec_client_call(c, "fs/remove", params, NULL, err);
}

int ec_fs_copy(ec_client *c, const char *src, const char *dst, bool recursive, ec_error *err)
{
    json_t *params = path_params("sourcePath", src, err);
    if (!params) return -EC_ERR_USAGE;
    char *d = ec_path_to_uri(dst);
    if (!d) {
        json_decref(params);
        return ec_fail(err, EC_ERR_USAGE, 0, "`%s` is not an absolute path", dst);
    }
    json_object_set_new(params, "destinationPath", json_string(d));
    free(d);
    json_object_set_new(params, "recursive", json_boolean(recursive));
    return ec_client_call(c, "fs/copy", params, NULL, err);
}

int ec_fs_canonicalize(ec_client *c, const char *path, char **out, ec_error *err)
{
    *out = NULL;
    json_t *params = path_params("path", path, err);
    if (!params) return -EC_ERR_USAGE;
    json_t *res = NULL;
    int rc = ec_client_call(c, "fs/canonicalize", params, &res, err);
    if (rc == 0) {
        *out = ec_uri_to_path(json_string_value(json_object_get(res, "path")));
        if (!*out) rc = ec_fail(err, EC_ERR_PROTOCOL, 0, "fs/canonicalize returned no file: URI");
    }
    json_decref(res);
    return rc;
}

int ec_fs_read_directory(ec_client *c, const char *path, ec_dirent **entries, size_t *n,
                         ec_error *err)
{
    *entries = NULL;
    *n = 0;
    json_t *params = path_params("path", path, err);
    if (!params) return -EC_ERR_USAGE;
    json_t *res = NULL;
    int rc = ec_client_call(c, "fs/readDirectory", params, &res, err);
    json_t *arr = json_object_get(res, "entries");
    if (rc == 0 && json_is_array(arr)) {
        size_t cnt = json_array_size(arr);
        ec_dirent *e = xcalloc(cnt ? cnt : 1, sizeof *e);
        size_t i;
        json_t *it;
        json_array_foreach(arr, i, it)
        {
            const char *name = json_string_value(json_object_get(it, "fileName"));
            e[i].name = xstrdup(name ? name : "");
            e[i].is_directory = json_is_true(json_object_get(it, "isDirectory"));
            e[i].is_file = json_is_true(json_object_get(it, "isFile"));
        }
        *entries = e;
        *n = cnt;
    }
    json_decref(res);
    return rc;
}

void ec_dirents_free(ec_dirent *entries, size_t n)
{
    for (size_t i = 0; entries && i < n; i++)
        free(entries[i].name);
    free(entries);
}

int ec_fs_walk(ec_client *c, const char *path, const ec_walk_options *o, ec_walk_entry **entries,
               size_t *n, bool *truncated, ec_error *err)
{
    *entries = NULL;
    *n = 0;
    if (truncated) *truncated = false;
    json_t *params = path_params("path", path, err);
    if (!params) return -EC_ERR_USAGE;
    ec_walk_options def = {0};
    if (!o) o = &def;
    json_object_set_new(params, "options",
                        json_pack("{s:I, s:I, s:I, s:b, s:b}", "maxDepth",
                                  (json_int_t)(o->max_depth ? o->max_depth : 64), "maxDirectories",
                                  (json_int_t)(o->max_directories ? o->max_directories : 10000),
                                  "maxEntries",
                                  (json_int_t)(o->max_entries ? o->max_entries : 50000),
                                  "followDirectorySymlinks", o->follow_directory_symlinks,
                                  "pruneHiddenDirectories", o->prune_hidden_directories));
    json_t *res = NULL;
    int rc = ec_client_call(c, "fs/walk", params, &res, err);
    json_t *arr = json_object_get(res, "entries");
    if (rc == 0 && json_is_array(arr)) {
        size_t cnt = json_array_size(arr), k = 0;
        ec_walk_entry *e = xcalloc(cnt ? cnt : 1, sizeof *e);
        size_t i;
        json_t *it;
        json_array_foreach(arr, i, it)
        {
            char *p = ec_uri_to_path(json_string_value(json_object_get(it, "path")));
            if (!p) continue;
            e[k].path = p;
            const char *kind = json_string_value(json_object_get(it, "kind"));
            e[k].is_directory = kind && strcmp(kind, "directory") == 0;
            k++;
        }
        *entries = e;
        *n = k;
        if (truncated) *truncated = json_is_true(json_object_get(res, "truncated"));
    }
    json_decref(res);
    return rc;
}

void ec_walk_entries_free(ec_walk_entry *entries, size_t n)
{
    for (size_t i = 0; entries && i < n; i++)
        free(entries[i].path);
    free(entries);
}

int ec_fs_open(ec_client *c, const char *handle_id, const char *path, bool write, ec_error *err)
{
    json_t *params = path_params("path", path, err);
    if (!params) return -EC_ERR_USAGE;
    json_object_set_new(params, "handleId", json_string(handle_id));
    if (write) json_object_set_new(params, "mode", json_string("replace"));
    return ec_client_call(c, "fs/open", params, NULL, err);
}

int ec_fs_read_block(ec_client *c, const char *handle_id, uint64_t offset, size_t len,
                     uint8_t **data, size_t *n, bool *eof, ec_error *err)
{
    *data = NULL;
    *n = 0;
    json_t *params = json_pack("{s:s, s:I, s:I}", "handleId", handle_id, "offset",
                               (json_int_t)offset, "len", (json_int_t)len);
    json_t *res = NULL;
    int rc = ec_client_call(c, "fs/readBlock", params, &res, err);
    if (rc == 0) {
        rc = ec_b64_decode(json_string_value(json_object_get(res, "chunk")), data, n, err);
        if (eof) *eof = json_is_true(json_object_get(res, "eof"));
    }
    json_decref(res);
    return rc;
}

int ec_fs_write_block(ec_client *c, const char *handle_id, uint64_t offset, const void *data,
                      size_t len, ec_error *err)
{
    char *b = ec_b64_encode(data, len);
    json_t *params = json_pack("{s:s, s:I, s:s}", "handleId", handle_id, "offset",
                               (json_int_t)offset, "chunk", b);
    free(b);
    return ec_client_call(c, "fs/writeBlock", params, NULL, err);
}

int ec_fs_close(ec_client *c, const char *handle_id, ec_error *err)
{
    return ec_client_call(c, "fs/close", json_pack("{s:s}", "handleId", handle_id), NULL, err);
}
