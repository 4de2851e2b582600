/* exec-bench: the benchmark driver of issue 6.
 *
 * Starts each server itself (our exec-server and, when installed, the reference codex
 * exec-server), reads the URL line it prints, runs the same scenarios against both in
 * one run and prints one table: each figure for both, the advantage of ours over the
 * reference (>1 means ours is better, whatever the unit), and the floor (the same work
 * done by the driver itself with posix_spawn, a pipe, cat or find) where there is one.
 * Every scenario gets a fresh server so no scenario pays for the previous one's
 * retained processes or allocator high-water mark; the servers run one after the
 * other within a scenario so their figures see the same machine load.
 *
 *   exec-bench [--ours PATH] [--ref PATH|--no-ref] [--scenarios 1,2,...] [--quick]
 *              [--runs N] [--oneshot N] [--stream-mib N] [--fanout N] [--conns N]
 *              [--file-mib N] [--walk N] [--procs N] [--mem-stream-mb N] [--sandbox-n N]
 *
 * Exit status: 0 when every scenario ran against our server, 1 otherwise (the
 * reference failing a scenario only shows in the table).
 *
 * This file keeps the options, the order the scenarios run in, the table and main();
 * the rest lives in bench_core.c, scenarios_proc.c and scenarios_fs.c (see bench.h). */

#include "bench.h"

/* ------------------------------------------------------------------ options */

/* The scenarios a list names ("1,5b,10": each item's leading number, 1-10). */
static unsigned scenario_bits(const char *list)
{
    unsigned bits = 0;
    for (const char *p = list; *p;) {
        char *end;
        long n = strtol(p, &end, 10);
        if (end != p && n >= 1 && n <= 10) bits |= 1u << n;
        p += strcspn(p, ",");
        if (*p == ',') p++;
    }
    return bits;
}

/* One row of scenario 5: its floor command, then each server, freshly started. */
static void file_row(const char *id, const char *name, char *const floor_argv[],
                     const char *floor_out, struct cell (*one)(struct server *))
{
    if (!row_on(id)) return;
    struct row *r = row_get(name, K_MS);
    progress("%s", name);
    r->has_floor = true;
    r->floor = cmd_floor(floor_argv, floor_out);
    struct server s;
    for (int w = 0; w < nservers(); w++)
        if (start_or_fail(&s, w, &r, 1)) {
            record(r, w, one(&s));
            server_stop(&s);
        }
}

static size_t wf_bytes; /* 5b's size */

static struct cell writefile_row(struct server *s)
{
    return writefile_one(s, wf_bytes);
}

/* Rows 1, 1b: one-shot /bin/true, plain and sandboxed. */
static void oneshot_rows(void)
{
    char name[96];
    snprintf(name, sizeof name, "1. one-shot /bin/true, %d sequential (ms)", O.oneshot_n);
    struct row *r;
    if (row_on("1")) {
        r = row_get(name, K_MS);
        progress("%s", name);
        r->has_floor = true;
        scenario_oneshot(r);
    }
    snprintf(name, sizeof name,
             "1b. one-shot /bin/true, ReadOnly sandbox (ms; floor: "
             "ours unsandboxed)");
    if (row_on("1b")) {
        r = row_get(name, K_MS);
        progress("%s", name);
        r->has_floor = true;
        scenario_oneshot_sandboxed(r, "restricted", NULL);
    }
    /* What refusing the server's own ports costs a start (the init answers the
     * command's connects: its seccomp listener made, passed and polled). */
    snprintf(name, sizeof name,
             "1c. one-shot /bin/true, ReadOnly sandbox, network enabled (ms; floor: 1b's kind)");
    if (row_on("1c")) {
        r = row_get(name, K_MS);
        progress("%s", name);
        r->has_floor = true;
        scenario_oneshot_sandboxed(r, "enabled", "restricted");
    }
}

/* Rows 2, 2b: streaming stdout, and the protocol alone as its floor. */
static void stream_rows(void)
{
    char name[96];
    snprintf(name, sizeof name, "2. streaming %zu MiB%s %s (MB/s)", O.stream_bytes >> 20,
             O.text ? " of text" : "", O.tty ? "through a PTY" : "stdout");
    struct row *r = row_get(name, K_MBS);
    progress("%s", name);
    r->has_floor = true;
    snprintf(name, sizeof name,
             "2b. streaming %zu MiB stdout (MB/s; floor: the protocol "
             "without a server)",
             O.stream_bytes >> 20);
    struct row *rp = row_get(name, K_MBS);
    rp->has_floor = true;
    scenario_stream(r, rp);
}

