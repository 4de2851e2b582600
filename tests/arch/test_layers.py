#!/usr/bin/env python3
"""Layer-order check: no file under src/ includes a header from a higher layer.

The layer table is read from docs/ARCHITECTURE.md (section "Layers"), the one place it
is written down; this test only enforces it. Each row holds one folder, so every pair
of folders is ordered and no include cycle between folders can pass. Also checked:
*_internal.h headers are private to their folder, and every folder under src/ is in
the table.

KNOWN lists violations that existed when the test was written; each fix removed its
line (the test fails if a listed violation no longer exists), and it is now empty, so
any upward include fails. Do not add to it: move the code or fix the table.

Domains never speak JSON-RPC (issue 38): in the domain folders (the rows between
session and server) only the handler files, named *_methods.c or *_rpc.c (and their
headers), include rpc/ or session/; the rest return structs and error kinds. KNOWN_RPC
lists the files that did when the rule was written; the same rules as KNOWN apply."""
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SRC = os.path.join(ROOT, "src")

KNOWN = set()  # empty: every violation fails (issue 12 cleared the last one)

HANDLER = re.compile(r"_(methods|rpc)\.[ch]$")
KNOWN_RPC = set()  # empty: issue 38 converted the last ones


def domain_folders(layers):
    """The folders whose rows lie between session and server."""
    return {f for f, n in layers.items() if layers["session"] < n < layers["server"]}


def read_layers():
    """The table as {folder: layer}. One folder a row and one row a layer: folders
    sharing a row could include each other, which hid folder-level cycles (issue 23)."""
    doc = open(os.path.join(ROOT, "docs", "ARCHITECTURE.md")).read()
    layers = {}
    bad = []
    for m in re.finditer(r"^\|\s*(\d+)\s*\|\s*([a-z_, ]+?)\s*\|", doc, re.M):
        row, folders = int(m.group(1)), [f.strip() for f in m.group(2).split(",")]
        if len(folders) != 1:
            bad.append(f"layer {row} holds {len(folders)} folders ({', '.join(folders)}): "
                       "one folder a row")
        if row in layers.values():
            bad.append(f"layer {row} is in the table twice: one folder a layer")
        for folder in folders:
            if folder in layers:
                bad.append(f"folder {folder} is in the table twice")
            layers[folder] = row
    if "main" not in layers or "transport" not in layers:
        sys.exit("docs/ARCHITECTURE.md: no layer table found")
    if bad:
        sys.exit("docs/ARCHITECTURE.md: " + "; ".join(bad))
    return layers


def layer_of(rel, layers):
    """Layer of a file given by its path relative to src/."""
    if rel == "main.c" or rel.endswith("_main.c"):
        return layers["main"], "main"
    folder = rel.split("/")[0] if "/" in rel else ""
    if folder not in layers:
        return None, folder
    return layers[folder], folder


def main():
    layers = read_layers()
    domains = domain_folders(layers)
    found = set()
    found_rpc = set()
    problems = []
    for dirpath, _, files in os.walk(SRC):
        for name in sorted(files):
            if not name.endswith((".c", ".h")):
                continue
            path = os.path.join(dirpath, name)
            rel = os.path.relpath(path, SRC)
            mine, folder = layer_of(rel, layers)
            if mine is None:
                problems.append(f"src/{rel}: folder '{folder}' is not in docs/ARCHITECTURE.md")
                continue
            own_folder = rel.split("/")[0]
            for n, line in enumerate(open(path, encoding="utf-8", errors="replace"), 1):
                m = re.match(r'\s*#\s*include\s+"([^"]+)"', line)
                if not m:
                    continue
                inc = m.group(1)
                if "/" not in inc:
                    continue  # same folder
                inc_folder = inc.split("/")[0]
                theirs = layers.get(inc_folder)
                key = f"src/{rel} -> {inc}"
                if (inc_folder in ("rpc", "session") and own_folder in domains
                        and not HANDLER.search(name)):
                    if f"src/{rel}" not in found_rpc and f"src/{rel}" not in KNOWN_RPC:
                        problems.append(f"src/{rel}:{n}: includes {inc}: in {own_folder}/ only "
                                        "*_methods.c / *_rpc.c files speak JSON-RPC")
                    found_rpc.add(f"src/{rel}")
                if theirs is None:
                    problems.append(f"src/{rel}:{n}: includes {inc} from unknown folder")
                elif theirs > mine:
                    found.add(key)
                    if key not in KNOWN:
                        problems.append(f"src/{rel}:{n}: includes {inc} (layer {theirs}) "
                                        f"from layer {mine}")
                elif inc.endswith("_internal.h") and inc_folder != own_folder:
                    found.add(key)
                    if key not in KNOWN:
                        problems.append(f"src/{rel}:{n}: includes {inc}, private to {inc_folder}/")
    for stale in sorted(KNOWN - found):
        problems.append(f"fixed, remove from KNOWN in tests/arch/test_layers.py: {stale}")
    for stale in sorted(KNOWN_RPC - found_rpc):
        problems.append(f"fixed, remove from KNOWN_RPC in tests/arch/test_layers.py: {stale}")
    for p in problems:
        print(p)
    print(f"layers: {len(found & KNOWN)} known violation(s) left, "
          f"{len(found_rpc & KNOWN_RPC)} domain file(s) still speaking JSON-RPC, "
          f"{len(problems)} problem(s)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
