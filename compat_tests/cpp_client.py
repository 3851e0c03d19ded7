"""Scenarios of Apache's Python binding of the C++ client (``rocketmq-client-python``, import ``rocketmq``),
run as ``python -m compat_tests.cpp_client <command> ...`` in a subprocess so that a native crash in
``librocketmq.so`` fails one test instead of killing pytest. Prints JSON lines like the Java and Go
harnesses (last ``{"event": "done", ...}``); exit status 0 only when the scenario did what it was asked.

    send    -n ADDR -t TOPIC [--count N] [--tag T] [--keys K] [--body TEXT] [--mode sync|oneway]
    consume -n ADDR -t TOPIC -g GROUP [--count N] [--expr EXPR] [--timeout SECONDS] [--linger SECONDS]
    txn     -n ADDR -t TOPIC --group G --spec FILE [--linger SECONDS]   (property txmode as in Java's txn;
            leaves early once every "unknown-commit" message has been checked back)
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading
import time


_stdout_lock = threading.Lock()


def emit(**kv: object) -> None:
    """One JSON line per event, written whole: the client's callback threads emit concurrently with the
    main thread, and print() writes the text and its newline separately (two events could share a line)."""
    line = json.dumps(kv) + "\n"
    with _stdout_lock:
        sys.stdout.write(line)
        sys.stdout.flush()


def _message(topic: str, body: str, tag: str = "", keys: str = "", props: dict | None = None):
    from rocketmq.client import Message

    m = Message(topic)
    if tag:
        m.set_tags(tag)
    if keys:
        m.set_keys(keys)
    for k, v in (props or {}).items():
        m.set_property(k, str(v))
    m.set_body(body)
    return m


def send(a) -> bool:
    from rocketmq.client import Producer

    p = Producer(a.group)
    p.set_namesrv_addr(a.n)
    p.start()
    sent = 0
    try:
        for i in range(a.count):
            body = a.body + (f" #{i}" if a.count > 1 else "")
            m = _message(a.t, body, a.tag, a.keys)
            if a.mode == "oneway":
                p.send_oneway(m)
                emit(event="sent", index=i, status="ONEWAY")
            else:
                r = p.send_sync(m)
                emit(event="sent", index=i, status=r.status.name, msgId=r.msg_id, offset=r.offset)
            sent += 1
    finally:
        p.shutdown()
    emit(event="done", sent=sent, requested=a.count)
    return sent == a.count


def consume(a) -> bool:
    from rocketmq.client import ConsumeStatus, PushConsumer

    got: list[str] = []
    enough = threading.Event()
    lock = threading.Lock()

    def on_message(msg):
        with lock:
            got.append(msg.id)
            emit(event="received", msgId=msg.id, topic=msg.topic, tags=msg.tags.decode() if isinstance(msg.tags, bytes)
                 else msg.tags, keys=msg.keys.decode() if isinstance(msg.keys, bytes) else msg.keys,
                 body=msg.body.decode() if isinstance(msg.body, bytes) else msg.body,
                 queueId=msg.queue_id, queueOffset=msg.queue_offset, reconsumeTimes=msg.reconsume_times)
            if len(got) >= a.count:
                enough.set()
        return ConsumeStatus.CONSUME_SUCCESS

    c = PushConsumer(a.g)
    c.set_namesrv_addr(a.n)
    c.set_instance_name(f"compat-cpp-{os.getpid()}")
    c.subscribe(a.t, on_message, expression=a.expr)
    c.start()
    emit(event="started")
    enough.wait(a.timeout)
    time.sleep(a.linger)
    c.shutdown()
    with lock:
        emit(event="done", received=len(got), expected=a.count)
        return len(got) >= a.count


def txn(a) -> bool:
    from rocketmq.client import TransactionMQProducer, TransactionStatus

    checks: dict[str, int] = {}

    def check(msg):
        keys = msg.keys.decode() if isinstance(msg.keys, bytes) else msg.keys
        mode = msg.get_property("txmode")
        mode = mode.decode() if isinstance(mode, bytes) else mode
        checks[keys] = checks.get(keys, 0) + 1
        emit(event="check", keys=keys, txmode=mode, n=checks[keys], at=int(time.time() * 1000))
        return TransactionStatus.COMMIT if mode == "unknown-commit" else TransactionStatus.UNKNOWN

    def local(msg, _args):
        mode = msg.get_property("txmode")
        mode = mode.decode() if isinstance(mode, bytes) else mode
        return {"commit": TransactionStatus.COMMIT, "rollback": TransactionStatus.ROLLBACK}.get(
            mode, TransactionStatus.UNKNOWN)

    plain = None
    if a.warm_up:
        # The C++ client heartbeats when a producer starts, to the brokers it has routes for, and then
        # every 30 s; a broker checks back only with producer groups that heartbeated. A plain producer
        # of this process (same client instance) sends first, so that the route is known and the
        # transactional producer's start registers its group at once. (send_sync on the
        # TransactionMQProducer itself crashes librocketmq.so.)
        from rocketmq.client import Producer

        plain = Producer(f"{a.group}_plain")
        plain.set_namesrv_addr(a.n)
        plain.start()
        plain.send_sync(_message(a.t, "warm-up"))
        emit(event="warmed_up")
    p = TransactionMQProducer(a.group, check)
    p.set_namesrv_addr(a.n)
    p.start()
    if plain is not None:
        plain.shutdown()
    ok = True
    try:
        with open(a.spec) as f:
            spec = json.load(f)
        for i, e in enumerate(spec):
            m = _message(a.t, e["body"], e.get("tag", ""), e.get("keys", ""), e.get("props"))
            try:
                r = p.send_message_in_transaction(m, local)
                emit(event="sent", index=i, keys=e.get("keys"), status=r.status.name, msgId=r.msg_id)
            except Exception as exc:  # noqa: BLE001 - reported, the scenario fails
                ok = False
                emit(event="send_error", index=i, error=repr(exc))
        # Stay for check-backs: up to --linger, or until every UNKNOW-then-COMMIT message was checked.
        waiting = {e.get("keys") for e in spec if (e.get("props") or {}).get("txmode") == "unknown-commit"}
        end = time.monotonic() + a.linger
        while time.monotonic() < end and not waiting <= set(checks):
            time.sleep(0.1)
    finally:
        emit(event="done", sent=len(spec), at=int(time.time() * 1000))
        p.shutdown()
    return ok


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(prog="cpp_client")
    sub = ap.add_subparsers(dest="cmd", required=True)
    for name in ("send", "consume", "txn"):
        s = sub.add_parser(name)
        s.add_argument("-n", required=True)
        s.add_argument("-t", required=True)
        s.add_argument("-g", default="compat_cpp_consumer")
        s.add_argument("--group", default="compat_cpp_producer")
        s.add_argument("--count", type=int, default=1)
        s.add_argument("--tag", default="")
        s.add_argument("--keys", default="")
        s.add_argument("--body", default="hello from the C++ client")
        s.add_argument("--mode", default="sync", choices=("sync", "oneway"))
        s.add_argument("--expr", default="*")
        s.add_argument("--timeout", type=float, default=30)
        s.add_argument("--linger", type=float, default=0)
        s.add_argument("--spec")
        s.add_argument("--warm-up", action="store_true",
                       help="txn: a plain producer sends 'warm-up' before the transactional one starts")
    a = ap.parse_args(argv)
    return 0 if {"send": send, "consume": consume, "txn": txn}[a.cmd](a) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