/* Rows 3: fan-out on one connection. */
static void fanout_rows(void)
{
    char name[96];
    snprintf(name, sizeof name, "3. fan-out %d x /bin/true, one connection (ms)", O.fanout_n);
    struct row *r = row_get(name, K_MS);
    progress("%s", name);
    r->has_floor = true;
    scenario_fanout(r);
}

/* Rows 4: many connections, the median of O.runs runs. */
static void conns_rows(void)
{
    struct server s;
    char name[96];
    snprintf(name, sizeof name, "4. %d connections: init + one command each (ms)", O.conns_n);
    struct row *r = row_get(name, K_MS);
    progress("%s", name);
    double acc[2][64];
    int nacc[2] = {0, 0};
    bool failed[2] = {false, false};
    for (int run = 0; run < O.runs; run++)
        for (int w = 0; w < nservers(); w++) {
            if (failed[w] || !start_or_fail(&s, w, &r, 1)) {
                failed[w] = true;
                continue;
            }
            struct cell c = conns_run(&s);
            server_stop(&s);
            if (!c.ok) {
                record(r, w, c);
                failed[w] = true;
                continue;
            }
            acc[w][nacc[w]++] = c.p50;
        }
    for (int w = 0; w < nservers(); w++)
        if (!failed[w]) record(r, w, stats(acc[w], nacc[w]));
}

/* Row `id` (5e, 5f) and its floor, cp of the same file; NULL when not asked for. */
static struct row *client_row(const char *id, const char *verb, const char *src, const char *dst)
{
    if (!row_on(id)) return NULL;
    char name[96];
    snprintf(name, sizeof name, "%s. exec-client fs %s %zu MiB (MB/s; floor: cp)", id, verb,
             O.client_bytes >> 20);
    struct row *r = row_get(name, K_MBS);
    r->has_floor = true;
    progress("%s", name);
    r->floor = cp_floor(src, dst, O.client_bytes);
    return r;
}

/* Rows 5e, 5f: the whole client as a user runs it, `exec-client fs put` and `fs get`
 * of O.client_bytes on loopback, beside cp of the same file (the floor) and the
 * server-only rows above; CPU is the client's (issue 36: at most 1 s per 256 MiB). */
static void client_rows(void)
{
    if (!row_on("5e") && !row_on("5f")) return;
    char src[PATH_MAX + 32], mid[PATH_MAX + 32], back[PATH_MAX + 32];
    snprintf(src, sizeof src, "%s/client-src.bin", O.tmp);
    snprintf(mid, sizeof mid, "%s/client-remote.bin", O.tmp);
    snprintf(back, sizeof back, "%s/client-back.bin", O.tmp);
    progress("5e/5f. exec-client: preparing a %zu MiB file", O.client_bytes >> 20);
    make_file(src, O.client_bytes);
    make_file(mid, O.client_bytes);
    struct row *rp = client_row("5e", "put", src, back);
    struct row *rg = client_row("5f", "get", mid, back);
    struct row *both[2] = {rp ? rp : rg, rg ? rg : rp};
    struct server s;
    for (int w = 0; w < nservers(); w++)
        if (start_or_fail(&s, w, both, 2)) {
            if (rp) record(rp, w, client_xfer_one(&s, true, src, back, O.client_bytes));
            if (rg) record(rg, w, client_xfer_one(&s, false, mid, back, O.client_bytes));
            server_stop(&s);
        }
    unlink(src);
    unlink(mid);
}

