/* exec-sandbox-helper: runs fs requests for the daemon inside a sandbox.
 *
 * Started by the daemon (sandbox/helper.c) with its end of a socketpair on fd 3.
 * It reads the policy (the sandbox JSON), confines itself once (mount view,
 * Landlock, no_new_privs, seccomp: sandbox/enforce.c), answers "ok", and from then
 * on serves only the fs request frames fs_helper_serve accepts, one at a time,
 * until the daemon closes the socket. Everything it does after confinement is
 * checked by the kernel, not by this program. */
#include <errno.h>
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "fs/fs_sandboxed.h"
#include "sandbox/enforce.h"
#include "sandbox/helper.h"
#include "sandbox/policy.h"
#include "util/buf.h"

#define SOCK_FD 3

/* The sandbox denies what LeakSanitizer needs at exit (DESIGN.md pitfall 12). */
const char *__asan_default_options(void);
const char *__asan_default_options(void)
{
    return "detect_leaks=0";
}

static int refuse(const char *why)
{
    sandbox_frame_send(SOCK_FD, why, strlen(why), -1);
    return 1;
}

int main(int argc, char **argv)
{
    /* Die with the daemon; if it is already gone, do not linger. */
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (argc > 1 && getppid() != (pid_t)atoi(argv[1])) return 1;
    signal(SIGPIPE, SIG_IGN);
    syscall(SYS_close_range, SOCK_FD + 1, ~0U, 0);

    struct buf in;
    buf_init(&in);
    if (sandbox_frame_recv(SOCK_FD, &in, NULL) < 0) return 1;
    json_error_t je;
    json_t *j = json_loadb(in.data, in.len, 0, &je);
    buf_free(&in);
    if (!j) return refuse("bad policy");
    struct sandbox_policy pol;
    struct sandbox_error serr;
    int rc = sandbox_policy_parse(j, NULL, &pol, &serr);
    json_decref(j);
    if (rc < 0) return refuse(serr.message);
    struct sandbox_prepared prep;
    char why[128];
    if ((rc = sandbox_prepare(&pol, &prep)) < 0) {
        snprintf(why, sizeof why, "cannot prepare the sandbox: %s", strerror(-rc));
        return refuse(why);
    }
    if ((rc = sandbox_apply(&prep)) < 0) {
        snprintf(why, sizeof why, "cannot apply the sandbox: %s", strerror(-rc));
        return refuse(why);
    }
    sandbox_prepared_free(&prep);
    if (chdir("/") < 0) return refuse("chdir");
    if (sandbox_frame_send(SOCK_FD, "ok", 2, -1) < 0) return 1;

    for (;;) {
        struct buf req, reply;
        buf_init(&req);
        buf_init(&reply);
        rc = sandbox_frame_recv(SOCK_FD, &req, NULL);
        if (rc < 0) {
            buf_free(&req);
            break;
        }
        int fd = -1;
        fs_helper_serve(req.data, req.len, &reply, &fd);
        buf_free(&req);
        rc = sandbox_frame_send(SOCK_FD, reply.data, reply.len, fd);
        if (fd >= 0) close(fd);
        buf_free(&reply);
        if (rc < 0) break;
    }
    sandbox_policy_free(&pol);
    return 0;
}
