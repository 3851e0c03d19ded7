"""RecallMessage: taking back a delayed message before its delivery time, by the recall handle its send was
answered with.

Apache's broker writes the handle (``v1 <topic> <broker> <due ms> <message id>``, Base64 for URLs) into the
answer of every send its timer parks, and recalls only with ``recallMessageEnable``, false by default:
Apache 5.5.0's proxy then refuses a recall, after its own checks (the topic, its DELAY type, a handle that
decodes). FerryMQ's timer wheel has no delete markers yet, so ``recallMessageEnable`` is one of its
planned features (refused unless false) and a recall is refused as Apache's default refuses it; the sends
are answered with the handle all the same.
"""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass

from ferrymq.wire.message import MessageConst
from ferrymq.wire.topics import RETRY_GROUP_TOPIC_PREFIX

from .protocol import Code
from .status import Refused

VERSION_1 = "v1"
#: the refusal of Apache's broker without recallMessageEnable, as the proxy passes it on
FORBIDDEN = "recall failed, operation is forbidden"


@dataclass(frozen=True, slots=True)
class RecallHandle:
    topic: str
    broker_name: str
    #: the end of the timer slot the message is due in (ms), as text
    timestamp: str
    message_id: str


def handle_of(props: dict[str, str], broker_name: str) -> str:
    """The recall handle of a message the broker's timer parked (``props`` as stored: TIMER_OUT_MS, the due
    slot, and REAL_TOPIC), or "" for any other message."""
    due, topic = props.get(MessageConst.TIMER_OUT_MS), props.get(MessageConst.REAL_TOPIC)
    if due is None or not topic or topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
        return ""
    raw = " ".join((VERSION_1, topic, broker_name, str(int(due) + 1), props.get(MessageConst.UNIQ_KEY, "")))
    return base64.urlsafe_b64encode(raw.encode()).decode("ascii")


def parse(handle: str) -> RecallHandle:
    """A handle as :func:`handle_of` writes it; :class:`Refused` INTERNAL_SERVER_ERROR (the proxy's answer)
    when it does not decode."""
    try:
        raw = base64.urlsafe_b64decode(handle + "=" * (-len(handle) % 4)).decode()
    except (binascii.Error, UnicodeDecodeError, ValueError):
        raw = ""
    items = raw.split(" ")
    if len(items) < 5 or items[0] != VERSION_1:
        raise Refused(Code.INTERNAL_SERVER_ERROR, "recall handle is invalid")
    return RecallHandle(*items[1:5])
