#!/usr/bin/env python3
"""The systemd units as installed (the configured files in the build directory): a
configuration error ends a unit instead of restarting it in a loop. Each unit restarts on
failure but not on exit status 2, and its own command line, run as systemd would run it
(its Environment= lines, "$$" a literal "$"), exits 2 on a configuration error: a token
file others may read for the server's units, an unknown flag for the registry's. README
names every unit `make install` installs, and says how many."""
import os
import re
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import *  # noqa

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
# Configured unit (relative to the build directory) -> its name once installed.
UNITS = {"exec-server.service": "exec-server.service",
         "exec-server@.service": "exec-server@.service",
         "user/exec-server.service": "exec-server.service (user)",
         "exec-server-registry.service": "exec-server-registry.service"}


def build_dir():
    b = os.environ.get("EXEC_BUILD_DIR") or os.path.dirname(SERVER_PATH)
    if not all(os.path.exists(os.path.join(b, u)) for u in UNITS):
        raise TestSkip("the configured units are not in the build directory %s" % b)
    return b


def unit_keys(path):
    keys = {}
    for line in open(path):
        if "=" in line and not line.startswith("#"):
            k, v = line.rstrip("\n").split("=", 1)
            keys.setdefault(k, []).append(v)
    return keys


def run_execstart(path, args_var, args):
    """Runs the unit's ExecStart with this build's exec-server and args in the unit's
    own args variable (appended when it has none), as systemd would; its exit status."""
    keys = unit_keys(path)
    env = {"PATH": "/usr/bin:/bin", "HOME": tempfile.gettempdir()}
    for line in keys.get("Environment", []):
        k, v = line.split("=", 1)
        env[k] = v
    cmd = keys["ExecStart"][-1]
    cmd = re.sub(r"\S*/exec-server\b", SERVER_PATH, cmd, count=1).replace("$$", "$")
    if cmd.startswith("/bin/sh -c "):
        env[args_var] = args
        argv = ["/bin/sh", "-c", cmd[len("/bin/sh -c "):].strip("'")]
    else:
        if "$" + args_var in cmd:
            cmd = cmd.replace("$" + args_var, args)
        else:
            cmd += " " + args
        argv = cmd.split()
    r = subprocess.run(argv, env=env, capture_output=True, timeout=30,
                       stdin=subprocess.DEVNULL)
    return r.returncode, r.stderr.decode(errors="replace")


@ours_only
def test_a_configuration_error_is_not_restarted(_srv):
    b = build_dir()
    fd, tok = tempfile.mkstemp(prefix="execbb-unit-tok-")
    os.write(fd, b"0123456789abcdef0123456789abcdef\n")
    os.close(fd)
    os.chmod(tok, 0o644)  # open to others: refused at start, exit 2
    try:
        for unit in UNITS:
            path = os.path.join(b, unit)
            keys = unit_keys(path)
            assert keys.get("Restart") == ["on-failure"], (unit, keys.get("Restart"))
            assert keys.get("RestartPreventExitStatus") == ["2"], (
                unit, "restarts in a loop on a configuration error")
            if "registry" in unit:
                rc, err = run_execstart(path, "EXEC_REGISTRY_ARGS", "--no-such-flag")
                assert "--no-such-flag" in err, (unit, err)
            else:
                rc, err = run_execstart(path, "EXEC_SERVER_ARGS",
                                        "--ws-auth capability-token --ws-token-file " + tok)
                assert "chmod 600 %s" % tok in err, (unit, err)
            assert rc == 2, (unit, rc, err)
    finally:
        os.unlink(tok)


@ours_only
def test_readme_names_every_installed_unit(_srv):
    cmake = open(os.path.join(ROOT, "CMakeLists.txt")).read()
    installed = set()
    for files, dest in re.findall(r"install\(FILES ([^)]*?) DESTINATION (lib/systemd/\w+)\)",
                                  cmake, re.S):
        for f in files.split():
            name = os.path.basename(f)
            installed.add(name + (" (user)" if dest.endswith("/user") else ""))
    assert installed == set(UNITS.values()), installed
    readme = open(os.path.join(ROOT, "README.md")).read()
    para = readme[readme.index("As a service:"):]
    para = para[:para.index("\n\n")]
    words = {2: "two", 3: "three", 4: "four", 5: "five"}
    assert "%s systemd units" % words[len(installed)] in para, para
    for name in ("exec-server@USER.service", "systemctl --user", "`exec-server.service`",
                 "exec-server-registry.service"):
        assert name in para, (name, para)


if __name__ == "__main__":
    run_tests(globals())
