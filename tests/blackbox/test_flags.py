#!/usr/bin/env python3
"""The flags of `codex exec-server` 0.169.0 (issue 22, docs/FLAGS.md): every case runs the
same arguments against ours and, when it is installed, the reference, and compares the
exit status and the first line of standard error (the "exec-server: ", "error: " and
"Error: " prefixes aside). A case says what must agree:

  same      exit status and first line
  status    exit status only; ours must also print `ours` (a deliberate difference in
            wording, or a step whose wire is not public: docs/FLAGS.md says which)

A server that starts (prints its ws:// URL) is stopped with SIGTERM; its "status" is
"started". Then the functional checks: --concurrent-requests queues in arrival order
(and, ours, lets process/terminate pass), --chatgpt-token-stdin sends the token and the
account header to an https registry. CODEX_HOME is a fresh directory outside /tmp (the
reference warns on a CODEX_HOME under /tmp)."""
import base64
import glob
import http.server
import json
import os
import shutil
import ssl
import subprocess
import tempfile
import threading

from harness import *  # noqa
import codex_ref  # noqa: E402

REF = find_reference()


def find_reference_171():
    """The 0.171.0 reference (codex_ref: the ctest fixture installs it), or None."""
    try:
        return codex_ref.require("0.171.0")
    except codex_ref.Unavailable as e:
        print("note: %s" % e)
        return None


REF_171 = find_reference_171()
HOME = tempfile.mkdtemp(prefix="execbb-flags-", dir="/var/tmp")
R = "http://127.0.0.1:9"
RS = "https://127.0.0.1:9"


def jwt(claims):
    def seg(obj):
        return base64.urlsafe_b64encode(json.dumps(obj).encode()).rstrip(b"=").decode()
    return "%s.%s.%s" % (seg({"alg": "RS256", "typ": "JWT"}), seg(claims), "c2ln")


ACCT = {"https://api.openai.com/auth": {"chatgpt_account_id": "acct-1"}}
TOKEN_ACCT = (jwt(dict(ACCT, exp=4102444800)) + "\n").encode()
TOKEN_BARE = (jwt({"exp": 4102444800}) + "\n").encode()


def base_env(extra=None):
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("CODEX_", "AWS_"))}
    env.update(CODEX_HOME=HOME, AWS_SHARED_CREDENTIALS_FILE="/nonexistent/credentials",
               AWS_CONFIG_FILE="/nonexistent/config")
    env.update(extra or {})
    return env


def run(kind, args, stdin=None, env=None, ref=None):
    """(status, first stderr line) of one run; status "started" for a server that
    printed its URL (it is then stopped). ref: the reference binary (default REF)."""
    if kind == "ref":
        cmd = [ref or REF, "exec-server"] + args
    else:
        cmd = WRAPPER + [SERVER_PATH] + args
    p = subprocess.Popen(cmd, stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=base_env(env),
                         cwd=HOME)
    if stdin is not None:
        try:
            p.stdin.write(stdin)
            p.stdin.close()
        except BrokenPipeError:
            pass
        p.stdin = None  # closed: communicate() must not touch it
    line = b""
    deadline = time.monotonic() + DEFAULT_TIMEOUT
    fd = p.stdout.fileno()
    while not line.endswith(b"\n") and time.monotonic() < deadline:
        r, _, _ = select.select([fd], [], [], max(0.0, deadline - time.monotonic()))
        if not r:
            break
        b = os.read(fd, 1)
        if not b:
            break
        line += b
    started = line.startswith(b"ws://")
    if started:
        p.send_signal(signal.SIGTERM)
    try:
        _, err = p.communicate(timeout=DEFAULT_TIMEOUT)
    except subprocess.TimeoutExpired:
        p.kill()
        _, err = p.communicate()
        raise AssertionError("%s %s did not finish; stderr: %r" % (kind, args, err[-500:]))
    text = err.decode("utf-8", "replace")
    if kind == "ours":
        for bad in ("AddressSanitizer", "runtime error:", "LeakSanitizer"):
            assert bad not in text, text[-3000:]
    if started:
        assert kind == "ref" or p.returncode == 0, (args, p.returncode, text)
    # ours says once at start which sandbox it gives (sandbox/sandbox_host.h): a line
    # the reference does not print, left out of the comparison
    lines = [l for l in text.splitlines() if not (kind == "ours" and " exec-server: sandbox: " in l)]
    first = lines[0] if lines else ""
    return ("started" if started else p.returncode), normalize(first)


