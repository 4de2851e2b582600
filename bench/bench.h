/* bench.h: declarations shared by the modules of exec-bench, the benchmark driver:
 * the options, the result table (rows and cells), the servers under test, process
 * tracking and the scenario helpers of bench_core.c, and the scenarios of
 * scenarios_proc.c (1-4), scenarios_fs.c (5-7), scenarios_http.c (8, 9) and
 * scenarios_scale.c (10) that bench.c runs. */

#ifndef EXEC_BENCH_H
#define EXEC_BENCH_H

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <glob.h>
#include <limits.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include "proto/base64.h"
#include "util/mem.h"
#include "wsc.h"

extern char **environ;

/* Where npm put the reference, by tests/blackbox/codex_ref.py's rule (the one place that
 * defines it): 0.169.0 under ~/.cache/codex-ref, any other X.Y.Z under ~/.cache/codex-ref-X.Y. */
#define REF_VERSION "0.171.0"
#define REF_BINARY_GLOB "/node_modules/@openai/codex-linux-x64/vendor/*/bin/codex"
#define TIMEOUT_MS 120000

struct opts {
    const char *ours, *ref;
    const char *ref_version; /* which reference to look for when --ref does not say */
    const char *ref171;      /* the 0.171.0 reference for row 9c, or NULL */
    unsigned scenarios;      /* bit i = scenario i */
    bool quick;
    int runs;
    int oneshot_n;
    size_t stream_bytes;
    int fanout_n;
    int conns_n;
    size_t file_bytes;
    size_t client_bytes; /* rows 5e, 5f: what exec-client moves each way */
    int walk_entries;
    int mem_procs;
    size_t mem_stream_bytes;
    double mem_stream_secs;
    int sandbox_n;
    size_t http_bytes;
    size_t proxy_bytes;
    int scale_conns, scale_load, scale_period_ms, scale_oneshots;
    const char *ours_extra[6]; /* more options for our server (NULL-terminated) */
    const char *vs;            /* --vs ARGS: the reference's column is ours with ARGS */
    bool tty;                  /* --tty: row 2 streams through a PTY */
    bool text;                 /* --text: row 2 streams lines of text, not NUL bytes */
    const char *only;          /* --only: comma-separated row ids ("5b,7b") or NULL for all */
    char tmp[PATH_MAX];
};

extern struct opts O;

enum kind { K_MS, K_MBS, K_MB };

struct cell {
    bool ok;
    bool dist; /* p95 meaningful */
    double p50, p95;
    double cpu; /* CPU ms per operation of the server (all its threads and helper
                   processes) or of the floor's command; 0 when not measured */
    char err[200];
};

struct row {
    char name[96];
    enum kind kind;
    struct cell v[2]; /* ours, reference */
    struct cell floor;
    bool has_floor;
};

struct server {
    int which; /* 0 ours, 1 reference */
    pid_t pid;
    int port;
    int out_fd;
    char exe[PATH_MAX];
};

struct track {
    char prefix[16];
    int n;
    uint64_t *last_seq;
    bool *closed;
    int closed_count;
    int responses;
    uint64_t bytes;
    int order_errors;
    bool decode;
    uint8_t *scratch;
    size_t scratch_cap;
    char err[200];
};

struct pair {
    struct server s[2];
    struct wsc c[2];
    bool up[2];
    struct track tr[2]; /* scenario 1: one tracker over all runs */
};

struct mem_result {
    struct cell idle, live, noread;
    double noread_growth; /* MB over the second half of the window */
};

typedef struct cell (*scen_fn)(struct server *s, struct wsc *c, void *arg);

extern struct row rows[64];
extern int nrows;
extern bool ours_failed;
extern char *file_big, *file_out, *walk_root;
extern char *b64_data;
extern size_t b64_len;

struct row *row_get(const char *name, enum kind kind);
struct cell stats(double *s, int n);
struct cell value(double v);
struct cell failure(const char *fmt, ...);
void server_stop(struct server *s);
double server_rss_mb(const struct server *s);
double server_cpu_ms(const struct server *s);
double self_cpu_ms(void);
bool row_on(const char *id);
void track_init(struct track *t, const char *prefix, int n, bool decode);
void track_free(struct track *t);
void track_msg(void *ud, struct span m);
int track_pump(struct wsc *c, struct track *t, int closed, int responses, int timeout_ms);
void start_params(char *out, size_t n, const char *prefix, int idx, const char *argv_json);
double pipe_floor(char *const argv[], uint64_t *bytes, struct rusage *ru);
bool connect_server(struct server *s, struct wsc *c, struct cell *out);
void record(struct row *r, int which, struct cell c);
bool have_ref(void);
void pair_start(struct pair *p, struct row *r, int only);
void pair_fail(struct pair *p, struct row *r, int w, const char *err);
void pair_stop(struct pair *p);
int nservers(void);
const char *server_name(int which);
bool start_or_fail(struct server *s, int which, struct row **rs, int nr);
void progress(const char *fmt, ...);
void scenario_oneshot(struct row *r);
void scenario_oneshot_sandboxed(struct row *r, const char *net, const char *floor_net);
void scenario_stream(struct row *r, struct row *proto);
double relay_floor_once(size_t bytes, char *err, size_t errlen);
/* Row 8b's floor: a relay process fetching path from 127.0.0.1:web_port and sending
 * its body as http/request/bodyDelta notifications; the driver's end of its
 * connection (or -1) and the process in *pid_out. */
int relay_http_start(int web_port, const char *path, pid_t *pid_out);
/* proxy_floor.c: a minimal TCP relay to 127.0.0.1:upstream_port in a child process;
 * its pid, its port in *port_out; -1 when it cannot listen. */
pid_t proxy_floor_start(int upstream_port, int *port_out);

/* bench_core.c: writes all of buf to a blocking fd (0, or -1 with errno); a listening
 * TCP socket on 127.0.0.1 at a port the kernel picks, its address in *a (-1 with
 * errno). */
int write_full(int fd, const void *buf, size_t n);
int listen_loopback(int backlog, struct sockaddr_in *a);

/* web_static.c: a static file server of dir on 127.0.0.1 (GET and HEAD of
 * a plain name) in a child process; its pid and *port_out, or -1. */
pid_t web_static_start(const char *dir, int *port_out);
void scenario_fanout(struct row *r);
struct cell conns_run(struct server *s);
void make_file(const char *path, size_t bytes);
void make_tree(const char *root, int entries);
int walk_total(void);
struct cell readfile_one(struct server *s);
struct cell writefile_one(struct server *s, size_t bytes);
struct cell writeblock_one(struct server *s);
struct cell walk_one(struct server *s);
struct cell cmd_floor(char *const argv[], const char *out_path);
void scenario_http(void);
void scenario_proxy(void);
void scenario_scale(void);
/* Rows 5e, 5f: `exec-client fs put` (put) or `fs get` of src to dst against s, the
 * client started as a user starts it; MB/s, and the client's CPU per run in cpu. */
struct cell client_xfer_one(struct server *s, bool put, const char *src, const char *dst,
                            size_t bytes);
/* Their floor: cp src dst, in MB/s (CPU: cp's). */
struct cell cp_floor(const char *src, const char *dst, size_t bytes);
struct mem_result mem_run(struct server *s);
struct cell sandbox_one(struct server *s, bool sandboxed, const char *ws, struct cell *floor);

#endif
