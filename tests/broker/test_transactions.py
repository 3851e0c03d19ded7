"""Half messages, END_TRANSACTION commit/rollback, check-back and discard, state rebuilt at start."""

from __future__ import annotations

from server.broker.transactions import TransactionService
from tests.broker.conftest import FakeChannel
from wire.bodies import HeartbeatData, ProducerData
from wire.codes import RequestCode, ResponseCode
from wire.headers import EndTransactionRequestHeader
from wire.message import decode_record, decode_records
from wire.msgid import parse_offset_msg_id

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
    assert bk.ctx.transactions.pending == {}


def test_rollback_and_wrong_end_requests(bk):
    resp, phys = half(bk)
    assert end(bk, resp, phys, 8, group="other").remark == "The producer group wrong"
    assert end(bk, resp, phys, 8, offset=99).remark == "The transaction state table offset wrong"
    assert end(bk, resp, phys + 1, 8).remark == "Find prepared transaction message failed"
    assert end(bk, resp, phys, 0) is None  # unknown: no action, no answer
    assert end(bk, resp, phys, 12).code == 0
    assert visible(bk) == [] and bk.ctx.transactions.pending == {}


def test_check_back_asks_a_live_producer_then_discards(bk):
    producer = FakeChannel("127.0.0.1:7001")
    bk.call(C.HEART_BEAT, None, HeartbeatData(client_id="p", producer_data_set=[ProducerData("txg")]).encode(),
            channel=producer)
    resp, phys = half(bk)
    tx = bk.ctx.transactions
    tx.check()
    assert not producer.sent  # younger than transactionTimeOut
    tx.pending[int(resp.ext_fields["queueOffset"])].store_timestamp -= 10_000
    tx.check()
    (asked,) = producer.sent
    assert asked.code == C.CHECK_TRANSACTION_STATE and asked.ext_fields["commitLogOffset"] == str(phys)
    assert asked.ext_fields["msgId"] == resp.ext_fields["transactionId"]
    shown, _ = decode_record(asked.body)
    assert shown.topic == "TxTopic" and shown.body == b"tx"
    for _ in range(bk.config.transactionCheckMax + 1):
        tx.check()
    assert tx.pending == {} and visible(bk) == []
    assert [m.body for m in decode_records(bk.store.get_message("", "TRANS_CHECK_MAX_TIME_TOPIC", 0, 0, 8).body())] == [b"tx"]


def test_open_transactions_are_rebuilt_at_start(bk):
    r1, p1 = half(bk, b"a")
    r2, p2 = half(bk, b"b")
    end(bk, r1, p1, 12)
    fresh = TransactionService(bk.ctx)
    fresh.load()
    assert list(fresh.pending) == [int(r2.ext_fields["queueOffset"])] and fresh.pending[1].group == "txg"


def test_rejected_when_configured(bk):
    bk.config.rejectTransactionMessage = True
    assert bk.send("TxTopic", extra_props=TX).code == ResponseCode.NO_PERMISSION
