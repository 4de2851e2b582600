/* audit_command: `exec-server audit verify FILE...`, the check of audit files.
 *
 * Reads each file line by line through the chain's checker (audit_chain.h), files
 * in the order given as one chain (the rotated ones first: audit.log.2 audit.log.1
 * audit.log), and says where the chain breaks: a record changed (the next record's
 * prev is not its hash), records missing (the seq jumps), lines that are not
 * records, seq going backwards. Exit status 0 when the chain holds, 1 when it
 * breaks, 2 for a usage error or a file that cannot be read. */
#include "audit/audit_command.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "audit/audit_chain.h"

static int usage(FILE *out, int status)
{
    fputs("Usage: exec-server audit verify FILE...\n\n"
          "Checks the hash chain of exec-server audit logs (--audit-log): every record's\n"
          "seq is one more than the record before it and its prev is the SHA-256 of the\n"
          "line before it. Files are one chain in the order given (oldest first, as\n"
          "logrotate numbers them: audit.log.2 audit.log.1 audit.log). Each break is named\n"
          "by file and line; the exit status is 0 when the chain holds, 1 when it breaks,\n"
          "2 when a file cannot be read. docs/AUDIT.md says what a chain cannot show.\n",
          out);
    return status;
}

/* One finding as a line of the report. */
static void report(const char *file, const char *prev_file, const struct audit_finding *f)
{
    const char *where = f->other_file && prev_file ? prev_file : file;
    switch (f->kind) {
    case AUDIT_FIND_START:
        if (f->seq != 1)
            printf("%s:%llu: the chain starts at seq %llu: the records before it are not in "
                   "these files\n",
                   file, (unsigned long long)f->line, (unsigned long long)f->seq);
        return;
    case AUDIT_FIND_LOST:
        printf("%s:%llu: the server dropped %llu record(s) here for want of room "
               "(audit.lost)\n",
               file, (unsigned long long)f->line, (unsigned long long)f->seq);
        return;
    case AUDIT_FIND_MALFORMED:
        printf("%s:%llu: not an audit record (changed, or cut short)\n", file,
               (unsigned long long)f->line);
        return;
    case AUDIT_FIND_CHANGED:
        printf("%s:%llu: record seq %llu was changed: the next record (%s:%llu) carries "
               "another hash for it\n",
               where, (unsigned long long)f->line, (unsigned long long)f->seq, file,
               (unsigned long long)f->other_line);
        return;
    case AUDIT_FIND_MISSING:
        if (f->seq == f->seq_to)
            printf("%s:%llu: record seq %llu is missing before this line (after %s:%llu): "
                   "removed\n",
                   file, (unsigned long long)f->line, (unsigned long long)f->seq, where,
                   (unsigned long long)f->other_line);
        else
            printf("%s:%llu: records seq %llu to %llu are missing before this line (after "
                   "%s:%llu): removed\n",
                   file, (unsigned long long)f->line, (unsigned long long)f->seq,
                   (unsigned long long)f->seq_to, where, (unsigned long long)f->other_line);
        return;
    case AUDIT_FIND_DISORDER:
        printf("%s:%llu: seq %llu comes after seq %llu: records out of order\n", file,
               (unsigned long long)f->line, (unsigned long long)f->seq,
               (unsigned long long)f->seq_to);
        return;
    }
}

static int verify_file(struct audit_verifier *v, const char *path, const char *prev_path)
{
    FILE *f = fopen(path, "re");
    if (!f) {
        fprintf(stderr, "exec-server audit verify: %s: %s\n", path, strerror(errno));
        return -1;
    }
    audit_verifier_next_file(v);
    char *line = NULL;
    size_t cap = 0;
    ssize_t n;
    uint64_t no = 0;
    while ((n = getline(&line, &cap, f)) >= 0) {
        no++;
        size_t len = (size_t)n;
        if (len && line[len - 1] == '\n') len--;
        struct audit_finding out[3];
        int k = audit_verifier_line(v, no, line, len, out);
        for (int i = 0; i < k; i++)
            report(path, prev_path, &out[i]);
    }
    int err = ferror(f) ? errno : 0;
    free(line);
    fclose(f);
    if (err) {
        fprintf(stderr, "exec-server audit verify: %s: %s\n", path, strerror(err));
        return -1;
    }
    return 0;
}

int audit_command_main(int argc, char **argv)
{
    if (argc < 2 || strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0)
        return usage(argc < 2 ? stderr : stdout, argc < 2 ? 2 : 0);
    if (strcmp(argv[1], "verify") != 0) {
        fprintf(stderr, "exec-server audit: unknown command `%s`\n", argv[1]);
        return usage(stderr, 2);
    }
    if (argc < 3) return usage(stderr, 2);
    struct audit_verifier v;
    audit_verifier_init(&v);
    for (int i = 2; i < argc; i++)
        if (verify_file(&v, argv[i], i > 2 ? argv[i - 1] : NULL) < 0) return 2;
    if (v.records)
        printf("%llu record(s), seq %llu to %llu: %s\n", (unsigned long long)v.records,
               (unsigned long long)v.first_seq, (unsigned long long)v.last_seq,
               v.problems ? "the chain is broken" : "the chain holds");
    else
        printf("no records: %s\n", v.problems ? "the chain is broken" : "nothing to check");
    if (v.problems) printf("%llu break(s)\n", (unsigned long long)v.problems);
    return v.problems ? 1 : 0;
}
