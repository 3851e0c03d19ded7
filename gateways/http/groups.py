"""Consumer groups and their lag, as ``mqadmin consumerProgress`` shows them: per queue, the broker's max
offset, the group's committed offset and their difference; a group's lag is the sum over its queues
(its retry topic's included, as mqadmin's Diff Total)."""

from __future__ import annotations

from typing import Any

from ferrymq.sdk.admin_cli.command import CommandError
from ferrymq.sdk.aio import MQAdmin
from ferrymq.sdk.errors import MQResponseError
from ferrymq.wire.bodies import ConsumeStats
from ferrymq.wire.codes import ResponseCode


async def progress(admin: MQAdmin, group: str) -> ConsumeStats | None:
    """The group's offsets, or None when the brokers keep none for it: it broadcasts (its consumers keep
    their offsets), or it has not consumed yet (no retry topic, no offsets, no consumer online)."""
    try:
        return await admin.consume_stats(group)
    except CommandError:
        return None
    except MQResponseError as exc:
        if exc.code == ResponseCode.TOPIC_NOT_EXIST:
            return None
        raise


def summary(group: str, stats: ConsumeStats | None) -> dict[str, Any]:
    if stats is None:
        return {"group": group, "lag": None, "consumeTps": 0.0}
    lag = sum(o.broker_offset - o.consumer_offset for o in stats.offset_table.values())
    return {"group": group, "lag": lag, "consumeTps": stats.consume_tps}


def detail(group: str, stats: ConsumeStats | None) -> dict[str, Any]:
    queues = [{"topic": mq.topic, "brokerName": mq.broker_name, "queueId": mq.queue_id,
               "brokerOffset": o.broker_offset, "consumerOffset": o.consumer_offset,
               "lag": o.broker_offset - o.consumer_offset, "lastTimestamp": o.last_timestamp}
              for mq, o in sorted((stats.offset_table if stats else {}).items(),
                                  key=lambda item: (item[0].topic, item[0].broker_name or "", item[0].queue_id))]
    return {**summary(group, stats), "queues": queues}
