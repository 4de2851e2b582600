#!/usr/bin/env python3
"""wss:// on the listener (ours): --listen wss://IP:PORT --tls-cert FILE --tls-key FILE.
A CA and server certificates are made here with the openssl command; clients are Python's
ssl module through the harness. Checks: a session and a large streamed output over TLS,
TLS 1.2+ only, a wrong CA refused by the client, plain ws:// to a wss port closed without
harm, a stalled TLS handshake not holding up others, certificate reload on SIGHUP,
and the usage errors."""
import os
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import *  # noqa


def openssl(d, *args):
    subprocess.run(["openssl"] + list(args), check=True, capture_output=True, cwd=d)


def make_pki(d):
    openssl(d, "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key", "-out",
            "ca.pem", "-days", "2", "-subj", "/CN=execbb test CA")
    with open(os.path.join(d, "ext.cnf"), "w") as f:
        f.write("subjectAltName=IP:127.0.0.1\nbasicConstraints=CA:FALSE\n")
    issue(d, "srv", 1001)
    openssl(d, "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "other.key", "-out",
            "other.pem", "-days", "2", "-subj", "/CN=another CA")


def issue(d, name, serial):
    openssl(d, "req", "-newkey", "rsa:2048", "-nodes", "-keyout", name + ".key", "-out",
            name + ".csr", "-subj", "/CN=127.0.0.1")
    openssl(d, "x509", "-req", "-in", name + ".csr", "-CA", "ca.pem", "-CAkey", "ca.key",
            "-set_serial", str(serial), "-out", name + ".pem", "-days", "2", "-extfile",
            "ext.cnf")


class Pki:
    def __init__(self):
        self.dir = tempfile.mkdtemp(prefix="execbb-tls-")
        try:
            make_pki(self.dir)
        except (OSError, subprocess.CalledProcessError) as e:
            raise TestSkip("openssl could not make test certificates: %s" % e)

    def path(self, name):
        return os.path.join(self.dir, name)

    def ctx(self, ca="ca.pem"):
        c = ssl.create_default_context(cafile=self.path(ca))
        return c


def tls_server(pki):
    srv = Server(listen="wss://127.0.0.1:0", extra_args=[
        "--tls-cert", pki.path("srv.pem"), "--tls-key", pki.path("srv.key")])
    srv.ssl_context = pki.ctx()
    return srv


def serial_of(srv, pki):
    s = pki.ctx().wrap_socket(socket.create_connection((srv.host, srv.port)),
                              server_hostname=srv.host)
    der = s.getpeercert(binary_form=True)
    s.close()
    out = subprocess.run(["openssl", "x509", "-inform", "DER", "-noout", "-serial"],
                         input=der, capture_output=True, check=True).stdout
    return int(out.decode().strip().split("=")[1], 16)


@ours_only
@needs_own_server
def test_session_and_stream_over_tls(_):
    pki = Pki()
    srv = tls_server(pki)
    try:
        assert srv.url.startswith("wss://127.0.0.1:"), srv.url
        s = srv.session()
        out = s.start("big", ["/bin/sh", "-c", "head -c 20000000 /dev/zero; echo done"])
        res = s.collect_until_closed("big", timeout=DEFAULT_TIMEOUT * 6)
        assert len(res["stdout"]) == 20000005 and res["exit_code"] == 0, len(res["stdout"])
        check_seq_rules(res)
        assert s.call("environment/status") == {"status": "ready"}
        s.close()
        # /readyz over TLS too
        t = pki.ctx().wrap_socket(socket.create_connection((srv.host, srv.port)),
                                  server_hostname=srv.host)
        assert t.version() in ("TLSv1.2", "TLSv1.3"), t.version()
        t.sendall(b"GET /readyz HTTP/1.1\r\nHost: x\r\n\r\n")
        assert t.recv(100).startswith(b"HTTP/1.1 200"), "readyz over TLS"
        t.close()
    finally:
        srv.stop()


@ours_only
@needs_own_server
def test_refusals_do_not_hurt_the_server(_):
    pki = Pki()
    srv = tls_server(pki)
    try:
        # a client that does not trust the CA refuses the server
        try:
            srv.connect(ssl_context=pki.ctx("other.pem"))
            raise AssertionError("a wrong CA was accepted")
        except ssl.SSLCertVerificationError:
            pass
        # old protocol versions are refused
        import warnings
        warnings.simplefilter("ignore", DeprecationWarning)  # that is the point here
        old = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        old.load_verify_locations(pki.path("ca.pem"))
        old.maximum_version = ssl.TLSVersion.TLSv1_1
        old.minimum_version = ssl.TLSVersion.TLSv1
        try:
            old.wrap_socket(socket.create_connection((srv.host, srv.port)),
                            server_hostname=srv.host)
            raise AssertionError("TLS 1.1 was accepted")
        except (ssl.SSLError, ConnectionError):
            pass
        # plain text to the TLS port: closed, no harm
        status = None
        try:
            status = http_raw(srv.host, srv.port, "GET /readyz HTTP/1.1\r\n\r\n", timeout=3)[0]
        except Exception:
            pass
        assert status is None, status
        # a client stalled mid-handshake does not hold up others
        stalled = socket.create_connection((srv.host, srv.port))
        stalled.sendall(b"\x16\x03\x01\x00\xff")  # a ClientHello header, then nothing
        s = srv.session()
        assert s.call("environment/status") == {"status": "ready"}
        s.close()
        stalled.close()
    finally:
        srv.stop()


