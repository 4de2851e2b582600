/* options: the daemon's option table, its --help and its man page section (see
 * options.h). */
#include "server/options.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/limits.h"
#include "core/log.h"
#include "server/config.h"

static int parse_log_level(const char *value, void *target, const char **why)
{
    return log_level_parse(value, target);
}

/* --max-session-keep: seconds (fractions allowed, up to a century) or `forever`. */
static int parse_keep(const char *value, void *target, const char **why)
{
    uint64_t *ms = target;
    if (strcmp(value, "forever") == 0) {
        *ms = LIMITS_KEEP_FOREVER;
        return 0;
    }
    char *end;
    errno = 0;
    double secs = strtod(value, &end);
    if (!*value || errno || *end || !(secs >= 0) || secs > 86400.0 * 36500) {
        (void)why; /* the generic message names what is expected */
        return -EINVAL;
    }
    *ms = (uint64_t)(secs * 1000);
    return 0;
}

/* --concurrent-requests: a positive count, with the reasons Rust's integer parser
 * gives (the reference's argument parser reports them). */
static int parse_positive(const char *value, void *target, const char **why)
{
    const char *d = value + (*value == '+');
    char *end;
    errno = 0;
    unsigned long long v = strtoull(d, &end, 10);
    if (!*d)
        *why = ": cannot parse integer from empty string";
    else if (!isdigit((unsigned char)*d) || *end)
        *why = ": invalid digit found in string";
    else if (errno == ERANGE)
        *why = ": number too large to fit in target type";
    else if (v == 0)
        *why = ": number would be zero for non-zero type";
    else {
        *(uint64_t *)target = v;
        return 0;
    }
    return -EINVAL;
}

/* Rust's u16 parser (a '+' allowed, digits only), with its reasons. */
static const char *parse_u16(const char *s, size_t n, uint16_t *out)
{
    size_t i = n && s[0] == '+';
    if (n == 0) return "cannot parse integer from empty string";
    if (i == n) return "invalid digit found in string";
    unsigned long v = 0;
    bool big = false;
    for (; i < n; i++) {
        if (!isdigit((unsigned char)s[i])) return "invalid digit found in string";
        v = v * 10 + (unsigned long)(s[i] - '0');
        if (v > 65535) {
            big = true;
            v = 65536;
        }
    }
    if (big) return "number too large to fit in target type";
    *out = (uint16_t)v;
    return NULL;
}

/* A DNS name as the reference's host parser takes it: at most 253 bytes (a final
 * dot included), labels of 1 to 63 letters, digits, `_` and `-`, no label starting
 * or ending with `-`, one trailing dot allowed. */
static bool dns_name_ok(const char *h, size_t n)
{
    if (n == 0 || n > 253) return false;
    for (size_t i = 0; i < n;) {
        size_t j = i;
        while (j < n && h[j] != '.')
            j++;
        if (j == i || j - i > 63 || h[i] == '-' || h[j - 1] == '-') return false;
        for (size_t k = i; k < j; k++)
            if (!isalnum((unsigned char)h[k]) && h[k] != '_' && h[k] != '-') return false;
        i = j + 1;
    }
    return true;
}

/* --tcp-upstream-proxy HOST:PORT, checked in the reference's order (the port after
 * the last colon, then the host, then a zero port) with its texts (observed on
 * 0.171.0). An IPv6 host is bracketed; it is stored without the brackets. */
