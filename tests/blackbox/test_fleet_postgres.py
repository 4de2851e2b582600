#!/usr/bin/env python3
"""`exec-server registry` on PostgreSQL with several nodes (issue 37). The test starts
its own throwaway cluster from Debian's postgresql package (initdb + pg_ctl as an
unprivileged user, a Unix socket in a temp dir; tests/remote/fleet_lib.PgCluster) and
gives each scenario a database of its own.

  two nodes, codex     stock codex 0.171 drives a turn (commands, exit code,
                       apply_patch on disk, nothing in clear at the rendezvous) with
                       the executor (ours, then stock `codex exec-server --remote`)
                       attached to node A and codex asking node B, which hands out
                       node A's URL (test_fleet_codex.run_turn)
  migrations           three nodes starting at once on an empty database: one schema
  database goes away   pg_ctl stop: /connect answers 503 database_unavailable, /readyz
                       503, established relays go on, nothing crashes; pg_ctl start:
                       served again without a restart
  a node slow to return  the same, but node A (holding the executor) is stopped
                       (SIGSTOP) when the database comes back, after an outage longer
                       than the dead time: node B still hands out A's URL (A was alive
                       when the database went away and gets three heartbeats after it
                       returns, like any node), never 409 environment_offline; once A
                       runs again the harness reaches the executor through it
  a node dies          SIGKILL of node A: once its heartbeat is stale node B says 409
                       environment_offline (never a dead node's URL); our executor,
                       whose rendezvous URL names a shared address (--environment-url,
                       here a proxy that now points at B), reattaches to B and
                       exec-client runs a command through it

Skipped (77) only when the postgresql package is not installed (or exec-server is
not built); the codex scenarios also need codex 0.171."""
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "remote"))
from harness import *  # noqa
import fake_cloud  # noqa: E402
import fleet_lib  # noqa: E402
import remote_testlib  # noqa: E402
from test_fleet_registry import data_frame, error_code, frame, recv  # noqa: E402
from test_fleet_registry import key, post  # noqa: E402

SERVER = remote_testlib.our_server()
PG = None
_db_seq = [0]


def database():
    """A fresh database of the cluster: its libpq URI."""
    _db_seq[0] += 1
    name = "fleet%d" % _db_seq[0]
    PG._run("createdb", "-h", PG.sock, "-U", "fleet", name)
    return PG.url.replace("/postgres?", "/%s?" % name)


def node(db, *args):
    return fleet_lib.Registry(SERVER, db, args=["--heartbeat-interval", "0.5"] + list(args),
                              wrapper=WRAPPER)


def needs_codex():
    if fleet_lib.codex_171() is None:
        raise TestSkip("codex 0.171 is not installed under ~/.cache/codex-ref-0.171")


@needs_own_server
def test_codex_two_nodes_our_executor(_):
    needs_codex()
    from test_fleet_codex import run_turn
    run_turn(stock_executor=False, database=database(), two_nodes=True)


@needs_own_server
def test_codex_two_nodes_stock_executor(_):
    needs_codex()
    from test_fleet_codex import run_turn
    run_turn(stock_executor=True, database=database(), two_nodes=True)


@needs_own_server
def test_migrations_run_once(_):
    db = database()
    nodes = []
    try:
        procs = [subprocess.Popen(WRAPPER + [SERVER, "registry", "--database", db],
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE)
                 for _ in range(3)]
        for p in procs:
            line = p.stdout.readline().decode()
            assert line.startswith("http://"), p.stderr.read().decode()
            nodes.append(p)
        name = db.split("?")[0].rsplit("/", 1)[1]
        r = subprocess.run(["psql", "-h", PG.sock, "-U", "fleet", "-d", name, "-Atc",
                            "SELECT count(*) FROM fleet_schema"], capture_output=True,
                           timeout=30)
        assert r.stdout.decode().strip() == "1", r
        st, doc, _ = post("http://" + line.strip().split("//", 1)[1],
                          "/cloud/environment/x/connect", {"harness_public_key": key()}, "x")
        assert st == 401, doc
    finally:
        for p in nodes:
            p.terminate()
            assert p.wait(20) == 0, p.stderr.read().decode()[-3000:]


def attach_played(reg, env):
    tok = reg.token(env, "executor")
    st, doc, _ = post(reg.url, "/cloud/environment/%s/register" % env,
                      {"security_profile": "noise_hybrid_ik_v1", "executor_public_key": key()},
                      tok)
    assert st == 200, doc
    status, _, ws = fake_cloud.ws_connect(doc["url"])
    assert status == 101
    return doc, ws


