/* np_env: the environment a command behind the managed network gets (PROTOCOL.md
 * section 5.10): every proxy variable the common tools read pointed at the proxy's
 * loopback ports, NO_PROXY per allowLocalBinding, the CODEX_NETWORK_* markers, and,
 * with credential masking, the CA bundle and the masked secrets (np_cred.c). */
#include "netproxy/netproxy.h"
#include "netproxy/np_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/envv.h"

char **netproxy_child_env(struct netproxy *np, char **envp)
{
    char http[64], all[64];
    snprintf(http, sizeof http, "http://127.0.0.1:%u", np->http_port);
    if (np->socks_port)
        snprintf(all, sizeof all, "socks5h://127.0.0.1:%u", np->socks_port);
    else
        snprintf(all, sizeof all, "%s", http);
    static const char *const http_vars[] = {"HTTP_PROXY",
                                            "HTTPS_PROXY",
                                            "http_proxy",
                                            "https_proxy",
                                            "WS_PROXY",
                                            "WSS_PROXY",
                                            "ws_proxy",
                                            "wss_proxy",
                                            "YARN_HTTP_PROXY",
                                            "YARN_HTTPS_PROXY",
                                            "npm_config_http_proxy",
                                            "npm_config_https_proxy",
                                            "npm_config_proxy",
                                            "NPM_CONFIG_HTTP_PROXY",
                                            "NPM_CONFIG_HTTPS_PROXY",
                                            "NPM_CONFIG_PROXY",
                                            "BUNDLE_HTTP_PROXY",
                                            "BUNDLE_HTTPS_PROXY",
                                            "PIP_PROXY",
                                            "DOCKER_HTTP_PROXY",
                                            "DOCKER_HTTPS_PROXY",
                                            NULL};
    static const char *const all_vars[] = {"ALL_PROXY", "all_proxy", "FTP_PROXY", "ftp_proxy",
                                           NULL};
    static const char *const no_vars[] = {"NO_PROXY",           "no_proxy",
                                          "npm_config_noproxy", "NPM_CONFIG_NOPROXY",
                                          "BUNDLE_NO_PROXY",    NULL};
    const char *no_proxy = np->params.allow_local_binding
                               ? "localhost,127.0.0.1,::1,10.0.0.0/8,172.16.0.0/12,192.168.0.0/16"
                               : "";
    for (const char *const *v = http_vars; *v; v++)
        envp = envv_put(envp, *v, http);
    for (const char *const *v = all_vars; *v; v++)
        envp = envv_put(envp, *v, all);
    for (const char *const *v = no_vars; *v; v++)
        envp = envv_put(envp, *v, no_proxy);
    envp = envv_put(envp, "NODE_USE_ENV_PROXY", "1");
    envp = envv_put(envp, "ELECTRON_GET_USE_PROXY", "true");
    envp = envv_put(envp, "CODEX_NETWORK_PROXY_ACTIVE", "1");
    envp = envv_put(envp, "CODEX_NETWORK_ALLOW_LOCAL_BINDING",
                    np->params.allow_local_binding ? "1" : "0");
    if (np->cred) envp = np_cred_child_env(np, envp);
    return envp;
}
