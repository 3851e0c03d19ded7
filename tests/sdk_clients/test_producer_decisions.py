"""Producer decisions against scripted servers: route fallback, retries, what goes on the wire."""

from __future__ import annotations

import zlib

import pytest

from ferrymq.sdk.blocking_clients import BlockingProducer
from ferrymq.sdk.client_config import ClientConfig
from ferrymq.sdk.client_instance import MQClientError
from ferrymq.sdk.errors import MQResponseError
from ferrymq.sdk.message import Message, SendStatus
from ferrymq.sdk.producer import RETRY_CODES, select_by_hash, should_retry
from ferrymq.wire.bodies import MessageQueue
from ferrymq.remoting import RemotingConnectError, RemotingTimeoutError
from ferrymq.wire.codes import RequestCode, ResponseCode
from ferrymq.wire.requests import decode_request_header
from ferrymq.wire.message import MessageSysFlag, decode_batch, decode_properties

from .fake_cluster import FakeBroker, FakeNamesrv


@pytest.fixture
def cluster():
    ns, a, b = FakeNamesrv(), FakeBroker("broker-a"), FakeBroker("broker-b")
    yield ns, a, b
    for s in (ns, a, b):
        s.stop()


@pytest.fixture
def make_producer(cluster):
    made = []

    def make(group="pg", **kwargs):
        p = BlockingProducer(group, config=ClientConfig(cluster[0].addr), **kwargs)
        p.start()
        made.append(p)
        return p

    yield make
    for p in made:
        p.shutdown()


@pytest.mark.parametrize("code", sorted(RETRY_CODES))
def test_retried_codes(code):
    assert should_retry(MQResponseError("SEND_MESSAGE_V2", "x", code, "r"))


@pytest.mark.parametrize("code", [ResponseCode.MESSAGE_ILLEGAL, ResponseCode.INVALID_PARAMETER,
                                  ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST, ResponseCode.REQUEST_CODE_NOT_SUPPORTED])
def test_codes_that_fail_at_once(code):
    assert not should_retry(MQResponseError("SEND_MESSAGE_V2", "x", code, "r"))


def test_transport_failures_are_retried():
    assert should_retry(RemotingTimeoutError("x", 310, 1, 3.0))
    assert should_retry(RemotingConnectError("x", "refused"))
    assert not should_retry(ValueError("bug"))


def test_send_v2_header_uniq_key_and_unregister(cluster, make_producer):
    ns, a, _ = cluster
    ns.set_route("T", [a])
    p = make_producer()
    r = p.send(Message("T", b"hello", tags="TagA", keys=["k1", "k2"]))
    (req,) = a.of(RequestCode.SEND_MESSAGE_V2)
    assert set(req.ext_fields) >= set("abcdefgh"), f"one-letter V2 keys: {req.ext_fields}"
    header = decode_request_header(req)
    props = decode_properties(header.properties)
    assert props["TAGS"] == "TagA" and props["KEYS"] == "k1 k2" and props["WAIT"] == "true"
    assert header.producer_group == "pg" and header.default_topic == "TBW102" and header.broker_name == "broker-a"
    assert r.status == SendStatus.SEND_OK and r.msg_id == props["UNIQ_KEY"] and len(r.msg_id) == 32
    assert r.offset_msg_id == "7F00000100002A9F0000000000000001"
    assert r.message_queue.broker_name == "broker-a" and r.message_queue.queue_id == header.queue_id
    p.shutdown()
    (unreg,) = a.wait_for(RequestCode.UNREGISTER_CLIENT)
    assert unreg.ext("producerGroup") == "pg" and "@" in unreg.ext("clientID")


def test_unknown_topic_goes_through_the_tbw102_template(cluster, make_producer):
    ns, a, _ = cluster
    ns.set_route("TBW102", [a], queues=8, perm=7)
    p = make_producer()
    assert p.send(Message("Brand_New", b"x")).status == SendStatus.SEND_OK
    queue_ids = set()
    for _ in range(8):
        p.send(Message("Brand_New", b"x"))
    for req in a.of(RequestCode.SEND_MESSAGE_V2):
        h = decode_request_header(req)
        assert h.topic == "Brand_New" and h.default_topic_queue_nums == 4
        queue_ids.add(h.queue_id)
    assert queue_ids == {0, 1, 2, 3}, "at most defaultTopicQueueNums (4) queues of the template"