def normalize(line):
    # Our log lines: "2026-...Z warn  exec-server: text" -> "warn: text".
    m = re.match(r"^\d{4}-\d\d-\d\dT\S+ (\w+)\s+exec-server: (.*)$", line)
    if m:
        return "%s: %s" % (m.group(1), m.group(2))
    for prefix in ("exec-server: ", "error: ", "Error: "):
        if line.startswith(prefix):
            return line[len(prefix):]
    return line


import re  # noqa: E402  (normalize)

# (args, expectation, ours: status and a piece of the first line, stdin, env)
CASES = [
    # --linux-sandbox-pid-namespace
    (["--linux-sandbox-pid-namespace", "foo"], "same", 2, "expected 'isolate' or 'inherit'"),
    (["--linux-sandbox-pid-namespace", "inherit"], "same", "started", ""),
    (["--linux-sandbox-pid-namespace=isolate"], "same", "started", ""),
    (["--linux-sandbox-pid-namespace"], "same", 2,
     "a value is required for '--linux-sandbox-pid-namespace <MODE>' but none was supplied"),
    # --concurrent-requests
    (["--concurrent-requests", "4"], "same", "started", ""),
    (["--concurrent-requests", "0"], "same", 2, "number would be zero"),
    (["--concurrent-requests", "abc"], "same", 2, "invalid digit"),
    (["--concurrent-requests", ""], "same", 2, "empty string"),
    (["--concurrent-requests", "99999999999999999999"], "same", 2, "too large"),
    # -c / --config, --strict-config
    (["--strict-config"], "same", "started", ""),
    (["-c", "foo=bar"], "status", "started", "warn: -c foo=bar: ignored"),
    (["--config", 'model="o3"', "--strict-config"], "status", "started", "warn: -c model"),
    (["-c", "foo=bar", "--strict-config"], "same", 1, "unknown configuration field `foo`"),
    (["-c", "foo", "--strict-config"], "same", 1, "missing '='"),
    (["-c", "features.foo=true", "--strict-config"], "same", 1, "`features.foo`"),
    (["-c", "features.shell_snapshot=true", "--strict-config"], "status", "started",
     "warn: -c features.shell_snapshot=true"),
    (["-c", "features.shell_snapshot=maybe", "--strict-config"], "same", 1,
     'string "maybe", expected a boolean'),
    (["-c", "features.shell_snapshot=1", "--strict-config"], "same", 1,
     "integer `1`, expected a boolean"),
    (["-c", "profile=x", "--strict-config"], "same", 1, "legacy `profile"),
    (["-c", "tui.theme=x", "--strict-config"], "status", "started", "warn: -c tui.theme"),
    # --enable / --disable
    (["--enable", "foo"], "same", 1, "Unknown feature flag: foo"),
    (["--disable", "foo"], "same", 1, "Unknown feature flag: foo"),
    (["--enable", "shell_snapshot", "--disable", "unified_exec"], "same", "started", ""),
    (["--enable", "collab"], "same", "started", ""),
    (["--enable", "foo", "--listen", "http://x"], "same", 1, "Unknown feature flag"),
    (["--enable"], "status", 2, "needs a value"),
    # --proxy-private-ips-via-upstream
    (["--proxy-private-ips-via-upstream"], "same", "started", ""),
    ([], "same", 2, "invalid value 'bogus' for '--proxy-private-ips-via-upstream'", None,
     {"CODEX_EXEC_SERVER_PROXY_PRIVATE_IPS_VIA_UPSTREAM": "bogus"}),
    ([], "same", "started", "", None, {"CODEX_EXEC_SERVER_PROXY_PRIVATE_IPS_VIA_UPSTREAM": "true"}),
    (["--proxy-private-ips-via-upstream=true"], "status", 2, "unknown argument"),
    # --chatgpt-token-stdin / --chatgpt-account-id
    (["--chatgpt-token-stdin"], "status", 2, "requires --remote"),
    (["--chatgpt-account-id", "x"], "status", 2, "requires --chatgpt-token-stdin"),
    (["--remote", R, "--environment-id", "e", "--chatgpt-token-stdin"], "same", 1,
     "must use HTTPS"),
    (["--remote", "https://u@127.0.0.1:9", "--environment-id", "e", "--chatgpt-token-stdin"],
     "same", 1, "must use HTTPS"),
    (["--remote", RS, "--environment-id", "e", "--chatgpt-token-stdin"], "same", 1,
     "must be a pipe or socket"),
    (["--remote", RS, "--environment-id", "e", "--chatgpt-token-stdin"], "same", 1,
     "bounded, newline-terminated", b"tok"),
    (["--remote", RS, "--environment-id", "e", "--chatgpt-token-stdin"], "same", 1,
     "invalid ChatGPT access token", b"tok\n"),
    (["--remote", RS, "--environment-id", "e", "--chatgpt-token-stdin"], "same", 1,
     "token has no ChatGPT account ID", TOKEN_BARE),
    (["--remote", RS, "--environment-id", "e", "--chatgpt-token-stdin",
      "--chatgpt-account-id", "other"], "same", 1, "does not match the token", TOKEN_ACCT),
    # 0.169.0 then loads an account policy (not public); ours registers at once.
    (["--remote", RS, "--environment-id", "e", "--chatgpt-token-stdin"], "status", 1,
     "", TOKEN_ACCT),
    (["--remote", RS, "--environment-id", "e", "--chatgpt-token-stdin",
      "--registration-bearer-stdin"], "same", 2,
     "the argument '--chatgpt-token-stdin' cannot be used with '--registration-bearer-stdin'"),
    (["--remote", RS, "--environment-id", "e", "--executor-credential-stdin",
      "--chatgpt-token-stdin"], "same", 2, "cannot be used with '--chatgpt-token-stdin'"),
    (["forward", "--connect", "ws://127.0.0.1:1", "--remote", RS, "--environment-id", "e",
      "--chatgpt-token-stdin"], "status", 2, "not an option of `exec-server forward`"),
    # --executor-credential-stdin: the frame format is not public
    (["--executor-credential-stdin"], "status", 2, "requires --remote"),
    (["--remote", R, "--environment-id", "e", "--executor-credential-stdin"], "status", 1,
     "frames codex 0.169.0 reads is not public"),
    (["--remote", R, "--environment-id", "e", "--registration-bearer-stdin",
      "--executor-credential-stdin"], "same", 2,
     "the argument '--registration-bearer-stdin' cannot be used with "
     "'--executor-credential-stdin'"),
    # --use-agent-identity-auth: the Agent task exchange is not public
    (["--use-agent-identity-auth"], "status", 2, "requires --remote"),
    (["--remote", R, "--environment-id", "e", "--use-agent-identity-auth"], "same", 1,
     "CODEX_ACCESS_TOKEN is required when --use-agent-identity-auth is set"),
    (["--remote", R, "--environment-id", "e", "--use-agent-identity-auth"], "status", 1,
     "is not public", None, {"CODEX_ACCESS_TOKEN": "x.y.z"}),
    (["--remote", R, "--environment-id", "e", "--use-agent-identity-auth", "--aws-sigv4",
      "--remote-transport", "direct"], "same", 2,
     "the argument '--use-agent-identity-auth' cannot be used with '--aws-sigv4'"),
    # --aws-profile (the shared files; see also test_remote_direct.py)
    (["--aws-profile", "p"], "status", 2, "requires --aws-sigv4"),
    (["--remote", R, "--environment-id", "e", "--remote-transport", "direct", "--aws-sigv4",
      "--aws-profile", "p"], "status", 1, "AWS profile `p` not found"),
    # long-standing differences in wording (same status)
    (["--bogus"], "status", 2, "unknown argument `--bogus`"),
    (["forward", "--connect", "ws://127.0.0.1:1", "--remote", R, "--environment-id", "e",
      "--concurrent-requests", "2"], "status", 2, "not an option of `exec-server forward`"),
]


