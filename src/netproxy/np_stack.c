/* np_stack: the user-space TCP/IP stack of transparent TCP (PROTOCOL.md section
 * 5.11): every TCP connection a sandboxed program opens through its TUN device is
 * terminated here by lwIP (Debian's liblwip; docs/DESIGN.md says why) and handed to
 * the proxy as a connection to decide, as a SOCKS5 CONNECT to the same host would be
 * (the accept function np_tun_attach was given).
 *
 * lwIP is one stack per process, built by Debian for its own threads; here it runs
 * on the event loop thread only (raw API, no tcpip thread, its timers driven by a
 * libuv timer while connections exist) and only ever accepts. It accepts nothing but
 * its own addresses, so each connection is translated, as a NAT would: the child's
 * (source, destination) in any sandbox becomes (100.64.x.y or fd00:0:0:1::x, port)
 * -> (10.0.0.1 or fd00::1, port 1) inside lwIP, numbered from a counter, so that two
 * sandboxes (both speak from 192.0.2.1) and a connection lwIP still holds in
 * TIME_WAIT never meet; what lwIP sends is translated back and written to the
 * sandbox's TUN device. None of these addresses ever leaves the process.
 *
 * Bytes towards the child are not copied by us: lwIP references the proxy's read
 * buffers (tcp_write without copy) until the child acknowledges them, and segments
 * of up to 64 KiB (the pcb's mss is raised past lwIP's built-in 1460: the TUN
 * device does segmentation offload) go to the device as one GSO frame with a partial
 * checksum, which the child's kernel takes whole.
 *
 * What a flow holds towards the child (its queue, and lwIP's copy until the child
 * acknowledges it) is held in its sandbox's flow budget (np_budget.h), and bytes from
 * the child are delivered only where the proxy says they fit: a child that never reads
 * stalls its connections, not the server. A SYN past the budget's flows is
 * answered with a reset (the child's connect fails: ECONNREFUSED).
 *
 * A flow (struct np_tflow) is the translation entry and the connection's state, from
 * the child's SYN until lwIP is done with it: NEW (the handshake), OPEN (a client of
 * the proxy), DRAINING (the client let go once its FIN was queued; the child's last
 * acknowledgements and FIN still pass; a reset after DRAIN_TIMEOUT_MS), LINGER (lwIP
 * keeps the connection in TIME_WAIT by itself; the entry stays LINGER_MS for a
 * retransmitted FIN). A segment of no flow is answered with a reset. A flow is
 * freed outside lwIP's callbacks for it (busy, dead). */
#include "netproxy/np_stack.h"
#include "netproxy/np_internal.h"

#include <arpa/inet.h>
#include <errno.h>
#include <linux/virtio_net.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>

#include <lwip/init.h>
#include <lwip/ip.h>
#include <lwip/ip6_addr.h>
#include <lwip/netif.h>
#include <lwip/pbuf.h>
#include <lwip/priv/tcp_priv.h>
#include <lwip/tcp.h>
#include <lwip/timeouts.h>

#include "netproxy/np_dns.h"
#include "netproxy/np_tunpkt.h"
#include "util/mem.h"

#define LISTEN_PORT 1
#define BUCKETS 4096u          /* buckets of each index (chained) */
#define MAX_FLOWS_PER_TUN 2048 /* connections of one sandbox, lingering ones too */
#define NEW_TIMEOUT_MS 30000   /* lwIP gives up a handshake after 20 s */
#define DRAIN_TIMEOUT_MS 30000 /* a child that never closes gets a reset then */
#define LINGER_MS 5000         /* a TIME_WAIT entry: for a retransmitted FIN */
#define TICK_MS 50             /* lwIP's timers are checked this often while it is busy */
#define SWEEP_MS 1000
#define SEG_MAX 65000      /* the mss given to lwIP: one TUN write per 64 KiB */
#define SND_BUF (1u << 20) /* what lwIP may hold towards the child, in flight or queued */
#define VNET_HDR sizeof(struct virtio_net_hdr)
#define HDR_MAX 128 /* IP and TCP headers with options fit */

enum flow_state { FLOW_NEW, FLOW_OPEN, FLOW_DRAINING, FLOW_LINGER };

/* Whether tcp_write copies what it is given. Debian builds lwIP with
 * LWIP_NETIF_TX_SINGLE_PBUF, which makes it copy always (checksumming as it copies):
 * a buffer is then the proxy's again as soon as lwIP has it, else once the child
 * acknowledged it (lwIP references it). */
