/* cli_fs: `exec-client fs ...`, the remote file system for people.
 *
 * cat/get/put move bytes (1 MiB blocks with a progress bar on a terminal for big
 * files); get and put keep the file's permission bits when the server reports and
 * accepts them (our fs/getMetadata `mode` and fs/setPermissions; the reference has
 * neither, and then the local umask decides, as with `cp`). ls -l and stat show
 * mode, owner and local times like ls(1). Errors read like coreutils' ("No such file
 * or directory", "Is a directory (use -r)"), not like JSON-RPC. */
#include <dirent.h>
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

/* scp's progress line on a terminal: name, percent, bytes, rate and time left,
 * rewritten in place at most ten times a second, and a final line with the total
 * time. Nothing when stderr is not a terminal. */
struct progress {
    bool on;
    const char *name; /* the file's last path component, as shown */
    uint64_t total;
    int64_t start_ms, last_ms;
};

static int64_t mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static const char *base_name(const char *path)
{
    const char *end = path + strlen(path);
    while (end > path + 1 && end[-1] == '/')
        end--;
    const char *b = end;
    while (b > path && b[-1] != '/')
        b--;
    static char out[256];
    snprintf(out, sizeof out, "%.*s", (int)(end - b), b);
    return out;
}

static void progress_init(struct progress *pg, const char *path, uint64_t total)
{
    static char name[256];
    snprintf(name, sizeof name, "%s", base_name(path));
    pg->on = isatty(STDERR_FILENO);
    pg->name = name;
    pg->total = total;
    pg->start_ms = mono_ms();
    pg->last_ms = 0;
}

/* "1.5MiB" */
static void human(double v, char *out, size_t n)
{
    const char *units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    int u = 0;
    while (v >= 1024 && u < 4) {
        v /= 1024;
        u++;
    }
    snprintf(out, n, u ? "%.1f%s" : "%.0f%s", v, units[u]);
}

static void progress_show(struct progress *pg, uint64_t done, bool final)
{
    if (!pg->on) return;
    int64_t now = mono_ms();
    if (!final && now - pg->last_ms < 100) return;
    pg->last_ms = now;
    double secs = (double)(now - pg->start_ms) / 1000.0;
    double rate = secs > 0.05 ? (double)done / secs : 0;
    int pct = pg->total ? (int)(done * 100 / pg->total) : 100;
    char sz[16], rt[16], eta[32];
    human((double)done, sz, sizeof sz);
    human(rate, rt, sizeof rt);
    long t = final                          ? (long)(secs + 0.5)
             : rate > 0 && pg->total > done ? (long)((double)(pg->total - done) / rate + 0.5)
                                            : -1;
    if (t < 0)
        snprintf(eta, sizeof eta, "--:-- ETA");
    else
        snprintf(eta, sizeof eta, "%02ld:%02ld%s", t / 60, t % 60, final ? "    " : " ETA");
    fprintf(stderr, "\r%-30.30s %3d%% %9s %9s/s %s", pg->name, pct, sz, rt, eta);
    if (final) fputc('\n', stderr);
}

/* ---- cat / get ------------------------------------------------------------------ */

/* Copies remote `path` to fd; `sub` names the command in errors, `progress` asks
 * for the bar (get, not cat). */
