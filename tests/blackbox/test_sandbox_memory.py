#!/usr/bin/env python3
"""--sandbox-max-memory (issue 33, caps): one memory cgroup per sandbox, all of its
processes together. A sandboxed command that allocates past the cap is ended by the
kernel's OOM killer inside its own sandbox (the server and other commands go on); under
the cap it runs as before; without the flag there is no cap. The cgroups are gone when
the command is (but the two made ahead for the next sandboxes, which never held a
process), and the server's directory when the server is. A pids cgroup alone (the
process cap, no memory cap) serves the next sandbox once its own is over. Where no memory cgroup
can be made (a server that is not root here), asking for the cap stops the server at
start with a message naming the flag, rather than running sandboxes without it."""
import glob
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import *  # noqa

# Allocates and touches MiB mebibytes in 4 MiB steps, printing its progress.
HOG = ("import sys\n"
       "n = int(sys.argv[1]); keep = []\n"
       "for i in range(0, n, 4):\n"
       "    keep.append(bytearray(4 << 20))\n"
       "print('allocated', n, flush=True)\n")


def sandbox(cwd):
    return {"permissions": {"type": "managed", "file_system": {"type": "unrestricted"},
                            "network": "restricted"},
            "windowsSandboxLevel": "disabled", "cwd": "file://" + cwd}


def run_hog(srv, pid, mib):
    s = srv.session()
    try:
        s.start(pid, ["/usr/bin/python3", "-c", HOG, str(mib)], sandbox=sandbox(srv.workdir))
        out = s.collect_until_closed(pid, timeout=60)
    finally:
        s.close()
    return out["exit_code"], (out["stdout"] + out["stderr"]).decode(errors="replace")


def memory_dirs(pid):
    """This server's directories in the memory hierarchies (v1 memory, or v2)."""
    return [d for d in glob.glob("/sys/fs/cgroup/**/exec-server.%d" % pid, recursive=True)
            if os.path.exists(d + "/memory.limit_in_bytes") or
            os.path.exists(d + "/memory.max") or
            os.path.exists(d + "/cgroup.subtree_control")]


def held_a_process(dirs):
    """The sandboxes' cgroups under dirs that ever held a process: the server keeps up
    to two made ahead for the next sandboxes (cgroup_caps_prepare), which never did
    (their peak use is 0; where the kernel keeps no peak, more than two is a leak)."""
    found = [os.path.join(d, x) for d in dirs for x in os.listdir(d)
             if x.startswith("s") and os.path.isdir(os.path.join(d, x))]
    used = []
    for c in found:
        for peak in ("memory.max_usage_in_bytes", "memory.peak"):
            if os.path.exists(os.path.join(c, peak)):
                if int(open(os.path.join(c, peak)).read().split()[0]) > 0:
                    used.append(c)
                break
        else:
            if len(found) > 2:
                used.append(c)
    return used


def memory_cgroup_possible():
    return os.geteuid() == 0 and (os.path.isdir("/sys/fs/cgroup/memory") or
                                  os.path.exists("/sys/fs/cgroup/cgroup.controllers"))


@ours_only
@needs_own_server
def test_bad_values_and_help(_):
    r = subprocess.run([SERVER_PATH, "--help"], capture_output=True, timeout=10)
    assert b"--sandbox-max-memory" in r.stdout, r.stdout[-500:]
    for bad in ("lots", "-1", "12Q"):
        r = subprocess.run([SERVER_PATH, "--sandbox-max-memory", bad], capture_output=True,
                           timeout=10)
        assert r.returncode == 2 and b"--sandbox-max-memory" in r.stderr, (bad, r.returncode,
                                                                          r.stderr)


@ours_only
@needs_own_server
def test_cap_ends_the_hog_and_spares_the_rest(_):
    if not memory_cgroup_possible():
        raise TestSkip("no memory cgroup can be made here (not root, or no memory controller)")
    with Server(extra_args=["--sandbox-max-memory", "96M"]) as srv:
        code, text = run_hog(srv, "hog", 400)
        assert code == 137 and "allocated" not in text, (code, text[-500:])
        # under the cap, as before; the server and its sessions went on
        code, text = run_hog(srv, "small", 32)
        assert code == 0 and "allocated 32" in text, (code, text[-500:])
        dirs = memory_dirs(srv.pid)
        assert dirs, "no memory cgroup directory of this server"
        wait_until(lambda: not held_a_process(dirs), timeout=10,
                   what="the sandboxes' cgroups to be removed")
        pid = srv.pid
    assert not memory_dirs(pid), "left behind: %s" % memory_dirs(pid)


