from ferrymq.server.broker.topics import TopicConfigManager, TopicDefaults
from ferrymq.wire.bodies import TopicConfig
from ferrymq.wire.codes import Perm


def test_system_topics_exist_with_apache_shapes():
    m = TopicConfigManager(TopicDefaults(brokerName="b1", brokerClusterName="C1"))
    tbw = m.get("TBW102")
    assert (tbw.read_queue_nums, tbw.perm) == (8, Perm.INHERIT | Perm.READ | Perm.WRITE)
    assert m.get("SCHEDULE_TOPIC_XXXX").write_queue_nums == 18
    assert m.get("b1").perm == 7 and m.get("b1").read_queue_nums == 1
    assert "C1" in m and "RMQ_SYS_TRANS_HALF_TOPIC" in m and "C1_REPLY_TOPIC" in m
    assert "TBW102" not in TopicConfigManager(TopicDefaults(autoCreateTopicEnable=False))


def test_auto_create_takes_min_of_client_and_template_queues_and_drops_inherit():
    changes = []
    m = TopicConfigManager(on_change=changes.append)
    before = m.data_version.counter
    config = m.create_in_send("NewTopic", "TBW102", 4)
    assert (config.read_queue_nums, config.write_queue_nums, config.perm) == (4, 4, 6)
    assert m.create_in_send("Wide", "TBW102", 64).write_queue_nums == 8
    assert [c.topic_name for c in changes] == ["NewTopic", "Wide"]
    assert m.data_version.counter == before + 2
    assert m.create_in_send("NewTopic", "TBW102", 2) is config  # existing topic wins


def test_auto_create_refused_without_template_or_inherit():
    m = TopicConfigManager()
    assert m.create_in_send("X", "NoSuchTemplate", 4) is None
    m.update(TopicConfig(topic_name="Plain", perm=6))
    assert m.create_in_send("Y", "Plain", 4) is None
    assert m.get("Y") is None


def test_persistence_round_trip():
    m = TopicConfigManager()
    m.update(TopicConfig(topic_name="T1", read_queue_nums=3, write_queue_nums=5, perm=4))
    obj = m.to_json_obj()
    n = TopicConfigManager()
    n.load_json_obj(obj)
    t1 = n.get("T1")
    assert (t1.read_queue_nums, t1.write_queue_nums, t1.perm) == (3, 5, 4)
    assert n.data_version.counter == m.data_version.counter
