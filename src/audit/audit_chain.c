/* audit_chain: sealing records into a hash chain, and checking one (see audit_chain.h). */
#include "audit/audit_chain.h"

#include <errno.h>
#include <jansson.h>
#include <openssl/sha.h>
#include <string.h>

#include "proto/hex.h"

void audit_chain_init(struct audit_chain *c)
{
    memset(c, 0, sizeof *c);
}

void audit_chain_seal(struct audit_chain *c, const char *body, size_t len, struct buf *out)
{
    size_t start = out->len;
    char hex[2 * AUDIT_HASH_LEN + 1];
    hex_encode(c->prev, AUDIT_HASH_LEN, hex);
    buf_reserve(out, len + 120);
    buf_puts(out, "{\"seq\":");
    buf_put_u64(out, ++c->seq);
    buf_puts(out, ",\"prev\":\"");
    buf_append(out, hex, 2 * AUDIT_HASH_LEN);
    buf_puts(out, "\",");
    buf_append(out, body, len);
    SHA256((const unsigned char *)out->data + start, out->len - start, c->prev);
    buf_putc(out, '\n');
}

int audit_chain_parse_head(const char *line, size_t len, uint64_t *seq,
                           uint8_t prev[AUDIT_HASH_LEN])
{
    static const char a[] = "{\"seq\":", b[] = ",\"prev\":\"";
    size_t i = sizeof a - 1;
    if (len < i || memcmp(line, a, i) != 0) return -EINVAL;
    if (i >= len || line[i] < '1' || line[i] > '9') return -EINVAL;
    uint64_t n = 0;
    for (; i < len && line[i] >= '0' && line[i] <= '9'; i++) {
        if (n > (UINT64_MAX - 9) / 10) return -EINVAL;
        n = n * 10 + (uint64_t)(line[i] - '0');
    }
    if (len - i < sizeof b - 1 + 2 * AUDIT_HASH_LEN + 2 || memcmp(line + i, b, sizeof b - 1) != 0)
        return -EINVAL;
    i += sizeof b - 1;
    const char *h = line + i;
    if (!hex_is_lower(h, 2 * AUDIT_HASH_LEN) || h[2 * AUDIT_HASH_LEN] != '"' ||
        h[2 * AUDIT_HASH_LEN + 1] != ',')
        return -EINVAL;
    if (hex_decode(h, 2 * AUDIT_HASH_LEN, prev) < 0) return -EINVAL;
    *seq = n;
    return 0;
}

int audit_chain_follow(struct audit_chain *c, const char *line, size_t len)
{
    uint64_t seq;
    uint8_t prev[AUDIT_HASH_LEN];
    int r = audit_chain_parse_head(line, len, &seq, prev);
    if (r == 0) c->seq = seq;
    SHA256((const unsigned char *)line, len, c->prev);
    return r;
}

/* ---- checking ---- */

void audit_verifier_init(struct audit_verifier *v)
{
    memset(v, 0, sizeof *v);
    v->new_file = true;
}

void audit_verifier_next_file(struct audit_verifier *v)
{
    v->new_file = true;
}

/* Whether a line is a whole record: the head, then a JSON object with a string
 * "type" (the rest of the line is what a record is; one object, nothing after). */
static bool is_record(const char *text, size_t len, uint64_t *seq, uint8_t prev[AUDIT_HASH_LEN],
                      bool *lost, uint64_t *lost_n)
{
    if (audit_chain_parse_head(text, len, seq, prev) < 0) return false;
    json_t *o = json_loadb(text, len, JSON_REJECT_DUPLICATES, NULL);
    bool ok = json_is_object(o) && json_is_string(json_object_get(o, "type")) &&
              json_is_string(json_object_get(o, "time"));
    if (ok && strcmp(json_string_value(json_object_get(o, "type")), "audit.lost") == 0) {
        *lost = true;
        json_t *n = json_object_get(o, "records");
        *lost_n = json_is_integer(n) ? (uint64_t)json_integer_value(n) : 0;
    }
    json_decref(o);
    return ok;
}

static struct audit_finding *add(struct audit_finding *out, int *n, enum audit_finding_kind k,
                                 uint64_t line)
{
    struct audit_finding *f = &out[(*n)++];
    memset(f, 0, sizeof *f);
    f->kind = k;
    f->line = line;
    return f;
}

/* How this record follows the last good one: changed, missing, out of order. */
static void judge_link(struct audit_verifier *v, uint64_t line, uint64_t seq,
                       const uint8_t prev[AUDIT_HASH_LEN], struct audit_finding *out, int *n)
{
    bool hash_ok = memcmp(prev, v->prev_hash, AUDIT_HASH_LEN) == 0;
    uint64_t want = v->prev_seq + 1;
    struct audit_finding *f;
    if (v->prev_seq && seq > want && seq <= want + v->bad_run) {
        /* as many records as there were broken lines: those lines were they */
    } else if (v->prev_seq && seq > want) {
        f = add(out, n, AUDIT_FIND_MISSING, line);
        f->other_line = v->prev_line;
        f->other_file = v->new_file;
        f->seq = want;
        f->seq_to = seq - 1;
    } else if (v->prev_seq && seq < want) {
        f = add(out, n, AUDIT_FIND_DISORDER, line);
        f->seq = seq;
        f->seq_to = v->prev_seq;
    } else if (!hash_ok && !v->prev_bad) {
        /* The count goes on but the link does not: the record before was changed. */
        f = add(out, n, AUDIT_FIND_CHANGED, v->prev_line);
        f->other_line = line;
        f->other_file = v->new_file;
        f->seq = v->prev_seq;
    }
}

int audit_verifier_line(struct audit_verifier *v, uint64_t line, const char *text, size_t len,
                        struct audit_finding out[3])
{
    int n = 0;
    uint64_t seq = 0, lost_n = 0;
    uint8_t prev[AUDIT_HASH_LEN];
    bool lost = false;
    if (!is_record(text, len, &seq, prev, &lost, &lost_n)) {
        add(out, &n, AUDIT_FIND_MALFORMED, line);
        v->prev_bad = true;
        v->bad_run++;
    } else {
        if (!v->have_prev) {
            struct audit_finding *f = add(out, &n, AUDIT_FIND_START, line);
            f->seq = seq;
            v->first_seq = seq;
        } else {
            judge_link(v, line, seq, prev, out, &n);
        }
        if (lost) add(out, &n, AUDIT_FIND_LOST, line)->seq = lost_n;
        v->prev_bad = false;
        v->bad_run = 0;
        v->prev_seq = seq;
        v->last_seq = seq;
        v->records++;
    }
    for (int i = 0; i < n; i++)
        v->problems += out[i].kind >= AUDIT_FIND_MALFORMED;
    v->have_prev = true;
    v->new_file = false;
    v->prev_line = line;
    SHA256((const unsigned char *)text, len, v->prev_hash);
    return n;
}
