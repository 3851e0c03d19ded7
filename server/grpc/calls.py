# cython: annotation_typing=False
# (an IntEnum is passed where an int is annotated: Cython would refuse it as not an int)
"""What every call of the v2 service reads off its request: the client's headers, its address, the topic."""

from __future__ import annotations

from typing import Any

from ferrymq.wire.topics import is_system_topic, validate_topic

from .protocol import Code, pb
from .status import Refused

#: the metadata keys naming the client and its language (every SDK sends them)
CLIENT_ID = "x-mq-client-id"
LANGUAGE = "x-mq-language"


def check_topic(topic: pb.Resource) -> None:
    problem = validate_topic(topic.name)
    if problem:
        raise Refused(Code.ILLEGAL_TOPIC, problem)
    if is_system_topic(topic.name):
        raise Refused(Code.ILLEGAL_TOPIC, "cannot access system topic")


def metadata(context: Any, key: str) -> str:
    for name, value in context.invocation_metadata() or ():
        if name == key:
            return value
    return ""


def peer(context: Any) -> str:
    """The client's address: ``ipv4:127.0.0.1:50000`` -> ``127.0.0.1:50000``; the IPv6 form keeps its brackets."""
    address = context.peer() or ""
    kind, _, rest = address.partition(":")
    return rest if kind in ("ipv4", "ipv6") else address
