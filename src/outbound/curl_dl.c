/* curl_dl: libcurl, loaded on first use (see curl_dl.h for why). */
#include "outbound/curl_dl.h"

#include <dlfcn.h>
#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

struct curl_dl curl_dl_fns;

int curl_dl_load(const char **why)
{
    static bool loaded;
    static bool too_old; /* the library lacks a function: retrying would not help */
    static char reason[320];
    if (loaded) return 0;
    if (too_old) {
        if (why) *why = reason;
        return -ENOSYS;
    }
    /* A failed dlopen is not remembered: its cause may pass (no descriptor free for
     * the library's files while the server is at RLIMIT_NOFILE, no memory), and a
     * cached failure disabled http/request until a restart. When the
     * library is really missing, each request pays a failed path search, which is
     * cheap next to a transfer. */
    void *h = dlopen("libcurl.so.4", RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        const char *e = dlerror();
        snprintf(reason, sizeof reason, "libcurl.so.4 could not be loaded: %s",
                 e ? e : "unknown error");
        if (why) *why = reason;
        return -ELIBACC;
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
            snprintf(reason, sizeof reason,
                     "libcurl.so.4 lacks %s, which http/request needs (too old)", syms[i].name);
            if (why) *why = reason;
            dlclose(h);
            too_old = true;
            return -ENOSYS;
        }
    }
    loaded = true;
    return 0;
}
