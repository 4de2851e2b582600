/* np_tunpkt: parsing, address translation and resets for TUN packets (see
 * np_tunpkt.h). Checksums are recomputed rather than adjusted: the payload is
 * summed 8 bytes at a time, a fraction of what copying it costs. */
#include "netproxy/np_tunpkt.h"

#include <netinet/in.h>
#include <string.h>
#include <sys/socket.h>

static uint16_t get16(const uint8_t *p)
{
    return (uint16_t)(p[0] << 8 | p[1]);
}

static uint32_t get32(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static void put16(uint8_t *p, uint16_t v)
{
    p[0] = (uint8_t)(v >> 8);
    p[1] = (uint8_t)v;
}

static void put32(uint8_t *p, uint32_t v)
{
    put16(p, (uint16_t)(v >> 16));
    put16(p + 2, (uint16_t)v);
}

uint64_t np_csum_add(uint64_t sum, const uint8_t *p, size_t n)
{
    /* 32-bit big-endian words into a 64-bit sum: carries are folded at the end. */
    while (n >= 8) {
        sum += get32(p);
        sum += get32(p + 4);
        p += 8;
        n -= 8;
    }
    while (n >= 2) {
        sum += get16(p);
        p += 2;
        n -= 2;
    }
    if (n) sum += (uint64_t)p[0] << 8;
    return sum;
}

uint16_t np_csum_fold(uint64_t sum)
{
    while (sum >> 16)
        sum = (sum & 0xFFFF) + (sum >> 16);
    return (uint16_t)sum;
}

int np_pkt_parse(uint8_t *p, size_t n, struct np_pkt *pk)
{
    memset(pk, 0, sizeof *pk);
    pk->p = p;
    if (n < 20) return -1;
    if ((p[0] >> 4) == 4) {
        size_t ihl = (size_t)(p[0] & 15) * 4, tot = get16(p + 2);
        if (ihl < 20 || tot < ihl || tot > n) return -1;
        if (get16(p + 6) & 0x3FFF) return -1; /* a fragment */
        pk->family = AF_INET;
        pk->len = tot;
        pk->l3 = ihl;
        pk->proto = p[9];
        pk->src = p + 12;
        pk->dst = p + 16;
        pk->alen = 4;
    } else if ((p[0] >> 4) == 6) {
        if (n < 40 || 40u + get16(p + 4) > n) return -1;
        pk->family = AF_INET6;
        pk->len = 40u + get16(p + 4);
        pk->l3 = 40;
        pk->proto = p[6]; /* no extension headers: anything else is dropped */
        pk->src = p + 8;
        pk->dst = p + 24;
        pk->alen = 16;
    } else {
        return -1;
    }
    const uint8_t *t = p + pk->l3;
    size_t rest = pk->len - pk->l3;
    if (pk->proto == IPPROTO_UDP) {
        if (rest < 8) return -1;
        pk->l4 = 8;
    } else if (pk->proto == IPPROTO_TCP) {
        if (rest < 20 || (size_t)(t[12] >> 4) * 4 < 20 || (size_t)(t[12] >> 4) * 4 > rest)
            return -1;
        pk->l4 = (size_t)(t[12] >> 4) * 4;
        pk->seq = get32(t + 4);
        pk->ack = get32(t + 8);
        pk->flags = t[13];
    } else {
        return -1;
    }
    pk->sport = get16(t);
    pk->dport = get16(t + 2);
    pk->payload = rest - pk->l4;
    return 0;
}

/* The pseudo header's sum for the transport segment. */
static uint64_t pseudo_sum(const struct np_pkt *pk)
{
    uint64_t sum = np_csum_add(0, pk->src, pk->alen);
    sum = np_csum_add(sum, pk->dst, pk->alen);
    return sum + pk->proto + (pk->len - pk->l3);
}

static void ipv4_header_checksum(uint8_t *ip, size_t l3)
{
    put16(ip + 10, 0);
    put16(ip + 10, (uint16_t)~np_csum_fold(np_csum_add(0, ip, l3)));
}

void np_pkt_rewrite(struct np_pkt *pk, const uint8_t *src, uint16_t sport, const uint8_t *dst,
                    uint16_t dport, bool full)
{
    uint8_t *t = pk->p + pk->l3;
    memmove(pk->src, src, pk->alen);
    memmove(pk->dst, dst, pk->alen);
    put16(t, sport);
    put16(t + 2, dport);
    pk->sport = sport;
    pk->dport = dport;
    if (pk->family == AF_INET) ipv4_header_checksum(pk->p, pk->l3);
    put16(t + 16, 0);
    uint64_t sum = pseudo_sum(pk);
    if (full)
        put16(t + 16, (uint16_t)~np_csum_fold(np_csum_add(sum, t, pk->len - pk->l3)));
    else
        put16(t + 16, np_csum_fold(sum));
}

uint16_t np_pkt_mss(const struct np_pkt *pk)
{
    const uint8_t *o = pk->p + pk->l3 + 20, *end = pk->p + pk->l3 + pk->l4;
    while (o < end) {
        if (o[0] == 0) break; /* end of options */
        if (o[0] == 1) {      /* no-op */
            o++;
            continue;
        }
        if (o + 1 >= end || o[1] < 2 || o + o[1] > end) break;
        if (o[0] == 2 && o[1] == 4) return get16(o + 2);
        o += o[1];
    }
    return 0;
}

size_t np_pkt_reset(const struct np_pkt *pk, uint8_t *out)
{
    size_t l3 = pk->family == AF_INET ? 20 : 40, len = l3 + 20;
    memset(out, 0, len);
    struct np_pkt r = {.p = out,
                       .len = len,
                       .family = pk->family,
                       .l3 = l3,
                       .proto = IPPROTO_TCP,
                       .alen = pk->alen,
                       .l4 = 20};
    if (pk->family == AF_INET) {
        out[0] = 0x45;
        put16(out + 2, (uint16_t)len);
        out[8] = 64; /* TTL */
        out[9] = IPPROTO_TCP;
        r.src = out + 12;
        r.dst = out + 16;
    } else {
        out[0] = 0x60;
        put16(out + 4, 20);
        out[6] = IPPROTO_TCP;
        out[7] = 64;
        r.src = out + 8;
        r.dst = out + 24;
    }
    uint8_t *t = out + l3;
    if (pk->flags & NP_TCP_ACK) {
        put32(t + 4, pk->ack);
        t[13] = NP_TCP_RST;
    } else {
        uint32_t span = (uint32_t)pk->payload + ((pk->flags & NP_TCP_SYN) ? 1u : 0u) +
                        ((pk->flags & NP_TCP_FIN) ? 1u : 0u);
        put32(t + 8, pk->seq + span);
        t[13] = NP_TCP_RST | NP_TCP_ACK;
    }
    t[12] = 5 << 4;
    np_pkt_rewrite(&r, pk->dst, pk->dport, pk->src, pk->sport, true);
    return len;
}