# What 0.171.0 added (issue 35): compared with the 0.171.0 reference.
TCP_UP = "--tcp-upstream-proxy"
CASES_171 = [
    (["--linux-sandbox-transparent-tcp"], "same", "started", ""),
    (["forward", "--linux-sandbox-transparent-tcp"], "status", 2, ""),
    ([TCP_UP, "proxy.example:3128"], "same", "started", ""),
    ([TCP_UP, "[::1]:8080"], "same", "started", ""),
    ([TCP_UP, "10.1.2.3:80", "--linux-sandbox-transparent-tcp"], "same", "started", ""),
    ([TCP_UP + "=h:065535"], "same", "started", ""),
    ([TCP_UP, "foo"], "same", 2, "missing port"),
    ([TCP_UP, ""], "same", 2, "missing port"),
    ([TCP_UP, "host:0"], "same", 2, "TCP upstream proxy port must be nonzero"),
    ([TCP_UP, "[::1]:0"], "same", 2, "TCP upstream proxy port must be nonzero"),
    ([TCP_UP, "host:99999"], "same", 2, "parse port as u16"),
    ([TCP_UP, "host:"], "same", 2, "parse port as u16"),
    ([TCP_UP, "host:8x"], "same", 2, "parse port as u16"),
    ([TCP_UP, "http://h:1"], "same", 2, "parse host from host-with-port"),
    ([TCP_UP, ":80"], "same", 2, "parse host from host-with-port"),
    ([TCP_UP, "a b:0"], "same", 2, "parse host from host-with-port"),
    ([TCP_UP, "h-:80"], "same", 2, "parse host from host-with-port"),
    ([TCP_UP, "a..b:80"], "same", 2, "parse host from host-with-port"),
    ([TCP_UP, "[x]:80"], "same", 2, "parse host from host-with-port"),
    ([TCP_UP, "::1:80"], "same", 2, "missing brackets for IPv6 address with port"),
    ([TCP_UP], "same", 2,
     "a value is required for '--tcp-upstream-proxy <HOST:PORT>' but none was supplied"),
    (["--enable", "utc_environment_date", "--disable", "safe_image_decoder"], "same", "started",
     ""),
    (["-c", "features.per_environment_context=true", "--strict-config"], "status", "started",
     "warn: -c features.per_environment_context=true"),
    (["-c", "features.catalog_apps_instructions=1", "--strict-config"], "same", 1,
     "integer `1`, expected a boolean"),
    (["-c", "rollout_trace={}", "--strict-config"], "status", "started", "warn: -c rollout_trace"),
    (["-c", "network.transparent_tcp=true", "--strict-config"], "same", 1,
     "unknown configuration field `network`"),
]


