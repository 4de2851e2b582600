#!/usr/bin/env python3
"""WebSocket authentication (issue 7): `--ws-auth capability-token` with
`--ws-token-file` or `--ws-token-sha256`. With it, an upgrade needs
`Authorization: Bearer <token>` (401 with a short text body and `WWW-Authenticate:
Bearer` otherwise, no upgrade); /readyz stays open; bad flag combinations exit 2 with
a clear message; a token or secret file that group or others may read, or a token too
short to be a secret, is refused as sshd refuses such key files, with the fix; listening
beyond loopback without auth prints a loud warning."""
import hashlib
import os
import signal
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import *  # noqa

TOKEN = "tok-3f9a_Z-51c0e2d7"


def token_file(content):
    fd, path = tempfile.mkstemp(prefix="execauth-")
    os.write(fd, content.encode() if isinstance(content, str) else content)
    os.close(fd)
    return path


def upgrade_request(srv, *headers):
    req = ("GET / HTTP/1.1\r\nHost: %s:%d\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
           "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n"
           % (srv.host, srv.port))
    return http_raw(srv.host, srv.port, req + "".join(h + "\r\n" for h in headers) + "\r\n")


def assert_401(srv, body, *headers):
    status, hdrs, got = upgrade_request(srv, *headers)
    assert status == 401, (headers, status, got)
    assert got == body.encode(), (headers, got)
    assert hdrs.get("www-authenticate") == "Bearer", hdrs
    assert hdrs.get("content-type", "").startswith("text/plain"), hdrs
    assert "sec-websocket-accept" not in hdrs, hdrs


def works(srv, header):
    s = srv.session(headers=[header])
    try:
        assert s.call("environment/status") == {"status": "ready"}
    finally:
        s.close()


def run_cli(*args):
    return subprocess.run([SERVER_PATH, *args], capture_output=True, timeout=10,
                          stdin=subprocess.DEVNULL)


def test_auth_off_by_default(srv):
    works(srv, "X-Nothing: 1")
    # A stray Authorization header is ignored when auth is off.
    works(srv, "Authorization: Bearer whatever")


@ours_only
@needs_own_server
def test_token_file(_):
    path = token_file("  %s \n" % TOKEN)  # surrounding whitespace is not part of it
    srv = Server(extra_args=["--ws-auth", "capability-token", "--ws-token-file", path])
    try:
        assert_401(srv, "missing websocket bearer token")
        assert_401(srv, "invalid websocket bearer token", "Authorization: Bearer nope")
        assert_401(srv, "invalid websocket bearer token", "Authorization: Bearer " + TOKEN[:-1])
        assert_401(srv, "invalid websocket bearer token", "Authorization: Bearer " + TOKEN + "x")
        assert_401(srv, "invalid authorization header", "Authorization: Basic " + TOKEN)
        assert_401(srv, "invalid authorization header", "Authorization: Bearer")
        assert_401(srv, "invalid authorization header", "Authorization: Bearer\t" + TOKEN)
        # The first Authorization header counts.
        assert_401(srv, "invalid websocket bearer token", "Authorization: Bearer x",
                   "Authorization: Bearer " + TOKEN)
        try:
            srv.connect()
            raise AssertionError("upgrade without a token succeeded")
        except AssertionError as e:
            assert "401" in str(e), e
        works(srv, "Authorization: Bearer " + TOKEN)
        works(srv, "authorization: bearer   %s " % TOKEN)  # scheme case, blanks
        # Plain endpoints are unchanged: /readyz open, Origin refused before auth, 404.
        status, _, body = http_raw(srv.host, srv.port, "GET /readyz HTTP/1.1\r\n\r\n")
        assert status == 200 and body == b"", (status, body)
        status, _, _ = upgrade_request(srv, "Origin: http://x", "Authorization: Bearer " + TOKEN)
        assert status == 403, status
        status, _, _ = http_raw(srv.host, srv.port, "GET /other HTTP/1.1\r\n\r\n")
        assert status == 404, status
        # A request that is not a valid upgrade gets its usual 400, not 401.
        status, _, body = http_raw(srv.host, srv.port, "GET / HTTP/1.1\r\n\r\n")
        assert status == 400 and b"upgrade" in body, (status, body)
        # A refused client did not disturb the server.
        works(srv, "Authorization: Bearer " + TOKEN)
    finally:
        srv.stop()
        os.unlink(path)


@ours_only
@needs_own_server
def test_token_sha256(_):
    digest = hashlib.sha256(TOKEN.encode()).hexdigest()
    for form in (digest, digest.upper()):
        srv = Server(extra_args=["--ws-auth", "capability-token", "--ws-token-sha256", form])
        try:
            assert_401(srv, "missing websocket bearer token")
            assert_401(srv, "invalid websocket bearer token", "Authorization: Bearer " + digest)
            works(srv, "Authorization: Bearer " + TOKEN)
        finally:
            srv.stop()


