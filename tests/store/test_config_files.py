from __future__ import annotations

import os

from ferrymq.server.store.config_files import CONSUMER_OFFSETS, TOPICS, ConfigFile
from ferrymq.server.store.config import MessageStoreConfig


def test_atomic_save_with_backup(tmp_path):
    f = ConfigFile(str(tmp_path / "config"), TOPICS)
    assert f.load() is None
    f.save({"topicConfigTable": {"A": {"readQueueNums": 4}}})
    f.save({"topicConfigTable": {"B": {"readQueueNums": 8}}})
    assert f.load() == {"topicConfigTable": {"B": {"readQueueNums": 8}}}
    assert not os.path.exists(f.path + ".tmp")
    with open(f.path, "wb") as fh:  # a torn/corrupt main file falls back to the backup
        fh.write(b'{"topicConfigTable": {')
    assert f.load() == {"topicConfigTable": {"A": {"readQueueNums": 4}}}


def test_reads_apache_fastjson_bare_int_keys(tmp_path):
    d = tmp_path / "config"
    d.mkdir()
    (d / CONSUMER_OFFSETS).write_text('{"offsetTable":{"TopicTest@g1":{0:100,1:98}}}')
    data = ConfigFile(str(d), CONSUMER_OFFSETS).load()
    assert data["offsetTable"]["TopicTest@g1"]["0"] == 100


def test_store_config_from_broker_conf():
    c = MessageStoreConfig.from_properties({
        "storePathRootDir": "/data/rmq", "mapedFileSizeCommitLog": "1048576", "flushDiskType": "SYNC_FLUSH",
        "checkCRCOnRecover": "false", "brokerName": "ignored",
    })
    assert c.mappedFileSizeCommitLog == 1048576 and c.sync_flush and not c.checkCRCOnRecover
    assert c.storePathCommitLog == "/data/rmq/commitlog" and c.consume_queue_dir == "/data/rmq/consumequeue"
    assert MessageStoreConfig().mappedFileSizeCommitLog == 1 << 30
    assert MessageStoreConfig().delay_level_millis()[:3] == [1000, 5000, 10000]
