"""SEND_MESSAGE / SEND_MESSAGE_V2 / SEND_BATCH_MESSAGE against a real store: codes, header, stored record."""

from __future__ import annotations

from ferrymq.wire.codes import Perm, RequestCode, ResponseCode
from ferrymq.wire.headers import SendMessageRequestHeader
from ferrymq.wire.message import decode_record, decode_records, encode_batch, encode_properties
from ferrymq.wire.msgid import parse_offset_msg_id


def test_v2_send_answers_offset_msg_id_queue_and_transaction_id(bk):
    resp = bk.send("TopicA", b"body-1", tags="TagA", extra_props={"UNIQ_KEY": "AABB"})
    assert resp.code == ResponseCode.SUCCESS, resp.remark
    ext = resp.ext_fields
    assert ext["queueId"] == "0" and ext["queueOffset"] == "0"
    assert ext["transactionId"] == "AABB"
    assert ext["MSG_REGION"] == "DefaultRegion" and ext["TRACE_ON"] == "true"
    host, phys = parse_offset_msg_id(ext["msgId"])
    assert host == ("127.0.0.1", 10911)
    msg, _ = decode_record(bk.store.select_one_message_by_offset(phys))
    assert (msg.topic, msg.body, msg.tags) == ("TopicA", b"body-1", "TagA")
    assert msg.properties["CLUSTER"] == "DefaultCluster" and msg.born_host == ("127.0.0.1", 50001)
    # auto-created from TBW102 with the client's 4 queues, without the inherit bit
    cfg = bk.ctx.topics.get("TopicA")
    assert (cfg.write_queue_nums, cfg.perm) == (4, Perm.READ | Perm.WRITE)
    second = bk.send("TopicA", b"body-2")
    assert second.ext_fields["queueOffset"] == "1"


def test_long_header_send_and_broker_adds_uniq_key(bk):
    resp = bk.send("TopicB", b"x", code=RequestCode.SEND_MESSAGE)
    assert resp.code == 0
    _, phys = parse_offset_msg_id(resp.ext_fields["msgId"])
    msg, _ = decode_record(bk.store.select_one_message_by_offset(phys))
    assert msg.uniq_key == resp.ext_fields["transactionId"] and len(msg.uniq_key) == 32


def test_negative_queue_id_picks_a_write_queue(bk):
    resp = bk.send("TopicC", queue_id=-1)
    assert resp.code == 0 and 0 <= int(resp.ext_fields["queueId"]) < 4


def test_validation_codes_in_apache_order(bk, make_bk):
    assert bk.send("bad topic!").code == ResponseCode.INVALID_PARAMETER
    assert bk.send("SCHEDULE_TOPIC_XXXX").code == ResponseCode.NO_PERMISSION
    bk.send("TopicD")
    bad_q = bk.send("TopicD", queue_id=9)
    assert bad_q.code == ResponseCode.INVALID_PARAMETER and "queueId[9] is illegal" in bad_q.remark
    no_auto = make_bk(autoCreateTopicEnable=False)
    miss = no_auto.send("Nope")
    assert miss.code == ResponseCode.TOPIC_NOT_EXIST and miss.remark.startswith("topic[Nope] not exist, apply first please!")
    # a %RETRY% topic is created even without a template
    assert no_auto.send("%RETRY%g1").code == 0


def test_missing_required_header_field_is_system_error_naming_it(bk):
    h = SendMessageRequestHeader("pg", "T", "TBW102", 4, 0, 0, 1, 0).to_ext_v2()
    del h["b"]
    resp = bk.call(RequestCode.SEND_MESSAGE_V2, h, b"x")
    assert resp.code == ResponseCode.SYSTEM_ERROR and "'b'" in resp.remark


def test_oversized_body_is_message_illegal(make_bk):
    b = make_bk(maxMessageSize=1024)
    resp = b.send("TopicE", b"x" * 2000)
    assert resp.code == ResponseCode.MESSAGE_ILLEGAL and "1024" in resp.remark


def test_write_permission(bk):
    bk.send("TopicF")
    bk.ctx.topics.get("TopicF").perm = Perm.READ
    assert bk.send("TopicF").code == ResponseCode.NO_PERMISSION
    bk.config.brokerPermission = Perm.READ
    assert bk.send("TopicG").code == ResponseCode.NO_PERMISSION


def test_retry_topic_send_goes_to_dlq_past_max_reconsume(bk):
    resp = bk.send("%RETRY%g1", b"again", reconsume_times=17, max_reconsume_times=16)
    assert resp.code == 0
    _, phys = parse_offset_msg_id(resp.ext_fields["msgId"])
    msg, _ = decode_record(bk.store.select_one_message_by_offset(phys))
    assert msg.topic == "%DLQ%g1" and msg.properties["DELAY"] == "-1"
    assert bk.ctx.topics.get("%DLQ%g1").read_queue_nums == 1


