"""Live cross-handshake of our Noise hybrid-IK engine (src/crypto/noise_ik through
build/.../noise-ik-peer) with the independent JavaScript model
(tests/oracle/noise_ik_oracle.mjs, @noble primitives), fresh random keys every run:

  * C initiator <-> JS responder and JS initiator <-> C responder: the handshake
    completes, the responder learns the initiator's exact public-key JSON and the
    msg-1 payload (a random authorization string), msg sizes are 3568 + len and 3424;
  * transport records both ways at assorted sizes up to the 65519-byte maximum, a
    tampered record is refused without desynchronising the stream;
  * a prologue mismatch (another stream id) makes msg 1 fail at either responder.

tests/oracle/install.sh installs the oracle; when it exits 77 (no node/npm or no
registry) this test exits 77 too, i.e. skipped, never faked. Standard library only.
"""

import os
import queue
import random
import string
import subprocess
import sys
import threading

import oracle_setup

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
EBADMSG = 74
ROUNDS = int(os.environ.get("NOISE_ORACLE_ROUNDS", "3"))
SIZES = [0, 1, 15, 16, 17, 1000, 61440, 65519]


class Peer:
    """One implementation behind the line protocol of noise_ik_oracle.mjs `peer`."""

    def __init__(self, name, argv, env):
        self.name = name
        self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     text=True, bufsize=1, env=env)
        # Lines are read by a thread: a select() on the pipe says nothing of lines a
        # readline already pulled into the file's buffer (a peer that writes three
        # lines at once left the third there, and the test waited 60 s for it).
        self.lines = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for line in self.proc.stdout:
            self.lines.put(line)
        self.lines.put("")

    def send(self, *words):
        self.proc.stdin.write(" ".join(words) + "\n")
        self.proc.stdin.flush()

    def expect(self, tag, timeout=60):
        try:
            line = self.lines.get(timeout=timeout)
        except queue.Empty:
            raise AssertionError("%s: no %s within %ss" % (self.name, tag, timeout))
        if not line:
            raise AssertionError("%s exited (rc=%s) waiting for %s" % (self.name, self.proc.wait(), tag))
        word, _, rest = line.rstrip("\n").partition(" ")
        if word != tag:
            raise AssertionError("%s: wanted %s, got %s" % (self.name, tag, line[:200]))
        return rest

    def close(self):
        self.proc.stdin.close()
        rc = self.proc.wait(timeout=30)
        if rc != 0:
            raise AssertionError("%s exited with %s" % (self.name, rc))


def peer_env(payload, stream="stream-1"):
    env = dict(os.environ)
    env.update(NOISE_ENV="env-1", NOISE_REG="registration-1", NOISE_STREAM=stream,
               NOISE_PAYLOAD=payload)
    return env


def random_payload():
    n = random.choice([0, 1, 37, random.randrange(1, 4097), 4096])
    return "".join(random.choice(string.ascii_letters + string.digits + ".-_") for _ in range(n))


def handshake(ini, res, payload):
    """Runs msg 1 / msg 2 between two started peers; returns the count of checks."""
    res_pub = res.expect("PUB")
    ini.send("PEER", res_pub)
    ini_pub = ini.expect("PUB")
    msg1 = ini.expect("MSG1")
    assert len(msg1) // 2 == 3568 + len(payload), "msg 1 is %d bytes" % (len(msg1) // 2)
    res.send("MSG1", msg1)
    assert res.expect("REMOTE") == ini_pub, "responder learned another initiator key"
    assert res.expect("PAYLOAD") == payload.encode().hex(), "msg-1 payload differs"
    msg2 = res.expect("MSG2")
    assert len(msg2) // 2 == 3424, "msg 2 is %d bytes" % (len(msg2) // 2)
    ini.send("MSG2", msg2)
    ini.expect("OK")
    return 4


def transport(a, b):
    """Records from a to b at every size, one tampered on the way."""
    checks = 0
    for size in SIZES:
        pt = os.urandom(size).hex()
        a.send("SEND", pt)
        rec = a.expect("REC")
        assert len(rec) // 2 == size + 16
        if size == 1000:
            bad = bytearray.fromhex(rec)
            bad[random.randrange(len(bad))] ^= 1 << random.randrange(8)
            b.send("REC", bad.hex())
            err = b.expect("ERR")  # a PT here would fail expect(): tampering accepted
            assert b.name != "C" or err == str(-EBADMSG), "C: %s" % err
            checks += 1
        b.send("REC", rec)
        assert b.expect("PT") == pt, "record of %d bytes differs" % size
        checks += 1
    return checks


def prologue_mismatch(make_ini, make_res):
    ini, res = make_ini("stream-1"), make_res("stream-2")
    try:
        ini.send("PEER", res.expect("PUB"))
        ini.expect("PUB")
        res.send("MSG1", ini.expect("MSG1"))
        err = res.expect("ERR")  # the JS model words it its own way
        assert res.name != "C" or err == str(-EBADMSG), "C responder: %s" % err
    finally:
        ini.close()
        res.close()
    return 1


def main():
    node_modules, cpeer, rc = oracle_setup.prepare("noise-ik-peer", "NOISE_IK_PEER")
    if rc is not None:
        return rc
    oracle = os.path.join(ROOT, "tests/oracle/noise_ik_oracle.mjs")

    def c(role, payload="", stream="stream-1"):
        return Peer("C", [cpeer, role], peer_env(payload, stream))

    def js(role, payload="", stream="stream-1"):
        return Peer("JS", ["node", oracle, node_modules, "peer", role], peer_env(payload, stream))

    checks = 0
    for r in range(ROUNDS):
        for ini_make, res_make, label in ((c, js, "C initiator -> JS responder"),
                                          (js, c, "JS initiator -> C responder")):
            payload = random_payload()
            ini, res = ini_make("initiator", payload), res_make("responder")
            try:
                checks += handshake(ini, res, payload)
                checks += transport(ini, res)
                checks += transport(res, ini)
            except AssertionError as e:
                raise AssertionError("round %d, %s: %s" % (r, label, e))
            finally:
                ini.close()
                res.close()
    checks += prologue_mismatch(lambda s: js("initiator", "auth", s), lambda s: c("responder", "", s))
    checks += prologue_mismatch(lambda s: c("initiator", "auth", s), lambda s: js("responder", "", s))
    print("noise_ik oracle: %d rounds each way, %d cross-checks passed" % (ROUNDS, checks))
    return 0


if __name__ == "__main__":
    sys.exit(main())
