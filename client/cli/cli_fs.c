/* cli_fs: `exec-client fs ...`, the remote file system for people.
 *
 * cat/get/put move bytes (1 MiB blocks with a progress bar on a terminal for big
 * files); get and put keep the file's permission bits when the server reports and
 * accepts them (our fs/getMetadata `mode` and fs/setPermissions; the reference has
 * neither, and then the local umask decides, as with `cp`). ls -l and stat show
 * mode, owner and local times like ls(1). Errors read like coreutils' ("No such file
 * or directory", "Is a directory (use -r)"), not like JSON-RPC. */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"

#define BIG_FILE (4u << 20)
#define BLOCK (1u << 20)

/* ---- errors ------------------------------------------------------------------- */

/* "exec-client: fs rm /x: Is a directory (use -r)", exit 1 (2 for usage). The
 * server's "(os error N)" suffix and JSON-RPC code are for programs, not people. */
static void fs_die(const char *sub, const char *path, const ec_error *e)
{
    char msg[sizeof e->message];
    snprintf(msg, sizeof msg, "%s", e->message);
    char *os = strstr(msg, " (os error ");
    if (os) *os = 0;
    const char *hint = "";
    if ((strcmp(sub, "rm") == 0 || strcmp(sub, "cp") == 0) &&
        (strstr(msg, "Is a directory") || strstr(msg, "Directory not empty") ||
         strstr(msg, "requires recursive") || strstr(msg, "is a directory")))
        hint = " (use -r)";
    /* fs/copy words a directory source in its own parameters; say it like cp(1). */
    if (strstr(msg, "requires recursive")) snprintf(msg, sizeof msg, "Is a directory");
    if (strcmp(sub, "mkdir") == 0 && strstr(msg, "No such file")) hint = " (use -p)";
    if (e->kind == EC_ERR_SERVER && e->code == -32004 && !strstr(msg, "No such file"))
        snprintf(msg, sizeof msg, "No such file or directory");
    fprintf(stderr, "exec-client: fs %s %s: %s%s\n", sub, path, msg, hint);
    exit(e->kind == EC_ERR_USAGE ? EXIT_USAGE : e->kind == EC_ERR_SERVER ? EXIT_REMOTE : EXIT_CONN);
}

/* ---- progress ---------------------------------------------------------------- */

struct progress {
    bool on;
    uint64_t total;
    int64_t last_ms;
};

static int64_t mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void progress_init(struct progress *pg, uint64_t total)
{
    pg->on = total >= BIG_FILE && isatty(STDERR_FILENO);
    pg->total = total;
    pg->last_ms = 0;
}

static void progress_show(struct progress *pg, uint64_t done, bool final)
{
    if (!pg->on) return;
    int64_t now = mono_ms();
    if (!final && now - pg->last_ms < 100) return;
    pg->last_ms = now;
    int pct = pg->total ? (int)(done * 100 / pg->total) : 100;
    char bar[31];
    int fill = pct * 30 / 100;
    for (int i = 0; i < 30; i++)
        bar[i] = i < fill ? '#' : '.';
    bar[30] = 0;
    fprintf(stderr, "\r[%s] %3d%% %llu/%llu KiB", bar, pct, (unsigned long long)(done >> 10),
            (unsigned long long)(pg->total >> 10));
    if (final) fputc('\n', stderr);
}

/* ---- cat / get ------------------------------------------------------------------ */

