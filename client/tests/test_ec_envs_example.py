#!/usr/bin/env python3
"""The environments example and exec-client --environment, end to end.

One environments.toml in a scratch CODEX_HOME names four environments: `ws` (our
exec-server on ws://), `stdio` (a program: exec-server --listen stdio, with env and a
relative cwd), `remote` (our exec-server registered at the local registry + rendezvous
double, tests/remote/fake_cloud.py, with auth_bearer_token) and `broken` (a port
nobody listens on). Each executor has its own MARK in its environment and its own
working directory, so the output proves which one answered.
  - client/examples/ec_envs runs `sh -c 'echo $MARK'` in each: three answers, the
    broken one reported failed with its reason, exit status 1; without `broken`, 0.
  - exec-client --environment NAME run -- pwd reaches each (CODEX_HOME's file, and
    --environments FILE); unknown and `local` names are usage errors (2), the broken
    one a connection error (255).
Every wait is bounded. Exit 77 when the binaries are not built."""
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "tests", "remote"))
import fake_cloud  # noqa: E402

SERVER = os.environ.get("EXEC_SERVER")
EXAMPLE = os.environ.get("EC_ENVS_EXAMPLE")
CLIENT = os.environ.get("EXEC_CLIENT")
TOKEN = "tok-" + os.urandom(6).hex()
ENV_ID = "env-example"


def start(argv, cwd, mark, extra=None, first_line=False):
    env = dict(os.environ, MARK=mark, **(extra or {}))
    p = subprocess.Popen(argv, cwd=cwd, env=env, stdin=subprocess.DEVNULL,
                         stdout=subprocess.PIPE if first_line else subprocess.DEVNULL,
                         start_new_session=True)
    line = None
    if first_line:
        import select
        r, _, _ = select.select([p.stdout], [], [], 30)
        assert r, "%s printed nothing" % argv[0]
        line = p.stdout.readline().decode().strip()
    return p, line


