"""Crash safety: SIGKILL a SYNC_FLUSH writer at random moments, 20 rounds; every acknowledged message
must come back byte-identical, consume queues must agree with the commit log, nothing duplicated.
Some rounds also append garbage after the data (a torn write) before the restart."""

from __future__ import annotations

import hashlib
import json
import os
import random
import signal
import subprocess
import sys
import time

import pytest

from ferrymq.server.store import GetMessageStatus as G
from ferrymq.server.store import MessageStore
from ferrymq.wire.message import decode_records, peek_record

from .crash_writer import QUEUES, config

ROUNDS = 20
ROOT_DIR = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def run_round(root: str, round_no: int, rnd: random.Random) -> tuple[dict, list[str]]:
    ack_path = f"{root}.acks{round_no}"
    err_path = f"{root}.stderr{round_no}"
    with open(err_path, "w") as err:
        proc = subprocess.Popen(
            [sys.executable, "-m", "tests.store.crash_writer", root, str(round_no), ack_path],
            stdout=subprocess.PIPE, stderr=err, cwd=ROOT_DIR, text=True,
        )
    first = proc.stdout.readline()
    assert first.startswith("RECOVERY "), first
    report = json.loads(first[len("RECOVERY "):])
    with open(err_path) as f:
        report["log"] = f.read()
    time.sleep(rnd.uniform(0.05, 0.5))
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    proc.stdout.close()
    with open(ack_path) as f:
        rest = f.read()
    # the last line may be cut mid-write: only whole lines count as acknowledged
    lines = [ln for ln in rest.split("\n")[:-1] if ln.startswith("ACK ") and len(ln.split()) == 6]
    return report, lines


def append_garbage(root: str, rnd: random.Random) -> None:
    """Write random bytes just after the last valid byte of the newest non-empty segment."""
    cl = os.path.join(root, "commitlog")
    for name in sorted(os.listdir(cl), reverse=True):
        path = os.path.join(cl, name)
        with open(path, "r+b") as f:
            data = f.read()
        end = len(data.rstrip(b"\0"))
        if end == 0:
            continue
        if end + 64 > len(data):
            return
        with open(path, "r+b") as f:
            f.seek(end)
            f.write(rnd.randbytes(rnd.randint(8, 64)))
        return


@pytest.mark.timeout(240)
def test_sigkill_rounds(tmp_path):
    root = str(tmp_path / "crash")
    rnd = random.Random(1234)
    acked: dict[tuple[int, int], tuple[int, int, str]] = {}
    reports = []
    for round_no in range(ROUNDS):
        if round_no % 4 == 3:
            append_garbage(root, rnd)
        report, lines = run_round(root, round_no, rnd)
        reports.append(report)
        for ln in lines:
            _, qid, qoff, phys, size, digest = ln.split()
            key = (int(qid), int(qoff))
            assert key not in acked or acked[key][0] == int(phys), f"queue offset {key} acknowledged twice"
            acked[key] = (int(phys), int(size), digest)
    assert len(acked) > 100, "the writer acknowledged too little to prove anything"
    assert sum(not r["clean"] for r in reports[1:]) == ROUNDS - 1  # every restart was a crash recovery
    garbage_rounds = [reports[i] for i in range(3, ROUNDS, 4)]
    torn = [r for r in garbage_rounds if r["stop_reason"] != "end of data"]
    assert torn, garbage_rounds
    for r in torn:  # the truncation is logged with where and why
        assert f"valid data ends at {r['end']} ({r['stop_reason']})" in r["log"], r["log"]

    store = MessageStore(config(root))
    store.start()
    try:
        # every acknowledged message is there, byte-identical, where the ack said
        for (qid, qoff), (phys, size, digest) in acked.items():
            raw = store.select_one_message_by_offset(phys)
            assert raw is not None, f"acknowledged message at {phys} lost"
            assert hashlib.sha256(raw).hexdigest() == digest
            assert store.get_commitlog_offset_in_queue("Crash", qid, qoff) == phys
            # and its key finds it: the index (not fsynced while written, messageIndexSafe=false)
            # came back from the page cache or was rebuilt by recovery
            key = decode_records(raw)[0].properties["KEYS"]
            found = store.query_message("Crash", key, 4, 0, 2**62)
            assert phys in found.commitlog_offsets, f"key {key} of the message at {phys} not in the index"
        # consume queues agree with the commit log, and nothing appears twice
        seen_ids = set()
        for qid in range(QUEUES):
            offset = 0
            while True:
                g = store.get_message("g", "Crash", qid, offset, 32)
                if g.status is not G.FOUND:
                    assert g.status is G.OFFSET_OVERFLOW_ONE
                    break
                for qo, view in zip(g.queue_offsets, g.messages):
                    info = peek_record(view)
                    assert (info.topic, info.queue_id, info.queue_offset) == ("Crash", qid, qo)
                for m in decode_records(g.body()):
                    msg_id = m.body.split(b":")[:2]
                    assert tuple(msg_id) not in seen_ids, f"duplicate message {msg_id}"
                    seen_ids.add(tuple(msg_id))
                offset = g.next_begin_offset
        assert len(seen_ids) >= len(acked)
    finally:
        store.shutdown()