/* Rows 5a-5d: fs/readFile, fs/writeFile, writeBlock and walk over one prepared file and tree. */
static void fs_rows(void)
{
    char name[96];
    char path[PATH_MAX + 32];
    snprintf(path, sizeof path, "%s/big.bin", O.tmp);
    file_big = xstrdup(path);
    snprintf(path, sizeof path, "%s/out.bin", O.tmp);
    file_out = xstrdup(path);
    snprintf(path, sizeof path, "%s/tree", O.tmp);
    walk_root = xstrdup(path);
    progress("5. files: preparing %zu MiB file and %d-entry tree", O.file_bytes >> 20,
             O.walk_entries);
    make_file(file_big, O.file_bytes);
    if (row_on("5d")) make_tree(walk_root, O.walk_entries);
    /* One encoding per 1 MiB block (each block a multiple of 4 characters). */
    size_t blk = 1 << 20, nblk = (O.file_bytes + blk - 1) / blk;
    b64_data = xmalloc(nblk * base64_encoded_len(blk));
    {
        uint8_t *raw = xmalloc(blk);
        int fd = open(file_big, O_RDONLY);
        for (size_t b = 0; b < nblk; b++) {
            memset(raw, 0, blk);
            if (pread(fd, raw, blk, (off_t)(b * blk)) < 0) break;
            base64_encode(raw, blk, b64_data + b * base64_encoded_len(blk));
        }
        close(fd);
        free(raw);
    }
    b64_len = nblk * base64_encoded_len(blk);
    /* One fs/writeFile message must stay under the 64 MiB message limit of both
     * servers: its base64 is 4/3 of the data, so 64 MiB cannot go in one call. */
    size_t wf = O.file_bytes;
    while (base64_encoded_len(wf) + 4096 > (64u << 20))
        wf /= 2;
    /* writeFile takes a contiguous encoding: re-encode the first wf bytes. */
    char *wf_b64 = xmalloc(base64_encoded_len(wf));
    {
        uint8_t *raw = xmalloc(wf);
        int fd = open(file_big, O_RDONLY);
        if (pread(fd, raw, wf, 0) < 0) memset(raw, 0, wf);
        close(fd);
        base64_encode(raw, wf, wf_b64);
        free(raw);
    }

    char *cat_argv[] = {"/bin/cat", file_big, NULL};
    char *find_argv[] = {"/usr/bin/find", walk_root, NULL};

    snprintf(name, sizeof name, "5a. fs/readFile %zu MiB (ms)", O.file_bytes >> 20);
    file_row("5a", name, cat_argv, NULL, readfile_one);
    snprintf(name, sizeof name, "5b. fs/writeFile %zu MiB (ms)", wf >> 20);
    /* Floor: head of the same amount into the file. */
    char count[32];
    snprintf(count, sizeof count, "%zu", wf);
    char *head_argv[] = {"/usr/bin/head", "-c", count, file_big, NULL};
    char *keep = b64_data;
    b64_data = wf_b64;
    wf_bytes = wf;
    file_row("5b", name, head_argv, file_out, writefile_row);
    b64_data = keep;
    free(wf_b64);
    snprintf(name, sizeof name, "5c. fs/open+writeBlock %zu MiB in 1 MiB blocks (ms)",
             O.file_bytes >> 20);
    file_row("5c", name, cat_argv, file_out, writeblock_one);
    snprintf(name, sizeof name, "5d. fs/walk %d entries (ms)", walk_total());
    file_row("5d", name, find_argv, NULL, walk_one);
    free(b64_data);
    client_rows();
}

/* Rows 6a-6c: RSS idle, with live processes, and with a client that does not read. */
static void memory_rows(void)
{
    struct server s;
    char name[96];
    struct row *ri = row_get("6a. RSS idle, one connection (MB)", K_MB);
    snprintf(name, sizeof name, "6b. RSS with %d live processes (MB)", O.mem_procs);
    struct row *rl = row_get(name, K_MB);
    snprintf(name, sizeof name, "6c. RSS peak, client not reading a %zu MB stream (MB)",
             O.mem_stream_bytes / 1000000);
    struct row *rn = row_get(name, K_MB);
    struct row *rs[3] = {ri, rl, rn};
    progress("6. memory");
    for (int w = 0; w < nservers(); w++)
        if (start_or_fail(&s, w, rs, 3)) {
            struct mem_result m = mem_run(&s);
            server_stop(&s);
            record(ri, w, m.idle);
            record(rl, w, m.live);
            record(rn, w, m.noread);
            if (m.noread.ok)
                progress("   %s: RSS growth over the last %.1f s of not reading: %.2f MB",
                         server_name(w), O.mem_stream_secs / 2, m.noread_growth);
            if (w == 0 && m.noread.ok && m.noread_growth > 1.0)
                progress("   ours: memory still growing while the client does not read");
        }
}

/* Rows 7a, 7b: fs/writeFile latency with and without the sandbox. */
static void sandboxed_fs_rows(void)
{
    struct server s;
    char ws[PATH_MAX + 16];
    snprintf(ws, sizeof ws, "%s/ws", O.tmp);
    mkdir(ws, 0755);
    struct row *rsb = row_on("7a") ? row_get("7a. fs/writeFile 4 KiB, sandboxed (ms)", K_MS) : NULL;
    struct row *run =
        row_on("7b") ? row_get("7b. fs/writeFile 4 KiB, no sandbox (ms)", K_MS) : NULL;
    progress("7. sandboxed fs latency");
    if (run) run->has_floor = true;
    for (int w = 0; w < nservers(); w++) {
        struct row *both[2] = {rsb ? rsb : run, run ? run : rsb};
        if (start_or_fail(&s, w, both, 2)) {
            /* A refused sandbox is a missing feature, not a broken run. */
            if (rsb) rsb->v[w] = sandbox_one(&s, true, ws, NULL);
            /* The floor (open/write/close by the driver) is interleaved with
             * ours, one write each in turn, so both see the same load. */
            if (run) record(run, w, sandbox_one(&s, false, ws, w == 0 ? &run->floor : NULL));
            server_stop(&s);
        }
    }
}

