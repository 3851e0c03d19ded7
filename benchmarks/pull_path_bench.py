"""Pull path benchmark: the broker's own CPU per PULL_MESSAGE, in process, with no sockets and no client.

A push consumer draining a backlog costs the broker one request per 32 messages: decode the frame, check
group/topic/subscription, read the consume queue and the commit log, encode the answer. The side-by-side
drain figure mixes that with the Java consumer's CPU (which takes most of a 2-core box); this one isolates
the broker's part, so a change to the pull path can be judged in seconds.

    .venv/bin/python -m benchmarks.pull_path_bench [--messages 49152] [--queues 8] [--batch 16] [--rounds 7]

The backlog is written the way the side-by-side fill writes it (``--batch`` messages per queue at a time,
queues in turn, 1 KiB bodies with a Java producer's properties). Each round pulls the whole backlog with
32-message pulls from every queue; the figure is the median round, per pull and per message.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import tempfile
import time
from dataclasses import dataclass, field
from typing import Any

from twisted.internet import task

from ferrymq.server.broker.service import Broker
from ferrymq.server.config import BrokerConfig
from ferrymq.remoting import dispatch
from ferrymq.wire.bodies import ConsumerData, HeartbeatData, SubscriptionData
from ferrymq.wire.codes import LanguageCode, RequestCode, ResponseCode
from ferrymq.wire.command import request
from ferrymq.wire.frame import FrameDecoder, encode
from ferrymq.wire.message import encode_properties
from ferrymq.wire.msgid import UniqKeyGenerator

TOPIC, GROUP = "PullBench", "pull_bench"
PULL_BATCH = 32  # a Java push consumer's default pullBatchSize


@dataclass(eq=False)
class _Channel:
    """What the processors see of a consumer's connection."""

    remote_address: str = "127.0.0.1:50001"
    closers: list = field(default_factory=list)
    is_active: bool = True

    def invoke_oneway(self, cmd: Any) -> None:
        pass

    def on_close(self, cb: Any) -> None:
        self.closers.append(cb)


def _fill(broker: Broker, messages: int, queues: int, batch: int) -> None:
    gen = UniqKeyGenerator()
    body = bytes(range(256)) * 4
    store = broker.store
    written = 0
    while written < messages:
        for qid in range(queues):
            for _ in range(min(batch, messages - written)):
                props = {"UNIQ_KEY": gen.next(), "WAIT": "true", "TAGS": "TagA"}
                store.put_message(TOPIC, qid, body, props, properties_str=encode_properties(props))
                written += 1


def _pull_frames(messages: int, queues: int) -> list[bytes]:
    """Every pull a consumer makes to drain the backlog, as frames (push consumer: no subscription in the
    request, the broker uses the heartbeat's)."""
    per_queue = messages // queues
    frames = []
    for offset in range(0, per_queue, PULL_BATCH):
        for qid in range(queues):
            ext = {"consumerGroup": GROUP, "topic": TOPIC, "queueId": str(qid), "queueOffset": str(offset),
                   "maxMsgNums": str(PULL_BATCH), "sysFlag": "2", "commitOffset": "0",
                   "suspendTimeoutMillis": "15000", "subVersion": "1"}
            frames.append(encode(request(RequestCode.PULL_MESSAGE, ext, language=LanguageCode.JAVA)))
    return frames


def main(argv: list[str] | None = None) -> dict:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--messages", type=int, default=49152,
                   help="backlog size (the default stays under a sixteenth of a 1 GiB segment, so no zero fill of "
                        "the next segment runs in the background during the timing)")
    p.add_argument("--queues", type=int, default=8)
    p.add_argument("--batch", type=int, default=16, help="messages written to one queue at a time")
    p.add_argument("--rounds", type=int, default=7)
    args = p.parse_args(argv)

    home = tempfile.mkdtemp(prefix="ferrymq-pullbench-")
    clock = task.Clock()
    broker = Broker(BrokerConfig(brokerName="bench-a", storePathRootDir=home, brokerIP1="127.0.0.1"), reactor=clock)
    try:
        broker._build(10911)
        channel = _Channel()
        broker.ctx.topics.create_if_absent(TOPIC, args.queues)
        heartbeat = HeartbeatData(client_id="bench@1", consumer_data_set=[ConsumerData(
            group_name=GROUP, consume_type="CONSUME_PASSIVELY", message_model="CLUSTERING",
            consume_from_where="CONSUME_FROM_FIRST_OFFSET",
            subscription_data_set=[SubscriptionData(topic=TOPIC, sub_string="*", sub_version=1)])])
        dispatch(broker.table, request(RequestCode.HEART_BEAT, None, heartbeat.encode()), channel)
        _fill(broker, args.messages, args.queues, args.batch)
        frames = _pull_frames(args.messages, args.queues)
        decoder = FrameDecoder()
        table = broker.table

        def one_round() -> tuple[float, int]:
            pulled = 0
            start = time.perf_counter()
            for frame in frames:
                for cmd in decoder.feed(frame):
                    resp = dispatch(table, cmd, channel)
                    encode(resp)
                    if resp.code != ResponseCode.SUCCESS:
                        raise SystemExit(f"pull answered {resp.code} ({resp.remark}): the benchmark is broken")
                    pulled += int(resp.ext_fields["nextBeginOffset"]) - int(cmd.ext_fields["queueOffset"])
            return time.perf_counter() - start, pulled

        one_round()  # warm the page cache and the caches
        times = []
        for _ in range(args.rounds):
            seconds, pulled = one_round()
            times.append(seconds)
        med = statistics.median(times)
        per_pull = med / len(frames) * 1e6
        result = {"pulls": len(frames), "messages": pulled, "median_s": round(med, 4),
                  "us_per_pull": round(per_pull, 1), "us_per_msg": round(med / pulled * 1e6, 2)}
        print(f"pull path: {len(frames)} pulls of {PULL_BATCH} x 1 KiB ({args.queues} queues, written {args.batch} "
              f"at a time): {per_pull:.1f} us/pull, {result['us_per_msg']:.2f} us/msg (median of {args.rounds})")
        return result
    finally:
        broker.store.shutdown()
        shutil.rmtree(home, ignore_errors=True)


if __name__ == "__main__":
    main()
