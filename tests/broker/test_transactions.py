"""Half messages, END_TRANSACTION commit/rollback, check-back and discard, state rebuilt at start."""

from __future__ import annotations

from tests.broker.conftest import FakeChannel
from ferrymq.wire.bodies import HeartbeatData, ProducerData
from ferrymq.wire.codes import RequestCode, ResponseCode
from ferrymq.wire.headers import EndTransactionRequestHeader
from ferrymq.wire.message import decode_record, decode_records
from ferrymq.wire.msgid import parse_offset_msg_id

C = RequestCode
TX = {"TRAN_MSG": "true", "PGROUP": "txg"}


def half(bk, body=b"tx", topic="TxTopic", **props):
    resp = bk.send(topic, body, tags="TagA", extra_props={**TX, **props})
    assert resp.code == 0, resp.remark
    _, phys = parse_offset_msg_id(resp.ext_fields["msgId"])
    return resp, phys


def end(bk, resp, phys, kind, group="txg", offset=None, check=False):
    h = EndTransactionRequestHeader(
        producer_group=group, tran_state_table_offset=int(resp.ext_fields["queueOffset"]) if offset is None else offset,
        commit_log_offset=phys, commit_or_rollback=kind, msg_id=resp.ext_fields["transactionId"],
        from_transaction_check=check)
    return bk.call(C.END_TRANSACTION, h.to_ext())


def visible(bk, topic="TxTopic"):
    return [m.body for m in decode_records(bk.store.get_message("", topic, 0, 0, 32).body())]


def test_half_is_invisible_until_commit(bk):
    resp, phys = half(bk)
    assert visible(bk) == []
    stored, _ = decode_record(bk.store.select_one_message_by_offset(phys))
    assert stored.topic == "RMQ_SYS_TRANS_HALF_TOPIC" and stored.properties["REAL_TOPIC"] == "TxTopic"
    assert stored.properties["__transactionId__"] == resp.ext_fields["transactionId"]
    assert end(bk, resp, phys, 8).code == 0
    committed = decode_records(bk.store.get_message("", "TxTopic", 0, 0, 32).body())
    assert [m.body for m in committed] == [b"tx"]
    assert committed[0].sys_flag & 0xC == 8 and committed[0].prepared_transaction_offset == phys
    assert committed[0].properties["TRAN_MSG"] == "true"  # as Apache 5.5.0 delivers it (clients read it)
    assert end(bk, resp, phys, 8).code == 0 and visible(bk) == [b"tx"]  # a second commit delivers nothing more


def test_rollback_and_wrong_end_requests(bk):
    resp, phys = half(bk)
    assert end(bk, resp, phys, 8, group="other").remark == "The producer group wrong"
    assert end(bk, resp, phys, 8, offset=99).remark == "The transaction state table offset wrong"
    assert end(bk, resp, phys + 1, 8).remark == "Find prepared transaction message failed"
    assert end(bk, resp, phys, 0) is None  # unknown: no action, no answer
    assert end(bk, resp, phys, 12).code == 0
    assert visible(bk) == [] and int(resp.ext_fields["queueOffset"]) in bk.ctx.transactions.service.done


def test_check_back_asks_a_live_producer_then_discards(bk):
    producer = FakeChannel("127.0.0.1:7001")
    bk.call(C.HEART_BEAT, None, HeartbeatData(client_id="p", producer_data_set=[ProducerData("txg")]).encode(),
            channel=producer)
    resp, phys = half(bk)
    tx = bk.ctx.transactions
    tx.check()
    assert not producer.sent  # younger than transactionTimeOut
    bk.later_ms = 10_000
    tx.check()
    (asked,) = producer.sent
    # Apache asks about a re-appended copy carrying the check count
    assert asked.code == C.CHECK_TRANSACTION_STATE and asked.ext_fields["commitLogOffset"] != str(phys)
    assert asked.ext_fields["topic"] == "RMQ_SYS_TRANS_HALF_TOPIC"
    assert asked.ext_fields["msgId"] == resp.ext_fields["transactionId"]
    shown, _ = decode_record(asked.body)
    assert shown.topic == "TxTopic" and shown.body == b"tx" and shown.properties["TRANSACTION_CHECK_TIMES"] == "1"
    for i in range(bk.config.transactionCheckMax + 1):
        bk.later_ms += 10_000
        tx.check()
    assert len(producer.sent) == bk.config.transactionCheckMax and visible(bk) == []
    assert [m.body for m in decode_records(bk.store.get_message("", "TRANS_CHECK_MAX_TIME_TOPIC", 0, 0, 8).body())] == [b"tx"]


