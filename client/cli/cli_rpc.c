/* cli_rpc: `exec-client rpc`: JSON-RPC lines from stdin to the server, every message
 * back on stdout; exit 1 when a reply was an error, 255 when the connection is lost
 * with requests unanswered. */
#include "cli.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static int64_t mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

struct rpc_state {
    long outstanding; /* requests sent whose reply has not been printed yet */
    bool error_seen;  /* a reply was a JSON-RPC error: exit 1, as documented */
};

static void rpc_print(void *ud, const char *text, size_t len)
{
    struct rpc_state *st = ud;
    fwrite(text, 1, len, stdout);
    fputc('\n', stdout);
    fflush(stdout);
    json_t *m = json_loadb(text, len, 0, NULL);
    if (m && json_object_get(m, "id") && !json_object_get(m, "method")) {
        st->outstanding--;
        if (json_object_get(m, "error")) st->error_seen = true;
    }
    json_decref(m);
}

static int cmd_rpc(struct cli *cli, const struct cli_args *a)
{
    bool raw = cli_args_has(a, 'r');
    cli_connect_or_die(cli, raw, false);
    struct rpc_state st = {0};
    ec_client_set_message_hook(cli->c, rpc_print, &st);
    /* The session id is for -v (cli_connect_or_die prints it): every line on stderr of
     * a scripted call is one more to filter. */
    char *line = NULL;
    size_t cap = 0;
    ec_error e = {0};
    bool in_open = true;
    int64_t drain_deadline = 0;
    for (;;) {
        struct pollfd pfd[2] = {{.fd = ec_client_fd(cli->c), .events = POLLIN},
                                {.fd = in_open ? STDIN_FILENO : -1, .events = POLLIN}};
        if (pfd[0].fd < 0) break;
        int timeout = -1;
        if (!in_open) {
            if (st.outstanding <= 0) break;
            timeout = (int)(drain_deadline - mono_ms());
            if (timeout <= 0) break;
        }
        int pr = poll(pfd, 2, timeout);
        if (pr < 0 && errno != EINTR) break;
        if (pr > 0 && pfd[0].revents) {
            if (ec_client_process_ready(cli->c, &e) != 0) {
                fprintf(stderr, "exec-client: %s\n", e.message);
                return st.outstanding > 0 ? EXIT_CONN : st.error_seen ? EXIT_FAILED : 0;
            }
        }
        if (pr > 0 && pfd[1].revents) {
            ssize_t n = getline(&line, &cap, stdin);
            if (n < 0) {
                in_open = false;
                drain_deadline = mono_ms() + (cli->timeout_ms > 0 ? cli->timeout_ms : 10000);
                continue;
            }
            while (n > 0 && (line[n - 1] == '\n' || line[n - 1] == '\r'))
                line[--n] = 0;
            if (n == 0) continue;
            json_t *m = json_loadb(line, (size_t)n, 0, NULL);
            if (m && json_object_get(m, "id") && json_object_get(m, "method")) st.outstanding++;
            json_decref(m);
            if (ec_client_send_text(cli->c, line, (size_t)n, &e) != 0) {
                fprintf(stderr, "exec-client: %s\n", e.message);
                free(line);
                return EXIT_CONN;
            }
        }
    }
    free(line);
    return st.error_seen ? EXIT_FAILED : 0;
}

static const struct option rpc_longs[] = {{"raw", no_argument, 0, 'r'}, {0, 0, 0, 0}};
const struct cli_cmd_entry cli_rpc_entry = {
    .name = "rpc",
    .usage = "rpc [--raw]",
    .summary = "send JSON-RPC lines from stdin, print every message back (--raw: skip the "
               "initialize handshake)",
    .text = "Sends JSON-RPC lines from stdin and prints every message back; exits 1 when a "
            "reply\nwas an error (--raw: skip the initialize handshake).\n",
    .flags = "+",
    .longs = rpc_longs,
    .upper = 0,
    .bad_option = "rpc: unexpected argument `%s`",
    .exec = cmd_rpc,
};