static int parse_host_port(const char *value, void *target, const char **why)
{
    static const char host_err[] = ": parse host from host-with-port\n"
                                   " \xe2\x86\xaa parse host from string\n"
                                   " \xe2\x86\xaa Option is None";
    static char port_err[128];
    struct limits_endpoint *ep = target;
    const char *colon = strrchr(value, ':');
    if (!colon) {
        *why = ": missing port";
        return -EINVAL;
    }
    uint16_t port = 0;
    const char *reason = parse_u16(colon + 1, strlen(colon + 1), &port);
    if (reason) {
        snprintf(port_err, sizeof port_err, ": parse port as u16\n \xe2\x86\xaa %s", reason);
        *why = port_err;
        return -EINVAL;
    }
    size_t hn = (size_t)(colon - value);
    char host[256];
    unsigned char a6[16];
    if (hn >= 2 && value[0] == '[' && value[hn - 1] == ']' && hn - 2 < sizeof host) {
        memcpy(host, value + 1, hn - 2);
        host[hn - 2] = '\0';
        if (inet_pton(AF_INET6, host, a6) != 1) {
            *why = host_err;
            return -EINVAL;
        }
    } else if (hn < sizeof host) {
        memcpy(host, value, hn);
        host[hn] = '\0';
        if (memchr(host, ':', hn) && inet_pton(AF_INET6, host, a6) == 1) {
            *why = ": missing brackets for IPv6 address with port (in host-with-port)";
            return -EINVAL;
        }
        if (!dns_name_ok(host, hn)) {
            *why = host_err;
            return -EINVAL;
        }
    } else {
        *why = host_err;
        return -EINVAL;
    }
    if (port == 0) {
        *why = ": TCP upstream proxy port must be nonzero";
        return -EINVAL;
    }
    snprintf(ep->host, sizeof ep->host, "%s", host);
    ep->port = port;
    return 0;
}

static const char *const ws_auth_modes[] = {"capability-token", "signed-bearer-token", NULL};
static const char *const remote_transports[] = {"noise", "direct", NULL};
static const char *const pid_namespaces[] = {"isolate", "inherit", NULL};
static const char *const sandbox_modes[] = {"auto", "namespaces", "landlock", NULL};

#define C server_config
#define L server_limits
/* Where a value goes, and its size for the numeric kinds. */
#define TO(field) .target = &(field), .size = sizeof(field)

enum { SEC_GENERAL, SEC_WS_AUTH, SEC_LIMITS, SEC_AUDIT, SEC_REMOTE, SEC_FORWARD, SEC_CODEX };

static const struct opt_section sections[] = {
    [SEC_GENERAL] = {"Options", NULL},
    [SEC_WS_AUTH] = {"WebSocket authentication", "Off by default; /readyz stays open."},
    [SEC_LIMITS] = {"Limits", "BYTES may end in K, M or G (powers of 1024)."},
    [SEC_AUDIT] = {"Audit", "What clients did, kept apart from the logs (docs/AUDIT.md)."},
    [SEC_REMOTE] = {"Remote mode",
                    "An environment registry and its rendezvous relay, Noise encrypted."},
    [SEC_FORWARD] = {"Forward", "Options of `exec-server forward` only."},
    [SEC_CODEX] = {"Codex configuration",
                   "Accepted and checked as `codex exec-server` 0.171.0 checks them; no key "
                   "or feature changes what this exec-server does (docs/FLAGS.md)."},
};