/* Copies remote `path` to fd; `sub` names the command in errors. */
static int download(struct cli *cli, const char *sub, const char *path, int fd,
                    const ec_metadata *md)
{
    ec_error e = {0};
    if (md->is_directory) {
        fprintf(stderr, "exec-client: fs %s %s: Is a directory\n", sub, path);
        return EXIT_REMOTE;
    }
    if (md->size < BIG_FILE) {
        uint8_t *data;
        size_t n;
        if (ec_fs_read_file(cli->c, path, &data, &n, &e) != 0) fs_die(sub, path, &e);
        int rc = write_all(fd, data, n);
        free(data);
        return rc ? EXIT_REMOTE : 0;
    }
    /* Large file: 1 MiB blocks through a read handle, with a progress bar. */
    const char *h = "exec-client-get";
    if (ec_fs_open(cli->c, h, path, false, &e) != 0) fs_die(sub, path, &e);
    struct progress pg;
    progress_init(&pg, md->size);
    uint64_t off = 0;
    for (;;) {
        uint8_t *data;
        size_t n;
        bool eof = false;
        if (ec_fs_read_block(cli->c, h, off, BLOCK, &data, &n, &eof, &e) != 0)
            fs_die(sub, path, &e);
        int wr = write_all(fd, data, n);
        free(data);
        if (wr) return EXIT_REMOTE;
        off += n;
        progress_show(&pg, off, false);
        if (eof || n == 0) break;
    }
    progress_show(&pg, off, true);
    ec_fs_close(cli->c, h, NULL);
    return 0;
}

static int fs_cat(struct cli *cli, const char *path)
{
    ec_error e = {0};
    ec_metadata md;
    if (ec_fs_get_metadata(cli->c, path, &md, &e) != 0) fs_die("cat", path, &e);
    return download(cli, "cat", path, STDOUT_FILENO, &md);
}

static int fs_get(struct cli *cli, const char *path, const char *local)
{
    ec_error e = {0};
    ec_metadata md;
    if (ec_fs_get_metadata(cli->c, path, &md, &e) != 0) fs_die("get", path, &e);
    if (strcmp(local, "-") == 0) return download(cli, "get", path, STDOUT_FILENO, &md);
    /* Into a temporary name beside the target, renamed when complete: an interrupted
     * download never leaves a truncated file under the real name. */
    size_t n = strlen(local) + 32;
    char *tmp = malloc(n);
    snprintf(tmp, n, "%s.exec-client-%d", local, (int)getpid());
    mode_t mode = md.has_mode ? (mode_t)(md.mode & 07777) : 0666;
    int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0) {
        fprintf(stderr, "exec-client: fs get: %s: %s\n", local, strerror(errno));
        free(tmp);
        return EXIT_USAGE;
    }
    int rc = download(cli, "get", path, fd, &md);
    if (rc == 0 && md.has_mode && fchmod(fd, mode) != 0) rc = EXIT_REMOTE;
    if (rc == 0 && !md.has_mode) {
        mode_t um = umask(0);
        umask(um);
        fchmod(fd, 0666 & ~um);
    }
    if (close(fd) != 0) rc = EXIT_REMOTE;
    if (rc == 0 && rename(tmp, local) != 0) {
        fprintf(stderr, "exec-client: fs get: %s: %s\n", local, strerror(errno));
        rc = EXIT_USAGE;
    }
    if (rc != 0) unlink(tmp);
    free(tmp);
    return rc;
}

/* ---- put ----------------------------------------------------------------------- */

/* Reads up to n bytes (less only at EOF). Returns the count or -1. */
static ssize_t read_full(int fd, uint8_t *buf, size_t n)
{
    size_t got = 0;
    while (got < n) {
        ssize_t r = read(fd, buf + got, n - got);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) return -1;
        if (r == 0) break;
        got += (size_t)r;
    }
    return (ssize_t)got;
}

