#!/usr/bin/env python3
"""Remote mode end to end (issue 15): exec-client --remote drives an executor through a
registry + rendezvous (tests/remote/fake_cloud.py), Noise-encrypted, key pinned.

The same scenarios run against two executors:
  reference  `codex exec-server --remote URL --environment-id ID` (0.169.0, from
             ~/.cache/codex-ref; skipped with a message when it is not installed);
  ours       `exec-server --remote URL --environment-id ID` (skipped with a message
             while our exec-server has no --remote).
Scenarios: a process with stdout, stderr and an exit code; an fs write then read of a
file spanning several relay records; a resume after the rendezvous drops the harness
socket (the same session, the output complete, exactly once); the same after the
executor's own rendezvous socket drops (found by the client's liveness read); a
request's trace context in clear in its first data frame only (REMOTE.md §5.1); a 401
on the rendezvous upgrade (one fresh bundle) and a transient registry error (retried);
/validate answering the executor 401 (msg 2 carries the rejection, the client stops
without another bundle); the client's keepalive Pings. Then the basics again with the
fake cloud over TLS: an https registry handing out wss rendezvous URLs.
Throughout, no frame the rendezvous saw may carry "initialize" or "process/start" in
clear.
Every wait is bounded; exit 77 when nothing could run."""
import glob
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "tests", "remote"))
sys.path.insert(0, HERE)
import fake_cloud  # noqa: E402

SKIP = 77
ENV_ID = "env-remote-test"
TOKEN = "tok-" + os.urandom(8).hex()
from remote_testlib import find_build_file, fs_round_trip  # noqa: E402
import remote_testlib  # noqa: E402


CLIENT = find_build_file("exec-client")


def our_server():
    p = os.environ.get("EXEC_SERVER") or find_build_file("exec-server")
    if not p or os.path.basename(p) == "codex" or not os.access(p, os.X_OK):
        return None, "our exec-server is not built"
    try:
        h = subprocess.run([p, "--help"], capture_output=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired) as e:
        return None, "cannot run %s: %s" % (p, e)
    if b"--remote" not in h.stdout + h.stderr:
        return None, "our exec-server has no --remote yet (the rexec work is not merged)"
    return p, None


def reference():
    found = remote_testlib.reference()
    if not found:
        return None, "the reference codex is not installed (tests/blackbox/codex_ref.py)"
    return found, None


class Executor:
    """One executor process registered at a fresh fake cloud (over TLS with tls=True:
    an https registry handing out wss rendezvous URLs, trusted through SSL_CERT_FILE
    by the executor and --ca-file by the client)."""

    def __init__(self, kind, path, tls=False):
        self.kind = kind
        self.home = tempfile.mkdtemp(prefix="remote-test-")
        self.ca = None
        if tls:
            self.ca, cert, key = fake_cloud.make_test_ca(self.home)
        self.cloud = fake_cloud.FakeCloud(token=TOKEN, tls=(cert, key) if tls else None)
        env = dict(os.environ, CODEX_HOME=self.home, CODEX_API_KEY=TOKEN,
                   RUST_LOG=os.environ.get("RUST_LOG", "warn"))
        if tls:
            env["SSL_CERT_FILE"] = self.ca
        cmd = [path, "exec-server"] if kind == "reference" else [path]
        cmd += ["--remote", self.cloud.base_url, "--environment-id", ENV_ID]
        self.err = tempfile.TemporaryFile()
        self.proc = subprocess.Popen(cmd, env=env, cwd=self.home, stdin=subprocess.PIPE,
                                     stdout=subprocess.DEVNULL, stderr=self.err,
                                     start_new_session=True)
        try:
            self.cloud.wait_for(lambda c: c.environment_connected(ENV_ID), 30,
                                "the %s executor to reach the rendezvous" % kind)
        except BaseException:
            self.stop()
            raise

    def stderr_text(self):
        self.err.seek(0)
        return self.err.read().decode("utf-8", "replace")[-4000:]

    def stop(self):
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(10)
        self.cloud.stop()
        shutil.rmtree(self.home, ignore_errors=True)


def client(ex, *args, stdin=b"", timeout=60, popen=False):
    argv = [CLIENT, "--remote", ex.cloud.base_url, "--environment-id", ENV_ID,
            "--token", TOKEN] + (["--ca-file", ex.ca] if ex.ca else []) + list(args)
    env = dict(os.environ)
    env.pop("EXEC_SERVER_URL", None)
    if popen:
        return subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, env=env)
    return subprocess.run(argv, input=stdin, capture_output=True, timeout=timeout, env=env)


