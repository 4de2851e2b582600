/* env_vars: the variables' one copy and the table of them (env_vars.h says who fills
 * it and why). */
#include "core/env_vars.h"

struct env_vars env_vars;

#define E env_vars

/* clang-format off */
const struct env_var env_vars_table[] = {
    /* the host */
    {"PATH", NULL, &E.path, "where `rg` is looked for (environment/info's prependPathDirs), "
     "and bash and zsh when the login shell is none of bash, zsh and sh"},
    {"HOME", NULL, &E.home, "the home directory environment/info reports (else the password "
     "entry's) and where ~/.codex and ~/.aws are"},
    {"TMPDIR", NULL, &E.tmpdir, "the temporary directory environment/info reports and a "
     "sandbox's `tmpdir` entry; where the `rg` link directory is made (else /tmp)"},
    {"CODEX_HOME", NULL, &E.codex_home, "codex's home (default ~/.codex): skills and plugins "
     "for capability discovery, the managed proxy's CA"},
    {"JOURNAL_STREAM", NULL, &E.journal_stream, "set by systemd: log lines carry <N> "
     "priorities while standard error is that stream"},
    /* trust */
    {"SSL_CERT_FILE", NULL, &E.ssl_cert_file, "extra trust (a CA bundle) for http/request, "
     "an https registry and the managed proxy's children"},
    {"SSL_CERT_DIR", NULL, &E.ssl_cert_dir, "a CA directory for http/request"},
    {"CURL_CA_BUNDLE", NULL, &E.curl_ca_bundle, "a CA bundle for http/request (before "
     "SSL_CERT_FILE) and an https registry (after it)"},
    {"CODEX_CA_CERTIFICATE", NULL, &E.codex_ca_certificate, "the CA bundle for an https "
     "registry and a wss:// rendezvous or forward destination, as the reference takes it"},
    /* outbound proxies */
    {"NO_PROXY", NULL, &E.no_proxy, "hosts http/request reaches without a proxy"},
    {"no_proxy", NULL, &E.no_proxy_lower, "the same when NO_PROXY is unset"},
    {"HTTP_PROXY", NULL, &E.http_proxy, "the managed network proxy's upstream for http://"},
    {"http_proxy", NULL, &E.http_proxy_lower, "the same when HTTP_PROXY is unset"},
    {"HTTPS_PROXY", NULL, &E.https_proxy, "the managed network proxy's upstream for CONNECT"},
    {"https_proxy", NULL, &E.https_proxy_lower, "the same when HTTPS_PROXY is unset"},
    {"ALL_PROXY", NULL, &E.all_proxy, "the upstream for both when neither is set"},
    {"all_proxy", NULL, &E.all_proxy_lower, "the same when ALL_PROXY is unset"},
    /* remote mode */
    {"CODEX_API_KEY", "--registration-bearer-stdin", &E.codex_api_key, "the registry bearer "
     "when --registration-bearer-stdin is not given (docs/REMOTE.md says where it may go)"},
    {"CODEX_ACCESS_TOKEN", "--use-agent-identity-auth", &E.codex_access_token, "checked by "
     "--use-agent-identity-auth, as the reference checks it"},
    {"OPENAI_CLUSTER", NULL, &E.openai_cluster, "sent as x-cluster-name on the rendezvous "
     "upgrade"},
    {"DD_SERVICE", NULL, &E.dd_service, "sent as x-openai-internal-caller on the rendezvous "
     "upgrade"},
    {"AWS_ACCESS_KEY_ID", "--aws-sigv4", &E.aws_access_key_id, "the SigV4 key id (with "
     "AWS_SECRET_ACCESS_KEY), unless --aws-profile names a profile"},
    {"AWS_SECRET_ACCESS_KEY", "--aws-sigv4", &E.aws_secret_access_key, "the SigV4 secret"},
    {"AWS_SESSION_TOKEN", "--aws-sigv4", &E.aws_session_token, "the SigV4 session token, "
     "with the two above"},
    {"AWS_PROFILE", "--aws-profile", &E.aws_profile, "the profile of the shared files when "
     "neither --aws-profile nor the keys above are given (else `default`)"},
    {"AWS_REGION", "--aws-region", &E.aws_region, "the signing region when --aws-region is "
     "not given"},
    {"AWS_DEFAULT_REGION", "--aws-region", &E.aws_default_region, "the same after "
     "AWS_REGION"},
    {"AWS_SHARED_CREDENTIALS_FILE", "--aws-profile", &E.aws_shared_credentials_file,
     "the shared credentials file (default ~/.aws/credentials)"},
    {"AWS_CONFIG_FILE", "--aws-profile", &E.aws_config_file, "the shared config file "
     "(default ~/.aws/config)"},
    {"EXEC_REGISTRY_DATABASE", "--database", &E.registry_database, "exec-server registry's "
     "database when --database is not given"},
    /* the audit trail */
    {"EXEC_SERVER_AUDIT_LOG", "--audit-log", &E.audit_log, "the audit log when --audit-log "
     "is not given"},
    {"EXEC_SERVER_RECORD_DIR", "--record-dir", &E.record_dir, "the recording directory "
     "when --record-dir is not given"},
    {"EXEC_REGISTRY_AUDIT_LOG", "--audit-log", &E.registry_audit_log, "exec-server "
     "registry's audit log when its --audit-log is not given"},
    /* test knobs: the tests' own, not settings */
    {"EXEC_SERVER_TEST_RESOLVE", NULL, &E.test_resolve, "test knob: NAME=IP,... answers the "
     "managed proxy's name lookups for those names"},
    {"EXEC_SERVER_REMOTE_PING_MS", NULL, &E.remote_ping_ms, "test knob: remote mode's "
     "rendezvous ping interval (ms)"},
    {"EXEC_SERVER_REMOTE_PONG_MS", NULL, &E.remote_pong_ms, "test knob: how long remote mode "
     "waits for a pong (ms)"},
    {"EXEC_SERVER_REMOTE_BACKOFF_MS", NULL, &E.remote_backoff_ms, "test knob: remote mode's "
     "first reconnect delay (ms)"},
};
/* clang-format on */
const size_t env_vars_count = sizeof env_vars_table / sizeof env_vars_table[0];
