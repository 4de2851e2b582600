/* cli_xfer: the byte-moving half of `exec-client fs` (cat, get, put) and what it
 * needs: the progress line, the temporary files of transfers and their removal,
 * remote glob patterns, -p's times, and the errors both halves print (cli_fs_die).
 *
 * Files of up to 1 MiB go in one fs/readFile or fs/writeFile (one round trip, and
 * writeFile replaces atomically); larger ones and stdin stream through the library's
 * pipelined block transfer (ec_fs_download / ec_fs_upload). Neither direction ever
 * leaves a half-written file under the target's name, as rsync does not: both write
 * a hidden temporary beside the target (ec_temp_name, .NAME.exec-client.XXXXXXXXXX)
 * and rename it over the target when complete. A download's is local and removed on
 * every way out: an error (exit() runs the atexit hook), SIGINT, SIGTERM or SIGHUP
 * (the handler unlinks it, ends the progress line and dies of the same signal, as cp
 * does), a lost connection (the transfer fails and returns). An upload's is the
 * library's, on the server: such a signal asks the transfer to stop (its progress
 * callback says so at the next block), the library removes the temporary, and then
 * the client dies of the signal; a second signal leaves at once. Only a lost
 * connection (or SIGKILL) can leave it there, and the error names it. Remote patterns
 * (`*`, `?`, `[...]` in a component, quoted so the local shell leaves them) are
 * matched against the remote file system one component at a time through
 * fs/readDirectory, the way sftp globs; a dot file is matched only by a dot. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "cli_xfer.h"

#define SMALL_FILE (1u << 20) /* up to this: one whole-file call */

/* ---- errors ------------------------------------------------------------------- */

/* "exec-client: fs rm /x: Is a directory (use -r)", exit 1 (255: the connection). The
 * server's "(os error N)" suffix and JSON-RPC code are for programs, not people. */
void cli_fs_die(const char *sub, const char *path, const ec_error *e)
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
    exit(cli_err_exit_code(e));
}

int cli_fs_cmp_dirent(const void *a, const void *b)
{
    return strcmp(((const ec_dirent *)a)->name, ((const ec_dirent *)b)->name);
}

/* ---- progress ---------------------------------------------------------------- */

/* scp's progress line on a terminal: name, percent, bytes, rate and time left,
 * rewritten in place at most ten times a second, and a final line with the total
 * time. Nothing when stderr is not a terminal, or with -q. */
struct progress {
    bool on;
    const char *name; /* the file's last path component, as shown */
    uint64_t total;
    int64_t start_us, last_us;
};

static volatile sig_atomic_t progress_open; /* a line is on screen without its newline */

static int64_t mono_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

const char *cli_fs_base_name(const char *path)
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

static void progress_init(struct progress *pg, const struct cli_fs_opts *o, const char *path,
                          uint64_t total)
{
    static char name[256];
    snprintf(name, sizeof name, "%s", cli_fs_base_name(path));
    pg->on = !o->q && isatty(STDERR_FILENO);
    pg->name = name;
    pg->total = total;
    pg->start_us = mono_us();
    pg->last_us = 0;
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
    int64_t now = mono_us();
    if (!final && now - pg->last_us < 100000) return;
    pg->last_us = now;
    double secs = (double)(now - pg->start_us) / 1e6;
    int pct = pg->total ? (int)(done * 100 / pg->total) : 100;
    if (pct > 100) pct = 100;
    char sz[16], rt[24] = "    --", eta[32];
    human((double)done, sz, sizeof sz);
    /* A rate from a few microseconds says nothing; "--" rather than 0B/s. */
    if (secs >= 0.001 && done > 0) {
        human((double)done / secs, rt, sizeof rt - 2);
        strcat(rt, "/s");
    }
    double rate = secs > 0 ? (double)done / secs : 0;
    long t = final                          ? (long)(secs + 0.5)
             : rate > 0 && pg->total > done ? (long)((double)(pg->total - done) / rate + 0.5)
                                            : -1;
    if (t < 0)
        snprintf(eta, sizeof eta, "--:-- ETA");
    else
        snprintf(eta, sizeof eta, "%02ld:%02ld%s", t / 60, t % 60, final ? "    " : " ETA");
    fprintf(stderr, "\r%-30.30s %3d%% %9s %11s %s", pg->name, pct, sz, rt, eta);
    progress_open = !final;
    if (final) fputc('\n', stderr);
}

