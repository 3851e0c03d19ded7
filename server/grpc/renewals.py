"""The messages a client received with ``auto_renew`` (the PushConsumer's receives), kept invisible for it.

The proxy holds each such message's receipt handle for the client (its ReceiptHandleManager): while the
client is there, a handle about to become visible again (``renewAheadTimeMillis`` ahead) is renewed, for
1, 3, 5, 10, 30 minutes, then each hour, until ``renewMaxTimeMillis`` after the receive, when it is
handed back for redelivery after the group's retry delay. An ack, a ChangeInvisibleDuration or a
forward to the DLQ takes the message out of the client's hands with the latest handle, whatever handle
the client sent. A client that goes away (NotifyClientTermination, or its Telemetry stream gone) has its
messages visible again ``invisibleTimeMillisWhenClear`` later, not after its full invisible time.

:class:`Renewals` decides; the service does the renewals on the broker's POP.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .policies import RenewalPolicy
from .receipts import GrpcReceipt

#: the proxy's RenewStrategyPolicy: the invisible time of a message's n-th renewal (the last one repeats)
RENEW_DELAYS_MS = (60_000, 180_000, 300_000, 600_000, 1_800_000, 3_600_000)


@dataclass(slots=True)
class Held:
    """A message held for a client: its topic, the latest handle, when it was received, its reconsume count."""

    topic: str
    receipt: GrpcReceipt
    received_ms: int
    reconsume_times: int
    renewals: int = 0


@dataclass(frozen=True, slots=True)
class Renewal:
    """Make ``held`` invisible ``invisible_ms`` from now; ``last``: and stop holding it (handed back)."""

    client_id: str
    group: str
    key: tuple[str, str]
    held: Held
    invisible_ms: int
    last: bool = False


@dataclass(slots=True)
class Renewals:
    policy: RenewalPolicy = field(default_factory=RenewalPolicy)
    #: (client id, group) -> (message id, the handle the client got) -> the message
    _held: dict[tuple[str, str], dict[tuple[str, str], Held]] = field(default_factory=dict)

    def __bool__(self) -> bool:
        return bool(self._held)

    def client_ids(self) -> set[str]:
        return {client_id for client_id, _group in self._held}

    def hold(self, client_id: str, group: str, message_id: str, held: Held) -> None:
        self._held.setdefault((client_id, group), {})[(message_id, str(held.receipt))] = held

    def release(self, client_id: str, group: str, message_id: str, handle: str) -> Held | None:
        """The message the client hands back (acks, renews itself, forwards): no longer held."""
        messages = self._held.get((client_id, group))
        held = messages.pop((message_id, handle), None) if messages else None
        if messages is not None and not messages:
            del self._held[(client_id, group)]
        return held

    def renewed(self, renewal: Renewal, receipt: GrpcReceipt) -> None:
        """``renewal`` was done: the message's handle is now ``receipt``."""
        messages = self._held.get((renewal.client_id, renewal.group))
        if messages is not None and messages.get(renewal.key) is renewal.held:
            renewal.held.receipt = receipt
            renewal.held.renewals += 1

    def forget(self, renewal: Renewal) -> None:
        """Stop holding ``renewal``'s message (handed back, or the broker no longer knows its handle)."""
        messages = self._held.get((renewal.client_id, renewal.group))
        if messages is not None and messages.get(renewal.key) is renewal.held:
            del messages[renewal.key]
            if not messages:
                del self._held[(renewal.client_id, renewal.group)]

    def clear(self, client_id: str) -> list[Renewal]:
        """Every message ``client_id`` holds, handed back visible ``invisibleTimeMillisWhenClear`` from now."""
        out = []
        for client_group in [key for key in self._held if key[0] == client_id]:
            for key, held in self._held.pop(client_group).items():
                out.append(Renewal(client_id, client_group[1], key, held,
                                   self.policy.invisibleTimeMillisWhenClear, last=True))
        return out

    def due(self, now_ms: int, retry_delay_ms) -> list[Renewal]:
        """The renewals to do at ``now_ms``: the handles due to become visible within renewAheadTimeMillis;
        a message held for renewMaxTimeMillis is handed back after ``retry_delay_ms(group, reconsume
        times)``."""
        out = []
        for (client_id, group), messages in self._held.items():
            for key, held in messages.items():
                if held.receipt.next_visible_ms - now_ms > self.policy.renewAheadTimeMillis:
                    continue
                if now_ms - held.received_ms < self.policy.renewMaxTimeMillis:
                    delay = RENEW_DELAYS_MS[min(held.renewals, len(RENEW_DELAYS_MS) - 1)]
                    out.append(Renewal(client_id, group, key, held, delay))
                else:
                    out.append(Renewal(client_id, group, key, held, retry_delay_ms(group, held.reconsume_times),
                                       last=True))
        return out
