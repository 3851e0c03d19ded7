"""Push-style consumption: a group's messages as Server-Sent Events (``text/event-stream``).

A stream is one more taker of :meth:`GroupConsumer.take <.consumers.GroupConsumer.take>`, so its
messages are handed out, settled and redelivered exactly as the long poll's are. It holds at most
``inflight`` of them unsettled at once (flow control: a slow client is not flooded; the rest wait in
the group for it or for other takers), and writes a comment line whenever ``heartbeat`` seconds pass
without an event, so proxies and load balancers keep the connection open. When the client goes away
the server cancels the stream's task: nothing more is taken for it, and what it held comes back when
its invisibility time passes.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable

import orjson

from .consumers import GroupConsumer, Pending

#: what the stream answers with besides its media type: no caching, no buffering by nginx-style proxies
HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}


def event(pending: Pending, data: dict) -> bytes:
    """One message as an event: its receipt handle as the event id, the message JSON (one line) as data."""
    return b"event: message\nid: " + pending.handle.encode() + b"\ndata: " + orjson.dumps(data) + b"\n\n"


async def events(group: GroupConsumer, topic: str, *, inflight: int, heartbeat: float, invisible: float,
                 render: Callable[[Pending], dict]) -> AsyncIterator[bytes]:
    """The stream's bytes until the client disconnects (the server then cancels it) or the gateway stops
    consuming the group (the stream ends: an EventSource reconnects)."""
    loop = asyncio.get_running_loop()
    held: set[Pending] = set()
    settled = asyncio.Event()

    def release(pending: Pending) -> None:
        held.discard(pending)
        settled.set()

    group.streams += 1
    try:
        yield b": consuming " + topic.encode() + b" as group " + group.group.encode() + b"\n\n"
        written = loop.time()
        while group.consuming:
            quiet_for = max(written + heartbeat - loop.time(), 0.0)
            taken: list[Pending] = []
            if len(held) < inflight:
                taken = await group.take(topic, inflight - len(held), quiet_for, invisible)
            else:
                settled.clear()
                try:
                    await asyncio.wait_for(settled.wait(), quiet_for)
                except TimeoutError:
                    pass
            if taken:
                for pending in taken:
                    held.add(pending)
                    pending.outcome.add_done_callback(lambda _, p=pending: release(p))
                yield b"".join(event(p, render(p)) for p in taken)
                written = loop.time()
            elif loop.time() >= written + heartbeat:
                yield b": keep-alive\n\n"
                written = loop.time()
    finally:
        group.streams -= 1
