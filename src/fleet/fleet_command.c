/* fleet_command: the `exec-server registry` commands (see fleet_command.h). */
#include "fleet/fleet_command.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/log.h"
#include "crypto/random.h"
#include "fleet/fleet_audit.h"
#include "fleet/fleet_config.h"
#include "fleet/fleet_options.h"
#include "fleet/fleet_server.h"
#include "fleet/fleet_store.h"
#include "fleet/fleet_worker.h"
#include "proto/hex.h"
#include "transport/tls.h"
#include "util/hostaddr.h"

static int usage(const char *fmt, const char *arg)
{
    fputs("exec-server registry: ", stderr);
    fprintf(stderr, fmt, arg);
    fputs(" (see --help)\n", stderr);
    return 2;
}

/* "http://HOST:PORT" or "https://..." into host (numeric: a name is looked up once,
 * here, as sshd's ListenAddress does), port and tls. */
static int parse_listen(const char *url)
{
    const char *rest;
    if (strncmp(url, "http://", 7) == 0) {
        rest = url + 7;
    } else if (strncmp(url, "https://", 8) == 0) {
        rest = url + 8;
        fleet_cfg.tls = true;
    } else {
        return usage("--listen must be http://HOST:PORT or https://HOST:PORT, not %s", url);
    }
    const char *colon = strrchr(rest, ':');
    const char *hs = rest, *he = colon;
    if (*rest == '[') {
        const char *close = strchr(rest, ']');
        if (!close || close[1] != ':') return usage("bad --listen address %s", url);
        hs = rest + 1, he = close, colon = close + 1;
    }
    char *end;
    long port = colon ? strtol(colon + 1, &end, 10) : -1;
    if (!colon || *end || port < 0 || port > 65535 || he == hs ||
        (size_t)(he - hs) >= sizeof fleet_cfg.host)
        return usage("--listen needs a host and a port: %s", url);
    char name[256], why[300];
    snprintf(name, sizeof name, "%.*s", (int)(he - hs), hs);
    if (hostaddr_numeric(name, fleet_cfg.host, sizeof fleet_cfg.host, why, sizeof why) < 0)
        return usage("--listen: %s", why);
    fleet_cfg.port = (int)port;
    return -1;
}

/* A base URL option (--public-url, --environment-url): http(s)://..., no query, no
 * trailing slash kept. */
static int base_url(const char *opt, const char *url, char *out, size_t cap)
{
    if ((strncmp(url, "http://", 7) != 0 && strncmp(url, "https://", 8) != 0) || strchr(url, '?') ||
        strchr(url, '#') || strlen(url) >= cap - 8)
        return usage("%s must be an http:// or https:// base URL", opt);
    snprintf(out, cap, "%s", url);
    size_t n = strlen(out);
    while (n > 8 && out[n - 1] == '/')
        out[--n] = '\0';
    return -1;
}

static int resolve_serve(void)
{
    int r = parse_listen(fleet_cfg.listen_url);
    if (r >= 0) return r;
    if (fleet_cfg.tls != (fleet_cfg.tls_cert && fleet_cfg.tls_key) ||
        (!fleet_cfg.tls_cert) != (!fleet_cfg.tls_key))
        return usage("%s", "https:// needs --tls-cert and --tls-key, and they need https://");
    if (fleet_cfg.tls) {
        char err[600];
        if (tls_server_configure(fleet_cfg.tls_cert, fleet_cfg.tls_key, err, sizeof err) < 0) {
            fprintf(stderr, "exec-server registry: TLS: %s\n", err);
            return 1;
        }
    }
    if (fleet_cfg.public_url &&
        (r = base_url("--public-url", fleet_cfg.public_url, fleet_cfg.public_base,
                      sizeof fleet_cfg.public_base)) >= 0)
        return r;
    static char envbase[512];
    if (fleet_cfg.environment_url && (r = base_url("--environment-url", fleet_cfg.environment_url,
                                                   envbase, sizeof envbase)) >= 0)
        return r;
    if (fleet_cfg.environment_url) fleet_cfg.environment_url = envbase;
    if (fleet_cfg.node_id) {
        if (!fleet_env_id_ok(fleet_cfg.node_id, strlen(fleet_cfg.node_id)))
            return usage("--node-id must be 1-128 characters of [A-Za-z0-9_.-]: %s",
                         fleet_cfg.node_id);
        snprintf(fleet_cfg.node, sizeof fleet_cfg.node, "%s", fleet_cfg.node_id);
    } else {
        uint8_t raw[8];
        crypto_random_bytes(raw, sizeof raw);
        hex_encode(raw, sizeof raw, fleet_cfg.node);
    }
    if (fleet_cfg.ping_ms == 0) fleet_cfg.ping_ms = 100;
    if (fleet_cfg.heartbeat_ms == 0) fleet_cfg.heartbeat_ms = 100;
    fleet_cfg.pong_ms = 2 * fleet_cfg.ping_ms;
    fleet_cfg.dead_ms = 3 * fleet_cfg.heartbeat_ms;
    return -1;
}

