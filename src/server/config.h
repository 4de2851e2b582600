/* config: the server's configuration from its command line, in three steps.
 *
 *   config_parse     argv -> server_config through the option table
 *                    (server/options.c): unknown options, missing and malformed
 *                    values; --help and --version
 *   config_validate  the rules that tie options together (auth modes, remote and
 *                    forward mode, the listen URL, TLS files), the environment
 *                    (CODEX_API_KEY, AWS_*) and standard input (bearer lines);
 *                    fills the resolved part of the struct
 *   server_run       (server/server_run.h) starts the loop with the result
 *
 * Each step prints its own error to stderr ("exec-server: ...") and says how the
 * process must exit: 2 for a usage error, 1 for a runtime one (an unreadable file,
 * a bearer that is not there), 0 after --help or --version. */
#ifndef EXEC_SERVER_CONFIG_H
#define EXEC_SERVER_CONFIG_H

#include <stdbool.h>
#include <stdint.h>

#include "server/options.h"

/* What config_parse and config_validate return to go on. Any other value is the
 * exit status to stop with (the message has been printed). */
#define CONFIG_OK (-1)

struct server_config {
    /* Set by the options (see options.c for each one's meaning). */
    const char *listen_url;
    uint64_t session_ttl_ms;
    const char *tls_cert, *tls_key;
    bool exit_on_stdin_close;
    bool allow_unauthenticated; /* a non-loopback listener without --ws-auth */
    int ws_auth;                /* -1 off, 0 capability-token, 1 signed-bearer-token */
    const char *ws_token_file, *ws_token_sha256;
    const char *ws_secret_file, *ws_issuer, *ws_audience;
    uint64_t ws_skew;
    const char *remote_url, *environment_id, *remote_name;
    int remote_transport; /* 0 noise, 1 direct */
    bool bearer_stdin, credential_stdin, agent_identity;
    bool aws_sigv4;
    const char *aws_profile, *aws_region, *aws_service;
    const char *connect_url;
    bool chatgpt_token_stdin;
    const char *chatgpt_account_id;
    struct opt_list codex_overrides, codex_enable, codex_disable;
    bool strict_config;
    const char *audit_log, *record_dir; /* the audit trail (docs/AUDIT.md) */
    bool audit_required, audit_fs_reads, record_input;

    /* The command: `exec-server forward ...` when set. */
    bool forward;

    /* Resolved by config_validate. */
    bool stdio_mode, remote_mode, direct;
    char host[64];
    int port;
    char *bearer;          /* registry bearer (malloc'd, wiped by config_free) */
    char *chatgpt_account; /* --chatgpt-token-stdin: the account sent beside it */
    const char *aws_access, *aws_secret, *aws_token;
    char env_id_buf[512], remote_buf[2048];
};

extern struct server_config server_config;

/* Parses argv (argv[1] may be `forward`) into server_config, after resetting it and
 * the server limits to their defaults. Returns CONFIG_OK or an exit status. */
int config_parse(int argc, char **argv);

/* Checks server_config as a whole and resolves it (see above). Returns CONFIG_OK or
 * an exit status. */
int config_validate(void);

/* Whether the option with this long name was given on the command line. */
bool config_given(const char *name);

/* Whether a numeric listen host is a loopback address (127.0.0.0/8 or ::1). */
bool config_host_is_loopback(const char *host);

/* Wipes and frees what config_validate allocated. */
void config_free(void);

#endif