static int fs_put(struct cli *cli, const char *local, const char *path)
{
    int fd = strcmp(local, "-") == 0 ? STDIN_FILENO : open(local, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        fprintf(stderr, "exec-client: fs put: %s: %s\n", local, strerror(errno));
        return EXIT_USAGE;
    }
    ec_error e = {0};
    struct stat st;
    bool have_st = fstat(fd, &st) == 0;
    bool big_file = have_st && S_ISREG(st.st_mode) && st.st_size >= BIG_FILE;
    if (have_st && S_ISDIR(st.st_mode)) {
        fprintf(stderr, "exec-client: fs put: %s: Is a directory\n", local);
        return EXIT_USAGE;
    }
    if (!big_file || !ec_client_has_capability(cli->c, "fileWriteStreaming")) {
        /* Small, not a regular file, or no write streaming: one fs/writeFile. */
        uint8_t *data;
        size_t n;
        if (slurp(fd, &data, &n) != 0) {
            fprintf(stderr, "exec-client: fs put: %s: %s\n", local, strerror(errno));
            return EXIT_USAGE;
        }
        if (ec_fs_write_file(cli->c, path, data, n, &e) != 0) fs_die("put", path, &e);
        free(data);
    } else {
        /* A large regular file streams in 1 MiB blocks: memory stays flat. */
        const char *h = "exec-client-put";
        if (ec_fs_open(cli->c, h, path, true, &e) != 0) fs_die("put", path, &e);
        struct progress pg;
        progress_init(&pg, (uint64_t)st.st_size);
        uint8_t *block = malloc(BLOCK);
        uint64_t off = 0;
        for (;;) {
            ssize_t n = read_full(fd, block, BLOCK);
            if (n < 0) {
                fprintf(stderr, "exec-client: fs put: %s: %s\n", local, strerror(errno));
                free(block);
                return EXIT_USAGE;
            }
            if (n == 0) break;
            if (ec_fs_write_block(cli->c, h, off, block, (size_t)n, &e) != 0)
                fs_die("put", path, &e);
            off += (uint64_t)n;
            progress_show(&pg, off, false);
        }
        progress_show(&pg, off, true);
        free(block);
        if (ec_fs_close(cli->c, h, &e) != 0) fs_die("put", path, &e);
    }
    if (fd != STDIN_FILENO) close(fd);
    /* Keep the local file's permission bits (not for stdin: it has none to keep). */
    if (fd != STDIN_FILENO && have_st && S_ISREG(st.st_mode) &&
        ec_client_has_capability(cli->c, "fsPermissions") &&
        ec_fs_set_permissions(cli->c, path, st.st_mode & 07777, &e) != 0)
        fs_die("put", path, &e);
    return 0;
}

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

static int cmp_dirent(const void *a, const void *b)
{
    return strcmp(((const ec_dirent *)a)->name, ((const ec_dirent *)b)->name);
}