@ours_only
@needs_own_server
def test_sighup_reloads_the_certificate(_):
    pki = Pki()
    srv = tls_server(pki)
    try:
        assert serial_of(srv, pki) == 1001
        issue(pki.dir, "srv", 2002)  # new pair at the same paths
        srv.proc.send_signal(signal.SIGHUP)
        wait_until(lambda: serial_of(srv, pki) == 2002, DEFAULT_TIMEOUT,
                   "the new certificate to be picked up")
        # a broken pair keeps the current one
        with open(pki.path("srv.key"), "w") as f:
            f.write("not a key\n")
        srv.proc.send_signal(signal.SIGHUP)
        wait_until(lambda: "keeping the current TLS certificate" in srv.stderr_text(),
                   what="the failed reload's warning")
        assert serial_of(srv, pki) == 2002
        s = srv.session()
        assert s.call("environment/status") == {"status": "ready"}
        s.close()
    finally:
        srv.stop()


def client_path():
    here = os.path.dirname(os.path.abspath(__file__))
    cand = os.path.join(os.path.dirname(SERVER_PATH or ""), "exec-client")
    return cand if SERVER_PATH and os.access(cand, os.X_OK) else None


@ours_only
@needs_own_server
def test_exec_client_over_wss(_):
    client = client_path()
    if not client:
        raise TestSkip("exec-client not built")
    pki = Pki()
    srv = tls_server(pki)
    try:
        env = dict(os.environ)
        env.pop("SSL_CERT_FILE", None)
        r = subprocess.run([client, "--url", srv.url, "--ca-file", pki.path("ca.pem"), "run",
                            "--", "sh", "-c", "echo over-tls; exit 3"], capture_output=True,
                           timeout=60, env=env, stdin=subprocess.DEVNULL)
        assert (r.returncode, r.stdout) == (3, b"over-tls\n"), r
        r = subprocess.run([client, "--url", srv.url, "--ca-file", pki.path("ca.pem"), "fs",
                            "stat", "/"], capture_output=True, timeout=60, env=env)
        assert r.returncode == 0 and b"directory" in r.stdout, r
        # the CA from the standard variable, when no --ca-file
        r = subprocess.run([client, "--url", srv.url, "run", "--", "true"], capture_output=True,
                           timeout=60, env=dict(env, SSL_CERT_FILE=pki.path("ca.pem")))
        assert r.returncode == 0, r
        # a CA that did not sign the server: refused with a clear message
        r = subprocess.run([client, "--url", srv.url, "--ca-file", pki.path("other.pem"), "run",
                            "--", "true"], capture_output=True, timeout=60, env=env)
        assert r.returncode == 255 and b"certificate verify failed" in r.stderr, r
        assert b"hint: the certificate is not signed by a CA in the --ca-file" in r.stderr, r
        # no --ca-file at all: the hint says which option is missing
        r = subprocess.run([client, "--url", srv.url, "run", "--", "true"], capture_output=True,
                           timeout=60, env=env)
        assert r.returncode == 255 and b"hint: " in r.stderr and b"--ca-file FILE" in r.stderr, r
    finally:
        srv.stop()


@ours_only
def test_usage_errors(_):
    pki = Pki()

    def run(*args):
        return subprocess.run([SERVER_PATH] + list(args), capture_output=True, timeout=10,
                              stdin=subprocess.DEVNULL)
    r = run("--listen", "wss://127.0.0.1:0")
    assert r.returncode == 2 and b"needs --tls-cert FILE and --tls-key FILE" in r.stderr, r
    r = run("--listen", "ws://127.0.0.1:0", "--tls-cert", pki.path("srv.pem"), "--tls-key",
            pki.path("srv.key"))
    assert r.returncode == 2 and b"need a `wss://` --listen URL" in r.stderr, r
    r = run("--listen", "wss://127.0.0.1:0", "--tls-cert", pki.path("srv.pem"), "--tls-key",
            pki.path("other.key"))
    assert r.returncode == 2 and b"mismatch" in r.stderr, r
    r = run("--listen", "wss://127.0.0.1:0", "--tls-cert", pki.path("missing.pem"),
            "--tls-key", pki.path("srv.key"))
    assert r.returncode == 2 and b"cannot load the TLS certificate" in r.stderr, r


test_usage_errors.own_server = True


if __name__ == "__main__":
    run_tests(globals())
