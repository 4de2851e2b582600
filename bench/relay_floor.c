/* relay_floor: the protocol floor of scenario 2 (issue 25).
 *
 * Row 2's pipe floor carries the child's raw bytes; the protocol must carry a
 * third more (base64), in JSON, in WebSocket frames, through one more process.
 * This relay does exactly and only that, with no server around it: a process of
 * its own starts the child on a pipe, reads it 64 KiB at a time, cuts each read
 * into 8 KiB chunks, base64-encodes each with the server's encoder (proto/base64)
 * into a process/output notification framed as the server frames it (an
 * unmasked text frame, header in front of the payload), writes each read's
 * notifications with one write(2), and ends with process/exited and
 * process/closed. The driver reads it with the same client and checks as it
 * reads our server. Whatever ours costs beyond this is the server's own.
 *
 * Row 8b is the same for a streamed http/request: a process that fetches the file
 * from the web server with one plain HTTP/1.1 GET, reads the socket 512 KiB at a
 * time (curl's buffer in the server), cuts each read into 16 KiB pieces (what curl
 * hands its write callback), encodes each as an http/request/bodyDelta framed as the
 * server frames it, writes each read's deltas with one writev (the server's cork per
 * round of curl's work), and ends with the empty done:true delta. No libcurl, no
 * request to parse, no result before the deltas: the least a streamed download over
 * this protocol costs on top of curl's own receive. */
#include "bench.h"

#include <netinet/tcp.h>
#include <sys/uio.h>

#include "proto/ws_frame.h"

#define RELAY_READ (64 * 1024)
#define RELAY_CHUNK 8192

/* One notification in msg: the JSON written at msg + 10, the frame header right in
 * front of it, as the server does (BUF_MSG_HEADROOM); returns where the frame
 * starts, its length in *len. */
static char *frame_in_place(char *msg, size_t json_len, size_t *len)
{
    size_t h = ws_frame_header_len(json_len, false);
    char *f = msg + 10 - h;
    ws_frame_encode((uint8_t *)f, true, WS_OP_TEXT, json_len, NULL);
    *len = h + json_len;
    return f;
}

static void write_all_iov(int sock, struct iovec *iov, int n)
{
    while (n > 0) {
        ssize_t k = writev(sock, iov, n);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) _exit(1);
        while (n > 0 && (size_t)k >= iov->iov_len) {
            k -= (ssize_t)iov->iov_len;
            iov++;
            n--;
        }
        if (n > 0) {
            iov->iov_base = (char *)iov->iov_base + k;
            iov->iov_len -= (size_t)k;
        }
    }
}

/* The relay process: never returns. */
static void relay_main(int sock, char *const argv[], const char *id)
{
    int p[2];
    if (pipe(p) < 0) _exit(1);
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, p[1], 1);
    posix_spawn_file_actions_addclose(&fa, p[0]);
    pid_t pid;
    if (posix_spawn(&pid, argv[0], &fa, NULL, argv, environ) != 0) _exit(1);
    close(p[1]);
    static uint8_t in[RELAY_READ];
    enum { NMSG = RELAY_READ / RELAY_CHUNK };
    size_t msg_cap = 10 + base64_encoded_len(RELAY_CHUNK) + 256;
    char *msg[NMSG];
    for (int i = 0; i < NMSG; i++)
        msg[i] = xmalloc(msg_cap);
    struct iovec iov[NMSG];
    uint64_t seq = 0;
    for (;;) {
        ssize_t r = read(p[0], in, sizeof in);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) break;
        int nm = 0;
        for (ssize_t off = 0; off < r; off += RELAY_CHUNK, nm++) {
            size_t len = (size_t)(r - off) < RELAY_CHUNK ? (size_t)(r - off) : RELAY_CHUNK;
            char *j = msg[nm] + 10;
            int h = snprintf(j, 256,
                             "{\"method\":\"process/output\",\"params\":{\"processId\":\"%s\","
                             "\"seq\":%llu,\"stream\":\"stdout\",\"chunk\":\"",
                             id, (unsigned long long)++seq);
            size_t n = (size_t)h + base64_encode(in + off, len, j + h);
            memcpy(j + n, "\"}}", 3);
            iov[nm].iov_base = frame_in_place(msg[nm], n + 3, &iov[nm].iov_len);
        }
        write_all_iov(sock, iov, nm);
    }
    int st = 0;
    waitpid(pid, &st, 0);
    int n = snprintf(msg[0] + 10, 256,
                     "{\"method\":\"process/exited\",\"params\":{\"processId\":\"%s\","
                     "\"seq\":%llu,\"exitCode\":%d,\"sandboxDenied\":false}}",
                     id, (unsigned long long)++seq, WIFEXITED(st) ? WEXITSTATUS(st) : 128);
    iov[0].iov_base = frame_in_place(msg[0], (size_t)n, &iov[0].iov_len);
    n = snprintf(msg[1] + 10, 256,
                 "{\"method\":\"process/closed\",\"params\":{\"processId\":\"%s\","
                 "\"seq\":%llu}}",
                 id, (unsigned long long)++seq);
    iov[1].iov_base = frame_in_place(msg[1], (size_t)n, &iov[1].iov_len);
    write_all_iov(sock, iov, 2);
    _exit(0);
}

/* Forks a relay process with a TCP connection to the driver (Nagle off, as the
 * server's): the child runs body(sock, arg), which never returns; the parent gets
 * its end of the connection (or -1 with errno) and the child in *pid_out. */