static void run_scenarios(void)
{
    if (O.scenarios & (1u << 1)) oneshot_rows();
    if (O.scenarios & (1u << 2)) stream_rows();
    if (O.scenarios & (1u << 3)) fanout_rows();
    if (O.scenarios & (1u << 4)) conns_rows();
    if (O.scenarios & (1u << 5)) fs_rows();
    if (O.scenarios & (1u << 6)) memory_rows();
    if ((O.scenarios & (1u << 8)) && row_on("8")) scenario_http();
    if ((O.scenarios & (1u << 9)) && row_on("9")) scenario_proxy();
    if (O.scenarios & (1u << 10)) scenario_scale();
    if (O.scenarios & (1u << 7)) sandboxed_fs_rows();
}

/* ------------------------------------------------------------------ table */

static void fmt_num(char *out, size_t n, double v, enum kind k)
{
    if (k == K_MBS)
        snprintf(out, n, "%.0f", v);
    else if (k == K_MB)
        snprintf(out, n, "%.1f", v);
    else if (v < 10)
        snprintf(out, n, "%.3f", v);
    else if (v < 1000)
        snprintf(out, n, "%.1f", v);
    else
        snprintf(out, n, "%.0f", v);
}

static void fmt_cell(char *out, size_t n, const struct cell *c, enum kind k)
{
    if (!c->ok) {
        snprintf(out, n, "%s", c->err[0] ? c->err : "-");
        return;
    }
    char a[32], b[32];
    fmt_num(a, sizeof a, c->p50, k);
    if (c->dist) {
        fmt_num(b, sizeof b, c->p95, k);
        snprintf(out, n, "%s / %s", a, b);
    } else {
        snprintf(out, n, "%s", a);
    }
}

/* How many times better `a` is than `b` (>1: a better), on medians. */
static double better(double a, double b, enum kind k)
{
    return k == K_MBS ? a / b : b / a;
}

static void print_table(void)
{
    printf("\n| scenario | ours (p50 / p95) | reference (p50 / p95) | ours better by | floor "
           "(p50 / p95) | ours vs floor |\n");
    printf("|---|---|---|---|---|---|\n");
    for (int i = 0; i < nrows; i++) {
        struct row *r = &rows[i];
        char o[256], ref[256], ratio[32] = "", fl[64] = "", vf[32] = "";
        fmt_cell(o, sizeof o, &r->v[0], r->kind);
        if (have_ref())
            fmt_cell(ref, sizeof ref, &r->v[1], r->kind);
        else
            snprintf(ref, sizeof ref, "not run");
        if (r->v[0].ok && r->v[1].ok)
            snprintf(ratio, sizeof ratio, "%.1fx", better(r->v[0].p50, r->v[1].p50, r->kind));
        if (r->has_floor) {
            fmt_cell(fl, sizeof fl, &r->floor, r->kind);
            if (r->v[0].ok && r->floor.ok) {
                if (r->kind == K_MBS)
                    snprintf(vf, sizeof vf, "%.2f of floor", r->v[0].p50 / r->floor.p50);
                else
                    snprintf(vf, sizeof vf, "%.2fx floor (+%.3f ms)", r->v[0].p50 / r->floor.p50,
                             r->v[0].p50 - r->floor.p50);
            }
        }
        printf("| %s | %s | %s | %s | %s | %s |\n", r->name, o, ref, ratio, fl, vf);
    }
}

/* The second table: CPU time per operation, which machine load does not stretch
 * the way it stretches wall time (see docs/BENCHMARKS.md). */
