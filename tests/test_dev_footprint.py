"""The store ``make run`` makes (conf/standalone.conf) stays small on disk; the defaults stay Apache's
production sizes."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from ferrymq.sdk import BlockingProducer, BlockingPullConsumer, Message, PullStatus
from ferrymq.server.broker.service import store_config_for
from ferrymq.server.config import BrokerConfig
from ferrymq.server.store.config import MessageStoreConfig

from tests.broker.test_broker_e2e import _free_pair
from tests.broker.test_cli_broker import (
    BROKER_UP,
    FERRYMQ,
    NAMESRV_UP,
    ROOT,
    start,
    stop,
)

DEV_CONF = ROOT / "conf" / "standalone.conf"
LIMIT = 100 * 1000 * 1000  # bytes: what `du -sh` and `ls -l` show stays under 100 MB
#: keys the test sets itself: where the store lives and which ports it listens on
PLACED = ("storePathRootDir", "listenPort", "namesrvAddr", "namesrvListenPort", "bindAddress", "kvConfigPath",
          "configStorePath")
#: the keys conf/standalone.conf sets for a development store
DEV_KEYS = ("mappedFileSizeCommitLog", "mappedFileSizeConsumeQueue", "maxHashSlotNum", "maxIndexNum",
            "warmMapedFileEnable")


def disk_use(root: Path) -> tuple[int, int]:
    """(bytes in blocks, apparent bytes) of every file under ``root``, as ``du -s`` and ``du -s --apparent-size``."""
    blocks = apparent = 0
    for path in root.rglob("*"):
        if path.is_file():
            st = path.stat()
            blocks += st.st_blocks * 512
            apparent += st.st_size
    return blocks, apparent


def dev_conf(tmp_path: Path, port: int, *, production: bool = False) -> Path:
    """conf/standalone.conf with only the store directory and the ports moved to this test's;
    ``production``: without its development store keys, as docs/operations.md says."""
    drop = PLACED + DEV_KEYS if production else PLACED
    lines = [line for line in DEV_CONF.read_text().splitlines() if line.partition("=")[0].strip() not in drop]
    lines += [f"storePathRootDir={tmp_path / 'data'}", f"listenPort={port}", "namesrvListenPort=0",
              "bindAddress=127.0.0.1", f"kvConfigPath={tmp_path / 'kvConfig.json'}",
              f"configStorePath={tmp_path / 'namesrv.properties'}"]
    conf = tmp_path / ("production.conf" if production else "standalone.conf")
    conf.write_text("\n".join(lines) + "\n")
    return conf


def test_make_run_store_holds_a_message_in_under_100_mb(tmp_path):
    proc, (ns_port, _broker_port), _ = start(["standalone", "-c", str(dev_conf(tmp_path, _free_pair()))],
                                             NAMESRV_UP, BROKER_UP)
    namesrv = f"127.0.0.1:{ns_port}"
    try:
        with BlockingProducer("footprint_producer", namesrv) as producer:
            sent = producer.send(Message("FootprintTopic", b"one message"))
        with BlockingPullConsumer("footprint_puller", namesrv) as consumer:
            result = consumer.pull(sent.message_queue, "*", 0, 32, block=True)
    finally:
        stop(proc)
    assert result.status is PullStatus.FOUND
    assert [m.body for m in result.messages] == [b"one message"]
    store = tmp_path / "data"
    assert len(os.listdir(store / "commitlog")) == 2  # the segment written and the next one, made ahead
    blocks, apparent = disk_use(store)
    assert blocks < LIMIT and apparent < LIMIT, f"{blocks} bytes in blocks, {apparent} bytes apparent"


def test_without_the_dev_keys_the_store_has_apache_production_sizes():
    """Benchmarks and production brokers configure none of these keys: they get Apache's sizes, and
    segments written ahead of the writer."""
    for store in (MessageStoreConfig(), store_config_for(BrokerConfig(), {})):
        assert store.mappedFileSizeCommitLog == 1 << 30
        assert store.mappedFileSizeConsumeQueue == 300000 * 20
        assert (store.maxHashSlotNum, store.maxIndexNum) == (5000000, 5000000 * 4)
        assert store.warmMapedFileEnable is True


def test_a_development_store_started_with_production_sizes_is_refused_in_one_line(tmp_path):
    """A store keeps the sizes it was created with: ./data made by `make run` and then started with the
    production sizes names the key to set instead of failing with a traceback."""
    port = _free_pair()
    proc, (ns_port, _broker_port), _ = start(["standalone", "-c", str(dev_conf(tmp_path, port))],
                                             NAMESRV_UP, BROKER_UP)
    try:
        with BlockingProducer("footprint_producer", f"127.0.0.1:{ns_port}") as producer:
            producer.send(Message("FootprintTopic", b"one message"))
    finally:
        stop(proc)
    result = subprocess.run([*FERRYMQ, "standalone", "-c", str(dev_conf(tmp_path, port, production=True))],
                            cwd=ROOT, capture_output=True, text=True, timeout=60, check=False)
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr
    last = result.stderr.splitlines()[-1]
    assert last.startswith("ferrymq standalone: segment ") and str(tmp_path / "data" / "commitlog") in last
    assert f"is {32 << 20} bytes but the configured segment size is {1 << 30}" in last
    assert "mappedFileSize*" in last and "storePathRootDir" in last