def test_batch_send_stores_each_entry_with_consecutive_offsets(bk):
    body = encode_batch([(0, b"m1", {"TAGS": "A", "UNIQ_KEY": "K1"}), (0, b"m2", {"TAGS": "B", "UNIQ_KEY": "K2"})])
    h = SendMessageRequestHeader("pg", "TopicH", "TBW102", 4, 1, 0, 1, 0, properties=encode_properties({"WAIT": "true"}),
                                 batch=True)
    resp = bk.call(RequestCode.SEND_BATCH_MESSAGE, h.to_ext_v2(), body)
    assert resp.code == 0, resp.remark
    ids = resp.ext_fields["msgId"].split(",")
    assert len(ids) == 2 and resp.ext_fields["queueOffset"] == "0" and resp.ext_fields["queueId"] == "1"
    assert resp.ext_fields["transactionId"] == "K1,K2"
    got = bk.store.get_message("", "TopicH", 1, 0, 32)
    msgs = decode_records(got.body())
    assert [m.body for m in msgs] == [b"m1", b"m2"] and [m.queue_offset for m in msgs] == [0, 1]
    assert msgs[1].properties["WAIT"] == "true" and msgs[1].properties["CLUSTER"] == "DefaultCluster"


def test_batch_entry_properties_win_over_the_containers_and_keep_their_bytes(bk):
    """The Java client puts WAIT in every entry and in the container: the entry's value stays, the
    container's other keys are added, and an entry string without a trailing separator still parses."""
    entries = [(0, b"a", "WAIT\x01false\x02TAGS\x01A\x02"), (0, b"b", "TAGS\x01B"), (0, b"c", "")]
    h = SendMessageRequestHeader("pg", "TopicP", "TBW102", 4, 0, 0, 1, 0,
                                 properties=encode_properties({"WAIT": "true", "UNIQ_KEY": "batch"}), batch=True)
    resp = bk.call(RequestCode.SEND_BATCH_MESSAGE, h.to_ext_v2(), encode_batch(entries))
    assert resp.code == 0, resp.remark
    msgs = decode_records(bk.store.get_message("", "TopicP", 0, 0, 32).body())
    assert [m.properties for m in msgs] == [
        {"WAIT": "false", "TAGS": "A", "CLUSTER": "DefaultCluster"},
        {"TAGS": "B", "WAIT": "true", "CLUSTER": "DefaultCluster"},
        {"WAIT": "true", "CLUSTER": "DefaultCluster"},
    ]  # the container's UNIQ_KEY is the batch's own, never an entry's


def test_batch_to_retry_topic_and_garbage_body_are_refused(bk):
    h = SendMessageRequestHeader("pg", "%RETRY%g", "TBW102", 4, 0, 0, 1, 0, batch=True)
    assert bk.call(RequestCode.SEND_BATCH_MESSAGE, h.to_ext_v2(), encode_batch([(0, b"x", {})])).code == 13
    h.topic = "TopicI"
    assert bk.call(RequestCode.SEND_BATCH_MESSAGE, h.to_ext_v2(), b"\x00\x00\x00\x30garbage").code == 13


def test_unknown_request_code_names_it(bk):
    resp = bk.call(9999)
    assert resp.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED and "9999" in resp.remark


def test_half_messages_refused_without_a_transaction_service_and_routed_to_it_with_one(bk):
    bk.ctx.transactions = None
    refused = bk.send("TxT", extra_props={"TRAN_MSG": "true", "PGROUP": "pg"})
    assert refused.code == ResponseCode.NO_PERMISSION and "transaction message is forbidden" in refused.remark

    class Tx:
        def __init__(self):
            self.got = []

        def prepare_message(self, msg):
            self.got.append(msg)
            return bk.store.put_message("RMQ_SYS_TRANS_HALF_TOPIC", 0, msg.body, msg.properties)

    bk.ctx.transactions = tx = Tx()
    ok = bk.send("TxT", b"half", extra_props={"TRAN_MSG": "true", "PGROUP": "pg"})
    assert ok.code == 0 and tx.got[0].topic == "TxT" and tx.got[0].properties["CLUSTER"] == "DefaultCluster"


def test_cpp_client_numeric_booleans_read_as_java_does(bk):
    """rocketmq-client-cpp sends unitMode=0 / batch=0; Java's parseBoolean reads anything but "true" as false."""
    h = SendMessageRequestHeader("pg", "CppT", "TBW102", 4, 0, 0, 1, 0, properties="").to_ext()
    h.update({"unitMode": "0", "batch": "0"})
    resp = bk.call(RequestCode.SEND_MESSAGE, h, b"cpp")
    assert resp.code == 0, resp.remark
