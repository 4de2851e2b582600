/* np_tunpkt: IP packets of transparent TCP, pure (no I/O): parsing what a sandbox
 * writes to its TUN device, rewriting addresses and ports both ways (np_stack.c
 * translates every connection of every sandbox into one lwIP address space), the
 * checksums that go with it, and the reset that answers a segment of no connection.
 *
 * Only what a sandboxed program's kernel sends is taken: IPv4 without fragments and
 * IPv6 without extension headers, carrying TCP or UDP; everything else (ICMP,
 * fragments, router solicitations) is dropped by the caller. */
#ifndef EXEC_NETPROXY_NP_TUNPKT_H
#define EXEC_NETPROXY_NP_TUNPKT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The largest reset np_pkt_reset writes. */
#define NP_PKT_RESET_MAX 60u

/* One parsed packet; the pointers point into its bytes. */
struct np_pkt {
    uint8_t *p;     /* the IP header */
    size_t len;     /* the packet's length (from its header) */
    int family;     /* AF_INET or AF_INET6 */
    size_t l3;      /* IP header length */
    uint8_t proto;  /* IPPROTO_TCP or IPPROTO_UDP */
    uint8_t *src;   /* source address (4 or 16 bytes) */
    uint8_t *dst;   /* destination address */
    size_t alen;    /* 4 or 16 */
    uint16_t sport; /* host order */
    uint16_t dport; /* host order */
    size_t l4;      /* TCP header length (8 for UDP) */
    uint8_t flags;  /* TCP flags (FIN 1, SYN 2, RST 4, ACK 16) */
    uint32_t seq;   /* TCP sequence number, host order */
    uint32_t ack;   /* TCP acknowledgement number */
    size_t payload; /* bytes after the transport header */
};

#define NP_TCP_FIN 0x01
#define NP_TCP_SYN 0x02
#define NP_TCP_RST 0x04
#define NP_TCP_ACK 0x10

/* Parses p[0..n). Returns 0, or -1 for a packet to drop. */
int np_pkt_parse(uint8_t *p, size_t n, struct np_pkt *pk);

/* Rewrites a TCP packet's addresses (pk->alen bytes each) and ports, then its
 * checksums: the IPv4 header's, and TCP's in full (full) or as the pseudo-header
 * sum a CHECKSUM_PARTIAL packet carries (the kernel finishes or skips it). */
void np_pkt_rewrite(struct np_pkt *pk, const uint8_t *src, uint16_t sport, const uint8_t *dst,
                    uint16_t dport, bool full);

/* The MSS option of a TCP segment (a SYN's), or 0. */
uint16_t np_pkt_mss(const struct np_pkt *pk);

/* A reset answering TCP segment pk (RFC 793): into out (NP_PKT_RESET_MAX bytes);
 * returns its length. */
size_t np_pkt_reset(const struct np_pkt *pk, uint8_t *out);

/* The Internet checksum's running sum over n bytes (RFC 1071), to be folded. */
uint64_t np_csum_add(uint64_t sum, const uint8_t *p, size_t n);
uint16_t np_csum_fold(uint64_t sum);

#endif
