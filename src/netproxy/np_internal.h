/* np_internal: the proxy's structures, shared by netproxy.c (connections),
 * np_decision.c (policy decisions), np_config.c (settings), np_mitm.c (TLS
 * interception), np_cred.c (credential masking), np_udp.c (SOCKS5 UDP) and
 * np_resolve.c. Nothing outside src/netproxy includes it. */
#ifndef EXEC_NETPROXY_NP_INTERNAL_H
#define EXEC_NETPROXY_NP_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>
#include <uv.h>

#include "netproxy/netproxy.h"
#include "netproxy/np_http.h"
#include "netproxy/np_policy.h"
#include "netproxy/np_socks.h"
#include "util/buf.h"

#define NP_MAX_ADDRS 16
#define NP_READ_SIZE (64 * 1024)   /* a read buffer (the pool's) */
#define NP_HIGH_WATER (1u << 20)   /* queued towards a side: stop reading the other */
#define NP_LOW_WATER (256u * 1024) /* ... and read it again below this */

enum np_kind { NP_KIND_HTTP, NP_KIND_SOCKS };

/* Where a proxied connection is. */
enum np_stage {
    NP_STAGE_HEAD, /* reading the HTTP request head */
    NP_STAGE_SOCKS_GREETING,
    NP_STAGE_SOCKS_REQUEST,
    NP_STAGE_DECIDE,  /* the policy is looking at it */
    NP_STAGE_ASK,     /* waiting for the client's answer */
    NP_STAGE_CHECK,   /* allowed; resolving to check for local addresses */
    NP_STAGE_CONNECT, /* resolving / connecting / relaying */
    NP_STAGE_UDP,     /* a SOCKS5 UDP association's control connection */
};

/* What bytes from a side mean once the upstream is connected. */
enum np_mode {
    NP_MODE_NONE,
    NP_MODE_RAW,       /* relayed as they are */
    NP_MODE_HTTP_BODY, /* client: the request body, framed by np_body */
    NP_MODE_HEAD,      /* upstream: the response head, then RAW */
    NP_MODE_HOLD,      /* client: held until an upgrade's 101 */
    NP_MODE_DISCARD,   /* client: after its one request, dropped */
    NP_MODE_UPCONNECT, /* upstream: an upstream proxy's answer to our CONNECT */
};

struct np_cred;
struct np_mitm;
struct np_mitm_conn;
struct np_udp;
struct np_fdsrc;

struct np_client {
    struct np_client *next, *prev;
    struct netproxy *np;
    int refs;
    enum np_kind kind;
    enum np_stage stage;
    uv_tcp_t down;    /* the proxied client */
    uv_tcp_t *up;     /* the upstream, NULL until connecting */
    uv_timer_t timer; /* the policy request's deadline */
    char peer[80];    /* the client's "ip:port", reported as `client` */
    struct buf in;    /* client bytes not yet consumed */
    /* the destination */
    char host[NP_HOST_MAX];
    uint16_t port;
    const char *protocol; /* http, https_connect, socks5_tcp, socks5_udp */
    char method[24];
    bool is_connect;
    /* HTTP forwarding */
    struct buf head_out; /* the request head to send upstream */
    struct np_body body;
    bool upgrade, is_forward;
    char *forward_path;
    struct buf resp;    /* the response head being gathered */
    uint16_t mitm_port; /* inside an intercepted tunnel: its port (Host default) */
    /* the decision */
    enum np_reason baseline;
    bool check_resolved, decider_allowed;
    struct netproxy_ask *call; /* the policy question in flight */
    /* resolution and connection */
    uv_getaddrinfo_t gai;
    bool gai_busy, have_addrs;
    int resolve_err, last_err;
    struct sockaddr_storage addrs[NP_MAX_ADDRS];
    int naddrs, addr_i;
    /* where the socket goes: the destination, or an upstream proxy (allowUpstreamProxy) */
    char conn_host[NP_HOST_MAX];
    uint16_t conn_port;
    bool route_decided, via_upstream;
    /* relay */
    enum np_mode mode, mode_up;
    bool down_wanted, reading_down, down_paused, up_paused;
    bool down_eof, up_eof;
    bool finishing, finish_on_shutdown, closed;
    struct np_mitm_conn *mitm; /* TLS on both sides of an intercepted tunnel */
    struct np_udp *udp;
    struct np_tflow *tflow; /* a transparent TCP connection's side (np_stack.c) in
                               place of `down`, or NULL */
};