static int fs_ls(struct cli *cli, const char *path, bool long_form)
{
    ec_error e = {0};
    ec_dirent *ents;
    size_t n;
    if (ec_fs_read_directory(cli->c, path, &ents, &n, &e) != 0) fs_die("ls", path, &e);
    qsort(ents, n, sizeof *ents, cmp_dirent);
    for (size_t i = 0; i < n; i++) {
        if (!long_form) {
            printf("%s%s\n", ents[i].name, ents[i].is_directory ? "/" : "");
            continue;
        }
        size_t len = strlen(path) + strlen(ents[i].name) + 2;
        char *full = malloc(len);
        snprintf(full, len, "%s%s%s", path, path[strlen(path) - 1] == '/' ? "" : "/",
                 ents[i].name);
        ec_metadata md;
        ec_error me = {0};
        if (ec_fs_get_metadata(cli->c, full, &md, &me) != 0) {
            /* Gone since the listing, or unreadable: say so and go on, like ls. */
            printf("?????????? %s%s\n", ents[i].name, ents[i].is_directory ? "/" : "");
            free(full);
            continue;
        }
        char m[11], t[32], ub[16], gb[16];
        mode_string(&md, m);
        ls_time(md.modified_at_ms, t, sizeof t);
        printf("%s %-8s %-8s %10llu %s %s%s\n", m, who(md.owner, md.uid, ub, sizeof ub),
               who(md.group, md.gid, gb, sizeof gb), (unsigned long long)md.size, t,
               ents[i].name, md.is_directory ? "/" : "");
        free(full);
    }
    ec_dirents_free(ents, n);
    return 0;
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

int cmd_fs(struct cli *cli, int argc, char **argv)
{
    if (argc < 2)
        die_usage("%s", "fs: missing subcommand (cat, get, put, ls, stat, rm, cp, mkdir, walk)");
    const char *sub = argv[1];
    bool rflag = false, fflag = false, pflag = false, lflag = false;
    unsigned max_depth = 0;
    static const struct option longs[] = {{"max-depth", required_argument, 0, 'd'},
                                          {"recursive", no_argument, 0, 'r'},
                                          {"force", no_argument, 0, 'f'},
                                          {"parents", no_argument, 0, 'p'},
                                          {"long", no_argument, 0, 'l'},
                                          {0, 0, 0, 0}};
    optind = 2;
    int ch;
    while ((ch = getopt_long(argc, argv, "+rRfpl", longs, NULL)) != -1) {
        switch (ch) {
        case 'r':
        case 'R':
            rflag = true;
            break;
        case 'f':
            fflag = true;
            break;
        case 'p':
            pflag = true;
            break;
        case 'l':
            lflag = true;
            break;
        case 'd':
            max_depth = (unsigned)atoi(optarg);
            break;
        default:
            die_usage("fs %s: bad option", sub);
        }
    }
    int nargs = argc - optind;
    char **args = argv + optind;
    static const char *const subs[] = {"cat", "get", "put", "ls",   "stat",
                                       "rm",  "cp",  "mkdir", "walk", NULL};
    bool known = false;
    for (size_t i = 0; subs[i]; i++) known |= strcmp(sub, subs[i]) == 0;
    if (!known) die_usage("fs: unknown subcommand `%s`", sub);
    int want = strcmp(sub, "put") == 0 || strcmp(sub, "cp") == 0 || strcmp(sub, "get") == 0 ? 2 : 1;
    if (nargs != want) die_usage("fs %s: wrong number of arguments", sub);
    connect_or_die(cli, false, false);
    ec_error e = {0};
    int rc = 0;
    /* The remote path is the last argument, except for get (remote first). */
    char *path = remote_path(cli, args[strcmp(sub, "get") == 0 ? 0 : want - 1]);
    if (strcmp(sub, "cat") == 0) {
        rc = fs_cat(cli, path);
    } else if (strcmp(sub, "get") == 0) {
        rc = fs_get(cli, path, args[1]);
    } else if (strcmp(sub, "put") == 0) {
        rc = fs_put(cli, args[0], path);
    } else if (strcmp(sub, "ls") == 0) {
        rc = fs_ls(cli, path, lflag);
    } else if (strcmp(sub, "stat") == 0) {
        rc = fs_stat(cli, path);
    } else if (strcmp(sub, "rm") == 0) {
        if (ec_fs_remove(cli->c, path, rflag, fflag, &e) != 0) fs_die("rm", path, &e);
    } else if (strcmp(sub, "cp") == 0) {
        char *src = remote_path(cli, args[0]);
        if (ec_fs_copy(cli->c, src, path, rflag, &e) != 0) fs_die("cp", src, &e);
        free(src);
    } else if (strcmp(sub, "mkdir") == 0) {
        if (ec_fs_create_directory(cli->c, path, pflag, &e) != 0) fs_die("mkdir", path, &e);
    } else if (strcmp(sub, "walk") == 0) {
        ec_walk_options wo = {.max_depth = max_depth ? max_depth : 64};
        ec_walk_entry *ents;
        size_t n;
        bool trunc = false;
        if (ec_fs_walk(cli->c, path, &wo, &ents, &n, &trunc, &e) != 0) fs_die("walk", path, &e);
        for (size_t i = 0; i < n; i++)
            printf("%s%s\n", ents[i].path, ents[i].is_directory ? "/" : "");
        if (trunc) fprintf(stderr, "exec-client: walk truncated at the server's limits\n");
        ec_walk_entries_free(ents, n);
    }
    free(path);
    fflush(stdout);
    /* A finished call leaves nothing behind on the server. */
    ec_client_end_session(cli->c, NULL);
    return rc;
}