static void print_cpu_table(void)
{
    bool any = false;
    for (int i = 0; i < nrows; i++)
        if (rows[i].v[0].cpu > 0) any = true;
    if (!any) return;
    printf("\nCPU per operation (ms): the server with its threads and helper processes "
           "(not the commands it runs); the floor's command, or the driver for an "
           "in-process floor\n\n");
    printf("| scenario | ours | reference | ours less by | floor | ours vs floor |\n");
    printf("|---|---|---|---|---|---|\n");
    for (int i = 0; i < nrows; i++) {
        struct row *r = &rows[i];
        const struct cell *o = &r->v[0], *f = &r->v[1], *fl = &r->floor;
        if (!(o->ok && o->cpu > 0)) continue;
        char a[32], b[32] = "", ratio[32] = "", c[32] = "", vf[32] = "";
        fmt_num(a, sizeof a, o->cpu, K_MS);
        if (f->ok && f->cpu > 0) {
            fmt_num(b, sizeof b, f->cpu, K_MS);
            snprintf(ratio, sizeof ratio, "%.1fx", f->cpu / o->cpu);
        }
        if (r->has_floor && fl->ok && fl->cpu > 0) {
            fmt_num(c, sizeof c, fl->cpu, K_MS);
            snprintf(vf, sizeof vf, "%.2fx", o->cpu / fl->cpu);
        }
        printf("| %s | %s | %s | %s | %s | %s |\n", r->name, a, b, ratio, c, vf);
    }
}

static struct row *row_find(const char *prefix)
{
    for (int i = 0; i < nrows; i++)
        if (strncmp(rows[i].name, prefix, strlen(prefix)) == 0) return &rows[i];
    return NULL;
}

static void target(const char *what, bool known, bool ok, const char *fmt, ...)
{
    char detail[160] = "";
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(detail, sizeof detail, fmt, ap);
    va_end(ap);
    printf("- %-58s %-5s %s\n", what, !known ? "n/a" : ok ? "MET" : "MISS", detail);
}

static void print_targets(void)
{
    printf("\nTargets (issue 6):\n");
    struct row *r;
    if ((r = row_find("1.")) && r->v[0].ok && r->floor.ok) {
        double d = r->v[0].p50 - r->floor.p50;
        target("one-shot p50 within 0.5 ms of the posix_spawn floor", true, d <= 0.5, "(+%.3f ms)",
               d);
        if (r->v[1].ok)
            target("one-shot p50 at least 30x faster than the reference", true,
                   r->v[1].p50 / r->v[0].p50 >= 30, "(%.1fx)", r->v[1].p50 / r->v[0].p50);
    }
    if ((r = row_find("2.")) && r->v[0].ok && r->floor.ok)
        target("streaming at least half the pipe floor", true, r->v[0].p50 >= r->floor.p50 / 2,
               "(%.2f of floor%s)", r->v[0].p50 / r->floor.p50, "");
    if ((r = row_find("2.")) && r->v[0].ok && r->v[1].ok)
        target("streaming about 3x the reference", true, r->v[0].p50 >= 3 * r->v[1].p50, "(%.1fx)",
               r->v[0].p50 / r->v[1].p50);
    if ((r = row_find("3.")) && r->v[0].ok && r->floor.ok)
        target("fan-out within 2x of the spawn floor", true, r->v[0].p50 <= 2 * r->floor.p50,
               "(%.2fx)", r->v[0].p50 / r->floor.p50);
    if ((r = row_find("6a.")) && r->v[0].ok)
        target("idle RSS under 4 MB", true, r->v[0].p50 < 4, "(%.1f MB)", r->v[0].p50);
    if ((r = row_find("6b.")) && r->v[0].ok)
        target("RSS under 16 MB with the live processes", true, r->v[0].p50 < 16, "(%.1f MB)",
               r->v[0].p50);
    struct row *idle = row_find("6a.");
    if ((r = row_find("6c.")) && r->v[0].ok && idle && idle->v[0].ok)
        target("RSS bounded while a client does not read", true, r->v[0].p50 - idle->v[0].p50 < 32,
               "(peak %.1f MB, idle + %.1f MB)", r->v[0].p50, r->v[0].p50 - idle->v[0].p50);
    if ((r = row_find("9.")) && r->v[0].ok && r->floor.ok)
        target("download through the network proxy within 1.3x of direct (issue 24)", true,
               r->v[0].p50 <= 1.3 * r->floor.p50, "(%.2fx)", r->v[0].p50 / r->floor.p50);
    if ((r = row_find("9b.")) && r->v[0].ok && r->floor.ok)
        target("the proxy within 1.1x of a minimal relay (the least any proxy costs)", true,
               r->v[0].p50 <= 1.1 * r->floor.p50, "(%.2fx)", r->v[0].p50 / r->floor.p50);
    if ((r = row_find("9c.")) && r->v[0].ok && r->floor.ok)
        target("transparent TCP within 1.3x of the proxy variables (issue 35)", true,
               r->v[0].p50 <= 1.3 * r->floor.p50, "(%.2fx)", r->v[0].p50 / r->floor.p50);
}