/* ---- the database commands ---- */

static struct fleet_db *open_db(void)
{
    char err[512];
    struct fleet_db *db = NULL;
    int r = fleet_db_open(fleet_cfg.database, &db, err, sizeof err);
    if (r == 0) r = fleet_store_migrate(db, err, sizeof err);
    if (r < 0) {
        char shown[512];
        fleet_db_url_redact(fleet_cfg.database, shown, sizeof shown); /* no password shown */
        fprintf(stderr, "exec-server registry: database %s: %s\n", shown, err);
        if (db) fleet_db_close(db);
        return NULL;
    }
    return db;
}

/* "30d", "12h", "90m", "3600s", "never" -> milliseconds (0: never). */
static int parse_duration(const char *s, int64_t *ms)
{
    if (strcmp(s, "never") == 0) {
        *ms = 0;
        return 0;
    }
    char *end;
    long long v = strtoll(s, &end, 10);
    int64_t unit = *end == 's'   ? 1000
                   : *end == 'm' ? 60000
                   : *end == 'h' ? 3600000
                   : *end == 'd' ? 86400000
                                 : 0;
    if (end == s || v <= 0 || !unit || end[1] || v > 36500LL * 86400000 / unit) return -EINVAL;
    *ms = v * unit;
    return 0;
}

