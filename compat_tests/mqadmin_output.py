"""Parsers for what ``mqadmin`` prints, so tests can assert on fields rather than on raw text.

Formats (rocketmq-tools 5.5.0 and 4.9.8):

* ``clusterList``: a header line of ``#``-prefixed column names, then one whitespace-separated row per
  broker whose first five columns are cluster, broker name, broker id, address, version
  (``V5_5_0``); later columns (TPS, timer, hours, disk) differ between 4.9 and 5.x.
* ``topicList``: one topic name per line.
* ``topicRoute``: the TopicRouteData as fastjson pretty-prints it: tab-indented, with unquoted integer
  keys in ``brokerAddrs`` (``0:"127.0.0.1:10911"``), so it is not strict JSON.
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
