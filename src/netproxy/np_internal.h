/* np_internal: the proxy's structures and the calls between its files, declared by
 * file from the top down: np_proxy.c (the proxy, its listeners), np_request.c (what
 * the client sends), np_decision.c, np_relay.c (route, upstream, relay), np_reply.c
 * (answers of the proxy's own), np_conn.c (a connection's life and sockets), then
 * what those stand on: np_udp.c, np_mitm.c, np_ask.c, np_cred.c, np_config.c,
 * np_resolve.c, np_stack.c / np_tun.c, np_pool.c, np_budget.c (the flow budget, no
 * I/O). A file calls only the ones below
 * it; what comes back up arrives through the functions handed down (down_input and
 * up_input of a connection, a transparent flow's and a TUN device's callbacks).
 * Nothing outside src/netproxy includes it. */
#ifndef EXEC_NETPROXY_NP_INTERNAL_H
#define EXEC_NETPROXY_NP_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>
#include <uv.h>

#include "netproxy/netproxy.h"
#include "netproxy/np_budget.h"
#include "netproxy/np_http.h"
#include "netproxy/np_policy.h"
#include "netproxy/np_socks.h"
#include "util/buf.h"

#define NP_MAX_ADDRS 16
#define NP_READ_SIZE (64 * 1024)   /* a side's first read buffer (the pool's) */
#define NP_READ_MAX (512 * 1024)   /* ... grown while its reads fill it (np_conn.c) */
#define NP_READ_FLOOR (16 * 1024)  /* a read past the flow budget (np_conn.c) */
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
struct np_client;
struct np_mitm;
struct np_mitm_conn;
struct np_udp;
struct np_fdsrc;
struct np_tflow;

/* Bytes from a side of a connection: n bytes in buf (a pool buffer, taken), or n < 0
 * for its EOF (UV_EOF) or an error. */
typedef void (*np_input_fn)(struct np_client *c, char *buf, ssize_t n);
typedef void (*np_client_fn)(struct np_client *c);
/* Whether n bytes from the client's side may be taken now (the flow budget). */
typedef bool (*np_fits_fn)(struct np_client *c, size_t n);

struct np_client {
    struct np_client *next, *prev;
    struct netproxy *np;
    int refs;
    enum np_kind kind;
    enum np_stage stage;
    uv_tcp_t down;                    /* the proxied client */
    uv_tcp_t *up;                     /* the upstream, NULL until connecting */
    np_input_fn down_input, up_input; /* who reads each side (np_conn.c calls them) */
    uv_timer_t timer;                 /* the policy request's deadline */
    char peer[80];                    /* the client's "ip:port", reported as `client` */
    struct buf in;                    /* client bytes not yet consumed */
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
    bool inner_head;           /* ... and the head of its one request was read */
    struct np_udp *udp;
    struct np_tflow *tflow; /* a transparent TCP connection's side (np_stack.c) in
                               place of `down`, or NULL */
    /* the flow budget (np_budget.h) */
    uint32_t read_down, read_up;  /* the size of each side's next read buffer */
    bool budget_down, budget_up;  /* the side stopped reading for the budget */
    struct np_budget_waiter wait; /* ... and waits for room in it */
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
    int n_asks;
    struct np_budget budget; /* this sandbox's flow budget (its parent: all of them) */
    bool budget_told;        /* a refusal for it was logged */
    struct np_fdsrc *fdsrcs;
    int handles; /* handles and clients still to let go of */
    bool released;
    struct np_cred *cred; /* credential masking, or NULL */
    /* allowUpstreamProxy: the server's HTTP_PROXY / HTTPS_PROXY (http:// only) */
    char up_http_host[NP_HOST_MAX], up_connect_host[NP_HOST_MAX];
    uint16_t up_http_port, up_connect_port;
    struct np_tun *tun;    /* transparent TCP (np_tun.c), or NULL */
    struct np_mitm *mitm;  /* the CA and leaf certificates, or NULL */
    const char *ca_bundle; /* with mitm: the bundle children are told to trust */
};

/* np_request.c: what the client sends (a connection's down_input). */
void np_down_input(struct np_client *c, char *base, ssize_t n);

/* np_decision.c: decides c->host:c->port once the request is parsed; an allowed
 * connection goes on to np_relay.c, a refused one is answered (np_reply.c). */
void np_decide(struct np_client *c);

/* np_relay.c: np_resolve resolves the destination (c->host, or the upstream proxy)
 * and connects (in NP_STAGE_CHECK: resolves for the local-address check, then
 * np_proceed_allowed); np_proceed_allowed goes on with an allowed connection (the
 * limited-mode guard, then the upstream). np_relay_buf forwards a buffer read from
 * one side to the other (taking it: a pool buffer when pooled, else malloc'd) and
 * pauses the reading side over NP_HIGH_WATER; np_from_client passes the client's
 * plaintext (owned) into the HTTP path once connected; np_tls_input takes an
 * intercepted tunnel's ciphertext from a side. */
