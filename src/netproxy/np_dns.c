/* np_dns: synthetic names and the DNS messages about them (see np_dns.h). */
#include "netproxy/np_dns.h"

#include <ctype.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "util/mem.h"

#define TYPE_A 1
#define TYPE_AAAA 28
#define CLASS_IN 1
#define RCODE_SERVFAIL 2
#define RCODE_NXDOMAIN 3
#define TTL 60

/* 198.18.0.0/15 and fdc0:de00::/96: N is added to the base. */
#define V4_BASE 0xC6120000u
static const uint8_t v6_base[12] = {0xfd, 0xc0, 0xde, 0x00};

static uint32_t name_hash(const char *s)
{
    uint32_t h = 2166136261u; /* FNV-1a */
    for (; *s; s++)
        h = (h ^ (uint8_t)*s) * 16777619u;
    return h;
}

void np_dns_free(struct np_dns *d)
{
    for (uint32_t i = 0; i < d->n; i++)
        free(d->names[i]);
    free(d->names);
    free(d->slots);
    memset(d, 0, sizeof *d);
}

static void index_put(uint32_t *slots, uint32_t nslots, const char *name, uint32_t n)
{
    for (uint32_t i = name_hash(name) & (nslots - 1);; i = (i + 1) & (nslots - 1))
        if (!slots[i]) {
            slots[i] = n;
            return;
        }
}

/* N for name, given a new one when it has none; 0 when the table is full. */
static uint32_t number_of(struct np_dns *d, const char *name)
{
    if (d->nslots) {
        for (uint32_t i = name_hash(name) & (d->nslots - 1); d->slots[i];
             i = (i + 1) & (d->nslots - 1))
            if (strcmp(d->names[d->slots[i] - 1], name) == 0) return d->slots[i];
    }
    if (d->n >= NP_DNS_MAX_NAMES) return 0;
    if (d->n == d->cap) {
        d->cap = d->cap ? d->cap * 2 : 16;
        d->names = xrealloc(d->names, d->cap * sizeof *d->names);
    }
    d->names[d->n++] = xstrdup(name);
    if (2 * d->n > d->nslots) { /* keep the index at most half full */
        uint32_t ns = d->nslots ? d->nslots * 2 : 64;
        uint32_t *slots = xcalloc(ns, sizeof *slots);
        for (uint32_t k = 1; k <= d->n; k++)
            index_put(slots, ns, d->names[k - 1], k);
        free(d->slots);
        d->slots = slots;
        d->nslots = ns;
    } else {
        index_put(d->slots, d->nslots, name, d->n);
    }
    return d->n;
}

/* The question's name as text (lower case, labels joined by dots) into name; *end
 * past the name. -1 malformed (compression, a label past the message, over 255
 * bytes), 0 fine, 1 a byte we do not take in a name. */
static int read_name(const uint8_t *q, size_t n, size_t at, char *name, size_t *end)
{
    size_t len = 0, wire = 0;
    int odd = 0;
    for (;;) {
        if (at >= n) return -1;
        uint8_t l = q[at++];
        wire += 1u + l;
        if (l == 0) break;
        if (l > 63 || wire > 255 || at + l > n) return -1;
        if (len) name[len++] = '.';
        for (uint8_t k = 0; k < l; k++) {
            uint8_t ch = q[at + k];
            if (!isalnum(ch) && ch != '-' && ch != '_') odd = 1;
            name[len++] = (char)tolower(ch);
        }
        at += l;
    }
    name[len] = '\0';
    *end = at;
    return odd;
}

static uint8_t *put16(uint8_t *p, unsigned v)
{
    p[0] = (uint8_t)(v >> 8);
    p[1] = (uint8_t)v;
    return p + 2;
}

size_t np_dns_answer(struct np_dns *d, const uint8_t *q, size_t n, uint8_t *out)
{
    if (n < 12) return 0;
    unsigned flags = (unsigned)q[2] << 8 | q[3];
    unsigned qdcount = (unsigned)q[4] << 8 | q[5];
    if ((flags & 0x8000) || (flags & 0x7800) || qdcount != 1) return 0;
    char name[256];
    size_t end;
    int odd = read_name(q, n, 12, name, &end);
    if (odd < 0 || end + 4 > n) return 0;
    unsigned qtype = (unsigned)q[end] << 8 | q[end + 1];
    unsigned qclass = (unsigned)q[end + 2] << 8 | q[end + 3];
    end += 4;
    unsigned rcode = 0;
    uint32_t num = 0;
    bool addr = qclass == CLASS_IN && (qtype == TYPE_A || qtype == TYPE_AAAA) && name[0];
    if (addr && odd)
        rcode = RCODE_NXDOMAIN;
    else if (addr && !(num = number_of(d, name)))
        rcode = RCODE_SERVFAIL;
    /* Header: the id, QR + RD as asked + RA, the question echoed as sent. */
    uint8_t *p = out;
    memcpy(p, q, 2);
    p = put16(p + 2, 0x8080u | (flags & 0x0100u) | rcode);
    p = put16(p, 1);
    p = put16(p, num ? 1 : 0);
    p = put16(put16(p, 0), 0);
    memcpy(p, q + 12, end - 12);
    p += end - 12;
    if (num) {
        p = put16(p, 0xC00C); /* the name: a pointer to the question's */
        p = put16(put16(p, qtype), CLASS_IN);
        p = put16(put16(p, 0), TTL);
        if (qtype == TYPE_A) {
            uint32_t a = V4_BASE + num;
            p = put16(p, 4);
            p = put16(put16(p, a >> 16), a & 0xFFFF);
        } else {
            p = put16(p, 16);
            memcpy(p, v6_base, 12);
            p = put16(put16(p + 12, num >> 16), num & 0xFFFF);
        }
    }
    return (size_t)(p - out);
}

int np_dns_lookup(const struct np_dns *d, const struct sockaddr *sa, const char **name)
{
    uint32_t num;
    if (sa->sa_family == AF_INET) {
        uint32_t a = ntohl(((const struct sockaddr_in *)sa)->sin_addr.s_addr);
        if ((a & 0xFFFE0000u) != V4_BASE) return -1;
        num = a - V4_BASE;
    } else if (sa->sa_family == AF_INET6) {
        const uint8_t *b = ((const struct sockaddr_in6 *)sa)->sin6_addr.s6_addr;
        if (memcmp(b, v6_base, 12) != 0) return -1;
        num = (uint32_t)b[12] << 24 | (uint32_t)b[13] << 16 | (uint32_t)b[14] << 8 | b[15];
    } else {
        return -1;
    }
    if (num == 0 || num > d->n) return 0;
    *name = d->names[num - 1];
    return 1;
}