/* ---- the temporary files of transfers -------------------------------------------- */

static char tmp_path[4096];              /* a download's temporary, here */
static volatile sig_atomic_t tmp_set;    /* ...which the handler unlinks */
static volatile sig_atomic_t upload_on;  /* an upload's temporary is on the server */
static volatile sig_atomic_t cancel_sig; /* the signal that asked that upload to stop */

static void tmp_remove(void)
{
    if (tmp_set) unlink(tmp_path);
    tmp_set = 0;
}

/* SIGINT, SIGTERM, SIGHUP: no partial file left, the progress line ended, then the
 * default action (the shell sees the signal, as with cp). During an upload the first
 * one only stops it (see the top of this file). Async-signal-safe only. */
static void on_fatal_signal(int sig)
{
    if (upload_on && !cancel_sig) {
        cancel_sig = sig;
        return;
    }
    if (tmp_set) unlink(tmp_path);
    if (progress_open) (void)!write(STDERR_FILENO, "\n", 1);
    signal(sig, SIG_DFL);
    raise(sig);
}

/* After an upload: dies of the signal that stopped it, if one did. */
static void die_if_cancelled(void)
{
    if (!cancel_sig) return;
    if (progress_open) fputc('\n', stderr);
    fflush(stderr);
    signal(cancel_sig, SIG_DFL);
    raise(cancel_sig);
}

static int on_progress(void *ud, uint64_t done)
{
    if (cancel_sig) return 1; /* the upload stops and removes its temporary */
    progress_show(ud, done, false);
    return 0;
}

void cli_fs_guard_install(void)
{
    static bool done;
    if (done) return;
    done = true;
    atexit(tmp_remove);
    struct sigaction sa = {.sa_handler = on_fatal_signal};
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);
}

static void tmp_track(const char *path)
{
    tmp_set = 0;
    snprintf(tmp_path, sizeof tmp_path, "%s", path);
    tmp_set = 1;
}

/* ---- cat / get ------------------------------------------------------------------ */

/* Copies the remote file `path` (metadata md) to fd. */
static int download(struct cli *cli, const struct cli_fs_opts *o, const char *sub, const char *path,
                    int fd, const ec_metadata *md, bool progress)
{
    ec_error e = {0};
    if (md->is_directory) {
        fprintf(stderr, "exec-client: fs %s %s: Is a directory%s\n", sub, path,
                strcmp(sub, "get") == 0 ? " (use -r)" : "");
        return EXIT_FAILED;
    }
    struct progress pg;
    progress_init(&pg, o, path, md->size);
    pg.on &= progress;
    if (md->size <= SMALL_FILE) {
        uint8_t *data;
        size_t n;
        if (ec_fs_read_file(cli->c, path, &data, &n, &e) != 0) cli_fs_die(sub, path, &e);
        int rc = cli_write_all(fd, data, n);
        free(data);
        progress_show(&pg, n, true);
        return rc ? EXIT_FAILED : 0;
    }
    ec_transfer_options to = {.progress = on_progress, .progress_ud = &pg};
    uint64_t got = 0;
    if (ec_fs_download(cli->c, path, fd, &to, &got, &e) != 0) {
        if (progress_open) fputc('\n', stderr);
        progress_open = 0;
        if (e.kind == EC_ERR_USAGE) { /* the local side: write(2) failed */
            fprintf(stderr, "exec-client: fs %s: %s\n", sub, e.message);
            return EXIT_FAILED;
        }
        cli_fs_die(sub, path, &e);
    }
    progress_show(&pg, got, true);
    return 0;
}

int cli_fs_cat(struct cli *cli, const struct cli_fs_opts *o, const char *path)
{
    ec_error e = {0};
    ec_metadata md;
    if (ec_fs_get_metadata(cli->c, path, &md, &e) != 0) cli_fs_die("cat", path, &e);
    return download(cli, o, "cat", path, STDOUT_FILENO, &md, false);
}

