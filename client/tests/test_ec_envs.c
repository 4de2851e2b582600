/* Live test of ec_envs: three environments at once, each a real executor
 * over a real transport, plus one that cannot be reached:
 *   ws      our exec-server on ws://127.0.0.1:PORT (later replaced by a second one)
 *   stdio   a program: `sh -c 'echo $$ > PIDFILE; exec exec-server --listen stdio'`
 *   remote  our exec-server registered at the local registry + rendezvous double
 *           (tests/remote/fake_cloud.py), reached through it Noise-encrypted
 *   broken  ws:// to a port nobody listens on
 * Each executor is started with its own MARK in its environment, so a command run with
 * the server's environment (`echo $MARK`) proves which one a handle reaches.
 * Checked: lazy connect (nothing connects, no program starts, before first use; a
 * capture that does not wait asks them to start and captures none); a capture that
 * waits gets the three ready and the broken one failed with its reason; a command,
 * an fs round trip and http/request (buffered and streamed) through the captured
 * handles; the snapshot rule with a real replacement mid-step (the step keeps handle A
 * and reaches server A; a later step gets B once ready, reaching server B);
 * capability roots resolved through the captured handle and cached by (environment,
 * root) across the replacement until forgotten; a program killed under a ready handle
 * (the call fails with how it died, the next capture sees it failed, a retry starts a
 * new one); and nothing left behind.
 *
 * usage: test_ec_envs EXEC_SERVER PYTHON3 FAKE_CLOUD_PY */
#include "execclient.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "ec_check.h"

static const char *server_bin;
static char tmp[128];

/* ---- processes the test starts ---------------------------------------------------- */

/* Runs argv with MARK=mark (and CODEX_API_KEY when key), returns its pid; when line is
 * not NULL, the first line it prints (within a bounded wait) goes there. */
static pid_t spawn(char *const argv[], const char *mark, const char *key, char *line, size_t n)
{
    int pfd[2];
    if (pipe(pfd) != 0) abort();
    pid_t pid = fork();
    if (pid == 0) {
        setpgid(0, 0);
        prctl(PR_SET_PDEATHSIG, SIGKILL); /* nothing outlives a test that crashed */
        if (mark) setenv("MARK", mark, 1);
        if (key) setenv("CODEX_API_KEY", key, 1);
        dup2(pfd[1], 1);
        close(pfd[0]);
        close(pfd[1]);
        execvp(argv[0], argv);
        _exit(127);
    }
    close(pfd[1]);
    if (line) {
        FILE *f = fdopen(pfd[0], "r");
        struct pollfd p = {.fd = pfd[0], .events = POLLIN};
        if (poll(&p, 1, 30000) != 1 || !fgets(line, (int)n, f)) {
            fprintf(stderr, "%s printed nothing\n", argv[0]);
            exit(1);
        }
        line[strcspn(line, "\r\n")] = 0;
        fclose(f);
    } else {
        close(pfd[0]);
    }
    return pid;
}

static void stop(pid_t pid)
{
    if (pid <= 0) return;
    kill(-pid, SIGTERM);
    int st;
    waitpid(pid, &st, 0);
}

static pid_t ws_server(const char *mark, char *url, size_t n)
{
    char *argv[] = {(char *)server_bin, "--listen", "ws://127.0.0.1:0", NULL};
    return spawn(argv, mark, NULL, url, n);
}

/* ---- a small HTTP server for http/request ------------------------------------------- */

static int http_fd = -1, http_port;
static pthread_t http_thread;
static volatile int http_stop;

#define STREAM_PART (100 * 1024)

