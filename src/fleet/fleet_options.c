/* fleet_options: the option table of `exec-server registry` (see fleet_options.h). */
#include "fleet/fleet_options.h"

#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/env_vars.h"
#include "core/log.h"
#include "fleet/fleet_config.h"
#include "fleet/fleet_db.h"

struct fleet_config fleet_cfg;

static int parse_level(const char *value, void *target, const char **why)
{
    return log_level_parse(value, target);
}

#define F fleet_cfg
#define TO(field) .target = &(field), .size = sizeof(field)
#define SERVE .modes = FLEET_OPT_SERVE
#define ALL .modes = FLEET_OPT_ALL

/* clang-format off */
static const struct opt_spec rows[] = {
    {.name = "database", .meta = "URL", .kind = OPT_STRING, ALL, TO(F.database),
     .help = "sqlite:PATH (one file, nothing to run; WAL journal) or postgresql://... (a libpq "
             "URI; several registry nodes share one database). Required; also "
             "EXEC_REGISTRY_DATABASE. Schema migrations run at start. A password in it is "
             "warned about, since ps shows argv: give the URL in EXEC_REGISTRY_DATABASE, or "
             "the password in ~/.pgpass, PGPASSFILE or a pg_service.conf, where libpq reads "
             "it"},
    {.name = "listen", .meta = "URL", .kind = OPT_STRING, SERVE, TO(F.listen_url),
     .def = "http://127.0.0.1:0", .def_note = "any free loopback port",
     .help = "http://HOST:PORT, or https://HOST:PORT with --tls-cert and --tls-key: where "
             "executors, harnesses and the rendezvous WebSockets connect (one port for all); a "
             "name is looked up once at start (its first IPv4 address, else its first IPv6). "
             "The base URL is printed as the first line on standard output once listening"},
    {.name = "public-url", .meta = "URL", .kind = OPT_STRING, SERVE, TO(F.public_url),
     .help = "http(s)://HOST:PORT this node is reached at from executors and harnesses, put into "
             "the rendezvous URLs it hands out (default: the listen URL; set it when listening "
             "on 0.0.0.0 or behind a proxy)"},
    {.name = "environment-url", .meta = "URL", .kind = OPT_STRING, SERVE, TO(F.environment_url),
     .help = "http(s)://HOST:PORT that executors' rendezvous URLs point at (default: "
             "--public-url). With several nodes, a name that reaches any live node (DNS or a "
             "load balancer): an executor whose node dies reconnects through it to another"},
    {.name = "tls-cert", .meta = "FILE", .kind = OPT_STRING, SERVE, TO(F.tls_cert),
     .help = "with https://: the PEM certificate chain (re-read on SIGHUP)"},
    {.name = "tls-key", .meta = "FILE", .kind = OPT_STRING, SERVE, TO(F.tls_key),
     .help = "with https://: the PEM private key (re-read on SIGHUP)"},
    {.name = "node-id", .meta = "ID", .kind = OPT_STRING, SERVE, TO(F.node_id),
     .help = "this node's name in the database ([A-Za-z0-9_.-]; default: random at each "
             "start)"},
    {.name = "log-level", .meta = "LEVEL", .kind = OPT_PARSE, ALL, TO(log_threshold),
     .parse = parse_level, .expect = "error, warn, notice, info or debug", .def = "notice",
     .help = "error, warn, notice, info or debug; logs go to standard error. notice shows every "
             "registration, attach, connect and refusal; info adds relay streams and HTTP "
             "requests"},
    {.name = "max-environments-per-token", .meta = "N", .kind = OPT_COUNT, SERVE,
     TO(F.max_envs_per_token), .min = 1, .max = 10000000, .expect = "a count", .def = "1000",
     .help = "environments one executor token (an `ID*` prefix token) may register"},
    {.name = "max-streams-per-environment", .meta = "N", .kind = OPT_COUNT, SERVE,
     TO(F.max_streams), .min = 1, .max = 100000, .expect = "a count", .def = "128",
     .help = "harness streams routed to one executor at once (the executor's own limit is "
             "128)"},
    {.name = "max-pending-bundles", .meta = "N", .kind = OPT_COUNT, SERVE, TO(F.max_pending),
     .min = 1, .max = 100000, .expect = "a count", .def = "32",
     .help = "/connect bundles of one environment issued and not used yet"},
    {.name = "max-frame-bytes", .meta = "BYTES", .kind = OPT_BYTES, SERVE, TO(F.max_frame),
     .min = 4096, .max = 256 * 1024, .expect = "4K to 256K", .def = "256K",
     .help = "largest relay frame (WebSocket message); larger ones close the socket with 1009"},
    {.name = "max-connections", .meta = "N", .kind = OPT_COUNT, SERVE, TO(F.max_connections),
     .min = 1, .max = 10000000, .expect = "a count", .def = "20000",
     .help = "open sockets (executors, harnesses, HTTP clients); more are closed at accept"},
    {.name = "idle-timeout", .meta = "SECONDS", .kind = OPT_SECONDS, SERVE, TO(F.idle_ms),
     .min = 1, .max = 86400 * 30, .expect = "seconds", .def = "3600",
     .help = "a harness socket that relays no frame either way for this long is closed"},
    {.name = "claim-timeout", .meta = "SECONDS", .kind = OPT_SECONDS, SERVE, TO(F.claim_ms),
     .max = 3600, .expect = "seconds", .def = "10",
     .help = "a harness socket must send its first frame within this"},
    {.name = "bundle-ttl", .meta = "SECONDS", .kind = OPT_SECONDS, SERVE, TO(F.bundle_ttl_ms),
     .min = 1, .max = 3600, .expect = "seconds", .def = "60",
     .help = "how long a /connect bundle's harness URL and key authorization stay valid"},
    {.name = "environment-url-ttl", .meta = "SECONDS", .kind = OPT_SECONDS, SERVE,
     TO(F.env_url_ttl_ms), .min = 60, .max = 86400 * 365, .expect = "seconds",
     .def = "604800",
     .help = "how long an executor's rendezvous URL stays valid (it re-registers after)"},
    {.name = "heartbeat-interval", .meta = "SECONDS", .kind = OPT_SECONDS,
     .modes = FLEET_OPT_SERVE | FLEET_OPT_ENVS, TO(F.heartbeat_ms), .max = 3600,
     .expect = "seconds", .def = "5",
     .help = "how often this node reports itself alive in the database; a node silent for "
             "three intervals is dead and its executors offline (environments: the nodes' "
             "interval, to tell who is online)"},
    {.name = "ping-interval", .meta = "SECONDS", .kind = OPT_SECONDS, SERVE, TO(F.ping_ms),
     .max = 3600, .expect = "seconds", .def = "30",
     .help = "WebSocket Ping period on rendezvous sockets; no Pong within two periods closes "
             "the socket"},
    {.name = "connect-rate", .meta = "N", .kind = OPT_COUNT, SERVE, TO(F.connect_rate),
     .min = 1, .max = 1000000, .expect = "a count", .def = "20",
     .help = "/connect requests per second one harness token may make (429 past it)"},
    {.name = "connect-burst", .meta = "N", .kind = OPT_COUNT, SERVE, TO(F.connect_burst),
     .min = 1, .max = 1000000, .expect = "a count", .def = "40",
     .help = "...and how many at once after a quiet time"},
    {.name = "audit-log", .meta = "PATH", .kind = OPT_STRING,
     .modes = FLEET_OPT_SERVE | FLEET_OPT_TOKEN, TO(F.audit_log),
     .help = "append one JSON record per registration, attach and detach, connect, "
             "validation, refusal and token change to PATH (created 0600), chained by "
             "SHA-256 as exec-server's --audit-log (`exec-server audit verify PATH`); the "
             "token commands append theirs to the same file. SIGHUP reopens it. Also "
             "EXEC_REGISTRY_AUDIT_LOG=PATH"},
    {.name = "environment", .meta = "ID", .kind = OPT_STRING, .modes = FLEET_OPT_TOKEN,
     TO(F.environment),
     .help = "token create: the environment the token opens, or a prefix ending in `*` (ci-* "
             "opens ci-1, ci-2 ...)"},
    {.name = "role", .meta = "ROLE", .kind = OPT_STRING, .modes = FLEET_OPT_TOKEN, TO(F.role),
     .help = "token create: executor (registers an environment) or harness (connects to one)"},
    {.name = "expires", .meta = "DURATION", .kind = OPT_STRING, .modes = FLEET_OPT_TOKEN,
     TO(F.expires),
     .help = "token create: lifetime as N followed by s, m, h or d (30d), or never (the "
             "default)"},
    {.name = "help", .short_name = 'h', .kind = OPT_ACTION, ALL, .help = "print this help"},
    {.name = "version", .short_name = 'V', .kind = OPT_ACTION, ALL, .help = "print the version"},
};
/* clang-format on */
const struct opt_table fleet_options = {.rows = rows, .count = sizeof rows / sizeof rows[0]};