def connects(ex):
    with ex.cloud.lock:
        return sum(1 for r in ex.cloud.requests if r["path"].endswith("/connect"))


def harness_streams(ex):
    with ex.cloud.lock:
        return {f["stream_id"] for f in ex.cloud.frames if f["dir"] == "h2e"}


def check_no_cleartext(ex):
    for needle in ("initialize", "process/start", "clientName", "exec-client"):
        hits = ex.cloud.cleartext_hits(needle)
        assert not hits, "%d frame(s) carried %r in clear" % (len(hits), needle)
    with ex.cloud.lock:
        data = [f for f in ex.cloud.frames if f["body"] == "data"]
        shakes = [f for f in ex.cloud.frames if f["body"] == "handshake"]
    assert len(data) >= 4, "expected encrypted data frames, saw %d" % len(data)
    assert len(shakes) >= 2, "expected handshake frames both ways, saw %d" % len(shakes)


def answered(c, streams):
    """Data frames the executor sent on `streams` (responses and notifications: all
    encrypted, so they are counted, not read)."""
    return sum(1 for f in c.frames if f["dir"] == "e2h" and f["body"] == "data"
               and f["stream_id"] in streams)


def drop_during(ex, p, ready, what, drop):
    """Waits (bounded) for ready(cloud), calls drop() (which must report a victim),
    then collects the client's output. The client is killed if anything fails."""
    try:
        ex.cloud.wait_for(ready, 20, what)
        assert drop() >= 1, "nothing to drop"
        out, err = p.communicate(timeout=60)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait(10)
    return out, err


def check_lines(out, err, want):
    lines = out.decode().split()
    assert lines == want, "output not complete exactly once: %r\nstderr: %s" % (
        lines, err.decode())


# ---- scenarios ------------------------------------------------------------------------

def scenario_process(ex):
    r = client(ex, "run", "-n", "--", "sh", "-c",
               "echo out-line; echo err-line >&2; exit 7")
    assert r.returncode == 7, (r.returncode, r.stderr)
    assert r.stdout == b"out-line\n", r.stdout
    assert b"err-line" in r.stderr, r.stderr
    check_no_cleartext(ex)


def scenario_fs(ex):
    fs_round_trip(lambda *a: client(ex, *a), ex.home, "executor")
    check_no_cleartext(ex)


def scenario_resume(ex):
    before_connects = connects(ex)
    before_streams = harness_streams(ex)
    n = 60
    script = "for i in $(seq 1 %d); do echo line-$i; sleep 0.05; done; exit 5" % n
    p = client(ex, "-v", "--reconnect-ms", "25000", "run", "-n", "--", "sh", "-c", script,
               popen=True)
    # Drop the harness socket once the process is running and has printed: the
    # initialize and process/start responses, then a few lines of output.
    out, err = drop_during(ex, p, lambda c: answered(c, harness_streams(ex) - before_streams) >= 6,
                           "the process to print on the client's relay stream",
                           ex.cloud.drop_harness)
    check_lines(out, err, ["line-%d" % i for i in range(1, n + 1)])
    assert p.returncode == 5, (p.returncode, err.decode())
    text = err.decode()
    first = [ln for ln in text.splitlines() if "connected, session " in ln]
    again = [ln for ln in text.splitlines() if "reconnected, session " in ln]
    assert first and again, "no session / reconnect report on stderr: %s" % text
    sid = first[0].rsplit("session ", 1)[1].strip()
    assert again[0].split("session ", 1)[1].split()[0] == sid, text
    # A reconnect is a new bundle and a new stream (REMOTE.md §2.3).
    assert connects(ex) - before_connects >= 2, "no fresh bundle after the drop"
    assert len(harness_streams(ex) - before_streams) >= 2, "no new stream after the drop"
    check_no_cleartext(ex)


def scenario_resume_while_not_there_yet(ex):
    """A resume whose /connect answers "not there yet" (404: a registry that restarted
    with its state in memory; 409: the executor not back) goes on trying within
    --reconnect-ms, as for a refused connection, instead of failing at once."""
    before_streams = harness_streams(ex)
    n = 30
    script = "for i in $(seq 1 %d); do echo line-$i; sleep 0.05; done; exit 6" % n
    p = client(ex, "-v", "--reconnect-ms", "25000", "run", "-n", "--", "sh", "-c", script,
               popen=True)

    def drop():
        ex.cloud.fail_next("connect", 404, "environment_not_found", "not registered", count=2)
        ex.cloud.fail_next("connect", 409, "conflict", "not attached yet")
        return ex.cloud.drop_harness()
    before = connects(ex)
    out, err = drop_during(ex, p, lambda c: answered(c, harness_streams(ex) - before_streams) >= 6,
                           "the process to print on the client's relay stream", drop)
    check_lines(out, err, ["line-%d" % i for i in range(1, n + 1)])
    assert p.returncode == 6, (p.returncode, err.decode())
    assert b"reconnected, session" in err, err.decode()
    assert connects(ex) - before >= 4, "the 404s and the 409 were not retried"
    check_no_cleartext(ex)