static void *http_main(void *arg)
{
    (void)arg;
    while (!http_stop) {
        int c = accept(http_fd, NULL, NULL);
        if (c < 0) continue;
        char head[4096];
        size_t n = 0;
        while (n < sizeof head - 1 && !memmem(head, n, "\r\n\r\n", 4)) {
            ssize_t r = read(c, head + n, sizeof head - 1 - n);
            if (r <= 0) break;
            n += (size_t)r;
        }
        head[n] = 0;
        if (strncmp(head, "POST /buffered ", 15) == 0) {
            /* echo the body length and a header back */
            const char *body = "hello";
            char resp[512];
            int k = snprintf(resp, sizeof resp,
                             "HTTP/1.1 201 Created\r\nX-Test: one\r\nX-Multi: a\r\nX-Multi: b\r\n"
                             "Content-Length: %zu\r\nConnection: close\r\n\r\n%s",
                             strlen(body), body);
            if (write(c, resp, (size_t)k) < 0) {
            }
        } else {
            /* three chunks of STREAM_PART bytes each: 'a's, 'b's, 'c's */
            const char *h =
                "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n";
            if (write(c, h, strlen(h)) < 0) {
            }
            char *part = malloc(STREAM_PART);
            for (int i = 0; i < 3; i++) {
                char sz[32];
                int k = snprintf(sz, sizeof sz, "%x\r\n", STREAM_PART);
                memset(part, 'a' + i, STREAM_PART);
                if (write(c, sz, (size_t)k) < 0 || write(c, part, STREAM_PART) < 0 ||
                    write(c, "\r\n", 2) < 0)
                    break;
            }
            if (write(c, "0\r\n\r\n", 5) < 0) {
            }
            free(part);
        }
        close(c);
    }
    return NULL;
}

static void http_start(void)
{
    http_fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in a = {.sin_family = AF_INET};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t al = sizeof a;
    if (bind(http_fd, (struct sockaddr *)&a, sizeof a) != 0 || listen(http_fd, 8) != 0) abort();
    getsockname(http_fd, (struct sockaddr *)&a, &al);
    http_port = ntohs(a.sin_port);
    pthread_create(&http_thread, NULL, http_main, NULL);
}

static void http_end(void)
{
    http_stop = 1;
    shutdown(http_fd, SHUT_RDWR);
    close(http_fd);
    pthread_join(http_thread, NULL);
}

/* ---- helpers -------------------------------------------------------------------------- */

/* sh -c script on c with the server's environment; stdout into out; the exit code, or
 * a negative error (err filled). */
static int run(ec_client *c, const char *script, char *out, size_t n, ec_error *err)
{
    const char *argv[] = {"sh", "-c", script, NULL};
    ec_start_options o = {.argv = argv, .env_inherit = "all"};
    ec_process *p;
    out[0] = 0;
    int rc = ec_process_start(c, &o, &p, err);
    if (rc) return rc;
    size_t k = 0;
    int code = -1;
    for (;;) {
        ec_event ev;
        rc = ec_process_next_event(p, 30000, &ev, err);
        if (rc) {
            ec_process_free(p);
            return rc;
        }
        if (ev.type == EC_EVENT_OUTPUT && ev.stream == EC_STREAM_STDOUT && k + ev.len < n) {
            memcpy(out + k, ev.data, ev.len);
            out[k += ev.len] = 0;
        }
        if (ev.type == EC_EVENT_EXITED) code = ev.exit_code;
        if (ev.type == EC_EVENT_CLOSED) break;
    }
    ec_process_free(p);
    return code;
}

/* echo $MARK through c, as "MARK\n". */
static const char *mark_of(ec_client *c)
{
    static char out[128];
    ec_error e = {0};
    if (!c || run(c, "echo $MARK", out, sizeof out, &e) != 0) {
        snprintf(out, sizeof out, "(failed: %.100s)", e.message);
        return out;
    }
    out[strcspn(out, "\n")] = 0;
    return out;
}

static bool exists(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0;
}

static void write_text(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    fputs(text, f);
    fclose(f);
}

/* The contents of the first skill of a resolved root's discovery. */
static const char *skill_text(const ec_resolved_root *r)
{
    json_t *skills = json_object_get(r->discovery, "skills");
    json_t *instr = json_object_get(json_array_get(skills, 0), "instructions");
    return json_string_value(json_object_get(instr, "contents"));
}

/* ---- the world the steps share -------------------------------------------------------- */

/* The executors, their environments and the handles the steps below pass on. */
static struct {
    char url_a[128], url_b[128], url_broken[64], registry[128], token[40];
    pid_t srv_a, srv_b, cloud, remote_srv;
    char pidfile[200], script[600], fpath[200];
    const char *prog_argv[4];
    const char *prog_env[2];
    ec_client_options o_ws, o_stdio, o_remote, o_broken, o_ws_b;
    ec_envs *envs;
    ec_step *s1, *s3, *s6;
    ec_client *c_ws, *c_stdio, *c_remote, *c_ws_b;
    char plug[200], skill_dir[220], skill[240], manifest_dir[220], manifest[240];
    ec_selected_root sel[4];
} w;

