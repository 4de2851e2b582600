"""Live cross-check of our ML-KEM-768 (src/crypto/mlkem768 through build/.../mlkem768-cli)
against the independent @noble/post-quantum implementation (tests/oracle/mlkem_oracle.mjs),
with fresh random inputs on every run:

  * our keygen -> their encaps -> our decaps gives their shared secret, and the reverse
    (their keygen -> our encaps -> their decaps);
  * the deterministic forms (keygen from d||z, encaps from m, decaps, and decaps of a
    corrupted ciphertext, i.e. implicit rejection) are byte-identical;
  * both reject an ek with a coefficient >= q and a dk whose stored H(ek) is wrong.

The oracle is installed by tests/oracle/install.sh; when that exits 77 (no node/npm or no
registry) this test exits 77 too, i.e. skipped, never faked. Standard library only.
"""

import os
import random
import select
import subprocess
import sys

import oracle_setup

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
ROUNDS = int(os.environ.get("MLKEM_ORACLE_ROUNDS", "20"))
EK, DK, CT, SS = 1184, 2400, 1088, 32
Q = 3329


class Peer:
    """One implementation behind the line protocol of tests/oracle/mlkem768_cli.c."""

    def __init__(self, name, argv):
        self.name = name
        self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     text=True, bufsize=1)

    def call(self, *words, timeout=60):
        self.proc.stdin.write(" ".join(words) + "\n")
        self.proc.stdin.flush()
        ready, _, _ = select.select([self.proc.stdout], [], [], timeout)
        if not ready:
            raise AssertionError("%s: no answer within %ss to %s" % (self.name, timeout, words[0]))
        line = self.proc.stdout.readline()
        if not line:
            raise AssertionError("%s exited (rc=%s) on %s" % (self.name, self.proc.wait(), words[0]))
        return line.split()

    def ok(self, *words):
        out = self.call(*words)
        if out[0] != "ok":
            raise AssertionError("%s: %s failed: %s" % (self.name, words[0], " ".join(out)))
        return out[1:]

    def close(self):
        self.proc.stdin.close()
        rc = self.proc.wait(timeout=30)
        if rc != 0:
            raise AssertionError("%s exited with %s" % (self.name, rc))


def rand_hex(n):
    return os.urandom(n).hex()


def flip(hexstr, pos, mask):
    b = bytearray.fromhex(hexstr)
    b[pos] ^= mask
    return b.hex()


def set_coeff(ek_hex, idx, val):
    """Sets 12-bit coefficient idx of ek's ByteEncode_12(t^) part to val."""
    b = bytearray.fromhex(ek_hex)
    p = 3 * (idx // 2)
    if idx % 2 == 0:
        b[p] = val & 0xff
        b[p + 1] = (b[p + 1] & 0xf0) | (val >> 8)
    else:
        b[p + 1] = (b[p + 1] & 0x0f) | ((val & 0x0f) << 4)
        b[p + 2] = val >> 4
    return b.hex()


def main():
    node_modules, cli, rc = oracle_setup.prepare("mlkem768-cli", "MLKEM768_CLI")
    if rc is not None:
        return rc

    c = Peer("C", [cli])
    js = Peer("JS", ["node", os.path.join(ROOT, "tests/oracle/mlkem_oracle.mjs"), node_modules])
    checks = 0
    try:
        for r in range(ROUNDS):
            # Our random keygen, their encaps, our decaps.
            ek, dk = c.ok("keygen")
            ct, ss = js.ok("encaps", ek)
            assert c.ok("decaps", ct, dk) == [ss], "round %d: C decaps of JS ct" % r
            # Their random keygen, our encaps, their decaps.
            ek, dk = js.ok("keygen")
            ct, ss = c.ok("encaps", ek)
            assert js.ok("decaps", ct, dk) == [ss], "round %d: JS decaps of C ct" % r
            checks += 2

            # Deterministic forms agree byte for byte, rejection included.
            d, z, m = rand_hex(32), rand_hex(32), rand_hex(32)
            kc, kj = c.ok("keygen", d, z), js.ok("keygen", d, z)
            assert kc == kj, "round %d: keygen_derand differs (d=%s z=%s)" % (r, d, z)
            ek, dk = kc
            ec, ej = c.ok("encaps", ek, m), js.ok("encaps", ek, m)
            assert ec == ej, "round %d: encaps_derand differs (d=%s z=%s m=%s)" % (r, d, z, m)
            ct, ss = ec
            assert c.ok("decaps", ct, dk) == js.ok("decaps", ct, dk) == [ss]
            bad = flip(ct, random.randrange(CT), 1 << random.randrange(8))
            rc_, rj = c.ok("decaps", bad, dk), js.ok("decaps", bad, dk)
            assert rc_ == rj, "round %d: implicit rejection differs" % r
            assert rc_ != [ss], "round %d: corrupted ct accepted" % r
            checks += 4

            # Both refuse what FIPS 203's input checks refuse.
            ek_bad = set_coeff(ek, random.randrange(768), random.randrange(Q, 4096))
            assert c.call("encaps", ek_bad, m) == ["err", "-22"], "C accepted ek >= q"
            assert js.call("encaps", ek_bad, m)[0] == "err", "JS accepted ek >= q"
            dk_bad = flip(dk, random.randrange(1152, 2368), 1 << random.randrange(8))
            assert c.call("decaps", ct, dk_bad) == ["err", "-22"], "C accepted a bad H(ek)"
            assert js.call("decaps", ct, dk_bad)[0] == "err", "JS accepted a bad H(ek)"
            checks += 2
    finally:
        c.close()
        js.close()
    print("mlkem768 oracle: %d rounds, %d cross-checks passed" % (ROUNDS, checks))
    return 0


if __name__ == "__main__":
    sys.exit(main())
