#!/usr/bin/env python3
"""Measure what a server's sandbox denies, and print it as the Markdown tables of
docs/SANDBOX_REFERENCE.md: the seccomp filter read back from a sandboxed process
(decoded for every x86_64 system call), the bubblewrap command line around it, and the
result of each escape-probe attempt inside ReadOnly, WorkspaceWrite and WorkspaceWrite
with the network enabled.

    EXEC_SERVER=ref python3 tests/sandbox/reference_table.py       # the reference
    EXEC_SERVER=build/exec-server python3 tests/sandbox/reference_table.py

Needs root (reading another process's seccomp filter takes CAP_SYS_ADMIN) and a built
escape-probe (build/asan or build, or EXEC_PROBE=...)."""

import os
import pty
import re
import shutil
import socket
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "blackbox"))
from harness import IS_REF, SERVER_PATH, Server  # noqa: E402
import seccomp_filter as sf  # noqa: E402
from sandbox_attack import (MODES, Daemon, ancestors_cmdlines, dump_filters,  # noqa: E402
                            find_probe, policy, run_probe, sandboxed_sleeper, scratch,
                            world_copy)

FAMILIES = [("AF_UNIX", 1), ("AF_INET", 2), ("AF_INET6", 10), ("AF_NETLINK", 16),
            ("AF_PACKET", 17), ("AF_ALG", 38), ("AF_VSOCK", 40)]


def attempts(v):
    """(probe attempt, what it shows) for one set of victims `v`."""
    ws, out = v["ws"], v["outside"]
    return [
        ("caps", "capabilities left (ok = CapEff not 0)"),
        ("netif", "network interfaces seen"),
        ("listproc=%d,%d" % (v["server"], v["unrelated"]),
         "/proc lists the server or an unrelated pid (ok = seen)"),
        ("read=/proc/%d/environ:MY_SECRET_TOKEN" % v["unrelated"],
         "environ of an unrelated process of the same uid"),
        ("read=/proc/%d/environ" % v["server"], "environ of the server"),
        ("mem=%d" % v["server"], "/proc/<server>/mem"),
        ("readlink=/proc/%d/root" % v["server"], "/proc/<server>/root"),
        ("readlink=/proc/%d/cwd" % v["server"], "/proc/<server>/cwd"),
        ("write=/proc/self/root%s/via-proc-root" % out, "write outside via /proc/self/root"),
        ("setns=%d" % v["server"], "setns into the server's namespaces"),
        ("ptrace_attach=%d" % v["unrelated"], "PTRACE_ATTACH an unrelated process"),
        ("ptrace_traceme", "PTRACE_TRACEME"),
        ("process_vm_readv=self", "process_vm_readv (own memory)"),
        ("process_vm_writev", "process_vm_writev (own memory)"),
        ("kill0=%d" % v["server"], "kill(server, 0)"),
        ("kill0=%d" % v["unrelated"], "kill(unrelated, 0)"),
        ("pidfd_getfd=%d" % v["server"], "pidfd_open + pidfd_getfd on the server"),
        ("ptslist", "open the host's /dev/pts/N"),
        ("tiocsti=%s:x" % v["pty"], "TIOCSTI into a host pty"),
        ("ptywrite=%s:x" % v["pty"], "write to a host pty"),
        ("tioclinux", "TIOCLINUX on /dev/tty0"),
        ("io_uring_setup", ""), ("io_uring_enter", "fd -1 (EBADF if allowed)"),
        ("io_uring_register", "fd -1 (EBADF if allowed)"),
        ("bpf", "BPF_MAP_CREATE"), ("perf_event_open", "software clock on self"),
        ("keyctl", ""), ("add_key", "process keyring"), ("request_key", "ENOKEY if allowed"),
        ("init_module", ""), ("finit_module", ""), ("delete_module", ""),
        ("kexec_load", ""), ("kexec_file_load", ""),
        ("mount=%s" % ws, "tmpfs on the workspace"), ("bindmount=/tmp:%s" % ws, ""),
        ("remount_rw=/", "remount / read-write"), ("mount_setattr_rw=/", ""),
        ("umount=/proc", ""), ("pivot_root", ""), ("chroot", ""), ("fsopen", ""),
        ("fspick", ""), ("open_tree", "OPEN_TREE_CLONE"), ("move_mount", ""),
        ("swapon", ""), ("swapoff", ""), ("reboot", "bad magic (EINVAL if allowed)"),
        ("sethostname", "to its current value"), ("setdomainname", "to its current value"),
        ("unshare", ""), ("clone", ""),
        ("socket", ""), ("socketpair", "AF_UNIX"),
        ("connect_tcp=127.0.0.1:%d" % v["tcp"], "host loopback TCP listener"),
        ("connect_path=%s" % v["unix"], "host daemon on a pathname socket"),
        ("connect_abstract=%s" % v["abstract"], "host daemon on an abstract socket"),
        ("capset", "raise every capability"), ("setuid0", ""), ("setresuid", "to 4242"),
        ("setgroups", ""), ("userfaultfd", ""), ("open_by_handle", "/etc/hostname"),
        ("personality", "ADDR_NO_RANDOMIZE"), ("acct", ""), ("settimeofday", "NULL, NULL"),
        ("clock_settime", "to now"), ("clock_adjtime", "ADJ_TICK to its value"),
        ("syslog", "SYSLOG_ACTION_READ_ALL"), ("ioperm", ""), ("iopl", ""),
        ("fanotify", ""), ("vhangup", ""), ("quotactl", ""),
        ("mknod_chr=%s/chr" % ws, "in the workspace"), ("mknod_blk=%s/blk" % ws, ""),
        ("write=%s/new" % ws, "a new file in the workspace"),
        ("write=%s/new" % out, "a new file outside every root"),
        ("mkdir=%s/.git" % ws, "missing .git in the workspace"),
        ("mkdir=%s/.codex" % ws, "missing .codex"), ("mkdir=%s/.agents" % ws, ""),
        ("mkdir=%s/.aws" % ws, ""),
        ("symlink=%s:%s/out-link" % (out, ws), "symlink to outside, then write through it"),
        ("write=%s/out-link/through-link" % ws, ""),
        ("link=%s/file:%s/hard" % (out, ws), "hard link of an outside file"),
        ("rename=%s/file:%s/moved" % (out, ws), "rename an outside file in"),
    ]