#define TX_COPIED LWIP_NETIF_TX_SINGLE_PBUF

/* A buffer the proxy wrote towards the child. */
struct tx_buf {
    struct tx_buf *next;
    char *data;
    size_t len, given, acked; /* bytes: all, passed to tcp_write, acknowledged */
    bool pooled;
};

struct np_tflow {
    struct np_tflow *next_key, *next_id; /* index chains */
    struct np_tflow *prev, *next;        /* every flow, for the sweep */
    struct np_stack_tun *tun;
    /* the proxy's side of it (np_tflow_bind): its bytes and EOF, its queue drained,
     * a half-close done */
    np_input_fn input;
    np_fits_fn fits;
    np_client_fn drained, shutdown_done;
    enum flow_state state;
    int family;
    uint8_t csrc[16], cdst[16]; /* the child's addresses */
    uint16_t csport, cdport;
    uint16_t child_mss; /* from its SYN: the GSO size of what it is sent */
    uint32_t id;        /* lwIP's view: its remote address and port derive from it */
    char host[NP_HOST_MAX];
    uint64_t since; /* when the state began, loop time */
    struct tcp_pcb *pcb;
    struct np_client *client;
    /* towards the child */
    struct tx_buf *tx, *tx_tail;
    size_t queued;    /* written by the proxy, not yet lwIP's (TX_COPIED: lwIP's own buffer,
                         SND_BUF, bounds the rest; else not yet acknowledged) */
    size_t held;      /* what is counted in the flow budget (flow_count) */
    bool await_reply; /* the proxy's verdict (a SOCKS5 reply) is still to come */
    bool refused;     /* the verdict was a failure */
    bool shut_wanted; /* a FIN after the data */
    bool fin_queued;
    bool high; /* queued passed the low-water mark: drained is due below it */
    /* from the child */
    struct pbuf *rx; /* taken from lwIP while reading was off, not yet delivered */
    bool reading;    /* the proxy takes bytes */
    bool delivering; /* inside rx_deliver */
    bool rx_eof;     /* the child's FIN arrived */
    bool eof_told;   /* ... and the proxy heard of it */
    int busy;        /* inside a callback or a delivery */
    bool aborted;    /* its pcb was aborted while busy: the callback says ERR_ABRT */
    bool dead;       /* freed once not busy */
};

static struct {
    bool up;
    uv_loop_t *loop;
    struct netif netif;
    uv_timer_t timer;
    bool ticking;
    uint64_t last_sweep;
    uint32_t next_id;
    struct np_tflow *by_key[BUCKETS], *by_id[BUCKETS];
    struct np_tflow all; /* list head */
    unsigned n;
    uint8_t out[VNET_HDR + 65536]; /* a frame on its way to a TUN device (a pbuf's
                                      tot_len is 16 bits: it always fits) */
} st;

static const uint8_t local4[4] = {10, 0, 0, 1};
static const uint8_t local6[16] = {0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1};

/* ---- lwIP's checksum ------------------------------------------------------------------ */

/* Debian's lwIP checksums every byte it sends (CHECKSUM_GEN_TCP; tcp_write copies and
 * sums) and receives with lwip_standard_chksum, two bytes a step: the largest item of
 * a transparent download's profile (1.8 GB/s). Its own calls go through its PLT, so
 * this definition in the executable takes their place, as an executable's malloc
 * does libc's: the same sum by lwIP's contract (native 16-bit words folded, an odd
 * last byte as the first byte of a word, not complemented), 32 bytes a step (9.9 GB/s
 * here). Where a library binds its calls to itself, lwIP keeps its own and nothing
 * else changes. tests/unit/test_np_tunpkt.c holds the two to the same results. */
u16_t lwip_standard_chksum(const void *dataptr, int len)
{
    const uint8_t *p = dataptr;
    size_t n = len > 0 ? (size_t)len : 0;
    uint64_t s[4] = {0, 0, 0, 0}; /* four sums: independent additions run together */
    for (; n >= 32; p += 32, n -= 32) {
        uint64_t w[4];
        memcpy(w, p, 32);
        for (int i = 0; i < 4; i++)
            s[i] += (w[i] & 0xFFFFFFFFu) + (w[i] >> 32); /* under 2^33 a step */
    }
    uint64_t sum = s[0] + s[1] + s[2] + s[3];
    for (; n >= 2; p += 2, n -= 2) {
        uint16_t w;
        memcpy(&w, p, 2);
        sum += w;
    }
    if (n) {
        uint16_t w = 0;
        memcpy(&w, p, 1); /* the odd byte, first in its word */
        sum += w;
    }
    while (sum >> 16)
        sum = (sum & 0xFFFF) + (sum >> 16);
    return (u16_t)sum;
}