void np_resolve(struct np_client *c);
void np_proceed_allowed(struct np_client *c);
void np_relay_buf(struct np_client *c, bool to_up, char *data, size_t n, bool pooled);
void np_from_client(struct np_client *c, char *data, size_t n);
void np_tls_input(struct np_client *c, bool from_up, const char *data, size_t n);

/* np_reply.c: np_refuse reports a refusal and answers the client in its protocol's
 * way; np_reply_simple answers an HTTP client with a short response and ends the
 * connection; np_upstream_failed answers that the upstream could not be reached
 * (err: a libuv error). np_http_date: an HTTP Date header's value for now. */
void np_refuse(struct np_client *c, const char *scope, const char *decision, const char *source,
               const char *reason);
void np_reply_simple(struct np_client *c, int status, const char *reason, const char *content_type,
                     const char *proxy_error, const char *body);
void np_upstream_failed(struct np_client *c, int err);
void np_http_date(char *out, size_t n);
/* Whether c's CONNECT tunnel is to be intercepted (a CA, and limited mode or
 * credential masking needing to see inside). */
bool np_interception_wanted(const struct np_client *c);

/* np_conn.c: a connection's life and its sockets. np_client_new puts a new client
 * in the proxy's list (the caller sets its side up); ref/unref count what holds it;
 * np_client_close closes both sides now and lets go of all that is attached
 * (idempotent); np_client_handle_closed is the close callback of its handles;
 * np_proxy_unhold drops one of the things the proxy waits for (the last one after
 * release frees it). Writes: np_write_buf takes a buffer (pooled: back to the pool),
 * np_write_owned a malloc'd one, np_write_copy copies; np_send sends plaintext
 * through the side's TLS session when there is one; np_tls_flush writes what the TLS
 * sessions have for their sockets. np_shutdown_side half-closes a side once its queue
 * is written (np_shutdown_done then, which drops the reference it took); np_finish
 * sends the last bytes to the client, then ends the connection. Reading: each side's
 * bytes go to c->down_input / c->up_input (np_tflow_input: a transparent flow's, which
 * may say UV_ENOBUFS: no room in the flow budget; np_tflow_fits: whether it may deliver
 * n bytes); np_read_resume starts a paused side again below NP_LOW_WATER;
 * np_down_queued is what the client has not taken yet. A read is taken only where the
 * flow budget (np_budget.h) has room for its buffer, or, NP_READ_FLOOR at a time, where
 * less than that of what the connection read before still waits on the other side
 * (the floor: no connection waits for another's bytes to be read); what is queued is
 * held in the budget until written. */
struct np_client *np_client_new(struct netproxy *np, enum np_kind kind);
void np_client_ref(struct np_client *c);
void np_client_unref(struct np_client *c);
void np_client_close(struct np_client *c);
void np_client_handle_closed(uv_handle_t *h);
void np_proxy_unhold(struct netproxy *np);
void np_write_buf(struct np_client *c, bool to_up, char *data, size_t len, bool pooled);
void np_write_owned(struct np_client *c, bool to_up, char *data, size_t len);
void np_write_copy(struct np_client *c, bool to_up, const void *data, size_t len);
void np_send(struct np_client *c, bool to_up, const void *data, size_t len);
void np_tls_flush(struct np_client *c);
void np_shutdown_side(struct np_client *c, bool to_up);
void np_shutdown_done(struct np_client *c);
void np_finish(struct np_client *c);
void np_down_read_start(struct np_client *c);
void np_down_read_stop(struct np_client *c);
void np_up_read_start(struct np_client *c);
void np_read_resume(struct np_client *c, bool up_side);
size_t np_down_queued(const struct np_client *c);
void np_tflow_input(struct np_client *c, char *buf, ssize_t n);
bool np_tflow_fits(struct np_client *c, size_t n);

/* np_udp.c: SOCKS5 UDP ASSOCIATE. np_udp_start opens the association of c (from
 * its request) and fills the SOCKS5 reply to send (at most 32 bytes); < 0: it failed,
 * and the reply says so. np_udp_close ends it (at the connection's close). */
int np_udp_start(struct np_client *c, const struct np_socks_addr *client_addr, uint8_t reply[32],
                 size_t *reply_len);
void np_udp_close(struct np_client *c);

/* np_mitm.c: TLS interception, with no socket of its own. init/free: the CA for a
 * proxy; start: the TLS sessions of c's CONNECT tunnel; feed: ciphertext from a
 * side, its plaintext appended to *plain (0; -ESHUTDOWN: the peer's close_notify;
 * else a TLS failure); send: plaintext towards a side (< 0: failed); close_notify:
 * a side's; take: what a side's session has to send (malloc'd *out, its length);
 * client_free: c's sessions. */