def stop(p):
    if p.poll() is None:
        os.killpg(p.pid, signal.SIGTERM)
        try:
            p.wait(10)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait(10)


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def main():
    for what, path in (("EXEC_SERVER", SERVER), ("EC_ENVS_EXAMPLE", EXAMPLE),
                       ("EXEC_CLIENT", CLIENT)):
        if not path or not os.access(path, os.X_OK):
            print("SKIP: %s is not built" % what)
            return 77
    home = tempfile.mkdtemp(prefix="ec-envs-example-")
    procs = []
    cloud = None
    try:
        for d in ("ws-dir", "stdio-dir", "remote-dir"):
            os.mkdir(os.path.join(home, d))
        ws, url = start([SERVER, "--listen", "ws://127.0.0.1:0"], os.path.join(home, "ws-dir"),
                        "ws", {"HOME": os.path.join(home, "ws-dir")}, first_line=True)
        procs.append(ws)
        cloud = fake_cloud.FakeCloud(token=TOKEN)
        remote, _ = start([SERVER, "--remote", cloud.base_url, "--environment-id", ENV_ID],
                          os.path.join(home, "remote-dir"), "remote",
                          {"CODEX_API_KEY": TOKEN, "HOME": os.path.join(home, "remote-dir")})
        procs.append(remote)
        cloud.wait_for(lambda c: c.environment_connected(ENV_ID), 30,
                       "the executor to reach the rendezvous")
        toml = (
            'default = "ws"\n'
            '[[environments]]\nid = "ws"\nurl = "%s"\n\n'
            '[[environments]]\nid = "stdio"\nprogram = "%s"\nargs = ["--listen", "stdio"]\n'
            'env = { MARK = "stdio", HOME = "%s" }\ncwd = "stdio-dir"\n'
            'initialize_timeout_sec = 20\n\n'
            '[[environments]]\nid = "remote"\nremote = "%s"\nenvironment_id = "%s"\n'
            'auth_bearer_token = "%s"\nconnect_timeout_sec = 20\n'
            % (url, SERVER, os.path.join(home, "stdio-dir"), cloud.base_url, ENV_ID, TOKEN))
        good = os.path.join(home, "good.toml")
        with open(good, "w") as f:
            f.write(toml)
        broken = 'ws://127.0.0.1:%d' % free_port()
        with open(os.path.join(home, "environments.toml"), "w") as f:
            f.write(toml + '\n[[environments]]\nid = "broken"\nurl = "%s"\n'
                    'connect_timeout_sec = 5\n' % broken)
        env = dict(os.environ, CODEX_HOME=home)
        env.pop("EXEC_SERVER_URL", None)

        # the example: one command in each environment
        r = subprocess.run([EXAMPLE, os.path.join(home, "environments.toml"), "sh", "-c",
                            "echo $MARK"], capture_output=True, timeout=120, env=env)
        lines = r.stdout.decode().splitlines()
        print("example:", lines, r.stderr.decode().strip())
        assert lines[:3] == ["ws: ws", "stdio: stdio", "remote: remote"], lines
        assert len(lines) == 4 and lines[3].startswith("broken: failed: "), lines
        assert "cannot connect to 127.0.0.1" in lines[3], lines[3]
        assert r.returncode == 1, r.returncode
        r = subprocess.run([EXAMPLE, good, "true"], capture_output=True, timeout=120, env=env)
        assert r.returncode == 0 and r.stdout.decode().splitlines() == [
            "ws: ", "stdio: ", "remote: "], (r.returncode, r.stdout)

        # exec-client --environment NAME, from CODEX_HOME's file or --environments FILE;
        # `run` starts in the remote home, as ssh does, and each server has its own
        for name, extra in (("ws", []), ("stdio", []), ("remote", ["--environments", good])):
            r = subprocess.run([CLIENT] + extra + ["--environment", name, "run", "--", "pwd"],
                               capture_output=True, timeout=120, env=env)
            out = r.stdout.decode().strip()
            print("exec-client --environment %s: %r %s" % (name, out, r.stderr.decode().strip()))
            assert r.returncode == 0 and out == os.path.realpath(
                os.path.join(home, name + "-dir")), (name, r.returncode, out)
        r = subprocess.run([CLIENT, "--environment", "stdio", "run", "--", "sh", "-c", "exit 5"],
                           capture_output=True, timeout=120, env=env)
        assert r.returncode == 5, r.returncode
        r = subprocess.run([CLIENT, "--environment", "broken", "run", "--", "true"],
                           capture_output=True, timeout=60, env=env)
        assert r.returncode == 255 and b"cannot reach server at " + broken.encode() in r.stderr, \
            (r.returncode, r.stderr)
        r = subprocess.run([CLIENT, "--environment", "nope", "run", "--", "true"],
                           capture_output=True, timeout=60, env=env)
        assert r.returncode == 2 and b"no environment `nope`" in r.stderr, r.stderr
        assert b"(it has: ws, stdio, remote, broken)" in r.stderr, r.stderr
        r = subprocess.run([CLIENT, "--environment", "local", "run", "--", "true"],
                           capture_output=True, timeout=60, env=env)
        assert r.returncode == 2 and b"in-process executor" in r.stderr, r.stderr
        r = subprocess.run([CLIENT, "--environment", "ws", "--url", url, "run", "--", "true"],
                           capture_output=True, timeout=60, env=env)
        assert r.returncode == 2 and b"--environment excludes" in r.stderr, r.stderr
        bad = os.path.join(home, "bad.toml")
        with open(bad, "w") as f:
            f.write('[[environments]]\nid = "x"\nurl = "http://h"\n')
        r = subprocess.run([CLIENT, "--environments", bad, "--environment", "x", "run", "--",
                            "true"], capture_output=True, timeout=60, env=env)
        assert r.returncode == 2 and b"must use ws:// or wss://" in r.stderr, r.stderr
        print("ok")
        return 0
    finally:
        for p in procs:
            stop(p)
        if cloud:
            cloud.stop()
        shutil.rmtree(home, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