def test_an_orderly_send_goes_to_the_queue_its_selector_picks_and_nowhere_else(cluster, make_producer):
    ns, a, b = cluster
    ns.set_route("Ordered", [a, b], queues=2)
    p = make_producer()
    sent = [p.send_orderly(Message("Ordered", b"x"), select_by_hash, order).message_queue for order in (3, 0, 3)]
    assert [(mq.broker_name, mq.queue_id) for mq in sent] == [("broker-b", 1), ("broker-a", 0), ("broker-b", 1)]
    assert [decode_request_header(req).queue_id for req in b.of(RequestCode.SEND_MESSAGE_V2)] == [1, 1]
    with pytest.raises(MQClientError, match="not a write queue of Ordered"):
        p.send_orderly(Message("Ordered", b"x"), lambda queues, msg, arg: MessageQueue("Ordered", "broker-c", 0))
    with pytest.raises(MQClientError, match="body is empty"):
        p.send_orderly(Message("Ordered", b""), select_by_hash, 3)
    assert len(a.of(RequestCode.SEND_MESSAGE_V2)) + len(b.of(RequestCode.SEND_MESSAGE_V2)) == 3


def test_no_route_and_no_template_is_a_clear_error(cluster, make_producer):
    p = make_producer()
    with pytest.raises(MQClientError, match="No route info of this topic: Nowhere"):
        p.send(Message("Nowhere", b"x"))


def test_busy_broker_is_retried_on_the_other_broker(cluster, make_producer):
    ns, a, b = cluster
    ns.set_route("T", [a, b])
    a.send_code = b.send_code = ResponseCode.SYSTEM_BUSY
    p = make_producer()
    with pytest.raises(MQResponseError) as info:
        p.send(Message("T", b"x"))
    assert info.value.code == ResponseCode.SYSTEM_BUSY
    attempts = len(a.of(RequestCode.SEND_MESSAGE_V2)) + len(b.of(RequestCode.SEND_MESSAGE_V2))
    assert attempts == 3, f"1 attempt + 2 retries, got {attempts}"
    a.send_code = ResponseCode.SUCCESS
    b.send_code = ResponseCode.SYSTEM_BUSY
    for _ in range(4):
        r = p.send(Message("T", b"x"))
        assert r.message_queue.broker_name == "broker-a", "a retry leaves the broker that just failed"


def test_message_illegal_is_not_retried(cluster, make_producer):
    ns, a, b = cluster
    ns.set_route("T", [a, b])
    a.send_code = b.send_code = ResponseCode.MESSAGE_ILLEGAL
    p = make_producer()
    with pytest.raises(MQResponseError, match="MESSAGE_ILLEGAL"):
        p.send(Message("T", b"x"))
    assert len(a.of(RequestCode.SEND_MESSAGE_V2)) + len(b.of(RequestCode.SEND_MESSAGE_V2)) == 1


def test_flush_timeout_is_a_result_not_an_error(cluster, make_producer):
    ns, a, _ = cluster
    ns.set_route("T", [a])
    a.send_code = ResponseCode.FLUSH_DISK_TIMEOUT
    p = make_producer()
    assert p.send(Message("T", b"x")).status == SendStatus.FLUSH_DISK_TIMEOUT
    assert len(a.of(RequestCode.SEND_MESSAGE_V2)) == 1


def test_big_bodies_are_zlib_compressed(cluster, make_producer):
    ns, a, _ = cluster
    ns.set_route("T", [a])
    p = make_producer()
    body = b"0123456789" * 500
    p.send(Message("T", body))
    p.send(Message("T", b"small"))
    big, small = a.of(RequestCode.SEND_MESSAGE_V2)
    flag = decode_request_header(big).sys_flag
    assert flag & MessageSysFlag.COMPRESSED_FLAG and flag & MessageSysFlag.COMPRESSION_TYPE_MASK == 0x300
    assert zlib.decompress(big.body) == body
    assert decode_request_header(small).sys_flag == 0 and small.body == b"small"


def test_batch_body_and_ids(cluster, make_producer):
    ns, a, _ = cluster
    ns.set_route("T", [a])
    p = make_producer()
    r = p.send_batch([Message("T", f"m{i}".encode(), tags="TagA") for i in range(3)])
    (req,) = a.of(RequestCode.SEND_BATCH_MESSAGE)
    assert decode_request_header(req).batch is True
    entries = decode_batch(req.body)
    assert [e.body for e in entries] == [b"m0", b"m1", b"m2"]
    keys = [decode_properties(e.properties)["UNIQ_KEY"] for e in entries]
    assert r.msg_id.split(",") == keys and len(set(keys)) == 3
    with pytest.raises(MQClientError, match="one topic"):
        p.send_batch([Message("T", b"x"), Message("U", b"y")])


def test_oneway_sets_the_flag_and_needs_no_answer(cluster, make_producer):
    ns, a, _ = cluster
    ns.set_route("T", [a])
    p = make_producer()
    assert p.send_oneway(Message("T", b"x")) is None
    (req,) = a.wait_for(RequestCode.SEND_MESSAGE_V2)
    assert req.is_oneway


