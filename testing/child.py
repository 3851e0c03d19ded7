"""The server process's entry point: ``python -m ferrymq.testing.child PARENT_PID standalone -c FILE``.

It asks the kernel to kill it when the test process dies (a killed or timed-out pytest leaves no server
behind), then runs ``ferrymq standalone`` exactly as ``python -m ferrymq.server.cli`` would. Done here
after exec rather than in a ``preexec_fn``, which is unsafe in a test process that runs threads.
"""

from __future__ import annotations

import ctypes
import os
import runpy
import signal
import sys

PR_SET_PDEATHSIG = 1


def main() -> None:
    parent = int(sys.argv.pop(1))
    try:
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    except (OSError, AttributeError):  # not Linux: the fixture's teardown is all there is
        pass
    if os.getppid() != parent:  # the test process died before the request took effect
        sys.exit(1)
    sys.argv[0] = "ferrymq"
    runpy.run_module("ferrymq.server.cli", run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main()
