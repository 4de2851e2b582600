/* sandbox_host: what this host and the server's options allow every sandbox (see
 * sandbox_host.h). */
#include "sandbox/sandbox_host.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sandbox/landlock.h"
#include "sandbox/policy.h"
#include "sandbox/seccomp.h"

bool sandbox_pid_namespace_inherit;
struct sandbox_host_caps sandbox_host;

/* ---- the probe ----------------------------------------------------------------------- */

/* The steps of the probe, as its exit status says where it stopped. */
enum probe_step {
    PROBE_OK = 0,
    PROBE_UNSHARE = 10,
    PROBE_ID_MAPS,
    PROBE_FORK,
    PROBE_PRIVATE,
    PROBE_TMPFS,
    PROBE_DEVPTS,
    PROBE_PROC,
    PROBE_PROC_BOUND = 40, /* everything, but /proc only as the host's, bound */
};

static const char *const probe_steps[] = {"unshare",       "the user namespace's id maps",
                                          "fork",          "a private mount table",
                                          "mount a tmpfs", "mount devpts",
                                          "mount /proc"};

static int write_text(const char *path, const char *text)
{
    int fd = open(path, O_WRONLY | O_CLOEXEC);
    if (fd < 0) return -1;
    ssize_t n = write(fd, text, strlen(text));
    close(fd);
    return n == (ssize_t)strlen(text) ? 0 : -1;
}

/* In the grandchild, PID 1 of the new namespaces: the mounts a view makes, on
 * private copies (nothing reaches the host's mount table). */
static int probe_mounts(void)
{
    if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0) return PROBE_PRIVATE;
    if (mount("tmpfs", "/dev", "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755") < 0) return PROBE_TMPFS;
    if (mkdir("/dev/pts", 0755) < 0 || mount("devpts", "/dev/pts", "devpts", MS_NOSUID | MS_NOEXEC,
                                             "newinstance,ptmxmode=0666") < 0)
        return PROBE_DEVPTS;
    if (mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) == 0)
        return PROBE_OK;
    if (mount("/proc", "/proc", NULL, MS_BIND | MS_REC, NULL) == 0) return PROBE_PROC_BOUND;
    return PROBE_PROC;
}

/* The child: the namespaces of a sandbox (with a user namespace, or as root without
 * one, as sandbox_init does), then a grandchild to be PID 1 there. Only system calls
 * and _exit: the server may have threads. */
static __attribute__((noreturn)) void probe_child(void)
{
    uid_t uid = geteuid();
    gid_t gid = getegid();
    int ns = CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWIPC | CLONE_NEWUTS | CLONE_NEWNET;
    bool userns = true;
    if (unshare(CLONE_NEWUSER | ns) < 0) {
        if (uid != 0 || unshare(ns) < 0) _exit(PROBE_UNSHARE);
        userns = false;
    }
    char map[64];
    if (userns) {
        snprintf(map, sizeof map, "%u %u 1\n", (unsigned)uid, (unsigned)uid);
        int bad = write_text("/proc/self/setgroups", "deny") < 0 ||
                  write_text("/proc/self/uid_map", map) < 0;
        snprintf(map, sizeof map, "%u %u 1\n", (unsigned)gid, (unsigned)gid);
        if (bad || write_text("/proc/self/gid_map", map) < 0) _exit(PROBE_ID_MAPS);
    }
    pid_t pid = fork();
    if (pid < 0) _exit(PROBE_FORK);
    if (pid == 0) _exit(probe_mounts());
    int st;
    while (waitpid(pid, &st, 0) < 0)
        if (errno != EINTR) _exit(PROBE_FORK);
    _exit(WIFEXITED(st) ? WEXITSTATUS(st) : PROBE_FORK);
}

/* Runs the probe; the step it stopped at (PROBE_*) and its errno's text in why. */
static int probe_namespaces(char *why, size_t cap)
{
    pid_t pid = fork();
    if (pid < 0) {
        snprintf(why, cap, "fork: %s", strerror(errno));
        return PROBE_FORK;
    }
    if (pid == 0) probe_child();
    int st;
    while (waitpid(pid, &st, 0) < 0)
        if (errno != EINTR) break;
    int step = WIFEXITED(st) ? WEXITSTATUS(st) : PROBE_FORK;
    if (step >= PROBE_UNSHARE && step <= PROBE_PROC)
        snprintf(why, cap, "%s refused", probe_steps[step - PROBE_UNSHARE]);
    return step;
}

static const char *mode_line(enum sandbox_mode m)
{
    switch (m) {
    case SANDBOX_MODE_NAMESPACES: return "namespaces (user, PID, mount, network, IPC, UTS)";
    case SANDBOX_MODE_LANDLOCK: return "Landlock without namespaces";
    case SANDBOX_MODE_NONE: break;
    }
    return "none";
}

