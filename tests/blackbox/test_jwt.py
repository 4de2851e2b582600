#!/usr/bin/env python3
"""--ws-auth signed-bearer-token: HS256 JWT bearer tokens, like the reference's flags
(--ws-shared-secret-file, --ws-issuer, --ws-audience, --ws-max-clock-skew-seconds).
Tokens are made here (hmac + base64url); every case runs against both servers and must
get the same answer (the same 401 texts)."""
import base64
import hashlib
import hmac
import json
import os
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import *  # noqa
from test_auth import works, upgrade_request  # noqa


def assert_401(srv, body, *headers):
    """Status and text as the reference sends them (ours adds WWW-Authenticate)."""
    status, hdrs, got = upgrade_request(srv, *headers)
    assert (status, got) == (401, body.encode()), (headers, status, got)
    assert "sec-websocket-accept" not in hdrs, hdrs

SECRET = "s" * 24 + "-jwt-secret-0123456789"  # 46 bytes


def b64url(b):
    return base64.urlsafe_b64encode(b).rstrip(b"=").decode()


def jwt(claims, secret=SECRET, alg="HS256", tamper=False):
    head = b64url(json.dumps({"alg": alg, "typ": "JWT"}).encode())
    body = b64url(json.dumps(claims).encode())
    sig = hmac.new(secret.encode(), ("%s.%s" % (head, body)).encode(), hashlib.sha256).digest()
    if tamper:
        sig = bytes([sig[0] ^ 1]) + sig[1:]
    return "%s.%s.%s" % (head, body, b64url(sig) if alg != "none" else "")


def secret_file(content=SECRET):
    fd, path = tempfile.mkstemp(prefix="execjwt-")
    os.write(fd, ("  %s\n" % content).encode())
    os.close(fd)
    return path


def jwt_server(path, *extra):
    return Server(extra_args=["--ws-auth", "signed-bearer-token", "--ws-shared-secret-file",
                              path] + list(extra))


@needs_own_server
def test_claims(_):
    path = secret_file()
    now = int(time.time())
    srv = jwt_server(path, "--ws-issuer", "iss-a", "--ws-audience", "aud-a",
                     "--ws-max-clock-skew-seconds", "60")
    try:
        good = {"exp": now + 300, "iss": "iss-a", "aud": "aud-a"}
        works(srv, "Authorization: Bearer " + jwt(good))
        works(srv, "Authorization: Bearer " + jwt(dict(good, aud=["x", "aud-a"])))
        works(srv, "Authorization: Bearer " + jwt(dict(good, exp=now - 30)))  # within skew
        assert_401(srv, "missing websocket bearer token")
        assert_401(srv, "invalid authorization header", "Authorization: Basic x")
        cases = [
            (dict(good, exp=now - 120), "expired websocket jwt"),
            (dict(good, nbf=now + 120), "websocket jwt is not valid yet"),
            (dict(good, iss="iss-b"), "websocket jwt issuer mismatch"),
            ({"exp": now + 300, "aud": "aud-a"}, "websocket jwt issuer mismatch"),
            (dict(good, aud="aud-b"), "websocket jwt audience mismatch"),
            (dict(good, aud=["x", "y"]), "websocket jwt audience mismatch"),
            ({"iss": "iss-a", "aud": "aud-a"},  # exp required, and named
             "invalid websocket jwt: no exp claim (required: the expiry, in seconds since the "
             "epoch)"),
            (dict(good, exp="soon"),
             "invalid websocket jwt: exp is not an integer (seconds since the epoch)"),
        ]
        for claims, text in cases:
            assert_401(srv, text, "Authorization: Bearer " + jwt(claims))
        assert_401(srv, "invalid websocket jwt", "Authorization: Bearer " + jwt(good, tamper=True))
        assert_401(srv, "invalid websocket jwt",
                   "Authorization: Bearer " + jwt(good, secret="another-secret-of-enough-length!!"))
        assert_401(srv, "invalid websocket jwt", "Authorization: Bearer " + jwt(good, alg="HS384"))
        assert_401(srv, "invalid websocket jwt", "Authorization: Bearer " + jwt(good, alg="none"))
        assert_401(srv, "invalid websocket jwt", "Authorization: Bearer not.a.jwt")
        assert_401(srv, "invalid websocket jwt", "Authorization: Bearer abc")
        status, _, _ = http_raw(srv.host, srv.port, "GET /readyz HTTP/1.1\r\n\r\n")
        assert status == 200
    finally:
        srv.stop()
        os.unlink(path)