static const char *const ids[] = {"ws", "stdio", "remote", "broken"};

/* The executor registers in its own time; until then the registry answers 404. Waits
 * for that (bounded) with a plain client, so the environment meets a registered
 * executor. */
static void wait_registered(void)
{
    ec_client_options probe_o = {.remote_url = w.registry,
                                 .environment_id = "env-remote",
                                 .bearer_token = w.token,
                                 .connect_timeout_ms = 5000};
    ec_client *probe_c = NULL;
    for (int64_t until = (int64_t)time(NULL) + 60; !probe_c && time(NULL) < until;) {
        ec_error pe = {0};
        if (ec_client_connect(&probe_o, &probe_c, &pe) != 0 && pe.code != 404) {
            fprintf(stderr, "remote executor: %s\n", pe.message);
            break;
        }
        if (!probe_c) poll(NULL, 0, 100);
    }
    CHECK(probe_c != NULL);
    ec_client_close(probe_c);
}

/* A ws:// URL of a port nobody listens on. */
static void make_broken_url(void)
{
    int probe = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in pa = {.sin_family = AF_INET};
    pa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t pl = sizeof pa;
    bind(probe, (struct sockaddr *)&pa, sizeof pa);
    getsockname(probe, (struct sockaddr *)&pa, &pl);
    snprintf(w.url_broken, sizeof w.url_broken, "ws://127.0.0.1:%d", ntohs(pa.sin_port));
    close(probe);
}

/* The two ws servers, the registry double, the remote executor behind it, the HTTP
 * server and the unreachable URL. */
static void start_executors(const char *python3, const char *fake_cloud)
{
    char cloud_line[256];
    w.srv_a = ws_server("ws-A", w.url_a, sizeof w.url_a);
    w.srv_b = ws_server("ws-B", w.url_b, sizeof w.url_b);
    snprintf(w.token, sizeof w.token, "tok-%d", (int)getpid());
    char *cloud_argv[] = {
        (char *)python3, (char *)fake_cloud, "--port", "0", "--token", w.token, NULL};
    w.cloud = spawn(cloud_argv, NULL, NULL, cloud_line, sizeof cloud_line);
    sscanf(cloud_line, "FAKE_CLOUD url=%127s", w.registry);
    CHECK(strncmp(w.registry, "http://", 7) == 0);
    char *remote_argv[] = {(char *)server_bin, "--remote",   w.registry,
                           "--environment-id", "env-remote", NULL};
    w.remote_srv = spawn(remote_argv, "remote", w.token, NULL, 0);
    http_start();
    wait_registered();
    make_broken_url();
}

/* The four environments added, and the adds a registry refuses. */
static void add_environments(void)
{
    snprintf(w.pidfile, sizeof w.pidfile, "%s/stdio.pid", tmp);
    snprintf(w.script, sizeof w.script, "echo $$ > %s; exec %s --listen stdio", w.pidfile,
             server_bin);
    w.prog_argv[0] = "sh";
    w.prog_argv[1] = "-c";
    w.prog_argv[2] = w.script;
    w.prog_env[0] = "MARK=stdio";

    w.envs = ec_envs_new();
    ec_error e = {0};
    w.o_ws = (ec_client_options){.url = w.url_a, .reconnect_timeout_ms = 5000};
    w.o_stdio = (ec_client_options){.program_argv = w.prog_argv, .program_env = w.prog_env};
    w.o_remote = (ec_client_options){.remote_url = w.registry,
                                     .environment_id = "env-remote",
                                     .bearer_token = w.token,
                                     .connect_timeout_ms = 30000,
                                     .reconnect_timeout_ms = 5000};
    w.o_broken = (ec_client_options){.url = w.url_broken, .connect_timeout_ms = 5000};
    CHECK(ec_envs_add(w.envs, "ws", &w.o_ws, false, &e) == 0);
    CHECK(ec_envs_add(w.envs, "stdio", &w.o_stdio, false, &e) == 0);
    CHECK(ec_envs_add(w.envs, "remote", &w.o_remote, false, &e) == 0);
    CHECK(ec_envs_add(w.envs, "broken", &w.o_broken, false, &e) == 0);
    CHECK(ec_envs_add(w.envs, "", &w.o_ws, false, &e) == -EC_ERR_USAGE);
    ec_client_options none = {0};
    CHECK(ec_envs_add(w.envs, "x", &none, false, &e) == -EC_ERR_USAGE);
}

