/* audit_chain: the hash chain that makes an audit file tamper-evident, and its check.
 *
 * Every line of an audit file is one record that starts with its sequence number and
 * the SHA-256 of the line before it:
 *
 *   {"seq":41,"prev":"<64 hex digits>","time":"...","type":"...",...}
 *
 * seq counts up by one from 1; prev of the first record ever is 64 zeros; the hash is
 * taken over the whole previous line without its newline. Changing a record then
 * breaks the next record's prev; removing records breaks both the count and the
 * next prev. A file that starts mid-chain (after rotation, or after a restart that
 * found the file empty) starts with the seq and prev it continues from, so files
 * given in order are checked as one chain.
 *
 * What a chain cannot show (docs/AUDIT.md): the last records cut off the end, or a
 * whole file rewritten from the first change on with the hashes recomputed. Keep a
 * copy off the host for that.
 *
 * Pure: bytes in, bytes and findings out (OpenSSL's SHA-256, no I/O). The writer
 * (audit_writer.c) seals records with it; `exec-server audit verify`
 * (audit_command.c) checks files with it. */
#ifndef EXEC_AUDIT_AUDIT_CHAIN_H
#define EXEC_AUDIT_AUDIT_CHAIN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "util/buf.h"

#define AUDIT_HASH_LEN 32

/* Where a chain stands: the last record's seq (0: none yet) and its line's hash. */
struct audit_chain {
    uint64_t seq;
    uint8_t prev[AUDIT_HASH_LEN];
};

/* A chain with no record yet (seq 0, prev all zeros). */
void audit_chain_init(struct audit_chain *c);

/* Appends the whole line of the record whose body is body (len bytes: from "time"
 * to the closing brace, audit_record.h) to out, with its newline, and advances c. */
void audit_chain_seal(struct audit_chain *c, const char *body, size_t len, struct buf *out);

/* Continues c after a line read back from a file (len bytes, no newline): prev
 * becomes its hash and seq its seq. Returns 0, or -EINVAL when the line does not
 * start like a record (its hash is taken all the same; seq stays). */
int audit_chain_follow(struct audit_chain *c, const char *line, size_t len);

/* The seq and prev a line starts with. Returns 0, or -EINVAL when it does not start
 * with {"seq":N,"prev":"<64 hex>", (N from 1, no leading zero). */
int audit_chain_parse_head(const char *line, size_t len, uint64_t *seq,
                           uint8_t prev[AUDIT_HASH_LEN]);

/* ---- checking files (exec-server audit verify) ---- */

enum audit_finding_kind {
    AUDIT_FIND_START,     /* not a problem: where the chain starts (genesis or mid-chain) */
    AUDIT_FIND_LOST,      /* not a problem: an audit.lost record (the server dropped records) */
    AUDIT_FIND_MALFORMED, /* a line that is not a record */
    AUDIT_FIND_CHANGED,   /* a record whose hash the next record does not carry */
    AUDIT_FIND_MISSING,   /* records missing between two lines (seq jumps) */
    AUDIT_FIND_DISORDER,  /* seq does not go up */
};

/* One thing the check found, at a line (numbers from 1; file is the caller's). */
struct audit_finding {
    enum audit_finding_kind kind;
    uint64_t line;        /* the line it is about (MISSING: the line after the gap) */
    uint64_t other_line;  /* MISSING: the line before the gap; CHANGED: the line whose
                             prev gave it away */
    uint64_t seq, seq_to; /* START: first seq; CHANGED: its seq; MISSING: the missing
                             seqs seq..seq_to; DISORDER: seq after seq_to; LOST: count */
    bool other_file;      /* the line before is the last line of the previous file */
};

/* The check's state, carried from line to line and from file to file. */
struct audit_verifier {
    bool have_prev;     /* a line came before */
    bool prev_bad;      /* ...and it was not a record */
    uint64_t bad_run;   /* lines that were not records since the last one that was:
                           each may stand for one record, so the seq may go up by as many */
    bool new_file;      /* the next line is the first of a file */
    uint64_t prev_line; /* its number in its file */
    uint64_t prev_seq;  /* the last good record's seq (0: none) */
    uint8_t prev_hash[AUDIT_HASH_LEN];
    uint64_t records, problems; /* counted so far */
    uint64_t first_seq, last_seq;
};

void audit_verifier_init(struct audit_verifier *v);
/* The next file begins (line numbers restart; a gap is reported across files). */
void audit_verifier_next_file(struct audit_verifier *v);
/* Judges line number `line` (len bytes, without its newline); writes up to three
 * findings to out and returns how many. */
int audit_verifier_line(struct audit_verifier *v, uint64_t line, const char *text, size_t len,
                        struct audit_finding out[3]);

#endif
