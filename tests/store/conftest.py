from __future__ import annotations

import os

import pytest

from ferrymq.server.store import MessageStore, MessageStoreConfig


def small_config(root, **overrides) -> MessageStoreConfig:
    """A store with tiny segments so tests cross segment boundaries quickly."""
    kw = dict(
        storePathRootDir=str(root),
        mappedFileSizeCommitLog=64 * 1024,
        mappedFileSizeConsumeQueue=20 * 50,
        maxHashSlotNum=64,
        maxIndexNum=256,
        flushIntervalCommitLog=50,
        flushIntervalConsumeQueue=100,
        cleanResourceInterval=60000,
        maxMessageSize=32 * 1024,
    )
    kw.update(overrides)
    return MessageStoreConfig(**kw)


def simulate_crash(store: MessageStore) -> None:
    """Stop a store as a killed process would: no final flush, no checkpoint, abort file left behind.

    (Data written through the mapping stays in the page cache, exactly as after SIGKILL.)"""
    store._stop_threads()
    store.commitlog.queue.close()
    for cq in store._all_cqs():
        cq.queue.close()
    store.index.close()
    os.close(store._lock_fd)
    store._lock_fd = -1


@pytest.fixture
def make_store(tmp_path):
    stores = []

    def make(root=None, **overrides) -> MessageStore:
        s = MessageStore(small_config(root or tmp_path / "store", **overrides))
        s.start()
        stores.append(s)
        return s

    yield make
    for s in stores:
        if s._lock_fd >= 0:
            s.shutdown()