def main():
    if os.geteuid() != 0:
        sys.exit("reference_table.py: needs root (PTRACE_SECCOMP_GET_FILTER)")
    probe = find_probe()
    if not probe or not SERVER_PATH:
        sys.exit("reference_table.py: needs a built escape-probe and a server")
    bindir = scratch("reftable-bin-")
    probe = world_copy(probe, bindir)
    top = scratch("reftable-")
    ws, outside = top + "/ws", top + "/outside"
    os.makedirs(ws)
    os.makedirs(outside)
    with open(outside + "/file", "w") as f:
        f.write("outside")
    unix = top + "/daemon.sock"
    abstract = "reftable-%d" % os.getpid()
    daemons = [Daemon(socket.AF_UNIX, unix), Daemon(socket.AF_UNIX, "\0" + abstract)]
    tcp = socket.socket()
    tcp.bind(("127.0.0.1", 0))
    tcp.listen(8)
    master, slave = pty.openpty()
    unrelated = subprocess.Popen(["sleep", "600"], env={"MY_SECRET_TOKEN": "hunter2",
                                                         "PATH": "/usr/bin:/bin"})
    rows, filters, bwrap = {}, {}, {}
    try:
        with Server() as srv:
            v = {"ws": ws, "outside": outside, "server": srv.pid, "unrelated": unrelated.pid,
                 "pty": os.ttyname(slave), "unix": unix, "abstract": abstract,
                 "tcp": tcp.getsockname()[1]}
            plan = attempts(v)
            SUBST.extend([(ws, "$WS"), (outside, "$OUT"), (unix, "$OUT/../daemon.sock"),
                          (abstract, "<name>"), (str(srv.pid), "<server>"),
                          (str(unrelated.pid), "<unrelated>"), (v["pty"], "/dev/pts/<host>"),
                          (":%d" % v["tcp"], ":<port>")])
            s = srv.session()
            for label, kind, net in MODES + [("ReadOnly+net", "ro", "enabled")]:
                sb = policy(kind, ws, net)
                pid = sandboxed_sleeper(s, "hold-" + label, ws, sb, "tbl-" + label)
                filters[label] = dump_filters(probe, pid)
                bwrap[label] = ancestors_cmdlines(pid, srv.pid)
                s.terminate("hold-" + label)
                s.collect_until_closed("hold-" + label)
                if label == "ReadOnly+net":
                    continue
                res, out = run_probe(s, "probe-" + label, probe, [a for a, _ in plan], ws, sb)
                rows[label] = res
                for name in os.listdir(ws):  # each mode starts from an empty workspace
                    p = os.path.join(ws, name)
                    if os.path.isdir(p) and not os.path.islink(p):
                        os.rmdir(p)
                    else:
                        os.unlink(p)
            s.close()
    finally:
        unrelated.kill()
        unrelated.wait()
        for d in daemons:
            d.close()
        shutil.rmtree(top, ignore_errors=True)
        shutil.rmtree(bindir, ignore_errors=True)
    print_tables(rows, filters, bwrap, plan, daemons)


