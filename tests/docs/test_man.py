#!/usr/bin/env python3
"""The man pages render without a warning, and name every option their program's
--help lists.

For each man/*.[1-8]: `man --warnings -l` (man-db, which runs groff with -ww) and
`groff -ww -man -z` must print nothing on stderr. Then every long option in
`exec-server --help` must appear in exec-server.1, every one of `exec-client --help`
in exec-client.1 and every one of `exec-server registry --help` in
exec-server-registry.1 (a new flag without its documentation fails here).
Usage: test_man.py BUILD_DIR [REPO_ROOT]."""
import glob
import os
import re
import shutil
import subprocess
import sys

BUILD = sys.argv[1] if len(sys.argv) > 1 else "build"
ROOT = os.path.abspath(sys.argv[2] if len(sys.argv) > 2 else
                       os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))


def main():
    if not shutil.which("groff"):
        print("groff not installed (deps/debian-packages.txt lists groff-base)")
        return 77
    bad = []
    pages = sorted(glob.glob(os.path.join(ROOT, "man", "*.[1-8]")))
    env = dict(os.environ, MANWIDTH="80", LC_ALL="C.UTF-8", MANPAGER="cat", PAGER="cat")
    for page in pages:
        cmds = [["groff", "-ww", "-man", "-z", page]]
        if shutil.which("man"):
            cmds.append(["man", "--warnings", "-E", "UTF-8", "-l", page])
        for cmd in cmds:
            r = subprocess.run(cmd, capture_output=True, env=env, timeout=60)
            err = r.stderr.decode("utf-8", "replace").strip()
            if r.returncode != 0 or err:
                bad.append("%s: %s: %s" % (os.path.basename(page), cmd[0], err or r.returncode))
    for prog, page, sub in (("exec-server", "exec-server.1", []),
                            ("exec-client", "exec-client.1", []),
                            ("exec-server", "exec-server-registry.1", ["registry"])):
        exe = os.path.join(BUILD, prog)
        if not os.access(exe, os.X_OK):
            bad.append("%s not built in %s" % (prog, BUILD))
            continue
        helptext = subprocess.run([exe] + sub + ["--help"], capture_output=True, timeout=30,
                                  env=dict(os.environ, ASAN_OPTIONS="detect_leaks=0")).stdout.decode()
        text = open(os.path.join(ROOT, "man", page)).read().replace("\\-", "-")
        for opt in sorted(set(re.findall(r"(?<![\w-])--[a-z][a-z0-9-]+", helptext))):
            if opt not in text:
                bad.append("%s: %s is in --help but not in the man page" % (page, opt))
    for b in bad:
        print(b)
    print("man: %d page(s) checked, %d problem(s)" % (len(pages), len(bad)))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