/* ------------------------------------------------------------------ main */

static void usage(FILE *f)
{
    fprintf(f,
            "usage: exec-bench [options]\n"
            "  --ours PATH          our server (default: exec-server beside exec-bench)\n"
            "  --ref PATH           reference codex binary (default: that of --ref-version)\n"
            "  --ref-version V      reference version to look for (" REF_VERSION "): under\n"
            "                       ~/.cache/codex-ref (0.169.0) or ~/.cache/codex-ref-X.Y\n"
            "  --ref171 PATH        codex 0.171.0 for row 9c (default: where npm put it)\n"
            "  --no-ref             run only our server\n"
            "  --vs \"[PATH] ARGS\"   the reference's column is our server again (or PATH,\n"
            "                       absolute) with ARGS added: two configurations side by\n"
            "                       side, e.g. --vs \"--audit-log /tmp/a.log\"; ratio ours / that\n"
            "  --tty                row 2 streams through a PTY (tty:true)\n"
            "  --text               row 2 streams lines of text (yes | head) instead of NUL\n"
            "                       bytes; with --tty each newline arrives as \\r\\n\n"
            "  --scenarios LIST     comma-separated scenario numbers 1-10 (default: all)\n"
            "  --quick              small sizes for a smoke test\n"
            "  --runs N             repetitions of streaming, fan-out, connections, files\n"
            "  --oneshot N          sequential one-shot runs (500)\n"
            "  --stream-mib N       streaming size in MiB (256)\n"
            "  --fanout N           processes started at once (200)\n"
            "  --conns N            connections (500)\n"
            "  --file-mib N         file size in MiB (64)\n"
            "  --client-mib N       rows 5e/5f: what exec-client moves each way (256)\n"
            "  --walk N             entries in the walked tree (50000)\n"
            "  --procs N            live processes for the memory figure (500)\n"
            "  --mem-stream-mb N    size of the unread stream in MB (1000)\n"
            "  --sandbox-n N        sandboxed writes (200)\n"
            "  --proxy-mib N        download through the network proxy, MiB (64)\n"
            "  --scale-conns N      connections held open in scenario 10 (10000)\n"
            "  --scale-load N       of those, how many run /bin/true every 100 ms (100)\n"
            "  --scale-oneshots N   one-shots measured, loaded and not (200)\n"
            "  --only LIST          only these rows, e.g. 5b,7b (5 = all of 5a-5f)\n"
            "environment: EXEC_BENCH_WRAP=\"CMD ARGS\" runs our server under CMD (a profiler);\n"
            "TMPDIR is where the file scenarios write (default /tmp)\n");
}

static void cleanup_tmp(void)
{
    if (!O.tmp[0]) return;
    char *argv[] = {"/bin/rm", "-rf", O.tmp, NULL};
    pid_t pid;
    if (posix_spawn(&pid, argv[0], NULL, NULL, argv, environ) == 0) waitpid(pid, NULL, 0);
}

static char ours_default[PATH_MAX];

/* --quick: sizes for a run of a few minutes. */
static void quick_sizes(bool runs_set)
{
    O.quick = true;
    O.oneshot_n = 50;
    O.stream_bytes = 16u << 20;
    O.fanout_n = 20;
    O.conns_n = 20;
    O.file_bytes = 4u << 20;
    O.client_bytes = 16u << 20;
    O.walk_entries = 2000;
    O.mem_procs = 20;
    O.mem_stream_bytes = 100000000;
    O.mem_stream_secs = 1;
    O.sandbox_n = 20;
    O.http_bytes = 8u << 20;
    O.proxy_bytes = 8u << 20;
    O.scale_conns = 200;
    O.scale_load = 10;
    O.scale_oneshots = 30;
    if (!runs_set) O.runs = 2;
}

/* The command line into O. Returns -1 to go on, or the exit status (0 after --help,
 * 2 for a bad option). */