/* Lazy: nothing connected and no program started before the first use; step 0 does not
 * wait, so every one is asked to start and none is captured. */
static void test_lazy(void)
{
    for (int i = 0; i < 4; i++)
        CHECK(ec_envs_state(w.envs, ids[i], NULL) == EC_ENV_IDLE);
    CHECK(ec_envs_state(w.envs, "nope", NULL) == EC_ENV_MISSING);
    CHECK(!exists(w.pidfile));

    ec_step *s0 = ec_envs_capture(w.envs, NULL, 0, 0);
    CHECK(ec_step_count(s0) == 4);
    for (int i = 0; i < 4; i++) {
        CHECK(strcmp(ec_step_id(s0, (size_t)i), ids[i]) == 0);
        CHECK(ec_step_state(s0, ids[i], NULL) == EC_ENV_STARTING);
        CHECK(ec_step_client(s0, ids[i]) == NULL);
    }
    ec_step_release(s0);
}

/* Step 1 waits: three ready, each reaching its own executor, the broken one failed
 * with its reason. Returns false when a handle the rest needs is missing. */
static bool test_first_step(void)
{
    w.s1 = ec_envs_capture(w.envs, ids, 4, 60000);
    const char *why = NULL;
    CHECK(ec_step_state(w.s1, "ws", NULL) == EC_ENV_READY);
    CHECK(ec_step_state(w.s1, "stdio", NULL) == EC_ENV_READY);
    CHECK(ec_step_state(w.s1, "remote", &why) == EC_ENV_READY);
    if (why) fprintf(stderr, "remote: %s\n", why);
    CHECK(ec_step_state(w.s1, "broken", &why) == EC_ENV_FAILED);
    CHECK(why && strstr(why, "cannot connect to 127.0.0.1"));
    CHECK(ec_step_client(w.s1, "broken") == NULL);
    ec_error r = {0};
    CHECK(ec_envs_state(w.envs, "broken", &r) == EC_ENV_FAILED && strstr(r.message, "refused"));
    CHECK(ec_envs_wait(w.envs, "broken", 1000, &r) == -EC_ERR_TRANSPORT);
    CHECK(exists(w.pidfile)); /* the program started on first use */

    w.c_ws = ec_step_client(w.s1, "ws");
    w.c_stdio = ec_step_client(w.s1, "stdio");
    w.c_remote = ec_step_client(w.s1, "remote");
    if (!w.c_ws || !w.c_stdio || !w.c_remote) {
        fprintf(stderr, "an environment is not ready; the rest cannot run\n");
        return false;
    }
    CHECK(strcmp(mark_of(w.c_ws), "ws-A") == 0);
    CHECK(strcmp(mark_of(w.c_stdio), "stdio") == 0);
    CHECK(strcmp(mark_of(w.c_remote), "remote") == 0);
    char out[256];
    ec_error e = {0};
    CHECK(run(w.c_stdio, "exit 7", out, sizeof out, &e) == 7);
    return true;
}

/* fs through the stdio and remote handles: one side writes, the other reads. */
static void test_fs_across(void)
{
    ec_error e = {0};
    snprintf(w.fpath, sizeof w.fpath, "%s/through-stdio.txt", tmp);
    CHECK(ec_fs_write_file(w.c_stdio, w.fpath, "over stdio\n", 11, &e) == 0);
    uint8_t *data = NULL;
    size_t len = 0;
    CHECK(ec_fs_read_file(w.c_remote, w.fpath, &data, &len, &e) == 0);
    CHECK(len == 11 && memcmp(data, "over stdio\n", 11) == 0);
    free(data);
}

