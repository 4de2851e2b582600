/* tun: the TUN device, routes, resolver sockets and resolv.conf of a transparent-TCP
 * sandbox, made by its init (see tun.h). Addresses and routes go through rtnetlink
 * (the IPv6 address without duplicate detection, so it is usable at once, as the
 * reference's is); the link is brought up by ioctl, as enforce.c does for loopback;
 * the resolv.conf is a file of a private tmpfs bound read-only over the view's. */
#include "sandbox/tun.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/if_tun.h>
#include <linux/mount.h>
#include <linux/rtnetlink.h>
#include <net/if.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "util/fdframe.h"

/* What gets negotiated with the TUN device: checksum and segmentation offload, so a
 * 64 KiB TCP segment crosses it in one read or write. */
#define TUN_OFFLOADS (TUN_F_CSUM | TUN_F_TSO4 | TUN_F_TSO6)

static const char resolv_conf[] = "nameserver 127.0.0.53\n";

/* ---- rtnetlink ------------------------------------------------------------------ */

struct nl_req {
    struct nlmsghdr h;
    char body[256];
};

static void nl_attr(struct nl_req *r, unsigned short type, const void *data, size_t len)
{
    struct rtattr *a = (struct rtattr *)((char *)&r->h + NLMSG_ALIGN(r->h.nlmsg_len));
    a->rta_type = type;
    a->rta_len = (unsigned short)RTA_LENGTH(len);
    memcpy(RTA_DATA(a), data, len);
    r->h.nlmsg_len = NLMSG_ALIGN(r->h.nlmsg_len) + (unsigned)RTA_ALIGN(a->rta_len);
}

/* Sends one request and reads its acknowledgement. Returns 0 or -errno. */
static int nl_talk(int fd, struct nl_req *r)
{
    r->h.nlmsg_flags |= NLM_F_REQUEST | NLM_F_ACK;
    struct sockaddr_nl kernel = {.nl_family = AF_NETLINK};
    if (sendto(fd, r, r->h.nlmsg_len, 0, (struct sockaddr *)&kernel, sizeof kernel) < 0)
        return -errno;
    char buf[512];
    ssize_t n = recv(fd, buf, sizeof buf, 0);
    if (n < 0) return -errno;
    struct nlmsghdr *h = (struct nlmsghdr *)buf;
    if (!NLMSG_OK(h, (size_t)n) || h->nlmsg_type != NLMSG_ERROR) return -EPROTO;
    const struct nlmsgerr *e = NLMSG_DATA(h);
    return e->error; /* 0, or -errno */
}

/* A request of type with its fixed header of hdr bytes (zeroed), ready for nl_attr. */
static void *nl_begin(struct nl_req *r, unsigned short type, size_t hdr)
{
    memset(r, 0, sizeof *r);
    r->h.nlmsg_type = type;
    r->h.nlmsg_flags = NLM_F_CREATE | NLM_F_EXCL;
    r->h.nlmsg_len = (unsigned)NLMSG_LENGTH(hdr);
    return NLMSG_DATA(&r->h);
}

static int add_address(int fd, int ifindex, int family, const void *addr, unsigned char plen)
{
    struct nl_req r;
    struct ifaddrmsg *ifa = nl_begin(&r, RTM_NEWADDR, sizeof *ifa);
    ifa->ifa_family = (unsigned char)family;
    ifa->ifa_prefixlen = plen;
    ifa->ifa_flags = family == AF_INET6 ? IFA_F_NODAD : 0;
    ifa->ifa_scope = RT_SCOPE_UNIVERSE;
    ifa->ifa_index = (unsigned)ifindex;
    size_t len = family == AF_INET ? 4 : 16;
    nl_attr(&r, IFA_LOCAL, addr, len);
    nl_attr(&r, IFA_ADDRESS, addr, len);
    return nl_talk(fd, &r);
}

/* The default route of a family through the device (`default dev codextun`). */
static int add_default_route(int fd, int ifindex, int family)
{
    struct nl_req r;
    struct rtmsg *rt = nl_begin(&r, RTM_NEWROUTE, sizeof *rt);
    rt->rtm_family = (unsigned char)family;
    rt->rtm_table = RT_TABLE_MAIN;
    rt->rtm_protocol = RTPROT_BOOT;
    rt->rtm_scope = family == AF_INET ? RT_SCOPE_LINK : RT_SCOPE_UNIVERSE;
    rt->rtm_type = RTN_UNICAST;
    uint32_t oif = (uint32_t)ifindex, metric = 1;
    nl_attr(&r, RTA_OIF, &oif, sizeof oif);
    if (family == AF_INET6) nl_attr(&r, RTA_PRIORITY, &metric, sizeof metric);
    return nl_talk(fd, &r);
}

/* ---- the device ------------------------------------------------------------------ */

/* Opens /dev/net/tun anew (here, so the device belongs to this network namespace)
 * and creates codextun on it. Returns the descriptor or -errno. */
static int tun_create(int tun_path)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/self/fd/%d", tun_path);
    int fd = open(path, O_RDWR | O_CLOEXEC);
    if (fd < 0) return -errno;
    struct ifreq ifr;
    memset(&ifr, 0, sizeof ifr);
    snprintf(ifr.ifr_name, sizeof ifr.ifr_name, "%s", SANDBOX_TUN_NAME);
    ifr.ifr_flags = IFF_TUN | IFF_NO_PI | IFF_VNET_HDR;
    unsigned offloads = TUN_OFFLOADS;
    if (ioctl(fd, TUNSETIFF, &ifr) < 0 || ioctl(fd, TUNSETOFFLOAD, offloads) < 0) {
        int e = errno;
        close(fd);
        return -e;
    }
    return fd;
}