static int parse_args(int argc, char **argv, bool *no_ref)
{
    bool runs_set = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
#define OPT(name) (strcmp(a, name) == 0 && v && ++i)
        if (strcmp(a, "--quick") == 0)
            quick_sizes(runs_set);
        else if (strcmp(a, "--no-ref") == 0)
            *no_ref = true;
        else if (strcmp(a, "--tty") == 0)
            O.tty = true;
        else if (strcmp(a, "--text") == 0)
            O.text = true;
        else if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            usage(stdout);
            return 0;
        } else if (OPT("--ours"))
            O.ours = v;
        else if (OPT("--ref"))
            O.ref = v;
        else if (OPT("--ref-version"))
            O.ref_version = v;
        else if (OPT("--ref171"))
            O.ref171 = v;
        else if (OPT("--vs"))
            O.vs = v;
        else if (OPT("--scenarios")) {
            O.scenarios = scenario_bits(v);
        } else if (OPT("--runs")) {
            O.runs = atoi(v);
            runs_set = true;
        } else if (OPT("--oneshot"))
            O.oneshot_n = atoi(v);
        else if (OPT("--stream-mib"))
            O.stream_bytes = (size_t)atol(v) << 20;
        else if (OPT("--fanout"))
            O.fanout_n = atoi(v);
        else if (OPT("--conns"))
            O.conns_n = atoi(v);
        else if (OPT("--file-mib"))
            O.file_bytes = (size_t)atol(v) << 20;
        else if (OPT("--client-mib"))
            O.client_bytes = (size_t)atol(v) << 20;
        else if (OPT("--walk"))
            O.walk_entries = atoi(v);
        else if (OPT("--procs"))
            O.mem_procs = atoi(v);
        else if (OPT("--mem-stream-mb"))
            O.mem_stream_bytes = (size_t)atol(v) * 1000000;
        else if (OPT("--sandbox-n"))
            O.sandbox_n = atoi(v);
        else if (OPT("--proxy-mib"))
            O.proxy_bytes = (size_t)atol(v) << 20;
        else if (OPT("--scale-conns"))
            O.scale_conns = atoi(v);
        else if (OPT("--scale-load"))
            O.scale_load = atoi(v);
        else if (OPT("--scale-oneshots"))
            O.scale_oneshots = atoi(v);
        else if (OPT("--only")) {
            O.only = v;
            O.scenarios = scenario_bits(v);
        } else {
            fprintf(stderr, "exec-bench: unknown or incomplete option %s\n", a);
            usage(stderr);
            return 2;
        }
#undef OPT
    }
    if (O.runs < 1 || O.runs > 64 || O.oneshot_n < 1 || O.fanout_n < 1 || O.conns_n < 1 ||
        O.file_bytes < (1u << 20) || O.walk_entries < 2 || O.walk_entries > 50000 ||
        O.mem_procs < 1 || O.sandbox_n < 1 || O.stream_bytes == 0 || O.scale_conns < 1 ||
        O.scale_load < 1 || O.scale_oneshots < 1) {
        fprintf(stderr, "exec-bench: option out of range (runs 1..64, file >= 1 MiB, walk "
                        "2..50000, counts >= 1)\n");
        return 2;
    }
    return -1;
}

/* The glob of the reference binary of version under home (bench.h: codex_ref.py's rule). */
static void ref_glob(char *out, size_t n, const char *home, const char *version)
{
    if (strcmp(version, "0.169.0") == 0) {
        snprintf(out, n, "%s/.cache/codex-ref" REF_BINARY_GLOB, home);
        return;
    }
    const char *dot = strchr(version, '.');
    dot = dot ? strchr(dot + 1, '.') : NULL; /* X.Y of X.Y.Z */
    int len = dot ? (int)(dot - version) : (int)strlen(version);
    snprintf(out, n, "%s/.cache/codex-ref-%.*s" REF_BINARY_GLOB, home, len, version);
}

/* The first match of pattern, into buf; NULL when nothing matches. */
static const char *first_match(const char *pattern, char *buf, size_t n)
{
    glob_t g;
    bool found = glob(pattern, 0, NULL, &g) == 0 && g.gl_pathc > 0;
    if (found) snprintf(buf, n, "%s", g.gl_pathv[0]);
    globfree(&g);
    return found ? buf : NULL;
}

/* Our server beside this driver unless --ours says, the references where npm put them
 * unless --ref and --ref171 say (or --no-ref). */