def compare(cases, ref):
    failures = []
    for case in cases:
        args, how, status, piece = case[:4]
        stdin = case[4] if len(case) > 4 else None
        env = case[5] if len(case) > 5 else None
        got = run("ours", args, stdin, env)
        if got[0] != status or piece not in got[1]:
            failures.append("ours %s: got %r, want status %r with %r" % (args, got, status,
                                                                        piece))
            continue
        if ref is None:
            continue
        theirs = run("ref", args, stdin, env, ref=ref)
        if theirs[0] != got[0] or (how == "same" and theirs[1] != got[1]):
            failures.append("%s %s: ours %r, reference %r" % (how, args, got, theirs))
    return failures


@needs_own_server
def test_flags_of_0_171(_):
    """The flags and feature names 0.171.0 added, against the 0.171.0 reference (ours
    alone when it is not installed)."""
    if IS_REF:
        raise TestSkip("compares ours with the reference itself")
    failures = compare(CASES_171, REF_171)
    assert not failures, "\n".join(failures)


@needs_own_server
def test_flags_against_the_reference(_):
    if IS_REF:
        raise TestSkip("compares ours with the reference itself")
    failures = compare(CASES, REF)
    assert not failures, "\n".join(failures)


def order_of_answers(s, ids, timeout):
    names = {i: n for n, i in ids.items()}
    order = []
    deadline = time.monotonic() + timeout
    while len(order) < len(ids):
        left = deadline - time.monotonic()
        if left <= 0:
            s.fail("answers so far: %s" % order)
        m = s.pump(left)
        if m is None:
            s.fail("connection closed; answers so far: %s" % order)
        if m.get("id") in names and ("result" in m or "error" in m):
            order.append(names[m["id"]])
    return order