/* ---- the translation indexes --------------------------------------------------------- */

static uint32_t fnv(uint32_t h, const void *p, size_t n)
{
    const uint8_t *b = p;
    for (size_t i = 0; i < n; i++)
        h = (h ^ b[i]) * 16777619u;
    return h;
}

static uint32_t key_hash(const struct np_stack_tun *t, size_t alen, const uint8_t *src,
                         uint16_t sport, const uint8_t *dst, uint16_t dport)
{
    uint32_t h = fnv(2166136261u, &t, sizeof t);
    h = fnv(fnv(h, src, alen), dst, alen);
    h = fnv(fnv(h, &sport, 2), &dport, 2);
    return h & (BUCKETS - 1);
}

static size_t alen_of(int family)
{
    return family == AF_INET ? 4 : 16;
}

static struct np_tflow *find_key(const struct np_stack_tun *t, const struct np_pkt *pk)
{
    uint32_t b = key_hash(t, pk->alen, pk->src, pk->sport, pk->dst, pk->dport);
    for (struct np_tflow *f = st.by_key[b]; f; f = f->next_key)
        if (!f->dead && f->tun == t && f->family == pk->family && f->csport == pk->sport &&
            f->cdport == pk->dport && !memcmp(f->csrc, pk->src, pk->alen) &&
            !memcmp(f->cdst, pk->dst, pk->alen))
            return f;
    return NULL;
}

static struct np_tflow *find_id(uint32_t id)
{
    for (struct np_tflow *f = st.by_id[id & (BUCKETS - 1)]; f; f = f->next_id)
        if (f->id == id && !f->dead) return f;
    return NULL;
}

/* lwIP's remote address for an id: in 100.64.0.0/10 or fd00:0:0:1::/64, the id's
 * high 16 bits in the address, its low 16 bits as the port. */
static void remote_of(uint32_t id, int family, uint8_t *addr)
{
    memset(addr, 0, alen_of(family));
    if (family == AF_INET) {
        addr[0] = 100, addr[1] = 64;
        addr[2] = (uint8_t)(id >> 24), addr[3] = (uint8_t)(id >> 16);
    } else {
        addr[0] = 0xfd, addr[7] = 1;
        addr[14] = (uint8_t)(id >> 24), addr[15] = (uint8_t)(id >> 16);
    }
}

static uint32_t id_of(int family, const uint8_t *addr, uint16_t port)
{
    const uint8_t *hi = family == AF_INET ? addr + 2 : addr + 14;
    return (uint32_t)hi[0] << 24 | (uint32_t)hi[1] << 16 | port;
}

static void index_remove(struct np_tflow *f)
{
    struct np_tflow **pp =
        &st.by_key[key_hash(f->tun, alen_of(f->family), f->csrc, f->csport, f->cdst, f->cdport)];
    while (*pp && *pp != f)
        pp = &(*pp)->next_key;
    if (*pp) *pp = f->next_key;
    pp = &st.by_id[f->id & (BUCKETS - 1)];
    while (*pp && *pp != f)
        pp = &(*pp)->next_id;
    if (*pp) *pp = f->next_id;
}

/* ---- life and death --------------------------------------------------------------------- */

static void tick_start(void);

static void set_state(struct np_tflow *f, enum flow_state s)
{
    if (f->state == FLOW_NEW && s != FLOW_NEW) f->tun->pending--;
    f->state = s;
    f->since = uv_now(st.loop);
}

/* The flow a SYN starts: NULL when the sandbox has too many, or the destination is a
 * synthetic address no name was given (the caller answers with a reset). */
