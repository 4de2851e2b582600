/*
 * escape_probe: the attacker's side of tests/blackbox/test_sandbox_escape.py.
 *
 * A sandboxed command runs this with a list of named attacks; each is one system call
 * (or a short sequence) that a shell cannot make, tried the way an agent bent on leaving
 * the sandbox would try it. Every attempt runs in a forked child (so setns, unshare,
 * setuid and the like do not leak into the next one, and a hang or crash is reported
 * instead of ending the run) and prints one tab-separated line per result:
 *
 *     @probe <name> <result> <detail>
 *
 * where <result> is "ok" when the operation succeeded (the attack worked, or got as far
 * as the kernel's own argument checks) and the errno name (EPERM, ENOENT, ...) when it
 * failed; "SIG<n>" and "TIMEOUT" report a child that died or hung. The probe decides
 * nothing: the test reads the lines and asserts which denial it expects.
 *
 * Attempts are written so that, run unsandboxed by root, they change nothing on the host
 * (arguments the kernel rejects after its permission check, or values set to what they
 * already are), except where the argument names what to change (sethostname=NAME,
 * write=PATH): the test picks those and restores them.
 *
 * The attempts live in one file per kind, each adding its table (escape_probe.h):
 * escape_probe_ttys.c, _files.c, _procs.c (other processes and /proc), _kernel.c
 * (kernel facilities, mounts, namespaces), _sockets.c, _creds.c (credentials,
 * capabilities, clocks and other host-wide settings), _tables.c (the whole-table
 * sweep and the seccomp dump) and _budgets.c (the kernel's per-user counts, taken and
 * held); escape_probe_common.c prints the result lines. This file is the dispatch: it
 * runs each attempt named on the command line.
 *
 * Usage: escape_probe ATTEMPT[=ARG] ...   (escape_probe help lists the attempts)
 * Not part of the server: a test tool, built by CMake into the build directory.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "escape_probe.h"

/* Every attempt, part by part, in the order help lists them. */
static const struct probe_attempt *const parts[] = {
    probe_ttys,    probe_files, probe_procs,  probe_kernel,
    probe_sockets, probe_creds, probe_tables, probe_budgets,
};

static const struct probe_attempt *find_attempt(const char *name)
{
    for (size_t s = 0; s < sizeof parts / sizeof parts[0]; s++)
        for (const struct probe_attempt *a = parts[s]; a->name; a++)
            if (strcmp(a->name, name) == 0) return a;
    return NULL;
}

static int run_attempt(const char *spec)
{
    char name[64];
    const char *eq = strchr(spec, '=');
    size_t n = eq ? (size_t)(eq - spec) : strlen(spec);
    if (n >= sizeof name) n = sizeof name - 1;
    memcpy(name, spec, n);
    name[n] = 0;
    const char *arg = eq ? eq + 1 : NULL;
    const struct probe_attempt *a = find_attempt(name);
    if (!a) {
        emit_res(name, "UNKNOWN", "no such attempt");
        return 1;
    }
    /* The sweep and the dump fork or trace themselves and run for long. */
    if (a->in_process) {
        a->fn(name, arg);
        return 0;
    }
    pid_t c = fork();
    if (c < 0) {
        emit(name, errno, "fork");
        return 0;
    }
    if (c == 0) {
        alarm(10);
        a->fn(name, arg);
        _exit(0);
    }
    int st = 0;
    waitpid(c, &st, 0);
    if (WIFSIGNALED(st))
        emit_res(name, WTERMSIG(st) == SIGALRM ? "TIMEOUT" : "SIGNAL", "signal %d", WTERMSIG(st));
    return 0;
}

int main(int argc, char **argv)
{
    if (argc < 2 || strcmp(argv[1], "help") == 0) {
        fprintf(stderr, "usage: %s ATTEMPT[=ARG] ...\n", argv[0]);
        for (size_t s = 0; s < sizeof parts / sizeof parts[0]; s++)
            for (const struct probe_attempt *a = parts[s]; a->name; a++)
                fprintf(stderr, "  %-18s %s\n", a->name, a->help);
        return argc < 2 ? 2 : 0;
    }
    setvbuf(stdout, NULL, _IONBF, 0);
    int bad = 0;
    for (int i = 1; i < argc; i++)
        bad |= run_attempt(argv[i]);
    return bad ? 2 : 0;
}