def test_answer_to_a_check_commits_once(bk):
    producer = FakeChannel("127.0.0.1:7001")
    bk.call(C.HEART_BEAT, None, HeartbeatData(client_id="p", producer_data_set=[ProducerData("txg")]).encode(),
            channel=producer)
    resp, phys = half(bk)
    bk.later_ms = 10_000
    bk.ctx.transactions.check()
    (asked,) = producer.sent
    copy = {"queueOffset": asked.ext_fields["tranStateTableOffset"], "transactionId": resp.ext_fields["transactionId"]}
    assert end(bk, type(resp)(code=0, ext_fields=copy), int(asked.ext_fields["commitLogOffset"]), 8, check=True).code == 0
    assert visible(bk) == [b"tx"]
    bk.later_ms = 20_000
    bk.ctx.transactions.check()
    assert len(producer.sent) == 1  # decided: never asked again


def test_rejected_when_configured(bk):
    bk.config.rejectTransactionMessage = True
    assert bk.send("TxTopic", extra_props=TX).code == ResponseCode.NO_PERMISSION


def test_a_committed_message_with_a_delay_level_waits_for_it(bk):
    resp, phys = half(bk, b"later", DELAY="2")
    assert end(bk, resp, phys, 8).code == 0
    assert visible(bk) == [] and bk.store.get_max_offset("SCHEDULE_TOPIC_XXXX", 1) == 1
    bk.later_ms = 5_500
    assert bk.ctx.scheduler.tick() == 1
    (msg,) = decode_records(bk.store.get_message("", "TxTopic", 0, 0, 32).body())
    assert msg.body == b"later" and msg.sys_flag & 0xC == 8


def test_check_settings_follow_broker_config_updates(bk):
    producer = FakeChannel("127.0.0.1:7001")
    bk.call(C.HEART_BEAT, None, HeartbeatData(client_id="p", producer_data_set=[ProducerData("txg")]).encode(),
            channel=producer)
    half(bk)
    bk.later_ms = 10_000
    bk.config.transactionTimeOut = 60_000  # as UPDATE_BROKER_CONFIG would set it
    bk.ctx.transactions.check()
    assert producer.sent == []
    bk.config.transactionTimeOut = 6_000
    bk.ctx.transactions.check()
    assert len(producer.sent) == 1


def test_open_transactions_are_found_again_by_a_fresh_service(bk):
    """What a restart sees: the op records in the store decide which halves are still open."""
    from ferrymq.server.broker.processors.end_transaction import TransactionProcessor

    r1, p1 = half(bk, b"a")
    half(bk, b"b")
    end(bk, r1, p1, 12)
    producer = FakeChannel("127.0.0.1:7001")
    bk.call(C.HEART_BEAT, None, HeartbeatData(client_id="p", producer_data_set=[ProducerData("txg")]).encode(),
            channel=producer)
    fresh = TransactionProcessor(bk.ctx.config, bk.ctx.store, bk.ctx.offsets, bk.ctx.topics, bk.ctx.producers,
                                 clock=bk.wall)
    bk.later_ms = 10_000
    fresh.check()
    assert [decode_record(c.body)[0].body for c in producer.sent] == [b"b"]
