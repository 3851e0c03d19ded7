"""Runs one scenario with every official client at once, so its client-parametrized cases wait together.

Some scenarios spend most of their time idle on a client's or a broker's timer (a long-poll, a transaction
check-back, a delay level) while their cases, one per client, run one after another. :class:`Together`
starts the scenario for every selected case of the same test and server (each in its own thread, each
with its own client) when the first of them runs, and keeps the other clients' outcomes: each of those
cases, when pytest reaches it, returns its own client's result or raises its own client's failure. Every
case keeps its id, its assertions and its report line; only the waiting overlaps.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, TypeVar

import pytest

from .clients import Client

T = TypeVar("T")

#: the fixtures that stand for the client of a case (conftest.py)
CLIENT_FIXTURES = ("client", "client5")


@dataclass
class _Outcome:
    value: Any = None
    error: BaseException | None = None

    def unwrap(self) -> Any:
        if self.error is not None:
            raise self.error
        return self.value


@dataclass
class Together:
    """The session's outcomes of cases run ahead of their turn, by (test, other parameters, client)."""

    make_client: Callable[[str], Client]
    _done: dict[tuple, _Outcome] = field(default_factory=dict)
    #: every case run so far, here or on its own turn (a rerun case runs alone)
    _ran: set[tuple] = field(default_factory=set)

    def run(self, request: pytest.FixtureRequest, client: Client, scenario: Callable[[Client], T]) -> T:
        """``scenario(client)`` for this case's ``client``; on the first case of its test and server, for the
        still-selected sibling cases' clients too, in parallel."""
        item = request.node
        param, own = _client_param(item)
        key = _case_key(item, param)
        done = self._done.pop((*key, own), None)
        if done is not None:
            return done.unwrap()
        siblings = [name for name in _sibling_clients(item, param, key)
                    if name != own and (*key, name) not in self._ran]
        clients = {own: client, **{name: self.make_client(name) for name in siblings}}
        self._ran.update((*key, name) for name in clients)
        with ThreadPoolExecutor(max_workers=len(clients), thread_name_prefix="together") as pool:
            futures = {name: pool.submit(_outcome_of, scenario, each) for name, each in clients.items()}
            outcomes = {name: future.result() for name, future in futures.items()}
        for name in siblings:
            self._done[(*key, name)] = outcomes[name]
        return outcomes[own].unwrap()


def _outcome_of(scenario: Callable[[Client], Any], client: Client) -> _Outcome:
    try:
        return _Outcome(value=scenario(client))
    except BaseException as exc:  # noqa: BLE001 - pytest's skip/xfail outcomes and failures alike
        return _Outcome(error=exc)


def _client_param(item: pytest.Item) -> tuple[str, str]:
    params = item.callspec.params
    for name in CLIENT_FIXTURES:
        if name in params:
            return name, params[name]
    raise TypeError(f"{item.nodeid} is not parametrized by a client fixture ({', '.join(CLIENT_FIXTURES)})")


def _case_key(item: pytest.Item, client_param: str) -> tuple:
    others = tuple(sorted((k, repr(v)) for k, v in item.callspec.params.items() if k != client_param))
    return item.path, item.originalname, others


def _sibling_clients(item: pytest.Item, client_param: str, key: tuple) -> list[str]:
    """The clients of the selected cases of the same test with the same other parameters."""
    names = []
    for other in item.session.items:
        callspec = getattr(other, "callspec", None)
        if (callspec is not None and client_param in callspec.params and getattr(other, "originalname", None) == key[1]
                and _case_key(other, client_param) == key and other.get_closest_marker("skip") is None):
            names.append(callspec.params[client_param])
    return names
