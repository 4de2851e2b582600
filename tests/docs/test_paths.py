#!/usr/bin/env python3
"""The repository stands alone: nothing a reader is pointed at lies outside it.

Scans README.md, docs/, man/, client/README.md, client/include/, client/cli/, src/ and
packaging/ and fails on
  - a path into the team's workspace (`/work/...`) or its shared folder (`../shared`,
    `shared/PROTOCOL.md`, `shared/seeds`, ...);
  - a relative link or reference that climbs out of the repository (`../` beyond the
    root);
  - a repository path named in the text (`docs/X.md`, `tests/...py`, `man/...`, ...)
    or a Markdown link target that does not exist (a page that was renamed or folded).
Usage: test_paths.py [REPO_ROOT] (default: two levels up from this file)."""
import os
import re
import sys

ROOT = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else
                       os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
SCAN = ["README.md", "docs", "man", "client/README.md", "client/include", "client/cli", "src",
        "packaging"]
TEXT_EXT = (".md", ".c", ".h", ".1", ".3", ".in", ".proto", ".txt", "")

OUTSIDE = [
    (re.compile(r"(?<![\w.-])/work/"), "a path into the workspace (/work/...)"),
    (re.compile(r"\.\./shared\b"), "the team's shared folder (../shared)"),
    (re.compile(r"\bshared/(PROTOCOL|DESIGN|REMOTE)\.md\b|\bshared/seeds\b"),
     "the team's shared folder (shared/...)"),
]
# Repository-relative paths named in prose: one of our documentation, test or packaging
# folders, then a file name with an extension (src/... is left out: the texts also cite
# other projects' sources, e.g. redis's src/ae.c). Resolved from the repository root or
# from the naming file's folder.
NAMED = re.compile(r"(?<![\w./~-])((?:docs|man|tests|packaging|bench|scripts|deps)"
                   r"/[A-Za-z0-9_./-]*[A-Za-z0-9_-]\.(?:md|py|c|h|sh|1|3|in|txt|proto|mjs))\b")
MDLINK = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")


def files():
    for entry in SCAN:
        path = os.path.join(ROOT, entry)
        if os.path.isfile(path):
            yield path
            continue
        for dirpath, _, names in os.walk(path):
            for n in sorted(names):
                if os.path.splitext(n)[1] in TEXT_EXT:
                    yield os.path.join(dirpath, n)


def exists_in_repo(rel):
    p = os.path.normpath(os.path.join(ROOT, rel))
    return p.startswith(ROOT + os.sep) and os.path.exists(p)


def main():
    bad = []
    for path in files():
        rel = os.path.relpath(path, ROOT)
        try:
            text = open(path, encoding="utf-8").read()
        except UnicodeDecodeError:
            continue
        for no, line in enumerate(text.splitlines(), 1):
            for rx, what in OUTSIDE:
                if rx.search(line):
                    bad.append("%s:%d: %s: %s" % (rel, no, what, line.strip()))
            for m in NAMED.finditer(line):
                target = m.group(1)
                if not exists_in_repo(target) and not exists_in_repo(
                        os.path.join(os.path.dirname(rel), target)):
                    bad.append("%s:%d: names %s, which is not in the repository"
                               % (rel, no, target))
            if rel.endswith(".md"):
                for m in MDLINK.finditer(line):
                    t = m.group(1)
                    if re.match(r"^[a-z]+:", t):
                        continue  # http:, mailto:, man: ...
                    full = os.path.normpath(os.path.join(os.path.dirname(path), t))
                    if not full.startswith(ROOT + os.sep):
                        bad.append("%s:%d: link %s leaves the repository" % (rel, no, t))
                    elif not os.path.exists(full):
                        bad.append("%s:%d: link %s does not exist" % (rel, no, t))
            for m in re.finditer(r"(?:\.\./)+", line):
                # a ../ chain, resolved from the file's folder
                full = os.path.normpath(os.path.join(os.path.dirname(path), m.group(0)))
                if full != ROOT and not full.startswith(ROOT + os.sep):
                    bad.append("%s:%d: %s climbs out of the repository: %s"
                               % (rel, no, m.group(0), line.strip()))
    for b in bad:
        print(b)
    print("paths: %d reference(s) leaving the repository or missing" % len(bad))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
