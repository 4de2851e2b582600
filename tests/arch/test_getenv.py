#!/usr/bin/env python3
"""One reader of the environment: in src/ only core/options.c calls getenv. Every
variable the program acts on is a row of an option table (a flag's .env) or of
env_vars_table (core/env_vars.c, copied once at start into core/env_vars.h's struct),
and docs/FLAGS.md names every one.

About twenty variables were read by getenv across fourteen files, each where it was
needed, so no list of them existed, a flag and its variable could disagree (the
managed proxy took `1` for CODEX_EXEC_SERVER_PROXY_PRIVATE_IPS_VIA_UPSTREAM, which the
flag's own reading refuses), and a module low in the layer table reached for the
process's settings on its own. This test reads every C file of src/ (comments and
string literals removed) and fails on a call to getenv or secure_getenv outside
options.c and ALLOWED, then on a variable of the table that docs/FLAGS.md does not
name."""
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
READER = "src/core/options.c"
# Where the variables are named: the option tables' .env and env_vars_table.
TABLES = ("src/server/options.c", "src/fleet/fleet_options.c", "src/core/env_vars.c")
# Calls that stay, each with why (path -> reason).
ALLOWED = {
    # http/request's header `valueEnvVar`: the request names the variable (as the
    # reference's executor reads it), so no table can list it in advance.
    "src/http/http_client.c": "valueEnvVar: a variable the request names",
}

CALL = re.compile(r"\b(secure_getenv|getenv)\s*\(")
TOKENS = re.compile(r'//[^\n]*|/\*.*?\*/|"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\'', re.S)


def code_only(text):
    """The text with comments and literals blanked, newlines kept."""
    return TOKENS.sub(lambda m: re.sub(r"[^\n]", " ", m.group(0)), text)


def stray_calls():
    bad = []
    for dirpath, _, files in os.walk(os.path.join(ROOT, "src")):
        for name in sorted(files):
            if not name.endswith((".c", ".h")):
                continue
            path = os.path.join(dirpath, name)
            rel = os.path.relpath(path, ROOT)
            if rel == READER:
                continue
            code = code_only(open(path, encoding="utf-8", errors="replace").read())
            for m in CALL.finditer(code):
                line = code.count("\n", 0, m.start()) + 1
                if rel not in ALLOWED:
                    bad.append("%s:%d: %s outside %s" % (rel, line, m.group(1), READER))
    return bad


def table_names():
    """The variables TABLES name: the flags' .env and env_vars_table's rows."""
    names = set()
    for rel in TABLES:
        text = open(os.path.join(ROOT, rel), encoding="utf-8").read()
        names |= set(re.findall(r'\.env = "([A-Za-z_][A-Za-z0-9_]*)"', text))
        start = text.find("env_vars_table[] = {")
        if start >= 0:
            table = text[start:text.index("};", start)]
            names |= set(re.findall(r'^\s*\{"([A-Za-z_][A-Za-z0-9_]*)",', table, re.M))
    return names


def main():
    bad = stray_calls()
    names = table_names()
    flags_md = open(os.path.join(ROOT, "docs", "FLAGS.md"), encoding="utf-8").read()
    for n in sorted(names):
        if not re.search(r"`%s`" % re.escape(n), flags_md):
            bad.append("docs/FLAGS.md does not name `%s` (a variable of %s)" %
                       (n, ", ".join(TABLES)))
    if len(names) < 30:
        bad.append("only %d variables found in %s: has a table moved?" %
                   (len(names), ", ".join(TABLES)))
    for b in bad:
        print(b)
    print("getenv: %d variables in the table, %d allowed call site(s), %d problem(s)" %
          (len(names), len(ALLOWED), len(bad)))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
