#!/usr/bin/env python3
"""No function longer than 120 lines unless it says why.

A function that does not fit on two screens is usually several steps that want names
(main() was 465 lines of option handling before issue 23). This test reads every .c
file of the server (src/), the client library and CLI (client/, its tests aside) and
the bench (bench/), finds each function definition and counts the lines of its body
(the lines strictly between its opening and closing brace). Over LIMIT fails, unless
the comment right above the function (or the line before its signature) contains
`long-function:` followed by the reason a split would make it harder to read (a flat
table, one switch over a protocol's states...).

Usage: test_function_length.py [--list]   (--list prints every function over the
limit, marked or not, longest first)."""
import bisect
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TREES = ("src", "client", "bench")
SKIP_DIRS = {"tests", "corpus", "__pycache__"}
LIMIT = 120
MARK = re.compile(r"long-function:\s*\w")

# Comments, string and character literals (blanked before the braces are counted).
TOKENS = re.compile(r'//[^\n]*|/\*.*?\*/|"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\'', re.S)
# Preprocessor lines with their continuations (a macro's braces are not a function).
PREPROC = re.compile(r"^[ \t]*#(?:[^\n]*\\\n)*[^\n]*", re.M)


def blank(text):
    keep_lines = lambda m: re.sub(r"[^\n]", " ", m.group(0))
    return PREPROC.sub(keep_lines, TOKENS.sub(keep_lines, text))


def partner(code, i, step):
    """The index of the bracket matching the one at code[i], walking by step (+1
    forward from an opening one, -1 back from a closing one)."""
    here, there = code[i], {"(": ")", ")": "(", "{": "}", "}": "{"}[code[i]]
    d = 0
    while 0 <= i < len(code):
        if code[i] == here:
            d += 1
        elif code[i] == there:
            d -= 1
            if d == 0:
                return i
        i += step
    return i - step


def functions(text):
    """(name, first body line, last body line, signature line) for each function
    definition: a brace at file level whose previous token is the `)` of a
    parameter list."""
    code = blank(text)
    newlines = [m.start() for m in re.finditer("\n", code)]
    line_at = lambda pos: bisect.bisect_left(newlines, pos) + 1
    out = []
    depth = 0
    i = 0
    while i < len(code):
        c = code[i]
        if c == "}":
            depth -= 1
        elif c == "{" and depth > 0:
            depth += 1
        elif c == "{":
            p = i - 1
            while p >= 0 and code[p].isspace():
                p -= 1
            if p < 0 or code[p] != ")":
                depth += 1  # a struct, union, enum or initializer at file level
                i += 1
                continue
            # The name before the parameter list's "(", and the end of the body.
            q = partner(code, p, -1)
            head = code[max(0, q - 400):q]
            m = re.search(r"(\w+)\s*$", head)
            name = m.group(1) if m else "?"
            name_at = q - len(head) + m.start() if m else q
            k = partner(code, i, 1)
            # The signature may start lines earlier (return type, attributes).
            s = code.rfind("\n", 0, name_at) + 1
            while s > 0:
                prev_start = code.rfind("\n", 0, s - 1) + 1
                prev = code[prev_start:s - 1]
                if prev.strip() == "" or prev.rstrip().endswith((";", "}", "{")):
                    break
                s = prev_start
            out.append((name, line_at(i), line_at(k), line_at(s)))
            i = k
        i += 1
    return out


def marked(lines, sig_line):
    """Is there a `long-function:` reason in the comment right above the signature
    (or on the line before it)?"""
    k = sig_line - 2  # index of the line before the signature
    if k >= 0 and MARK.search(lines[k]):
        return True
    # The contiguous comment block that ends on that line.
    if k >= 0 and lines[k].rstrip().endswith("*/"):
        while k >= 0:
            if MARK.search(lines[k]):
                return True
            if "/*" in lines[k]:
                break
            k -= 1
    return False


def scan(rel, text):
    """(problems, long functions) of one file."""
    lines = text.split("\n")
    problems, longs = [], []
    for name, open_line, close_line, sig_line in functions(text):
        body = close_line - open_line - 1
        if body <= LIMIT:
            continue
        ok = marked(lines, sig_line)
        longs.append((body, f"{rel}:{open_line}: {name}() {body} lines"
                            f"{' (long-function)' if ok else ''}"))
        if not ok:
            problems.append(f"{rel}:{sig_line}: {name}() has {body} lines (limit {LIMIT}): "
                            "split it, or say why not with a `long-function: <reason>` "
                            "comment above it")
    return problems, longs


def self_test():
    """The counter sees functions and only functions (so the real check can fail)."""
    body = "\n".join(["    x++;"] * (LIMIT + 1))
    long_fn = f"static int f(int x)\n{{\n{body}\n    return x;\n}}\n"
    assert scan("x.c", long_fn)[0], "a long function passes"
    assert not scan("x.c", "/* Why.\n * long-function: one switch over the states */\n"
                    + long_fn)[0]
    assert not scan("x.c", "// long-function: a flat table\n" + long_fn)[0]
    assert scan("x.c", "/* long-function: */\n" + long_fn)[0], "a mark without a reason"
    assert scan("x.c", "/* long-function: why */\n\n" + long_fn)[0], "a detached mark"
    short = f"int g(void)\n{{\n{chr(10).join(['    y();'] * LIMIT)}\n}}\n"
    assert not scan("x.c", short)[0], "exactly the limit fails"
    # Braces in tables, strings, comments and macros are not functions.
    table = "static const int t[] = {\n" + "1,\n" * 200 + "};\n"
    assert not scan("x.c", table)[0]
    assert not scan("x.c", '#define M(x) { \\\n' + ' x; \\\n' * 200 + '}\n')[0]
    assert scan("x.c", 'const char *s = "{";\n' + long_fn)[0]
    assert [f[0] for f in functions("static void\nname(int a,\n     int b)\n{\n}\n")] == ["name"]


def main():
    self_test()
    problems, longs = [], []
    seen = 0
    for tree in TREES:
        for dirpath, dirs, files in os.walk(os.path.join(ROOT, tree)):
            dirs[:] = sorted(d for d in dirs if d not in SKIP_DIRS)
            for name in sorted(files):
                if not name.endswith(".c"):
                    continue
                path = os.path.join(dirpath, name)
                rel = os.path.relpath(path, ROOT)
                seen += 1
                p, lg = scan(rel, open(path, encoding="utf-8", errors="replace").read())
                problems += p
                longs += lg
    if seen < 100:
        sys.exit(f"only {seen} C files found under {TREES}: wrong root?")
    if "--list" in sys.argv:
        for _, line in sorted(longs, reverse=True):
            print(line)
    if problems:
        print("\n".join(problems))
        print(f"FAIL: {len(problems)} function(s) over {LIMIT} lines without a reason")
        return 1
    print(f"OK: {seen} C files, no function over {LIMIT} lines without a reason "
          f"({len(longs)} marked long-function)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