def server_dirs(pid):
    """Every directory of this server in the cgroup hierarchies (pids and memory)."""
    return glob.glob("/sys/fs/cgroup/**/exec-server.%d" % pid, recursive=True)


@ours_only
@needs_own_server
def test_a_killed_servers_cgroups_are_removed_by_the_next(_):
    """A server killed with SIGKILL cannot remove its cgroup directories (its own and
    the sandboxes' made ahead); the next server started as root removes the empty
    ones whose pid no process has any more, and says how many."""
    if not memory_cgroup_possible():
        raise TestSkip("no memory cgroup can be made here (not root, or no memory controller)")
    srv = Server(extra_args=["--sandbox-max-memory", "96M"])
    try:
        code, text = run_hog(srv, "small", 8)
        assert code == 0 and "allocated 8" in text, (code, text[-500:])
        dirs = server_dirs(srv.pid)
        wait_until(lambda: not held_a_process(memory_dirs(srv.pid)), timeout=10,
                   what="the sandbox's cgroups to be released")
    finally:
        srv.kill()
    assert dirs and all(os.path.isdir(d) for d in dirs), dirs
    with Server(extra_args=["--log-level", "info"]) as nxt:
        wait_until(lambda: not any(os.path.isdir(d) for d in dirs), timeout=10,
                   what="the killed server's cgroup directories to be removed")
        # Any server started as root meanwhile cleans up too (the suite runs tests side by
        # side): the notice is this one's only when it was first.
        if "no longer running" in nxt.stderr_text():
            assert "removed" in nxt.stderr_text(), nxt.stderr_text()
        else:
            print("  (removed by another server started meanwhile)")


@ours_only
@needs_own_server
def test_no_cap_by_default(_):
    with Server() as srv:
        code, text = run_hog(srv, "hog", 400)
        assert code == 0 and "allocated 400" in text, (code, text[-500:])


def pids_cgroups(pid):
    """This server's sandbox cgroups that carry a process cap (pids.max)."""
    return sorted(c for d in server_dirs(pid) for c in glob.glob(d + "/s*")
                  if os.path.exists(c + "/pids.max"))


@ours_only
@needs_own_server
def test_a_finished_sandboxs_pids_cgroup_serves_the_next(_):
    """One sandbox after another: each takes an emptied pids cgroup of an earlier one
    (a mkdir and an rmdir per sandbox cost a capped start its time), so the server's
    directory holds at most two, none with a task left in it nor a cap other than
    --sandbox-max-processes, and few names are ever used."""
    if os.geteuid() != 0 or not (os.path.isdir("/sys/fs/cgroup/pids") or
                                 os.path.exists("/sys/fs/cgroup/cgroup.controllers")):
        raise TestSkip("no pids cgroup can be made here (not root, or no pids controller)")
    with Server(extra_args=["--sandbox-max-processes", "300"]) as srv:
        s = srv.session()
        seen = set()
        for i in range(8):
            pid = "one-%d" % i
            s.start(pid, ["/bin/true"], sandbox=sandbox(srv.workdir))
            assert s.collect_until_closed(pid)["exit_code"] == 0
            wait_until(lambda: len(pids_cgroups(srv.pid)) <= 2, timeout=10,
                       what="at most two pids cgroups kept")
            for c in pids_cgroups(srv.pid):
                assert open(c + "/pids.current").read().strip() == "0", c
                assert open(c + "/pids.max").read().strip() == "300", c
                seen.add(c)
        if not pids_cgroups(srv.pid):
            raise TestSkip("this server made no pids cgroup (not delegated here)")
        # the first sandbox's own, the two made ahead of the second, then the same two
        assert len(seen) <= 3, sorted(seen)
        s.close()


@ours_only
@needs_own_server
def test_refuses_to_start_without_a_memory_cgroup(_):
    """An unprivileged server cannot make cgroups here: it must not start and run
    every sandbox without the cap it was asked for."""
    if os.geteuid() == 0:
        cmd = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", SERVER_PATH]
    elif not memory_cgroup_possible():
        cmd = [SERVER_PATH]
    else:
        raise TestSkip("this user can make memory cgroups")
    r = subprocess.run(cmd + ["--listen", "ws://127.0.0.1:0", "--sandbox-max-memory", "1G"],
                       capture_output=True, timeout=20, stdin=subprocess.DEVNULL, cwd="/")
    assert r.returncode == 2 and b"--sandbox-max-memory needs a memory cgroup" in r.stderr, (
        r.returncode, r.stderr[-500:])


if __name__ == "__main__":
    if SERVER_PATH is None:
        print("SKIP: no server binary")
        sys.exit(SKIP)
    run_tests(globals(), per_test_timeout=120)
