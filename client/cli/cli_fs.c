/* cli_fs: `exec-client fs ...`, the remote file system for people: the command's
 * arguments, the listing and tree subcommands (ls, stat, rm, cp, mkdir, walk); the
 * bytes (cat, get, put) move in cli_xfer.c.
 *
 * Arguments follow scp and coreutils: get and put take several sources before one
 * target, which must then be a directory; remote sources of get, cat, ls and stat may
 * be patterns (quoted, so the local shell leaves them), matched on the remote side;
 * ls takes files and several paths as ls(1) does, and lists a directory's names that
 * start with a dot only with -a (or -A: "." and ".." are never listed). get keeps the
 * file's permission bits, and put gives a new file the local ones while a file it
 * replaces keeps its own (and its owner), when the server reports and accepts them
 * (our fs/getMetadata `mode`, fs/setPermissions and fs/rename; the reference has none,
 * and then the umask decides, as with `cp`); -p gives the local mode and the
 * modification time. ls -l and stat show mode, owner and local times like ls(1).
 * Errors read like coreutils' ("No such file or directory", "Is a directory (use
 * -r)"), not like JSON-RPC. The session of an fs
 * command is ended as soon as it connects (session/close), so whatever way the
 * command ends, even killed, nothing waits on the server for a resume. */
#include <errno.h>
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

/* A directory's entries, sorted, like ls (directories end in /; dot files only with
 * all). */