static struct np_tflow *flow_open(struct np_stack_tun *t, const struct np_pkt *pk)
{
    struct sockaddr_storage ss;
    memset(&ss, 0, sizeof ss);
    ss.ss_family = (sa_family_t)pk->family;
    if (pk->family == AF_INET)
        memcpy(&((struct sockaddr_in *)&ss)->sin_addr, pk->dst, 4);
    else
        memcpy(&((struct sockaddr_in6 *)&ss)->sin6_addr, pk->dst, 16);
    const char *name = NULL;
    int named = np_dns_lookup(t->names, (struct sockaddr *)&ss, &name);
    if (named == 0 || t->flows >= MAX_FLOWS_PER_TUN || !np_budget_flow_room(t->budget, t->pending))
        return NULL;
    struct np_tflow *f = xcalloc(1, sizeof *f);
    if (named > 0)
        snprintf(f->host, sizeof f->host, "%s", name);
    else
        inet_ntop(pk->family, pk->dst, f->host, sizeof f->host);
    f->tun = t;
    f->family = pk->family;
    memcpy(f->csrc, pk->src, pk->alen);
    memcpy(f->cdst, pk->dst, pk->alen);
    f->csport = pk->sport;
    f->cdport = pk->dport;
    f->child_mss = np_pkt_mss(pk);
    if (!f->child_mss) f->child_mss = pk->family == AF_INET ? 536 : 1220;
    do /* a fresh id: never 0 in its low 16 bits (lwIP's port), never one in use */
        st.next_id++;
    while ((st.next_id & 0xFFFF) == 0 || find_id(st.next_id));
    f->id = st.next_id;
    f->await_reply = true;
    f->reading = true;
    t->pending++;
    set_state(f, FLOW_NEW); /* (calloc's state 0) */
    uint32_t b = key_hash(t, pk->alen, f->csrc, f->csport, f->cdst, f->cdport);
    f->next_key = st.by_key[b];
    st.by_key[b] = f;
    f->next_id = st.by_id[f->id & (BUCKETS - 1)];
    st.by_id[f->id & (BUCKETS - 1)] = f;
    f->next = &st.all;
    f->prev = st.all.prev;
    st.all.prev->next = f;
    st.all.prev = f;
    st.n++;
    t->flows++;
    tick_start();
    return f;
}

/* Gives the proxy back the buffers lwIP no longer needs (every one, with all). */
static void tx_release(struct np_tflow *f, bool all)
{
    while (f->tx &&
           (all || (f->tx->given == f->tx->len && (TX_COPIED || f->tx->acked == f->tx->len)))) {
        struct tx_buf *b = f->tx;
        f->tx = b->next;
        np_buf_release(b->data, b->pooled);
        free(b);
    }
    if (!f->tx) f->tx_tail = NULL;
}

/* Holds in the sandbox's flow budget what the flow holds towards the child: its
 * queue, and (lwIP copying) lwIP's copy not yet acknowledged; nothing once dead. */
static void flow_count(struct np_tflow *f)
{
    size_t now = 0;
    if (!f->dead) {
        now = f->queued;
        if (TX_COPIED && f->pcb && f->pcb->snd_buf < SND_BUF) now += SND_BUF - f->pcb->snd_buf;
    }
    if (now > f->held)
        np_budget_hold(f->tun->budget, now - f->held);
    else if (now < f->held)
        np_budget_give(f->tun->budget, f->held - now);
    f->held = now;
}

/* Forgets the pcb: lwIP keeps or frees it, but calls nothing of ours again. */
static void pcb_detach(struct np_tflow *f)
{
    if (!f->pcb) return;
    tcp_arg(f->pcb, NULL);
    tcp_recv(f->pcb, NULL);
    tcp_sent(f->pcb, NULL);
    tcp_err(f->pcb, NULL);
    f->pcb = NULL;
    flow_count(f);
}

/* Resets the child's connection (lwIP sends the RST through the index, so the flow
 * must still be in it). */
static void pcb_abort(struct np_tflow *f)
{
    struct tcp_pcb *pcb = f->pcb;
    if (!pcb) return;
    pcb_detach(f);
    tcp_abort(pcb);
    if (f->busy) f->aborted = true;
}

/* Ends the flow: a live connection gets a reset; the memory goes now, or when the
 * callback it is busy in returns. */
static void flow_kill(struct np_tflow *f)
{
    if (!f->dead) {
        pcb_abort(f); /* while the index still finds it: the reset goes out */
        f->dead = true;
        if (f->rx) pbuf_free(f->rx);
        f->rx = NULL;
        tx_release(f, true);
        f->queued = 0;
        if (f->state == FLOW_NEW) f->tun->pending--;
        f->state = FLOW_LINGER; /* no longer pending */
        flow_count(f);
    }
    if (f->busy) return;
    index_remove(f);
    f->prev->next = f->next;
    f->next->prev = f->prev;
    st.n--;
    f->tun->flows--;
    free(f);
}

static void flow_unbusy(struct np_tflow *f)
{
    if (--f->busy == 0 && f->dead) flow_kill(f);
}

