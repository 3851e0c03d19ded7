"""A group's HTTP consumers stop when no request comes: its queues go to the group's other consumers."""

from __future__ import annotations

import asyncio

from ferrymq.gateways.http.gateway import Gateway
from ferrymq.sdk.aio import Message, Producer
from ferrymq.testing.server import FerryMQServer


def test_an_idle_group_leaves_its_queues_and_unhanded_messages_to_the_groups_other_consumers(tmp_path):
    with FerryMQServer(tmp_path) as server:
        server.create_topic("IdleT", 1)

        async def scenario() -> list[bytes]:
            async with Producer("IdlePG", server.namesrv_addr) as producer:
                for i in range(3):
                    await producer.send(Message("IdleT", f"m{i}".encode()))
            first = Gateway(server.namesrv_addr, idle_seconds=1.0, client_config={"instance_name": "first"})
            second = Gateway(server.namesrv_addr, client_config={"instance_name": "second",
                                                                  "rebalance_interval": 1.0})
            await first.start()
            await second.start()
            try:
                group = first.group("IdleG", 16)
                await group.subscribe("IdleT", "*", "TAG")
                [taken] = await group.take("IdleT", 1, 10, 30)
                group.settle([taken.handle], consumed=True)
                other = second.group("IdleG", 16)
                await other.subscribe("IdleT", "*", "TAG")
                assert await other.take("IdleT", 16, 1, 30) == []  # the only queue is the first gateway's
                rest = []
                for _ in range(30):
                    rest += await other.take("IdleT", 16, 1, 30)
                    if len(rest) >= 2:
                        break
                assert "IdleG" not in first.groups
                for pending in rest:
                    other.settle([pending.handle], consumed=True)
                return [taken.msg.body] + sorted(p.msg.body for p in rest)
            finally:
                await first.stop()
                await second.stop()

        assert asyncio.run(scenario()) == [b"m0", b"m1", b"m2"]
