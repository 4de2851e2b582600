#!/usr/bin/env python3
"""The child side of test_netproxy.py: a tiny client that goes through the managed-network
proxy named by its environment and prints what happened as one JSON line.

    netproxy_client.py '{"mode": "http", "method": "GET", "url": "http://h:1/x"}'

Modes: http (an absolute-form request to HTTP_PROXY), connect (CONNECT host:port, then one
plain GET through the tunnel), socks (SOCKS5 CONNECT through ALL_PROXY, then one GET),
https (CONNECT, TLS against SSL_CERT_FILE, one GET with the Authorization header built
from an environment variable), env (print the environment). Standard library only."""
import errno
import json
import os
import socket
import ssl
import struct
import sys


def proxy_addr(var):
    url = os.environ[var]
    hostport = url.split("://", 1)[1].rstrip("/")
    host, _, port = hostport.rpartition(":")
    return host, int(port)


def read_response(s, data=b""):
    """One response: the head, then Content-Length bytes (or up to EOF without one: a
    proxy may keep the connection open after a response that has a length)."""
    while b"\r\n\r\n" not in data:
        try:
            chunk = s.recv(65536)
        except (ConnectionResetError, ssl.SSLError):
            chunk = b""
        if not chunk:
            break
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split(" ")[1]) if lines and lines[0].startswith("HTTP/") else 0
    headers = {}
    for line in lines[1:]:
        if ":" in line:
            k, v = line.split(":", 1)
            headers[k.strip().lower()] = v.strip()
    want = int(headers["content-length"]) if "content-length" in headers else None
    while want is None or len(body) < want:
        try:
            chunk = s.recv(65536)
        except (ConnectionResetError, ssl.SSLError):
            break
        if not chunk:
            break
        body += chunk
    return {"status": status, "headers": headers, "body": body.decode("latin-1")}


def request_bytes(method, target, host, headers, body):
    """One request; "Connection: close" so the answer ends with the connection (an HTTP/1.1
    server behind a tunnel would otherwise keep it open)."""
    headers = dict(headers)
    host = headers.pop("Host", host)
    headers.setdefault("Connection", "close")
    lines = ["%s %s HTTP/1.1" % (method, target), "Host: %s" % host]
    for k, v in headers.items():
        lines.append("%s: %s" % (k, v))
    if body is not None:
        lines.append("Content-Length: %d" % len(body))
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + (body.encode() if body else b"")


def main():
    spec = json.loads(sys.argv[1])
    mode = spec["mode"]
    if mode == "env":
        print(json.dumps(dict(os.environ)))
        return
    if mode == "direct":
        # around the proxy: a plain TCP connection to the target
        try:
            socket.create_connection((spec["host"], spec["port"]), timeout=5).close()
            print(json.dumps({"direct": "ok"}))
        except OSError as e:
            print(json.dumps({"direct": errno.errorcode.get(e.errno, str(e))}))
        return
    if mode == "http":
        s = socket.create_connection(proxy_addr("HTTP_PROXY"), timeout=30)
        url = spec["url"]
        host = url.split("://", 1)[1].split("/", 1)[0]
        s.sendall(request_bytes(spec.get("method", "GET"), url, host,
                                dict(spec.get("headers", {}), **{"Proxy-Connection": "keep-alive"}),
                                spec.get("body")))
        print(json.dumps(read_response(s)))
        return
    if mode in ("connect", "https"):
        s = socket.create_connection(proxy_addr("HTTPS_PROXY"), timeout=30)
        target = "%s:%d" % (spec["host"], spec["port"])
        s.sendall(("CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n" % (target, target)).encode())
        head = b""
        while b"\r\n\r\n" not in head:
            c = s.recv(1)
            if not c:
                break
            head += c
        status = int(head.split(b" ")[1]) if head.startswith(b"HTTP/") else 0
        if status != 200:
            r = read_response(s, head)
            print(json.dumps({"connect": status, "body": r["body"]}))
            return
        headers = dict(spec.get("headers", {}))
        if mode == "https":
            ctx = ssl.create_default_context(cafile=os.environ.get("SSL_CERT_FILE"))
            try:
                s = ctx.wrap_socket(s, server_hostname=spec["host"])
            except (ssl.SSLError, OSError) as e:
                print(json.dumps({"connect": 200, "tls_error": str(e)}))
                return
            if spec.get("auth_env"):
                headers["Authorization"] = spec.get("auth_scheme", "Bearer") + " " + \
                    os.environ[spec["auth_env"]]
            if spec.get("basic_env"):
                import base64
                headers["Authorization"] = "Basic " + base64.b64encode(
                    ("x-access-token:" + os.environ[spec["basic_env"]]).encode()).decode()
        s.sendall(request_bytes(spec.get("method", "GET"), spec.get("path", "/"),
                                target, headers, spec.get("body")))
        r = read_response(s)
        r["connect"] = 200
        r["sent"] = headers.get("Authorization")
        print(json.dumps(r))
        return
    if mode == "socks":
        s = socket.create_connection(proxy_addr("ALL_PROXY"), timeout=30)
        s.sendall(b"\x05\x01\x00")
        if s.recv(2) != b"\x05\x00":
            print(json.dumps({"rep": -1}))
            return
        hb = spec["host"].encode()
        s.sendall(b"\x05\x01\x00\x03" + bytes([len(hb)]) + hb + struct.pack(">H", spec["port"]))
        r = s.recv(10)
        if len(r) < 2 or r[1] != 0:
            print(json.dumps({"rep": r[1] if len(r) > 1 else -1}))
            return
        target = "%s:%d" % (spec["host"], spec["port"])
        s.sendall(request_bytes("GET", spec.get("path", "/"), target, {}, None))
        out = read_response(s)
        out["rep"] = 0
        print(json.dumps(out))
        return
    if mode == "udp":
        # SOCKS5 UDP ASSOCIATE from a socket of our own, then one datagram per target
        s = socket.create_connection(proxy_addr("ALL_PROXY"), timeout=30)
        s.sendall(b"\x05\x01\x00")
        s.recv(2)
        u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        u.bind(("127.0.0.1", 0))
        u.settimeout(spec.get("wait", 2))
        s.sendall(b"\x05\x03\x00\x01\x7f\x00\x00\x01" + struct.pack(">H", u.getsockname()[1]))
        r = s.recv(10)
        if len(r) < 10 or r[1] != 0:
            print(json.dumps({"rep": r[1] if len(r) > 1 else -1}))
            return
        relay = (socket.inet_ntoa(r[4:8]), struct.unpack(">H", r[8:10])[0])
        replies = []
        for host, port, payload in spec["send"]:
            hb = host.encode()
            u.sendto(b"\x00\x00\x00\x03" + bytes([len(hb)]) + hb + struct.pack(">H", port) +
                     payload.encode(), relay)
            try:
                d, _ = u.recvfrom(65536)
                replies.append(d[10:].decode("latin-1") if d[3] == 1 else "?")
            except socket.timeout:
                replies.append(None)
        print(json.dumps({"rep": 0, "replies": replies}))
        return
    raise SystemExit("unknown mode " + mode)


if __name__ == "__main__":
    main()
