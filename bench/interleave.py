"""What the interleaved benchmarks share (bench/interleave_oneshot.py, bench/interleave_proxy.py):
the servers named on their command lines, started and stopped together, and the bench's
ReadOnly sandbox. Each of them then visits every server once a round, in a shuffled order, so
the machine's drift and other tenants' load fall on every binary alike."""
import contextlib
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests",
                                "blackbox"))
from harness import Server  # noqa: E402

# Row 1b's sandbox (row 9c's too): the root read-only, the network restricted.
READ_ONLY = {"permissions": {"type": "managed", "file_system": {"type": "restricted", "entries": [
    {"path": {"type": "special", "value": {"kind": "root"}}, "access": "read"}]},
    "network": "restricted"}, "cwd": "file:///tmp", "windowsSandboxLevel": "disabled"}


@contextlib.contextmanager
def servers(ap, specs):
    """One server a NAME=CMD argument, listening on a loopback port, with a session each:
    yields [(name, server, session)], the first the one the others are divided by, and stops
    every one started, however the block ends. CMD is split on spaces (a binary and its
    arguments, "new=build/exec-server --sandbox-max-processes 64"); a relative path is made
    absolute, and "PATH exec-server" is the reference's command. ap (argparse) reports a
    malformed argument."""
    started = []
    try:
        for spec in specs:
            name, _, cmd = spec.partition("=")
            if not cmd:
                ap.error("%r: want NAME=CMD" % spec)
            argv = cmd.split()
            if os.path.exists(argv[0]):
                argv[0] = os.path.abspath(argv[0])
            ref = len(argv) > 1 and argv[1] == "exec-server"
            srv = Server(cmd=argv + ["--listen", "ws://127.0.0.1:0"], reference=ref)
            started.append((name, srv))
        yield [(name, srv, srv.session()) for name, srv in started]
    finally:
        for _, srv in started:
            srv.stop(check=False)
