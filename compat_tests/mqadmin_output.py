"""Parsers for what ``mqadmin`` prints, so tests can assert on fields rather than on raw text.

Formats (rocketmq-tools 5.5.0 and 4.9.8):

* ``clusterList``: a header line of ``#``-prefixed column names, then one whitespace-separated row per
  broker whose first five columns are cluster, broker name, broker id, address, version
  (``V5_5_0``); later columns (TPS, timer, hours, disk) differ between 4.9 and 5.x.
* ``topicList``: one topic name per line.
* ``topicRoute``: the TopicRouteData as fastjson pretty-prints it: tab-indented, with unquoted integer
  keys in ``brokerAddrs`` (``0:"127.0.0.1:10911"``), so it is not strict JSON.
* ``haStatus``: per broker a block of ``#Name<TAB>value`` lines starting with ``#MasterAddr``; a master's
  block then has a header and one row per slave (address, ack offset, diff, KB/s, ``OK`` or
  ``Fall Behind``, transfer-from offset).
* ``brokerStatus -c``: ``address key: value`` per line, every broker of the cluster (``-b``: no address).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import orjson

# An unquoted integer map key as fastjson writes it: `{0:` or `,1:` possibly after whitespace.
_BARE_INT_KEY = re.compile(r'([{,]\s*)(-?\d+)(\s*:)')


@dataclass(frozen=True)
class ClusterRow:
    cluster: str
    broker_name: str
    broker_id: int
    addr: str
    version: str
    rest: tuple[str, ...]


def cluster_list(text: str) -> list[ClusterRow]:
    rows = []
    for line in text.splitlines():
        cols = line.split()
        if not cols or line.lstrip().startswith("#") or len(cols) < 5 or not cols[2].isdigit():
            continue
        rows.append(ClusterRow(cols[0], cols[1], int(cols[2]), cols[3], cols[4], tuple(cols[5:])))
    return rows


def topic_list(text: str) -> list[str]:
    return [line.strip() for line in text.splitlines() if line.strip()]


def fastjson_pretty(text: str) -> dict:
    """Parse fastjson output (pretty or compact) that may carry unquoted integer keys."""
    start = text.find("{")
    if start < 0:
        raise ValueError(f"no JSON object in mqadmin output:\n{text}")
    return orjson.loads(_BARE_INT_KEY.sub(r'\1"\2"\3', text[start:]))


_SLAVE_ROW = re.compile(r"^(\S+)\s+(-?\d+)\s+(-?\d+)\s+([\d.]+)\s+(OK|Fall Behind)\s+(-?\d+)\s*$")


@dataclass(frozen=True)
class HaSlaveRow:
    addr: str
    ack_offset: int
    diff: int
    kib_per_s: float
    status: str
    transfer_from: int


@dataclass
class HaStatusBlock:
    """One broker's part of ``haStatus``: its ``#Name`` fields (``MasterAddr`` first) and, for a master,
    its slaves."""

    fields: dict[str, str]
    slaves: list[HaSlaveRow]


def ha_status(text: str) -> list[HaStatusBlock]:
    blocks: list[HaStatusBlock] = []
    for line in text.splitlines():
        if line.startswith("#MasterAddr\t"):
            blocks.append(HaStatusBlock({}, []))
        if not blocks:
            continue
        if line.startswith("#") and "\t" in line:
            name, value = line[1:].split("\t", 1)
            blocks[-1].fields[name] = value.strip()
        elif m := _SLAVE_ROW.match(line.strip()):
            blocks[-1].slaves.append(HaSlaveRow(m[1], int(m[2]), int(m[3]), float(m[4]), m[5], int(m[6])))
    return blocks


def broker_status(text: str) -> dict[str, dict[str, str]]:
    """``brokerStatus -c CLUSTER``: address -> its runtime table."""
    out: dict[str, dict[str, str]] = {}
    for line in text.splitlines():
        head, sep, value = line.partition(": ")
        cols = head.split()
        if sep and len(cols) == 2:
            out.setdefault(cols[0], {})[cols[1]] = value.strip()
    return out