def print_tables(rows, filters, bwrap, plan, daemons):
    labels = [m[0] for m in MODES]
    flabels = labels + ["ReadOnly+net"]
    names = sf.syscall_names()
    byn = {n: k for k, n in names.items()}
    print("### The seccomp filter, decoded\n")
    print("Every x86_64 system call the filter does not simply allow "
          "(`PTRACE_SECCOMP_GET_FILTER` on a sandboxed process; %s filter(s) installed).\n"
          % ", ".join("%s: %s" % (k, "unreadable" if filters[k] is None else len(filters[k]))
                      for k in flabels))
    print("| syscall | nr | " + " | ".join(flabels) + " |")
    print("|---|---|" + "---|" * len(flabels))
    for nr in range(0, 512):
        acts = []
        for k in flabels:
            fl = filters[k] or []
            base = sf.describe(sf.combined(fl, nr))
            per = {fam: sf.describe(sf.combined(fl, nr, args=(val,))) for fam, val in FAMILIES}
            if len(set(per.values())) > 1:
                allowed = [f for f, a in per.items() if a == "allow"]
                denied = [f for f, a in per.items() if a != "allow"]
                other = "/".join(sorted(set(a for a in per.values() if a != "allow")))
                base = ("%s unless domain is %s" % (other, " or ".join(allowed))
                        if len(allowed) <= len(denied) else
                        "%s if domain is %s" % (other, " or ".join(denied)))
            acts.append(base)
        if all(a == "allow" for a in acts):
            continue
        print("| %s | %d | %s |" % (byn.get(nr, "?"), nr, " | ".join(acts)))
    for what, nr, arch in [("any i386 call (int 0x80)", 3, sf.AUDIT_ARCH_I386),
                           ("x32 socket(AF_INET) (nr 41 + 0x40000000)",
                            41 | sf.X32_SYSCALL_BIT, sf.AUDIT_ARCH_X86_64),
                           ("unknown architecture", 0, 0x12345678)]:
        acts = [sf.describe(sf.combined(filters[k] or [], nr, arch,
                                        args=(2,))) for k in flabels]
        print("| %s | | %s |" % (what, " | ".join(acts)))
    print("\n### bubblewrap and helper command lines (outermost last)\n")
    for k in flabels:
        print("- %s:" % k)
        for argv in bwrap[k]:
            line = short(" ".join(argv))
            line = re.sub(r"\S*/codex-arg0\w+/", "$ARG0/", line)
            print("  - `%s`" % line)
    print("\n### Escape probe results\n")
    print("`ok` = the call succeeded; otherwise the errno it failed with.\n")
    print("| attempt | what | " + " | ".join(labels) + " |")
    print("|---|---|" + "---|" * len(labels))
    for i, (spec, note) in enumerate(plan):
        name, _, arg = spec.partition("=")
        # the n-th use of a name in the plan is the n-th result of that name
        idx = sum(1 for s2, _ in plan[:i] if s2.partition("=")[0] == name)
        base = name if idx == 0 else "%s#%d" % (name, idx + 1)
        keys = [k for k in rows[labels[0]]
                if k == base or (idx == 0 and k.startswith(name + ":") and "#" not in k)]
        for k in keys:
            cells = [rows[lab].get(k, ("-", ""))[0] for lab in labels]
            print("| `%s` | %s | %s |" % (k.partition("#")[0] + ("=" + short(arg) if arg else ""),
                                           note, " | ".join(cells)))
    print("\nHost daemons accepted %s connection(s) in all." %
          sum(d.accepted for d in daemons))


SUBST = []  # (text, placeholder) applied to the arguments shown in the table


def short(arg):
    for text, name in SUBST:
        arg = arg.replace(text, name)
    return arg


if __name__ == "__main__":
    main()