static void find_servers(bool no_ref)
{
    if (!O.ours) {
        char self[PATH_MAX];
        ssize_t l = readlink("/proc/self/exe", self, sizeof self - 1);
        self[l > 0 ? l : 0] = 0;
        char *slash = strrchr(self, '/');
        if (slash) *slash = 0;
        /* The driver is built in BUILD/bench/, the server in BUILD/. */
        snprintf(ours_default, sizeof ours_default, "%s/exec-server", self);
        if (access(ours_default, X_OK) != 0)
            snprintf(ours_default, sizeof ours_default, "%s/../exec-server", self);
        O.ours = ours_default;
    }
    /* The servers run in the scratch directory: a relative --ours or --ref would name
     * nothing there. */
    static char ours_abs[PATH_MAX], ref_abs[PATH_MAX], ref171_abs[PATH_MAX];
    if (realpath(O.ours, ours_abs)) O.ours = ours_abs;
    if (O.ref && realpath(O.ref, ref_abs)) O.ref = ref_abs;
    if (O.ref171 && realpath(O.ref171, ref171_abs)) O.ref171 = ref171_abs;
    static char refbuf[PATH_MAX], ref171buf[PATH_MAX];
    if (O.vs) { /* the other column is ours too */
        O.ref = O.ours;
        O.ref171 = NULL;
        progress("the reference's column is ours with %s (--vs)", O.vs);
        return;
    }
    if (no_ref) {
        O.ref = O.ref171 = NULL;
        return;
    }
    const char *home = getenv("HOME");
    if (!O.ref) {
        char pat[PATH_MAX];
        ref_glob(pat, sizeof pat, home ? home : "/root",
                 O.ref_version ? O.ref_version : REF_VERSION);
        O.ref = first_match(pat, refbuf, sizeof refbuf);
        if (!O.ref) progress("reference not found (%s); running ours only", pat);
    }
    if (!O.ref171) {
        char pat[PATH_MAX];
        ref_glob(pat, sizeof pat, home ? home : "/root", "0.171.0");
        O.ref171 = first_match(pat, ref171buf, sizeof ref171buf);
    }
}

/* 500 connections + 500 processes' pipes need more than the default 1024 fds,
 * scenario 9 one per connection on each side and some: the servers inherit the
 * limit. Raise the hard limit too where we may (root). */
static void raise_fd_limit(void)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) != 0) return;
    rlim_t want = (rlim_t)O.scale_conns * 2 + 4096;
    if (rl.rlim_max < want) {
        struct rlimit up = {want, want};
        if (setrlimit(RLIMIT_NOFILE, &up) == 0) rl = up;
    }
    if (rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
    }
    if (rl.rlim_cur < (rlim_t)O.scale_conns + 1024 && (O.scenarios & (1u << 10)))
        progress("the fd limit (%llu) is too low for %d connections in scenario 9",
                 (unsigned long long)rl.rlim_cur, O.scale_conns);
}

int main(int argc, char **argv)
{
    O = (struct opts){.scenarios = 0x7FE,
                      .http_bytes = 256u << 20,
                      .proxy_bytes = 64u << 20,
                      .scale_conns = 10000,
                      .scale_load = 100,
                      .scale_period_ms = 100,
                      .scale_oneshots = 200,
                      .runs = 5,
                      .oneshot_n = 500,
                      .stream_bytes = 256u << 20,
                      .fanout_n = 200,
                      .conns_n = 500,
                      .file_bytes = 64u << 20,
                      .client_bytes = 256u << 20,
                      .walk_entries = 50000,
                      .mem_procs = 500,
                      .mem_stream_bytes = 1000000000,
                      .mem_stream_secs = 3,
                      .sandbox_n = 200};
    bool no_ref = false;
    int rc = parse_args(argc, argv, &no_ref);
    if (rc >= 0) return rc;
    find_servers(no_ref);
    if (access(O.ours, X_OK) != 0) {
        fprintf(stderr, "exec-bench: our server %s is not executable\n", O.ours);
        return 2;
    }
    raise_fd_limit();
    signal(SIGPIPE, SIG_IGN);
    /* TMPDIR picks the file system the file scenarios write to (tmpfs takes the
     * disk's writeback out of 5b, 5c and 7, leaving the servers' own cost). */
    const char *tmpdir = getenv("TMPDIR");
    snprintf(O.tmp, sizeof O.tmp, "%s/exec-bench-XXXXXX", tmpdir && tmpdir[0] ? tmpdir : "/tmp");
    if (!mkdtemp(O.tmp)) {
        perror("mkdtemp");
        return 2;
    }
    atexit(cleanup_tmp);

    progress("ours: %s", O.ours);
    if (O.ref) progress("reference: %s", O.ref);
    double t0 = now_s();
    run_scenarios();
    print_table();
    print_cpu_table();
    print_targets();
    printf("\n(%s; driver and servers on the same machine; %.0f s total)\n",
           O.quick ? "--quick sizes" : "full sizes", now_s() - t0);
    return ours_failed ? 1 : 0;
}
