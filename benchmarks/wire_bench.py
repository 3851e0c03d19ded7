"""Wire codec round trips: a 1 KiB SEND_MESSAGE_V2 request and its response, encode + decode, one core.

One round trip = what a broker and a client do for one send, minus the network: the client builds
the typed header and encodes the frame; the broker decodes the frame and the typed header, builds
the typed response header and encodes the response; the client decodes the response frame and its
typed header. Target (issue 2): at least 50,000 round trips per second on one core.

Run: ``.venv/bin/python -m benchmarks.wire_bench`` (prints one line per serialization, medians of 7 runs).
"""

from __future__ import annotations

import statistics
import time

from ferrymq.wire import frame
from ferrymq.wire.codes import RequestCode, SerializeType
from ferrymq.wire.command import request
from ferrymq.wire.headers import SendMessageRequestHeader, SendMessageResponseHeader
from ferrymq.wire.requests import decode_request_header, encode_request_header
from ferrymq.wire.message import MessageConst, encode_properties

BODY = bytes(range(256)) * 4  # 1 KiB
PROPERTIES = encode_properties(
    {
        MessageConst.KEYS: "order-1234",
        MessageConst.TAGS: "TagA",
        MessageConst.UNIQ_CLIENT_MESSAGE_ID_KEYIDX: "7F00000115B218B4AAC2A1B2C3D40000",
        MessageConst.WAIT_STORE_MSG_OK: "true",
    }
)


def one_round_trip(serialize_type: SerializeType, decoder: frame.FrameDecoder) -> None:
    header = SendMessageRequestHeader(
        producer_group="PG",
        topic="TopicTest",
        default_topic="TBW102",
        default_topic_queue_nums=4,
        queue_id=1,
        sys_flag=0,
        born_timestamp=1732200000123,
        flag=0,
        properties=PROPERTIES,
        reconsume_times=0,
        unit_mode=False,
        batch=False,
        broker_name="broker-a",
    )
    req = request(
        RequestCode.SEND_MESSAGE_V2,
        encode_request_header(RequestCode.SEND_MESSAGE_V2, header),
        BODY,
        serialize_type=serialize_type,
    )
    (received,) = decoder.feed(frame.encode(req))
    typed = decode_request_header(received)
    reply = SendMessageResponseHeader(
        msg_id="7F00000100002A9F00000000000001A2",
        queue_id=typed.queue_id,
        queue_offset=100,
        transaction_id="7F00000115B218B4AAC2A1B2C3D40000",
        msg_region="DefaultRegion",
        trace_on=True,
    )
    response = received.response(0, None, reply.to_ext())
    (answer,) = decoder.feed(frame.encode(response))
    SendMessageResponseHeader.from_ext(answer.ext_fields)


def measure(serialize_type: SerializeType, n: int = 20000, runs: int = 7) -> float:
    decoder = frame.FrameDecoder()
    for _ in range(1000):
        one_round_trip(serialize_type, decoder)
    rates = []
    for _ in range(runs):
        start = time.perf_counter()
        for _ in range(n):
            one_round_trip(serialize_type, decoder)
        rates.append(n / (time.perf_counter() - start))
    return statistics.median(rates)


def main() -> dict[str, float]:
    results = {}
    for st in (SerializeType.JSON, SerializeType.ROCKETMQ):
        rate = measure(st)
        results[st.name] = rate
        print(f"wire round trip, 1 KiB SEND_MESSAGE_V2, {st.name:8s} header: {rate:9,.0f} round trips/s (median of 7)")
    return results


if __name__ == "__main__":
    main()
