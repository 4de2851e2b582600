#!/usr/bin/env python3
"""The child side of test_transparent_tcp.py: a program that ignores every proxy variable
and says what it saw as one JSON line.

    tcp_probe.py '{"view": true, "dns": ["a.test"], "connect": [["h", 80, "/x"]],
                   "udp": [["h", 9, "payload"]]}'

view: /etc/resolv.conf, /etc/hosts, the IPv6 addresses and both routing tables of its
network namespace (/proc/self/net), codextun's IPv4 address, MTU and flags (ioctl).
dns: A and AAAA of each name from 127.0.0.53 (UDP; a name ending in "+tcp" over TCP).
connect: a plain TCP connection to each (host, port[, family 4 or 6]), one GET, the
response or the error. udp: one datagram to each (host, port). Standard library only."""
import errno
import fcntl
import json
import os
import socket
import struct
import sys


def read(path):
    try:
        with open(path) as f:
            return f.read()
    except OSError as e:
        return "error: %s" % e


def ifreq(name, req):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        return fcntl.ioctl(s.fileno(), req, struct.pack("256s", name.encode()))
    finally:
        s.close()


def view():
    out = {"resolv": read("/etc/resolv.conf"), "hosts": read("/etc/hosts"),
           "if_inet6": read("/proc/self/net/if_inet6"), "route": read("/proc/self/net/route"),
           "ipv6_route": read("/proc/self/net/ipv6_route")}
    try:
        r = ifreq("codextun", 0x8915)  # SIOCGIFADDR
        out["addr4"] = socket.inet_ntoa(r[20:24])
        out["mtu"] = struct.unpack("i", ifreq("codextun", 0x8921)[16:20])[0]  # SIOCGIFMTU
        out["flags"] = struct.unpack("H", ifreq("codextun", 0x8913)[16:18])[0]  # SIOCGIFFLAGS
    except OSError as e:
        out["ioctl"] = errno.errorcode.get(e.errno, str(e))
    return out


def dns_query(name, qtype, tcp):
    q = struct.pack(">HHHHHH", 0x4242, 0x0100, 1, 0, 0, 0)
    for label in name.rstrip(".").split("."):
        q += bytes([len(label)]) + label.encode()
    q += b"\0" + struct.pack(">HH", qtype, 1)
    if tcp:
        s = socket.create_connection(("127.0.0.53", 53), timeout=5)
        s.sendall(struct.pack(">H", len(q)) + q)
        n = struct.unpack(">H", s.recv(2))[0]
        r = b""
        while len(r) < n:
            r += s.recv(n - len(r))
        s.close()
    else:
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        s.settimeout(5)
        s.sendto(q, ("127.0.0.53", 53))
        r, _ = s.recvfrom(4096)
        s.close()
    if struct.unpack(">H", r[6:8])[0] == 0:
        return None
    rdata = r[-4:] if qtype == 1 else r[-16:]
    return socket.inet_ntop(socket.AF_INET if qtype == 1 else socket.AF_INET6, rdata)


def connect(host, port, path, family=0):
    try:
        if family:  # only that family's addresses (6: AAAA, the synthetic fdc0:de00::N)
            fam = socket.AF_INET6 if family == 6 else socket.AF_INET
            addr = socket.getaddrinfo(host, port, fam, socket.SOCK_STREAM)[0][4]
            s = socket.socket(fam, socket.SOCK_STREAM)
            s.settimeout(10)
            s.connect(addr)
        else:
            s = socket.create_connection((host, port), timeout=10)
        s.sendall(("GET %s HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n"
                   % (path, host)).encode())
        data = b""
        while True:
            chunk = s.recv(65536)
            if not chunk:
                break
            data += chunk
        s.close()
        head, _, body = data.partition(b"\r\n\r\n")
        status = int(head.split(b" ")[1]) if head.startswith(b"HTTP/") else 0
        return {"status": status, "body": body.decode("latin-1")}
    except OSError as e:
        return {"error": errno.errorcode.get(e.errno, str(e)) if e.errno else str(e)}


def main():
    spec = json.loads(sys.argv[1])
    out = {}
    if spec.get("view"):
        out["view"] = view()
    if spec.get("dns"):
        out["dns"] = {}
        for name in spec["dns"]:
            tcp = name.endswith("+tcp")
            n = name[:-4] if tcp else name
            out["dns"][name] = [dns_query(n, 1, tcp), dns_query(n, 28, tcp)]
    if spec.get("connect"):
        out["connect"] = [connect(*c) for c in spec["connect"]]
    if spec.get("udp"):
        for host, port, payload in spec["udp"]:
            u = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET,
                              socket.SOCK_DGRAM)
            u.sendto(payload.encode(), (host, port))
            u.close()
        out["udp"] = len(spec["udp"])
    print(json.dumps(out))


if __name__ == "__main__":
    main()
