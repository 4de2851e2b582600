#!/usr/bin/env python3
"""fs/watchMissing (§6.14): one-shot watches codex arms for a project's missing .git,
.agents/skills and AGENTS files; `fs/missingChanged {watchId}` when one appears (or an
ancestor on the way to it), or when the `present` path goes away. Runs against the
reference too."""
import os
import shutil
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import *  # noqa


def uri(p):
    return "file://" + p


def changed(s, watch_id, timeout=DEFAULT_TIMEOUT):
    n = s.wait_other(lambda m: m.get("method") == "fs/missingChanged", timeout)
    assert n["params"] == {"watchId": watch_id}, n
    return n


def no_change(s, seconds=0.5):
    got = [m for m in s.quiet(seconds) if m.get("method") == "fs/missingChanged"]
    assert not got, got


def test_capability_advertised(srv):
    s = srv.session()
    assert s.call("environment/info", {})["capabilities"]["fsWatchMissing"] is True
    s.close()


def test_fires_once_when_a_missing_path_appears(srv):
    s = srv.session()
    w = tempfile.mkdtemp(prefix="execbb-watch-")
    try:
        assert s.call("fs/watchMissing", {"watchId": 1, "missing": [uri(w + "/.git"),
                                                                      uri(w + "/AGENTS.md")],
                                           "present": None}) == {"watching": True}
        with open(w + "/unrelated", "w"):
            pass
        no_change(s)
        os.mkdir(w + "/.git")
        changed(s, 1)
        open(w + "/AGENTS.md", "w").close()
        no_change(s)  # one-shot
    finally:
        shutil.rmtree(w)
    s.close()


def test_deep_path_fires_on_first_missing_ancestor(srv):
    s = srv.session()
    w = tempfile.mkdtemp(prefix="execbb-watch-")
    try:
        assert s.call("fs/watchMissing", {"watchId": 5, "missing": [uri(w + "/a/b/c")],
                                           "present": None})["watching"] is True
        os.makedirs(w + "/a")
        changed(s, 5)
    finally:
        shutil.rmtree(w)
    s.close()


def test_present_path_going_away(srv):
    s = srv.session()
    w = tempfile.mkdtemp(prefix="execbb-watch-")
    try:
        os.mkdir(w + "/.git")
        assert s.call("fs/watchMissing", {"watchId": 2, "missing": [uri(w + "/x")],
                                           "present": uri(w + "/.git")})["watching"] is True
        os.rmdir(w + "/.git")
        changed(s, 2)
    finally:
        shutil.rmtree(w)
    s.close()


def test_not_watching(srv):
    """Nothing to watch, a view that is already stale, or a used id: watching false."""
    s = srv.session()
    w = tempfile.mkdtemp(prefix="execbb-watch-")
    try:
        open(w + "/e", "w").close()
        assert s.call("fs/watchMissing", {"watchId": 1, "missing": [], "present": None}) == \
            {"watching": False}
        assert s.call("fs/watchMissing", {"watchId": 2, "missing": [uri(w + "/e")],
                                           "present": None}) == {"watching": False}
        assert s.call("fs/watchMissing", {"watchId": 3, "missing": [uri(w + "/m")],
                                           "present": None}) == {"watching": True}
        os.mkdir(w + "/m")
        changed(s, 3)
        assert s.call("fs/watchMissing", {"watchId": 3, "missing": [uri(w + "/n")],
                                           "present": None}) == {"watching": False}
    finally:
        shutil.rmtree(w)
    s.close()


def test_errors(srv):
    s = srv.session()
    assert s.error("fs/watchMissing", {"watchId": "x", "missing": [], "present": None}) == \
        (-32602, 'invalid type: string "x", expected u64')
    assert s.error("fs/watchMissing", {"watchId": 3, "missing": ["rel"], "present": None}) \
        == (-32602, "invalid URI: relative URL without a base")
    assert s.error("fs/watchMissing", {"missing": []})[0] == -32602
    s.close()


@ours_only
def test_bounded(srv):
    s = srv.session()
    w = tempfile.mkdtemp(prefix="execbb-watch-")
    try:
        code, msg = s.error("fs/watchMissing", {"watchId": 1, "missing": [
            uri("%s/p%d" % (w, i)) for i in range(65)], "present": None})
        assert (code, msg) == (-32602, "fs/watchMissing watches at most 64 paths"), msg
        for i in range(64):
            assert s.call("fs/watchMissing", {"watchId": 100 + i, "missing": [
                uri("%s/q%d" % (w, i))], "present": None})["watching"] is True
        code, msg = s.error("fs/watchMissing", {"watchId": 999, "missing": [uri(w + "/z")],
                                                 "present": None})
        assert code == -32600 and "watch limit reached" in msg, msg
    finally:
        shutil.rmtree(w)
    s.close()
    # the watches die with the session (its TTL is not waited for here; the server
    # must simply not crash when the directory goes away under live watches)


if __name__ == "__main__":
    run_tests(globals())