struct netproxy {
    uv_loop_t *loop;
    struct netproxy_params params;
    struct np_policy policy;
    struct netproxy_client client; /* whom the proxy asks and tells (zeroed at release) */
    char *process_id;
    uv_tcp_t *http_l, *socks_l;
    uint16_t http_port, socks_port;
    struct np_client clients; /* list head */
    int n_clients, n_asks;
    struct np_fdsrc *fdsrcs;
    int handles; /* handles and clients still to let go of */
    bool released;
    struct np_cred *cred; /* credential masking, or NULL */
    /* allowUpstreamProxy: the server's HTTP_PROXY / HTTPS_PROXY (http:// only) */
    char up_http_host[NP_HOST_MAX], up_connect_host[NP_HOST_MAX];
    uint16_t up_http_port, up_connect_port;
    struct np_tun *tun;           /* transparent TCP (np_tun.c), or NULL */
    struct np_mitm *mitm;         /* the CA and leaf certificates, or NULL */
    const char *ca_bundle;        /* with mitm: the bundle children are told to trust */
    const struct np_relay *relay; /* netproxy.c's calls for the layers below it */
};

/* What the connection core (netproxy.c) does for the layers it runs on a connection,
 * the decision (np_decision.c), TLS interception (np_mitm.c) and the SOCKS5 UDP relay
 * (np_udp.c). They reach it
 * through np->relay, set when the proxy starts, so they sit below the core, which
 * alone calls down into them. */
struct np_relay {
    /* Closes both sides now (the client goes once its handles are closed). */
    void (*close)(struct np_client *c);
    /* Ends the connection once what is queued is written. */
    void (*finish)(struct np_client *c);
    /* Bytes to a side, through the interception when there is one. */
    void (*send)(struct np_client *c, bool to_up, const void *data, size_t len);
    /* Bytes to a side's socket as they are: owned (malloc'd) or copied. */
    void (*write_owned)(struct np_client *c, bool to_up, char *data, size_t len);
    void (*write_copy)(struct np_client *c, bool to_up, const void *data, size_t len);
    /* Plain bytes of an intercepted tunnel, back into the HTTP path (owned). */
    void (*from_client)(struct np_client *c, char *data, size_t n);
    void (*from_upstream)(struct np_client *c, char *data, size_t n);
    /* Resolves the destination (c->host, or the upstream proxy) and connects. */
    void (*resolve)(struct np_client *c);
    /* A transparent TCP flow's events (np_stack.c): bytes from the child (a pool
     * buffer, taken; n < 0: its EOF or an error), its queue drained below the
     * low-water mark, a half-close shutdown_side asked for done (drops its
     * reference). */
    void (*down_input)(struct np_client *c, char *buf, ssize_t n);
    void (*down_drained)(struct np_client *c);
    void (*shutdown_done)(struct np_client *c);
    /* A connection the stack accepted, to decide as a SOCKS5 CONNECT (NULL: refused,
     * the proxy is full or gone). */
    struct np_client *(*transparent_client)(struct netproxy *np, struct np_tflow *f,
                                            const char *host, uint16_t port, const char *peer);
    /* A read buffer of NP_READ_SIZE bytes from the pool, and one handed to
     * np_tflow_write back to the pool (pooled) or freed. */
    char *(*get_buf)(void);
    void (*release_buf)(char *data, bool pooled);
};

/* np_decision.c: the decision on a connection, then asking, reporting, refusing.
 * np_decide decides c->host:c->port once the request is parsed; np_proceed_allowed
 * goes on with an allowed one once its addresses are checked (NP_STAGE_CHECK). np_ask puts the
 * policy question to the proxy's client; NULL when nobody can be asked: the caller denies;
 * np_ask_cancel forgets one (NULL ok). np_report reports one decision (the client, metric, log
 * line; method NULL: none, as for SOCKS); np_report_client the same for c's destination. np_refuse
 * reports a refusal and answers the client in its protocol's way; np_reply_simple answers an HTTP
 * client with a short response and ends the connection. */
void np_decide(struct np_client *c);
void np_proceed_allowed(struct np_client *c);
/* Whether c's CONNECT tunnel is to be intercepted (a CA, and limited mode or
 * credential masking needing to see inside). */
bool np_interception_wanted(const struct np_client *c);
struct netproxy_ask *np_ask(struct netproxy *np, const char *protocol, const char *host,
                            uint16_t port, netproxy_answer_fn fn, void *ctx);
