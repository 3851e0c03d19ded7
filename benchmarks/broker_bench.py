"""Side-by-side broker benchmark: Apache RocketMQ and FerryMQ, same machine, same load tools (issue 6).

Run: ``.venv/bin/python -m benchmarks.broker_bench`` (quick sizes, a few minutes; prints a table), or
``--full --out results.json`` for the documented run (JSON + PNG plot). ``--phases fresh`` runs only the
fresh-store figure (sync sends from the first one, both brokers just launched on an empty store).
``--help`` lists the options.
Needs java, mvn (first run downloads Apache's jars) and, for the plot, matplotlib.
"""

from __future__ import annotations

import sys

from benchmarks.sidebyside.cli import main as _cli_main


def main(argv: list[str] | None = None) -> dict | None:
    """Quick sizes unless ``argv`` says otherwise (``python -m benchmarks`` calls this with no arguments)."""
    return _cli_main([] if argv is None else argv)


if __name__ == "__main__":
    main(sys.argv[1:])
