"""One send at a time per MQTT topic while a send is on the way.

A broker may work on several sends of one connection at once (Apache's send pool has a thread per core,
up to four), so two messages on their way to one queue can be stored in either order. MQTT promises
that a publisher's messages on a topic reach its subscribers in the order it sent them (4.6): while a
message of a topic waits for the broker's answer, the next one of that topic waits for that answer
before it is sent. Messages the gateway's own broker stores do not pass here: its store puts them in the
order they come, whenever their answers follow.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from twisted.internet import defer


class InOrder:
    """Runs ``send`` per key (the MQTT topic) one after the other while the one before has not been
    answered; a send that fails lets the next one go."""

    def __init__(self) -> None:
        #: key -> fired once the last send of that key started here was answered
        self._answered: dict[str, defer.Deferred] = {}

    def __len__(self) -> int:
        """Keys with a send on the way."""
        return len(self._answered)

    def run(self, key: str, send: Callable[[], Any]) -> Any:
        """``send()``'s outcome: its value when it was answered at once, else a Deferred of it."""
        before = self._answered.get(key)
        if before is None:
            outcome = send()
            if not isinstance(outcome, defer.Deferred):
                return outcome
        else:
            outcome = defer.Deferred()

            def go(_: None) -> None:
                defer.maybeDeferred(send).chainDeferred(outcome)

            before.addCallback(go)
        answered = defer.Deferred()
        self._answered[key] = answered

        def done(result: Any) -> Any:
            if self._answered.get(key) is answered:
                del self._answered[key]
            answered.callback(None)
            return result

        return outcome.addBoth(done)
