/* curl_dl: libcurl, loaded on first use (see curl_dl.h for why). */
#include "outbound/curl_dl.h"

#include <dlfcn.h>
#include <errno.h>
#include <stdbool.h>
#include <stddef.h>

struct curl_dl curl_dl_fns;

int curl_dl_load(const char **why)
{
    static bool tried;
    static int rc; /* 0, or the first attempt's error, repeated to later callers */
    static const char *reason;
    if (tried) {
        if (rc < 0 && why) *why = reason;
        return rc;
    }
    tried = true;
    void *h = dlopen("libcurl.so.4", RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        reason = "libcurl.so.4 could not be loaded";
        if (why) *why = reason;
        return rc = -ELIBACC;
    }
    struct {
        const char *name;
        void **slot;
    } syms[] = {
#define SYM(field, name) {name, (void **)&curl_dl_fns.field}
        SYM(global_init, "curl_global_init"),
        SYM(global_cleanup, "curl_global_cleanup"),
        SYM(easy_init, "curl_easy_init"),
        SYM(easy_cleanup, "curl_easy_cleanup"),
        SYM(easy_setopt, "curl_easy_setopt"),
        SYM(easy_getinfo, "curl_easy_getinfo"),
        SYM(easy_pause, "curl_easy_pause"),
        SYM(multi_init, "curl_multi_init"),
        SYM(multi_cleanup, "curl_multi_cleanup"),
        SYM(multi_setopt, "curl_multi_setopt"),
        SYM(multi_add_handle, "curl_multi_add_handle"),
        SYM(multi_remove_handle, "curl_multi_remove_handle"),
        SYM(multi_assign, "curl_multi_assign"),
        SYM(multi_socket_action, "curl_multi_socket_action"),
        SYM(multi_info_read, "curl_multi_info_read"),
        SYM(slist_append, "curl_slist_append"),
        SYM(slist_free_all, "curl_slist_free_all"),
        SYM(url, "curl_url"),
        SYM(url_cleanup, "curl_url_cleanup"),
        SYM(url_set, "curl_url_set"),
        SYM(url_strerror, "curl_url_strerror"),
#undef SYM
    };
    for (size_t i = 0; i < sizeof syms / sizeof syms[0]; i++) {
        *syms[i].slot = dlsym(h, syms[i].name);
        if (!*syms[i].slot) {
            reason = "libcurl.so.4 lacks a function http/request needs (too old)";
            if (why) *why = reason;
            dlclose(h);
            return rc = -ENOSYS;
        }
    }
    return 0;
}
