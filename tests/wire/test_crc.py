"""BODYCRC in C (wire/crc32_fast.h: PCLMULQDQ folding, zlib for the rest) gives zlib.crc32's value."""

from __future__ import annotations

import os
import zlib

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ferrymq.wire import message

try:
    from ferrymq.wire import _crc
except ImportError:  # built at install only when a C compiler is present
    _crc = None

pytestmark = pytest.mark.skipif(_crc is None, reason="wire._crc not built (no C compiler at install)")


@given(st.binary(max_size=5000), st.integers(0, 2**32 - 1))
def test_any_bytes_from_any_start_give_zlibs_crc(data, start):
    assert _crc.crc32(data) == zlib.crc32(data)
    assert _crc.crc32(data, start) == zlib.crc32(data, start)


@pytest.mark.parametrize("size", [0, 1, 15, 16, 63, 64, 65, 79, 80, 127, 128, 129, 1024, 1100, 4096, 65536 + 7])
def test_sizes_around_the_folding_steps(size):
    data = os.urandom(size)
    assert _crc.crc32(data) == zlib.crc32(data)
    assert _crc.crc32(memoryview(data)[1:]) == zlib.crc32(data[1:])
    assert message.body_crc(data) == zlib.crc32(data) & 0x7FFFFFFF


def test_a_crc_continues_across_pieces():
    data = os.urandom(10_000)
    crc = 0
    for i in range(0, len(data), 777):
        crc = _crc.crc32(data[i : i + 777], crc)
    assert crc == zlib.crc32(data)