/* What a callback returns once the proxy had its say (and maybe aborted). */
static err_t cb_return(struct np_tflow *f)
{
    bool aborted = f->aborted;
    f->aborted = false;
    flow_unbusy(f);
    return aborted ? ERR_ABRT : ERR_OK;
}

/* ---- towards the child ------------------------------------------------------------------ */

/* Hands lwIP what fits of the queue, then the FIN once it is wanted and due. */
static void tx_push(struct np_tflow *f)
{
    struct tcp_pcb *pcb = f->pcb;
    bool wrote = false, done = false;
    for (struct tx_buf *b = f->tx; pcb && b; b = b->next) {
        while (b->given < b->len) {
            size_t room = tcp_sndbuf(pcb), n = b->len - b->given;
            if (room == 0 || tcp_sndqueuelen(pcb) + 4 >= TCP_SND_QUEUELEN) goto out;
            if (n > room) n = room;
            u8_t more = (n < b->len - b->given || b->next) ? TCP_WRITE_FLAG_MORE : 0;
            if (tcp_write(pcb, b->data + b->given, (u16_t)n, more) != ERR_OK) goto out;
            b->given += n;
            if (TX_COPIED) f->queued -= n;
            wrote = true;
        }
    }
    if (f->shut_wanted && !f->fin_queued && (!pcb || tcp_shutdown(pcb, 0, 1) == ERR_OK)) {
        f->fin_queued = wrote = done = true;
    }
out:
    tx_release(f, false);
    if (wrote && f->pcb) tcp_output(f->pcb);
    flow_count(f);
    if (done && f->client) {
        /* last: the proxy may let go of the flow in it (the caller holds it) */
        f->busy++;
        f->shutdown_done(f->client);
        flow_unbusy(f);
    }
}

static err_t on_sent(void *arg, struct tcp_pcb *pcb, u16_t len)
{
    struct np_tflow *f = arg;
    if (!f) return ERR_OK;
    f->busy++;
    if (!TX_COPIED) f->queued -= len < f->queued ? len : f->queued; /* a FIN counts in len */
    size_t acked = len; /* in order: the front buffers first */
    for (struct tx_buf *b = f->tx; b && acked; b = b->next) {
        size_t take = b->given - b->acked < acked ? b->given - b->acked : acked;
        b->acked += take;
        acked -= take;
    }
    tx_release(f, false);
    tx_push(f); /* counts what was acknowledged too */
    if (f->high && f->queued <= NP_LOW_WATER && f->client) {
        f->high = false;
        f->drained(f->client);
    }
    return cb_return(f);
}

/* ---- from the child ---------------------------------------------------------------------- */

/* Delivers held bytes while the proxy reads (acknowledging them to the child), then
 * the EOF once nothing is held. */
static void rx_deliver(struct np_tflow *f)
{
    if (f->delivering) return;
    f->delivering = true;
    f->busy++;
    while (f->client && f->reading && f->rx && !f->dead) {
        u16_t n = f->rx->tot_len; /* at most a window: it fits a read buffer */
        if (!f->fits(f->client, n)) {
            f->input(f->client, NULL, UV_ENOBUFS); /* stops reading; woken with room */
            break;
        }
        char *buf = np_buf_get(n);
        pbuf_copy_partial(f->rx, buf, n, 0);
        f->rx = pbuf_free_header(f->rx, n);
        if (f->pcb) tcp_recved(f->pcb, n);
        f->input(f->client, buf, n);
    }
    if (f->client && f->rx_eof && !f->rx && !f->eof_told && !f->dead) {
        f->eof_told = true;
        f->input(f->client, NULL, UV_EOF);
    }
    f->delivering = false;
    flow_unbusy(f);
}

static err_t on_recv(void *arg, struct tcp_pcb *pcb, struct pbuf *p, err_t err)
{
    struct np_tflow *f = arg;
    if (p && (!f || !f->client)) {
        /* no proxy behind it (draining): the data goes nowhere */
        tcp_recved(pcb, p->tot_len);
        pbuf_free(p);
        return ERR_OK;
    }
    if (!f) return ERR_OK;
    f->busy++;
    if (!p) {
        f->rx_eof = true;
        if (f->state == FLOW_DRAINING) {
            /* both FINs: lwIP keeps its TIME_WAIT alone; the entry lingers briefly */
            pcb_detach(f);
            set_state(f, FLOW_LINGER);
        } else {
            rx_deliver(f);
        }
        return cb_return(f);
    }
    if (f->rx)
        pbuf_cat(f->rx, p);
    else
        f->rx = p;
    rx_deliver(f);
    return cb_return(f);
}

