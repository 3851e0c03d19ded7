"""The server process's entry point: ``python -m ferrymq.testing.child PARENT_PID standalone -c FILE``.

It asks the kernel to kill it when the test process dies (a killed or timed-out pytest leaves no server
behind), then runs ``ferrymq standalone`` exactly as ``python -m ferrymq.server.cli`` would. Done here
after exec rather than in a ``preexec_fn``, which is unsafe in a test process that runs threads.
"""

from __future__ import annotations

import runpy
import sys

from ferrymq.testing.pdeathsig import die_with_parent


def main() -> None:
    die_with_parent(int(sys.argv.pop(1)))
    sys.argv[0] = "ferrymq"
    runpy.run_module("ferrymq.server.cli", run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main()
