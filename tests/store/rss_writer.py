"""Subprocess for the RSS test: append 1 KiB messages and print, at each size mark, the resident memory
(KiB) of the process's own heap (RssAnon) and of mapped files (RssFile: the store's pages not yet released).

Usage: python -m tests.store.rss_writer ROOT MARK_MIB [MARK_MIB ...]
"""

from __future__ import annotations

import os
import sys

from ferrymq.server.store import MessageStore, MessageStoreConfig


def rss_kib() -> tuple[int, int]:
    fields = {}
    with open("/proc/self/status") as f:
        for line in f:
            key, _, value = line.partition(":")
            if key in ("RssAnon", "RssFile"):
                fields[key] = int(value.split()[0])
    if len(fields) != 2:
        raise RuntimeError("no RssAnon/RssFile in /proc/self/status")
    return fields["RssAnon"], fields["RssFile"]


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
        print(mark, *rss_kib(), flush=True)
    s.shutdown()


if __name__ == "__main__":
    main()
