#!/usr/bin/env python3
"""Every global symbol the server libraries define carries its module's prefix
(house style: `module_verb`, like libuv), so no un-prefixed name (`failed`,
`run_op`, `copy_tree` were) can clash or hide where it lives.

The exec-client program (--program FILE) holds its own to `cli_`: its names were
`slurp`, `die_usage`, `fs_die`, namesakes of the server's that tools matching names
took for calls between the two.

Usage: test_symbols.py LIB.a... [--program EXE] (ctest passes execcore, execproto and
exec-client). The prefixes are the module names below; a new module adds its prefix
here."""
import subprocess
import sys

PREFIXES = (
    # floor: util, proto, core, crypto
    "buf_", "xmalloc", "xcalloc", "xrealloc", "xstrdup", "xstrndup", "xmemdup", "xasprintf",
    "oserr_", "fdframe_", "fdclose_", "bigbuf_", "envv_", "hostaddr_", "procfs_",
    "base64_", "hex_", "sha1", "json_load_", "http_", "uri_", "utf8_", "ws_frame_", "log_",
    "metrics_", "limits_", "server_limits", "inflight_", "readiness_", "host_env_", "own_ports_", "mlkem",
    "noise_",
    "relay_",
    "crypto_",
    # transport, rpc
    "conn_", "ws_", "stdio_", "tls_", "auth_", "jwt_", "rpc_", "pdec_",
    # the audit trail (src/audit)
    "audit_",
    "remote_", "registry_", "rv_ws_", "sigv4_", "aws_profile_", "direct_conn_",
    # domains and wiring
    "session_", "env_config_", "proc_", "process_", "spawn_", "spawner_", "guardian_",
    "event_log_", "seccomp_", "net_guard_", "cgroup_caps_", "notify_", "path_rules_", "sig_guard_",
    "user_budgets_",
    "env_", "fs_", "path_watch_", "capability_roots_", "caproots_", "sandbox_", "curl_", "server_",
    "reload_", "tcp_", "config_", "options_", "codex_config_",
    "netproxy_", "np_",
    "fleet_", "strmap_",
    # lwIP's own name, defined to take the place of its slow checksum (np_stack.c)
    "lwip_standard_chksum",
)


# The exec-client program: its modules' prefix, and what the C runtime and the
# linker define in every program.
PROGRAM_PREFIXES = ("cli_",)
PROGRAM_RUNTIME = {"main", "_start", "_init", "_fini", "_IO_stdin_used", "_edata", "_end",
                   "data_start", "_DYNAMIC", "_GLOBAL_OFFSET_TABLE_"}


def program_symbols(exe):
    out = subprocess.run(["nm", "-g", "--defined-only", exe], capture_output=True, text=True,
                         check=True).stdout
    bad = []
    for line in out.splitlines():
        name = line.split()[-1]
        if name.startswith("__") or "@" in name or name in PROGRAM_RUNTIME or \
                name.startswith(PROGRAM_PREFIXES):
            continue
        bad.append("%s: %s" % (exe.rsplit("/", 1)[-1], name))
    return bad


def main():
    bad = []
    args = sys.argv[1:]
    if "--program" in args:
        i = args.index("--program")
        bad += program_symbols(args[i + 1])
        del args[i:i + 2]
    for lib in args:
        out = subprocess.run(["nm", "-g", "--defined-only", lib], capture_output=True,
                             text=True, check=True).stdout
        for line in out.splitlines():
            parts = line.split()
            if len(parts) != 3 or parts[1] not in "TDBRVW" and parts[1] not in "tdbr":
                continue
            name = parts[2]
            if name.startswith("__") or name.startswith(PREFIXES):
                continue
            bad.append("%s: %s" % (lib.rsplit("/", 1)[-1], name))
    for b in sorted(set(bad)):
        print("no module prefix:", b)
    print("symbols: %d without a module prefix" % len(set(bad)))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