def attached_on_a(env_id):
    """Two nodes on one database, an executor attached to node A as env_id, and node B's
    /connect for it naming node A: (a, b, the executor's socket, a harness token, that
    /connect's answer)."""
    db = database()
    a = node(db, "--node-id", "node-a")
    b = node(db, "--node-id", "node-b")
    try:
        _, env_ws = attach_played(a, env_id)
        h_tok = a.token(env_id, "harness")
        a.wait_log(r"event=attach environment=%s " % env_id)
        st, c, _ = post(b.url, "/cloud/environment/%s/connect" % env_id,
                        {"harness_public_key": key()}, h_tok)
        assert st == 200 and str(a.port) in c["url"], c
    except BaseException:
        b.stop()
        a.stop()
        raise
    return a, b, env_ws, h_tok, c


def tear_down(a, b, socks):
    """The database back for the next test, the sockets and both nodes gone."""
    if not PG.running():
        PG.start()
    for s in socks:
        s.abort()
    b.stop()
    a.stop()


def one_event_per_line(n):
    """Every line of the node's log is one event, libpq's multi-line messages included
    (their newlines and tabs escaped), as grep, journald and Loki expect."""
    log = n.log()
    assert "event=database result=unavailable detail=" in log, log[-2000:]
    for line in log.splitlines():
        assert re.match(r"\d{4}-\d\d-\d\dT[\d:.]+Z (error|warn|notice|info|debug) ", line), (
            "a line that is not an event (a value's newline?): %r\n%s" % (line, log[-2000:]))


@needs_own_server
def test_database_goes_away_and_returns(_):
    a, b, env_ws, h_tok, c = attached_on_a("env-pg")
    socks = [env_ws]
    try:
        status, _, h = fake_cloud.ws_connect(c["url"])
        assert status == 101
        socks.append(h)
        h.send_binary(frame("s-1", "resume"))
        assert recv(env_ws) == (2, frame("s-1", "resume"))
        PG.stop()
        st, d, _ = post(b.url, "/cloud/environment/env-pg/connect",
                        {"harness_public_key": key()}, h_tok)
        assert st == 503 and error_code(d) == "database_unavailable", (st, d)
        # relaying needs no database
        h.send_binary(data_frame("s-1", b"while postgres is down"))
        assert recv(env_ws) == (2, data_frame("s-1", b"while postgres is down"))
        for n in (a, b):
            n.wait_log(r"event=database result=unavailable")
            assert n.proc.poll() is None
            one_event_per_line(n)
        assert fleet_lib.readyz(b.url) == 503, "/readyz said ready without a database"
        PG.start()

        def connected():
            st, d, _ = post(b.url, "/cloud/environment/env-pg/connect",
                            {"harness_public_key": key()}, h_tok)
            assert st in (200, 503), (st, d)
            return st == 200
        fleet_lib.poll_until(connected, 20, "/connect to work again")
        for n in (a, b):
            n.wait_log(r"event=database result=available")
        fleet_lib.poll_until(lambda: fleet_lib.readyz(b.url) == 200, 10, "/readyz 200 again")
    finally:
        tear_down(a, b, socks)


@needs_own_server
def test_node_slow_to_return_after_the_database(_):
    a, b, env_ws, h_tok, _ = attached_on_a("env-slow")
    socks = [env_ws]
    stopped = False
    try:
        down_at = time.monotonic()
        PG.stop()
        for n in (a, b):
            n.wait_log(r"event=database result=unavailable")
        # Every heartbeat is now older than the dead time (3 x 0.5 s) once the
        # database returns, and A is not there to write a new one at once (a node
        # the scheduler starves, under load, is the same).
        outage = down_at + 2.0 - time.monotonic()
        time.sleep(max(0.0, outage))  # sleep-ok: a stimulus, the outage's length
        os.kill(a.proc.pid, signal.SIGSTOP)
        stopped = True
        PG.start()

        def answered():
            st, d, _ = post(b.url, "/cloud/environment/env-slow/connect",
                            {"harness_public_key": key()}, h_tok)
            return None if st == 503 else (st, d)
        st, c = fleet_lib.poll_until(answered, 20, "node B to reach the database again")
        assert st == 200 and str(a.port) in c["url"], (st, c)
        os.kill(a.proc.pid, signal.SIGCONT)
        stopped = False
        a.wait_log(r"event=database result=available")

        def harness():
            status, _, h = fake_cloud.ws_connect(c["url"])
            assert status in (101, 503), status
            return h if status == 101 else None
        h = fleet_lib.poll_until(harness, 20, "node A to take the harness")
        socks.append(h)
        h.send_binary(frame("s-1", "resume"))
        assert recv(env_ws) == (2, frame("s-1", "resume"))
    finally:
        if stopped:
            os.kill(a.proc.pid, signal.SIGCONT)
        tear_down(a, b, socks)


