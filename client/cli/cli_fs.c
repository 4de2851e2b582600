/* cli_fs: `exec-client fs ...`, the remote file system for people: the command's
 * arguments, the listing and tree subcommands (ls, stat, rm, cp, mkdir, walk); the
 * bytes (cat, get, put) move in cli_xfer.c.
 *
 * Arguments follow scp and coreutils: get and put take several sources before one
 * target, which must then be a directory; remote sources of get, cat, ls and stat may
 * be patterns (quoted, so the local shell leaves them), matched on the remote side;
 * ls takes files and several paths as ls(1) does. get and put keep the file's
 * permission bits when the server reports and accepts them (our fs/getMetadata
 * `mode` and fs/setPermissions; the reference has neither, and then the local umask
 * decides, as with `cp`); -p keeps the modification time too. ls -l and stat show
 * mode, owner and local times like ls(1). Errors read like coreutils' ("No such file
 * or directory", "Is a directory (use -r)"), not like JSON-RPC. The session of an fs
 * command is ended as soon as it connects (session/close), so whatever way the
 * command ends, even killed, nothing waits on the server for a resume. */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "cli_xfer.h"

/* ---- ls / stat ---------------------------------------------------------------------- */

static void mode_string(const ec_metadata *md, char out[11])
{
    out[0] = md->is_directory ? 'd' : md->is_symlink ? 'l' : md->is_file ? '-' : '?';
    if (!md->has_mode) {
        memset(out + 1, '?', 9);
        out[10] = 0;
        return;
    }
    const char *rwx = "rwxrwxrwx";
    for (int i = 0; i < 9; i++)
        out[1 + i] = (md->mode & (0400u >> i)) ? rwx[i] : '-';
    if (md->mode & 04000) out[3] = (md->mode & 0100) ? 's' : 'S';
    if (md->mode & 02000) out[6] = (md->mode & 0010) ? 's' : 'S';
    if (md->mode & 01000) out[9] = (md->mode & 0001) ? 't' : 'T';
    out[10] = 0;
}

/* Local time like ls -l: "Nov 25 03:12" within six months, else "Nov 25  2025". */
static void ls_time(int64_t ms, char *out, size_t n)
{
    time_t t = (time_t)(ms / 1000), now = time(NULL);
    struct tm tm;
    localtime_r(&t, &tm);
    bool recent = t <= now + 3600 && now - t < 182 * 24 * 3600;
    strftime(out, n, recent ? "%b %e %H:%M" : "%b %e  %Y", &tm);
}

static void iso_time(int64_t ms, char *out, size_t n)
{
    if (ms <= 0) {
        snprintf(out, n, "-");
        return;
    }
    time_t t = (time_t)(ms / 1000);
    struct tm tm;
    localtime_r(&t, &tm);
    char base[24], zone[8];
    strftime(base, sizeof base, "%Y-%m-%d %H:%M:%S", &tm);
    strftime(zone, sizeof zone, "%z", &tm);
    snprintf(out, n, "%s.%03d %s", base, (int)(ms % 1000), zone);
}

static const char *who(const char *name, unsigned id, char *buf, size_t n)
{
    if (name[0]) return name;
    snprintf(buf, n, "%u", id);
    return buf;
}

/* One ls -l line for `name` (shown as given) with metadata md. */
static void ls_long_line(const ec_metadata *md, const char *name)
{
    char m[11], t[32], ub[16], gb[16];
    mode_string(md, m);
    ls_time(md->modified_at_ms, t, sizeof t);
    printf("%s %-8s %-8s %10llu %s %s%s\n", m, who(md->owner, md->uid, ub, sizeof ub),
           who(md->group, md->gid, gb, sizeof gb), (unsigned long long)md->size, t, name,
           md->is_directory ? "/" : "");
}

/* A directory's entries, sorted, like ls (directories end in /). */
static int ls_dir(struct cli *cli, const char *path, bool long_form)
{
    ec_error e = {0};
    ec_dirent *ents;
    size_t n;
    if (ec_fs_read_directory(cli->c, path, &ents, &n, &e) != 0) fs_die("ls", path, &e);
    qsort(ents, n, sizeof *ents, fs_cmp_dirent);
    for (size_t i = 0; i < n; i++) {
        if (!long_form) {
            printf("%s%s\n", ents[i].name, ents[i].is_directory ? "/" : "");
            continue;
        }
        char *full = fs_join(path, ents[i].name);
        ec_metadata md;
        ec_error me = {0};
        if (ec_fs_get_metadata(cli->c, full, &md, &me) != 0)
            /* Gone since the listing, or unreadable: say so and go on, like ls. */
            printf("?????????? %s%s\n", ents[i].name, ents[i].is_directory ? "/" : "");
        else
            ls_long_line(&md, ents[i].name);
        free(full);
    }
    ec_dirents_free(ents, n);
    return 0;
}

