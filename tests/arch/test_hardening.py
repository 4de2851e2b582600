#!/usr/bin/env python3
"""The daemon's binary is linked the way its speed and its safety assume.

- Every symbol bound at exec (BIND_NOW) and the GOT read-only after that (GNU_RELRO):
  each sandbox's init is a fork of a spawner (src/sandbox/sandbox_init.h), and a binary
  bound lazily resolved, in every init, each library call the spawner had not made yet,
  writing its own copy of the GOT: 0.4 ms of CPU a sandboxed start on the machine the
  project is measured on, 5% of row 1b (bench/RUNLOG.md, "Row 1b: symbols bound at
  exec"). A read-only GOT is also one target less for a memory-corruption bug in a
  daemon that parses what the network sends.
- Position-independent (PIE, so ASLR moves it) and a stack that is not executable.

Usage: test_hardening.py EXE (ctest passes exec-server). Reads readelf's view of its
dynamic section and program headers (binutils builds the project)."""
import subprocess
import sys


def readelf(args, exe):
    return subprocess.run(["readelf", "-W"] + args + [exe], check=True, capture_output=True,
                          text=True).stdout


def problems(exe):
    header = readelf(["-h"], exe)
    dynamic = readelf(["-d"], exe)
    segments = readelf(["-l"], exe)
    found = []
    if "DYN (Position-Independent Executable" not in header and "DYN (Shared" not in header:
        found.append("not position-independent (ELF type is not DYN)")
    flags = [line for line in dynamic.splitlines() if "(FLAGS" in line]
    if not any("BIND_NOW" in line or " NOW" in line for line in flags):
        found.append("symbols bound lazily (no BIND_NOW in FLAGS or NOW in FLAGS_1): "
                     "link with -z now")
    if "GNU_RELRO" not in segments:
        found.append("no GNU_RELRO segment: the GOT stays writable (link with -z relro)")
    stack = [line for line in segments.splitlines() if "GNU_STACK" in line]
    if not stack:
        found.append("no GNU_STACK segment: the stack would be executable")
    elif "E" in stack[0].split()[-2]:
        found.append("an executable stack (GNU_STACK is RWE)")
    return found


def main():
    if len(sys.argv) != 2:
        raise SystemExit("usage: test_hardening.py EXE")
    found = problems(sys.argv[1])
    for p in found:
        print("%s: %s" % (sys.argv[1], p))
    if found:
        return 1
    print("%s: PIE, BIND_NOW, GNU_RELRO, a stack that is not executable" % sys.argv[1])
    return 0


if __name__ == "__main__":
    sys.exit(main())
