/* libFuzzer target for proto/uri.
 *
 * Feeds arbitrary bytes to uri_to_path with and without the bare-path flag. Whatever
 * it accepts must be a path the daemon can hand to the kernel (absolute, no NUL),
 * and uri_from_path must encode it so that parsing gives the same bytes back: that
 * is what lets non-UTF-8 names survive a canonicalize -> readFile trip. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proto/uri.h"

static void check(const uint8_t *data, size_t size, bool bare)
{
    char *path = NULL;
    size_t len = 0;
    struct uri_error err;
    if (uri_to_path((const char *)data, size, bare, &path, &len, &err) != 0) {
        /* Messages go into JSON replies: they must be NUL-terminated. */
        if (!memchr(err.message, '\0', sizeof err.message)) abort();
        return;
    }
    if (len == 0 || path[0] != '/' || memchr(path, '\0', len) || path[len] != '\0') abort();

    char *uri = uri_from_path(path, len);
    char *back = NULL;
    size_t back_len = 0;
    if (uri_to_path(uri, strlen(uri), false, &back, &back_len, &err) != 0) {
        fprintf(stderr, "re-parse of %s failed: %s\n", uri, err.message);
        abort();
    }
    if (back_len != len || memcmp(back, path, len) != 0) {
        fprintf(stderr, "round trip changed the path: %s\n", uri);
        abort();
    }
    free(back);
    free(uri);
    free(path);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    check(data, size, false);
    check(data, size, true);
    return 0;
}