/* Downloads the remote file `path` (metadata md) to the local file `local`. */
static int get_file(struct cli *cli, const struct cli_fs_opts *o, const char *path,
                    const ec_metadata *md, const char *local)
{
    /* Into a temporary name beside the target, renamed when complete: an interrupted
     * download never leaves a truncated file under the real name, nor the
     * temporary one (tmp_track). */
    char tmp[4096];
    int fd = -1;
    for (int tries = 0; fd < 0 && tries < 8; tries++) {
        errno = ENAMETOOLONG;
        if (ec_temp_name(local, tmp, sizeof tmp))
            fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
        if (fd < 0 && errno != EEXIST) break;
    }
    if (fd < 0) {
        fprintf(stderr, "exec-client: fs get: %s: %s\n", local, strerror(errno));
        return EXIT_FAILED;
    }
    tmp_track(tmp);
    int rc = download(cli, o, "get", path, fd, md, true);
    mode_t mode = md->has_mode ? (mode_t)(md->mode & 07777) : 0666;
    if (!md->has_mode) {
        mode_t um = umask(0);
        umask(um);
        mode &= ~um;
    }
    if (rc == 0 && fchmod(fd, mode) != 0) rc = EXIT_FAILED;
    if (rc == 0 && o->p && md->modified_at_ms > 0) {
        struct timespec ts[2];
        ts[0].tv_sec = ts[1].tv_sec = (time_t)(md->modified_at_ms / 1000);
        ts[0].tv_nsec = ts[1].tv_nsec = (long)(md->modified_at_ms % 1000) * 1000000;
        if (futimens(fd, ts) != 0) rc = EXIT_FAILED;
    }
    if (close(fd) != 0 && rc == 0) rc = EXIT_FAILED;
    if (rc == 0 && rename(tmp, local) != 0) {
        fprintf(stderr, "exec-client: fs get: %s: %s\n", local, strerror(errno));
        rc = EXIT_FAILED;
    }
    if (rc != 0) unlink(tmp);
    tmp_set = 0;
    return rc;
}

char *cli_fs_join(const char *dir, const char *name)
{
    size_t n = strlen(dir) + strlen(name) + 2;
    char *p = malloc(n);
    snprintf(p, n, "%s%s%s", dir, dir[0] && dir[strlen(dir) - 1] == '/' ? "" : "/", name);
    return p;
}

bool cli_fs_ends_with_slash(const char *p)
{
    size_t n = strlen(p);
    return n > 1 && p[n - 1] == '/';
}

/* -r: the remote directory `path` becomes the local directory `local`. */
static int get_tree(struct cli *cli, const struct cli_fs_opts *o, const char *path,
                    const ec_metadata *md, const char *local)
{
    if (mkdir(local, md->has_mode ? (mode_t)(md->mode & 07777) | 0700 : 0777) != 0 &&
        errno != EEXIST) {
        fprintf(stderr, "exec-client: fs get: %s: %s\n", local, strerror(errno));
        return EXIT_FAILED;
    }
    ec_error e = {0};
    ec_dirent *ents;
    size_t n;
    if (ec_fs_read_directory(cli->c, path, &ents, &n, &e) != 0) cli_fs_die("get", path, &e);
    int rc = 0;
    for (size_t i = 0; i < n && rc == 0; i++) {
        char *rp = cli_fs_join(path, ents[i].name), *lp = cli_fs_join(local, ents[i].name);
        ec_metadata cm;
        if (ec_fs_get_metadata(cli->c, rp, &cm, &e) != 0) cli_fs_die("get", rp, &e);
        rc = cm.is_directory ? get_tree(cli, o, rp, &cm, lp) : get_file(cli, o, rp, &cm, lp);
        free(rp);
        free(lp);
    }
    ec_dirents_free(ents, n);
    if (rc == 0 && o->p && md->modified_at_ms > 0) {
        struct timespec ts[2];
        ts[0].tv_sec = ts[1].tv_sec = (time_t)(md->modified_at_ms / 1000);
        ts[0].tv_nsec = ts[1].tv_nsec = (long)(md->modified_at_ms % 1000) * 1000000;
        utimensat(AT_FDCWD, local, ts, 0);
    }
    return rc;
}

