#!/usr/bin/env python3
"""The capability tables in docs/PROTOCOL.md (§11, "Capabilities this server
advertises") and docs/FLAGS.md (the "ours" column) say what a running server's
environment/info advertises, capability by capability: every advertised capability has
a row, every row names a capability the server reports, and the default value matches
("true unless ..." / "false unless ..." name the default a plain start gives). A table
that still says false after a capability shipped misleads whoever wires a client.

Usage: test_capabilities.py PATH/exec-server"""
import json
import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "tests", "blackbox"))


def table_rows(text, header):
    """The rows of the Markdown table whose header line starts with `header`."""
    lines = text[text.index(header):].splitlines()
    rows = []
    for line in lines[2:]:
        if not line.startswith("|"):
            break
        rows.append([c.strip() for c in line.strip().strip("|").split("|")])
    return rows


def expected(rows, value_col, path):
    """capability -> default bool, from one table; errors for unreadable values."""
    want, errors = {}, []
    for row in rows:
        names = re.findall(r"`([A-Za-z0-9]+)`", row[0])
        if "(not a capability" in row[0]:
            continue
        value = row[value_col]
        m = re.match(r"(true|false)\b", value)
        if not names or not m:
            errors.append("%s: unreadable row %r" % (path, row))
            continue
        for n in names:
            want[n] = m.group(1) == "true"
    return want, errors


def main():
    os.environ["EXEC_SERVER"] = os.path.abspath(sys.argv[1])
    from harness import Server  # the server path is read at import
    srv = Server()
    try:
        s = srv.session()
        caps = s.call("environment/info")["capabilities"]
        s.close()
    finally:
        srv.stop()
    failures = []
    for path, header, col in (
            ("docs/PROTOCOL.md", "| capability | value | why |", 1),
            ("docs/FLAGS.md", "| capability | 0.171.0 | ours | note |", 2)):
        text = open(os.path.join(ROOT, path)).read()
        want, errors = expected(table_rows(text, header), col, path)
        failures += errors
        for name, value in sorted(caps.items()):
            if name not in want:
                failures.append("%s: no row for advertised capability %s" % (path, name))
            elif want[name] != value:
                failures.append("%s: says %s is %s, the server advertises %s"
                                % (path, name, json.dumps(want[name]), json.dumps(value)))
        for name in sorted(set(want) - set(caps)):
            failures.append("%s: row for %s, which the server does not report" % (path, name))
    for f in failures:
        print("FAIL", f)
    if not failures:
        print("both capability tables match environment/info (%d capabilities)" % len(caps))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
