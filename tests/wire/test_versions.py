"""MQVersion's names by ordinal, against the ordinals the wire code names and Apache's enum length."""

from __future__ import annotations

import pytest

from ferrymq.wire import codes
from ferrymq.wire.versions import VERSION_NAMES, version_desc


@pytest.mark.parametrize("name", [n for n in dir(codes) if n.startswith("VERSION_V")])
def test_named_ordinals(name):
    assert version_desc(getattr(codes, name)) == name.removeprefix("VERSION_")


def test_table_bounds():
    assert len(VERSION_NAMES) == 613 and len(set(VERSION_NAMES)) == 613
    assert version_desc(0) == "V3_0_0_SNAPSHOT" and version_desc(15) == "V3_0_0_FINAL"
    assert version_desc(409) == "V4_9_8"
    assert VERSION_NAMES.index("V3_3_1_SNAPSHOT") == VERSION_NAMES.index("V3_2_9") + 1
    assert version_desc(611) == "V5_9_9" and version_desc(10_000) == "HIGHER_VERSION"