/* One remote source to `local` (a directory when into_dir). scp's rules: an existing
 * local directory receives LOCAL/NAME; a LOCAL ending in / must be one. */
int cli_fs_get_one(struct cli *cli, const struct cli_fs_opts *o, const char *path,
                   const char *local)
{
    ec_error e = {0};
    ec_metadata md;
    if (ec_fs_get_metadata(cli->c, path, &md, &e) != 0) cli_fs_die("get", path, &e);
    if (strcmp(local, "-") == 0) return download(cli, o, "get", path, STDOUT_FILENO, &md, false);
    if (md.is_directory && !o->r) {
        fprintf(stderr, "exec-client: fs get %s: Is a directory (use -r)\n", path);
        return EXIT_FAILED;
    }
    struct stat st;
    bool is_dir = stat(local, &st) == 0 && S_ISDIR(st.st_mode);
    if (!is_dir && cli_fs_ends_with_slash(local)) {
        fprintf(stderr, "exec-client: fs get: %s: %s\n", local,
                access(local, F_OK) == 0 ? "Not a directory" : "No such file or directory");
        return EXIT_FAILED;
    }
    char *target = is_dir ? cli_fs_join(local, cli_fs_base_name(path)) : strdup(local);
    int rc =
        md.is_directory ? get_tree(cli, o, path, &md, target) : get_file(cli, o, path, &md, target);
    free(target);
    return rc;
}

/* ---- put ----------------------------------------------------------------------- */

/* -p on the remote side: the protocol has no call that sets times, so `touch -d
 * @SECONDS` runs there (argv, no shell); both times become the local mtime. */
static int remote_touch(struct cli *cli, const char *path, const struct stat *st)
{
    char when[64];
    snprintf(when, sizeof when, "@%lld.%09ld", (long long)st->st_mtim.tv_sec, st->st_mtim.tv_nsec);
    const char *argv[] = {"touch", "-c", "-d", when, "--", path, NULL};
    ec_start_options so = {.argv = argv, .env_inherit = "core"};
    ec_process *p = NULL;
    ec_error e = {0};
    if (ec_process_start(cli->c, &so, &p, &e) != 0) cli_fs_die("put -p", path, &e);
    int code = -1;
    ec_event ev;
    while (ec_process_next_event(p, -1, &ev, &e) == 0 && ev.type != EC_EVENT_CLOSED)
        if (ev.type == EC_EVENT_EXITED) code = ev.exit_code;
    ec_process_free(p);
    if (code != 0) {
        fprintf(stderr, "exec-client: fs put -p %s: could not set its time (touch exited %d)\n",
                path, code);
        return EXIT_FAILED;
    }
    return 0;
}

/* Uploads the local file (or "-" for stdin) to the remote file `path`; existed: path
 * names a file already, whose mode (and owner) the new content keeps, as rsync and scp
 * keep them (-p: the local mode all the same); a new file gets the local mode. */