/* ls(1)'s way with operands: each pattern expanded on the remote side; files first,
 * as named; then each directory's entries, under a "PATH:" header when there is
 * more than one operand. A missing one is reported and the rest still listed (exit
 * 1). */
static int fs_ls(struct cli *cli, const struct fs_opts *o, char **args, int nargs)
{
    int rc = 0;
    size_t nd = 0, nops = 0, dcap = 0;
    char **dirs = NULL;
    for (int a = 0; a < nargs; a++) {
        char *pat = remote_path(cli, args[a]);
        size_t n;
        char **m = fs_remote_glob(cli, pat, &n);
        if (n == 0) {
            fprintf(stderr, "exec-client: fs ls %s: No such file or directory\n", args[a]);
            rc = EXIT_REMOTE;
        }
        for (size_t i = 0; i < n; i++) {
            ec_metadata md;
            ec_error e = {0};
            nops++;
            /* As given when it was not a pattern, else the match. */
            const char *shown = n == 1 && strcmp(m[i], pat) == 0 ? args[a] : m[i];
            if (ec_fs_get_metadata(cli->c, m[i], &md, &e) != 0) {
                if (e.kind != EC_ERR_SERVER) fs_die("ls", m[i], &e);
                fprintf(stderr, "exec-client: fs ls %s: No such file or directory\n", shown);
                rc = EXIT_REMOTE;
            } else if (md.is_directory) {
                if (nd == dcap) dirs = realloc(dirs, (dcap = dcap ? dcap * 2 : 8) * sizeof *dirs);
                dirs[nd++] = strdup(m[i]);
            } else if (o->l) {
                ls_long_line(&md, shown);
            } else {
                printf("%s\n", shown);
            }
        }
        fs_strv_free(m, n);
        free(pat);
    }
    bool files_shown = nops > nd;
    for (size_t i = 0; i < nd; i++) {
        if (nops > 1) printf("%s%s:\n", files_shown || i ? "\n" : "", dirs[i]);
        ls_dir(cli, dirs[i], o->l);
        free(dirs[i]);
    }
    free(dirs);
    return rc;
}

static int fs_stat(struct cli *cli, const char *path)
{
    ec_error e = {0};
    ec_metadata md;
    if (ec_fs_get_metadata(cli->c, path, &md, &e) != 0) fs_die("stat", path, &e);
    char m[11], mt[64], ct[64], ub[16], gb[16];
    mode_string(&md, m);
    iso_time(md.modified_at_ms, mt, sizeof mt);
    iso_time(md.created_at_ms, ct, sizeof ct);
    printf("  File: %s\n  Type: %s%s\n  Size: %llu\n", path,
           md.is_directory ? "directory"
           : md.is_file    ? "regular file"
                           : "other",
           md.is_symlink ? " (through a symbolic link)" : "", (unsigned long long)md.size);
    if (md.has_mode)
        printf("  Mode: %04o (%s)\n Owner: %s (%u)\n Group: %s (%u)\n", md.mode, m,
               who(md.owner, md.uid, ub, sizeof ub), md.uid, who(md.group, md.gid, gb, sizeof gb),
               md.gid);
    printf("Modify: %s\n Birth: %s\n", mt, ct);
    return 0;
}

/* ---- the command ---------------------------------------------------------------- */

static const char *const fs_subs[] = {"cat", "get", "put",   "ls",   "stat",
                                      "rm",  "cp",  "mkdir", "walk", NULL};

static bool is_sub(const char *sub, const char *a)
{
    return strcmp(sub, a) == 0;
}