static void on_err(void *arg, err_t err)
{
    struct np_tflow *f = arg;
    if (!f) return;
    f->pcb = NULL; /* lwIP frees it */
    flow_count(f);
    f->busy++;
    if (f->client) f->input(f->client, NULL, err == ERR_RST ? UV_ECONNRESET : UV_ECONNABORTED);
    if (!f->client) flow_kill(f); /* the proxy let go of it above, or had already */
    flow_unbusy(f);
}

/* The handshake completed: the connection goes to the proxy to decide. */
static err_t on_accept(void *arg, struct tcp_pcb *pcb, err_t err)
{
    if (err != ERR_OK || !pcb) return ERR_VAL;
    int family = IP_IS_V6(&pcb->remote_ip) ? AF_INET6 : AF_INET;
    uint8_t ra[16];
    if (family == AF_INET)
        memcpy(ra, &ip_2_ip4(&pcb->remote_ip)->addr, 4);
    else
        memcpy(ra, ip_2_ip6(&pcb->remote_ip)->addr, 16);
    struct np_tflow *f = find_id(id_of(family, ra, pcb->remote_port));
    if (!f || f->state != FLOW_NEW) {
        tcp_abort(pcb);
        return ERR_ABRT;
    }
    f->pcb = pcb;
    tcp_arg(pcb, f);
    tcp_recv(pcb, on_recv);
    tcp_sent(pcb, on_sent);
    tcp_err(pcb, on_err);
    tcp_nagle_disable(pcb);
    if (pcb->mss < SEG_MAX) pcb->mss = SEG_MAX; /* the device segments (TSO) */
    pcb->cwnd = SND_BUF;                        /* a lossless link: no slow start */
    pcb->snd_buf = SND_BUF; /* past lwIP's built-in 64 KiB: more than a window per trip */
    set_state(f, FLOW_OPEN);
    f->busy++;
    char peer[32]; /* the reference reports its bridge's 127.0.0.1 */
    snprintf(peer, sizeof peer, "127.0.0.1:%u", f->csport);
    struct netproxy *np = f->tun->np;
    if (!f->tun->accept(np, f, f->host, f->cdport, peer)) flow_kill(f);
    return cb_return(f);
}

/* ---- the interface: packets both ways ------------------------------------------------- */

/* One frame to a sandbox's device; one the device does not take is lost, as on a
 * wire (TCP sends it again). */
static void tun_write(const struct np_stack_tun *t, const struct iovec *iov, int n)
{
    if (t->fd < 0) return;
    ssize_t w = writev(((struct np_stack_tun *)t)->fd, iov, n);
    ((struct np_stack_tun *)t)->frames_out++;
    if (w > 0) ((struct np_stack_tun *)t)->bytes_out += (uint64_t)w;
}

/* A packet lwIP sends: translated back and written to its sandbox's device as one
 * frame, a GSO frame when it carries more than the child's mss. Only the headers are
 * copied (to be rewritten): the data goes to the device from lwIP's pbufs. */
static err_t output(struct pbuf *p)
{
    uint8_t *pkt = st.out + VNET_HDR;
    size_t first = p->len < HDR_MAX ? p->len : HDR_MAX;
    memcpy(pkt, p->payload, first);
    struct np_pkt pk;
    if (np_pkt_parse(pkt, p->tot_len, &pk) < 0 || pk.proto != IPPROTO_TCP) return ERR_OK;
    size_t hdr = pk.l3 + pk.l4;
    struct iovec iov[16];
    int n = 1;
    if (hdr > first) { /* headers across pbufs (not lwIP's way): gather it all */
        pbuf_copy_partial(p, pkt, p->tot_len, 0);
        hdr = p->tot_len;
    } else {
        if (p->len > hdr) iov[n++] = (struct iovec){(uint8_t *)p->payload + hdr, p->len - hdr};
        for (struct pbuf *q = p->next; q; q = q->next) {
            if (n == 16) { /* a long chain: gather the rest */
                pbuf_copy_partial(p, pkt + hdr, (u16_t)(p->tot_len - hdr), (u16_t)hdr);
                hdr = p->tot_len;
                n = 1;
                break;
            }
            iov[n++] = (struct iovec){q->payload, q->len};
        }
    }
    struct np_tflow *f = find_id(id_of(pk.family, pk.dst, pk.dport));
    if (!f || f->family != pk.family) return ERR_OK; /* lwIP's TIME_WAIT, forgotten */
    np_pkt_rewrite(&pk, f->cdst, f->cdport, f->csrc, f->csport, false);
    struct virtio_net_hdr *h = (struct virtio_net_hdr *)st.out;
    memset(h, 0, VNET_HDR);
    h->flags = VIRTIO_NET_HDR_F_NEEDS_CSUM;
    h->csum_start = (uint16_t)pk.l3;
    h->csum_offset = 16;
    if (pk.payload > f->child_mss) {
        h->gso_type = pk.family == AF_INET ? VIRTIO_NET_HDR_GSO_TCPV4 : VIRTIO_NET_HDR_GSO_TCPV6;
        h->gso_size = f->child_mss;
        h->hdr_len = (uint16_t)(pk.l3 + pk.l4);
    }
    iov[0] = (struct iovec){st.out, VNET_HDR + hdr};
    tun_write(f->tun, iov, n);
    return ERR_OK;
}

