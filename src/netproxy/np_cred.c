/* np_cred: credential masking (placeholder until built). */
#include "netproxy/np_internal.h"

struct np_cred *np_cred_new(json_t *providers) { (void)providers; return NULL; }
void np_cred_free(struct np_cred *cr) { (void)cr; }
char **np_cred_child_env(struct netproxy *np, char **envp) { (void)np; return envp; }
np_http_rewrite_fn np_cred_rewrite_fn(struct np_client *c) { (void)c; return NULL; }
bool np_cred_wants(const struct np_client *c) { (void)c; return false; }
