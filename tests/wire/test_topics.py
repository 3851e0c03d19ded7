import pytest

from ferrymq.wire import topics


@pytest.mark.parametrize("name", ["TopicTest", "%RETRY%g1", "a|b", "x-y_z9"])
def test_legal_topics(name):
    assert topics.validate_topic(name) is None


@pytest.mark.parametrize(
    "name, fragment",
    [
        ("", "blank"),
        ("   ", "blank"),
        ("bad topic", "illegal characters"),
        ("tópico", "illegal characters"),
        ("t" * 128, "longer than topic max length: 127"),
        ("%RETRY%" + "g" * 249, "longer than topic max length: 255"),
    ],
)
def test_illegal_topics_get_apaches_remark(name, fragment):
    assert fragment in topics.validate_topic(name)


def test_retry_topic_length_limit_is_255():
    assert topics.validate_topic("%RETRY%" + "g" * 248) is None


def test_groups_and_system_topics():
    assert topics.validate_group("g" * 120) is None
    assert "max length: 120" in topics.validate_group("g" * 121)
    assert topics.is_system_topic("TBW102") and topics.is_system_topic("rmq_sys_anything")
    assert not topics.is_system_topic("TopicTest")
    assert topics.retry_topic("g") == "%RETRY%g" and topics.dlq_topic("g") == "%DLQ%g"