static int ls_dir(struct cli *cli, const char *path, bool long_form, bool all)
{
    ec_error e = {0};
    ec_dirent *ents;
    size_t n;
    if (ec_fs_read_directory(cli->c, path, &ents, &n, &e) != 0) cli_fs_die("ls", path, &e);
    qsort(ents, n, sizeof *ents, cli_fs_cmp_dirent);
    for (size_t i = 0; i < n; i++) {
        if (ents[i].name[0] == '.' && !all) continue;
        if (!long_form) {
            printf("%s%s\n", ents[i].name, ents[i].is_directory ? "/" : "");
            continue;
        }
        char *full = cli_fs_join(path, ents[i].name);
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
static int fs_ls(struct cli *cli, const char *sub, const struct cli_fs_opts *o, char **args,
                 int nargs)
{
    static char *dot[] = {"."};
    if (nargs == 0) return fs_ls(cli, sub, o, dot, 1);
    int rc = 0;
    size_t nd = 0, nops = 0, dcap = 0;
    char **dirs = NULL;
    for (int a = 0; a < nargs; a++) {
        char *pat = cli_remote_path(cli, args[a]);
        size_t n;
        char **m = cli_fs_remote_glob(cli, pat, &n);
        if (n == 0) {
            fprintf(stderr, "exec-client: fs ls %s: No such file or directory\n", args[a]);
            rc = EXIT_FAILED;
        }
        for (size_t i = 0; i < n; i++) {
            ec_metadata md;
            ec_error e = {0};
            nops++;
            /* As given when it was not a pattern, else the match. */
            const char *shown = n == 1 && strcmp(m[i], pat) == 0 ? args[a] : m[i];
            if (ec_fs_get_metadata(cli->c, m[i], &md, &e) != 0) {
                if (e.kind != EC_ERR_SERVER) cli_fs_die("ls", m[i], &e);
                fprintf(stderr, "exec-client: fs ls %s: No such file or directory\n", shown);
                rc = EXIT_FAILED;
            } else if (md.is_directory) {
                if (nd == dcap) dirs = realloc(dirs, (dcap = dcap ? dcap * 2 : 8) * sizeof *dirs);
                dirs[nd++] = strdup(m[i]);
            } else if (o->l) {
                ls_long_line(&md, shown);
            } else {
                printf("%s\n", shown);
            }
        }
        cli_fs_strv_free(m, n);
        free(pat);
    }
    bool files_shown = nops > nd;
    for (size_t i = 0; i < nd; i++) {
        if (nops > 1) printf("%s%s:\n", files_shown || i ? "\n" : "", dirs[i]);
        ls_dir(cli, dirs[i], o->l, o->a);
        free(dirs[i]);
    }
    free(dirs);
    return rc;
}

static int fs_stat(struct cli *cli, const char *path)
{
    ec_error e = {0};
    ec_metadata md;
    if (ec_fs_get_metadata(cli->c, path, &md, &e) != 0) cli_fs_die("stat", path, &e);
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

static bool is_sub(const char *sub, const char *a)
{
    return strcmp(sub, a) == 0;
}

/* Every fs subcommand takes the same options; each says which fit it. */
static const struct option fs_longs[] = {
    {"max-depth", required_argument, 0, 'd'}, {"recursive", no_argument, 0, 'r'},
    {"force", no_argument, 0, 'f'},           {"parents", no_argument, 0, 'p'},
    {"preserve", no_argument, 0, 'p'},        {"long", no_argument, 0, 'l'},
    {"quiet", no_argument, 0, 'q'},           {"all", no_argument, 0, 'a'},
    {"almost-all", no_argument, 0, 'A'},      {0, 0, 0, 0}};

/* The options of an fs subcommand into o, or a usage error for one it does not take. */
static void fs_opts_from(const struct cli_args *a, struct cli_fs_opts *o)
{
    const char *name = a->entry->name, *sub = name + strlen("fs ");
    for (int i = 0; i < a->nopts; i++) {
        switch (a->opts[i].ch) {
        case 'r':
        case 'R': o->r = true; break;
        case 'f': o->f = true; break;
        case 'p': o->p = true; break;
        case 'l': o->l = true; break;
        case 'a':
        case 'A': o->a = true; break;
        case 'q': o->q = true; break;
        case 'd': o->max_depth = (unsigned)atoi(a->opts[i].value); break;
        }
    }
    bool xfer = is_sub(sub, "get") || is_sub(sub, "put");
    if (o->r && !xfer && !is_sub(sub, "rm") && !is_sub(sub, "cp"))
        cli_usage_error(name, "-r is for rm, cp, get and put");
    if (o->p && !xfer && !is_sub(sub, "mkdir"))
        cli_usage_error(name, "-p is for get, put (keep times) and mkdir (parents)");
    if (o->q && !xfer) cli_usage_error(name, "-q is for get and put");
    if (o->l && !is_sub(sub, "ls")) cli_usage_error(name, "-l is for ls");
    if (o->a && !is_sub(sub, "ls")) cli_usage_error(name, "-a is for ls");
    if (o->f && !is_sub(sub, "rm")) cli_usage_error(name, "-f is for rm");
}

/* What every fs subcommand does first: its options, then a connection whose session
 * is never resumed: it ends with the connection, however the command ends (an
 * error, a signal, a lost link). */
static void fs_begin(struct cli *cli, const struct cli_args *a, struct cli_fs_opts *o)
{
    fs_opts_from(a, o);
    cli_fs_guard_install();
    cli_connect_or_die(cli, false, false);
    ec_client_end_session(cli->c, NULL);
}

/* A subcommand's work once it is connected: its options and operands. */
typedef int fs_work(struct cli *cli, const char *sub, const struct cli_fs_opts *o, char **args,
                    int nargs);

static int fs_run(struct cli *cli, const struct cli_args *a, fs_work *work)
{
    struct cli_fs_opts o = {0};
    fs_begin(cli, a, &o);
    int rc = work(cli, a->entry->name + strlen("fs "), &o, a->argv, a->argc);
    fflush(stdout);
    return rc;
}

/* get SRC... LOCAL: each pattern expanded remotely; several sources need a local
 * directory, as with scp. */
static int fs_get(struct cli *cli, const char *sub, const struct cli_fs_opts *o, char **args,
                  int nargs)
{
    const char *local = args[nargs - 1];
    size_t total = 0, cap = 0;
    char **srcs = NULL;
    int rc = 0;
    for (int a = 0; a < nargs - 1; a++) {
        char *pat = cli_remote_path(cli, args[a]);
        size_t n;
        char **m = cli_fs_remote_glob(cli, pat, &n);
        if (n == 0) {
            fprintf(stderr, "exec-client: fs get %s: No such file or directory\n", pat);
            rc = EXIT_FAILED;
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
        cli_fs_strv_free(srcs, total);
        return EXIT_FAILED;
    }
    for (size_t i = 0; i < total; i++) {
        int r = cli_fs_get_one(cli, o, srcs[i], local);
        if (r) rc = r;
    }
    cli_fs_strv_free(srcs, total);
    return rc;
}

/* put LOCAL... PATH: several sources need a remote directory, as with scp. */
static int fs_put(struct cli *cli, const char *sub, const struct cli_fs_opts *o, char **args,
                  int nargs)
{
    char *path = cli_remote_path(cli, args[nargs - 1]);
    int rc = 0;
    if (nargs > 2) {
        ec_metadata md;
        ec_error e = {0};
        int gr = ec_fs_get_metadata(cli->c, path, &md, &e);
        if (gr != 0 && e.kind != EC_ERR_SERVER) cli_fs_die("put", path, &e);
        if (gr != 0 || !md.is_directory) {
            fprintf(stderr, "exec-client: fs put %s: %s (several sources need a directory)\n", path,
                    gr == 0 ? "Not a directory" : "No such file or directory");
            free(path);
            return EXIT_FAILED;
        }
    }
    for (int a = 0; a < nargs - 1; a++) {
        if (strcmp(args[a], "-") == 0 && nargs > 2) {
            fprintf(stderr, "exec-client: fs put: - (stdin) cannot be one of several sources\n");
            rc = EXIT_USAGE;
            continue;
        }
        int r = cli_fs_put_one(cli, o, args[a], path);
        if (r) rc = r;
    }
    free(path);
    return rc;
}

/* cp(1)'s rules: an existing directory receives DST/NAME; errors about the source
 * name the source, the rest the destination. */
static int fs_cp(struct cli *cli, const char *sub, const struct cli_fs_opts *o, char **args,
                 int nargs)
{
    ec_error e = {0};
    char *src = cli_remote_path(cli, args[0]), *path = cli_remote_path(cli, args[1]);
    ec_metadata sm, dm;
    int rc = 0;
    if (ec_fs_get_metadata(cli->c, src, &sm, &e) != 0) cli_fs_die("cp", src, &e);
    if (sm.is_directory && !o->r) {
        fprintf(stderr, "exec-client: fs cp %s: Is a directory (use -r)\n", src);
        rc = EXIT_FAILED;
    } else {
        ec_error de = {0};
        int dr = ec_fs_get_metadata(cli->c, path, &dm, &de);
        if (dr == 0 && dm.is_directory) {
            char *into = cli_fs_join(path, cli_fs_base_name(src));
            free(path);
            path = into;
        } else if (cli_fs_ends_with_slash(path)) {
            fprintf(stderr, "exec-client: fs cp %s: %s\n", path,
                    dr == 0 ? "Not a directory" : "No such file or directory");
            rc = EXIT_FAILED;
        }
        if (rc == 0 && ec_fs_copy(cli->c, src, path, o->r, &e) != 0) cli_fs_die("cp", path, &e);
    }
    free(src);
    free(path);
    return rc;
}

static int fs_walk(struct cli *cli, const char *sub, const struct cli_fs_opts *o, char **args,
                   int nargs)
{
    char *path = cli_remote_path(cli, args[0]);
    ec_walk_options wo = {.max_depth = o->max_depth ? o->max_depth : 64};
    ec_walk_entry *ents;
    size_t n;
    bool trunc = false;
    ec_error e = {0};
    if (ec_fs_walk(cli->c, path, &wo, &ents, &n, &trunc, &e) != 0) cli_fs_die("walk", path, &e);
    for (size_t i = 0; i < n; i++)
        printf("%s%s\n", ents[i].path, ents[i].is_directory ? "/" : "");
    if (trunc) fprintf(stderr, "exec-client: walk truncated at the server's limits\n");
    ec_walk_entries_free(ents, n);
    free(path);
    return 0;
}

/* The subcommands that take one or more plain paths, each in turn. */
static int fs_each(struct cli *cli, const char *sub, const struct cli_fs_opts *o, char **args,
                   int nargs)
{
    int rc = 0;
    for (int a = 0; a < nargs; a++) {
        char *pat = cli_remote_path(cli, args[a]);
        bool globbed = is_sub(sub, "cat") || is_sub(sub, "stat");
        size_t n = 1;
        char **m = globbed ? cli_fs_remote_glob(cli, pat, &n) : NULL;
        if (globbed && n == 0) {
            fprintf(stderr, "exec-client: fs %s %s: No such file or directory\n", sub, pat);
            rc = EXIT_FAILED;
        }
        for (size_t i = 0; i < n; i++) {
            const char *path = m ? m[i] : pat;
            ec_error e = {0};
            int r = 0;
            if (is_sub(sub, "cat"))
                r = cli_fs_cat(cli, o, path);
            else if (is_sub(sub, "stat"))
                r = fs_stat(cli, path);
            else if (is_sub(sub, "rm") && ec_fs_remove(cli->c, path, o->r, o->f, &e) != 0)
                cli_fs_die("rm", path, &e);
            else if (is_sub(sub, "mkdir") && ec_fs_create_directory(cli->c, path, o->p, &e) != 0)
                cli_fs_die("mkdir", path, &e);
            if (r) rc = r;
        }
        if (m) cli_fs_strv_free(m, n);
        free(pat);
    }
    return rc;
}

/* ---- the entries ----------------------------------------------------------------- */

/* The function each entry runs: its work after fs_run's start. */
#define FS_EXEC(work)                                                                              \
    static int work##_exec(struct cli *cli, const struct cli_args *a)                              \
    {                                                                                              \
        return fs_run(cli, a, work);                                                               \
    }
FS_EXEC(fs_each)
FS_EXEC(fs_get)
FS_EXEC(fs_put)
FS_EXEC(fs_ls)
FS_EXEC(fs_cp)
FS_EXEC(fs_walk)

/* The fields every fs subcommand shares. */
#define FS_ENTRY .flags = "+rRfplqaA", .longs = fs_longs

const struct cli_cmd_entry cli_fs_entry = {
    .name = "fs",
    .usage = "fs SUBCOMMAND ...   (cat get put ls stat rm cp mkdir walk)",
    .text = "The remote file system. `exec-client fs SUBCOMMAND --help` says more of each.\n",
};

const struct cli_cmd_entry cli_fs_cat_entry = {
    .name = "fs cat",
    .usage = "fs cat PATH...",
    .summary = "print remote files",
    .text = "Prints remote files (patterns such as '*.txt' are matched remotely).\n",
    FS_ENTRY,
    .lower = 1,
    .upper = -1,
    .exec = fs_each_exec,
};

const struct cli_cmd_entry cli_fs_get_entry = {
    .name = "fs get",
    .usage = "fs get [-r] [-p] [-q] PATH... LOCAL|-",
    .summary = "download (keeps the mode; progress on a tty); into LOCAL/NAME when LOCAL is a "
               "directory, like scp; several sources need a directory; '*.log' (quoted) is "
               "matched on the remote side",
    .text = "Downloads like scp: into LOCAL/NAME when LOCAL is a directory (several sources "
            "need\none); - writes one file to stdout. Quoted patterns ('/logs/*.log') are "
            "matched on\nthe remote side. The mode is kept; -p keeps the modification time "
            "too; -r copies\ndirectories; -q: no progress line. An interrupted download "
            "leaves no file behind.\n",
    FS_ENTRY,
    .lower = 2,
    .upper = -1,
    .exec = fs_get_exec,
};

const struct cli_cmd_entry cli_fs_put_entry = {
    .name = "fs put",
    .usage = "fs put [-r] [-p] [-q] LOCAL...|- PATH",
    .summary = "upload files or stdin; into PATH/NAME when PATH is a remote directory, like "
               "scp; an interrupted upload leaves the old file whole (-p: keep the local mode "
               "and times; -q: no progress)",
    .text = "Uploads like scp: into PATH/NAME when PATH is a remote directory (several "
            "sources\nneed one); - reads stdin. A new file gets the local mode, an existing "
            "one keeps\nits mode and owner; -p gives the local mode and modification time; -r "
            "copies\ndirectories; -q: no progress line. As with rsync, the old file stays "
            "whole until\nthe new one is complete: the bytes go to a hidden temporary beside "
            "it, renamed\nover it at the end and removed if the upload is interrupted.\n",
    FS_ENTRY,
    .lower = 2,
    .upper = -1,
    .exec = fs_put_exec,
};

const struct cli_cmd_entry cli_fs_ls_entry = {
    .name = "fs ls",
    .usage = "fs ls [-l] [-a] [PATH...]",
    .summary = "list directories and files like ls (directories end in /; -l: long form; -a: "
               "names that start with a dot too)",
    .text = "Lists like ls(1): files as named, directories' entries (directories end in /),\n"
            "a header per directory when there are several operands; -l: long form; -a (or\n"
            "-A): names that start with a dot too, which are hidden otherwise.\n",
    FS_ENTRY,
    .lower = 0,
    .upper = -1,
    .exec = fs_ls_exec,
};

const struct cli_cmd_entry cli_fs_stat_entry = {
    .name = "fs stat",
    .usage = "fs stat PATH...",
    .summary = "show metadata (type, size, mode, owner, times)",
    .text = "Shows type, size, mode, owner and times.\n",
    FS_ENTRY,
    .lower = 1,
    .upper = -1,
    .exec = fs_each_exec,
};

const struct cli_cmd_entry cli_fs_rm_entry = {
    .name = "fs rm",
    .usage = "fs rm [-r] [-f] PATH...",
    .summary = "remove (-r: recursive, -f: no error if missing)",
    .text = "Removes (-r: directories too; -f: no error if missing).\n",
    FS_ENTRY,
    .lower = 1,
    .upper = -1,
    .exec = fs_each_exec,
};

const struct cli_cmd_entry cli_fs_cp_entry = {
    .name = "fs cp",
    .usage = "fs cp [-r] SRC DST",
    .summary = "copy on the remote side (into DST/NAME when DST is a directory, like cp)",
    .text = "Copies on the remote side (into DST/NAME when DST is a directory).\n",
    FS_ENTRY,
    .lower = 2,
    .upper = 2,
    .exec = fs_cp_exec,
};

const struct cli_cmd_entry cli_fs_mkdir_entry = {
    .name = "fs mkdir",
    .usage = "fs mkdir [-p] PATH...",
    .summary = "create directories (-p: with parents)",
    .text = "Creates directories (-p: with parents, no error if there).\n",
    FS_ENTRY,
    .lower = 1,
    .upper = -1,
    .exec = fs_each_exec,
};

const struct cli_cmd_entry cli_fs_walk_entry = {
    .name = "fs walk",
    .usage = "fs walk [--max-depth N] PATH",
    .summary = "list a tree breadth-first",
    .text = "Lists a tree breadth-first.\n",
    FS_ENTRY,
    .lower = 1,
    .upper = 1,
    .exec = fs_walk_exec,
};
