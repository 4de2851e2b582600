/* tun: the sandbox's side of transparent TCP (proxy.transparentTcp, PROTOCOL.md
 * section 5.11), run by the sandbox's init in the sandbox's own network namespace,
 * where it holds CAP_NET_ADMIN.
 *
 * It makes what the command sees, as codex 0.171.0's sandbox shows it: a TUN device
 * `codextun` (MTU 1500) holding 192.0.2.1/32 and 2001:db8::1/128, the default IPv4
 * and IPv6 routes through it, and /etc/resolv.conf replaced by a read-only
 * `nameserver 127.0.0.53`. It binds the resolver's sockets there (UDP and TCP
 * 127.0.0.53:53) but answers nothing itself: the TUN descriptor and both sockets go
 * to the server in one message on the proxy socket (tag 'T'), and the server's
 * user-space TCP stack and synthetic-name resolver (src/netproxy/np_tun.c) serve
 * them. The init keeps none of them.
 *
 * The TUN device is opened with IFF_VNET_HDR and TCP segmentation offload, so the
 * server reads and writes up to 64 KiB per system call rather than one 1500-byte
 * packet. */
#ifndef EXEC_SANDBOX_TUN_H
#define EXEC_SANDBOX_TUN_H

/* The device's name and addresses inside the sandbox. */
#define SANDBOX_TUN_NAME "codextun"
#define SANDBOX_TUN_MTU 1500

/* In the sandbox's init, after sandbox_setup (the view is final, loopback is up).
 * tun_path is an O_PATH descriptor of the host's /dev/net/tun (the private /dev has
 * none); it is reopened here, so the device is created in this network namespace.
 * sock is the init's end of the proxy socketpair. Returns 0, or -errno with *step
 * naming what failed (static text). Closes nothing it was given. */
int sandbox_tun_start(int tun_path, int sock, const char **step);

#endif
