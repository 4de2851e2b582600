#!/usr/bin/env python3
"""Runs a compiler's front end over every file of a configured CMake tree.

    scripts/syntax-check.py BUILD_DIR [TARGET...]

BUILD_DIR was configured with CMAKE_EXPORT_COMPILE_COMMANDS=ON; each compile command in its
compile_commands.json is run again with -fsyntax-only in place of -c and -o: the same
flags, defines and include folders, the compiler's every front-end diagnostic (with
-Werror, a failure), and no code generated. `make release-check` checks clang this way
(the CMake target syntax-check, with the product's targets):
clang's warnings come from its front end, and its -O3 code generation was half of the
check's CPU, which CI's ten minutes count (gcc's Release build stays whole: some of its
warnings come from its optimizers). Files run two at a time (or as many as the CPUs);
a file's diagnostics are printed together. With TARGETs, only their files (by the object
folder CMake gives each target, TARGET.dir). Exit status 1 when any file fails."""
import json
import os
import shlex
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor


def front_end_only(argv):
    out, skip = [], False
    for a in argv:
        if skip:
            skip = False
        elif a == "-o":
            skip = True
        elif a != "-c":
            out.append(a)
    return out + ["-fsyntax-only"]


def argv_of(entry):
    return entry["arguments"] if "arguments" in entry else shlex.split(entry["command"])


def target_of(argv):
    """The CMake target whose object the command makes (its TARGET.dir folder)."""
    out = argv[argv.index("-o") + 1] if "-o" in argv else ""
    return next((part[:-4] for part in out.split("/") if part.endswith(".dir")), None)


def check(entry):
    argv = argv_of(entry)
    p = subprocess.run(front_end_only(argv), cwd=entry["directory"], capture_output=True,
                       text=True)
    return entry["file"], p.returncode, p.stdout + p.stderr


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__.split("\n\n")[1])
    with open(os.path.join(sys.argv[1], "compile_commands.json")) as f:
        entries = json.load(f)
    if sys.argv[2:]:
        entries = [e for e in entries if target_of(argv_of(e)) in sys.argv[2:]]
    failed = 0
    with ThreadPoolExecutor(max_workers=max(2, os.cpu_count() or 2)) as pool:
        for name, rc, text in pool.map(check, entries):
            if text:
                print(text, end="")
            if rc:
                failed += 1
                print("syntax-check: %s failed" % name)
    print("syntax-check: %d files, %d failed" % (len(entries), failed))
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