/* MTU, then up. */
static int link_up(void)
{
    int sk = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (sk < 0) return -errno;
    struct ifreq ifr;
    memset(&ifr, 0, sizeof ifr);
    snprintf(ifr.ifr_name, sizeof ifr.ifr_name, "%s", SANDBOX_TUN_NAME);
    int rc = 0;
    ifr.ifr_mtu = SANDBOX_TUN_MTU;
    if (ioctl(sk, SIOCSIFMTU, &ifr) < 0 || ioctl(sk, SIOCGIFFLAGS, &ifr) < 0) rc = -errno;
    ifr.ifr_flags |= IFF_UP | IFF_RUNNING;
    if (!rc && ioctl(sk, SIOCSIFFLAGS, &ifr) < 0) rc = -errno;
    close(sk);
    return rc;
}

static int configure(const char **step)
{
    int ifindex = (int)if_nametoindex(SANDBOX_TUN_NAME);
    *step = "transparent TCP: link";
    if (ifindex == 0) return -errno;
    int rc = link_up();
    if (rc < 0) return rc;
    int nl = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE);
    if (nl < 0) return -errno;
    struct in_addr a4;
    struct in6_addr a6;
    inet_pton(AF_INET, "192.0.2.1", &a4);
    inet_pton(AF_INET6, "2001:db8::1", &a6);
    *step = "transparent TCP: addresses";
    rc = add_address(nl, ifindex, AF_INET, &a4, 32);
    if (!rc) rc = add_address(nl, ifindex, AF_INET6, &a6, 128);
    if (!rc) *step = "transparent TCP: routes";
    if (!rc) rc = add_default_route(nl, ifindex, AF_INET);
    if (!rc) rc = add_default_route(nl, ifindex, AF_INET6);
    close(nl);
    return rc;
}

/* ---- the resolver's sockets and resolv.conf --------------------------------------- */

static int resolver_socket(int type)
{
    int s = socket(AF_INET, type | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (s < 0) return -errno;
    int one = 1;
    (void)setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(53)};
    inet_pton(AF_INET, "127.0.0.53", &a.sin_addr);
    if (bind(s, (struct sockaddr *)&a, sizeof a) < 0 ||
        (type == SOCK_STREAM && listen(s, 16) < 0)) {
        int e = errno;
        close(s);
        return -e;
    }
    return s;
}

/* A read-only `nameserver 127.0.0.53` over /etc/resolv.conf (whatever it links to):
 * a file of a detached tmpfs, bound there and then unlinked from the tmpfs. */
static int mount_resolv_conf(void)
{
    int target = open("/etc/resolv.conf", O_PATH | O_CLOEXEC);
    if (target < 0) return -errno;
    int rc = 0, mnt = -1, tree = -1;
    long fs = syscall(SYS_fsopen, "tmpfs", FSOPEN_CLOEXEC);
    if (fs < 0 || syscall(SYS_fsconfig, (int)fs, FSCONFIG_SET_STRING, "size", "4k", 0) < 0 ||
        syscall(SYS_fsconfig, (int)fs, FSCONFIG_CMD_CREATE, NULL, NULL, 0) < 0 ||
        (mnt = (int)syscall(SYS_fsmount, (int)fs, FSMOUNT_CLOEXEC,
                            MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | MOUNT_ATTR_NOEXEC)) < 0) {
        rc = -errno;
        goto out;
    }
    int f = openat(mnt, "resolv.conf", O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0444);
    if (f < 0 || write(f, resolv_conf, sizeof resolv_conf - 1) != sizeof resolv_conf - 1) {
        rc = f < 0 ? -errno : -EIO;
        if (f >= 0) close(f);
        goto out;
    }
    close(f);
    tree = (int)syscall(SYS_open_tree, mnt, "resolv.conf", OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC);
    struct mount_attr ro = {.attr_set = MOUNT_ATTR_RDONLY};
    if (tree < 0 || syscall(SYS_mount_setattr, tree, "", AT_EMPTY_PATH, &ro, sizeof ro) < 0 ||
        syscall(SYS_move_mount, tree, "", target, "",
                MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH) < 0)
        rc = -errno;
    else
        (void)unlinkat(mnt, "resolv.conf", 0); /* the bind keeps it */
out:
    if (tree >= 0) close(tree);
    if (mnt >= 0) close(mnt);
    if (fs >= 0) close((int)fs);
    close(target);
    return rc;
}

int sandbox_tun_start(int tun_path, int sock, const char **step)
{
    int fds[3] = {-1, -1, -1};
    int rc = 0;
    *step = "transparent TCP: /dev/net/tun";
    if ((fds[0] = tun_create(tun_path)) < 0) return fds[0];
    if ((rc = configure(step)) < 0) goto out;
    *step = "transparent TCP: resolver sockets";
    if ((fds[1] = resolver_socket(SOCK_DGRAM)) < 0 || (fds[2] = resolver_socket(SOCK_STREAM)) < 0) {
        rc = fds[1] < 0 ? fds[1] : fds[2];
        goto out;
    }
    *step = "transparent TCP: /etc/resolv.conf";
    if ((rc = mount_resolv_conf()) < 0) goto out;
    *step = "transparent TCP: hand-over";
    /* The three descriptors to the server, one message with tag 'T'. */
    rc = fdframe_send_tagged(sock, 'T', fds, 3);
out:
    for (int i = 0; i < 3; i++)
        if (fds[i] >= 0) close(fds[i]);
    return rc;
}
