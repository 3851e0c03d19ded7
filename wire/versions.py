"""Apache's ``MQVersion.Version``: a command's ``version`` field carries an ordinal of this enum, and
tools print the constant's name (``V5_5_0``).

The enum is regular enough to build: sixteen 3.0.0 pre-releases, then a ``_SNAPSHOT`` and a release per
patch (3.0.1-3.0.15, 3.1.0-3.2.9, 3.3.1-3.9.9 without x.x.0, 4.0.0-5.9.9), then ``HIGHER_VERSION``.
"""

from __future__ import annotations


def _names() -> tuple[str, ...]:
    names = ["V3_0_0_SNAPSHOT", "V3_0_0_ALPHA1", *(f"V3_0_0_BETA{i}" for i in range(1, 6))]
    for beta in range(6, 10):
        names += [f"V3_0_0_BETA{beta}_SNAPSHOT", f"V3_0_0_BETA{beta}"]
    names.append("V3_0_0_FINAL")
    for major in (3, 4, 5):
        for minor in range(10):
            if (major, minor) == (3, 0):
                patches = range(1, 16)
            else:
                patches = range(1 if major == 3 and minor >= 3 else 0, 10)
            for patch in patches:
                names += [f"V{major}_{minor}_{patch}_SNAPSHOT", f"V{major}_{minor}_{patch}"]
    names.append("HIGHER_VERSION")
    return tuple(names)


#: every ``MQVersion.Version`` name, by ordinal
VERSION_NAMES = _names()


def version_desc(ordinal: int) -> str:
    """``MQVersion.getVersionDesc``: the name of an ordinal; past the table, the last name."""
    return VERSION_NAMES[min(max(ordinal, 0), len(VERSION_NAMES) - 1)]
