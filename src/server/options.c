/* options: the option table and what is derived from it (see options.h). */
#include "server/options.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/env_vars.h"
#include "core/limits.h"
#include "core/log.h"
#include "server/config.h"
#include "util/mem.h"

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

const struct opt_section options_sections[] = {
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
const size_t options_section_count = sizeof options_sections / sizeof options_sections[0];

/* Packed as written, one row per entry: */
/* clang-format off */
const struct opt_spec options_table[] = {
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
const size_t options_count = sizeof options_table / sizeof options_table[0];

const struct opt_spec *options_find(const char *name)
{
    for (size_t i = 0; i < options_count; i++)
        if (strcmp(options_table[i].name, name) == 0) return &options_table[i];
    return NULL;
}

/* ---- values ---- */

static void store_uint(const struct opt_spec *o, unsigned long long v)
{
    if (o->size == sizeof(unsigned))
        *(unsigned *)o->target = (unsigned)v;
    else
        *(uint64_t *)o->target = v;
}

/* A count, or with bytes a size with an optional K/M/G suffix: digits only (no sign,
 * no blanks), within [min, max]. Returns 0 or -EINVAL. */
static int parse_count(const char *val, bool bytes, const struct opt_spec *o,
                       unsigned long long *out)
{
    char *end;
    errno = 0;
    if (!isdigit((unsigned char)val[0])) return -EINVAL;
    unsigned long long v = strtoull(val, &end, 10);
    if (errno) return -EINVAL;
    if (bytes && *end) {
        int shift = *end == 'K' || *end == 'k'   ? 10
                    : *end == 'M' || *end == 'm' ? 20
                    : *end == 'G' || *end == 'g' ? 30
                                                 : -1;
        if (shift < 0 || end[1] || v > (o->max >> shift)) return -EINVAL;
        v <<= shift;
        end++;
    }
    if (*end || v > o->max || v < o->min) return -EINVAL;
    *out = v;
    return 0;
}

static int parse_seconds(const char *val, const struct opt_spec *o, uint64_t *ms)
{
    char *end;
    errno = 0;
    double secs = strtod(val, &end);
    if (errno || *end || end == val || isnan(secs) || secs < (double)o->min ||
        secs > (double)o->max)
        return -EINVAL;
    *ms = (uint64_t)(secs * 1000);
    return 0;
}

static int parse_choice(const char *val, const struct opt_spec *o, int *index)
{
    for (int i = 0; o->choices[i]; i++)
        if (strcmp(val, o->choices[i]) == 0) {
            *index = i;
            return 0;
        }
    return -EINVAL;
}

static void bad_value(const struct opt_spec *o, const char *value, const char *why, char *err,
                      size_t n)
{
    if (o->style == OPT_CLAP)
        snprintf(err, n, "invalid value '%s' for '--%s <%s>'%s", value, o->name, o->meta,
                 why      ? why
                 : o->bad ? o->bad
                          : "");
    else
        snprintf(err, n, "%s --%s `%s`; expected %s", o->bad ? o->bad : "invalid", o->name, value,
                 o->expect);
}

int options_store(const struct opt_spec *o, const char *value, char *err, size_t errlen)
{
    unsigned long long v;
    uint64_t ms;
    int index, r = 0;
    const char *why = NULL;
    switch (o->kind) {
    case OPT_ACTION: break;
    case OPT_FLAG: *(bool *)o->target = true; break;
    case OPT_STRING: *(const char **)o->target = value; break;
    case OPT_LIST: {
        struct opt_list *l = o->target;
        const char **grown = realloc(l->v, (l->n + 1) * sizeof *l->v);
        if (!grown) abort();
        l->v = grown;
        l->v[l->n++] = value;
        break;
    }
    case OPT_COUNT:
    case OPT_BYTES:
        r = parse_count(value, o->kind == OPT_BYTES, o, &v);
        if (r == 0) store_uint(o, v);
        break;
    case OPT_SECONDS:
        r = parse_seconds(value, o, &ms);
        if (r == 0) *(uint64_t *)o->target = ms;
        break;
    case OPT_CHOICE:
        r = parse_choice(value, o, &index);
        if (r == 0) *(int *)o->target = index;
        break;
    case OPT_PARSE: r = o->parse(value, o->target, &why); break;
    }
    if (r < 0) bad_value(o, value, why, err, errlen);
    return r < 0 ? -EINVAL : 0;
}

void options_reset(void)
{
    options_reset_rows(options_table, options_count);
}

void options_reset_rows(const struct opt_spec *rows, size_t count)
{
    for (size_t i = 0; i < count; i++) {
        const struct opt_spec *o = &rows[i];
        switch (o->kind) {
        case OPT_ACTION: continue;
        case OPT_FLAG: *(bool *)o->target = false; break;
        case OPT_STRING: *(const char **)o->target = NULL; break;
        case OPT_LIST: {
            struct opt_list *l = o->target;
            free(l->v);
            *l = (struct opt_list){0};
            break;
        }
        case OPT_CHOICE: *(int *)o->target = -1; break;
        default: /* numbers: zero unless they have a default below */
            memset(o->target, 0, o->size);
            break;
        }
        char err[256];
        /* A default that does not parse is a mistake in the table itself. */
        if (o->def && options_store(o, o->def, err, sizeof err) < 0) abort();
    }
}

/* ---- --help ---- */

/* Writes text wrapped to width, every line but the first indented by indent
 * (the first continues at column col). */
static void wrap(FILE *out, const char *text, int col, int indent, int width)
{
    const char *p = text;
    while (*p) {
        while (*p == ' ')
            p++;
        size_t w = strcspn(p, " ");
        if (col > indent && col + 1 + (int)w > width) {
            fprintf(out, "\n%*s", indent, "");
            col = indent;
        } else if (col > indent) {
            fputc(' ', out);
            col++;
        }
        fwrite(p, 1, w, out);
        col += (int)w;
        p += w;
    }
    fputc('\n', out);
}

/* The help text with its default and environment variable, into b. */
static void describe(const struct opt_spec *o, char *b, size_t n)
{
    int k = snprintf(b, n, "%s", o->help);
    if (o->def && k >= 0 && (size_t)k < n)
        k += snprintf(b + k, n - (size_t)k, " (default %s%s%s)", o->def, o->def_note ? ", " : "",
                      o->def_note ? o->def_note : "");
    if (o->env && k >= 0 && (size_t)k < n)
        snprintf(b + k, n - (size_t)k, " (also %s=%s)", o->env,
                 o->env_rule == OPT_ENV_BOOL ? "true" : "1");
}

static void help_row(FILE *out, const struct opt_spec *o)
{
    char label[96], text[2048];
    int n = snprintf(label, sizeof label, "  %s%s%s--%s%s%s", o->short_name ? "-" : "",
                     o->short_name ? (char[2]){o->short_name, 0} : "", o->short_name ? ", " : "",
                     o->name, o->meta ? " " : "", o->meta ? o->meta : "");
    describe(o, text, sizeof text);
    fputs(label, out);
    if (n <= 24) {
        fprintf(out, "%*s", 26 - n, "");
        wrap(out, text, 26, 26, 90);
    } else {
        fprintf(out, "\n%26s", "");
        wrap(out, text, 26, 26, 90);
    }
}

void options_print_rows(FILE *out, const struct opt_spec *rows, size_t count)
{
    for (size_t i = 0; i < count; i++)
        help_row(out, &rows[i]);
}

void options_print_help(FILE *out, unsigned mode)
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
    for (size_t s = 0; s < options_section_count; s++) {
        bool any = false;
        for (size_t i = 0; i < options_count; i++) {
            const struct opt_spec *o = &options_table[i];
            if (o->section != s || !(o->modes & mode)) continue;
            if (!any) {
                fprintf(out, "\n%s:\n", options_sections[s].title);
                if (options_sections[s].intro) fprintf(out, "  %s\n", options_sections[s].intro);
                any = true;
            }
            help_row(out, o);
        }
    }
}

/* ---- the man page's OPTIONS section ---- */

/* Writes text escaped for roff; `x` becomes bold x. */
static void roff_text(FILE *out, const char *text)
{
    bool bold = false;
    if (*text == '.' || *text == '\'') fputs("\\&", out);
    for (const char *p = text; *p; p++) {
        if (*p == '`') {
            fputs(bold ? "\\fR" : "\\fB", out);
            bold = !bold;
        } else if (*p == '\\') {
            fputs("\\e", out);
        } else if (*p == '-') {
            fputs("\\-", out);
        } else {
            fputc(*p, out);
        }
    }
    if (bold) fputs("\\fR", out);
}

static void man_row(FILE *out, const struct opt_spec *o)
{
    fputs(".TP\n", out);
    if (o->short_name) fprintf(out, "\\fB\\-%c\\fR, ", o->short_name);
    fputs("\\fB\\-\\-", out);
    roff_text(out, o->name);
    fputs("\\fR", out);
    if (o->meta) {
        fputs(" \\fI", out);
        roff_text(out, o->meta);
        fputs("\\fR", out);
    }
    fputc('\n', out);
    char text[2048];
    describe(o, text, sizeof text);
    roff_text(out, text);
    fputs(".\n", out);
    if (o->modes == OPT_SERVE) fputs("Not with \\fBexec\\-server forward\\fR.\n", out);
    if (o->more) {
        roff_text(out, o->more);
        fputc('\n', out);
    }
}

void options_print_man_rows(FILE *out, const struct opt_spec *rows, size_t count)
{
    for (size_t i = 0; i < count; i++)
        man_row(out, &rows[i]);
}

void options_print_man(FILE *out)
{
    fputs(".SH OPTIONS\n", out);
    for (size_t s = 0; s < options_section_count; s++) {
        fputs(".SS ", out);
        roff_text(out, options_sections[s].title);
        fputc('\n', out);
        if (options_sections[s].intro) {
            roff_text(out, options_sections[s].intro);
            fputc('\n', out);
        }
        for (size_t i = 0; i < options_count; i++)
            if (options_table[i].section == s) man_row(out, &options_table[i]);
    }
}

/* ---- environment variables ---- */

#define E env_vars

/* clang-format off */
const struct opt_env options_env_table[] = {
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
const size_t options_env_count = sizeof options_env_table / sizeof options_env_table[0];

void options_read_env(void)
{
    for (size_t i = 0; i < options_env_count; i++) {
        const char *v = getenv(options_env_table[i].name);
        free((char *)*options_env_table[i].target); /* a second reading replaces the first */
        /* A copy: setenv (process_path.c moves PATH) may replace the string. */
        *options_env_table[i].target = v ? xstrdup(v) : NULL;
    }
}

int options_apply_env(const unsigned *given)
{
    for (size_t i = 0; i < options_count; i++) {
        const struct opt_spec *o = &options_table[i];
        const char *v = o->env ? getenv(o->env) : NULL;
        if (!v || given[i] || o->kind != OPT_FLAG) continue;
        if (o->env_rule == OPT_ENV_TRUTHY) {
            if (*v && strcmp(v, "0") != 0 && strcmp(v, "false") != 0) *(bool *)o->target = true;
        } else if (o->env_rule == OPT_ENV_BOOL) {
            if (strcmp(v, "true") != 0 && strcmp(v, "false") != 0) {
                fprintf(stderr,
                        "exec-server: invalid value '%s' for '--%s'\n  (from %s: "
                        "expected true or false)\n",
                        v, o->name, o->env);
                return 2;
            }
            *(bool *)o->target = strcmp(v, "true") == 0;
        }
    }
    return CONFIG_OK;
}
