/* exec-client: the command-line client of exec-server, built on libexecclient.
 *
 *   exec-client [--url URL] run [--tty] [--cwd DIR] [--env K=V]... -- CMD ARGS...
 *   exec-client [--url URL] shell
 *   exec-client [--url URL] fs cat|put|ls|stat|rm|cp|mkdir|walk ...
 *   exec-client [--url URL] rpc [--raw]
 *   exec-client --remote REGISTRY_URL --environment-id ID COMMAND ...   (remote mode)
 *   exec-client --environment NAME COMMAND ...   (NAME from environments.toml)
 *
 * `run` behaves like `ssh host cmd` and `shell` like `ssh host` (cli_run.c says how,
 * and how it falls back against a server without our terminal extensions). Exit codes
 * of the client itself, one per class in every command (cli.h): 1 when what was asked
 * failed (a file or request error, local or remote), 2 when the command line or
 * configuration is wrong, 3 when the credentials are refused, 255 when the server
 * cannot be reached or the connection is lost (also for `run`, like ssh). */
#include "cli.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

/* --token-file: the token is the file's content, surrounding white space trimmed
 * (so it stays out of argv, which ps shows). A regular file that others may read is
 * refused as ssh refuses such an identity file (and the server such a token file):
 * one of ours open to group or others, or anyone's open to others. Returns 0, or
 * prints why and -1. */
static int read_token_file(const char *path, const char **out)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    uint8_t *data = NULL;
    size_t n = 0;
    bool eof;
    struct stat st;
    if (fd >= 0 && fstat(fd, &st) == 0 && S_ISREG(st.st_mode) &&
        ((st.st_uid == geteuid() && (st.st_mode & 077)) || (st.st_mode & 004))) {
        fprintf(stderr,
                "exec-client: --token-file %s is open to group or others (mode %04o), so other "
                "users of this host may read the token; it must be its owner's alone: run "
                "`chmod 600 %s`\n",
                path, (unsigned)(st.st_mode & 07777), path);
        close(fd);
        return -1;
    }
    if (fd < 0 || cli_slurp_max(fd, 65536, &data, &n, &eof) != 0) {
        fprintf(stderr, "exec-client: --token-file %s: %s\n", path, strerror(errno));
        if (fd >= 0) close(fd);
        return -1;
    }
    close(fd);
    size_t a = 0;
    while (a < n && (data[a] == ' ' || data[a] == '\t' || data[a] == '\n' || data[a] == '\r'))
        a++;
    while (n > a && (data[n - 1] == ' ' || data[n - 1] == '\t' || data[n - 1] == '\n' ||
                     data[n - 1] == '\r'))
        n--;
    if (n == a) {
        fprintf(stderr, "exec-client: --token-file %s: the file holds no token\n", path);
        free(data);
        return -1;
    }
    static char *tok; /* lives as long as the process */
    tok = strndup((const char *)data + a, n - a);
    memset(data, 0, n);
    free(data);
    *out = tok;
    return 0;
}

int main(int argc, char **argv)
{
    struct cli cli = {.url = getenv("EXEC_SERVER_URL"),
                      .token = getenv("EXEC_SERVER_TOKEN"),
                      .reconnect_ms = 30000,
                      .keepalive_ms = 5000};
    static const struct option longs[] = {{"url", required_argument, 0, 'u'},
                                          {"token", required_argument, 0, 'T'},
                                          {"timeout-ms", required_argument, 0, 'm'},
                                          {"reconnect-ms", required_argument, 0, 'R'},
                                          {"help", no_argument, 0, 'h'},
                                          {"version", no_argument, 0, 'V'},
                                          {"verbose", no_argument, 0, 'v'},
                                          {"ca-file", required_argument, 0, 'A'},
                                          {"remote", required_argument, 0, 'r'},
                                          {"environment-id", required_argument, 0, 'E'},
                                          {"liveness-ms", required_argument, 0, 'L'},
                                          {"token-file", required_argument, 0, 'F'},
                                          {"keepalive-ms", required_argument, 0, 'K'},
                                          {"environment", required_argument, 0, 'N'},
                                          {"environments", required_argument, 0, 'X'},
                                          {"connect-timeout", required_argument, 0, 'C'},
                                          {0, 0, 0, 0}};
    const char *token_file = NULL;
    int ch;
    opterr = 0; /* our one-line messages instead of getopt's */
    while ((ch = getopt_long(argc, argv, "+:hVv", longs, NULL)) != -1) {
        switch (ch) {
        case 'v': cli.verbose = true; break;
        case 'V': printf("exec-client %s (libexecclient)\n", EXEC_SERVER_VERSION); return 0;
        case 'A':
            cli.ca_file = optarg;
            cli.ca_given = true;
            break;
        case 'N': cli.environment = optarg; break;
        case 'X': cli.environments_file = optarg; break;
        case 'r': cli.remote = optarg; break;
        case 'E': cli.environment_id = optarg; break;
        case 'L': cli.liveness_ms = atoi(optarg); break;
        case 'K': cli.keepalive_ms = atoi(optarg); break;
        case 'u':
            cli.url = optarg;
            cli.url_given = true;
            break;
        case 'T':
            cli.token = optarg;
            token_file = NULL;
            cli.token_given = true;
            break;
        case 'F':
            token_file = optarg;
            cli.token_given = true;
            break;
        case 'm': cli.timeout_ms = atoi(optarg); break;
        case 'R': cli.reconnect_ms = atoi(optarg); break;
        case 'C': {
            char *end = NULL;
            double s = strtod(optarg, &end);
            if (end == optarg || *end || s < 0 || s > 86400)
                cli_usage_error(NULL, "--connect-timeout wants seconds (0-86400)");
            cli.connect_timeout_s = s > 0 && s < 1 ? 1 : (int)s;
            break;
        }
        case 'h': cli_usage(stdout); return 0;
        case ':': {
            char m[160];
            snprintf(m, sizeof m, "option `%.100s` needs a value", argv[optind - 1]);
            cli_usage_error(NULL, m);
        }
        default: cli_bad_option(NULL, argv[optind - 1]);
        }
    }
    if (optind >= argc) cli_usage_error(NULL, "no command given (run, shell, fs, ...)");
    /* The command and its arguments first: COMMAND --help and usage errors need no
     * server and no token. */
    int used;
    const struct cli_cmd_entry *e = cli_cmd_find(argc - optind, argv + optind, &used);
    struct cli_args args = {.help = !e->exec}; /* a group is found for its help only */
    if (e->exec) cli_args_parse(e, argc - optind - used + 1, argv + optind + used - 1, &args);
    if (args.help) {
        cli_command_help(stdout, e);
        cli_args_free(&args);
        return 0;
    }
    if (token_file && read_token_file(token_file, &cli.token) != 0) {
        cli_args_free(&args);
        return EXIT_USAGE;
    }
    /* Which server is checked when a command first connects (cli_connect_or_die). */
    int rc = e->exec(&cli, &args);
    cli_args_free(&args);
    ec_client_close(cli.c);
    cli_env_done(&cli);
    return rc;
}