/* Packed as written, one row per entry: */
/* clang-format off */
static const struct opt_spec rows[] = {
    /* ---- general ---- */
    {.name = "listen", .meta = "URL", .kind = OPT_STRING, .modes = OPT_BOTH, TO(C.listen_url),
     .def = "ws://127.0.0.1:0", .def_note = "any free loopback port",
     .help = "ws://HOST:PORT (IPv4, [IPv6], or a name looked up once at start: its first IPv4 "
             "address, else its first IPv6), wss://HOST:PORT (with --tls-cert and --tls-key) or "
             "stdio (also stdio://): where JSON-RPC clients connect. In WebSocket mode the bound "
             "URL is printed as one line on standard output once listening; a non-loopback "
             "address requires --ws-auth or --allow-unauthenticated",
     .more = "With --remote, an optional local ws://HOST:PORT endpoint that serves /readyz "
             "(200 only while registered and connected to the rendezvous), /metrics and "
             "WebSocket clients."},
    {.name = "session-ttl", .meta = "SECONDS", .kind = OPT_SECONDS, .modes = OPT_BOTH,
     TO(C.session_ttl_ms), .max = 86400 * 365, .expect = "seconds", .def = "80",
     .help = "how long a disconnected session and its processes wait to be resumed"},
    {.name = "log-level", .meta = "LEVEL", .kind = OPT_PARSE, .modes = OPT_BOTH,
     TO(log_threshold), .parse = parse_log_level,
     .expect = "error, warn, notice, info or debug", .def = "notice",
     .help = "error, warn, notice, info or debug; logs go to standard error. debug adds one "
             "line per request (method, id, duration, error); under systemd lines carry <N> "
             "priorities (journalctl -p works)"},
    {.name = "tls-cert", .meta = "FILE", .kind = OPT_STRING, .modes = OPT_BOTH, TO(C.tls_cert),
     .help = "with --listen wss://IP:PORT: the PEM certificate chain (TLS 1.2+ AEAD or 1.3; "
             "re-read on SIGHUP)"},
    {.name = "tls-key", .meta = "FILE", .kind = OPT_STRING, .modes = OPT_BOTH, TO(C.tls_key),
     .help = "with --listen wss://IP:PORT: the PEM private key (re-read on SIGHUP)"},
    {.name = "exit-on-stdin-close", .kind = OPT_FLAG, .modes = OPT_BOTH,
     TO(C.exit_on_stdin_close), .env = "CODEX_EXEC_SERVER_EXIT_ON_STDIN_CLOSE",
     .env_rule = OPT_ENV_TRUTHY,
     .help = "exit when the parent-owned standard input pipe closes (over stdio, the end of "
             "standard input always stops the server)"},
    {.name = "concurrent-requests", .meta = "COUNT", .kind = OPT_PARSE, .modes = OPT_SERVE,
     TO(L.max_concurrent_requests), .parse = parse_positive, .style = OPT_CLAP,
     .help = "requests of one connection that run at once; later ones wait in arrival "
             "order (process/terminate and fs/close never wait behind them). Default: no "
             "limit (the reference's default is 1, one request at a time)"},
    {.name = "linux-sandbox-pid-namespace", .meta = "MODE", .kind = OPT_CHOICE,
     .modes = OPT_BOTH, TO(L.sandbox_pid_namespace), .choices = pid_namespaces,
     .style = OPT_CLAP, .bad = ": expected 'isolate' or 'inherit'", .def = "isolate",
     .help = "PID namespace of sandboxed commands: isolate, or inherit ours, which lets "
             "them signal other processes of the same user; use inherit only on a "
             "dedicated host. Requests cannot change it"},
    {.name = "sandbox-mode", .meta = "MODE", .kind = OPT_CHOICE, .modes = OPT_BOTH,
     TO(L.sandbox_mode), .choices = sandbox_modes, .def = "auto",
     .expect = "auto, namespaces or landlock",
     .help = "which sandbox sandboxed requests get: namespaces (user, PID, mount, network, IPC "
             "and UTS namespaces with a view of the file system, Landlock and seccomp; "
             "refused where the host does not allow them), landlock (no namespaces: "
             "Landlock, seccomp and the sandbox's init deciding file-system changes, for "
             "containers and hosts that refuse namespaces), or auto: namespaces where the "
             "start-time probe made them, else landlock; a request's useLegacyLandlock "
             "asks for landlock. The mode is logged at start and reported in "
             "environment/info (docs/SANDBOX.md, \"Without namespaces\")"},
    {.name = "proxy-private-ips-via-upstream", .kind = OPT_FLAG, .modes = OPT_BOTH,
     TO(L.proxy_private_ips_via_upstream),
     .env = "CODEX_EXEC_SERVER_PROXY_PRIVATE_IPS_VIA_UPSTREAM", .env_rule = OPT_ENV_BOOL,
     .help = "let permitted private-IP destinations use the configured upstream proxy of "
             "the managed network proxy (direct when none applies; loopback stays local)"},
    {.name = "linux-sandbox-transparent-tcp", .kind = OPT_FLAG, .modes = OPT_BOTH,
     TO(L.sandbox_transparent_tcp),
     .help = "route the TCP of every sandboxed command with a managed network "
             "(enforceManagedNetwork) through the policy proxy, as if its networkProxy "
             "asked for transparentTcp: a TUN device in the sandbox, a synthetic-name "
             "resolver at 127.0.0.53, every connection decided like a SOCKS5 one"},
    {.name = "tcp-upstream-proxy", .meta = "HOST:PORT", .kind = OPT_PARSE, .modes = OPT_BOTH,
     TO(L.tcp_upstream_proxy), .parse = parse_host_port, .style = OPT_CLAP,
     .help = "the HTTP CONNECT proxy every raw TCP connection of the managed proxy's "
             "SOCKS5 side and of transparent TCP must leave through (`CONNECT host:port`, "
             "names unresolved); a request without allowUpstreamProxy, a loopback or a "
             "non-private local destination, and a refusing proxy get a connection error, "
             "never a direct connection"},
    {.name = "allow-unauthenticated", .kind = OPT_FLAG, .modes = OPT_BOTH,
     .section = SEC_WS_AUTH, TO(C.allow_unauthenticated),
     .help = "listen on an address that is not loopback without --ws-auth (refused "
             "otherwise: anyone who reaches it runs commands as this user)"},
    /* ---- WebSocket authentication ---- */
    {.name = "ws-auth", .meta = "MODE", .kind = OPT_CHOICE, .modes = OPT_BOTH,
     .section = SEC_WS_AUTH, TO(C.ws_auth), .choices = ws_auth_modes, .style = OPT_CLAP,
     .bad = "; expected capability-token or signed-bearer-token",
     .help = "capability-token: every WebSocket upgrade must carry `Authorization: Bearer "
             "<token>` (401 otherwise), the token given by --ws-token-file or "
             "--ws-token-sha256. signed-bearer-token: the bearer is an HS256 JWT signed with "
             "the secret in --ws-shared-secret-file; exp is required"},
    {.name = "ws-token-file", .meta = "PATH", .kind = OPT_STRING, .modes = OPT_BOTH,
     .section = SEC_WS_AUTH, TO(C.ws_token_file),
     .help = "file holding the capability token (surrounding whitespace trimmed; at least 16 "
             "bytes; refused when group or others may read it: chmod 600)"},
    {.name = "ws-token-sha256", .meta = "HEX", .kind = OPT_STRING, .modes = OPT_BOTH,
     .section = SEC_WS_AUTH, TO(C.ws_token_sha256),
     .help = "the token's SHA-256 as 64 hex digits, instead of the file"},
    {.name = "ws-shared-secret-file", .meta = "PATH", .kind = OPT_STRING, .modes = OPT_BOTH,
     .section = SEC_WS_AUTH, TO(C.ws_secret_file),
     .help = "signed-bearer-token: the file of the HS256 secret (at least 32 bytes; a relative path starts in the directory the server starts in)"},
    {.name = "ws-issuer", .meta = "ISS", .kind = OPT_STRING, .modes = OPT_BOTH,
     .section = SEC_WS_AUTH, TO(C.ws_issuer),
     .help = "signed-bearer-token: the iss claim must equal ISS (blanks trimmed)"},
    {.name = "ws-audience", .meta = "AUD", .kind = OPT_STRING, .modes = OPT_BOTH,
     .section = SEC_WS_AUTH, TO(C.ws_audience),
     .help = "signed-bearer-token: the aud claim must hold AUD (blanks trimmed)"},
    {.name = "ws-max-clock-skew-seconds", .meta = "SECONDS", .kind = OPT_COUNT,
     .modes = OPT_BOTH, .section = SEC_WS_AUTH, TO(C.ws_skew), .max = INT64_MAX,
     .expect = "seconds", .def = "30",
     .help = "signed-bearer-token: leeway for the exp and nbf claims"},
    /* ---- limits ---- */
    {.name = "max-connections", .meta = "N", .kind = OPT_COUNT, .modes = OPT_BOTH,
     .section = SEC_LIMITS, TO(L.max_connections), .min = 1, .max = 1000000,
     .expect = "a positive count", .def = "1024",
     .help = "open connections; one more gets HTTP 503"},
    {.name = "max-connections-per-peer", .meta = "N", .kind = OPT_COUNT, .modes = OPT_BOTH,
     .section = SEC_LIMITS, TO(L.max_connections_per_peer), .min = 1, .max = 1000000,
     .expect = "a positive count", .def = "512",
     .help = "open connections from one IP address; one more gets HTTP 503 naming it"},
    {.name = "max-processes", .meta = "N", .kind = OPT_COUNT, .modes = OPT_BOTH,
     .section = SEC_LIMITS, TO(L.max_processes), .min = 1, .max = 1000000,
     .expect = "a positive count", .def = "1024",
     .help = "unfinished processes per session; one more process/start fails with a "
             "JSON-RPC error"},
    {.name = "max-total-processes", .meta = "N", .kind = OPT_COUNT, .modes = OPT_BOTH,
     .section = SEC_LIMITS, TO(L.max_total_processes), .min = 1, .max = 1000000,
     .expect = "a positive count", .def = "4096",
     .help = "the same over all sessions"},
    {.name = "sandbox-max-processes", .meta = "N", .kind = OPT_COUNT, .modes = OPT_BOTH,
     .section = SEC_LIMITS, TO(L.sandbox_max_processes), .min = 2, .max = 4194304,
     .expect = "a count of at least 2", .def = "4096",
     .help = "processes and threads one sandboxed command may hold at once, its sandbox's "
             "init included; a fork past it fails with EAGAIN. RLIMIT_NPROC in the sandbox's "
             "user namespace, and for a server running as root (to whom the kernel never "
             "applies it) a pids cgroup per sandbox where one can be made (docs/SANDBOX.md)"},
    {.name = "sandbox-max-memory", .meta = "BYTES", .kind = OPT_BYTES, .modes = OPT_BOTH,
     .section = SEC_LIMITS, TO(L.sandbox_max_memory), .min = 0, .max = 1ull << 50,
     .expect = "a size in bytes (0: no cap)", .def = "0",
     .help = "memory and swap one sandboxed command may use, all its processes together: a "
             "memory cgroup per sandbox, past which the kernel's OOM killer ends a process "
             "of that sandbox (exit 137). 0, the default, is no cap. The server does not "
             "start when it asks for one and cannot make memory cgroups (docs/SANDBOX.md)"},
    {.name = "max-read-buffer-bytes", .meta = "BYTES", .kind = OPT_BYTES, .modes = OPT_BOTH,
     .section = SEC_LIMITS, TO(L.max_read_buffer), .min = 1, .max = 1ull << 40,
     .expect = "a positive byte count (K, M, G allowed)", .def = "256M",
     .help = "file content read into memory for fs/readFile replies at once, server-wide; "
             "a file of unknown size (/proc) that passes it fails"},
    {.name = "max-message-bytes", .meta = "BYTES", .kind = OPT_BYTES, .modes = OPT_BOTH,
     .section = SEC_LIMITS, TO(L.max_message), .min = 1, .max = 1ull << 40,
     .expect = "a positive byte count (K, M, G allowed)", .def = "64M",
     .help = "largest incoming message; a larger one closes the connection with WebSocket "
             "status 1009 (one frame is further capped at 16M)"},
    {.name = "max-queued-bytes", .meta = "BYTES", .kind = OPT_BYTES, .modes = OPT_BOTH,
     .section = SEC_LIMITS, TO(L.max_queued), .min = 1, .max = 1ull << 40,
     .expect = "a positive byte count (K, M, G allowed)", .def = "256M",
     .help = "unsent output backlog of a connection that stops reading before it is "
             "closed; its process output stays resumable"},
    {.name = "max-inflight-bytes", .meta = "BYTES", .kind = OPT_BYTES, .modes = OPT_BOTH,
     .section = SEC_LIMITS, TO(L.max_inflight), .min = 1, .max = 1ull << 40,
     .expect = "a positive byte count (K, M, G allowed)", .def = "768M",
     .help = "bytes on their way to clients, server-wide (replies being read, all queued "
             "output); past it reads wait and the slowest reader is closed"},
    {.name = "max-detached-sessions", .meta = "N", .kind = OPT_COUNT, .modes = OPT_BOTH,
     .section = SEC_LIMITS, TO(L.max_detached), .max = 1000000, .expect = "a count",
     .def = "64",
     .help = "disconnected sessions kept for resume; past it the one detached longest ago "
             "expires at once; also the most sessions session/keep may keep"},
    {.name = "max-session-keep", .meta = "SECONDS|forever", .kind = OPT_PARSE,
     .modes = OPT_BOTH, .section = SEC_LIMITS, TO(L.max_keep_ms), .parse = parse_keep,
     .expect = "seconds or `forever`", .def = "forever",
     .help = "the longest a client may keep its disconnected session and its processes "
             "(session/keep; 0: off)"},
    {.name = "allow-tcp-forwarding", .kind = OPT_FLAG, .modes = OPT_BOTH,
     .section = SEC_LIMITS, TO(L.tcp_forwarding),
     .help = "allow tcp/connect: clients may open TCP connections from this host, as ssh -L "
             "does (off by default)"},
    /* ---- audit ---- */
    {.name = "audit-log", .meta = "PATH", .kind = OPT_STRING, .modes = OPT_SERVE,
     .section = SEC_AUDIT, TO(C.audit_log),
     .help = "append one JSON record per client action to PATH (created 0600): logins and "
             "refusals, sessions, process starts and ends, file changes, http/request, "
             "managed-network decisions; each carries a sequence number and the SHA-256 of "
             "the record before it (`exec-server audit verify PATH` checks the chain). Never "
             "environment values, tokens, bodies or file contents. SIGHUP reopens it. Also "
             "EXEC_SERVER_AUDIT_LOG=PATH",
     .more = "Records are written by a thread of their own, never by the loop; a file that "
             "cannot be written is said once at error level, counted in /metrics "
             "(exec_server_audit_*) and tried again every second while records wait in a "
             "bounded queue (16 MiB; past it they are dropped and an audit.lost record counts "
             "them). At start the chain goes on from the file's last record."},
    {.name = "audit-required", .kind = OPT_FLAG, .modes = OPT_SERVE, .section = SEC_AUDIT,
     TO(C.audit_required), .env = "EXEC_SERVER_AUDIT_REQUIRED", .env_rule = OPT_ENV_TRUTHY,
     .help = "with --audit-log: while records cannot be written, refuse the requests that "
             "would make one (process/start and write, fs changes, http/request, tcp/connect) "
             "with a JSON-RPC error, instead of going on unrecorded"},
    {.name = "audit-fs-reads", .kind = OPT_FLAG, .modes = OPT_SERVE, .section = SEC_AUDIT,
     TO(C.audit_fs_reads), .env = "EXEC_SERVER_AUDIT_FS_READS", .env_rule = OPT_ENV_TRUTHY,
     .help = "with --audit-log: record fs reads too (readFile, readDirectory, walk, "
             "getMetadata, canonicalize, open for reading, readBlock), not only changes"},
    {.name = "record-dir", .meta = "DIR", .kind = OPT_STRING, .modes = OPT_SERVE,
     .section = SEC_AUDIT, TO(C.record_dir),
     .help = "record every PTY process as an asciicast v2 file in DIR (`asciinema play` and "
             "`asciinema cat` read them): its output and window size changes, named "
             "SESSION.PROCESS.STARTMS.cast (0600) and named in its process.start record. "
             "Also EXEC_SERVER_RECORD_DIR=DIR"},
    {.name = "record-input", .kind = OPT_FLAG, .modes = OPT_SERVE, .section = SEC_AUDIT,
     TO(C.record_input), .env = "EXEC_SERVER_RECORD_INPUT", .env_rule = OPT_ENV_TRUTHY,
     .help = "with --record-dir: recordings also hold what the client typed (passwords "
             "among it)"},
    /* ---- remote mode ---- */
    {.name = "remote", .meta = "URL", .kind = OPT_STRING, .modes = OPT_BOTH,
     .section = SEC_REMOTE, TO(C.remote_url),
     .help = "register this exec-server as a remote environment with the registry at URL "
             "(http:// or https://) and serve harnesses through its rendezvous; no local "
             "listener unless --listen is given",
},
    {.name = "environment-id", .meta = "ID", .kind = OPT_STRING, .modes = OPT_BOTH,
     .section = SEC_REMOTE, TO(C.environment_id),
     .help = "environment to register (required with --remote): 1 to 256 characters of "
             "A-Z, a-z, 0-9, _ and -"},
    {.name = "remote-transport", .meta = "noise|direct", .kind = OPT_CHOICE,
     .modes = OPT_BOTH, .section = SEC_REMOTE, TO(C.remote_transport),
     .choices = remote_transports, .bad = "unsupported", .expect = "`noise` or `direct`",
     .def = "noise",
     .help = "noise: harnesses through the rendezvous relay, Noise encrypted. direct: POST "
             ".../direct/register, then serve one plain JSON-RPC WebSocket at the URL it "
             "returns (wss://, or ws:// to a loopback host); requires --aws-sigv4",
     .more = "With direct the registration body is {\"transport\":\"direct_jsonrpc_v1\"} and "
             "the registry must be https (or loopback http). A dropped socket reconnects to "
             "the same URL after 0.5 s times 2^min(n,4), at most 5 s, plus up to 50% "
             "jitter; a 409 upgrade answer registers again; 401, 403 and other 4xx answers "
             "(but 408 and 429) are fatal."},
    {.name = "name", .meta = "NAME", .kind = OPT_STRING, .modes = OPT_BOTH,
     .section = SEC_REMOTE, TO(C.remote_name),
     .help = "human-readable environment name (kept, not sent)"},
    {.name = "registration-bearer-stdin", .kind = OPT_FLAG, .modes = OPT_BOTH,
     .section = SEC_REMOTE, TO(C.bearer_stdin),
     .help = "read one registration bearer token line (at most 16 KiB, newline-terminated) "
             "from standard input; otherwise CODEX_API_KEY, allowed only for https to "
             "openai.com / openai.org or a loopback registry, or for any registry when it "
             "is an `exec-server registry` token (exrt_...)"},
    {.name = "chatgpt-token-stdin", .kind = OPT_FLAG, .modes = OPT_SERVE,
     .section = SEC_REMOTE, TO(C.chatgpt_token_stdin),
     .help = "read a ChatGPT access token (a JWT, one line) from standard input, a pipe or "
             "socket, and register with it as the bearer, with its account in the "
             "chatgpt-account-id header; the registry must be https",
     .more = "The account is the token's chatgpt_account_id claim or --chatgpt-account-id. "
             "0.169.0 then loads a ChatGPT account policy over the network before it "
             "registers; that request is not public, so this exec-server does not make it."},
    {.name = "chatgpt-account-id", .meta = "ID", .kind = OPT_STRING, .modes = OPT_SERVE,
     .section = SEC_REMOTE, TO(C.chatgpt_account_id),
     .help = "with --chatgpt-token-stdin: the ChatGPT account; must match the token's "
             "account claim when it has one"},
    {.name = "executor-credential-stdin", .kind = OPT_FLAG, .modes = OPT_BOTH,
     .section = SEC_REMOTE, TO(C.credential_stdin),
     .help = "accepted, then refused at start: the format of 0.169.0's rotating executor "
             "credential frames is not public; use --registration-bearer-stdin or "
             "CODEX_API_KEY"},
    {.name = "use-agent-identity-auth", .kind = OPT_FLAG, .modes = OPT_BOTH,
     .section = SEC_REMOTE, TO(C.agent_identity),
     .help = "accepted, then refused at start (after the reference's CODEX_ACCESS_TOKEN "
             "check): the Agent task registration behind Agent Identity auth is not public; "
             "use --registration-bearer-stdin or CODEX_API_KEY"},
    {.name = "aws-sigv4", .kind = OPT_FLAG, .modes = OPT_BOTH, .section = SEC_REMOTE,
     TO(C.aws_sigv4),
     .help = "sign the direct registration and WebSocket upgrade with AWS SigV4; credentials "
             "from AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY and AWS_SESSION_TOKEN, else from "
             "the profile's static keys in the shared credentials and config files",
     .more = "The registration signs content-type;host;x-amz-date, the upgrade "
             "host;x-amz-date; a session token is sent as x-amz-security-token and signed. "
             "Not with --registration-bearer-stdin."},
    {.name = "aws-profile", .meta = "PROFILE", .kind = OPT_STRING, .modes = OPT_BOTH,
     .section = SEC_REMOTE, TO(C.aws_profile),
     .help = "with --aws-sigv4: take the keys (aws_access_key_id, aws_secret_access_key, "
             "aws_session_token) and region of this profile from the shared credentials "
             "file (AWS_SHARED_CREDENTIALS_FILE, default ~/.aws/credentials) and config file "
             "(AWS_CONFIG_FILE, default ~/.aws/config), ahead of AWS_ACCESS_KEY_ID and "
             "friends. Without it: the environment's keys, else profile AWS_PROFILE or "
             "default",
     .more = "Only static keys are read: a profile that assumes a role (role_arn), uses SSO "
             "or a credential_process is refused with that reason."},
    {.name = "aws-region", .meta = "REGION", .kind = OPT_STRING, .modes = OPT_BOTH,
     .section = SEC_REMOTE, TO(C.aws_region),
     .help = "signing region (default AWS_REGION, then AWS_DEFAULT_REGION, then the "
             "profile's region)"},
    {.name = "aws-service", .meta = "SERVICE", .kind = OPT_STRING, .modes = OPT_BOTH,
     .section = SEC_REMOTE, TO(C.aws_service), .def = "execute-api",
     .help = "signing service"},
    /* ---- forward ---- */
    {.name = "connect", .meta = "URL", .kind = OPT_STRING, .modes = OPT_FORWARD,
     .section = SEC_FORWARD, TO(C.connect_url),
     .help = "the destination exec-server (ws:// or wss://HOST:PORT[/PATH]) every harness "
             "stream is relayed to, one WebSocket per stream; wss trusts the system store, "
             "SSL_CERT_FILE or CODEX_CA_CERTIFICATE"},
    /* ---- Codex configuration (server/codex_config.c) ---- */
    {.name = "config", .short_name = 'c', .meta = "KEY=VALUE", .kind = OPT_LIST,
     .modes = OPT_BOTH, .section = SEC_CODEX, TO(C.codex_overrides),
     .help = "a Codex configuration override (repeatable), e.g. `-c model=\"o3\"`; "
             "checked, then ignored with a warning"},
    {.name = "enable", .meta = "FEATURE", .kind = OPT_LIST, .modes = OPT_BOTH,
     .section = SEC_CODEX, TO(C.codex_enable),
     .help = "a Codex feature to enable (repeatable); an unknown name is an error"},
    {.name = "disable", .meta = "FEATURE", .kind = OPT_LIST, .modes = OPT_BOTH,
     .section = SEC_CODEX, TO(C.codex_disable),
     .help = "a Codex feature to disable (repeatable); an unknown name is an error"},
    {.name = "strict-config", .kind = OPT_FLAG, .modes = OPT_BOTH, .section = SEC_CODEX,
     TO(C.strict_config),
     .help = "make a -c override that 0.171.0 would reject an error instead of a warning"},
    /* ---- the end ---- */
    {.name = "help", .short_name = 'h', .kind = OPT_ACTION, .modes = OPT_BOTH,
     .help = "print this help"},
    {.name = "version", .short_name = 'V', .kind = OPT_ACTION, .modes = OPT_BOTH,
     .help = "print the version"},
};
/* clang-format on */