@ours_only
def test_bad_flag_combinations_exit_2(srv):
    good = token_file(TOKEN + "\n")
    empty = token_file("\n \n")
    long_ = token_file("x" * 600)
    missing = good + ".absent"
    digest = hashlib.sha256(TOKEN.encode()).hexdigest()
    try:
        cases = [
            (["--ws-auth", "capability-token"], "`--ws-token-file` or `--ws-token-sha256` is "
             "required when `--ws-auth capability-token` is set"),
            (["--ws-token-file", good], "websocket auth flags require `--ws-auth capability-token`"),
            (["--ws-token-sha256", digest], "websocket auth flags require"),
            (["--ws-auth", "capability-token", "--ws-token-file", good, "--ws-token-sha256",
              digest], "`--ws-token-file` and `--ws-token-sha256` are mutually exclusive"),
            (["--ws-auth", "capability-token", "--ws-token-file", empty],
             "websocket auth secret %s must not be empty" % empty),
            (["--ws-auth", "capability-token", "--ws-token-file", long_], "longer than 504 bytes"),
            (["--ws-auth", "capability-token", "--ws-token-file", missing],
             "failed to read websocket auth secret %s: No such file or directory (os error 2)"
             % missing),
            (["--ws-auth", "capability-token", "--ws-token-file", "/"],
             "failed to read websocket auth secret /: Is a directory (os error 21)"),
            (["--ws-auth", "capability-token", "--ws-token-sha256", digest[:-1]],
             "--ws-token-sha256 must be a 64-character hex SHA-256 digest"),
            (["--ws-auth", "capability-token", "--ws-token-sha256", digest[:-1] + "g"],
             "--ws-token-sha256 must be a 64-character hex SHA-256 digest"),
            (["--ws-auth", "bogus", "--ws-token-file", good],
             "invalid value 'bogus' for '--ws-auth <MODE>'"),
            (["--ws-auth"], "a value is required for '--ws-auth <MODE>' but none was supplied"),
        ]
        for args, want in cases:
            r = run_cli(*args)
            err = r.stderr.decode()
            assert r.returncode == 2, (args, r.returncode, err)
            assert want in err, (args, want, err)
            assert err.count("\n") == 1, (args, err)
            assert r.stdout == b"", (args, r.stdout)
        r = run_cli("--help")
        for flag in (b"--ws-auth", b"--ws-token-file", b"--ws-token-sha256"):
            assert flag in r.stdout, flag
    finally:
        for p in (good, empty, long_):
            os.unlink(p)


@ours_only
def test_token_and_secret_files_are_checked_like_ssh_keys(_srv):
    tok = token_file(TOKEN + "\n")
    short = token_file("hello\n")
    secret = token_file("s" * 40)
    try:
        for mode in (0o644, 0o640, 0o604, 0o620):
            os.chmod(tok, mode)
            r = run_cli("--ws-auth", "capability-token", "--ws-token-file", tok)
            err = r.stderr.decode()
            assert r.returncode == 2 and err.count("\n") == 1, (oct(mode), r)
            assert ("websocket auth token file %s is open to group or others (mode %04o)"
                    % (tok, mode)) in err, err
            assert err.endswith("run `chmod 600 %s`\n" % tok), err
        os.chmod(secret, 0o644)
        r = run_cli("--ws-auth", "signed-bearer-token", "--ws-shared-secret-file", secret)
        assert r.returncode == 2 and "secret file %s is open to group or others" % secret in (
            r.stderr.decode()), r
        r = run_cli("--ws-auth", "capability-token", "--ws-token-file", short)
        err = r.stderr.decode()
        assert r.returncode == 2 and "token in %s is 5 bytes, too short" % short in err, r
        assert "at least 16 random ones, e.g. `(umask 077; openssl rand -hex 32 > %s)`" % (
            short) in err, err
        # the owner's alone (0600, 0400): it serves
        for mode in (0o600, 0o400):
            os.chmod(tok, mode)
            srv = Server(extra_args=["--ws-auth", "capability-token", "--ws-token-file", tok])
            try:
                works(srv, "Authorization: Bearer " + TOKEN)
                if mode == 0o600:
                    # a SIGHUP re-read of a file opened to others keeps the old token
                    os.chmod(tok, 0o644)
                    srv.proc.send_signal(signal.SIGHUP)
                    wait_until(lambda: "chmod 600" in srv.stderr_text(), 10, "the refusal")
                    works(srv, "Authorization: Bearer " + TOKEN)
            finally:
                srv.stop()
    finally:
        for p in (tok, short, secret):
            os.unlink(p)


@ours_only
@needs_own_server
def test_non_loopback_listen_needs_auth_or_the_flag(_):
    try:
        Server(listen="ws://0.0.0.0:0")
        raise AssertionError("a non-loopback listener without auth started")
    except AssertionError as e:
        assert "exited (rc=2)" in str(e) and "--allow-unauthenticated" in str(e), e
    srv = Server(listen="ws://0.0.0.0:0", extra_args=["--allow-unauthenticated"])
    try:
        err = srv.stderr_text()
        assert "WARNING" in err and "without --ws-auth" in err and srv.url in err, err
    finally:
        srv.stop()
    path = token_file(TOKEN)
    try:
        srv = Server(listen="ws://0.0.0.0:0",
                     extra_args=["--ws-auth", "capability-token", "--ws-token-file", path])
        try:
            assert "WARNING" not in srv.stderr_text(), srv.stderr_text()
            status, _, _ = http_raw("127.0.0.1", srv.port, "GET /readyz HTTP/1.1\r\n\r\n")
            assert status == 200
        finally:
            srv.stop()
    finally:
        os.unlink(path)
    for listen in ("ws://127.0.0.1:0", "ws://[::1]:0"):
        try:
            srv = Server(listen=listen)
        except AssertionError:
            continue  # no IPv6 loopback here
        try:
            assert "WARNING" not in srv.stderr_text(), (listen, srv.stderr_text())
        finally:
            srv.stop()


if __name__ == "__main__":
    run_tests(globals())
