#!/usr/bin/env python3
"""Domains never include rpc: in the domain folders (fs, http, netproxy, process,
sandbox, tcp) only the JSON-RPC handler files, named *_methods.c or *_rpc.c (and
their headers, *_methods.h and *_rpc.h), include a header from rpc/ or session/.

The domain cores return structs and error kinds and report events through
interfaces their owner gives them (process/proc.c's struct proc_events, for
instance); decoding params and writing JSON is the handlers' job. Issue 38.

EXCEPTIONS lists the files still being converted; the test fails when a listed file
no longer includes rpc/ or session/ (remove its line), so the list only shrinks."""
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SRC = os.path.join(ROOT, "src")
DOMAINS = ("fs", "http", "netproxy", "process", "sandbox", "tcp")
HANDLER = re.compile(r".*_(methods|rpc)\.[ch]$")
INCLUDE = re.compile(r'\s*#\s*include\s+"((rpc|session)/[^"]+)"')

EXCEPTIONS = {
    "src/fs/capabilities_v2.c",  # being converted on branch h38cap
    "src/fs/capabilities_v2.h",  # being converted on branch h38cap
    "src/fs/capability_roots.c",  # being converted on branch h38cap
    "src/fs/capability_roots.h",  # being converted on branch h38cap
    "src/fs/fs_mode.c",  # being converted on branch h38cap
    "src/fs/fs_ops.c",  # being converted on branch h38cap
    "src/fs/fs_watch.c",  # being converted on branch h38cap
    "src/fs/fs_watch.h",  # being converted on branch h38cap
    "src/netproxy/netproxy.c",  # being converted on branch h38np
    "src/netproxy/np_config.c",  # being converted on branch h38np
    "src/netproxy/np_decision.c",  # being converted on branch h38np
    "src/netproxy/np_internal.h",  # being converted on branch h38np
    "src/netproxy/np_udp.c",  # being converted on branch h38np
}


def main():
    problems = []
    speaking = set()
    for folder in DOMAINS:
        base = os.path.join(SRC, folder)
        for dirpath, _, files in os.walk(base):
            for name in sorted(files):
                if not name.endswith((".c", ".h")) or HANDLER.match(name):
                    continue
                path = os.path.join(dirpath, name)
                rel = os.path.relpath(path, ROOT)
                for n, line in enumerate(open(path, encoding="utf-8", errors="replace"), 1):
                    m = INCLUDE.match(line)
                    if not m:
                        continue
                    speaking.add(rel)
                    if rel not in EXCEPTIONS:
                        problems.append(f"{rel}:{n}: includes {m.group(1)}: only *_methods.c "
                                        "and *_rpc.c (and their headers) may; return a "
                                        "struct or an error kind, or report through an "
                                        "interface the handler side gives")
    for stale in sorted(EXCEPTIONS - speaking):
        problems.append(f"{stale} no longer includes rpc/ or session/: remove it from "
                        "EXCEPTIONS in tests/arch/test_domain_rpc.py")
    for p in problems:
        print(p)
    print(f"domain_rpc: {len(speaking & EXCEPTIONS)} file(s) on the exception list, "
          f"{len(problems)} problem(s)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