def scenario_executor_drop(ex):
    """The executor's rendezvous socket drops (its streams die with it) while the client
    waits on a quiet process; the harness socket stays up, so only the client's liveness
    read notices: the executor resets the unknown stream (or never answers) and the
    client resumes on a new stream once the executor is back."""
    n = 40
    script = "echo first; sleep 3; for i in $(seq 1 %d); do echo line-$i; done; exit 4" % n
    before_streams = harness_streams(ex)
    p = client(ex, "-v", "--reconnect-ms", "25000", "--liveness-ms", "1000", "run", "-n", "--",
               "sh", "-c", script, popen=True)

    # The process runs once the client has had a few data frames answered on its stream
    # (initialize, process/start, its output): everything is encrypted, so count frames
    # rather than look for text.
    def started(c):
        return answered(c, harness_streams(ex) - before_streams) >= 3

    out, err = drop_during(ex, p, started, "the process to start",
                           lambda: ex.cloud.drop_environment(ENV_ID))
    check_lines(out, err, ["first"] + ["line-%d" % i for i in range(1, n + 1)])
    assert p.returncode == 4, (p.returncode, err.decode())
    assert b"reconnected, session" in err, err.decode()
    ex.cloud.wait_for(lambda c: c.environment_connected(ENV_ID), 30, "the executor back")
    check_no_cleartext(ex)


def scenario_trace(ex):
    """REMOTE.md §5.1: a request's W3C trace context is copied, in clear, into the first
    data frame of that request only; everything else stays encrypted."""
    tp = "00-%s-%s-01" % (os.urandom(16).hex(), os.urandom(8).hex())
    before = len(ex.cloud.frames)
    pad = "x" * 100000  # a request spanning several records
    req = ('{"id":77,"method":"fs/getMetadata","trace":{"traceparent":"%s","tracestate":'
           '"k=v"},"params":{"path":"file:///%s"}}\n' % (tp, pad))
    r = client(ex, "rpc", stdin=req.encode())
    # The padded path does not exist: the reply is an error, and rpc exits 1 on one.
    replies = [json.loads(ln) for ln in r.stdout.decode().splitlines()]
    assert r.returncode == 1 and [m["id"] for m in replies if "error" in m] == [77], \
        (r.returncode, r.stdout[:300], r.stderr)
    with ex.cloud.lock:
        mine = [f for f in ex.cloud.frames[before:] if f["dir"] == "h2e" and f["body"] == "data"]
    traced = [f for f in mine if f["parsed"]["traceparent"]]
    assert len(traced) == 1 and traced[0]["parsed"]["traceparent"] == tp, \
        [f["parsed"]["traceparent"] for f in mine]
    i = mine.index(traced[0])
    assert i + 1 < len(mine) and not mine[i + 1]["parsed"]["traceparent"], \
        "the request's later records must not carry the trace"
    check_no_cleartext(ex)


def scenario_upgrade_401(ex):
    before = connects(ex)
    ex.cloud.reject_upgrades(401, role="harness", count=1)
    r = client(ex, "run", "-n", "--", "true")
    assert r.returncode == 0, r.stderr
    assert connects(ex) - before == 2, "a 401 upgrade must fetch exactly one fresh bundle"


def scenario_registry_transient(ex):
    before = connects(ex)
    ex.cloud.fail_next("connect", 503, "unavailable", "try later")
    r = client(ex, "run", "-n", "--", "true")
    assert r.returncode == 0, r.stderr
    assert connects(ex) - before == 2, "a 503 from /connect must be retried once"
    before = connects(ex)
    ex.cloud.fail_next("connect", 409, "environment_offline", "executor away")
    r = client(ex, "run", "-n", "--", "true")
    assert r.returncode == 0, r.stderr
    assert connects(ex) - before == 2, "409 environment_offline must be retried"
    # Not transient: a bad token (exit 3, the registry's reason) and, at the first
    # connect, an unknown environment (exit 255: a typo fails at once; a resume waits
    # for it, scenario_resume_while_not_there_yet), each after exactly one request.
    before = connects(ex)
    r = subprocess.run([CLIENT, "--remote", ex.cloud.base_url, "--environment-id", ENV_ID,
                        "--token", "wrong", "run", "-n", "--", "true"], capture_output=True,
                       timeout=60)
    assert r.returncode == 3 and b"401" in r.stderr, (r.returncode, r.stderr)
    assert connects(ex) - before == 1, "a 401 from the registry must not be retried"
    ex.cloud.fail_next("connect", 404, "environment_not_found", "no such environment")
    r = client(ex, "run", "-n", "--", "true")
    assert r.returncode == 255 and b"environment_not_found" in r.stderr, (r.returncode,
                                                                          r.stderr)


