"""Writer process for the SIGKILL crash test: SYNC_FLUSH puts, one ACK line per acknowledged message.

Usage: python -m tests.store.crash_writer ROOT ROUND ACKFILE
Prints ``RECOVERY <json>`` after start, then appends ``ACK <queue id> <queue offset> <phys> <size>
<sha256 of record>`` to ACKFILE (unbuffered, so a kill never blocks on a pipe) for every put whose flush
promise was met. Runs until killed.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import sys

from ferrymq.server.store import SYNC_FLUSH, MessageStore, MessageStoreConfig

QUEUES = 4


def config(root: str) -> MessageStoreConfig:
    return MessageStoreConfig(
        storePathRootDir=root, flushDiskType=SYNC_FLUSH, mappedFileSizeCommitLog=256 * 1024,
        mappedFileSizeConsumeQueue=20 * 500, maxHashSlotNum=512, maxIndexNum=4096,
        flushIntervalCommitLog=100, flushIntervalConsumeQueue=200, maxMessageSize=64 * 1024,
    )


def main() -> None:
    root, round_no, ack_path = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    store = MessageStore(config(root))
    store.start()
    out = sys.stdout
    out.write("RECOVERY " + json.dumps(store.recovery_report) + "\n")
    out.flush()
    ack_fd = os.open(ack_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    rnd = random.Random(round_no)
    i = 0
    while True:
        futures = []
        for _ in range(rnd.randint(1, 16)):
            body = f"{round_no}:{i}:".encode() + rnd.randbytes(rnd.randint(0, 3000))
            futures.append(store.put_message_future("Crash", i % QUEUES, body, {"KEYS": f"r{round_no}i{i}"},
                                                    born_timestamp=i))
            i += 1
        lines = []
        for fut in futures:
            r = fut.result()
            if not r.ok:
                continue
            raw = store.select_one_message_by_offset(r.commitlog_offset)
            qid = int.from_bytes(raw[12:16], "big")
            lines.append(f"ACK {qid} {r.queue_offset} {r.commitlog_offset} {r.wrote_bytes} "
                         f"{hashlib.sha256(raw).hexdigest()}\n")
        os.write(ack_fd, "".join(lines).encode())


if __name__ == "__main__":
    main()
