"""The receipt handle a gRPC consumer holds for a received message.

It is the broker's POP handle (:class:`~ferrymq.wire.extra_info.ReceiptHandle`, eight fields) followed by
the message's commit-log offset, as the proxy writes it (its ReceiptHandle.encode): the offset is what
ForwardMessageToDeadLetterQueue sends back to the broker. A handle is expired once its message is
visible again (pop time + invisible time has passed); the proxy refuses to ack or renew it then.
"""

from __future__ import annotations

from dataclasses import dataclass

from ferrymq.wire.extra_info import ReceiptHandle

from .protocol import Code
from .status import Refused


@dataclass(frozen=True, slots=True)
class GrpcReceipt:
    handle: ReceiptHandle
    #: -1 when the client sent a handle without it
    commit_log_offset: int = -1

    def __str__(self) -> str:
        return f"{self.handle} {self.commit_log_offset}"

    @property
    def next_visible_ms(self) -> int:
        return self.handle.pop_time + self.handle.invisible_ms

    def expired(self, now_ms: int) -> bool:
        return self.next_visible_ms <= now_ms


def parse(text: str) -> GrpcReceipt:
    """The handle ``text`` names; a malformed one is refused as the proxy's decode failure (an internal
    error, its message saying why)."""
    fields = text.split(" ")
    try:
        if len(fields) < 8:
            raise ValueError(f"Parse failed, dataList size {len(fields)}")
        handle = ReceiptHandle.parse(" ".join(fields[:8]))
        return GrpcReceipt(handle, int(fields[8]) if len(fields) > 8 else -1)
    except ValueError as exc:
        raise Refused(Code.INTERNAL_SERVER_ERROR, str(exc)) from None


def check_current(receipt: GrpcReceipt, now_ms: int) -> None:
    if receipt.expired(now_ms):
        raise Refused(Code.INVALID_RECEIPT_HANDLE, "receipt handle is expired")
