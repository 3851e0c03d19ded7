"""The fan-out index: the sessions a message may be for, by RocketMQ topic, and each topic's tag expression."""

from ferrymq.gateways.mqtt import topics
from ferrymq.gateways.mqtt.fanout import MAX_TAGS, FanOutIndex
from ferrymq.gateways.mqtt.packets import Subscription
from ferrymq.gateways.mqtt.session import Session
from hypothesis import given, settings
from hypothesis import strategies as st


def session(client_id: str, *filters: str) -> Session:
    s = Session(client_id)
    for f in filters:
        s.subscriptions[f] = Subscription(f, 1)
    return s


def indexed(*sessions: Session) -> FanOutIndex:
    index = FanOutIndex()
    for s in sessions:
        index.update(s)
    return index


def test_a_message_finds_the_sessions_of_its_exact_and_wildcard_filters_only():
    exact, plus, hash_, other, idle = (session("exact", "sensors/room1/temp"), session("plus", "sensors/+/temp"),
                                       session("hash", "sensors/#"), session("other", "commands/room1/temp"),
                                       session("idle"))
    index = indexed(exact, plus, hash_, other, idle)
    assert index.sessions_for("sensors", "sensors/room1/temp") == [exact, plus, hash_]
    assert index.sessions_for("sensors", "sensors/room1/hum") == [hash_]
    assert index.sessions_for("sensors", "sensors") == [hash_]  # '#' matches its parent level too
    assert index.sessions_for("commands", "commands/room1/temp") == [other]
    assert index.sessions_for("alerts", "alerts/x") == []
    assert len(index) == 4  # the session without filters is not indexed


def test_a_session_matching_through_several_filters_is_found_once():
    both = session("both", "sensors/room1/temp", "sensors/#", "sensors/+/temp")
    assert indexed(both).sessions_for("sensors", "sensors/room1/temp") == [both]


def test_shared_subscriptions_are_not_fanned_out():
    shared = session("shared", "$share/g/sensors/#")
    index = indexed(shared)
    assert index.sessions_for("sensors", "sensors/a") == []
    assert index.expressions() == {}


def test_an_update_follows_unsubscribes_and_the_end_of_a_session():
    a, b = session("a", "sensors/a", "sensors/+"), session("b", "sensors/a")
    index = indexed(a, b)
    del a.subscriptions["sensors/+"]
    index.update(a)
    assert index.sessions_for("sensors", "sensors/b") == []
    assert index.sessions_for("sensors", "sensors/a") == [a, b]
    index.update(b, current=False)  # ended, or replaced by a clean start under its client identifier
    assert index.sessions_for("sensors", "sensors/a") == [a]
    a.subscriptions.clear()
    index.update(a)
    assert index.sessions_for("sensors", "sensors/a") == [] and index.expressions() == {} and len(index) == 0


def test_each_topic_has_the_tag_expression_of_its_filters():
    a, b = session("a", "sensors/room1/temp", "commands/dev1"), session("b", "sensors/room2/temp", "commands/dev1")
    index = indexed(a, b)
    assert index.expressions() == {"sensors": "room1/temp || room2/temp", "commands": "dev1"}
    wild = session("w", "sensors/+/temp")
    index.update(wild)
    assert index.expressions()["sensors"] == "*"  # a wildcard needs every tag of the topic
    index.update(wild, current=False)
    assert index.expressions()["sensors"] == "room1/temp || room2/temp"
    index.update(a, current=False)
    assert index.expressions() == {"sensors": "room2/temp", "commands": "dev1"}  # b still holds dev1


def test_a_rebuild_indexes_what_the_sessions_hold_now():
    a, b = session("a", "sensors/#"), session("b", "sensors/x")
    index = indexed(a, b)
    a.subscriptions.clear()
    index.rebuild([a, b])
    assert index.sessions_for("sensors", "sensors/x") == [b]


_level = st.sampled_from(["a", "b", ""])
_names = st.lists(_level, min_size=0, max_size=3).map(lambda levels: "/".join(["t", *levels]))
_filters = st.lists(st.sampled_from(["a", "b", "", "+"]), min_size=0, max_size=3).flatmap(
    lambda levels: st.sampled_from(["/".join(["t", *levels]), "/".join(["t", *levels, "#"])]))


@settings(max_examples=200, deadline=None)
@given(st.lists(st.lists(_filters, max_size=3), min_size=1, max_size=6),
       st.lists(st.integers(0, 5), max_size=4), _names)
def test_the_index_finds_exactly_the_sessions_a_pass_over_all_of_them_finds(filter_sets, changed, name):
    sessions = [session(f"c{i}", *filters) for i, filters in enumerate(filter_sets)]
    index = indexed(*sessions)
    for i in changed:  # some sessions drop their first filter afterwards
        s = sessions[i % len(sessions)]
        if s.subscriptions:
            del s.subscriptions[next(iter(s.subscriptions))]
            index.update(s)
    expected = [s for s in sessions if any(topics.matches(f, name) for f in s.subscriptions)]
    assert sorted(index.sessions_for("t", name), key=sessions.index) == expected


def test_a_topic_with_more_tags_than_max_tags_is_subscribed_with_every_tag():
    fleet = [session(f"dev{i}", f"commands/dev{i}") for i in range(MAX_TAGS + 1)]
    index = indexed(*fleet[:MAX_TAGS])
    assert index.expressions()["commands"].count("||") == MAX_TAGS - 1
    index.update(fleet[-1])
    assert index.expressions() == {"commands": "*"}
    assert index.sessions_for("commands", "commands/dev3") == [fleet[3]]  # matching stays exact
    index.update(fleet[-1], current=False)
    assert index.expressions()["commands"] != "*"