/* The fs options of argv[2..] into o; returns the index of the first operand. */
static int fs_parse(const char *sub, int argc, char **argv, struct fs_opts *o)
{
    static const struct option longs[] = {
        {"max-depth", required_argument, 0, 'd'}, {"recursive", no_argument, 0, 'r'},
        {"force", no_argument, 0, 'f'},           {"parents", no_argument, 0, 'p'},
        {"preserve", no_argument, 0, 'p'},        {"long", no_argument, 0, 'l'},
        {"quiet", no_argument, 0, 'q'},           {0, 0, 0, 0}};
    optind = 2;
    opterr = 0;
    int ch;
    while ((ch = getopt_long(argc, argv, "+rRfplq", longs, NULL)) != -1) {
        switch (ch) {
        case 'r':
        case 'R': o->r = true; break;
        case 'f': o->f = true; break;
        case 'p': o->p = true; break;
        case 'l': o->l = true; break;
        case 'q': o->q = true; break;
        case 'd': o->max_depth = (unsigned)atoi(optarg); break;
        default: cli_bad_option("fs", sub, argv[optind - 1]);
        }
    }
    bool xfer = is_sub(sub, "get") || is_sub(sub, "put");
    if (o->r && !xfer && !is_sub(sub, "rm") && !is_sub(sub, "cp"))
        cli_usage_error("fs", sub, "-r is for rm, cp, get and put");
    if (o->p && !xfer && !is_sub(sub, "mkdir"))
        cli_usage_error("fs", sub, "-p is for get, put (keep times) and mkdir (parents)");
    if (o->q && !xfer) cli_usage_error("fs", sub, "-q is for get and put");
    if (o->l && !is_sub(sub, "ls")) cli_usage_error("fs", sub, "-l is for ls");
    if (o->f && !is_sub(sub, "rm")) cli_usage_error("fs", sub, "-f is for rm");
    return optind;
}

/* get SRC... LOCAL: each pattern expanded remotely; several sources need a local
 * directory, as with scp. */
static int fs_get(struct cli *cli, const struct fs_opts *o, char **args, int nargs)
{
    const char *local = args[nargs - 1];
    size_t total = 0, cap = 0;
    char **srcs = NULL;
    int rc = 0;
    for (int a = 0; a < nargs - 1; a++) {
        char *pat = remote_path(cli, args[a]);
        size_t n;
        char **m = fs_remote_glob(cli, pat, &n);
        if (n == 0) {
            fprintf(stderr, "exec-client: fs get %s: No such file or directory\n", pat);
            rc = EXIT_REMOTE;
        }
        for (size_t i = 0; i < n; i++) {
            if (total == cap) srcs = realloc(srcs, (cap = cap ? cap * 2 : 16) * sizeof *srcs);
            srcs[total++] = m[i];
        }
        free(m);
        free(pat);
    }
    struct stat st;
    if (total > 1 && !(stat(local, &st) == 0 && S_ISDIR(st.st_mode))) {
        fprintf(stderr, "exec-client: fs get: %s: Not a directory (several sources need one)\n",
                local);
        fs_strv_free(srcs, total);
        return EXIT_USAGE;
    }
    for (size_t i = 0; i < total; i++) {
        int r = fs_get_one(cli, o, srcs[i], local);
        if (r) rc = r;
    }
    fs_strv_free(srcs, total);
    return rc;
}

/* put LOCAL... PATH: several sources need a remote directory, as with scp. */
static int fs_put(struct cli *cli, const struct fs_opts *o, char **args, int nargs)
{
    char *path = remote_path(cli, args[nargs - 1]);
    int rc = 0;
    if (nargs > 2) {
        ec_metadata md;
        ec_error e = {0};
        int gr = ec_fs_get_metadata(cli->c, path, &md, &e);
        if (gr != 0 && e.kind != EC_ERR_SERVER) fs_die("put", path, &e);
        if (gr != 0 || !md.is_directory) {
            fprintf(stderr, "exec-client: fs put %s: %s (several sources need a directory)\n", path,
                    gr == 0 ? "Not a directory" : "No such file or directory");
            free(path);
            return EXIT_REMOTE;
        }
    }
    for (int a = 0; a < nargs - 1; a++) {
        if (strcmp(args[a], "-") == 0 && nargs > 2) {
            fprintf(stderr, "exec-client: fs put: - (stdin) cannot be one of several sources\n");
            rc = EXIT_USAGE;
            continue;
        }
        int r = fs_put_one(cli, o, args[a], path);
        if (r) rc = r;
    }
    free(path);
    return rc;
}

/* cp(1)'s rules: an existing directory receives DST/NAME; errors about the source
 * name the source, the rest the destination. */
static int fs_cp(struct cli *cli, const struct fs_opts *o, const char *srcarg, const char *dstarg)
{
    ec_error e = {0};
    char *src = remote_path(cli, srcarg), *path = remote_path(cli, dstarg);
    ec_metadata sm, dm;
    int rc = 0;
    if (ec_fs_get_metadata(cli->c, src, &sm, &e) != 0) fs_die("cp", src, &e);
    if (sm.is_directory && !o->r) {
        fprintf(stderr, "exec-client: fs cp %s: Is a directory (use -r)\n", src);
        rc = EXIT_REMOTE;
    } else {
        ec_error de = {0};
        int dr = ec_fs_get_metadata(cli->c, path, &dm, &de);
        if (dr == 0 && dm.is_directory) {
            char *into = fs_join(path, fs_base_name(src));
            free(path);
            path = into;
        } else if (fs_ends_with_slash(path)) {
            fprintf(stderr, "exec-client: fs cp %s: %s\n", path,
                    dr == 0 ? "Not a directory" : "No such file or directory");
            rc = EXIT_REMOTE;
        }
        if (rc == 0 && ec_fs_copy(cli->c, src, path, o->r, &e) != 0) fs_die("cp", path, &e);
    }
    free(src);
    free(path);
    return rc;
}

