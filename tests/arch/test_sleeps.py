#!/usr/bin/env python3
"""Tests wait for a condition, not a time.

A fixed sleep that waits for something to happen ("hope the request is in flight") is
too short on a loaded machine or under valgrind, where EXEC_TEST_TIMEOUT_SCALE does not
stretch it, and too long everywhere else. A test waits on an observable event with a
deadline instead (tests/blackbox/harness.py: wait_until and the helpers beside it).

This test reads the test code (tests/ and client/tests/: Python, C and shell) and fails
on every sleep call that does not say on its line why it is one: a trailing comment
`sleep-ok: <why>` (`/* sleep-ok: why */` in C). What may say so: the poll interval of a
loop that checks a condition against a deadline, a stimulus (a peer that answers late,
bytes dribbled one by one), and a window in which something must NOT happen (scaled by
EXEC_TEST_TIMEOUT_SCALE where a slower server would need longer to do it).

Only real calls count: `sleep` as a command the server runs (["sleep", "5"], or inside
an `sh -c` string) is test data, not a test sleep, and so are string literals and
comments. Python is read with the ast module, C with its comments and literals blanked,
shell with shlex (a command word `sleep`)."""
import ast
import os
import re
import shlex
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TREES = ("tests", "client/tests")
MARK = "sleep-ok:"
SKIP_DIRS = ("corpus", "__pycache__", "node_modules")

# ---- Python ---------------------------------------------------------------------------

# time.sleep(...), asyncio.sleep(...), a bare sleep(...) (from time import sleep), and  (sleep-ok: describes the check)
# select.select([], [], [], t).
PY_MODULES = ("time", "asyncio")


def select_with_nothing(call):
    """select.select([], [], [], t): a sleep by another name."""
    f = call.func
    name = f.attr if isinstance(f, ast.Attribute) else getattr(f, "id", None)
    return name == "select" and len(call.args) == 4 and all(
        isinstance(a, (ast.List, ast.Tuple)) and not a.elts for a in call.args[:3])


def py_sleeps(text):
    """(first line, last line) of every sleep call in the Python source text."""
    tree = ast.parse(text)
    out = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        f = node.func
        if (isinstance(f, ast.Attribute) and f.attr == "sleep" and isinstance(f.value, ast.Name)
                and f.value.id in PY_MODULES) or (isinstance(f, ast.Name) and f.id == "sleep") \
                or select_with_nothing(node):
            out.append((node.lineno, getattr(node, "end_lineno", node.lineno)))
    return out


# ---- C --------------------------------------------------------------------------------

C_TOKENS = re.compile(r'//[^\n]*|/\*.*?\*/|"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\'', re.S)
C_SLEEP = re.compile(r"\b(sleep|usleep|nanosleep|clock_nanosleep)\s*\(")


def c_sleeps(text):
    code = C_TOKENS.sub(lambda m: re.sub(r"[^\n]", " ", m.group(0)), text)
    out = []
    for n, line in enumerate(code.split("\n"), 1):
        for m in C_SLEEP.finditer(line):
            before = line[:m.start()].rstrip()
            if before.endswith((".", "->")) or re.search(r"\b(int|void|unsigned)\s*$", before):
                continue  # a member, or a declaration of one's own
            out.append((n, n))
    return out


# ---- shell ----------------------------------------------------------------------------

# Tokens after which the next word is a command.
SH_CMD_START = {";", "&", "&&", "||", "|", "(", "((", "`", "{", "!", "then", "do", "else",
                "elif", "if", "while", "until", "time", "exec", "$("}


def sh_logical_lines(text):
    """(first line, last line, tokens) per logical line: physical lines joined while a
    quote or a backslash continuation is open."""
    lines = text.split("\n")
    i = 0
    while i < len(lines):
        start = i
        chunk = lines[i]
        while True:
            if chunk.endswith("\\") and i + 1 < len(lines):
                i += 1
                chunk = chunk[:-1] + " " + lines[i]
                continue
            try:
                lex = shlex.shlex(chunk, posix=True, punctuation_chars=True)
                lex.whitespace_split = True
                toks = list(lex)
                break
            except ValueError:  # an open quote: the string goes on
                if i + 1 >= len(lines):
                    toks = []
                    break
                i += 1
                chunk += "\n" + lines[i]
        yield start + 1, i + 1, toks
        i += 1


