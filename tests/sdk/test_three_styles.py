"""Each scenario in the three styles of the SDK (Deferred, blocking, asyncio) against an in-process
broker: they share one client core, so they must give the same answers."""

from __future__ import annotations

import pytest
from ferrymq.sdk import LocalTransactionState, Message, PullStatus, SendStatus
from ferrymq.wire.message import MessageConst

from tests.sdk.styles import STYLES


@pytest.fixture(params=sorted(STYLES))
def style(request, cluster):
    return STYLES[request.param](cluster.namesrv_addr)


def group_of(topic: str) -> str:
    return f"g_{topic}"


def test_send_answers_with_the_stored_position(style, topic, cluster):
    result = style.send(group_of(topic), Message(topic, b"hello", tags="TagA", keys="k1"))
    assert result.status is SendStatus.SEND_OK
    assert (result.message_queue.topic, result.message_queue.broker_name) == (topic, "broker-sdk")
    assert result.queue_offset == 0 and result.msg_id and result.offset_msg_id
    again = style.send(group_of(topic), Message(topic, b"again"))
    assert again.queue_offset == 1 and again.msg_id != result.msg_id


def test_push_consume_with_a_tag_expression(style, topic):
    # the unwanted tags are stored first: a filter that let them through would deliver them first
    msgs = [Message(topic, b"b1", tags="TagB"), Message(topic, b"none"), Message(topic, b"a1", tags="TagA"),
            Message(topic, b"c1", tags="TagC"), Message(topic, b"b2", tags="TagB"), Message(topic, b"a2", tags="TagA")]
    got = style.push_consume(group_of(topic), topic, "TagA || TagC", msgs, until=3)
    assert sorted(m.body for m in got) == [b"a1", b"a2", b"c1"]
    assert {m.tags for m in got} == {"TagA", "TagC"} and {m.topic for m in got} == {topic}


def test_pull_from_a_queue_and_commit_the_offset(style, topic):
    for body in (b"p0", b"p1", b"p2"):
        style.send(group_of(topic), Message(topic, body))
    result, committed = style.pull_and_commit(group_of(topic), topic)
    assert result.status is PullStatus.FOUND
    assert [m.body for m in result.messages] == [b"p0", b"p1", b"p2"]
    assert [m.queue_offset for m in result.messages] == [0, 1, 2]
    assert result.next_begin_offset == committed == 3


def test_transactional_send_committed_by_the_local_transaction(style, topic):
    executed = []

    def execute(msg, arg):
        executed.append((msg.body, msg.properties.get(MessageConst.TRANSACTION_PREPARED)))
        return LocalTransactionState.COMMIT_MESSAGE

    result, state = style.transact(group_of(topic), Message(topic, b"order-1", tags="Tx"), execute)
    assert result.status is SendStatus.SEND_OK and result.transaction_id
    assert state is LocalTransactionState.COMMIT_MESSAGE
    assert executed == [(b"order-1", "true")]
    # only the committed message reaches the topic (the half message waits in the broker's half topic)
    pulled, _ = style.pull_and_commit(group_of(topic), topic)
    assert [(m.body, m.tags) for m in pulled.messages] == [(b"order-1", "Tx")]
