"""A batch send's records, written from the request body straight into the commit log.

A SEND_BATCH_MESSAGE body is a run of entries (``TOTALSIZE | MAGIC | BODYCRC | FLAG | BODYLEN+BODY |
PROPLEN+PROPERTIES``, see :func:`wire.message.decode_batch`). Every entry becomes one record whose
properties are the entry's own string, kept byte for byte, with the container's properties it lacks
appended (the container is the request header's properties plus the broker's CLUSTER): what decoding,
merging and re-encoding both gave, without doing either.

Two functions do the work, in two passes over the body, and build no object per message:

* :func:`measure` checks every entry and returns how many records the batch makes and their total size,
  so the store can reserve room for all of them at once;
* :func:`write` encodes the records at their final offsets into a writable buffer (the commit log's
  mapping) and returns what the store's dispatch needs: the consume-queue units as packed bytes, the
  index items as packed (hash, offset) pairs, the offset message ids and the UNIQ_KEYs.

Both come from the C extension :mod:`wire._batchc` when it is built, else from the Python code below,
which is their specification: ``tests/wire/test_batch.py`` holds the two byte-for-byte equal. Set
``FERRYMQ_PURE_PYTHON=1`` to use the Python code.

The layout facts stay in :mod:`wire.message`: the caller packs every field that is the same for the
whole batch into a *template* of the record's fixed part, and each record copies it and fills in
TOTALSIZE, BODYCRC, FLAG, QUEUEOFFSET, PHYSICALOFFSET and BODYLEN (:data:`VARYING_FIELDS`).
"""

from __future__ import annotations

import functools
import struct
import zlib
from dataclasses import dataclass
from typing import Iterator

from . import native
from .message import (
    MAX_PROPERTIES_LEN,
    POS_BODYCRC,
    POS_PHYSICALOFFSET,
    POS_QUEUEOFFSET,
    POS_TOTALSIZE,
    MessageConst,
    RecordError,
    encode_properties,
    iter_batch,
    java_string_hash,
)

POS_FLAG = 16
#: the fixed-part fields that differ between a batch's records (BODYLEN is the fixed part's last 4 bytes)
VARYING_FIELDS = {"total_size": POS_TOTALSIZE, "body_crc": POS_BODYCRC, "flag": POS_FLAG,
                  "queue_offset": POS_QUEUEOFFSET, "commitlog_offset": POS_PHYSICALOFFSET}
#: most container properties a batch may carry (the suffix table has 2**n entries)
MAX_CONTAINER_KEYS = 12
#: the properties whose values the dispatch reads: (TAGS, KEYS, UNIQ_KEY, WAIT)
WATCHED = (MessageConst.TAGS, MessageConst.KEYS, MessageConst.UNIQ_KEY, MessageConst.WAIT_STORE_MSG_OK)

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_Q = struct.Struct(">q")
#: a consume-queue unit: commit-log offset, size, tag code (server/store/consume_queue.py uses it)
CQ_UNIT = struct.Struct(">qiq")
#: an index item to add: key hash, commit-log offset (server/store/index.py reads them)
INDEX_ITEM = struct.Struct(">Iq")


class PropertiesTooLong(ValueError):
    """An entry's properties, with the container's appended, exceed PROPLEN's int16."""


@dataclass(frozen=True, slots=True)
class Stamp:
    """The container's properties as each entry gets them.

    ``keys`` are the container's keys (UTF-8); ``suffixes[mask]`` is what an entry that already has the
    keys whose bits are set in ``mask`` gets appended (bit i is ``keys[i]``); ``values`` are the
    container's values of :data:`WATCHED` (None where it has none): an entry without one of its own
    reads the container's.
    """

    keys: tuple[bytes, ...]
    suffixes: tuple[bytes, ...]
    values: tuple[bytes | None, ...]


@functools.lru_cache(maxsize=256)
def _stamp(items: tuple[tuple[str, str], ...]) -> Stamp:
    keys = tuple(k for k, _ in items)
    suffixes = tuple(
        encode_properties({k: v for i, (k, v) in enumerate(items) if not mask >> i & 1}).encode()
        for mask in range(1 << len(items))
    )
    values = tuple(dict(items).get(w) for w in WATCHED)
    return Stamp(tuple(k.encode() for k in keys), suffixes,
                 tuple(v.encode() if v is not None else None for v in values))


def stamp(container: dict[str, str]) -> Stamp:
    """The :class:`Stamp` of a container's properties (cached: a producer sends the same ones each time).
    Raises ValueError when it carries more than :data:`MAX_CONTAINER_KEYS` properties."""
    if len(container) > MAX_CONTAINER_KEYS:
        raise ValueError(f"the batch's own properties are {len(container)}; at most {MAX_CONTAINER_KEYS} are supported")
    return _stamp(tuple(container.items()))


# ---------------------------------------------------------------------------------------------
# The Python implementation (the specification of wire/_batchc.c)
# ---------------------------------------------------------------------------------------------