static err_t output4(struct netif *n, struct pbuf *p, const ip4_addr_t *a)
{
    return output(p);
}

static err_t output6(struct netif *n, struct pbuf *p, const ip6_addr_t *a)
{
    return output(p);
}

/* A reset for a segment of no connection, straight back to the sandbox. */
static void reset(struct np_stack_tun *t, const struct np_pkt *pk)
{
    uint8_t frame[VNET_HDR + NP_PKT_RESET_MAX];
    memset(frame, 0, VNET_HDR);
    struct iovec iov = {frame, VNET_HDR + np_pkt_reset(pk, frame + VNET_HDR)};
    tun_write(t, &iov, 1);
}

void np_stack_input(struct np_stack_tun *t, uint8_t *pkt, size_t n)
{
    struct np_pkt pk;
    /* UDP and anything else but TCP goes nowhere (the resolver is on loopback) */
    if (np_pkt_parse(pkt, n, &pk) < 0 || pk.proto != IPPROTO_TCP || pk.len > 0xFFFF) return;
    struct np_tflow *f = find_key(t, &pk);
    bool syn = (pk.flags & (NP_TCP_SYN | NP_TCP_ACK | NP_TCP_RST)) == NP_TCP_SYN;
    if (f && f->state == FLOW_LINGER && syn) {
        flow_kill(f); /* the child reuses the pair for a new connection */
        f = NULL;
    }
    if (!f && (!syn || !(f = flow_open(t, &pk)))) {
        if (!(pk.flags & NP_TCP_RST)) reset(t, &pk);
        return;
    }
    uint8_t ra[16];
    remote_of(f->id, pk.family, ra);
    np_pkt_rewrite(&pk, ra, (uint16_t)f->id, pk.family == AF_INET ? local4 : local6, LISTEN_PORT,
                   true);
    struct pbuf *p = pbuf_alloc(PBUF_RAW, (u16_t)pk.len, PBUF_RAM);
    if (!p) return;
    pbuf_take(p, pkt, (u16_t)pk.len);
    if (st.netif.input(p, &st.netif) != ERR_OK) pbuf_free(p);
}

/* ---- the proxy's side of a flow (np_internal.h) ------------------------------------------ */

void np_tflow_bind(struct np_tflow *f, struct np_client *c, np_input_fn input, np_fits_fn fits,
                   np_client_fn drained, np_client_fn shutdown_done)
{
    f->client = c;
    f->input = input;
    f->fits = fits;
    f->drained = drained;
    f->shutdown_done = shutdown_done;
}

void np_tflow_write(struct np_tflow *f, char *data, size_t n, bool pooled)
{
    if (f->await_reply) {
        /* the relay speaks SOCKS5: its reply is the verdict, not the child's business */
        f->await_reply = false;
        f->refused = !(n >= 2 && (uint8_t)data[0] == 5 && data[1] == 0);
        np_buf_release(data, pooled);
        return;
    }
    if (f->refused || !f->pcb || f->dead || f->shut_wanted) {
        np_buf_release(data, pooled);
        return;
    }
    struct tx_buf *b = xcalloc(1, sizeof *b);
    b->data = data;
    b->len = n;
    b->pooled = pooled;
    if (f->tx_tail)
        f->tx_tail->next = b;
    else
        f->tx = b;
    f->tx_tail = b;
    f->queued += n;
    if (f->queued > NP_LOW_WATER) f->high = true;
    tx_push(f);
}

void np_tflow_read(struct np_tflow *f, bool on)
{
    f->reading = on;
    if (on) rx_deliver(f);
}

size_t np_tflow_queued(const struct np_tflow *f)
{
    return f->queued;
}