@needs_own_server
def test_concurrent_requests_queue_in_arrival_order(_):
    """--concurrent-requests 1: a long poll holds the one slot; the requests behind it
    are answered after it, in order. Ours lets process/terminate pass the queue
    (PROTOCOL.md 3.4 rule 5); 0.169.0 does not (docs/FLAGS.md)."""
    with Server(extra_args=["--concurrent-requests", "1"]) as srv:
        s = srv.session()
        s.start("lp", ["sleep", "30"])
        ids = {"read": s.send_request("process/read",
                                      {"processId": "lp", "afterSeq": 0, "waitMs": 3000}),
               "status": s.send_request("environment/status", None),
               "terminate": s.send_request("process/terminate", {"processId": "lp"})}
        order = order_of_answers(s, ids, 20)
        if srv.reference:
            assert order == ["read", "status", "terminate"], order
        else:
            assert order == ["terminate", "read", "status"], order
        s.close()


@needs_own_server
def test_concurrent_requests_two_slots(_):
    """--concurrent-requests 2: two long polls take both slots; a third request waits
    for one of them (the one that ends first: its process is terminated)."""
    if IS_REF:
        raise TestSkip("the reference lets process/terminate wait too")
    with Server(extra_args=["--concurrent-requests", "2"]) as srv:
        s = srv.session()
        s.start("a", ["sleep", "30"])
        s.start("b", ["sleep", "30"])
        read_b = s.send_request("process/read", {"processId": "b", "afterSeq": 0,
                                                  "waitMs": 60000})
        ids = {"read-a": s.send_request("process/read",
                                        {"processId": "a", "afterSeq": 0, "waitMs": 60000}),
               "status": s.send_request("environment/status", None),
               "kill-a": s.send_request("process/terminate", {"processId": "a"})}
        # read-b and read-a hold both slots: status waits until a's read ends, which
        # happens when a is killed; read-b is still running after all three.
        order = order_of_answers(s, ids, 20)
        assert order == ["kill-a", "read-a", "status"], order
        assert s.key(read_b) in s.pending, "read-b answered before its process ended"
        s.call("process/terminate", {"processId": "b"})
        s.wait_response(read_b)
        s.close()


@needs_own_server
def test_concurrent_requests_initialized_waits_in_line(_):
    """An `initialized` that arrives behind waiting requests waits with them (the gate
    sees messages in arrival order) and the connection carries on."""
    if IS_REF:
        raise TestSkip("ours: checks the order of the gate's effects under the cap")
    with Server(extra_args=["--concurrent-requests", "1"]) as srv:
        s = srv.session()
        s.start("lp", ["sleep", "30"])
        ids = {"read": s.send_request("process/read",
                                      {"processId": "lp", "afterSeq": 0, "waitMs": 60000}),
               "status": s.send_request("environment/status", None)}
        s.notify("initialized", {})
        ids["status2"] = s.send_request("environment/status", None)
        ids["kill"] = s.send_request("process/terminate", {"processId": "lp"})
        order = order_of_answers(s, ids, 20)
        assert order == ["kill", "read", "status", "status2"], order
        assert s.call("environment/status") == {"status": "ready"}
        s.close()