const struct opt_table server_options = {
    .rows = rows,
    .count = sizeof rows / sizeof rows[0],
    .sections = sections,
    .section_count = sizeof sections / sizeof sections[0],
    .lone_modes = OPT_SERVE,
    .lone_note = "Not with `exec-server forward`.",
};

void server_options_help(FILE *out, unsigned mode)
{
    if (mode == OPT_FORWARD)
        fputs("Usage: exec-server forward --connect ws://HOST:PORT --remote URL "
              "--environment-id ID [OPTIONS]\n\n"
              "Registers like --remote, but relays every harness stream, once its Noise\n"
              "handshake is done, to the exec-server WebSocket at --connect (one connection\n"
              "per stream, JSON-RPC messages unchanged) instead of serving it here. A\n"
              "destination that refuses or closes resets the stream.\n",
              out);
    else
        fputs("Usage: exec-server [OPTIONS]\n"
              "       exec-server forward --connect ws://HOST:PORT --remote URL "
              "--environment-id ID [OPTIONS]\n"
              "       exec-server registry --database URL [OPTIONS]\n"
              "       exec-server audit verify FILE...\n\n"
              "Runs and drives processes and files on this machine for a remote client, over\n"
              "one WebSocket (or stdin/stdout) speaking JSON-RPC. `exec-server forward --help`\n"
              "describes the forward command, `exec-server registry --help` the registry and\n"
              "rendezvous for a fleet of remote exec-servers, `exec-server audit --help` the\n"
              "check of audit logs (--audit-log).\n",
              out);
    options_print_help(out, &server_options, mode);
}

void server_options_man(FILE *out)
{
    fputs(".SH OPTIONS\n", out);
    options_print_man(out, &server_options);
}