void sandbox_host_probe(enum sandbox_mode_choice choice, char *line, size_t cap)
{
    struct sandbox_host_caps *h = &sandbox_host;
    memset(h, 0, sizeof *h);
    h->choice = choice;
    h->landlock_abi = sandbox_landlock_abi();
    struct seccomp_prog prog;
    h->filter = seccomp_build(SECCOMP_NET_NONE, 0, &prog) == 0;
    int step = PROBE_OK;
    if (choice != SANDBOX_CHOICE_LANDLOCK) step = probe_namespaces(h->why_not, sizeof h->why_not);
    h->host_proc = step == PROBE_PROC_BOUND;
    /* A /proc bound from the host shows its processes: only Landlock's ptrace rule
     * keeps theirs closed (view.c). */
    h->namespaces = step == PROBE_OK || (h->host_proc && h->landlock_abi >= 1);
    if (h->host_proc && !h->namespaces)
        snprintf(h->why_not, sizeof h->why_not, "a fresh /proc refused, and no Landlock");
    if (choice == SANDBOX_CHOICE_LANDLOCK) snprintf(h->why_not, sizeof h->why_not, "not probed");
    h->probed = true;
    enum sandbox_mode m = sandbox_host_mode_for(false);
    char ll[48];
    if (h->landlock_abi)
        snprintf(ll, sizeof ll, "Landlock ABI %d", h->landlock_abi);
    else
        snprintf(ll, sizeof ll, "no Landlock");
    snprintf(line, cap, "sandbox: %s%s; %s, seccomp %s%s%s%s", mode_line(m),
             h->host_proc && m == SANDBOX_MODE_NAMESPACES ? " with the host's /proc" : "", ll,
             h->filter ? "filter" : "unavailable on this architecture",
             m != SANDBOX_MODE_NAMESPACES && h->why_not[0] ? "; namespaces: " : "",
             m != SANDBOX_MODE_NAMESPACES ? h->why_not : "",
             m == SANDBOX_MODE_NONE ? "; sandboxed requests are refused" : "");
}

enum sandbox_mode sandbox_host_mode_for(bool legacy_landlock)
{
    const struct sandbox_host_caps *h = &sandbox_host;
    if (!h->filter) return SANDBOX_MODE_NONE;
    bool landlock = h->landlock_abi >= 1;
    /* Before the probe (unit tests, tools): namespaces, as before modes existed. */
    bool ns = h->probed ? h->namespaces : true;
    switch (h->choice) {
    case SANDBOX_CHOICE_NAMESPACES: return ns ? SANDBOX_MODE_NAMESPACES : SANDBOX_MODE_NONE;
    case SANDBOX_CHOICE_LANDLOCK: return landlock ? SANDBOX_MODE_LANDLOCK : SANDBOX_MODE_NONE;
    case SANDBOX_CHOICE_AUTO: break;
    }
    if (legacy_landlock && landlock) return SANDBOX_MODE_LANDLOCK;
    if (ns) return SANDBOX_MODE_NAMESPACES;
    return landlock ? SANDBOX_MODE_LANDLOCK : SANDBOX_MODE_NONE;
}

const char *sandbox_mode_name(enum sandbox_mode m)
{
    return m == SANDBOX_MODE_NAMESPACES ? "namespaces"
           : m == SANDBOX_MODE_LANDLOCK ? "landlock"
                                        : "none";
}

const char *sandbox_host_refusal(void)
{
    static char text[512];
    const struct sandbox_host_caps *h = &sandbox_host;
    if (sandbox_host_mode_for(false) != SANDBOX_MODE_NONE) return "";
    if (!h->filter) return " (the seccomp filter does not know this architecture)";
    if (h->choice == SANDBOX_CHOICE_NAMESPACES)
        snprintf(text, sizeof text,
                 " (--sandbox-mode namespaces, and namespaces are refused here: %s; allow user "
                 "namespaces (sysctl user.max_user_namespaces, kernel.unprivileged_userns_clone, "
                 "or the container's seccomp profile and capabilities), or start the server "
                 "with --sandbox-mode auto or landlock)",
                 h->why_not);
    else
        snprintf(text, sizeof text,
                 " (namespaces are refused here (%s) and the kernel has no Landlock: boot "
                 "with lsm=...,landlock (CONFIG_SECURITY_LANDLOCK), or allow user namespaces "
                 "(sysctl user.max_user_namespaces, or the container's seccomp profile: "
                 "podman and docker run --security-opt seccomp=...))",
                 h->why_not[0] ? h->why_not : "not probed");
    return text;
}

int sandbox_policy_check(const struct sandbox_policy *p)
{
    return sandbox_host_mode_for(p->legacy_landlock) == SANDBOX_MODE_NONE ? -EOPNOTSUPP : 0;
}
