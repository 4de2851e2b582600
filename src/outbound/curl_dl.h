/* curl_dl: libcurl, loaded on first use.
 *
 * Linking libcurl loads it and its ~30 dependencies (TLS, HTTP/2, IDN, LDAP, SSH,
 * compression...) into every exec-server at start, which more than doubled the idle
 * RSS (3.7 -> 8.2 MB) for a feature many sessions never use. So it is loaded
 * with dlopen("libcurl.so.4") the first time http/request or remote's registry client
 * needs it, and called through this table. The curl headers still give the types and constants. */
#ifndef EXEC_OUTBOUND_CURL_DL_H
#define EXEC_OUTBOUND_CURL_DL_H

#define CURL_DISABLE_TYPECHECK 1 /* its checking macros would wrap our pointers */
#include <curl/curl.h>

struct curl_dl {
    CURLcode (*global_init)(long flags);
    void (*global_cleanup)(void);
    CURL *(*easy_init)(void);
    void (*easy_cleanup)(CURL *);
    CURLcode (*easy_setopt)(CURL *, CURLoption, ...);
    CURLcode (*easy_getinfo)(CURL *, CURLINFO, ...);
    CURLcode (*easy_pause)(CURL *, int);
    CURLM *(*multi_init)(void);
    CURLMcode (*multi_cleanup)(CURLM *);
    CURLMcode (*multi_setopt)(CURLM *, CURLMoption, ...);
    CURLMcode (*multi_add_handle)(CURLM *, CURL *);
    CURLMcode (*multi_remove_handle)(CURLM *, CURL *);
    CURLMcode (*multi_assign)(CURLM *, curl_socket_t, void *);
    CURLMcode (*multi_socket_action)(CURLM *, curl_socket_t, int, int *);
    CURLMsg *(*multi_info_read)(CURLM *, int *);
    struct curl_slist *(*slist_append)(struct curl_slist *, const char *);
    void (*slist_free_all)(struct curl_slist *);
    CURLU *(*url)(void);
    void (*url_cleanup)(CURLU *);
    CURLUcode (*url_set)(CURLU *, CURLUPart, const char *, unsigned int);
    const char *(*url_strerror)(CURLUcode);
};

extern struct curl_dl curl_dl_fns;

/* Loads libcurl, once it works. Returns 0, or with a reason in why (static storage,
 * valid until the next call) -ELIBACC (libcurl.so.4 could not be loaded now, with
 * dlerror's words: tried again at the next call, since running out of descriptors
 * or memory passes) or -ENOSYS (it lacks a function we call; repeated to later
 * calls). Loop thread only. */
int curl_dl_load(const char **why);

#endif
