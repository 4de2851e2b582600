#!/usr/bin/env python3
"""http/request (§7) against local HTTP and HTTPS servers started by this test.

The HTTPS server uses a CA made here with the openssl command, handed to the server
under test through the standard CURL_CA_BUNDLE / SSL_CERT_FILE variables. Runs against
the reference too (EXEC_SERVER=ref), except where marked."""
import base64
import hashlib
import http.server
import json
import os
import select
import socket
import socketserver
import ssl
import subprocess
import sys
import tempfile
import threading
import time
import uuid

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import *  # noqa

BIG = 100 << 20


def pattern(n):
    """n deterministic bytes (a repeated 64 KiB block derived from a hash)."""
    block = b"".join(hashlib.sha256(b"%d" % i).digest() for i in range(2048))
    out = block * (n // len(block)) + block[:n % len(block)]
    return out


BLOCK64K = pattern(65536)
CONNECTIONS = {"closed_early": 0, "big_sent": 0}  # big_sent: bytes of the last /big
# /hold sends its head at once and its body only when a test sets this.
HOLD = threading.Event()


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *a):
        pass

    def _body(self):
        n = int(self.headers.get("content-length") or 0)
        return self.rfile.read(n) if n else b""

    def _send(self, code, body, ctype="application/json", extra=()):
        self.send_response(code)
        self.send_header("content-type", ctype)
        for k, v in extra:
            self.send_header(k, v)
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def handle_any(self):
        path, _, query = self.path.partition("?")
        q = dict(p.split("=", 1) for p in query.split("&") if "=" in p)
        body = self._body()
        if path == "/echo":
            doc = {"method": self.command, "path": self.path,
                   "headers": [[k.lower(), v] for k, v in self.headers.items()],
                   "body": base64.b64encode(body).decode()}
            self._send(int(q.get("status", "200")), json.dumps(doc).encode(),
                       extra=[("x-multi", "one"), ("x-multi", "two"), ("X-Test", "buffered")])
        elif path == "/redirect":
            self.send_response(302)
            self.send_header("location", q.get("to", "/echo"))
            self.send_header("content-length", "0")
            self.end_headers()
        elif path == "/big":
            n = int(q["n"])
            self.send_response(200)
            self.send_header("content-length", str(n))
            self.end_headers()
            sent = 0
            CONNECTIONS["big_sent"] = 0
            try:
                while sent < n:
                    chunk = BLOCK64K[:min(65536, n - sent)]
                    self.wfile.write(chunk)
                    sent += len(chunk)
                    CONNECTIONS["big_sent"] = sent
            except OSError:
                CONNECTIONS["closed_early"] += 1
        elif path == "/cut":
            self.send_response(200)
            self.send_header("content-length", "100000")
            self.end_headers()
            self.wfile.write(b"x" * 1000)
            self.wfile.flush()
            self.close_connection = True
            self.connection.shutdown(socket.SHUT_RDWR)
        elif path == "/hold":
            self.send_response(200)
            self.send_header("content-length", "4")
            self.end_headers()
            self.wfile.flush()
            HOLD.wait(DEFAULT_TIMEOUT * 6)
            self.wfile.write(b"late")
        elif path == "/slow":
            time.sleep(float(q.get("s", "5")))  # sleep-ok: the stimulus, a peer that answers late
            self._send(200, b"late")
        else:
            self._send(404, b"not here", ctype="text/plain")

    do_GET = do_POST = do_PUT = do_DELETE = do_PATCH = do_HEAD = handle_any

    def do_get(self):  # lowercase method names are sent as is
        self.handle_any()