static void iso_time(const char *ms, char *out, size_t n)
{
    if (!ms) {
        snprintf(out, n, "-");
        return;
    }
    time_t t = (time_t)(strtoll(ms, NULL, 10) / 1000);
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(out, n, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

static int token_create(struct fleet_db *db)
{
    enum fleet_role role;
    int64_t ttl = 0;
    if (!fleet_cfg.environment || !fleet_env_pattern_ok(fleet_cfg.environment))
        return usage("%s", "token create needs --environment ID (or a PREFIX*) of "
                           "[A-Za-z0-9_.-]");
    if (!fleet_cfg.role || fleet_role_parse(fleet_cfg.role, &role) < 0)
        return usage("%s", "token create needs --role executor or --role harness");
    if (fleet_cfg.expires && parse_duration(fleet_cfg.expires, &ttl) < 0)
        return usage("--expires takes N followed by s, m, h or d (30d), or never: %s",
                     fleet_cfg.expires);
    char token[FLEET_TOKEN_LEN + 1], err[400];
    int64_t now = fleet_now_ms();
    if (fleet_store_token_create(db, fleet_cfg.environment, role, ttl ? now + ttl : 0, now, token,
                                 err, sizeof err) < 0) {
        fprintf(stderr, "exec-server registry: cannot create the token: %s\n", err);
        return 1;
    }
    printf("%s\n", token);
    fprintf(stderr, "created %s token %.*s for environment %s%s%s (shown once; store it now)\n",
            fleet_role_name(role), FLEET_TOKEN_ID_LEN, token + 5, fleet_cfg.environment,
            ttl ? ", expires in " : "", ttl ? fleet_cfg.expires : "");
    char id[FLEET_TOKEN_ID_LEN + 1];
    snprintf(id, sizeof id, "%.*s", FLEET_TOKEN_ID_LEN, token + 5);
    memset(token, 0, sizeof token);
    return fleet_audit_token("create", id, fleet_role_name(role),
                             ttl ? fleet_cfg.expires : "never");
}

static int token_list(struct fleet_db *db)
{
    struct fleet_rows r;
    char err[400];
    if (fleet_store_token_list(db, &r, err, sizeof err) < 0) {
        fprintf(stderr, "exec-server registry: %s\n", err);
        return 1;
    }
    int64_t now = fleet_now_ms();
    printf("%-16s  %-8s  %-8s  %-20s  %-20s  %s\n", "ID", "ROLE", "STATE", "CREATED", "EXPIRES",
           "ENVIRONMENT");
    for (size_t i = 0; i < r.nrows; i++) {
        char created[32], expires[32];
        iso_time(fleet_cell(&r, i, 3), created, sizeof created);
        iso_time(fleet_cell(&r, i, 4), expires, sizeof expires);
        const char *state = fleet_cell(&r, i, 5) ? "revoked"
                            : fleet_cell(&r, i, 4) && strtoll(fleet_cell(&r, i, 4), NULL, 10) < now
                                ? "expired"
                                : "active";
        printf("%-16s  %-8s  %-8s  %-20s  %-20s  %s\n", fleet_cell(&r, i, 0), fleet_cell(&r, i, 2),
               state, created, expires, fleet_cell(&r, i, 1));
    }
    fleet_rows_free(&r);
    return 0;
}

static int token_revoke(struct fleet_db *db, const char *id)
{
    char err[400];
    int r = fleet_store_token_revoke(db, id, fleet_now_ms(), err, sizeof err);
    if (r == -ENOENT) {
        fprintf(stderr, "exec-server registry: no token %s\n", id);
        return 1;
    }
    if (r < 0) {
        fprintf(stderr, "exec-server registry: %s\n", err);
        return 1;
    }
    fprintf(stderr,
            "revoked token %s: its requests are refused now and executors that "
            "registered with it are disconnected within a heartbeat\n",
            id);
    return fleet_audit_token("revoke", id, NULL, NULL);
}

static int environments(struct fleet_db *db)
{
    struct fleet_rows r;
    char err[400];
    if (fleet_store_environments(db, &r, err, sizeof err) < 0) {
        fprintf(stderr, "exec-server registry: %s\n", err);
        return 1;
    }
    int64_t alive_after = fleet_now_ms() - 3 * (int64_t)fleet_cfg.heartbeat_ms;
    printf("%-32s  %-7s  %-16s  %-20s  %7s\n", "ENVIRONMENT", "ONLINE", "NODE", "LAST SEEN",
           "STREAMS");
    for (size_t i = 0; i < r.nrows; i++) {
        const char *node = fleet_cell(&r, i, 4), *hb = fleet_cell(&r, i, 6);
        bool online = node && hb && strtoll(hb, NULL, 10) >= alive_after;
        /* The latest of what the database knows: registered, attached or detached
         * (last_seen_at), and its node's heartbeat while online; never before the
         * registration, as the node's last beat alone could be. */
        const char *latest = fleet_cell(&r, i, 2);
        const char *also[] = {fleet_cell(&r, i, 3), online ? hb : NULL};
        for (size_t k = 0; k < 2; k++)
            if (also[k] && (!latest || strtoll(also[k], NULL, 10) > strtoll(latest, NULL, 10)))
                latest = also[k];
        char seen[32];
        iso_time(latest, seen, sizeof seen);
        printf("%-32s  %-7s  %-16s  %-20s  %7s\n", fleet_cell(&r, i, 0), online ? "yes" : "no",
               online ? node : "-", seen,
               online && fleet_cell(&r, i, 7) ? fleet_cell(&r, i, 7) : "0");
    }
    fleet_rows_free(&r);
    return 0;
}

/* token create|list|revoke ID, environments. */
static int run_database_command(const char **w, int n)
{
    bool create = n == 2 && strcmp(w[1], "create") == 0, list = n == 2 && strcmp(w[1], "list") == 0,
         revoke = n == 3 && strcmp(w[1], "revoke") == 0;
    bool envs = strcmp(w[0], "environments") == 0 && n == 1;
    if (strcmp(w[0], "token") == 0 ? !(create || list || revoke) : !envs)
        return usage("unknown command `%s` (token create|list|revoke ID, environments)", w[0]);
    if (!fleet_cfg.database) return usage("%s", "--database URL is required");
    struct fleet_db *db = open_db();
    if (!db) return 1;
    int r = create   ? token_create(db)
            : list   ? token_list(db)
            : revoke ? token_revoke(db, w[2])
                     : environments(db);
    fleet_db_close(db);
    return r;
}

int fleet_command_main(int argc, char **argv)
{
    const char *words[FLEET_MAX_WORDS];
    int nwords = 0;
    int r = fleet_options_parse(argc, argv, words, &nwords);
    if (r >= 0) return r;
    if (nwords) return run_database_command(words, nwords);
    if (!fleet_cfg.database)
        return usage("%s", "--database URL is required (sqlite:PATH or "
                           "postgresql://...)");
    if ((r = resolve_serve()) >= 0) return r;
    return fleet_server_run();
}