def sh_sleeps(text):
    out = []
    for first, last, toks in sh_logical_lines(text):
        expect_cmd = True
        for t in toks:
            if expect_cmd and re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*=.*", t, re.S):
                continue  # VAR=value before the command
            if expect_cmd and t == "sleep":
                out.append((first, last))
            if t.endswith("$(") or t.endswith("`"):
                expect_cmd = True
            else:
                expect_cmd = t in SH_CMD_START
    return out


# ---- the scan -------------------------------------------------------------------------

def kind_of(path, head):
    if path.endswith(".py"):
        return "py"
    if path.endswith((".c", ".h")):
        return "c"
    if path.endswith(".sh") or re.match(r"#!.*\b(ba|da)?sh\b", head):
        return "sh"
    if re.match(r"#!.*\bpython", head):
        return "py"
    return None


def scan(rel, text, kind):
    finder = {"py": py_sleeps, "c": c_sleeps, "sh": sh_sleeps}[kind]
    lines = text.split("\n")
    problems = []
    for first, last in sorted(finder(text)):
        if any(MARK in lines[k - 1] for k in range(first, last + 1)):
            continue
        problems.append("%s:%d: a fixed sleep: wait for an observable condition with a "
                        "deadline (wait_until), or say why with `%s <why>`"
                        % (rel, first, MARK))
    return problems


# (kind, text, whether the scanner must report it): it sees calls and only calls.
SELF_TEST = [
    ("py", "import time\ntime.sleep(0.3)\n", True),  # sleep-ok: self-test input, not a call
    ("py", "from time import sleep\nsleep(1)\n", True),
    ("py", "def f():\n    x = 1\n    time.sleep(x * 2)\n", True),  # sleep-ok: self-test input, not a call
    ("py", "select.select([], [], [], 0.5)\n", True),
    ("py", "time.sleep(0.05)  # sleep-ok: poll interval\n", False),
    ("py", "s.start('p', ['sleep', '5'])\n", False),
    ("py", "s.start('p', ['sh', '-c', 'sleep 1; echo x'])\n", False),
    ("py", "# time.sleep(1) is gone\nx = 'time.sleep(2)'\n", False),
    ("py", "proc.wait(10)\nstop.wait(0.2)\n", False),
    ("py", "select.select([fd], [], [], 0.5)\n", False),
    ("c", "int main(void){ usleep(200 * 1000); }", True),
    ("c", "void f(void){ nanosleep(&ts, NULL); sleep (1); }", True),
    ("c", "usleep(20 * 1000); /* sleep-ok: poll interval */", False),
    ("c", 'p = start_sh(c, "echo a; sleep 0.3; echo b");', False),
    ("c", "/* no usleep(1) here */ int x;", False),
    ("sh", "sleep 1\n", True),
    ("sh", "while :; do x; sleep 0.05; done\n", True),
    ("sh", "a && sleep 2 || b\n", True),
    ("sh", "x=$(sleep 1; echo hi)\n", True),
    ("sh", "while :; do sleep 0.05; done  # sleep-ok: poll interval\n", False),
    ("sh", "sh -c 'echo one; sleep 1'\necho sleep\n", False),
    ("sh", "# sleep 5 before\nreq='{\"a\":\nsleep 3}'\n", False),
]


def self_test():
    """The scanner reports what it must and nothing else (so the real check can fail)."""
    for kind, text, found in SELF_TEST:
        assert bool(scan("t." + kind, text, kind)) == found, (kind, text)


def main():
    self_test()
    problems = []
    seen = {"py": 0, "c": 0, "sh": 0}
    for tree in TREES:
        for dirpath, dirs, files in os.walk(os.path.join(ROOT, tree)):
            dirs[:] = [d for d in dirs if d not in SKIP_DIRS]
            for name in sorted(files):
                path = os.path.join(dirpath, name)
                rel = os.path.relpath(path, ROOT)
                try:
                    with open(path, encoding="utf-8") as f:
                        text = f.read()
                except (UnicodeDecodeError, OSError):
                    continue
                kind = kind_of(name, text[:80])
                if kind is None:
                    continue
                seen[kind] += 1
                problems += scan(rel, text, kind)
    if seen["py"] < 40 or seen["c"] < 20:
        sys.exit("only %s test files found under %s: wrong root?" % (seen, TREES))
    if problems:
        print("\n".join(problems))
        print("FAIL: %d fixed sleep(s) in the tests without a `%s` reason"
              % (len(problems), MARK))
        sys.exit(1)
    print("OK: %d Python, %d C and %d shell test files: every sleep says why it is one"
          % (seen["py"], seen["c"], seen["sh"]))


if __name__ == "__main__":
    main()