size_t np_tflow_held(const struct np_tflow *f)
{
    return f->held;
}

void np_tflow_shutdown(struct np_tflow *f)
{
    if (f->refused || f->await_reply || !f->pcb) {
        /* refused, failed, or gone: the child sees a reset */
        f->busy++;
        pcb_abort(f);
        if (f->client) f->shutdown_done(f->client);
        flow_unbusy(f);
        return;
    }
    f->shut_wanted = true;
    tx_push(f);
}

void np_tflow_close(struct np_tflow *f)
{
    f->client = NULL;
    if (f->pcb && f->fin_queued && !f->refused && !f->dead) {
        /* let the child have its data and close: lwIP finishes */
        if (f->rx) pbuf_free(f->rx);
        f->rx = NULL;
        set_state(f, FLOW_DRAINING);
        return;
    }
    flow_kill(f);
}

/* ---- the stack ------------------------------------------------------------------------------ */

static void sweep(uint64_t now)
{
    for (struct np_tflow *f = st.all.next, *next; f != &st.all; f = next) {
        next = f->next;
        uint64_t age = now - f->since;
        if ((f->state == FLOW_NEW && age > NEW_TIMEOUT_MS) ||
            (f->state == FLOW_DRAINING && age > DRAIN_TIMEOUT_MS) ||
            (f->state == FLOW_LINGER && age > LINGER_MS))
            flow_kill(f);
    }
}

static void on_tick(uv_timer_t *t)
{
    sys_check_timeouts();
    uint64_t now = uv_now(st.loop);
    if (now - st.last_sweep >= SWEEP_MS) {
        st.last_sweep = now;
        sweep(now);
    }
    /* idle once no flow is left and lwIP holds no connection (its TIME_WAIT ones age
     * only while its timers run) */
    if (st.n == 0 && !tcp_active_pcbs && !tcp_tw_pcbs) {
        uv_timer_stop(&st.timer);
        st.ticking = false;
    }
}

static void tick_start(void)
{
    if (st.ticking) return;
    st.ticking = true;
    uv_timer_start(&st.timer, on_tick, TICK_MS, TICK_MS);
}

void np_stack_tun_gone(struct np_stack_tun *t)
{
    for (struct np_tflow *f = st.all.next, *next; f != &st.all; f = next) {
        next = f->next;
        if (f->tun == t) {
            f->client = NULL; /* the proxy closed its clients first */
            flow_kill(f);
        }
    }
}

static err_t netif_setup(struct netif *n)
{
    n->name[0] = 'n';
    n->name[1] = 'p';
    n->mtu = 0xFFFF;
    n->output = output4;
    n->output_ip6 = output6;
    return ERR_OK;
}

static struct tcp_pcb *listen_on(u8_t type, const ip_addr_t *addr)
{
    struct tcp_pcb *pcb = tcp_new_ip_type(type);
    if (!pcb || tcp_bind(pcb, addr, LISTEN_PORT) != ERR_OK) return NULL;
    struct tcp_pcb *l = tcp_listen_with_backlog(pcb, 255);
    if (l) tcp_accept(l, on_accept);
    return l;
}

int np_stack_init(uv_loop_t *loop)
{
    if (st.up) return 0;
    st.loop = loop;
    st.all.next = st.all.prev = &st.all;
    lwip_init();
    ip4_addr_t a4, mask, gw;
    IP4_ADDR(&a4, local4[0], local4[1], local4[2], local4[3]);
    ip4_addr_set_zero(&mask);
    ip4_addr_set_zero(&gw);
    if (!netif_add(&st.netif, &a4, &mask, &gw, NULL, netif_setup, ip_input)) return -ENOMEM;
    ip6_addr_t a6;
    ip6addr_aton("fd00::1", &a6);
    netif_ip6_addr_set(&st.netif, 0, &a6);
    netif_ip6_addr_set_state(&st.netif, 0, IP6_ADDR_PREFERRED);
    netif_set_default(&st.netif);
    netif_set_link_up(&st.netif);
    netif_set_up(&st.netif);
    ip_addr_t l4, l6;
    ip_addr_copy_from_ip4(l4, a4);
    ip_addr_copy_from_ip6(l6, a6);
    if (!listen_on(IPADDR_TYPE_V4, &l4) || !listen_on(IPADDR_TYPE_V6, &l6)) return -ENOMEM;
    uv_timer_init(loop, &st.timer);
    uv_unref((uv_handle_t *)&st.timer);
    st.up = true;
    return 0;
}
