/* spawn_wire: encoding and decoding of spawner requests (see spawn_wire.h).
 *
 * Decoding walks the frame twice: once to check every length and count the strings,
 * then, with one block allocated for all the lists' slots, to point them into the
 * frame; the second walk cannot fail. */
#include "helpers/spawn_wire.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>

#include "util/mem.h"

struct hdr {
    uint32_t magic, version, flags;
    uint16_t rows, cols;
    uint16_t proxy_ports[2];
    uint32_t n_extra_fds, n_init_fds, refuse_code;
};

#define SPAWN_F_ALL                                                                                \
    (SPAWN_F_TTY | SPAWN_F_PIPE_STDIN | SPAWN_F_SANDBOX | SPAWN_F_PROXY | SPAWN_F_REFUSE |         \
     SPAWN_F_CGROUP | SPAWN_F_TRANSPARENT | SPAWN_F_CGROUP2)
#define SPAWN_F_INIT_FDS (SPAWN_F_PROXY | SPAWN_F_TRANSPARENT | SPAWN_F_CGROUP | SPAWN_F_CGROUP2)

/* The spec's yes/no members and the request's lists by their offsets, in wire order
 * (sandbox/spec.h lists the spec's members): argv, envp, then the spec's lists. */
#define SPEC_FLAG_OFFSET(name) offsetof(struct sandbox_spec, name),
#define SPEC_LIST_OFFSET(name) offsetof(struct spawn_wire_req, spec.name),
static const size_t spec_flags[] = {SANDBOX_SPEC_FLAGS(SPEC_FLAG_OFFSET)};
static const size_t req_lists[] = {offsetof(struct spawn_wire_req, argv),
                                   offsetof(struct spawn_wire_req, envp),
                                   SANDBOX_SPEC_LISTS(SPEC_LIST_OFFSET)};
#define SPEC_NFLAGS (sizeof spec_flags / sizeof spec_flags[0])
#define NLISTS_MAX (sizeof req_lists / sizeof req_lists[0])
_Static_assert(SPEC_NFLAGS < 32, "the spec's yes/no members travel as one u32");

/* How many of the lists r carries: the spec's only with a sandbox. */
static size_t req_nlists(const struct spawn_wire_req *r)
{
    return r->flags & SPAWN_F_SANDBOX ? NLISTS_MAX : 2;
}

static const char *const *req_list(const struct spawn_wire_req *r, size_t l)
{
    return *(const char *const *const *)((const char *)r + req_lists[l]);
}

static void put_u32(struct buf *b, uint32_t v)
{
    buf_append(b, &v, sizeof v);
}

static void put_str(struct buf *b, const char *s)
{
    size_t n = strlen(s);
    put_u32(b, (uint32_t)n);
    buf_append(b, s, n + 1);
}

/* The count goes in front once the list has been walked: no second walk to count. */
static void put_list(struct buf *b, const char *const *v)
{
    size_t at = b->len;
    uint32_t n = 0;
    put_u32(b, 0);
    for (; v && v[n]; n++)
        put_str(b, v[n]);
    memcpy(b->data + at, &n, sizeof n);
}

void spawn_wire_encode(struct buf *out, const struct spawn_wire_req *r)
{
    struct hdr h = {SPAWN_WIRE_MAGIC, SPAWN_WIRE_VERSION,
                    r->flags,         r->rows,
                    r->cols,          {r->proxy_ports[0], r->proxy_ports[1]},
                    r->n_extra_fds,   r->n_init_fds,
                    r->refuse_code};
    buf_append(out, &h, sizeof h);
    put_str(out, r->exe ? r->exe : "");
    put_str(out, r->cwd ? r->cwd : "");
    if (r->flags & SPAWN_F_SANDBOX) {
        uint32_t bits = 0;
        for (size_t i = 0; i < SPEC_NFLAGS; i++)
            if (*(const bool *)((const char *)&r->spec + spec_flags[i])) bits |= 1u << i;
        put_u32(out, bits);
        put_u32(out, r->spec.max_procs);
    }
    for (size_t l = 0; l < req_nlists(r); l++)
        put_list(out, req_list(r, l));
}

struct rd {
    const char *p;
    size_t n, off;
};

static int get_u32(struct rd *d, uint32_t *v)
{
    if (d->n - d->off < sizeof *v) return -EPROTO;
    memcpy(v, d->p + d->off, sizeof *v);
    d->off += sizeof *v;
    return 0;
}

