/* ec_fs: typed wrappers for the fs methods. Paths become file: URIs through
 * ec_codec.c. None of these calls is replayed after a reconnect (they fail with
 * EC_ERR_TRANSPORT instead). */
#include "ec_internal.h"

#include "util/mem.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

int ec_fs_rename(ec_client *c, const char *src, const char *dst, unsigned flags, ec_error *err)
{
    if (!ec_client_has_capability(c, "fsRename"))
        return ec_fail(err, EC_ERR_USAGE, 0,
                       "the server does not support this (no fsRename capability)");
    json_t *params = path_params("sourcePath", src, err);
    json_t *to = params ? path_params("destinationPath", dst, err) : NULL;
    if (!to) {
        json_decref(params);
        return -EC_ERR_USAGE;
    }
    json_object_update(params, to);
    json_decref(to);
    if (flags & EC_RENAME_KEEP_ATTRIBUTES)
        json_object_set_new(params, "keepAttributes", json_true());
    if (flags & EC_RENAME_FSYNC) json_object_set_new(params, "fsync", json_true());
    return ec_client_call(c, "fs/rename", params, NULL, err);
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