static int download(struct cli *cli, const char *sub, const char *path, int fd,
                    const ec_metadata *md, bool progress)
{
    ec_error e = {0};
    if (md->is_directory) {
        fprintf(stderr, "exec-client: fs %s %s: Is a directory%s\n", sub, path,
                strcmp(sub, "get") == 0 ? " (use -r)" : "");
        return EXIT_REMOTE;
    }
    struct progress pg;
    progress_init(&pg, path, md->size);
    pg.on &= progress;
    if (md->size < BIG_FILE) {
        uint8_t *data;
        size_t n;
        if (ec_fs_read_file(cli->c, path, &data, &n, &e) != 0) fs_die(sub, path, &e);
        int rc = cli_write_all(fd, data, n);
        free(data);
        progress_show(&pg, n, true);
        return rc ? EXIT_REMOTE : 0;
    }
    /* Large file: 1 MiB blocks through a read handle, with a progress bar. */
    const char *h = "exec-client-get";
    if (ec_fs_open(cli->c, h, path, false, &e) != 0) fs_die(sub, path, &e);
    uint64_t off = 0;
    for (;;) {
        uint8_t *data;
        size_t n;
        bool eof = false;
        if (ec_fs_read_block(cli->c, h, off, BLOCK, &data, &n, &eof, &e) != 0)
            fs_die(sub, path, &e);
        int wr = cli_write_all(fd, data, n);
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
    return download(cli, "cat", path, STDOUT_FILENO, &md, false);
}

/* Downloads the remote file `path` (metadata md) to the local file `local`. */
static int get_file(struct cli *cli, const char *path, const ec_metadata *md, const char *local)
{
    /* Into a temporary name beside the target, renamed when complete: an interrupted
     * download never leaves a truncated file under the real name. */
    size_t n = strlen(local) + 32;
    char *tmp = malloc(n);
    snprintf(tmp, n, "%s.exec-client-%d", local, (int)getpid());
    mode_t mode = md->has_mode ? (mode_t)(md->mode & 07777) : 0666;
    int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0) {
        fprintf(stderr, "exec-client: fs get: %s: %s\n", local, strerror(errno));
        free(tmp);
        return EXIT_USAGE;
    }
    int rc = download(cli, "get", path, fd, md, true);
    if (rc == 0 && md->has_mode && fchmod(fd, mode) != 0) rc = EXIT_REMOTE;
    if (rc == 0 && !md->has_mode) {
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

static char *join(const char *dir, const char *name)
{
    size_t n = strlen(dir) + strlen(name) + 2;
    char *p = malloc(n);
    snprintf(p, n, "%s%s%s", dir, dir[0] && dir[strlen(dir) - 1] == '/' ? "" : "/", name);
    return p;
}

static bool ends_with_slash(const char *p)
{
    size_t n = strlen(p);
    return n > 1 && p[n - 1] == '/';
}

/* -r: the remote directory `path` becomes the local directory `local`. */
static int get_tree(struct cli *cli, const char *path, const ec_metadata *md, const char *local)
{
    if (mkdir(local, md->has_mode ? (mode_t)(md->mode & 07777) | 0700 : 0777) != 0 &&
        errno != EEXIST) {
        fprintf(stderr, "exec-client: fs get: %s: %s\n", local, strerror(errno));
        return EXIT_USAGE;
    }
    ec_error e = {0};
    ec_dirent *ents;
    size_t n;
    if (ec_fs_read_directory(cli->c, path, &ents, &n, &e) != 0) fs_die("get", path, &e);
    int rc = 0;
    for (size_t i = 0; i < n && rc == 0; i++) {
        char *rp = join(path, ents[i].name), *lp = join(local, ents[i].name);
        ec_metadata cm;
        if (ec_fs_get_metadata(cli->c, rp, &cm, &e) != 0) fs_die("get", rp, &e);
        rc = cm.is_directory ? get_tree(cli, rp, &cm, lp) : get_file(cli, rp, &cm, lp);
        free(rp);
        free(lp);
    }
    ec_dirents_free(ents, n);
    return rc;
}

/* fs get [-r] PATH LOCAL: scp's rules. An existing local directory receives
 * LOCAL/NAME; a LOCAL ending in / must be an existing directory. */
static int fs_get(struct cli *cli, const char *path, const char *local, bool recursive)
{
    ec_error e = {0};
    ec_metadata md;
    if (ec_fs_get_metadata(cli->c, path, &md, &e) != 0) fs_die("get", path, &e);
    if (strcmp(local, "-") == 0) return download(cli, "get", path, STDOUT_FILENO, &md, false);
    if (md.is_directory && !recursive) {
        fprintf(stderr, "exec-client: fs get %s: Is a directory (use -r)\n", path);
        return EXIT_REMOTE;
    }
    struct stat st;
    bool is_dir = stat(local, &st) == 0 && S_ISDIR(st.st_mode);
    if (!is_dir && ends_with_slash(local)) {
        fprintf(stderr, "exec-client: fs get: %s: %s\n", local,
                access(local, F_OK) == 0 ? "Not a directory" : "No such file or directory");
        return EXIT_USAGE;
    }
    char *target = is_dir ? join(local, base_name(path)) : strdup(local);
    int rc = md.is_directory ? get_tree(cli, path, &md, target) : get_file(cli, path, &md, target);
    free(target);
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

/* Uploads the local file (or "-" for stdin) to the remote file `path`. */
static int put_file(struct cli *cli, const char *local, const char *path)
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
    struct progress pg;
    progress_init(&pg, local, have_st && S_ISREG(st.st_mode) ? (uint64_t)st.st_size : 0);
    pg.on &= fd != STDIN_FILENO;
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
        pg.total = n;
        progress_show(&pg, n, true);
    } else {
        /* A large regular file streams in 1 MiB blocks: memory stays flat. */
        const char *h = "exec-client-put";
        if (ec_fs_open(cli->c, h, path, true, &e) != 0) fs_die("put", path, &e);
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

/* -r: the local directory becomes the remote directory `path` (symbolic links are
 * followed, as scp does). */
static int put_tree(struct cli *cli, const char *local, const char *path)
{
    ec_error e = {0};
    if (ec_fs_create_directory(cli->c, path, false, &e) != 0) {
        ec_metadata md;
        ec_error me = {0};
        if (ec_fs_get_metadata(cli->c, path, &md, &me) != 0 || !md.is_directory)
            fs_die("put", path, &e);
    }
    DIR *d = opendir(local);
    if (!d) {
        fprintf(stderr, "exec-client: fs put: %s: %s\n", local, strerror(errno));
        return EXIT_USAGE;
    }
    int rc = 0;
    for (struct dirent *de; rc == 0 && (de = readdir(d));) {
        if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0) continue;
        char *lp = join(local, de->d_name), *rp = join(path, de->d_name);
        struct stat st;
        if (stat(lp, &st) != 0) {
            fprintf(stderr, "exec-client: fs put: %s: %s\n", lp, strerror(errno));
            rc = EXIT_USAGE;
        } else {
            rc = S_ISDIR(st.st_mode) ? put_tree(cli, lp, rp) : put_file(cli, lp, rp);
        }
        free(lp);
        free(rp);
    }
    closedir(d);
    return rc;
}

/* fs put [-r] LOCAL PATH: scp's rules. An existing remote directory receives
 * PATH/NAME; a PATH ending in / must be an existing directory. */
static int fs_put(struct cli *cli, const char *local, const char *path, bool recursive)
{
    bool from_stdin = strcmp(local, "-") == 0;
    struct stat st;
    if (!from_stdin && stat(local, &st) != 0) {
        fprintf(stderr, "exec-client: fs put: %s: %s\n", local, strerror(errno));
        return EXIT_USAGE;
    }
    bool local_dir = !from_stdin && S_ISDIR(st.st_mode);
    if (local_dir && !recursive) {
        fprintf(stderr, "exec-client: fs put %s: Is a directory (use -r)\n", local);
        return EXIT_USAGE;
    }
    ec_metadata md;
    ec_error e = {0};
    int gr = ec_fs_get_metadata(cli->c, path, &md, &e);
    if (gr != 0 && e.kind != EC_ERR_SERVER) fs_die("put", path, &e);
    bool remote_dir = gr == 0 && md.is_directory;
    if (!remote_dir && ends_with_slash(path)) {
        fprintf(stderr, "exec-client: fs put %s: %s\n", path,
                gr == 0 ? "Not a directory" : "No such file or directory");
        return EXIT_REMOTE;
    }
    if (remote_dir && from_stdin) {
        fprintf(stderr, "exec-client: fs put %s: Is a directory\n", path);
        return EXIT_REMOTE;
    }
    if (local_dir && gr == 0 && !remote_dir) {
        fprintf(stderr, "exec-client: fs put %s: Not a directory\n", path);
        return EXIT_REMOTE;
    }
    char *target = remote_dir ? join(path, base_name(local)) : strdup(path);
    int rc = local_dir ? put_tree(cli, local, target) : put_file(cli, local, target);
    free(target);
    return rc;
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
        snprintf(full, len, "%s%s%s", path, path[strlen(path) - 1] == '/' ? "" : "/", ents[i].name);
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
               who(md.group, md.gid, gb, sizeof gb), (unsigned long long)md.size, t, ents[i].name,
               md.is_directory ? "/" : "");
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
        case 'R': rflag = true; break;
        case 'f': fflag = true; break;
        case 'p': pflag = true; break;
        case 'l': lflag = true; break;
        case 'd': max_depth = (unsigned)atoi(optarg); break;
        default: die_usage("fs %s: bad option", sub);
        }
    }
    int nargs = argc - optind;
    char **args = argv + optind;
    static const char *const subs[] = {"cat", "get", "put",   "ls",   "stat",
                                       "rm",  "cp",  "mkdir", "walk", NULL};
    bool known = false;
    for (size_t i = 0; subs[i]; i++)
        known |= strcmp(sub, subs[i]) == 0;
    if (!known) die_usage("fs: unknown subcommand `%s`", sub);
    if (rflag && strcmp(sub, "rm") != 0 && strcmp(sub, "cp") != 0 && strcmp(sub, "get") != 0 &&
        strcmp(sub, "put") != 0)
        die_usage("fs %s: -r is for rm, cp, get and put", sub);
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
        rc = fs_get(cli, path, args[1], rflag);
    } else if (strcmp(sub, "put") == 0) {
        rc = fs_put(cli, args[0], path, rflag);
    } else if (strcmp(sub, "ls") == 0) {
        rc = fs_ls(cli, path, lflag);
    } else if (strcmp(sub, "stat") == 0) {
        rc = fs_stat(cli, path);
    } else if (strcmp(sub, "rm") == 0) {
        if (ec_fs_remove(cli->c, path, rflag, fflag, &e) != 0) fs_die("rm", path, &e);
    } else if (strcmp(sub, "cp") == 0) {
        /* cp(1)'s rules: an existing directory receives DST/NAME; errors about the
         * source name the source, the rest the destination. */
        char *src = remote_path(cli, args[0]);
        ec_metadata sm, dm;
        if (ec_fs_get_metadata(cli->c, src, &sm, &e) != 0) fs_die("cp", src, &e);
        if (sm.is_directory && !rflag) {
            fprintf(stderr, "exec-client: fs cp %s: Is a directory (use -r)\n", src);
            rc = EXIT_REMOTE;
        } else {
            ec_error de = {0};
            int dr = ec_fs_get_metadata(cli->c, path, &dm, &de);
            if (dr == 0 && dm.is_directory) {
                char *into = join(path, base_name(src));
                free(path);
                path = into;
            } else if (ends_with_slash(path)) {
                fprintf(stderr, "exec-client: fs cp %s: %s\n", path,
                        dr == 0 ? "Not a directory" : "No such file or directory");
                rc = EXIT_REMOTE;
            }
            if (rc == 0 && ec_fs_copy(cli->c, src, path, rflag, &e) != 0) fs_die("cp", path, &e);
        }
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
