#!/usr/bin/env python3
"""WebSocket receive path (proto/ws_reader, §1.3): frames handed up in place and
fragmented messages gathered across reads must behave alike —
UTF-8 rules for text, fragments split anywhere (inside a multi-byte character, inside
a frame header across TCP segments), control frames between fragments, and large
payload strings (proto/json_load.c) decoded to the same bytes."""
import base64
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import *  # noqa


def test_fragmented_text_utf8_split_in_a_character(srv):
    ws = srv.connect()
    data = json.dumps({"id": 3, "method": "initialize",
                       "params": {"clientName": "caf\u00e9 \u2603 \U0001F600"}},
                      ensure_ascii=False).encode()
    cut = data.index("\u2603".encode()) + 1  # inside the 3-byte snowman
    ws.send_frame(OP_TEXT, data[:cut], fin=False)
    ws.ping(b"between")
    ws.send_frame(OP_CONT, data[cut:cut + 3], fin=False)
    ws.send_frame(OP_CONT, data[cut + 3:], fin=True)
    got = [ws.recv_message(auto_pong=False), ws.recv_message(auto_pong=False)]
    texts = [json.loads(p) for op, p in got if op == OP_TEXT]
    assert [p for op, p in got if op == OP_PONG] == [b"between"], got
    assert len(texts) == 1 and texts[0]["id"] == 3 and "sessionId" in texts[0]["result"], got
    ws.shutdown()


def test_fragmented_text_invalid_utf8_closes(srv):
    ws = srv.connect()
    ws.send_frame(OP_TEXT, b'{"id":1,"method":"', fin=False)
    ws.send_frame(OP_CONT, b'\xed\xa0\x80"}', fin=True)  # an encoded surrogate
    closed, got = ws.wait_closed(10)
    assert closed, "server kept the connection open after invalid UTF-8 in fragments"
    ws.shutdown()
    s = srv.session()
    assert s.call("environment/status") == {"status": "ready"}
    s.close()


def test_fragmented_binary_invalid_utf8_is_parse_error(srv):
    ws = srv.connect()
    ws.send_frame(OP_BINARY, b'{"id":1,"method":"', fin=False)
    ws.send_frame(OP_CONT, b'\xff"}', fin=True)
    op, payload = ws.recv_message()
    msg = json.loads(payload)
    assert msg["id"] == -1 and msg["error"]["code"] == -32600, msg
    ws.shutdown()


def test_frames_trickled_byte_by_byte(srv):
    ws = srv.connect()
    frame = ws.build_frame(OP_TEXT, json.dumps({"id": 4, "method": "initialize",
                                                "params": {"clientName": "slow"}}).encode())
    for i in range(len(frame)):
        ws.sock.sendall(frame[i:i + 1])
        if i < 16:
            time.sleep(0.01)  # sleep-ok: the stimulus, a byte a read
    op, payload = ws.recv_message()
    assert json.loads(payload)["id"] == 4, payload
    ws.shutdown()


def test_big_base64_payload_round_trip(srv):
    s = srv.session()
    raw = os.urandom(3 * 1024 * 1024 + 1)
    path = os.path.join(srv.workdir, "big.bin")
    # one frame and a fragmented message, each over the 16 KiB splice threshold
    s.call("fs/writeFile", {"path": "file://" + path,
                            "dataBase64": base64.b64encode(raw).decode()})
    with open(path, "rb") as f:
        assert f.read() == raw
    os.unlink(path)
    ws = srv.connect()
    ws.send_text(json.dumps({"id": 1, "method": "initialize", "params": {"clientName": "f"}}))
    ws.recv_message()
    ws.send_text(json.dumps({"method": "initialized", "params": {}}))
    ws.send_text(json.dumps({"id": 2, "method": "fs/writeFile", "params": {
        "path": "file://" + path, "dataBase64": base64.b64encode(raw).decode()}}), fragments=7)
    op, payload = ws.recv_message(timeout=60)
    assert json.loads(payload) == {"id": 2, "result": {}}, payload[:200]
    ws.shutdown()
    with open(path, "rb") as f:
        assert f.read() == raw
    got = s.call("fs/readFile", {"path": "file://" + path})
    assert base64.b64decode(got["dataBase64"]) == raw
    # bad base64 deep inside a big string still gets the exact error text
    bad = base64.b64encode(raw).decode()
    bad = bad[:100000] + "!" + bad[100001:]
    code, message = s.error("fs/writeFile", {"path": "file://" + path, "dataBase64": bad})
    assert code == -32600 and "Invalid symbol 33, offset 100000." in message, (code, message)
    s.close()


if __name__ == "__main__":
    run_tests(globals())