static int fs_walk(struct cli *cli, const struct fs_opts *o, const char *path)
{
    ec_walk_options wo = {.max_depth = o->max_depth ? o->max_depth : 64};
    ec_walk_entry *ents;
    size_t n;
    bool trunc = false;
    ec_error e = {0};
    if (ec_fs_walk(cli->c, path, &wo, &ents, &n, &trunc, &e) != 0) fs_die("walk", path, &e);
    for (size_t i = 0; i < n; i++)
        printf("%s%s\n", ents[i].path, ents[i].is_directory ? "/" : "");
    if (trunc) fprintf(stderr, "exec-client: walk truncated at the server's limits\n");
    ec_walk_entries_free(ents, n);
    return 0;
}

/* The subcommands that take one or more plain paths, each in turn. */
static int fs_each(struct cli *cli, const char *sub, const struct fs_opts *o, char **args,
                   int nargs)
{
    int rc = 0;
    for (int a = 0; a < nargs; a++) {
        char *pat = remote_path(cli, args[a]);
        bool globbed = is_sub(sub, "cat") || is_sub(sub, "stat");
        size_t n = 1;
        char **m = globbed ? fs_remote_glob(cli, pat, &n) : NULL;
        if (globbed && n == 0) {
            fprintf(stderr, "exec-client: fs %s %s: No such file or directory\n", sub, pat);
            rc = EXIT_REMOTE;
        }
        for (size_t i = 0; i < n; i++) {
            const char *path = m ? m[i] : pat;
            ec_error e = {0};
            int r = 0;
            if (is_sub(sub, "cat"))
                r = fs_cat(cli, o, path);
            else if (is_sub(sub, "stat"))
                r = fs_stat(cli, path);
            else if (is_sub(sub, "rm") && ec_fs_remove(cli->c, path, o->r, o->f, &e) != 0)
                fs_die("rm", path, &e);
            else if (is_sub(sub, "mkdir") && ec_fs_create_directory(cli->c, path, o->p, &e) != 0)
                fs_die("mkdir", path, &e);
            if (r) rc = r;
        }
        if (m) fs_strv_free(m, n);
        free(pat);
    }
    return rc;
}

int cmd_fs(struct cli *cli, int argc, char **argv)
{
    if (argc < 2)
        cli_usage_error("fs", NULL,
                        "missing subcommand (cat, get, put, ls, stat, rm, cp, mkdir, walk)");
    const char *sub = argv[1];
    bool known = false;
    for (size_t i = 0; fs_subs[i]; i++)
        known |= is_sub(sub, fs_subs[i]);
    if (!known) {
        char m[128];
        snprintf(m, sizeof m, "unknown subcommand `%.60s`", sub);
        cli_usage_error("fs", NULL, m);
    }
    struct fs_opts o = {0};
    int first = fs_parse(sub, argc, argv, &o);
    int nargs = argc - first;
    char **args = argv + first;
    bool two = is_sub(sub, "get") || is_sub(sub, "put");
    if ((two && nargs < 2) || (is_sub(sub, "cp") && nargs != 2) ||
        (is_sub(sub, "walk") && nargs != 1) || (!two && !is_sub(sub, "ls") && nargs < 1))
        cli_usage_error("fs", sub, "wrong number of arguments");
    fs_guard_install();
    connect_or_die(cli, false, false);
    /* Nothing of this command is ever resumed: the session ends with the connection,
     * however the command ends (an error, a signal, a lost link). */
    ec_client_end_session(cli->c, NULL);
    int rc = 0;
    if (is_sub(sub, "get")) {
        rc = fs_get(cli, &o, args, nargs);
    } else if (is_sub(sub, "put")) {
        rc = fs_put(cli, &o, args, nargs);
    } else if (is_sub(sub, "ls")) {
        char *dot[] = {"."};
        rc = nargs ? fs_ls(cli, &o, args, nargs) : fs_ls(cli, &o, dot, 1);
    } else if (is_sub(sub, "cp")) {
        rc = fs_cp(cli, &o, args[0], args[1]);
    } else if (is_sub(sub, "walk")) {
        char *path = remote_path(cli, args[0]);
        rc = fs_walk(cli, &o, path);
        free(path);
    } else {
        rc = fs_each(cli, sub, &o, args, nargs);
    }
    fflush(stdout);
    return rc;
}
