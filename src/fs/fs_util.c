/* fs_util: see fs_util.h. */
#include "fs/fs_util.h"

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "util/mem.h"

char *fs_path_strip_slashes(char *p)
{
    size_t n = strlen(p);
    while (n > 1 && p[n - 1] == '/')
        p[--n] = '\0';
    return p;
}

char *fs_path_join(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b);
    bool slash = la > 0 && a[la - 1] == '/';
    char *r = xmalloc(la + lb + 2);
    memcpy(r, a, la);
    if (!slash) r[la++] = '/';
    memcpy(r + la, b, lb + 1);
    return r;
}