static int fork_relay(void (*body)(int sock, void *arg), void *arg, pid_t *pid_out)
{
    struct sockaddr_in a;
    int ls = listen_loopback(1, &a);
    if (ls < 0) return -1;
    pid_t pid = fork();
    if (pid == 0) {
        int s = socket(AF_INET, SOCK_STREAM, 0);
        int one = 1;
        setsockopt(s, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        if (connect(s, (struct sockaddr *)&a, sizeof a) < 0) _exit(1);
        body(s, arg);
        _exit(1); /* not reached: body ends the process */
    }
    int fd = pid > 0 ? accept4(ls, NULL, NULL, SOCK_CLOEXEC) : -1;
    int e = errno;
    close(ls);
    if (fd < 0 && pid > 0) waitpid(pid, NULL, 0);
    *pid_out = pid;
    errno = e;
    return fd;
}

struct stream_relay_arg {
    char *const *argv;
};

static void stream_relay_body(int sock, void *arg)
{
    relay_main(sock, ((struct stream_relay_arg *)arg)->argv, "r0_0");
}

double relay_floor_once(size_t bytes, char *err, size_t errlen)
{
    char count[32];
    snprintf(count, sizeof count, "%zu", bytes);
    char *argv[] = {"/usr/bin/head", "-c", count, "/dev/zero", NULL};
    struct stream_relay_arg ra = {argv};
    double t0 = now_s();
    pid_t pid = -1;
    int fd = fork_relay(stream_relay_body, &ra, &pid);
    if (fd < 0) {
        snprintf(err, errlen, "relay: %s", strerror(errno));
        return -1;
    }
    struct wsc c;
    wsc_attach(&c, fd);
    struct track tr;
    track_init(&tr, "r0_", 1, true);
    int rc = track_pump(&c, &tr, 1, 0, TIMEOUT_MS);
    double dt = now_s() - t0;
    if (rc == 0 && tr.bytes != bytes)
        snprintf(tr.err, sizeof tr.err, "relay delivered %llu of %zu bytes",
                 (unsigned long long)tr.bytes, bytes);
    snprintf(err, errlen, "%s", tr.err);
    double rate = tr.err[0] ? -1 : bytes / dt / 1e6;
    track_free(&tr);
    wsc_close(&c);
    waitpid(pid, NULL, 0);
    return rate;
}

#define HTTP_READ (512 * 1024)
#define HTTP_PIECE (16 * 1024)

/* One bodyDelta of data[0..n) in msg (room for it: 10 + 256 + encoded length). */
static struct iovec http_delta(char *msg, uint64_t seq, const uint8_t *data, size_t n, bool done)
{
    char *j = msg + 10;
    int h = snprintf(j, 256,
                     "{\"method\":\"http/request/bodyDelta\",\"params\":{\"requestId\":"
                     "\"floor-1\",\"seq\":%llu,\"deltaBase64\":\"",
                     (unsigned long long)seq);
    size_t len = (size_t)h + base64_encode(data, n, j + h);
    const char *tail =
        done ? "\",\"done\":true,\"error\":null}}" : "\",\"done\":false,\"error\":null}}";
    memcpy(j + len, tail, strlen(tail));
    len += strlen(tail);
    struct iovec v;
    v.iov_base = frame_in_place(msg, len, &v.iov_len);
    return v;
}

/* The http relay process: never returns. */
static void http_relay_main(int sock, int web_port, const char *path)
{
    int web = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in a = {.sin_family = AF_INET,
                            .sin_port = htons((uint16_t)web_port),
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    if (web < 0 || connect(web, (struct sockaddr *)&a, sizeof a) < 0) _exit(1);
    char req[512];
    int rn = snprintf(req, sizeof req,
                      "GET %s HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nConnection: close\r\n\r\n", path,
                      web_port);
    if (write(web, req, (size_t)rn) != rn) _exit(1);
    static uint8_t in[HTTP_READ];
    enum { NMSG = HTTP_READ / HTTP_PIECE };
    size_t msg_cap = 10 + 256 + base64_encoded_len(HTTP_PIECE);
    char *msg[NMSG];
    for (int i = 0; i < NMSG; i++)
        msg[i] = xmalloc(msg_cap);
    struct iovec iov[NMSG];
    uint64_t seq = 0;
    bool in_body = false;
    size_t have = 0; /* head bytes gathered while !in_body */
    for (;;) {
        ssize_t r = read(web, in + have, sizeof in - have);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) break;
        const uint8_t *body = in;
        size_t n = (size_t)r;
        if (!in_body) {
            have += (size_t)r;
            uint8_t *end = memmem(in, have, "\r\n\r\n", 4);
            if (!end) {
                if (have == sizeof in) _exit(1);
                continue;
            }
            in_body = true;
            body = end + 4;
            n = have - (size_t)(body - in);
            have = 0;
        }
        int nm = 0;
        for (size_t off = 0; off < n; off += HTTP_PIECE, nm++) {
            size_t len = n - off < HTTP_PIECE ? n - off : HTTP_PIECE;
            iov[nm] = http_delta(msg[nm], ++seq, body + off, len, false);
        }
        if (nm) write_all_iov(sock, iov, nm);
    }
    iov[0] = http_delta(msg[0], ++seq, in, 0, true);
    write_all_iov(sock, iov, 1);
    _exit(0);
}

struct http_relay_arg {
    int web_port;
    const char *path;
};

static void http_relay_body(int sock, void *arg)
{
    struct http_relay_arg *ha = arg;
    http_relay_main(sock, ha->web_port, ha->path);
}

int relay_http_start(int web_port, const char *path, pid_t *pid_out)
{
    struct http_relay_arg ha = {web_port, path};
    return fork_relay(http_relay_body, &ha, pid_out);
}