class Srv(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True


def start_http(tls_ctx=None):
    s = Srv(("127.0.0.1", 0), Handler)
    if tls_ctx:
        s.socket = tls_ctx.wrap_socket(s.socket, server_side=True)
    threading.Thread(target=s.serve_forever, daemon=True).start()
    return s


HTTPD = start_http()
BASE = "http://127.0.0.1:%d" % HTTPD.server_address[1]


def req(s, params, timeout=DEFAULT_TIMEOUT):
    p = {"method": "GET", "requestId": "r-" + uuid.uuid4().hex[:8]}
    p.update(params)
    return s.request("http/request", p, timeout=timeout)


def call(s, params, timeout=DEFAULT_TIMEOUT):
    m = req(s, params, timeout)
    assert "result" in m, m
    return m["result"]


def collect_stream(s, rid, timeout=DEFAULT_TIMEOUT * 6):
    """Returns (bytes, [seq], error) of requestId rid's deltas up to the terminal one."""
    data, seqs, h = [], [], None
    deadline = time.monotonic() + timeout
    while True:
        n = s.wait_other(lambda m: m.get("method") == "http/request/bodyDelta" and
                         m["params"]["requestId"] == rid, max(0.1, deadline - time.monotonic()))
        p = n["params"]
        seqs.append(p["seq"])
        data.append(base64.b64decode(p["deltaBase64"]))
        if p["done"]:
            return b"".join(data), seqs, p["error"]


def test_buffered_methods_headers_body(srv):
    s = srv.session()
    for method in ("GET", "POST", "PUT", "DELETE", "PATCH"):
        body = b'{"x":1}' if method != "GET" else None
        p = {"method": method, "url": BASE + "/echo?status=201",
             "headers": [{"name": "X-One", "value": "a"}, {"name": "x-rep", "value": "1"},
                         {"name": "x-rep", "value": "2"}]}
        if body:
            p["bodyBase64"] = base64.b64encode(body).decode()
        r = call(s, p)
        assert r["status"] == 201, r
        names = [(h["name"], h["value"]) for h in r["headers"]]
        assert ("x-multi", "one") in names and ("x-multi", "two") in names, names
        assert names.index(("x-multi", "one")) < names.index(("x-multi", "two")), names
        assert ("x-test", "buffered") in names, names  # lowercase names
        doc = json.loads(base64.b64decode(r["bodyBase64"]))
        assert doc["method"] == method, doc
        hs = doc["headers"]
        assert ["x-one", "a"] in hs and hs.index(["x-rep", "1"]) < hs.index(["x-rep", "2"]), hs
        assert any(k == "host" for k, _ in hs) and ["accept", "*/*"] in hs, hs
        if body:
            assert base64.b64decode(doc["body"]) == body, doc
            assert ["content-length", str(len(body))] in hs, hs
    s.close()


def test_status_codes_are_results(srv):
    s = srv.session()
    assert call(s, {"url": BASE + "/nothing"})["status"] == 404
    assert call(s, {"url": BASE + "/echo?status=501"})["status"] == 501
    r = call(s, {"url": BASE + "/redirect?to=/echo", "redirectPolicy": "stop"})
    assert r["status"] == 302 and r["bodyBase64"] == "", r
    assert {"name": "location", "value": "/echo"} in r["headers"], r
    r = call(s, {"url": BASE + "/redirect?to=/echo"})  # follow
    assert r["status"] == 200, r
    doc = json.loads(base64.b64decode(r["bodyBase64"]))
    assert any(k == "referer" for k, _ in doc["headers"]), doc
    s.close()


def test_stream_result_before_first_delta_and_big_body(srv):
    s = srv.session()
    rid = "stream-big"
    m = req(s, {"url": BASE + "/big?n=%d" % BIG, "requestId": rid, "streamResponse": True})
    assert m["result"]["status"] == 200 and m["result"]["bodyBase64"] == "", m
    data, seqs, err = collect_stream(s, rid)
    assert err is None, err
    assert seqs == list(range(1, len(seqs) + 1)), seqs[:10]
    assert len(data) == BIG and hashlib.sha256(data).digest() == \
        hashlib.sha256(pattern(BIG)).digest()
    texts = [t for d, t in s.log if d == "<"]
    i_res = next(i for i, t in enumerate(texts) if '"status":200' in t.replace(" ", ""))
    i_delta = next(i for i, t in enumerate(texts) if "bodyDelta" in t)
    assert i_res < i_delta
    s.close()


def test_stream_404_and_cut_short(srv):
    s = srv.session()
    m = req(s, {"url": BASE + "/nothing", "requestId": "s404", "streamResponse": True})
    assert m["result"]["status"] == 404
    data, _, err = collect_stream(s, "s404")
    assert data == b"not here" and err is None
    m = req(s, {"url": BASE + "/cut", "requestId": "scut", "streamResponse": True})
    assert m["result"]["status"] == 200
    data, _, err = collect_stream(s, "scut")
    assert err == "error decoding response body" and len(data) == 1000, (err, len(data))
    # buffered and cut short
    m = req(s, {"url": BASE + "/cut"})
    assert m["error"] == {"code": -32603, "message": "failed to read http/request response "
                                                     "body: error decoding response body"}, m
    s.close()


def test_timeouts_and_refused(srv):
    s = srv.session()
    m = req(s, {"url": BASE + "/slow?s=3", "timeoutMs": 300})
    assert m["error"] == {"code": -32603, "message": "http/request failed: error sending "
                          "request for url (%s/slow?s=3)" % BASE}, m
    port = socket.socket()
    port.bind(("127.0.0.1", 0))
    url = "http://127.0.0.1:%d/" % port.getsockname()[1]
    port.close()
    m = req(s, {"url": url})
    assert m["error"] == {"code": -32603, "message": "http/request failed: error sending "
                          "request for url (%s)" % url}, m
    s.close()


def test_invalid_params(srv):
    s = srv.session()
    os.environ.pop("EXECBB_UNSET_VAR", None)
    cases = [
        ({"method": "BAD METHOD", "url": BASE}, "http/request method is invalid: invalid HTTP method"),
        ({"url": "/relative"}, "http/request url is invalid: relative URL without a base"),
        ({"url": "ftp://127.0.0.1/x"}, "http/request only supports http and https URLs, got ftp"),
        ({"url": "http://"}, "http/request url is invalid: empty host"),
        ({"url": BASE, "headers": [{"name": "bad name", "value": "x"}]},
         "http/request header name is invalid: invalid HTTP header name"),
        ({"url": BASE, "headers": [{"name": "x-a", "value": "a\nb"}]},
         "http/request header value is invalid for x-a: failed to parse header value"),
        ({"url": BASE, "headers": [{"name": "x-a", "value": "p-", "valueEnvVar": "EXECBB_UNSET_VAR"}]},
         "http/request header x-a requires executor environment variable EXECBB_UNSET_VAR"),
        ({"url": BASE, "bodyBase64": "!!!"}, "Invalid symbol 33, offset 0."),
        ({"url": BASE, "redirectPolicy": "never"},
         "unknown variant `never`, expected `follow` or `stop`"),
        ({"url": BASE, "headers": [{"name": "x"}]}, "missing field `value`"),
    ]
    for params, text in cases:
        m = req(s, params)
        assert m.get("error") == {"code": -32602, "message": text}, (params, m)
    m = s.request("http/request", {"method": "GET", "url": BASE})
    assert m["error"] == {"code": -32602, "message": "missing field `requestId`"}, m
    s.close()


def test_value_env_var(srv):
    s = srv.session()
    # the server under test inherited EXECBB_HTTP_TOKEN from this process at start
    r = call(s, {"url": BASE + "/echo", "headers": [
        {"name": "authorization", "value": "Bearer ", "valueEnvVar": "EXECBB_HTTP_TOKEN"}]})
    doc = json.loads(base64.b64decode(r["bodyBase64"]))
    assert ["authorization", "Bearer tok-123"] in doc["headers"], doc
    s.close()


@ours_only
def test_request_id_reservation(srv):
    """Needs concurrent requests (§11 (a)): the reference runs one request at a time,
    so its first stream is usually over before it reads the second."""
    s = srv.session()
    HOLD.clear()
    m = req(s, {"url": BASE + "/hold", "requestId": "dup", "streamResponse": True})
    assert m["result"]["status"] == 200, m
    # the first is in flight (its body held back): a second stream with the same id is
    # refused...
    s2 = req(s, {"url": BASE + "/echo", "requestId": "dup", "streamResponse": True})
    assert s2.get("error") == {"code": -32602, "message": "http/request streamResponse requestId "
                               "`dup` is already active"}, s2
    HOLD.set()
    assert collect_stream(s, "dup")[0] == b"late"
    # ...and allowed again after the terminal delta
    m = req(s, {"url": BASE + "/echo", "requestId": "dup", "streamResponse": True})
    assert m["result"]["status"] == 200, m
    collect_stream(s, "dup")
    s.close()


def test_many_concurrent_requests(srv):
    s = srv.session()
    # 200-203 only: 204 and 205 must not carry the body the echo sends
    ids = [s.send_request("http/request", {"method": "GET", "url": BASE + "/echo?status=%d" %
                                           (200 + i % 4), "requestId": "c%d" % i})
           for i in range(20)]
    for i, rid in enumerate(ids):
        m = s.wait_response(rid, timeout=DEFAULT_TIMEOUT * 3)
        assert "result" in m and m["result"]["status"] == 200 + i % 4, m
    s.close()


def test_https_with_a_private_ca(_):
    d = tempfile.mkdtemp(prefix="execbb-ca-")
    try:
        ca, cert, key = make_ca(d)
    except (OSError, subprocess.CalledProcessError) as e:
        raise TestSkip("openssl could not make a test CA: %s" % e)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(cert, key)
    httpsd = start_http(ctx)
    url = "https://127.0.0.1:%d/echo" % httpsd.server_address[1]
    srv = server_with_env({"CURL_CA_BUNDLE": ca, "SSL_CERT_FILE": ca})
    try:
        s = srv.session()
        r = call(s, {"url": url})
        assert r["status"] == 200, r
        s.close()
    finally:
        srv.stop()
    # without the CA the certificate is refused
    srv = Server()
    try:
        s = srv.session()
        m = req(s, {"url": url})
        assert m["error"]["code"] == -32603, m
        s.close()
    finally:
        srv.stop()
        httpsd.shutdown()


test_https_with_a_private_ca.own_server = True


def test_no_proxy_from_environment(_):
    """NO_PROXY is honoured alongside the loopback bypass: a listed host (suffix match,
    spaces trimmed, `*` anywhere = all) goes direct, an unlisted one through the proxy.
    The .invalid host cannot resolve, so going direct is the DNS failure, and the proxy
    must have seen nothing by the time the answer is in."""
    proxy = socket.socket()
    proxy.bind(("127.0.0.1", 0))
    proxy.listen(4)
    purl = "http://127.0.0.1:%d" % proxy.getsockname()[1]
    url = "http://host.noproxy.invalid/x"
    try:
        for no_proxy, direct in (("other.invalid, noproxy.invalid ", True),
                                 ("other.invalid,*", True), ("other.invalid", False)):
            srv = server_with_env({"http_proxy": purl, "HTTP_PROXY": purl,
                                   "NO_PROXY": no_proxy, "no_proxy": no_proxy})
            try:
                s = srv.session()
                rid = s.send_request("http/request", {"method": "GET", "url": url,
                                                      "requestId": "np", "timeoutMs": 5000})
                if not direct:
                    proxy.settimeout(DEFAULT_TIMEOUT)
                    conn, _ = proxy.accept()
                    conn.settimeout(DEFAULT_TIMEOUT)
                    head = b""
                    while b"\r\n\r\n" not in head:
                        chunk = conn.recv(4096)
                        assert chunk, head
                        head += chunk
                    assert head.startswith(b"GET %s HTTP/1.1\r\n" % url.encode()), head
                    conn.sendall(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n"
                                 b"connection: close\r\n\r\nok")
                    conn.close()
                m = s.wait_response(rid)
                if direct:
                    assert m.get("error") == {"code": -32603, "message": "http/request failed: "
                                              "error sending request for url (%s)" % url}, m
                    r, _, _ = select.select([proxy], [], [], 0)
                    assert not r, "NO_PROXY=%r: the request went to the proxy" % no_proxy
                else:
                    assert m["result"]["status"] == 200, m
                s.close()
            finally:
                srv.stop()
    finally:
        proxy.close()


test_no_proxy_from_environment.own_server = True


def test_stalled_reader_pauses_the_transfer(srv):
    """A client that stops reading: the server's memory stays bounded and the transfer
    waits (back-pressure), then the client reads everything once it resumes."""
    if IS_REF:
        raise TestSkip("RSS bound is ours")
    ws = srv.connect()
    s = Rpc(WsTransport(ws), srv)
    s.initialize()
    n = 256 << 20
    CONNECTIONS["big_sent"] = 0
    s.send_request("http/request", {"method": "GET", "url": BASE + "/big?n=%d" % n,
                                    "requestId": "stall", "streamResponse": True})
    wait_until(lambda: CONNECTIONS["big_sent"] > 0, 20, "the transfer to start")
    before = rss_kib(srv.pid)
    # Not reading: the server must stop pulling from the HTTP peer.
    time.sleep(3 * TIMEOUT_SCALE)  # sleep-ok: a server that kept pulling would grow here
    grown = rss_kib(srv.pid) - before
    assert grown < 64 << 10, "server RSS grew by %d KiB while the client was not reading" % grown
    assert CONNECTIONS["big_sent"] < n, "the peer was not held back"
    data, _, err = collect_stream(s, "stall")
    assert err is None and len(data) == n
    s.close()


test_stalled_reader_pauses_the_transfer.ours_only = True


def test_closed_connection_aborts_its_transfers(srv):
    before = CONNECTIONS["closed_early"]
    s = srv.session()
    s.send_request("http/request", {"method": "GET", "url": BASE + "/big?n=%d" % (1 << 34),
                                    "requestId": "abort", "streamResponse": True})
    s.wait_other(lambda m: m.get("method") == "http/request/bodyDelta")
    s.close()
    wait_until(lambda: CONNECTIONS["closed_early"] > before, DEFAULT_TIMEOUT,
               "the transfer to stop after the client left")


def test_capability_advertised(srv):
    s = srv.session()
    assert s.call("environment/info", {})["capabilities"]["httpHeaderEnvVars"] is True
    s.close()


if __name__ == "__main__":
    os.environ["EXECBB_HTTP_TOKEN"] = "tok-123"
    run_tests(globals(), per_test_timeout=120)