def _entries(body: bytes | memoryview, stamp: Stamp):
    """Yield (flag, body slice, own properties bytes, suffix, watched values, offset) per entry."""
    keys = stamp.keys
    for at, flag, ebody, own in iter_batch(body):
        pairs = {}
        for seg in own.split(b"\x02"):  # the lenient reading of decode_properties
            sep = seg.find(b"\x01")
            if 1 <= sep < len(seg) - 1:
                pairs[seg[:sep]] = seg[sep + 1 :]
        mask = 0
        for i, k in enumerate(keys):
            if k in pairs:
                mask |= 1 << i
        watched = tuple(pairs.get(w.encode(), v) for w, v in zip(WATCHED, stamp.values))
        yield flag, ebody, own, stamp.suffixes[mask], watched, at


def _stored_len(own: bytes, suffix: bytes) -> int:
    return len(own) + len(suffix) + (1 if suffix and own and own[-1] != 2 else 0)


def py_measure(body: bytes | memoryview, stamp: Stamp, overhead: int) -> tuple[int, int, bool]:
    """(records, their total size, whether the first one asks to wait for the store); ``overhead`` is a
    record's size less its body and properties. Raises RecordError for a malformed entry and
    :class:`PropertiesTooLong` when an entry's stored properties would not fit their length field."""
    count = total = 0
    wait = True
    for _flag, ebody, own, suffix, watched, at in _entries(body, stamp):
        plen = _stored_len(own, suffix)
        if plen > MAX_PROPERTIES_LEN:
            raise PropertiesTooLong(f"batch entry properties are {plen} bytes at byte offset {at}; "
                                    f"at most {MAX_PROPERTIES_LEN}")
        if count == 0:
            wait = watched[3] != b"false"
        count += 1
        total += overhead + len(ebody) + plen
    return count, total, wait


def py_write(buf, pos: int, body: bytes | memoryview, stamp: Stamp, template: bytes, tail: bytes,
             queue_offset: int, commitlog_offset: int, index_prefix: bytes | None,
             id_prefix: str) -> tuple[int, bytes, bytes, str, str]:
    """Write the batch's records at ``buf[pos:]``, the first with QUEUEOFFSET ``queue_offset`` and
    PHYSICALOFFSET ``commitlog_offset``; ``template`` is the fixed part with the batch-wide fields,
    ``tail`` the TOPICLEN+TOPIC field. Returns (end position, consume-queue units, index items,
    offset message ids joined by ",", UNIQ_KEYs joined by ","). Index items (``crc32(topic#key)``
    for the UNIQ_KEY and each KEYS token) are made only when ``index_prefix`` (``b"topic#"``) is given.
    Call :func:`measure` first: it validates what this trusts."""
    flen = len(template)
    units, items, ids, uniqs = [], [], [], []
    phys, qo = commitlog_offset, queue_offset
    for flag, ebody, own, suffix, (tags, keys, uniq, _wait), _at in _entries(body, stamp):
        blen = len(ebody)
        stored = own + b"\x02" + suffix if suffix and own and own[-1] != 2 else own + suffix
        size = flen + blen + len(tail) + 2 + len(stored)
        if pos + size > len(buf):
            raise ValueError("the batch does not fit in the buffer")
        rec = bytearray(template)
        _I32.pack_into(rec, POS_TOTALSIZE, size)
        _I32.pack_into(rec, POS_BODYCRC, zlib.crc32(ebody) & 0x7FFFFFFF)
        _I32.pack_into(rec, POS_FLAG, flag)
        _Q.pack_into(rec, POS_QUEUEOFFSET, qo)
        _Q.pack_into(rec, POS_PHYSICALOFFSET, phys)
        _I32.pack_into(rec, flen - 4, blen)
        buf[pos : pos + size] = b"".join((rec, ebody, tail, _I16.pack(len(stored)), stored))
        units.append(CQ_UNIT.pack(phys, size, java_string_hash(tags.decode()) if tags else 0))
        if index_prefix is not None:
            for key in ([uniq] if uniq else []) + (keys.split(b" ") if keys else []):
                if key:
                    items.append(INDEX_ITEM.pack(zlib.crc32(index_prefix + key) & 0x7FFFFFFF, phys))
        ids.append(f"{id_prefix}{phys:016X}")
        if uniq:
            uniqs.append(uniq.decode())
        pos += size
        phys += size
        qo += 1
    return pos, b"".join(units), b"".join(items), ",".join(ids), ",".join(uniqs)


def _c_functions():
    _batchc = native.built("ferrymq.wire._batchc")
    if _batchc is None:  # not built (no C compiler at install): the Python code serves
        return None
    _batchc.configure(RecordError, PropertiesTooLong, tuple(w.encode() for w in WATCHED), MAX_PROPERTIES_LEN)
    return _batchc.measure, _batchc.write


#: (measure, write) of the C extension, None when it is not built
C_FUNCTIONS = _c_functions()
measure, write = (py_measure, py_write) if native.load("ferrymq.wire._batchc") is None else C_FUNCTIONS


def unit_items(units: bytes) -> Iterator[tuple[int, int, int]]:
    """The (commit-log offset, size, tag code) of packed consume-queue units."""
    return CQ_UNIT.iter_unpack(units)


def index_items(items: bytes) -> Iterator[tuple[int, int]]:
    """The (key hash, commit-log offset) of packed index items."""
    return INDEX_ITEM.iter_unpack(items)
