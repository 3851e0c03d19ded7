"""Which consumers pull and which pop: ``mqadmin setConsumeMode`` per (topic, group), saved as
``messageRequestMode.json`` in Apache's layout (``{"messageRequestModeMap": {topic: {group: body}}}``).
QUERY_ASSIGNMENT answers each queue with its mode; a push consumer that hears POP switches to popping.
"""

from __future__ import annotations

from typing import Any

from ferrymq.wire.bodies import SetMessageRequestModeRequestBody

MESSAGE_REQUEST_MODE = "messageRequestMode.json"


class MessageRequestModes:
    def __init__(self) -> None:
        self.table: dict[str, dict[str, SetMessageRequestModeRequestBody]] = {}
        #: called after a change (the broker saves the file)
        self.on_change = None

    def get(self, topic: str, group: str) -> SetMessageRequestModeRequestBody | None:
        return self.table.get(topic, {}).get(group)

    def set(self, mode: SetMessageRequestModeRequestBody) -> None:
        self.table.setdefault(mode.topic or "", {})[mode.consumer_group or ""] = mode
        if self.on_change is not None:
            self.on_change()

    def to_json_obj(self) -> dict[str, Any]:
        return {"messageRequestModeMap": {topic: {group: m.to_json() for group, m in groups.items()}
                                          for topic, groups in self.table.items()}}

    def load_json_obj(self, obj: dict[str, Any]) -> None:
        self.table = {topic: {group: SetMessageRequestModeRequestBody.from_json(m) for group, m in groups.items()}
                      for topic, groups in (obj.get("messageRequestModeMap") or {}).items()}