void fleet_options_help(FILE *out)
{
    fputs("Usage: exec-server registry --database URL [--listen URL] [OPTIONS]\n"
          "       exec-server registry token create --database URL --environment ID "
          "--role executor|harness [--expires 30d]\n"
          "       exec-server registry token list|revoke ID --database URL\n"
          "       exec-server registry environments --database URL\n\n"
          "An environment registry and rendezvous relay of your own: executors "
          "(`exec-server --remote`,\n`codex exec-server --remote`) register and wait behind NAT; "
          "harnesses (codex, exec-client)\nreach them through it, end-to-end encrypted. State in "
          "SQLite, or PostgreSQL for several nodes.\n\nOptions:\n",
          out);
    options_print_help(out, &fleet_options, FLEET_OPT_ALL);
}

void fleet_options_man(FILE *out)
{
    options_print_man(out, &fleet_options);
}

static const struct opt_spec *row(const char *name)
{
    const struct opt_spec *o = options_find(&fleet_options, name);
    if (!o) abort(); /* a name of our own table */
    return o;
}

static void usage_error(const char *what, const char *arg)
{
    fprintf(stderr, "exec-server registry: %s%s%s (see --help)\n", what, arg ? " " : "",
            arg ? arg : "");
}

int fleet_options_parse(int argc, char **argv, const char **words, int *nwords)
{
    struct option longs[sizeof rows / sizeof rows[0] + 1];
    char err[512];
    memset(&fleet_cfg, 0, sizeof fleet_cfg);
    options_read_env(); /* EXEC_REGISTRY_DATABASE and the host's (core/env_vars.h) */
    options_reset(&fleet_options);
    for (size_t i = 0; i < fleet_options.count; i++) {
        const struct opt_spec *o = &rows[i];
        longs[i] =
            (struct option){o->name, o->meta ? required_argument : no_argument, NULL, 256 + (int)i};
    }
    longs[fleet_options.count] = (struct option){0};
    opterr = 0;
    optind = 0;
    *nwords = 0;
    int ch;
    /* Options and command words mix freely (GNU permutation): `registry token list
     * --database X` and `registry --database X token list` are the same. */
    while ((ch = getopt_long(argc, argv, ":hV", longs, NULL)) != -1) {
        if (ch == ':' || ch == '?') {
            usage_error(ch == ':' ? "missing value for" : "unknown option", argv[optind - 1]);
            return 2;
        }
        const struct opt_spec *o = ch == 'h'   ? row("help")
                                   : ch == 'V' ? row("version")
                                               : &rows[ch - 256];
        if (strcmp(o->name, "help") == 0) {
            fleet_options_help(stdout);
            return 0;
        }
        if (strcmp(o->name, "version") == 0) {
            printf("exec-server %s\n", EXEC_SERVER_VERSION);
            return 0;
        }
        if (options_store(o, optarg, err, sizeof err) < 0) {
            fprintf(stderr, "exec-server registry: %s\n", err);
            return 2;
        }
    }
    for (int i = optind; i < argc; i++) {
        if (*nwords == FLEET_MAX_WORDS) {
            usage_error("unexpected argument", argv[i]);
            return 2;
        }
        words[(*nwords)++] = argv[i];
    }
    /* As mysql warns of -pPASSWORD: argv is every local user's to read (ps). */
    char shown[512];
    if (fleet_cfg.database && fleet_db_url_redact(fleet_cfg.database, shown, sizeof shown))
        fprintf(stderr, "exec-server registry: warning: the --database URL holds a password, "
                        "which the process list (ps) shows to every user of this host: give the "
                        "URL in EXEC_REGISTRY_DATABASE instead, or leave the password out of it "
                        "and keep it in ~/.pgpass (PGPASSFILE) or a pg_service.conf "
                        "(exec-server-registry(1))\n");
    if (!fleet_cfg.database) fleet_cfg.database = env_vars.registry_database;
    if (!fleet_cfg.audit_log) fleet_cfg.audit_log = env_vars.registry_audit_log;
    return -1;
}