/* http/request through the ws handle, buffered; a ws:// URL is refused. */
static void test_http_buffered(void)
{
    ec_error e = {0};
    char hurl[128];
    snprintf(hurl, sizeof hurl, "http://127.0.0.1:%d/buffered", http_port);
    ec_http_header hh[] = {{"content-type", "text/plain"}};
    ec_http_req rq = {.method = "POST",
                      .url = hurl,
                      .headers = hh,
                      .n_headers = 1,
                      .body = "ping",
                      .body_len = 4,
                      .timeout_ms = 10000};
    ec_http_resp resp;
    CHECK(ec_http_request(w.c_ws, &rq, &resp, &e) == 0);
    CHECK(resp.status == 201);
    CHECK(resp.body_len == 5 && memcmp(resp.body, "hello", 5) == 0);
    int multi = 0;
    for (size_t i = 0; i < resp.n_headers; i++) {
        if (strcmp(resp.headers[i].name, "x-test") == 0)
            CHECK(strcmp(resp.headers[i].value, "one") == 0);
        if (strcmp(resp.headers[i].name, "x-multi") == 0) multi++;
    }
    CHECK(multi == 2);
    ec_http_resp_clear(&resp);
    /* ws:// is no http URL */
    ec_http_req refused = {.url = w.url_broken + 0, .timeout_ms = 5000};
    CHECK(ec_http_request(w.c_ws, &refused, &resp, &e) == -EC_ERR_SERVER);
}

/* http/request through the stdio handle, streamed: every byte, in order, then the end. */
static void test_http_streamed(void)
{
    ec_error e = {0};
    char hurl[128];
    snprintf(hurl, sizeof hurl, "http://127.0.0.1:%d/stream", http_port);
    ec_http_req srq = {.url = hurl};
    ec_http_resp resp;
    ec_http_stream *hs = NULL;
    CHECK(ec_http_request_stream(w.c_stdio, &srq, &resp, &hs, &e) == 0);
    CHECK(resp.status == 200 && resp.body == NULL);
    ec_http_resp_clear(&resp);
    size_t got[3] = {0}, total = 0;
    bool done = false, order_ok = true;
    while (hs && !done) {
        const uint8_t *d;
        size_t dl;
        if (ec_http_stream_next(hs, 30000, &d, &dl, &done, &e) != 0) {
            fprintf(stderr, "stream: %s\n", e.message);
            CHECK(0);
            break;
        }
        for (size_t i = 0; i < dl; i++) {
            int k = d[i] - 'a';
            if (k < 0 || k > 2 || total + i < (size_t)k * STREAM_PART)
                order_ok = false;
            else
                got[k]++;
        }
        total += dl;
    }
    CHECK(done && order_ok && total == 3 * STREAM_PART);
    CHECK(got[0] == STREAM_PART && got[1] == STREAM_PART && got[2] == STREAM_PART);
    if (hs) {
        const uint8_t *d;
        size_t dl;
        CHECK(ec_http_stream_next(hs, 0, &d, &dl, &done, &e) == -EC_ERR_USAGE);
    }
    ec_http_stream_free(hs);
}

/* Capability roots through the captured handles; broken and unknown environments are
 * omitted, a relative path refused. */
