#!/usr/bin/env python3
"""One source of randomness: every random byte in the tree comes from
crypto_random_bytes (src/crypto/random.c: getrandom(2), aborting when the kernel
refuses), never from a second generator with its own failure handling.

A session id once fell back to unseeded random() when getrandom failed, remote mode to
a constant request id, the client to arc4random: each a way to hand out a guessable id
or key. This test reads every C file of the server, the client library, the bench and
the tests (comments and string literals removed) and fails on any call to another
generator; only src/crypto/random.c may call getrandom."""
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TREES = ("src", "client", "bench", "tests")
ALLOWED = {"src/crypto/random.c"}

# C library, BSD and OpenSSL generators, by the name a call uses.
FORBIDDEN = re.compile(
    r"\b(getrandom|getentropy|random|srandom|initstate|setstate|rand|srand|rand_r|"
    r"[delmnj]rand48|[dlmnj]rand48_r|arc4random\w*|RAND_bytes|RAND_priv_bytes|"
    r"RAND_pseudo_bytes|RAND_bytes_ex|RAND_priv_bytes_ex|rand_s)\s*\(")
# Reading the kernel's devices directly is another generator too.
DEVICE = re.compile(r'"/dev/u?random"')

TOKENS = re.compile(r'//[^\n]*|/\*.*?\*/|"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\'', re.S)


def code_only(text):
    """The text with comments and string/char literals blanked (newlines kept, so
    line numbers stay right); string literals are returned separately."""
    strings = []

    def blank(m):
        tok = m.group(0)
        if tok.startswith('"'):
            strings.append((text.count("\n", 0, m.start()) + 1, tok))
        return re.sub(r"[^\n]", " ", tok)

    return TOKENS.sub(blank, text), strings


def scan(rel, text):
    problems = []
    code, strings = code_only(text)
    for n, line in enumerate(code.split("\n"), 1):
        for m in FORBIDDEN.finditer(line):
            # A declaration or member named like one (e.g. `.random = ...`) is not a
            # call; a call is the name not preceded by a member access.
            before = line[:m.start()].rstrip()
            if before.endswith((".", "->")):
                continue
            problems.append(f"{rel}:{n}: calls {m.group(1)}(); use crypto_random_bytes "
                            "(crypto/random.h)")
    for n, lit in strings:
        if DEVICE.fullmatch(lit) and not rel.startswith("src/sandbox/"):
            problems.append(f"{rel}:{n}: opens {lit}; use crypto_random_bytes")
    return problems


def self_test():
    """The scanner sees calls and only calls (so the real check can fail)."""
    assert scan("x.c", "int f(void){ return rand(); }")
    assert scan("x.c", "void f(void){ getrandom(b, 4, 0); }")
    assert scan("x.c", "void f(void){ arc4random_buf(b, 4); }")
    assert scan("x.c", "void f(void){ if (RAND_bytes(b, 4) != 1) abort(); }")
    assert scan("x.c", "long f(void){ return random (); }")
    assert not scan("x.c", "/* from getrandom(2) */ int f(void);")
    assert not scan("x.c", "// random() was here\nint f(void);")
    assert not scan("x.c", 'const char *s = "rand()";')
    assert not scan("x.c", "void f(void){ crypto_random_bytes(b, 4); }")
    assert not scan("x.c", "int operand(int x);")
    assert scan("x.c", 'int fd = open("/dev/urandom", O_RDONLY);')
    assert not scan("src/sandbox/view.c", 'static const char *p[] = {"/dev/urandom"};')


def main():
    self_test()
    problems = []
    seen = 0
    for tree in TREES:
        for dirpath, dirs, files in os.walk(os.path.join(ROOT, tree)):
            dirs[:] = [d for d in dirs if d not in ("corpus", "__pycache__")]
            for name in sorted(files):
                if not name.endswith((".c", ".h")):
                    continue
                path = os.path.join(dirpath, name)
                rel = os.path.relpath(path, ROOT)
                if rel in ALLOWED:
                    continue
                seen += 1
                problems += scan(rel, open(path, encoding="utf-8", errors="replace").read())
    if seen < 100:
        sys.exit(f"only {seen} C files found under {TREES}: wrong root?")
    if problems:
        print("\n".join(problems))
        print(f"FAIL: {len(problems)} call(s) to a random source other than "
              "crypto_random_bytes")
        sys.exit(1)
    print(f"OK: {seen} C files draw randomness only through crypto_random_bytes")


if __name__ == "__main__":
    main()
