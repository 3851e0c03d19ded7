"""Subscription groups, the registration's perm rule and the store config the broker derives."""

from __future__ import annotations

from ferrymq.server.broker.registration import perm_limited, split_namesrv_addr
from ferrymq.server.broker.service import store_config_for
from ferrymq.server.broker.subscriptions import SubscriptionGroupManager
from ferrymq.server.config import BrokerConfig
from ferrymq.wire.bodies import SubscriptionGroupConfig, TopicConfig, TopicConfigSerializeWrapper


def test_groups_auto_create_with_defaults_and_round_trip(tmp_path):
    changes = []
    m = SubscriptionGroupManager(on_change=lambda: changes.append(1))
    g = m.find("orders")
    assert (g.retry_queue_nums, g.retry_max_times, g.consume_enable) == (1, 16, True)
    assert m.find("bad group!") is None and changes == [1]
    m.update(SubscriptionGroupConfig(group_name="x", retry_max_times=2))
    copy = SubscriptionGroupManager()
    copy.load_json_obj(m.to_json_obj())
    assert copy.get("x").retry_max_times == 2 and copy.get("orders") is not None
    assert SubscriptionGroupManager(auto_create=False).find("orders") is None
    assert SubscriptionGroupManager(auto_create=False).find("CID_RMQ_SYS_TRANS_X") is not None  # system groups


def test_registration_perm_follows_broker_permission():
    wrapper = TopicConfigSerializeWrapper(topic_config_table={"T": TopicConfig("T", 4, 4, 6)})
    assert perm_limited(wrapper, 6) is wrapper
    assert perm_limited(wrapper, 4).topic_config_table["T"].perm == 4
    assert split_namesrv_addr(" a:1; b:2 ;") == ["a:1", "b:2"]


def test_store_config_takes_broker_keys_and_store_only_keys(tmp_path):
    c = BrokerConfig(storePathRootDir=str(tmp_path), mappedFileSizeCommitLog=1 << 20, flushDiskType="SYNC_FLUSH",
                     listenPort=12345)
    s = store_config_for(c, {"flushIntervalCommitLog": "200"}, "10.0.0.1")
    assert s.mappedFileSizeCommitLog == 1 << 20 and s.sync_flush and s.flushIntervalCommitLog == 200
    assert s.storePathCommitLog == str(tmp_path / "commitlog") and s.storeHost == "10.0.0.1:12345"
