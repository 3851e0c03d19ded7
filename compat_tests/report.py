"""Turns a junit-xml report of the compatibility suite into the table of docs/compatibility.md.

    .venv/bin/pytest compat_tests -o junit_family=xunit1 --junitxml=/tmp/compat.xml
    .venv/bin/python -m compat_tests.report /tmp/compat.xml > table.md

`make test` and `make compat` run it after the suite, so docs/compatibility.md always shows the last
complete run (tests/test_compatibility_doc.py checks it lists every scenario there is).

One row per scenario (test function); its parametrization ids say the server (``apache`` / ``ferrymq``)
and the client (``java-5.5.0``, ``java-4.9.8``, ``go``); the ``tools`` property (conftest.py) says which
of them are Java clients (the ids of mqadmin-only tests name mqadmin's version) and adds mqadmin, the C++
binding and fixed Java clients; the ``mqadmin`` property gives mqadmin's versions. A result cell reads ``passed`` when every case of that
server passed, else lists the cases that did not (``xfail`` names a known FerryMQ defect).
"""

from __future__ import annotations

import re
import sys
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field

SERVERS = ("ferrymq", "apache")
JAVA = re.compile(r"java-(\d[\w.]*)")


@dataclass
class Case:
    server: str | None
    client: str | None  # java-5.5.0 / java-4.9.8 / go / None
    outcome: str  # passed / failed / skipped / xfail / xpass
    message: str = ""


@dataclass
class Row:
    module: str
    name: str
    doc: str = ""
    tools: set[str] = field(default_factory=set)
    mqadmin: set[str] = field(default_factory=set)
    cases: list[Case] = field(default_factory=list)


def _outcome(tc: ET.Element) -> tuple[str, str]:
    for child in tc:
        if child.tag in ("failure", "error"):
            return "failed", (child.get("message") or "")[:120]
        if child.tag == "skipped":
            kind = "xfail" if (child.get("type") == "pytest.xfail") else "skipped"
            return kind, (child.get("message") or "")[:160]
    return "passed", ""


def server_of(params: str) -> str | None:
    """The server a case ran against, from its parametrization id (``apache-java-5.5.0`` -> apache)."""
    ids = params.split("-") if params else []
    return next((s for s in SERVERS if s in ids), None)


def title(name: str) -> str:
    """A scenario's title in the table, from its test function's name."""
    return name.removeprefix("test_").replace("_", " ")


def parse(path: str) -> list[Row]:
    """The compatibility suite's cases in a junit-xml report (of that suite alone or of all of `make test`)."""
    rows: dict[tuple[str, str], Row] = {}
    for tc in ET.parse(path).getroot().iter("testcase"):
        if not tc.get("classname", "").startswith("compat_tests."):
            continue
        name = tc.get("name", "")
        base, _, params = name.partition("[")
        joined = params.rstrip("]")
        ids = joined.split("-") if joined else []
        server = server_of(joined)
        java = JAVA.search(joined)
        client = f"java-{java.group(1)}" if java else ("go" if "go" in ids else None)
        module = tc.get("classname", "").rsplit(".", 1)[-1]
        row = rows.setdefault((module, base), Row(module, base))
        props = {p.get("name"): p.get("value") for p in tc.iter("property")}
        row.doc = row.doc or props.get("doc", "")
        row.tools |= {t for t in (props.get("tools") or "").split(",") if t}
        row.mqadmin |= {v for v in (props.get("mqadmin") or "").split(",") if v}
        outcome, message = _outcome(tc)
        row.cases.append(Case(server, client, outcome, message))
    return list(rows.values())


def _clients(row: Row, prefix: str) -> str:
    found = sorted({c.client for c in row.cases if c.client and c.client.startswith(prefix)}, reverse=True)
    if prefix == "java":
        if "java" not in row.tools:
            return "–"
        versions = [c.removeprefix("java-") for c in found]
        return ", ".join(versions or ["5.5.0"])
    return "v2.1.2" if found or "go" in row.tools else "–"


def _result(row: Row, server: str) -> str:
    cases = [c for c in row.cases if c.server == server]
    if not cases:
        return "–"
    if all(c.outcome == "passed" for c in cases):
        return f"passed ({len(cases)})"
    bad = [f"{c.outcome} [{c.client or 'all'}]" + (f": {c.message}" if c.outcome == "xfail" else "")
           for c in cases if c.outcome != "passed"]
    return f"{sum(c.outcome == 'passed' for c in cases)}/{len(cases)} passed; " + "; ".join(bad)


def in_table(module: str) -> bool:
    """Scenarios run against both servers are in the table, except FerryMQ's own SDK's (test_sdk_clients):
    it is no official client."""
    return module != "test_sdk_clients"


def table(rows: list[Row]) -> str:
    out = ["| scenario | Java client | Go client | C++ (Python binding) | mqadmin | FerryMQ | Apache 5.5.0 |",
           "|---|---|---|---|---|---|---|"]
    for row in rows:
        cpp = "0.5.0rc2" if "cpp" in row.tools else "–"
        mq = ", ".join(sorted(row.mqadmin, reverse=True)) if "mqadmin" in row.tools else "–"
        name = title(row.name)
        cells = [f"**{name}** — {row.doc}" if row.doc else f"**{name}**", _clients(row, "java"),
                 _clients(row, "go"), cpp, mq, _result(row, "ferrymq"), _result(row, "apache")]
        out.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
    return "\n".join(out) + "\n"


START, END = "<!-- compat-table:start -->", "<!-- compat-table:end -->"


def summary(path: str, rows: list[Row]) -> str:
    root = ET.parse(path).getroot()
    suite = root if root.tag == "testsuite" else root.find("testsuite")
    stamp = (suite.get("timestamp") or "")[:16].replace("T", " ") if suite is not None else ""
    seconds = sum(float(tc.get("time") or 0) for tc in root.iter("testcase")
                  if tc.get("classname", "").startswith("compat_tests."))
    cases = [c for r in rows for c in r.cases]
    counts = {k: sum(c.outcome == k for c in cases) for k in ("passed", "failed", "xfail", "skipped")}
    return (f"Generated by `compat_tests/report.py` from the run of {stamp} UTC (`compat_tests/`: "
            f"{seconds / 60:.1f} min of test time on 2 shared cores). Matrix cases: {counts['passed']} passed, "
            f"{counts['failed']} failed, {counts['xfail']} xfail, {counts['skipped']} skipped.\n")


def main(argv: list[str]) -> int:
    """``report.py XML`` prints the table; ``report.py XML --write DOC`` replaces the table in DOC."""
    if len(argv) not in (1, 3) or (len(argv) == 3 and argv[1] != "--write"):
        print(__doc__, file=sys.stderr)
        return 2
    rows = [r for r in parse(argv[0]) if any(c.server for c in r.cases) and in_table(r.module)]
    text = summary(argv[0], rows) + "\n" + table(rows)
    if len(argv) == 1:
        sys.stdout.write(text)
        return 0
    from pathlib import Path

    doc = Path(argv[2])
    old = doc.read_text()
    if START not in old or END not in old:
        raise SystemExit(f"{doc} has no {START} ... {END} markers to put the table between")
    head, _, rest = old.partition(START)
    _, _, tail = rest.partition(END)
    doc.write_text(f"{head}{START}\n{text}{END}{tail}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