@needs_own_server
def test_concurrent_requests_wait_is_bounded(_):
    """What waits for a slot is bounded (here by --max-queued-bytes 2K): past it the
    client is closed, with a line in the log naming the flag."""
    if IS_REF:
        raise TestSkip("ours: the bound of the waiting line")
    with Server(extra_args=["--concurrent-requests", "1", "--max-queued-bytes", "2K"]) as srv:
        s = srv.session()
        s.start("lp", ["sleep", "30"])
        s.send_request("process/read", {"processId": "lp", "afterSeq": 0, "waitMs": 60000})
        for i in range(40):
            try:
                s.send_raw(json.dumps({"id": 1000 + i, "method": "environment/status",
                                       "params": None, "pad": "x" * 80}))
            except (BrokenPipeError, ConnectionResetError):
                break  # closed already, which is what is tested (the log line says why)
        deadline = time.monotonic() + DEFAULT_TIMEOUT
        while s.pump(max(0.01, deadline - time.monotonic())) is not None:
            assert time.monotonic() < deadline, "the connection stayed open"
        wait_until(lambda: "--concurrent-requests slot" in srv.stderr_text(), DEFAULT_TIMEOUT,
                   "the log line")
        c = srv.session()
        assert c.call("environment/status") == {"status": "ready"}
        c.close()


class Registry(http.server.BaseHTTPRequestHandler):
    seen = []

    def do_POST(self):
        n = int(self.headers.get("content-length", "0"))
        self.rfile.read(n)
        Registry.seen.append((self.path, dict((k.lower(), v) for k, v in self.headers.items())))
        body = b'{"error":{"code":"unavailable","message":"test registry"}}'
        self.send_response(503)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *a):
        pass


@needs_own_server
def test_chatgpt_token_is_the_registry_bearer(_):
    """--chatgpt-token-stdin over an https registry: POST .../register carries the token as
    the bearer and the account (from the token, or --chatgpt-account-id) in
    chatgpt-account-id. (Ours only: 0.169.0 first loads an account policy whose request
    is not public.)"""
    if IS_REF:
        raise TestSkip("0.169.0 loads a ChatGPT account policy first (not public)")
    d = tempfile.mkdtemp(prefix="execbb-tls-")
    try:
        ca, cert, key = make_ca(d)
    except (OSError, subprocess.CalledProcessError) as e:
        raise TestSkip("openssl could not make a test CA: %s" % e)
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Registry)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(cert, key)
    httpd.socket = ctx.wrap_socket(httpd.socket, server_side=True)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    url = "https://127.0.0.1:%d/base" % httpd.server_address[1]
    try:
        for token, extra, account in ((TOKEN_ACCT, [], "acct-1"),
                                      (TOKEN_BARE, ["--chatgpt-account-id", "acct-2"], "acct-2")):
            Registry.seen = []
            got = run("ours", ["--remote", url, "--environment-id", "env-1",
                               "--chatgpt-token-stdin"] + extra, token,
                      {"SSL_CERT_FILE": ca, "CURL_CA_BUNDLE": ca})
            assert got[0] == 1, got  # the registry answers 503: fatal at start
            assert len(Registry.seen) == 1, Registry.seen
            path, headers = Registry.seen[0]
            assert path == "/base/cloud/environment/env-1/register", path
            assert headers["authorization"] == "Bearer " + token.decode().strip(), headers
            assert headers["chatgpt-account-id"] == account, headers
    finally:
        httpd.shutdown()
        shutil.rmtree(d, ignore_errors=True)


if __name__ == "__main__":
    try:
        run_tests(globals(), per_test_timeout=int(300 * TIMEOUT_SCALE))
    finally:
        shutil.rmtree(HOME, ignore_errors=True)