static void test_roots(void)
{
    ec_error e = {0};
    snprintf(w.plug, sizeof w.plug, "%s/plug", tmp);
    snprintf(w.skill_dir, sizeof w.skill_dir, "%s/skills", w.plug);
    snprintf(w.skill, sizeof w.skill, "%s/SKILL.md", w.skill_dir);
    snprintf(w.manifest_dir, sizeof w.manifest_dir, "%s/.codex-plugin", w.plug);
    snprintf(w.manifest, sizeof w.manifest, "%s/plugin.json", w.manifest_dir);
    mkdir(w.plug, 0755);
    mkdir(w.skill_dir, 0755);
    mkdir(w.manifest_dir, 0755);
    write_text(w.manifest, "{\"name\":\"demo\"}");
    write_text(w.skill, "v1");
    w.sel[0] = (ec_selected_root){"demo@1", "ws", w.plug};
    w.sel[1] = (ec_selected_root){"st@1", "stdio", w.plug};
    w.sel[2] = (ec_selected_root){"br@1", "broken", w.plug};
    w.sel[3] = (ec_selected_root){"gone@1", "nope", w.plug};
    ec_resolved_root *rr = NULL;
    size_t nr = 0;
    CHECK(ec_step_resolve_roots(w.s1, w.sel, 4, &rr, &nr, &e) == 0);
    CHECK(e.kind == EC_OK);
    CHECK(nr == 2); /* broken and unknown environments are omitted */
    if (nr == 2) {
        CHECK(strcmp(rr[0].id, "demo@1") == 0 && rr[0].client == w.c_ws);
        CHECK(strcmp(rr[1].id, "st@1") == 0 && rr[1].client == w.c_stdio);
        CHECK(skill_text(&rr[0]) && strcmp(skill_text(&rr[0]), "v1") == 0);
        CHECK(json_is_object(json_object_get(rr[0].discovery, "plugin")));
        CHECK(strcmp(json_string_value(json_object_get(rr[1].discovery, "id")), "st@1") == 0);
    }
    ec_resolved_roots_free(rr, nr);
    ec_selected_root relative[] = {{"r", "ws", "plug"}};
    CHECK(ec_step_resolve_roots(w.s1, relative, 1, &rr, &nr, &e) == -EC_ERR_USAGE);
}

/* environment/add ws -> handle B, mid-step: this step keeps A; the next one right away
 * omits ws while B starts (or has B), never A; a later one has B once ready. Then the
 * roots' cache is by (environment, root): B is not asked, the contents stay until
 * forgotten. */
static void test_replace_mid_step(void)
{
    ec_error e = {0};
    w.o_ws_b = (ec_client_options){.url = w.url_b, .reconnect_timeout_ms = 5000};
    CHECK(ec_envs_add(w.envs, "ws", &w.o_ws_b, true, &e) == 0);
    CHECK(ec_step_client(w.s1, "ws") == w.c_ws);
    CHECK(strcmp(mark_of(w.c_ws), "ws-A") == 0);
    const char *const only_ws[] = {"ws"};
    ec_step *s2 = ec_envs_capture(w.envs, only_ws, 1, 0);
    ec_env_state st2 = ec_step_state(s2, "ws", NULL);
    CHECK(st2 == EC_ENV_STARTING || st2 == EC_ENV_READY);
    CHECK(ec_step_client(s2, "ws") != w.c_ws);
    CHECK(st2 == EC_ENV_STARTING ? ec_step_client(s2, "ws") == NULL
                                 : strcmp(mark_of(ec_step_client(s2, "ws")), "ws-B") == 0);
    w.s3 = ec_envs_capture(w.envs, only_ws, 1, 30000);
    w.c_ws_b = ec_step_client(w.s3, "ws");
    CHECK(w.c_ws_b && w.c_ws_b != w.c_ws);
    CHECK(strcmp(mark_of(w.c_ws_b), "ws-B") == 0);
    CHECK(strcmp(mark_of(w.c_ws), "ws-A") == 0); /* step 1 is still pinned to A */

    ec_resolved_root *rr = NULL;
    size_t nr = 0;
    write_text(w.skill, "v2");
    CHECK(ec_step_resolve_roots(w.s3, w.sel, 1, &rr, &nr, &e) == 0);
    CHECK(nr == 1 && rr[0].client == w.c_ws_b && skill_text(&rr[0]) &&
          strcmp(skill_text(&rr[0]), "v1") == 0);
    ec_resolved_roots_free(rr, nr);
    ec_envs_forget_roots(w.envs, "ws");
    CHECK(ec_step_resolve_roots(w.s3, w.sel, 1, &rr, &nr, &e) == 0);
    CHECK(nr == 1 && skill_text(&rr[0]) && strcmp(skill_text(&rr[0]), "v2") == 0);
    ec_resolved_roots_free(rr, nr);
    ec_step_release(w.s1); /* handle A is closed now */
    ec_step_release(s2);
}

/* A program killed under a ready handle: the call fails with how it died, the next
 * capture sees it failed, no retry happens behind our back, a retry on request starts
 * a new one. */