void np_ask_cancel(struct netproxy *np, struct netproxy_ask *q);
void np_report(struct netproxy *np, const char *scope, const char *decision, const char *source,
               const char *reason, const char *protocol, const char *host, uint16_t port,
               const char *method, const char *client, bool override);
void np_report_client(struct np_client *c, const char *scope, const char *decision,
                      const char *source, const char *reason, bool override);
void np_refuse(struct np_client *c, const char *scope, const char *decision, const char *source,
               const char *reason);
void np_reply_simple(struct np_client *c, int status, const char *reason, const char *content_type,
                     const char *proxy_error, const char *body);
/* An HTTP Date header's value for now. */
void np_http_date(char *out, size_t n);

/* np_resolve.c: an IP literal or a test override (EXEC_SERVER_TEST_RESOLVE) resolved
 * at once: returns 1 with *out set, else 0 (the caller uses uv_getaddrinfo). */
int np_resolve_now(const char *host, uint16_t port, struct sockaddr_storage *out);
/* Reads the test overrides once (at the first proxy's start). */
void np_resolve_load_overrides(void);

/* np_config.c: the server's upstream proxy settings. np_private_via_upstream: whether
 * non-public destinations may go through the upstream proxy
 * (--proxy-private-ips-via-upstream or CODEX_EXEC_SERVER_PROXY_PRIVATE_IPS_VIA_UPSTREAM);
 * np_upstream_from_env fills np's upstream proxies from HTTP(S)_PROXY/ALL_PROXY. */
bool np_private_via_upstream(void);
void np_upstream_from_env(struct netproxy *np);
/* --tcp-upstream-proxy: the CONNECT proxy raw TCP (SOCKS5, transparent) must use, or
 * NULL. */
const struct limits_endpoint *np_tcp_upstream(void);

/* np_cred.c: credential masking */
struct np_cred *np_cred_new(json_t *providers);
void np_cred_free(struct np_cred *cr);
char **np_cred_child_env(struct netproxy *np, char **envp);
/* The header rewrite for requests to c's destination (NULL when nothing applies). */
np_http_rewrite_fn np_cred_rewrite_fn(struct np_client *c);
/* Whether a CONNECT to c's destination should be intercepted (a provider's
 * destination, or limited mode with masking on). */
bool np_cred_wants(const struct np_client *c);

/* np_mitm.c: TLS interception */
int np_mitm_init(struct netproxy *np, char *err, size_t n);
void np_mitm_free(struct netproxy *np);
int np_mitm_start(struct np_client *c);
bool np_mitm_active(const struct np_client *c, bool up_side);
void np_mitm_feed(struct np_client *c, bool from_up, const char *data, size_t n);
void np_mitm_send(struct np_client *c, bool to_up, const void *data, size_t n);
void np_mitm_close_notify(struct np_client *c);
void np_mitm_close_notify_up(struct np_client *c);
void np_mitm_client_free(struct np_client *c);

/* np_tun.c: transparent TCP, one per proxy: the sandbox's TUN device and resolver
 * sockets (fds: TUN, UDP, TCP listener; taken), served until release. */
struct np_tun;
void np_tun_attach(struct netproxy *np, const int fds[3]);
void np_tun_release(struct netproxy *np);

/* np_stack.c: a transparent TCP connection's side towards the child, for netproxy.c.
 * np_tflow_bind ties it to its client; write takes data (np->relay->release_buf gives
 * it back once the child acknowledged it; the first write, the SOCKS5 reply the
 * relay sends as to a SOCKS5 client, is read as the outcome: success lets data
 * through, a failure resets the connection); read turns delivery on or off; queued
 * is what was written and not yet acknowledged; shutdown sends a FIN after the data
 * (np->relay->shutdown_done then); close lets go of it: gracefully once its FIN is
 * queued, else with a reset. */
struct np_tflow;
void np_tflow_bind(struct np_tflow *f, struct np_client *c);
void np_tflow_write(struct np_tflow *f, char *data, size_t n, bool pooled);
void np_tflow_read(struct np_tflow *f, bool on);
size_t np_tflow_queued(const struct np_tflow *f);
void np_tflow_shutdown(struct np_tflow *f);
void np_tflow_close(struct np_tflow *f);

/* np_udp.c: SOCKS5 UDP ASSOCIATE */
void np_udp_start(struct np_client *c, const struct np_socks_addr *client_addr);
void np_udp_close(struct np_client *c);

#endif
