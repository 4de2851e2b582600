/* config: command line -> server_config (see config.h). The per-option checks come
 * from the table in options.c (through core/options.c); this file holds the rules between options,
 * each with the wording the reference (or our tests) use. */
#include "server/config.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <getopt.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

#include <jansson.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/env_vars.h"
#include "remote/aws_profile.h"
#include "remote/remote.h"
#include "remote/rv_ws.h"
#include "server/codex_config.h"
#include "transport/auth.h"
#include "transport/jwt.h"
#include "transport/tls.h"
#include "util/hostaddr.h"
#include "util/mem.h"

struct server_config server_config;
static struct aws_profile aws_files; /* --aws-sigv4 keys read from the shared files */
/* Where each option was last given on the command line (1, 2, ...), 0 for never. */
static unsigned given[64];
static unsigned given_count;

#define C server_config

__attribute__((format(printf, 1, 2))) static void usage_error(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("exec-server: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}

/* The position of an option on the command line, 0 when it was not given. */
static unsigned given_at(const char *name)
{
    const struct opt_spec *o = options_find(&server_options, name);
    if (!o) abort(); /* a misspelt name in our own code */
    return given[o - server_options.rows];
}

bool config_given(const char *name)
{
    return given_at(name) != 0;
}

/* getopt_long's table and short-option string, from the option table. */
static void build_getopt(struct option *longs, char *shorts, size_t n)
{
    size_t k = 0;
    shorts[k++] = '+'; /* stop at the first non-option */
    shorts[k++] = ':'; /* a missing value is reported as ':' */
    for (size_t i = 0; i < server_options.count; i++) {
        const struct opt_spec *o = &server_options.rows[i];
        longs[i] =
            (struct option){o->name, o->meta ? required_argument : no_argument, NULL, 256 + (int)i};
        if (o->short_name && k + 3 < n) {
            shorts[k++] = o->short_name;
            if (o->meta) shorts[k++] = ':';
        }
    }
    longs[server_options.count] = (struct option){0};
    shorts[k] = '\0';
}

/* The row getopt_long returned ch for (a long option's code or a short letter). */
static const struct opt_spec *row_of(int ch)
{
    const struct opt_spec *rows = server_options.rows;
    if (ch >= 256 && ch < 256 + (int)server_options.count) return &rows[ch - 256];
    for (size_t i = 0; i < server_options.count; i++)
        if (rows[i].short_name == ch) return &rows[i];
    return NULL;
}

int config_parse(int argc, char **argv)
{
    struct option longs[sizeof given / sizeof given[0] + 1];
    char shorts[32], err[512];
    if (server_options.count > sizeof given / sizeof given[0]) abort();
    config_free();
    memset(&C, 0, sizeof C);
    memset(given, 0, sizeof given);
    given_count = 0;
    options_reset(&server_options);
    build_getopt(longs, shorts, sizeof shorts);
    /* `exec-server forward ...`: the same parser over the rest. */
    C.forward = argc > 1 && strcmp(argv[1], "forward") == 0;
    unsigned mode = C.forward ? OPT_FORWARD : OPT_SERVE;
    if (C.forward) {
        argv[1] = argv[0];
        argv++;
        argc--;
    }
    opterr = 0; /* our own messages, in the words the tests and users know */
    optind = 0; /* a full reinitialisation (config_parse may run more than once) */
    int ch;
    while ((ch = getopt_long(argc, argv, shorts, longs, NULL)) != -1) {
        if (ch == ':') {
            /* The flags the reference's argument parser checks get its wording. */
            const struct opt_spec *m = row_of(optopt);
            if (m && m->style == OPT_CLAP)
                usage_error("a value is required for '--%s <%s>' but none was supplied", m->name,
                            m->meta);
            else
                usage_error("%s needs a value (see --help)", argv[optind - 1]);
            return 2;
        }
        const struct opt_spec *o = ch == '?' ? NULL : row_of(ch);
        if (!o) {
            usage_error("unknown argument `%s` (see --help)", argv[optind - 1]);
            return 2;
        }
        if (!(o->modes & mode)) {
            usage_error(mode == OPT_SERVE ? "--%s is an option of `exec-server forward`"
                                          : "--%s is not an option of `exec-server forward`",
                        o->name);
            return 2;
        }
        if (strcmp(o->name, "help") == 0) {
            server_options_help(stdout, mode);
            return 0;
        }
        if (strcmp(o->name, "version") == 0) {
            printf("exec-server %s\n", EXEC_SERVER_VERSION);
            return 0;
        }
        if (options_store(o, optarg, err, sizeof err) < 0) {
            usage_error("%s", err);
            return 2;
        }
        given[o - server_options.rows] = ++given_count;
    }
    if (optind < argc) {
        usage_error("unknown argument `%s` (see --help)", argv[optind]);
        return 2;
    }
    return options_apply_env(&server_options, given) < 0 ? 2 : CONFIG_OK;
}

/* ---- validation ---- */

/* --environment-id: what goes into the registry's URL path. 0.169.0 interpolates it
 * raw; ours keeps the older upstream rule that stops path injection. */
static bool environment_id_ok(const char *id)
{
    size_t n = strlen(id);
    return n >= 1 && n <= 256 &&
           strspn(id, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-") == n;
}

/* A flag value trimmed of blanks, or NULL when nothing is left (as the reference). */
static const char *trimmed(const char *v, char *buf, size_t n)
{
    if (!v) return NULL;
    while (*v == ' ' || *v == '\t')
        v++;
    snprintf(buf, n, "%s", v);
    size_t len = strlen(buf);
    while (len && (buf[len - 1] == ' ' || buf[len - 1] == '\t'))
        buf[--len] = 0;
    return len ? buf : NULL;
}

/* --registration-bearer-stdin: one LF-terminated line of at most 16 KiB (a CR
 * before the LF is dropped), read before the loop starts; no blank or padded
 * value. The reference's rules and texts (docs/REMOTE.md §8.1). Returns a
 * malloc'd token or NULL after printing why. */
static char *read_bearer_line(void)
{
    char *line = NULL;
    size_t cap = 0;
    ssize_t n = getline(&line, &cap, stdin);
    if (n <= 0 || line[n - 1] != '\n' || n - 1 > 16384) {
        free(line);
        fprintf(stderr, "exec-server: expected a newline-terminated registration bearer of at "
                        "most 16 KiB\n");
        return NULL;
    }
    line[--n] = '\0';
    if (n && line[n - 1] == '\r') line[--n] = '\0';
    bool bad =
        n == 0 || line[0] == ' ' || line[0] == '\t' || line[n - 1] == ' ' || line[n - 1] == '\t';
    for (ssize_t i = 0; i < n && !bad; i++)
        bad = (unsigned char)line[i] < 0x20 || line[i] == 0x7f;
    if (bad) {
        memset(line, 0, (size_t)n);
        free(line);
        fprintf(stderr, "exec-server: invalid registration bearer\n");
        return NULL;
    }
    return line;
}

/* Parses ws://IP:PORT (or wss://). Returns 0 and fills host/port, or -EINVAL. */
static int parse_ws_url(const char *url, char *host, size_t hostlen, int *port)
{
    const char *p = strchr(url, ':') + 3; /* after "ws://" or "wss://" */
    const char *colon;
    if (*p == '[') {
        const char *close = strchr(p, ']');
        if (!close || close[1] != ':') return -EINVAL;
        size_t n = (size_t)(close - p - 1);
        if (n == 0 || n >= hostlen) return -EINVAL;
        memcpy(host, p + 1, n);
        host[n] = '\0';
        colon = close + 1;
        struct sockaddr_in6 a6;
        if (uv_ip6_addr(host, 0, &a6) != 0) return -EINVAL;
    } else {
        colon = strrchr(p, ':');
        if (!colon) return -EINVAL;
        size_t n = (size_t)(colon - p);
        if (n == 0 || n >= hostlen) return -EINVAL;
        memcpy(host, p, n);
        host[n] = '\0';
        if (strchr(host, ':') || strchr(host, '/')) return -EINVAL;
        /* A dotted quad, or a name as sshd's ListenAddress takes: its address is
         * looked up once, here (validate_listen). */
    }
    const char *d = colon + 1;
    if (!*d) return -EINVAL;
    long v = 0;
    for (; *d; d++) {
        if (!isdigit((unsigned char)*d)) return -EINVAL;
        v = v * 10 + (*d - '0');
        if (v > 65535) return -EINVAL;
    }
    *port = (int)v;
    return 0;
}

/* The rules 0.169.0's argument parser enforces between the remote-mode flags, in
 * its words (exit 2). */
static int validate_relations(void)
{
    /* The ways to authenticate to the registry exclude each other; clap names the
     * first two given, in command-line order. */
    static const char *const ways[] = {"registration-bearer-stdin", "executor-credential-stdin",
                                       "chatgpt-token-stdin", "use-agent-identity-auth",
                                       "aws-sigv4"};
    const char *first = NULL, *second = NULL;
    unsigned at1 = 0, at2 = 0;
    for (size_t i = 0; i < sizeof ways / sizeof ways[0]; i++) {
        unsigned at = given_at(ways[i]);
        if (!at) continue;
        if (!at1 || at < at1) {
            second = first, at2 = at1;
            first = ways[i], at1 = at;
        } else if (!at2 || at < at2) {
            second = ways[i], at2 = at;
        }
    }
    if (second) {
        usage_error("the argument '--%s' cannot be used with '--%s'", first, second);
        return 2;
    }
    if (C.chatgpt_account_id && !C.chatgpt_token_stdin) {
        usage_error("--chatgpt-account-id requires --chatgpt-token-stdin");
        return 2;
    }
    if (C.aws_profile && !C.aws_sigv4) {
        usage_error("--aws-profile requires --aws-sigv4");
        return 2;
    }
    static const char *const need_remote[] = {"chatgpt-token-stdin", "executor-credential-stdin",
                                              "use-agent-identity-auth"};
    for (size_t i = 0; i < sizeof need_remote / sizeof need_remote[0]; i++)
        if (config_given(need_remote[i]) && !C.remote_url) {
            usage_error("--%s requires --remote URL and --environment-id ID", need_remote[i]);
            return 2;
        }
    return CONFIG_OK;
}

/* -c, --enable, --disable, --strict-config (server/codex_config.c). */
static int validate_codex(void)
{
    int r =
        codex_config_check(&C.codex_overrides, &C.codex_enable, &C.codex_disable, C.strict_config);
    return r ? r : CONFIG_OK;
}

/* `exec-server forward`: the destination and the registration it needs. */
static int validate_forward(void)
{
    if (!C.forward) return CONFIG_OK;
    struct rv_ws_url cu;
    if (!C.connect_url) {
        usage_error("forward requires --connect ws://HOST:PORT");
        return 2;
    }
    if (rv_ws_parse_url(C.connect_url, &cu) < 0) {
        usage_error("invalid --connect URL `%s`; expected ws://HOST:PORT or wss://HOST:PORT",
                    C.connect_url);
        return 2;
    }
    if (!C.remote_url) {
        usage_error("forward requires --remote URL and --environment-id ID");
        return 2;
    }
    return CONFIG_OK;
}

/* --aws-sigv4's keys: the environment's (AWS_ACCESS_KEY_ID, ...) unless --aws-profile
 * names a profile; else the shared files' profile (AWS_PROFILE, or default). Returns
 * CONFIG_OK or an exit status. */
static int resolve_aws_keys(void)
{
    const char *ak = env_vars.aws_access_key_id, *sk = env_vars.aws_secret_access_key;
    const char *name = C.aws_profile;
    if (!name && ak && *ak && sk && *sk) {
        C.aws_access = ak;
        C.aws_secret = sk;
        C.aws_token = env_vars.aws_session_token;
    }
    if (!name)
        name = env_vars.aws_profile && *env_vars.aws_profile ? env_vars.aws_profile : "default";
    char files[2200];
    aws_profile_load(name, &aws_files, files, sizeof files);
    if (!C.aws_access && aws_files.found && !(aws_files.access_key && aws_files.secret_key)) {
        if (aws_files.indirect) {
            usage_error("AWS profile `%s` gets its credentials through %s, which this "
                        "exec-server does not support: only static keys (aws_access_key_id, "
                        "aws_secret_access_key, aws_session_token) are read",
                        name, aws_files.indirect);
            return 1;
        }
        if (C.aws_profile) {
            usage_error("AWS profile `%s` has no aws_access_key_id and aws_secret_access_key "
                        "in %s",
                        name, files);
            return 1;
        }
    }
    if (C.aws_profile && !aws_files.found) {
        usage_error("AWS profile `%s` not found in %s", name, files);
        return 1;
    }
    if (!C.aws_access) {
        C.aws_access = aws_files.access_key;
        C.aws_secret = aws_files.secret_key;
        C.aws_token = aws_files.session_token;
    }
    if (!C.aws_region || !*C.aws_region) C.aws_region = env_vars.aws_region;
    if (!C.aws_region || !*C.aws_region) C.aws_region = env_vars.aws_default_region;
    if (!C.aws_region || !*C.aws_region) C.aws_region = aws_files.region;
    return CONFIG_OK;
}

/* --remote-transport direct with --aws-sigv4 (0.169.0 requires one with the other). */
static int validate_sigv4(void)
{
    C.direct = C.remote_transport == 1;
    if (!C.direct && !C.aws_sigv4) return CONFIG_OK;
    if (!C.direct) {
        usage_error("--aws-sigv4 signs `--remote-transport direct` requests only");
        return 2;
    }
    if (!C.aws_sigv4) {
        usage_error("--remote-transport direct requires --aws-sigv4");
        return 2;
    }
    if (C.forward) {
        usage_error("forward supports the noise transport only");
        return 2;
    }
    int r = resolve_aws_keys();
    if (r != CONFIG_OK) return r;
    if (!C.aws_access || !*C.aws_access || !C.aws_secret || !*C.aws_secret) {
        usage_error("--aws-sigv4 needs AWS credentials: set AWS_ACCESS_KEY_ID and "
                    "AWS_SECRET_ACCESS_KEY (and AWS_SESSION_TOKEN for temporary ones), or "
                    "give --aws-profile a profile with static keys");
        return 1;
    }
    if (!C.aws_region || !*C.aws_region) {
        usage_error("--aws-sigv4 needs a region: --aws-region, AWS_REGION, "
                    "AWS_DEFAULT_REGION or the profile's region");
        return 1;
    }
    if (!*C.aws_service) {
        usage_error("--aws-service must not be empty");
        return 2;
    }
    return CONFIG_OK;
}

/* --chatgpt-token-stdin: one line holding a JWT whose account (its claim or
 * --chatgpt-account-id) goes beside it. The reference's rules and texts; the 16 KiB
 * bound is ours (0.169.0's is not known). */
static int read_chatgpt_token(const char *url)
{
    const char *h = url + 8;
    size_t authority = strcspn(h, "/?#");
    struct stat st;
    if (strncmp(url, "https://", 8) != 0 || memchr(h, '@', authority) || strchr(url, '#')) {
        usage_error("ChatGPT token registry URLs must use HTTPS without userinfo or fragments");
        return 1;
    }
    if (fstat(STDIN_FILENO, &st) < 0 || !(S_ISFIFO(st.st_mode) || S_ISSOCK(st.st_mode))) {
        usage_error("ChatGPT token stdin must be a pipe or socket");
        return 1;
    }
    char *line = NULL;
    size_t cap = 0;
    ssize_t n = getline(&line, &cap, stdin);
    json_t *claims = NULL;
    const char *why = NULL, *claim = NULL, *flag = C.chatgpt_account_id;
    if (n <= 0 || line[n - 1] != '\n' || n - 1 > 16384) {
        why = "expected a bounded, newline-terminated ChatGPT access token";
    } else {
        line[--n] = '\0';
        if (n && line[n - 1] == '\r') line[--n] = '\0';
        claims = jwt_claims(line, (size_t)n);
        claim = json_string_value(json_object_get(
            json_object_get(claims, "https://api.openai.com/auth"), "chatgpt_account_id"));
        if (!claims)
            why = "invalid ChatGPT access token";
        else if (claim && *claim && flag && strcmp(claim, flag) != 0)
            why = "--chatgpt-account-id does not match the token";
        else if (!(claim && *claim) && !(flag && *flag))
            why = "token has no ChatGPT account ID; supply --chatgpt-account-id";
    }
    if (!why) {
        C.chatgpt_account = xstrdup(claim && *claim ? claim : flag);
        for (const char *p = C.chatgpt_account; *p && !why; p++)
            if ((unsigned char)*p < 0x20 || *p == 0x7f)
                why = "ChatGPT account id is not a valid HTTP header";
    }
    json_decref(claims);
    if (why) {
        if (line) memset(line, 0, cap);
        free(line);
        usage_error("%s", why);
        return 1;
    }
    C.bearer = line;
    return CONFIG_OK;
}

/* --use-agent-identity-auth: the reference's first check, then ours. */
static int refuse_agent_identity(void)
{
    const char *t = env_vars.codex_access_token;
    if (!t || !*t) {
        usage_error("CODEX_ACCESS_TOKEN is required when --use-agent-identity-auth is set");
        return 1;
    }
    usage_error("--use-agent-identity-auth is not supported by this exec-server: Agent "
                "Identity auth registers an Agent task with the backend and signs each "
                "registry request with that task's key, an exchange that is not public; use "
                "--registration-bearer-stdin or CODEX_API_KEY (docs/FLAGS.md)");
    return 1;
}

/* The registry bearer: SigV4 instead for direct, else the stdin line or
 * CODEX_API_KEY (only where the reference allows an API key). */
static int resolve_bearer(const char *url)
{
    const char *key = env_vars.codex_api_key;
    if (C.direct) {
        /* The base must be https or loopback http. */
        if (strncmp(url, "http://", 7) == 0 && !remote_api_key_url_allowed(url)) {
            usage_error("--remote-transport direct needs an https:// registry URL (or http:// "
                        "to a loopback host)");
            return 2;
        }
    } else if (C.credential_stdin) {
        usage_error("--executor-credential-stdin is not supported by this exec-server: the "
                    "format of the rotating executor credential frames codex 0.169.0 reads "
                    "is not public; use --registration-bearer-stdin or CODEX_API_KEY "
                    "(docs/FLAGS.md)");
        return 1;
    } else if (C.agent_identity) {
        return refuse_agent_identity();
    } else if (C.chatgpt_token_stdin) {
        return read_chatgpt_token(url);
    } else if (C.bearer_stdin) {
        C.bearer = read_bearer_line();
        if (!C.bearer) return 1;
    } else if (key && *key) {
        /* The reference keeps an OpenAI key away from other hosts; a token of our own
         * registry (docs/FLEET.md) is no OpenAI key and goes to the registry it is for. */
        if (!remote_api_key_url_allowed(url) && strncmp(key, "exrt_", 5) != 0) {
            usage_error("remote exec-server API-key authentication is restricted to HTTPS "
                        "openai.com and openai.org hosts and subdomains or loopback hosts");
            return 1;
        }
        C.bearer = xstrdup(key);
    } else {
        usage_error("remote exec-server registration requires a bearer: use "
                    "--registration-bearer-stdin or set CODEX_API_KEY");
        return 1;
    }
    return CONFIG_OK;
}

/* --remote and its companions. */
static int validate_remote(void)
{
    if (!C.remote_url && !C.environment_id && !C.bearer_stdin && !C.remote_name) return CONFIG_OK;
    const char *u = trimmed(C.remote_url, C.remote_buf, sizeof C.remote_buf);
    const char *e = trimmed(C.environment_id, C.env_id_buf, sizeof C.env_id_buf);
    if (!u) {
        usage_error("--environment-id, --name and --registration-bearer-stdin require "
                    "--remote URL");
        return 2;
    }
    if (!e) {
        usage_error("--remote requires a non-empty --environment-id");
        return 2;
    }
    if (strncmp(u, "http://", 7) != 0 && strncmp(u, "https://", 8) != 0) {
        usage_error("invalid --remote URL `%s`; expected http:// or https://", u);
        return 2;
    }
    if (config_given("listen") && strncmp(C.listen_url, "ws://", 5) != 0) {
        usage_error("with --remote, --listen may only be a local ws://IP:PORT endpoint");
        return 2;
    }
    if (!environment_id_ok(e)) {
        usage_error("invalid --environment-id `%s`; expected 1 to 256 characters of A-Z, a-z, "
                    "0-9, `_` and `-`",
                    e);
        return 2;
    }
    int r = resolve_bearer(u);
    if (r != CONFIG_OK) return r;
    C.remote_mode = true;
    C.remote_url = u;
    C.environment_id = e;
    return CONFIG_OK;
}

/* --listen and the TLS files. */
static int validate_listen(void)
{
    const char *url = C.listen_url;
    C.stdio_mode = strcmp(url, "stdio") == 0 || strcmp(url, "stdio://") == 0;
    bool tls_files = C.tls_cert || C.tls_key;
    if (C.stdio_mode) {
        if (!tls_files) return CONFIG_OK;
        usage_error("--tls-cert and --tls-key need a `wss://` --listen URL");
        return 2;
    }
    bool wss = strncmp(url, "wss://", 6) == 0;
    if (strncmp(url, "ws://", 5) != 0 && !wss) {
        usage_error("unsupported --listen URL `%s`; expected `ws://IP:PORT`, `wss://IP:PORT` "
                    "or `stdio`",
                    url);
        return 2;
    }
    if (wss != tls_files || (wss && !(C.tls_cert && C.tls_key))) {
        usage_error("%s", wss ? "`wss://` needs --tls-cert FILE and --tls-key FILE"
                              : "--tls-cert and --tls-key need a `wss://` --listen URL");
        return 2;
    }
    char err[800];
    if (wss && tls_server_configure(C.tls_cert, C.tls_key, err, sizeof err) < 0) {
        usage_error("%s", err);
        return 2;
    }
    if (parse_ws_url(url, C.host, sizeof C.host, &C.port) < 0) {
        usage_error("invalid websocket --listen URL `%s`; expected `ws://HOST:PORT`", url);
        return 2;
    }
    char addr[INET6_ADDRSTRLEN], why[300];
    if (hostaddr_numeric(C.host, addr, sizeof addr, why, sizeof why) < 0) {
        usage_error("--listen %s: %s", url, why);
        return 2;
    }
    snprintf(C.host, sizeof C.host, "%s", addr);
    return CONFIG_OK;
}

/* --ws-auth signed-bearer-token: the JWT check. */
static int configure_jwt(void)
{
    if (C.ws_token_file || C.ws_token_sha256) {
        usage_error("`--ws-token-file` and `--ws-token-sha256` require `--ws-auth "
                    "capability-token`, not `signed-bearer-token`");
        return 2;
    }
    if (!C.ws_secret_file) {
        usage_error("`--ws-shared-secret-file` is required when `--ws-auth "
                    "signed-bearer-token` is set");
        return 2;
    }
    /* Relative to the directory the server starts in, like every other file option
     * (--ws-token-file, --tls-cert): made absolute once, so a SIGHUP re-read finds it. */
    static char abs_secret[4096];
    if (C.ws_secret_file[0] != '/') {
        char cwd[2048];
        if (!getcwd(cwd, sizeof cwd)) {
            usage_error("--ws-shared-secret-file %s: cannot resolve a relative path",
                        C.ws_secret_file);
            return 2;
        }
        snprintf(abs_secret, sizeof abs_secret, "%s/%s", cwd, C.ws_secret_file);
        C.ws_secret_file = abs_secret;
    }
    char ib[512], ab[512], err[600];
    if (auth_configure_jwt(C.ws_secret_file, trimmed(C.ws_issuer, ib, sizeof ib),
                           trimmed(C.ws_audience, ab, sizeof ab), (int64_t)C.ws_skew, err,
                           sizeof err) < 0) {
        usage_error("%s", err);
        return 2;
    }
    return CONFIG_OK;
}

/* The --ws-* flags: the reference's rules and texts. */
static int configure_auth(void)
{
    bool jwt_flags = C.ws_secret_file || C.ws_issuer || C.ws_audience ||
                     config_given("ws-max-clock-skew-seconds");
    if (C.ws_auth < 0) {
        if (!C.ws_token_file && !C.ws_token_sha256 && !jwt_flags) return CONFIG_OK;
        usage_error("websocket auth flags require `--ws-auth capability-token` or `--ws-auth "
                    "signed-bearer-token`");
        return 2;
    }
    if (C.ws_auth == 1) return configure_jwt();
    if (jwt_flags) {
        usage_error("`--ws-shared-secret-file`, `--ws-issuer`, `--ws-audience`, and "
                    "`--ws-max-clock-skew-seconds` require `--ws-auth signed-bearer-token`");
        return 2;
    }
    if (C.ws_token_file && C.ws_token_sha256) {
        usage_error("`--ws-token-file` and `--ws-token-sha256` are mutually exclusive");
        return 2;
    }
    struct auth_key key;
    char err[512];
    if (C.ws_token_file) {
        if (auth_key_from_file(C.ws_token_file, &key, err, sizeof err) < 0) {
            usage_error("%s", err);
            return 2;
        }
    } else if (C.ws_token_sha256) {
        if (auth_key_from_hex(C.ws_token_sha256, &key) < 0) {
            usage_error("--ws-token-sha256 must be a 64-character hex SHA-256 digest");
            return 2;
        }
    } else {
        usage_error("`--ws-token-file` or `--ws-token-sha256` is required when `--ws-auth "
                    "capability-token` is set");
        return 2;
    }
    auth_configure(&key);
    auth_set_token_file(C.ws_token_file); /* SIGHUP re-reads it */
    return CONFIG_OK;
}

bool config_host_is_loopback(const char *host)
{
    struct in_addr a4;
    struct in6_addr a6;
    if (inet_pton(AF_INET, host, &a4) == 1) return (ntohl(a4.s_addr) >> 24) == 127;
    if (inet_pton(AF_INET6, host, &a6) == 1) {
        if (IN6_IS_ADDR_LOOPBACK(&a6)) return true;
        return IN6_IS_ADDR_V4MAPPED(&a6) && a6.s6_addr[12] == 127;
    }
    return false;
}

/* Anyone who reaches a listener without auth runs commands as this user: beyond
 * loopback that takes an explicit --allow-unauthenticated. */
static int validate_exposure(void)
{
    if (C.stdio_mode || (C.remote_mode && !config_given("listen")) || auth_enabled() ||
        config_host_is_loopback(C.host) || C.allow_unauthenticated)
        return CONFIG_OK;
    usage_error("refusing to listen on %s without --ws-auth: anyone who can reach it could "
                "run processes and read and write files as this user. Use --ws-auth "
                "capability-token --ws-token-file FILE, listen on 127.0.0.1, or pass "
                "--allow-unauthenticated to accept that",
                C.listen_url);
    return 2;
}

/* The audit options: the variables stand in for the two paths; the flags need the
 * option they qualify. */
static int validate_audit(void)
{
    if (!C.audit_log) C.audit_log = env_vars.audit_log;
    if (!C.record_dir) C.record_dir = env_vars.record_dir;
    static const struct {
        const char *flag;
        bool *set;
        const char *needs;
    } rules[] = {{"audit-required", &C.audit_required, "--audit-log PATH"},
                 {"audit-fs-reads", &C.audit_fs_reads, "--audit-log PATH"},
                 {"record-input", &C.record_input, "--record-dir DIR"}};
    for (size_t i = 0; i < sizeof rules / sizeof rules[0]; i++) {
        bool have = rules[i].needs[2] == 'a' ? C.audit_log != NULL : C.record_dir != NULL;
        if (*rules[i].set && !have) {
            usage_error("--%s requires %s", rules[i].flag, rules[i].needs);
            return 2;
        }
    }
    if ((C.audit_log && !*C.audit_log) || (C.record_dir && !*C.record_dir)) {
        usage_error("--audit-log and --record-dir need a path");
        return 2;
    }
    return CONFIG_OK;
}

int config_validate(void)
{
    int (*const steps[])(void) = {validate_relations, validate_codex,    validate_forward,
                                  validate_sigv4,     validate_remote,   validate_listen,
                                  configure_auth,     validate_exposure, validate_audit};
    for (size_t i = 0; i < sizeof steps / sizeof steps[0]; i++) {
        int r = steps[i]();
        if (r != CONFIG_OK) return r;
    }
    return CONFIG_OK;
}

void config_free(void)
{
    if (C.bearer) {
        memset(C.bearer, 0, strlen(C.bearer));
        free(C.bearer);
        C.bearer = NULL;
    }
    free(C.chatgpt_account);
    C.chatgpt_account = NULL;
    aws_profile_clear(&aws_files);
    C.aws_access = C.aws_secret = C.aws_token = NULL;
    struct opt_list *lists[] = {&C.codex_overrides, &C.codex_enable, &C.codex_disable};
    for (size_t i = 0; i < sizeof lists / sizeof lists[0]; i++) {
        free(lists[i]->v);
        *lists[i] = (struct opt_list){0};
    }
}
