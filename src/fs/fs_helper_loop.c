/* fs_helper_loop: the sandboxed fs helper's life, in a sandbox's init.
 *
 * The spawner starts a helper as a sandboxed child that does not exec: once its
 * namespaces, view, Landlock rules, capability drop and seccomp filter are in
 * place it calls this loop on its end of a socketpair (helpers/spawner.h,
 * sandbox/spec.h: serve). It says "ok" and from then on serves only the fs request frames
 * fs_helper_serve accepts, one at a time, until the daemon closes the socket.
 * Everything it does is checked by the kernel, not by this program. */
#include <signal.h>
#include <unistd.h>

#include "fs/fs_sandboxed.h"
#include "fs/fs_helper_pool.h"
#include "sandbox/sandbox_init.h"
#include "util/buf.h"

int fs_helper_run(int sock)
{
    signal(SIGPIPE, SIG_IGN);
    if (fs_helper_frame_send(sock, "ok", 2, -1) < 0) return 1;
    for (;;) {
        struct buf req, reply;
        buf_init(&req);
        buf_init(&reply);
        if (fs_helper_frame_recv(sock, &req, NULL) < 0) {
            buf_free(&req);
            break;
        }
        /* A view the host changed may have lost a protected name's read-only mount:
         * end, and the daemon starts a fresh helper for the next request. */
        if (!sandbox_view_intact()) {
            buf_free(&req);
            break;
        }
        int fd = -1, displaced = -1;
        fs_helper_serve(req.data, req.len, &reply, &fd, &displaced);
        buf_free(&req);
        int rc = fs_helper_frame_send(sock, reply.data, reply.len, fd);
        if (fd >= 0) close(fd);
        if (displaced >= 0) close(displaced); /* after the reply: it may wait for I/O */
        buf_free(&reply);
        if (rc < 0) break;
    }
    return 0;
}
