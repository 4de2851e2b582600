/* Unit tests for util/fdframe's non-blocking send (fdframe_send_part), the loop
 * thread's way to the spawner: frames built with fdframe_begin/end arrive whole and
 * in order through fdframe_recv however the socket splits them, the descriptors
 * arrive with their own frame only, a full socket takes nothing (the descriptors
 * stay the sender's), and a closed peer is -EPIPE. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdbool.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "util/fdframe.h"

/* A frame of n bytes, byte i being (seed + i) mod 251. */
static void make_frame(struct buf *b, size_t n, int seed)
{
    buf_init(b);
    fdframe_begin(b);
    for (size_t i = 0; i < n; i++) {
        char c = (char)((seed + (int)i) % 251);
        buf_append(b, &c, 1);
    }
    fdframe_end(b, 0);
}

static void check_payload(const struct buf *got, size_t n, int seed)
{
    assert_int_equal(got->len, n);
    for (size_t i = 0; i < n; i++)
        assert_int_equal((unsigned char)got->data[i], (unsigned char)((seed + (int)i) % 251));
}

static void same_file(int a, int b)
{
    struct stat sa, sb;
    assert_int_equal(fstat(a, &sa), 0);
    assert_int_equal(fstat(b, &sb), 0);
    assert_true(sa.st_ino == sb.st_ino && sa.st_dev == sb.st_dev);
}

static void test_whole_frame_with_fds(void **state)
{
    int sv[2];
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    int p[2];
    assert_int_equal(pipe(p), 0);
    struct buf f;
    make_frame(&f, 100, 7);
    assert_int_equal(fdframe_send_part(sv[0], f.data, f.len, 0, p, 2), (ssize_t)f.len);
    struct buf got;
    buf_init(&got);
    int fds[4], nfds = 0;
    assert_int_equal(fdframe_recv(sv[1], &got, fds, 4, &nfds), 0);
    check_payload(&got, 100, 7);
    assert_int_equal(nfds, 2);
    same_file(fds[0], p[0]);
    same_file(fds[1], p[1]);
    for (int i = 0; i < 2; i++) {
        close(fds[i]);
        close(p[i]);
        close(sv[i]);
    }
    buf_free(&f);
    buf_free(&got);
}

/* Frames sent into a socket that fills, the rest sent as a reader thread drains it
 * (poll for room, as the loop's uv_poll does): each arrives whole, in order, with its
 * own descriptor. */
enum { N = 40, LEN = 20000 };
static int files[N];

struct reader {
    int sock;
    int ok; /* frames that arrived right */
};

static void *read_frames(void *arg)
{
    struct reader *r = arg;
    for (int i = 0; i < N; i++) {
        struct buf got;
        buf_init(&got);
        int fd = -1, nfds = 0;
        if (fdframe_recv(r->sock, &got, &fd, 1, &nfds) < 0) break;
        bool right = got.len == LEN + (size_t)i && nfds == 1;
        for (size_t k = 0; right && k < got.len; k++)
            right = (unsigned char)got.data[k] == (unsigned char)((i + (int)k) % 251);
        struct stat a, b;
        right = right && fstat(fd, &a) == 0 && fstat(files[i], &b) == 0 && a.st_ino == b.st_ino;
        if (fd >= 0) close(fd);
        buf_free(&got);
        if (!right) break;
        r->ok++;
    }
    return NULL;
}

static void test_full_socket_resumes_in_order(void **state)
{
    int sv[2];
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    int small = 4096;
    setsockopt(sv[0], SOL_SOCKET, SO_SNDBUF, &small, sizeof small);
    struct buf frames[N];
    for (int i = 0; i < N; i++) {
        files[i] = open(i % 2 ? "/dev/null" : "/dev/zero", O_RDONLY);
        assert_true(files[i] >= 0);
        make_frame(&frames[i], LEN + (size_t)i, i);
    }
    struct reader r = {sv[1], 0};
    pthread_t t;
    int full = 0;
    for (int i = 0; i < N; i++) {
        size_t off = 0;
        while (off < frames[i].len) {
            ssize_t w = fdframe_send_part(sv[0], frames[i].data, frames[i].len, off,
                                          off ? NULL : &files[i], off ? 0 : 1);
            assert_true(w >= 0);
            if (w == 0) {
                /* Nothing went: the descriptor is still ours and open. */
                assert_true(fcntl(files[i], F_GETFD) >= 0);
                if (full++ == 0) assert_int_equal(pthread_create(&t, NULL, read_frames, &r), 0);
                struct pollfd p = {sv[0], POLLOUT, 0};
                assert_int_equal(poll(&p, 1, 10000), 1);
                continue;
            }
            off += (size_t)w;
        }
    }
    assert_true(full > 0); /* the socket did fill: the resuming path ran */
    pthread_join(t, NULL);
    assert_int_equal(r.ok, N);
    for (int i = 0; i < N; i++) {
        close(files[i]);
        buf_free(&frames[i]);
    }
    close(sv[0]);
    close(sv[1]);
}

static void test_closed_peer_and_bad_use(void **state)
{
    int sv[2];
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    struct buf f;
    make_frame(&f, 10, 1);
    int fd = sv[1];
    assert_int_equal(fdframe_send_part(sv[0], f.data, f.len, 3, &fd, 1), -EINVAL);
    close(sv[1]);
    assert_int_equal(fdframe_send_part(sv[0], f.data, f.len, 0, NULL, 0), -EPIPE);
    close(sv[0]);
    buf_free(&f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_whole_frame_with_fds),
        cmocka_unit_test(test_full_socket_resumes_in_order),
        cmocka_unit_test(test_closed_peer_and_bad_use),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
