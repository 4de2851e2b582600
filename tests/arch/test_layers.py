#!/usr/bin/env python3
"""Dependency check: a file under src/ includes headers of its own folder and of the
folders its folder's row of the dependency table names, nothing else.

Both tables are read from docs/ARCHITECTURE.md ("Layers", the picture and which
folders are domains; "Dependencies, folder by folder", what each may include), the
one place they are written down; this test only enforces them. The dependency rows
must not make a circle (no folder-level include cycle can pass), must name only
folders of the table, and must not name a folder the code no longer includes (the
table is the true picture: issue 38 replaced the strict order, which let peers such
as http and tcp include each other, with it). Also checked: *_internal.h headers are
private to their folder, and every folder under src/ is in both tables.

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


def read_deps():
    """The dependency table as {folder: set of folders it may include}."""
    doc = open(os.path.join(ROOT, "docs", "ARCHITECTURE.md")).read()
    sec = doc.split("## Dependencies, folder by folder", 1)
    if len(sec) != 2:
        sys.exit("docs/ARCHITECTURE.md: no section 'Dependencies, folder by folder'")
    deps = {}
    for m in re.finditer(r"^\|\s*([a-z_]+)\s*\|([a-z_, ]*)\|\s*$", sec[1].split("\n## ")[0],
                         re.M):
        if m.group(1) == "folder":
            continue
        deps[m.group(1)] = {f.strip() for f in m.group(2).split(",") if f.strip()}
    return deps


def circles(deps):
    """Folders on a circle of the dependency rows (empty when there is none)."""
    state, bad = {}, set()

    def visit(f, path):
        if state.get(f) == 1:
            bad.update(path[path.index(f):])
            return
        if state.get(f) == 2:
            return
        state[f] = 1
        for g in sorted(deps.get(f, ())):
            visit(g, path + [g])
        state[f] = 2

    for f in sorted(deps):
        visit(f, [f])
    return bad


def check_deps_table(layers, deps):
    problems = []
    for f in sorted(set(layers) ^ set(deps)):
        problems.append(f"docs/ARCHITECTURE.md: folder {f} is in one table but not the other")
    for f, allowed in sorted(deps.items()):
        for g in sorted(allowed - set(deps)):
            problems.append(f"docs/ARCHITECTURE.md: {f}'s row names {g}, not a folder")
    for f in sorted(circles(deps)):
        problems.append(f"docs/ARCHITECTURE.md: {f} is on a circle of the dependency rows")
    return problems


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
    deps = read_deps()
    domains = domain_folders(layers)
    found = set()
    found_rpc = set()
    used = set()
    problems = check_deps_table(layers, deps)
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
            own_folder = folder
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
                elif inc_folder != own_folder and inc_folder not in deps.get(own_folder, ()):
                    found.add(key)
                    if key not in KNOWN:
                        problems.append(f"src/{rel}:{n}: includes {inc}: {inc_folder} is not in "
                                        f"{own_folder}'s row of the dependency table")
                elif inc.endswith("_internal.h") and inc_folder != own_folder:
                    found.add(key)
                    if key not in KNOWN:
                        problems.append(f"src/{rel}:{n}: includes {inc}, private to {inc_folder}/")
                elif inc_folder != own_folder:
                    used.add((own_folder, inc_folder))
    for f, allowed in sorted(deps.items()):
        for g in sorted(allowed):
            if (f, g) not in used:
                problems.append(f"docs/ARCHITECTURE.md: {f}'s row names {g}, which no file of "
                                f"{f} includes: take it out")
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