static int put_file(struct cli *cli, const struct cli_fs_opts *o, const char *local,
                    const char *path, bool existed)
{
    bool from_stdin = strcmp(local, "-") == 0;
    int fd = from_stdin ? STDIN_FILENO : open(local, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        fprintf(stderr, "exec-client: fs put: %s: %s\n", local, strerror(errno));
        return EXIT_FAILED;
    }
    ec_error e = {0};
    struct stat st;
    bool reg = fstat(fd, &st) == 0 && S_ISREG(st.st_mode);
    struct progress pg;
    progress_init(&pg, o, local, reg ? (uint64_t)st.st_size : 0);
    pg.on &= !from_stdin;
    bool stream = ec_client_has_capability(cli->c, "fileWriteStreaming") &&
                  (!reg || (uint64_t)st.st_size > SMALL_FILE);
    if (!stream) {
        /* Small, or no write streaming: one fs/writeFile. */
        uint8_t *data;
        size_t n;
        if (cli_slurp(fd, &data, &n) != 0) {
            fprintf(stderr, "exec-client: fs put: %s: %s\n", local, strerror(errno));
            return EXIT_FAILED;
        }
        if (ec_fs_write_file(cli->c, path, data, n, &e) != 0) cli_fs_die("put", path, &e);
        free(data);
        pg.total = n;
        progress_show(&pg, n, true);
    } else {
        ec_transfer_options to = {.progress = on_progress, .progress_ud = &pg};
        uint64_t sent = 0;
        upload_on = 1;
        int rc = ec_fs_upload(cli->c, fd, path, &to, &sent, &e);
        upload_on = 0;
        die_if_cancelled(); /* the library removed the temporary: nothing is left */
        if (rc != 0) {
            if (progress_open) fputc('\n', stderr);
            progress_open = 0;
            if (e.kind == EC_ERR_USAGE) {
                fprintf(stderr, "exec-client: fs put: %s: %s\n", local, e.message);
                return EXIT_FAILED;
            }
            cli_fs_die("put", path, &e);
        }
        progress_show(&pg, sent, true);
    }
    if (!from_stdin) close(fd);
    /* A new file gets the local file's permission bits (stdin has none to give). */
    if (!from_stdin && reg && (!existed || o->p) &&
        ec_client_has_capability(cli->c, "fsPermissions") &&
        ec_fs_set_permissions(cli->c, path, st.st_mode & 07777, &e) != 0)
        cli_fs_die("put", path, &e);
    if (!from_stdin && o->p) return remote_touch(cli, path, &st);
    return 0;
}

/* -r: the local directory becomes the remote directory `path` (symbolic links are
 * followed, as scp does). */
static int put_tree(struct cli *cli, const struct cli_fs_opts *o, const char *local,
                    const char *path)
{
    ec_error e = {0};
    if (ec_fs_create_directory(cli->c, path, false, &e) != 0) {
        ec_metadata md;
        ec_error me = {0};
        if (ec_fs_get_metadata(cli->c, path, &md, &me) != 0 || !md.is_directory)
            cli_fs_die("put", path, &e);
    }
    DIR *d = opendir(local);
    if (!d) {
        fprintf(stderr, "exec-client: fs put: %s: %s\n", local, strerror(errno));
        return EXIT_FAILED;
    }
    /* What the remote directory holds already, in one call: those files keep their
     * mode (put_file). */
    ec_dirent *there = NULL;
    size_t nthere = 0;
    if (ec_fs_read_directory(cli->c, path, &there, &nthere, &e) != 0) nthere = 0;
    qsort(there, nthere, sizeof *there, cli_fs_cmp_dirent);
    int rc = 0;
    for (struct dirent *de; rc == 0 && (de = readdir(d));) {
        if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0) continue;
        char *lp = cli_fs_join(local, de->d_name), *rp = cli_fs_join(path, de->d_name);
        ec_dirent key = {.name = de->d_name};
        bool existed = bsearch(&key, there, nthere, sizeof *there, cli_fs_cmp_dirent) != NULL;
        struct stat st;
        if (stat(lp, &st) != 0) {
            fprintf(stderr, "exec-client: fs put: %s: %s\n", lp, strerror(errno));
            rc = EXIT_FAILED;
        } else {
            rc = S_ISDIR(st.st_mode) ? put_tree(cli, o, lp, rp) : put_file(cli, o, lp, rp, existed);
        }
        free(lp);
        free(rp);
    }
    ec_dirents_free(there, nthere);
    closedir(d);
    struct stat dst;
    if (rc == 0 && o->p && stat(local, &dst) == 0) rc = remote_touch(cli, path, &dst);
    return rc;
}

/* One local source to the remote `path`. scp's rules: an existing remote directory
 * receives PATH/NAME; a PATH ending in / must be an existing directory. */