@needs_own_server
def test_node_dies_and_the_executor_moves(_):
    client = remote_testlib.find_build_file("exec-client")
    if client is None:
        raise TestSkip("exec-client is not built")
    db = database()
    shared = fleet_lib.RecordingProxy()  # the fleet's shared name for executors
    a = node(db, "--node-id", "node-a", "--environment-url", shared.url)
    b = node(db, "--node-id", "node-b", "--environment-url", shared.url)
    shared.target = ("127.0.0.1", a.port)
    # Registered through the shared name too: /validate must reach a live node.
    ex = fleet_lib.Executor(SERVER, shared.url, "env-move", a.token("env-move", "executor"),
                            wrapper=WRAPPER)
    h_tok = a.token("env-move", "harness")
    try:
        a.wait_attached("env-move")
        a.kill()
        shared.cut()
        # B hands out no dead node's URL: offline until the executor is back

        def offline():
            st, d, _ = post(b.url, "/cloud/environment/env-move/connect",
                            {"harness_public_key": key()}, h_tok)
            assert st in (200, 409), (st, d)
            return st == 409 and error_code(d) == "environment_offline"
        fleet_lib.poll_until(offline, 20, "node A's heartbeat to go stale", every=0.2)
        shared.target = ("127.0.0.1", b.port)
        b.wait_attached("env-move", timeout=60)
        r = subprocess.run([client, "--remote", b.url, "--environment-id", "env-move",
                            "--token", h_tok, "run", "echo moved; exit 7"],
                           capture_output=True, timeout=60)
        assert r.returncode == 7 and r.stdout == b"moved\n", (r, b.log()[-2000:])
    finally:
        ex.stop()
        shared.close()
        b.stop()
        a.stop(check=False)


@needs_own_server
def test_password_out_of_argv(_):
    """FLEET.md's recipe: a role with a password (scram-sha-256 in pg_hba.conf) and its
    database; the node given the URL in EXEC_REGISTRY_DATABASE and the password in a
    PGPASSFILE serves, with nothing to warn about; without the file it is refused; with
    the password in --database it serves but warns, and no message shows the password."""
    pw = "pw-" + os.urandom(8).hex()
    PG._run("psql", "-h", PG.sock, "-U", "fleet", "-d", "postgres", "-qc",
            "CREATE ROLE registry LOGIN PASSWORD '%s'" % pw)
    PG._run("createdb", "-h", PG.sock, "-U", "fleet", "--owner", "registry", "fleetpw")
    hba = os.path.join(PG.data, "pg_hba.conf")
    text = open(hba).read()
    with open(hba, "w") as f:
        f.write("local fleetpw registry scram-sha-256\n" + text)
    PG._run("pg_ctl", "-D", PG.data, "reload")
    d = tempfile.mkdtemp(prefix="execbb-pgpass-")
    pgpass = os.path.join(d, "pgpass")
    with open(pgpass, "w") as f:
        f.write("*:*:fleetpw:registry:%s\n" % pw)
    os.chmod(pgpass, 0o600)
    url = "postgresql:///fleetpw?host=%s&user=registry" % PG.sock
    try:
        n = fleet_lib.Registry(SERVER, None, env={"EXEC_REGISTRY_DATABASE": url,
                                                  "PGPASSFILE": pgpass}, wrapper=WRAPPER)
        try:
            assert fleet_lib.readyz(n.url) == 200
            assert "warning" not in n.log() and pw not in n.log(), n.log()
        finally:
            n.stop()
        r = subprocess.run(WRAPPER + [SERVER, "registry", "token", "list"], capture_output=True,
                           timeout=60, env=dict(os.environ, EXEC_REGISTRY_DATABASE=url,
                                                PGPASSFILE=os.path.join(d, "none")))
        assert r.returncode == 1 and b"password" in r.stderr, r
        with_pw = url.replace("user=registry", "user=registry&password=" + pw)
        n = fleet_lib.Registry(SERVER, with_pw, env={"PGPASSFILE": os.path.join(d, "none")},
                               wrapper=WRAPPER)
        try:
            assert fleet_lib.readyz(n.url) == 200
            assert "warning: the --database URL holds a password" in n.log(), n.log()
            assert pw not in n.log(), n.log()
        finally:
            n.stop()
        r = subprocess.run(WRAPPER + [SERVER, "registry", "--database", with_pw.replace(
            PG.sock, PG.sock + "-gone"), "token", "list"], capture_output=True, timeout=60)
        assert r.returncode == 1 and b"password=***" in r.stderr and pw.encode() not in (
            r.stderr), r
    finally:
        shutil.rmtree(d, ignore_errors=True)


if __name__ == "__main__":
    why = remote_testlib.skip_reason(SERVER, "registry", "registry")
    if why is None and fleet_lib.PgCluster.bindir() is None:
        why = "Debian's postgresql package is not installed (initdb, pg_ctl)"
    if why:
        print("SKIP: " + why)
        sys.exit(SKIP)
    PG = fleet_lib.PgCluster()
    try:
        run_tests(globals(), per_test_timeout=400)
    finally:
        PG.destroy()
