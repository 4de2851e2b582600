/* spawn_wire: encoding and decoding of spawner requests (see spawn_wire.h). */
#include "helpers/spawn_wire.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "util/mem.h"

struct hdr {
    uint32_t magic, version, flags;
    uint16_t rows, cols;
    uint16_t proxy_ports[2];
    uint32_t n_extra_fds, n_init_fds, refuse_code, max_procs;
};

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

void spawn_wire_encode(struct buf *out, const struct spawn_wire_req *r)
{
    struct hdr h = {SPAWN_WIRE_MAGIC, SPAWN_WIRE_VERSION,
                    r->flags,         r->rows,
                    r->cols,          {r->proxy_ports[0], r->proxy_ports[1]},
                    r->n_extra_fds,   r->n_init_fds,
                    r->refuse_code,   r->max_procs};
    buf_append(out, &h, sizeof h);
    put_str(out, r->exe ? r->exe : "");
    put_str(out, r->cwd ? r->cwd : "");
    for (int l = 0; l < SPAWN_WIRE_NLISTS; l++) {
        put_u32(out, (uint32_t)r->nlist[l]);
        for (size_t i = 0; i < r->nlist[l]; i++)
            put_str(out, r->list[l][i]);
    }
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

int spawn_wire_decode(const char *p, size_t n, struct spawn_wire_req *r, void **arena)
{
    memset(r, 0, sizeof *r);
    *arena = NULL;
    struct hdr h;
    if (n < sizeof h) return -EPROTO;
    memcpy(&h, p, sizeof h);
    if (h.magic != SPAWN_WIRE_MAGIC || h.version != SPAWN_WIRE_VERSION) return -EPROTO;
    r->flags = h.flags;
    r->rows = h.rows;
    r->cols = h.cols;
    r->proxy_ports[0] = h.proxy_ports[0];
    r->proxy_ports[1] = h.proxy_ports[1];
    r->n_extra_fds = h.n_extra_fds;
    r->n_init_fds = h.n_init_fds;
    r->refuse_code = h.refuse_code;
    r->max_procs = h.max_procs;
    struct rd d = {p, n, sizeof h};
    if (get_str(&d, &r->exe) < 0 || get_str(&d, &r->cwd) < 0) return -EPROTO;
    /* First pass: counts, bounded by what the frame can hold (>= 5 bytes a string). */
    size_t save = d.off, total = 0;
    uint32_t counts[SPAWN_WIRE_NLISTS];
    for (int l = 0; l < SPAWN_WIRE_NLISTS; l++) {
        if (get_u32(&d, &counts[l]) < 0) return -EPROTO;
        if (counts[l] > (d.n - d.off) / 5) return -EPROTO;
        total += counts[l] + 1;
        for (uint32_t i = 0; i < counts[l]; i++) {
            const char *s;
            if (get_str(&d, &s) < 0) return -EPROTO;
        }
    }
    if (d.off != d.n) return -EPROTO;
    const char **slots = xcalloc(total, sizeof *slots);
    d.off = save;
    size_t k = 0;
    for (int l = 0; l < SPAWN_WIRE_NLISTS; l++) {
        uint32_t c = 0;
        get_u32(&d, &c);
        r->list[l] = slots + k;
        r->nlist[l] = c;
        for (uint32_t i = 0; i < c; i++)
            get_str(&d, &slots[k++]);
        slots[k++] = NULL;
    }
    *arena = slots;
    return 0;
}
