"""The store ``make run`` makes (conf/standalone.conf) stays small on disk; the defaults stay Apache's
production sizes."""

from __future__ import annotations

import os
from pathlib import Path

from ferrymq.sdk import BlockingProducer, BlockingPullConsumer, Message, PullStatus
from ferrymq.server.broker.service import store_config_for
from ferrymq.server.config import BrokerConfig
from ferrymq.server.store.config import MessageStoreConfig

from tests.broker.test_broker_e2e import _free_pair
from tests.broker.test_cli_broker import BROKER_UP, NAMESRV_UP, ROOT, start, stop

DEV_CONF = ROOT / "conf" / "standalone.conf"
LIMIT = 100 * 1000 * 1000  # bytes: what `du -sh` and `ls -l` show stays under 100 MB
#: keys the test sets itself: where the store lives and which ports it listens on
PLACED = ("storePathRootDir", "listenPort", "namesrvAddr", "namesrvListenPort", "kvConfigPath")


def disk_use(root: Path) -> tuple[int, int]:
    """(bytes in blocks, apparent bytes) of every file under ``root``, as ``du -s`` and ``du -s --apparent-size``."""
    blocks = apparent = 0
    for path in root.rglob("*"):
        if path.is_file():
            st = path.stat()
            blocks += st.st_blocks * 512
            apparent += st.st_size
    return blocks, apparent


def dev_conf(tmp_path: Path, port: int) -> Path:
    """conf/standalone.conf with only the store directory and the ports moved to this test's."""
    lines = [line for line in DEV_CONF.read_text().splitlines() if line.partition("=")[0].strip() not in PLACED]
    lines += [f"storePathRootDir={tmp_path / 'data'}", f"listenPort={port}", "namesrvListenPort=0",
              f"kvConfigPath={tmp_path / 'kvConfig.json'}"]
    conf = tmp_path / "standalone.conf"
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