static void test_killed_program(void)
{
    ec_error e = {0}, r = {0};
    const char *why = NULL;
    char out[256];
    FILE *pf = fopen(w.pidfile, "r");
    int prog_pid = 0;
    CHECK(pf && fscanf(pf, "%d", &prog_pid) == 1);
    if (pf) fclose(pf);
    const char *const only_stdio[] = {"stdio"};
    ec_step *s4 = ec_envs_capture(w.envs, only_stdio, 1, 0);
    ec_client *c_dead = ec_step_client(s4, "stdio");
    CHECK(c_dead != NULL); /* nobody has used it since: still ready */
    CHECK(prog_pid > 0 && kill(prog_pid, SIGKILL) == 0);
    CHECK(run(c_dead, "true", out, sizeof out, &e) == -EC_ERR_TRANSPORT);
    CHECK(strstr(e.message, "killed by signal 9") != NULL);
    if (!strstr(e.message, "killed by signal 9")) fprintf(stderr, "got: %s\n", e.message);
    ec_step *s5 = ec_envs_capture(w.envs, only_stdio, 1, 0);
    CHECK(ec_step_state(s5, "stdio", &why) == EC_ENV_FAILED);
    CHECK(why && strstr(why, "killed by signal 9"));
    CHECK(ec_envs_state(w.envs, "stdio", &r) == EC_ENV_FAILED);
    ec_step_release(s5);
    w.s6 = ec_envs_capture(w.envs, only_stdio, 1, 30000);
    CHECK(ec_step_state(w.s6, "stdio", NULL) == EC_ENV_FAILED); /* no retry behind our back */
    ec_step_release(w.s6);
    CHECK(ec_envs_start(w.envs, "stdio", &e) == 0);
    CHECK(ec_envs_wait(w.envs, "stdio", 30000, &e) == 0);
    w.s6 = ec_envs_capture(w.envs, only_stdio, 1, 0);
    CHECK(strcmp(mark_of(ec_step_client(w.s6, "stdio")), "stdio") == 0);
    ec_step_release(s4);
}

/* Removal: gone from the registry, alive in the step that holds it; freeing the
 * registry while steps are held: they keep working. */
static void test_remove_and_free(void)
{
    ec_error e = {0};
    CHECK(ec_envs_remove(w.envs, "stdio", &e) == 0);
    CHECK(ec_envs_remove(w.envs, "stdio", &e) == -EC_ERR_USAGE);
    CHECK(ec_envs_state(w.envs, "stdio", NULL) == EC_ENV_MISSING);
    CHECK(ec_envs_wait(w.envs, "stdio", 0, &e) == -EC_ERR_USAGE);
    CHECK(strcmp(mark_of(ec_step_client(w.s6, "stdio")), "stdio") == 0);

    ec_envs_free(w.envs);
    CHECK(strcmp(mark_of(w.c_ws_b), "ws-B") == 0);
    ec_step_release(w.s3);
    ec_step_release(w.s6);
}

/* Nothing left behind: the executors stopped, the scratch files gone. */
static void clean_up(void)
{
    http_end();
    stop(w.remote_srv);
    stop(w.cloud);
    stop(w.srv_a);
    stop(w.srv_b);
    unlink(w.fpath);
    unlink(w.pidfile);
    unlink(w.skill);
    unlink(w.manifest);
    rmdir(w.skill_dir);
    rmdir(w.manifest_dir);
    rmdir(w.plug);
    rmdir(tmp);
}

int main(int argc, char **argv)
{
    if (argc < 4) {
        fprintf(stderr, "usage: test_ec_envs EXEC_SERVER PYTHON3 FAKE_CLOUD_PY\n");
        return 2;
    }
    server_bin = argv[1];
    signal(SIGPIPE, SIG_IGN);
    snprintf(tmp, sizeof tmp, "/tmp/ec-envs-XXXXXX");
    if (!mkdtemp(tmp)) abort();

    start_executors(argv[2], argv[3]);
    add_environments();
    test_lazy();
    if (!test_first_step()) EC_CHECK_EXIT("test_ec_envs");
    test_fs_across();
    test_http_buffered();
    test_http_streamed();
    test_roots();
    test_replace_mid_step();
    test_killed_program();
    test_remove_and_free();
    clean_up();
    EC_CHECK_EXIT("test_ec_envs");
}
