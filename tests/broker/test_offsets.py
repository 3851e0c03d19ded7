from ferrymq.server.broker.offsets import ConsumerOffsetManager


def test_commit_query_and_unknown_is_minus_one():
    m = ConsumerOffsetManager()
    assert m.query("g", "T", 0) == -1
    m.commit("g", "T", 0, 42)
    m.commit("g", "T", 1, 7)
    assert m.query("g", "T", 0) == 42
    assert m.query("g2", "T", 0) == -1
    assert m.topics_of_group("g") == {"T"}
    assert m.groups_of_topic("T") == {"g"}


def test_persistence_round_trip_and_removal():
    m = ConsumerOffsetManager()
    m.commit("g", "T", 3, 9)
    m.commit("g", "%RETRY%g", 0, 1)
    m.commit("h", "T", 0, 5)
    obj = m.to_json_obj()
    assert obj["offsetTable"]["T@g"] == {"3": 9}
    n = ConsumerOffsetManager()
    n.load_json_obj(obj)
    assert n.query("g", "T", 3) == 9
    n.remove_group("g")
    assert n.query("g", "T", 3) == -1 and n.query("h", "T", 0) == 5
    n.remove_topics(["T"])
    assert n.query("h", "T", 0) == -1


def test_clone_copies_offsets_to_another_group():
    m = ConsumerOffsetManager()
    m.commit("src", "T", 0, 11)
    m.clone("src", "dst", "T")
    assert m.query("dst", "T", 0) == 11
