/* env_vars: the environment variables the program acts on, as read once at start.
 *
 * env_vars_table names each variable, with what it means and the flag it stands in
 * for (the flags' own variables are the option tables' .env), and options_read_env()
 * (core/options.c) copies every one into this struct before anything else runs (in
 * each role of the program: the daemon, its spawner, exec-server registry); the
 * modules read them here, so no module of src/ calls getenv but core/options.c
 * (tests/arch/test_getenv.py), and the list in docs/FLAGS.md is the whole list. NULL: unset.
 * Variables that are the server's environment rather than settings stay out: what children inherit
 * (environ, by envPolicy) and a header's valueEnvVar, whose name a request chooses. */
#ifndef EXEC_CORE_ENV_VARS_H
#define EXEC_CORE_ENV_VARS_H

#include <stddef.h>

#include <stddef.h>

struct env_vars {
    /* the host */
    const char *path;           /* PATH: where rg and a fallback shell are looked for */
    const char *home;           /* HOME */
    const char *tmpdir;         /* TMPDIR */
    const char *codex_home;     /* CODEX_HOME */
    const char *journal_stream; /* JOURNAL_STREAM: systemd's, for <N> log priorities */
    /* trust: a private CA */
    const char *ssl_cert_file, *ssl_cert_dir, *curl_ca_bundle, *codex_ca_certificate;
    /* outbound proxies: the upper-case name first, as curl and the reference read them */
    const char *no_proxy, *no_proxy_lower, *http_proxy, *http_proxy_lower, *https_proxy,
        *https_proxy_lower, *all_proxy, *all_proxy_lower;
    /* remote mode */
    const char *codex_api_key, *codex_access_token, *openai_cluster, *dd_service;
    const char *aws_access_key_id, *aws_secret_access_key, *aws_session_token, *aws_profile,
        *aws_region, *aws_default_region, *aws_shared_credentials_file, *aws_config_file;
    const char *registry_database; /* exec-server registry: --database */
    /* the audit trail: --audit-log and --record-dir, the registry's --audit-log */
    const char *audit_log, *record_dir, *registry_audit_log;
    /* test knobs: a resolver override, remote mode's timers */
    const char *test_resolve, *remote_ping_ms, *remote_pong_ms, *remote_backoff_ms;
};

extern struct env_vars env_vars;

/* One variable: where its value goes, the flag it stands in for (or NULL) and what it
 * does, for docs/FLAGS.md, which lists every row. */
struct env_var {
    const char *name;    /* "TMPDIR" */
    const char *flag;    /* "--aws-region", or NULL */
    const char **target; /* a field of env_vars */
    const char *help;
};

extern const struct env_var env_vars_table[];
extern const size_t env_vars_count;

#endif
