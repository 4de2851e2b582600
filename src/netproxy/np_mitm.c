/* np_mitm: TLS interception for credential masking (placeholder until built). */
#include "netproxy/np_internal.h"

#include <errno.h>
#include <stdio.h>

int np_mitm_init(struct netproxy *np, char *err, size_t n)
{
    (void)np;
    snprintf(err, n, "credential masking is not available");
    return -ENOSYS;
}
void np_mitm_free(struct netproxy *np) { (void)np; }
bool np_mitm_wanted(const struct np_client *c) { (void)c; return false; }
int np_mitm_start(struct np_client *c) { (void)c; return -ENOSYS; }
bool np_mitm_active(const struct np_client *c, bool up_side) { (void)c; (void)up_side; return false; }
void np_mitm_feed(struct np_client *c, bool from_up, const char *data, size_t n) { (void)c; (void)from_up; (void)data; (void)n; }
void np_mitm_send(struct np_client *c, bool to_up, const void *data, size_t n) { (void)c; (void)to_up; (void)data; (void)n; }
void np_mitm_close_notify(struct np_client *c) { (void)c; }
void np_mitm_close_notify_up(struct np_client *c) { (void)c; }
void np_mitm_client_free(struct np_client *c) { (void)c; }
const char *np_mitm_bundle_path(const struct netproxy *np) { (void)np; return NULL; }
