"""docs/compatibility.md is generated from a run of the compatibility suite (`make test` rewrites its
table): it must name every scenario the suite has today, so a new scenario comes with a regenerated doc."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from compat_tests import report

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "compatibility.md"


def scenarios_in_suite() -> set[str]:
    """Titles of the compat tests that run against both servers, as the table writes them."""
    out = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider",
                          "compat_tests"], cwd=ROOT, capture_output=True, text=True, timeout=120, check=True).stdout
    found = set()
    for node in re.findall(r"^compat_tests/(\w+)\.py::(\w+)\[([^\]]*)\]$", out, flags=re.MULTILINE):
        module, name, params = node
        if report.server_of(params) and report.in_table(module):
            found.add(report.title(name))
    return found


def scenarios_in_doc() -> set[str]:
    text = DOC.read_text()
    table = text[text.index(report.START):text.index(report.END)]
    return set(re.findall(r"^\| \*\*(.+?)\*\*", table, flags=re.MULTILINE))


def test_the_doc_lists_every_scenario_of_the_suite():
    suite, doc = scenarios_in_suite(), scenarios_in_doc()
    assert len(suite) > 30
    assert suite - doc == set(), "scenarios missing from docs/compatibility.md: run `make compat` and commit the doc"
    assert doc - suite == set(), "docs/compatibility.md names scenarios the suite no longer has: run `make compat`"


def test_the_doc_counts_a_complete_run():
    head = DOC.read_text().partition(report.START)[2]
    counts = re.search(r"Matrix cases: (\d+) passed, (\d+) failed, (\d+) xfail, (\d+) skipped", head)
    assert counts, "the generated summary line is missing"
    assert int(counts.group(1)) >= len(scenarios_in_doc())
