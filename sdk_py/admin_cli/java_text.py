"""Text the way mqadmin's Java prints it: fastjson's pretty JSON, ``Double.toString``, ``Map.toString``,
``UtilAll`` time stamps and permission strings. Kept apart so each rule is tested once."""

from __future__ import annotations

import json
import math
import time
from collections.abc import Mapping
from decimal import Decimal
from typing import Any

PERM_READ = 4
PERM_WRITE = 2
PERM_INHERIT = 1

#: CommandUtil's message when a cluster name is not known to the name server (printed without newline)
NO_CLUSTER = "[error] Make sure the specified clusterName exists or the name server connected to is correct."


def fastjson_pretty(value: Any, depth: int = 0) -> str:
    """fastjson's ``toJSONString(obj, true)``: tab indentation, ``"key":value``, integer map keys bare."""
    inner = "\t" * (depth + 1)
    if isinstance(value, Mapping):
        if not value:
            return "{}"
        items = [f"{inner}{_json_key(k)}:{fastjson_pretty(v, depth + 1)}" for k, v in value.items()]
        return "{\n" + ",\n".join(items) + "\n" + "\t" * depth + "}"
    if isinstance(value, (list, tuple)):
        if not value:
            return "[]"
        items = [inner + fastjson_pretty(v, depth + 1) for v in value]
        return "[\n" + ",\n".join(items) + "\n" + "\t" * depth + "]"
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "null"
    if isinstance(value, (int, float)):
        return str(value)
    return json.dumps(value, ensure_ascii=False)


def _json_key(key: Any) -> str:
    return str(key) if isinstance(key, int) else json.dumps(str(key), ensure_ascii=False)


def java_double(x: float) -> str:
    """``Double.toString``: plain decimals in [1e-3, 1e7), otherwise ``1.5E7`` notation (both shortest
    round-trip digits, as Python's ``repr``)."""
    if math.isnan(x):
        return "NaN"
    if math.isinf(x):
        return "Infinity" if x > 0 else "-Infinity"
    if x == 0 or 1e-3 <= abs(x) < 1e7:
        return repr(float(x))
    sign, digits, exponent = Decimal(repr(float(x))).normalize().as_tuple()
    text = "".join(map(str, digits))
    return f"{'-' if sign else ''}{text[0]}.{text[1:] or '0'}E{exponent + len(text) - 1}"


def java_map(mapping: Mapping[Any, Any]) -> str:
    """``AbstractMap.toString``: ``{k=v, k2=v2}``."""
    return "{" + ", ".join(f"{k}={v}" for k, v in mapping.items()) + "}"


def java_bool(value: bool) -> str:
    return "true" if value else "false"


def perm_string(perm: int) -> str:
    """``PermName.perm2String``: 6 is ``RW-``."""
    return ("R" if perm & PERM_READ else "-") + ("W" if perm & PERM_WRITE else "-") + \
        ("X" if perm & PERM_INHERIT else "-")


def human_time2(millis: int) -> str:
    """``UtilAll.timeMillisToHumanString2``: local time as ``2026-11-25 21:40:00,123``."""
    t = time.localtime(millis / 1000)
    return time.strftime("%Y-%m-%d %H:%M:%S", t) + f",{millis % 1000:03d}"


def front(text: str | None, size: int) -> str:
    """``UtilAll.frontStringAtLeast``: at most ``size`` characters; Java prints a missing one as null."""
    return "null" if text is None else text[:size]