static int get_str(struct rd *d, const char **s)
{
    uint32_t len;
    if (get_u32(d, &len) < 0) return -EPROTO;
    if (d->n - d->off < (size_t)len + 1) return -EPROTO;
    const char *at = d->p + d->off;
    if (at[len] != 0 || memchr(at, 0, len)) return -EPROTO;
    *s = at;
    d->off += (size_t)len + 1;
    return 0;
}

/* The header's flags and descriptor counts agree: the init fds are exactly those the
 * flags name, a TUN device comes with a proxy, and only a sandbox has init fds. */
static bool flags_consistent(const struct hdr *h)
{
    uint32_t f = h->flags;
    if (f & ~(uint32_t)SPAWN_F_ALL) return false;
    if ((f & SPAWN_F_INIT_FDS) && !(f & SPAWN_F_SANDBOX)) return false;
    if ((f & SPAWN_F_TRANSPARENT) && !(f & SPAWN_F_PROXY)) return false;
    uint32_t want = 0;
    for (uint32_t bit = 1; bit; bit <<= 1)
        want += (f & SPAWN_F_INIT_FDS & bit) != 0;
    return h->n_init_fds == want;
}

/* The spec's fixed part: its yes/no members and max_procs. */
static int get_spec_head(struct rd *d, struct sandbox_spec *s)
{
    uint32_t bits, max_procs;
    if (get_u32(d, &bits) < 0 || get_u32(d, &max_procs) < 0) return -EPROTO;
    if (bits >> SPEC_NFLAGS) return -EPROTO;
    for (size_t i = 0; i < SPEC_NFLAGS; i++)
        *(bool *)((char *)s + spec_flags[i]) = bits & (1u << i);
    s->max_procs = max_procs;
    return 0;
}

/* First walk: every list's count, bounded by what the frame can hold (>= 5 bytes a
 * string), and every string checked. Returns the slots the lists need, or -EPROTO. */
static ssize_t count_lists(struct rd d, size_t nl, uint32_t counts[])
{
    size_t total = 0;
    for (size_t l = 0; l < nl; l++) {
        if (get_u32(&d, &counts[l]) < 0) return -EPROTO;
        if (counts[l] > (d.n - d.off) / 5) return -EPROTO;
        total += counts[l] + 1;
        for (uint32_t i = 0; i < counts[l]; i++) {
            const char *s;
            if (get_str(&d, &s) < 0) return -EPROTO;
        }
    }
    return d.off == d.n ? (ssize_t)total : -EPROTO;
}

int spawn_wire_decode(const char *p, size_t n, struct spawn_wire_req *r, void **arena)
{
    memset(r, 0, sizeof *r);
    *arena = NULL;
    struct hdr h;
    if (n < sizeof h) return -EPROTO;
    memcpy(&h, p, sizeof h);
    if (h.magic != SPAWN_WIRE_MAGIC || h.version != SPAWN_WIRE_VERSION || !flags_consistent(&h))
        return -EPROTO;
    r->flags = h.flags;
    r->rows = h.rows;
    r->cols = h.cols;
    r->proxy_ports[0] = h.proxy_ports[0];
    r->proxy_ports[1] = h.proxy_ports[1];
    r->n_extra_fds = h.n_extra_fds;
    r->n_init_fds = h.n_init_fds;
    r->refuse_code = h.refuse_code;
    struct rd d = {p, n, sizeof h};
    if (get_str(&d, &r->exe) < 0 || get_str(&d, &r->cwd) < 0) return -EPROTO;
    if ((r->flags & SPAWN_F_SANDBOX) && get_spec_head(&d, &r->spec) < 0) return -EPROTO;
    uint32_t counts[NLISTS_MAX];
    size_t nl = req_nlists(r);
    ssize_t total = count_lists(d, nl, counts);
    if (total < 0) return -EPROTO;
    const char **slots = xcalloc((size_t)total, sizeof *slots);
    size_t k = 0;
    for (size_t l = 0; l < nl; l++) {
        d.off += sizeof counts[l]; /* the count, read by the first walk */
        *(const char *const **)((char *)r + req_lists[l]) = slots + k;
        for (uint32_t i = 0; i < counts[l]; i++)
            get_str(&d, &slots[k++]);
        slots[k++] = NULL;
    }
    *arena = slots;
    return 0;
}