int np_mitm_init(struct netproxy *np, char *err, size_t n);
void np_mitm_free(struct netproxy *np);
int np_mitm_start(struct np_client *c);
bool np_mitm_active(const struct np_client *c, bool up_side);
int np_mitm_feed(struct np_client *c, bool from_up, const char *data, size_t n, struct buf *plain);
int np_mitm_send(struct np_client *c, bool to_up, const void *data, size_t n);
void np_mitm_close_notify(struct np_client *c, bool up_side);
size_t np_mitm_take(struct np_client *c, bool to_up, char **out);
void np_mitm_client_free(struct np_client *c);

/* np_ask.c: the proxy's word with its client. np_ask puts the policy question; NULL
 * when nobody can be asked: the caller denies; np_ask_cancel forgets one (NULL ok).
 * np_report reports one decision (the client, the metric, a log line; method NULL:
 * none, as for SOCKS); np_report_client the same for c's destination. */
struct netproxy_ask *np_ask(struct netproxy *np, const char *protocol, const char *host,
                            uint16_t port, netproxy_answer_fn fn, void *ctx);
void np_ask_cancel(struct netproxy *np, struct netproxy_ask *q);
void np_report(struct netproxy *np, const char *scope, const char *decision, const char *source,
               const char *reason, const char *protocol, const char *host, uint16_t port,
               const char *method, const char *client, bool override);
void np_report_client(struct np_client *c, const char *scope, const char *decision,
                      const char *source, const char *reason, bool override);

/* np_resolve.c: an IP literal or a test override (EXEC_SERVER_TEST_RESOLVE) resolved
 * at once: returns 1 with *out set, else 0 (the caller uses uv_getaddrinfo). */
int np_resolve_now(const char *host, uint16_t port, struct sockaddr_storage *out);
/* Reads the test overrides once (at the first proxy's start). */
void np_resolve_load_overrides(void);
/* Resolves host:port on libuv's thread pool (socktype: SOCK_STREAM or SOCK_DGRAM);
 * uv_getaddrinfo's result. */
int np_resolve_start(uv_loop_t *loop, uv_getaddrinfo_t *req, uv_getaddrinfo_cb cb, const char *host,
                     uint16_t port, int socktype);

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

/* np_tun.c: transparent TCP, one per proxy: the sandbox's TUN device and resolver
 * sockets (fds: TUN, UDP, TCP listener; taken), served until release; each
 * connection the stack accepts goes to accept (NULL back: refused, reset). */
struct np_tun;
typedef struct np_client *(*np_accept_fn)(struct netproxy *np, struct np_tflow *f, const char *host,
                                          uint16_t port, const char *peer);
void np_tun_attach(struct netproxy *np, const int fds[3], np_accept_fn accept);
void np_tun_release(struct netproxy *np);

/* np_stack.c: a transparent TCP connection's side towards the child. np_tflow_bind
 * ties it to its client and says where its events go: input (its bytes, then its
 * EOF or an error; UV_ENOBUFS where fits said no to delivering them), drained (what was queued
 * towards the child fell below NP_LOW_WATER), shutdown_done (a half-close asked for is done); write
 * takes data (back to np_pool.c, or freed, once the child acknowledged it; the first write, the
 * SOCKS5 reply the relay sends as to a SOCKS5 client, is read as the outcome: success
 * lets data through, a failure resets the connection); read turns delivery on or
 * off; queued is what was written and not yet acknowledged (held: and lwIP's copy of
 * what it took, as counted in the flow budget); shutdown sends a FIN
 * after the data; close lets go of it: gracefully once its FIN is queued, else with
 * a reset. */
void np_tflow_bind(struct np_tflow *f, struct np_client *c, np_input_fn input, np_fits_fn fits,
                   np_client_fn drained, np_client_fn shutdown_done);
void np_tflow_write(struct np_tflow *f, char *data, size_t n, bool pooled);
void np_tflow_read(struct np_tflow *f, bool on);
size_t np_tflow_queued(const struct np_tflow *f);
size_t np_tflow_held(const struct np_tflow *f);
void np_tflow_shutdown(struct np_tflow *f);
void np_tflow_close(struct np_tflow *f);

/* np_pool.c: read buffers of NP_READ_SIZE to NP_READ_MAX bytes (get: at least size,
 * at most NP_READ_MAX; np_buf_size: what one holds), recycled; release: back to the
 * pool (pooled) or freed. */
char *np_buf_get(size_t size);
size_t np_buf_size(const char *p);
void np_buf_put(char *p);
void np_buf_release(char *data, bool pooled);

#endif