@ours_only
@needs_own_server
def test_refusal_reason_logged_and_secret_reloaded(_):
    """The log says why a login was refused (what the client is told, as a reason
    label too); SIGHUP re-reads the secret file: new tokens verify, old ones not."""
    path = secret_file()
    now = int(time.time())
    srv = jwt_server(path, "--log-level", "info")
    try:
        assert_401(srv, "expired websocket jwt",
                   "Authorization: Bearer " + jwt({"exp": now - 3600}))
        wait_until(lambda: "event=auth result=refused" in srv.stderr_text(), what="refusal")
        line = [l for l in srv.stderr_text().splitlines() if "event=auth" in l][0]
        assert "reason=expired" in line and 'detail="expired websocket jwt"' in line, line
        new = "a-new-secret-that-is-long-enough-0123456789"
        with open(path, "w") as f:
            f.write(new + "\n")
        srv.proc.send_signal(signal.SIGHUP)
        wait_until(lambda: "event=reload result=ok reloaded=auth" in srv.stderr_text(),
                   what="reload")
        works(srv, "Authorization: Bearer " + jwt({"exp": now + 300}, secret=new))
        assert_401(srv, "invalid websocket jwt", "Authorization: Bearer " + jwt({"exp": now + 300}))
        srv.session(headers=["Authorization: Bearer " + jwt({"exp": now + 300}, secret=new)]).close()
    finally:
        srv.stop()
        os.unlink(path)


@needs_own_server
def test_no_issuer_or_audience_configured(_):
    path = secret_file()
    srv = jwt_server(path)
    try:
        works(srv, "Authorization: Bearer " + jwt({"exp": int(time.time()) + 60}))
        # default skew is 30 s
        works(srv, "Authorization: Bearer " + jwt({"exp": int(time.time()) - 10}))
        assert_401(srv, "expired websocket jwt",
                   "Authorization: Bearer " + jwt({"exp": int(time.time()) - 90}))
    finally:
        srv.stop()
        os.unlink(path)


def jwt_raw(head_text, body_text, secret=SECRET):
    """A correctly signed token over exactly these header and claims texts (so a
    key can appear twice, which json.dumps cannot write)."""
    head, body = b64url(head_text.encode()), b64url(body_text.encode())
    sig = hmac.new(secret.encode(), ("%s.%s" % (head, body)).encode(), hashlib.sha256).digest()
    return "%s.%s.%s" % (head, body, b64url(sig))


@needs_own_server
def test_duplicate_keys_rejected(_):
    """Issue 21 item 6: a signed token with `exp` twice (the first expired, the last in
    the future) was accepted because the last one won; a duplicate in the JOSE header
    (an `alg` that a different parser would read differently) likewise. The reference
    rejects both."""
    path = secret_file()
    now = int(time.time())
    srv = jwt_server(path)
    try:
        head = '{"alg":"HS256","typ":"JWT"}'
        works(srv, "Authorization: Bearer " + jwt_raw(head, '{"exp":%d}' % (now + 300)))
        for h, body in [
                (head, '{"exp":%d,"exp":%d}' % (now - 3600, now + 300)),
                (head, '{"exp":%d,"exp":%d}' % (now + 300, now + 300)),
                (head, '{"exp":%d,"sub":"a","sub":"b"}' % (now + 300)),
                ('{"alg":"none","alg":"HS256","typ":"JWT"}', '{"exp":%d}' % (now + 300)),
                ('{"alg":"HS256","typ":"JWT","typ":"JWT"}', '{"exp":%d}' % (now + 300))]:
            assert_401(srv, "invalid websocket jwt", "Authorization: Bearer " + jwt_raw(h, body))
    finally:
        srv.stop()
        os.unlink(path)


@ours_only
def test_flag_errors(_):
    short = secret_file("too-short")
    try:
        def run(*args):
            return subprocess.run([SERVER_PATH, "--listen", "ws://127.0.0.1:0"] + list(args),
                                  capture_output=True, timeout=10, stdin=subprocess.DEVNULL)
        r = run("--ws-auth", "signed-bearer-token", "--ws-shared-secret-file", short)
        assert r.returncode == 2 and b"must be at least 32 bytes" in r.stderr, r
        r = run("--ws-auth", "signed-bearer-token")
        assert r.returncode == 2 and b"`--ws-shared-secret-file` is required" in r.stderr, r
        r = run("--ws-auth", "capability-token", "--ws-token-file", short, "--ws-issuer", "x")
        assert r.returncode == 2 and b"require `--ws-auth signed-bearer-token`" in r.stderr, r
        r = run("--ws-issuer", "x")
        assert r.returncode == 2 and b"websocket auth flags require" in r.stderr, r
    finally:
        os.unlink(short)


test_flag_errors.own_server = True


if __name__ == "__main__":
    run_tests(globals())