def scenario_credentials_rejected(ex):
    """/validate answers the executor 401 (its own credentials refused): it says so in
    an authenticated msg 2 (docs/REMOTE.md §8.5a), the client reports it and does
    not spend another authorization on a retry."""
    before = connects(ex)
    ex.cloud.fail_next("validate", 401, "unauthorized", "executor token revoked", count=5)
    try:
        r = client(ex, "--reconnect-ms", "5000", "run", "-n", "--", "true")
    finally:
        with ex.cloud.lock:
            ex.cloud.failures.pop("validate", None)
    assert r.returncode == 3, (r.returncode, r.stderr)
    assert b"executor credentials rejected" in r.stderr, r.stderr
    assert connects(ex) - before == 1, "the rejection must not be retried"
    with ex.cloud.lock:
        shakes = [f for f in ex.cloud.frames if f["dir"] == "e2h" and f["body"] == "handshake"]
    assert len(shakes[-1]["raw"]) > 3424 + 41, "msg 2 carries no payload"


def scenario_keepalive(ex):
    """The client Pings the rendezvous while it waits (every --keepalive-ms)."""
    def harness_pings(c):
        return sum(1 for _, kind, d in c.events if kind == "ping" and d[0][0] == "harness")
    with ex.cloud.lock:
        before = harness_pings(ex.cloud)
    r = client(ex, "--keepalive-ms", "200", "run", "-n", "--", "sleep", "2")
    assert r.returncode == 0, r.stderr
    with ex.cloud.lock:
        pings = harness_pings(ex.cloud) - before
    assert pings >= 3, "the client sent %d Pings in 2 s" % pings


SCENARIOS = [scenario_process, scenario_fs, scenario_resume, scenario_resume_while_not_there_yet,
             scenario_executor_drop,
             scenario_trace, scenario_upgrade_401, scenario_registry_transient,
             scenario_credentials_rejected, scenario_keepalive]
# Over TLS (https registry, wss rendezvous): the basics.
TLS_SCENARIOS = [scenario_process, scenario_fs]


def main():
    if CLIENT is None:
        print("SKIP: exec-client is not built")
        return SKIP
    only = set(sys.argv[1:])
    passed = failed = skipped = 0
    for kind, finder, tls in (("reference", reference, False), ("ours", our_server, False),
                              ("reference", reference, True), ("ours", our_server, True)):
        path, why = finder()
        label = kind + ("+tls" if tls else "")
        if path is None:
            print("SKIP %s executor: %s" % (label, why))
            skipped += 1
            continue
        scenarios = [sc for sc in (TLS_SCENARIOS if tls else SCENARIOS)
                     if not only or sc.__name__ in only]
        if not scenarios:
            continue
        print("executor %s: %s" % (label, path))
        try:
            ex = Executor(kind, path, tls=tls)
        except BaseException as e:  # noqa
            print("FAIL %s executor did not come up: %s" % (label, e))
            failed += 1
            continue
        try:
            if tls:
                assert ex.cloud.base_url.startswith("https://"), ex.cloud.base_url
            for sc in scenarios:
                t0 = time.monotonic()
                try:
                    sc(ex)
                    if tls:
                        with ex.cloud.lock:
                            assert ex.cloud.tls_handshakes >= 3, ex.cloud.tls_handshakes
                            assert all(u["target"] and True for u in ex.cloud.upgrades)
                    passed += 1
                    print("PASS %s/%s (%.2fs)" % (label, sc.__name__, time.monotonic() - t0))
                except BaseException as e:  # noqa
                    if isinstance(e, KeyboardInterrupt):
                        raise
                    failed += 1
                    print("FAIL %s/%s (%.2fs): %s" % (label, sc.__name__,
                                                     time.monotonic() - t0, e))
                    if ex.proc.poll() is not None:
                        print("executor exited (%s); stderr:\n%s" % (ex.proc.returncode,
                                                                    ex.stderr_text()))
                sys.stdout.flush()
        finally:
            ex.stop()
    print("%d passed, %d failed, %d skipped" % (passed, failed, skipped))
    if failed:
        return 1
    return 0 if passed else SKIP


if __name__ == "__main__":
    sys.exit(main())
