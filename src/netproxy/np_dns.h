/* np_dns: the synthetic-name resolver of transparent TCP, pure (no I/O).
 *
 * Inside a transparent-TCP sandbox /etc/resolv.conf names 127.0.0.53, where the
 * server answers every name with an address of its own: `A` 198.18.0.N and `AAAA`
 * fdc0:de00::N, one N per name (case-insensitive, a final dot ignored), numbered
 * from 1 in the order names are first asked. A connection to such an address is then
 * decided on the name the program asked for, so the policy never has to guess a
 * name from an address (PROTOCOL.md section 5.11; the numbering, TTL, flags and the
 * answers to other types are codex 0.171.0's, observed).
 *
 * What is answered: a standard query (QR 0, opcode 0) with one question. A and AAAA
 * in class IN get one answer (TTL 60); any other type or class gets NOERROR without
 * answers; a name with a byte outside letters, digits, `-` and `_` gets NXDOMAIN
 * (so a policy host is always plain ASCII); past NP_DNS_MAX_NAMES names, SERVFAIL.
 * Responses, other opcodes, several questions and anything malformed get nothing. */
#ifndef EXEC_NETPROXY_NP_DNS_H
#define EXEC_NETPROXY_NP_DNS_H

#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

/* Names one sandbox may have addresses for. */
#define NP_DNS_MAX_NAMES 65536u
/* The longest reply (a question of at most 255 bytes and one AAAA answer). */
#define NP_DNS_MAX_REPLY 512u

/* One sandbox's names. Zero-initialised is empty. */
struct np_dns {
    char **names;    /* names[i - 1] for N = i: lower case, no final dot; owned */
    uint32_t n, cap; /* names given, allocated */
    uint32_t *slots; /* open-addressing index: N, or 0 for free; nslots a power of 2 */
    uint32_t nslots;
};

void np_dns_free(struct np_dns *d);

/* Answers one query (a UDP payload, or a TCP message without its length): the reply
 * goes to out (at least NP_DNS_MAX_REPLY bytes) and its length is returned; 0 means
 * no reply. A new name gets the next N. */
size_t np_dns_answer(struct np_dns *d, const uint8_t *q, size_t n, uint8_t *out);

/* The name behind a synthetic address: 1 with *name set (owned by d), 0 for an
 * address in a synthetic range that no name was given, -1 for any other address. */
int np_dns_lookup(const struct np_dns *d, const struct sockaddr *sa, const char **name);

#endif
