"""Clients whose Telemetry stream ended are kept, as Apache's proxy keeps them, until their settings and
heartbeats have stopped for ``channelExpiredTimeout``; the service then forgets them (the broker's tables
drop them at the same time). The end of the stream itself and NotifyClientTermination are checked against
Apache's proxy in compat_tests/test_grpc.py."""

from __future__ import annotations

import asyncio
import time

import pytest

pytest.importorskip("grpc")
pytest.importorskip("rocketmq.grpc_protocol")

from ferrymq.server.grpc import service as grpc_service  # noqa: E402
from ferrymq.server.grpc.service import MessagingService, _Client  # noqa: E402


def test_a_client_without_a_stream_is_forgotten_once_silent_for_the_channel_expiry(monkeypatch):
    monkeypatch.setattr(grpc_service, "SILENT_CHECK_PERIOD", 0.01)
    monkeypatch.setattr(grpc_service, "CHANNEL_EXPIRED_TIMEOUT_MS", 60_000)
    now = int(time.time() * 1000)
    service = MessagingService()

    async def run() -> None:
        service.clients.update({
            "silent": _Client(seen_ms=now - 61_000),  # its stream ended, no heartbeat for over a minute
            "streaming": _Client(outbox=asyncio.Queue(), seen_ms=now - 61_000),  # silent, but its stream is open
            "heartbeating": _Client(seen_ms=now),  # its stream ended, its heartbeats go on
        })
        watching = asyncio.ensure_future(service._forget_silent())
        deadline = time.monotonic() + 5
        while "silent" in service.clients and time.monotonic() < deadline:
            await asyncio.sleep(0.01)
        service.clients["heartbeating"].outbox = asyncio.Queue()  # its new stream: nothing left to watch
        await asyncio.wait_for(watching, 5)

    asyncio.run(run())
    assert set(service.clients) == {"streaming", "heartbeating"}
