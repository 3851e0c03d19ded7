"""Text the way mqadmin's Java prints it: fastjson's pretty JSON, ``Double.toString``, ``Map.toString``,
``UtilAll`` time stamps, permission strings, and the order a ``java.util.HashMap`` walks its keys in.
Kept apart so each rule is tested once."""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable, Iterable, Mapping
from decimal import Decimal
from typing import Any, TypeVar

from ferrymq.wire.bodies import MessageQueue
from ferrymq.wire.message import java_string_hash

K = TypeVar("K")

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


# ---------------------------------------------------------------- java.util.HashMap iteration order

#: HashMap's default capacity and load factor
HASHMAP_CAPACITY = 16
HASHMAP_LOAD = 0.75


def mq_hash(mq: MessageQueue) -> int:
    """``MessageQueue.hashCode``: broker name, queue id and topic, 31-folded as Java ints."""
    h = 31 + java_string_hash(mq.broker_name or "")
    h = _int32(31 * h + mq.queue_id)
    return _int32(31 * h + java_string_hash(mq.topic or ""))


def capacity_after_puts(size: int, capacity: int = HASHMAP_CAPACITY) -> int:
    """The table size of a HashMap of ``capacity`` after ``size`` puts (it doubles past 3/4 full)."""
    while size > capacity * HASHMAP_LOAD:
        capacity *= 2
    return capacity


def capacity_of_put_all(size: int) -> int:
    """The table size ``new HashMap<>()`` takes on its first ``putAll`` of ``size`` entries."""
    wanted = int(size / HASHMAP_LOAD + 1.0)
    capacity = 1
    while capacity < wanted:
        capacity *= 2
    return capacity


def hashmap_order(keys: Iterable[K], hash_of: Callable[[K], int], capacity: int) -> list[K]:
    """The keys in the order a HashMap of ``capacity`` iterates them, inserted in the given order: by
    bucket (the hash with its high half folded in), insertion order within a bucket."""
    def bucket(key: K) -> int:
        h = hash_of(key) & 0xFFFFFFFF
        return (h ^ (h >> 16)) & (capacity - 1)

    return sorted(keys, key=bucket)  # sorted() is stable: a bucket keeps insertion order


def java_hashmap(mapping: Mapping[str, Any], capacity: int) -> str:
    """``HashMap<String, ?>.toString`` of a map filled in ``mapping``'s order."""
    order = hashmap_order(mapping, java_string_hash, capacity_after_puts(len(mapping), capacity))
    return java_map({key: mapping[key] for key in order})


def _int32(x: int) -> int:
    x &= 0xFFFFFFFF
    return x - 0x100000000 if x & 0x80000000 else x