int cli_fs_put_one(struct cli *cli, const struct cli_fs_opts *o, const char *local,
                   const char *path)
{
    bool from_stdin = strcmp(local, "-") == 0;
    struct stat st;
    if (!from_stdin && stat(local, &st) != 0) {
        fprintf(stderr, "exec-client: fs put: %s: %s\n", local, strerror(errno));
        return EXIT_FAILED;
    }
    bool local_dir = !from_stdin && S_ISDIR(st.st_mode);
    if (local_dir && !o->r) {
        fprintf(stderr, "exec-client: fs put %s: Is a directory (use -r)\n", local);
        return EXIT_FAILED;
    }
    ec_metadata md;
    ec_error e = {0};
    int gr = ec_fs_get_metadata(cli->c, path, &md, &e);
    if (gr != 0 && e.kind != EC_ERR_SERVER) cli_fs_die("put", path, &e);
    bool remote_dir = gr == 0 && md.is_directory;
    if (!remote_dir && cli_fs_ends_with_slash(path)) {
        fprintf(stderr, "exec-client: fs put %s: %s\n", path,
                gr == 0 ? "Not a directory" : "No such file or directory");
        return EXIT_FAILED;
    }
    if (remote_dir && from_stdin) {
        fprintf(stderr, "exec-client: fs put %s: Is a directory\n", path);
        return EXIT_FAILED;
    }
    if (local_dir && gr == 0 && !remote_dir) {
        fprintf(stderr, "exec-client: fs put %s: Not a directory\n", path);
        return EXIT_FAILED;
    }
    char *target = remote_dir ? cli_fs_join(path, cli_fs_base_name(local)) : strdup(path);
    bool existed = gr == 0 && !remote_dir;
    if (remote_dir && !local_dir) {
        ec_error te = {0};
        existed = ec_fs_get_metadata(cli->c, target, &md, &te) == 0;
    }
    int rc = local_dir ? put_tree(cli, o, local, target) : put_file(cli, o, local, target, existed);
    free(target);
    return rc;
}

/* ---- remote patterns ---------------------------------------------------------------- */

static bool has_glob(const char *s)
{
    return strpbrk(s, "*?[") != NULL;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The directories (or, for the last component, the entries) under each of
 * dirs[0..n) whose name matches pat. Frees dirs; returns the new list. */
static char **glob_step(struct cli *cli, char **dirs, size_t n, const char *pat, bool last,
                        size_t *nout)
{
    char **out = NULL;
    size_t k = 0, cap = 0;
    for (size_t i = 0; i < n; i++) {
        ec_dirent *ents = NULL;
        size_t ne = 0;
        ec_error e = {0};
        if (ec_fs_read_directory(cli->c, dirs[i], &ents, &ne, &e) != 0) ne = 0;
        qsort(ents, ne, sizeof *ents, cli_fs_cmp_dirent);
        for (size_t j = 0; j < ne; j++) {
            if (fnmatch(pat, ents[j].name, FNM_PERIOD) != 0) continue;
            if (!last && !ents[j].is_directory) continue;
            if (k == cap) out = realloc(out, (cap = cap ? cap * 2 : 16) * sizeof *out);
            out[k++] = cli_fs_join(dirs[i], ents[j].name);
        }
        ec_dirents_free(ents, ne);
        free(dirs[i]);
    }
    free(dirs);
    *nout = k;
    return out;
}

char **cli_fs_remote_glob(struct cli *cli, const char *path, size_t *n)
{
    char **list = malloc(sizeof *list);
    if (!has_glob(path)) {
        list[0] = strdup(path);
        *n = 1;
        return list;
    }
    list[0] = strdup("/");
    size_t k = 1;
    char *copy = strdup(path), *save = NULL;
    char *comp = strtok_r(copy, "/", &save);
    while (comp && k > 0) {
        char *next = strtok_r(NULL, "/", &save);
        if (has_glob(comp)) {
            list = glob_step(cli, list, k, comp, next == NULL, &k);
        } else {
            for (size_t i = 0; i < k; i++) {
                char *j = cli_fs_join(list[i], comp);
                free(list[i]);
                list[i] = j;
            }
        }
        comp = next;
    }
    free(copy);
    if (k > 1) qsort(list, k, sizeof *list, cmp_str);
    *n = k;
    return list;
}

void cli_fs_strv_free(char **v, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(v[i]);
    free(v);
}
