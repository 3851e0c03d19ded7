"""Processes a test run starts die with it: a killed or timed-out pytest leaves no server, JVM or mosquitto
behind on a machine shared with others."""

from __future__ import annotations

import ctypes
import os
import signal
import sys

PR_SET_PDEATHSIG = 1


def die_with_parent(parent: int | None = None) -> None:
    """Ask the kernel to SIGKILL this process when its parent dies (Linux; elsewhere the fixtures' teardown
    is all there is). With ``parent``, exit at once if that process died before the request took effect.

    Called in the child: best after exec, from its own entry point (:func:`main` for a program that has
    none), since a ``preexec_fn`` runs between fork and exec of a test process that may run threads. The
    kernel ties the signal to the thread that forked: start such processes from a thread that outlives them."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    except (OSError, AttributeError):
        pass
    if parent is not None and os.getppid() != parent:
        sys.exit(1)


def main() -> None:
    """``python -m ferrymq.testing.pdeathsig PARENT_PID PROGRAM [ARG...]``: PROGRAM, killed when the test
    process PARENT_PID dies (the request survives the exec), for programs with no entry point of ours."""
    die_with_parent(int(sys.argv[1]))
    os.execvp(sys.argv[2], sys.argv[2:])


if __name__ == "__main__":
    main()
