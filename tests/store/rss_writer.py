"""Subprocess for the RSS test: append 1 KiB messages and print VmRSS (KiB) at each size mark.

Usage: python -m tests.store.rss_writer ROOT MARK_MIB [MARK_MIB ...]
"""

from __future__ import annotations

import os
import sys

from server.store import MessageStore, MessageStoreConfig


def rss_kib() -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise RuntimeError("no VmRSS in /proc/self/status")


def main() -> None:
    root, marks = sys.argv[1], [int(m) for m in sys.argv[2:]]
    s = MessageStore(MessageStoreConfig(
        storePathRootDir=root, mappedFileSizeCommitLog=64 << 20, mappedFileSizeConsumeQueue=20 * 100_000,
        maxHashSlotNum=100_000, maxIndexNum=400_000, flushIntervalCommitLog=100, flushIntervalConsumeQueue=100,
    ))
    s.start()
    body = os.urandom(1024)
    i = 0
    for mark in marks:
        while s.get_max_phy_offset() < mark << 20:
            s.put_message("R", i & 7, body, "TAGS\x01a\x02UNIQ_KEY\x01U%d\x02" % i)
            i += 1
        # run the flush tasks the periodic thread runs (fsync + page release) so timing cannot matter
        s._flush_commitlog_task()
        s._flush_logics_task()
        print(mark, rss_kib(), flush=True)
    s.shutdown()


if __name__ == "__main__":
    main()