def test_unstarted_producer_and_bad_topic_are_refused(cluster):
    p = BlockingProducer("pg", config=ClientConfig(cluster[0].addr))
    with pytest.raises(MQClientError, match="not started"):
        p.send(Message("T", b"x"))
    p.start()
    try:
        with pytest.raises(MQClientError, match="illegal characters"):
            p.send(Message("bad topic!", b"x"))
        with pytest.raises(MQClientError, match="body is empty"):
            p.send(Message("T", b""))
    finally:
        p.shutdown()


def test_check_transaction_state_is_answered_with_the_checkers_verdict(cluster):
    from ferrymq.sdk import reactor_thread
    from ferrymq.sdk.producer import LocalTransactionState
    from ferrymq.wire.command import request
    from ferrymq.wire.message import build_record

    ns, a, _ = cluster
    ns.set_route("T", [a])
    asked = []

    def checker(msg):
        asked.append(msg)
        return LocalTransactionState.ROLLBACK_MESSAGE

    p = BlockingProducer("txg", config=ClientConfig(ns.addr), transaction_checker=checker)
    p.start()
    try:
        p.send(Message("T", b"warm-up"))  # opens the connection the broker asks on
        a.handlers[RequestCode.END_TRANSACTION] = lambda cmd, ch: None
        half = build_record("T", b"half", {"PGROUP": "txg", "UNIQ_KEY": "AB" * 16, "TRAN_MSG": "true"},
                            commitlog_offset=4096, store_host=("127.0.0.1", 10911))
        ext = {"tranStateTableOffset": "7", "commitLogOffset": "4096", "msgId": "AB" * 16,
               "transactionId": "AB" * 16, "offsetMsgId": "7F00000100002A9F0000000000001000", "bname": "broker-a"}
        reactor_thread.call(a.channels[-1].invoke_oneway, request(RequestCode.CHECK_TRANSACTION_STATE, ext, bytes(half)))
        (end,) = a.wait_for(RequestCode.END_TRANSACTION)
        h = decode_request_header(end)
        assert end.is_oneway and h.from_transaction_check is True
        assert (h.producer_group, h.commit_or_rollback, h.tran_state_table_offset, h.commit_log_offset) == \
            ("txg", 12, 7, 4096)
        assert h.msg_id == "AB" * 16 and asked[0].body == b"half"
    finally:
        p.shutdown()


def test_async_send_future_and_callback(cluster, make_producer):
    import threading

    ns, a, _ = cluster
    ns.set_route("T", [a])
    p = make_producer()
    done = threading.Event()
    called = []

    def callback(future):
        called.append(future.result().status)
        done.set()

    future = p.send_async(Message("T", b"x"), callback)
    assert future.result(10).status == SendStatus.SEND_OK
    assert done.wait(10) and called == [SendStatus.SEND_OK]
    a.send_code = ResponseCode.MESSAGE_ILLEGAL
    failed = p.send_async(Message("T", b"y"))
    with pytest.raises(MQResponseError, match="MESSAGE_ILLEGAL"):
        failed.result(10)


def test_an_unreachable_name_server_is_skipped(cluster):
    import socket

    ns, a, _ = cluster
    ns.set_route("T", [a])
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        dead = s.getsockname()[1]  # closed again when the block ends: nothing listens there
    p = BlockingProducer("pg", config=ClientConfig(f"127.0.0.1:{dead};{ns.addr}"))
    p.start()
    try:
        assert p.send(Message("T", b"x")).status == SendStatus.SEND_OK
    finally:
        p.shutdown()


def test_brokers_that_leave_every_route_are_forgotten(cluster, make_producer):
    from ferrymq.sdk import reactor_thread

    ns, a, b = cluster
    ns.set_route("T", [a, b])
    p = make_producer()
    p.send(Message("T", b"x"))
    instance = p.wrapped.instance
    assert set(instance.broker_addrs) == {"broker-a", "broker-b"}
    ns.set_route("T", [a])
    reactor_thread.call(instance.update_all_routes)
    assert set(instance.broker_addrs) == {"broker-a"}, "broker-b left the route"
    before = len(b.of(RequestCode.HEART_BEAT))
    reactor_thread.call(instance.send_heartbeat_to_all)
    assert len(b.of(RequestCode.HEART_BEAT)) == before, "no heartbeat to a forgotten broker"
    assert {p.send(Message("T", b"y")).message_queue.broker_name for _ in range(4)} == {"broker-a"}


def test_a_read_only_topic_is_refused_without_auto_creating_it(cluster, make_producer):
    ns, a, _ = cluster
    ns.set_route("T", [a], perm=4)
    ns.set_route("TBW102", [a], perm=7)
    p = make_producer()
    with pytest.raises(MQClientError, match="no writable queue"):
        p.send(Message("T", b"x"))
    assert not a.of(RequestCode.SEND_MESSAGE_V2)
