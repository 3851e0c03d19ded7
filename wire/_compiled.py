"""Compiled modules only while they match their source.

The install compiles the broker's hot-path modules with Cython (setup.py lists them) next to their
``.py`` files, where Python would prefer the compiled one even after the ``.py`` is edited. This finder,
installed by ``wire`` and ``server`` before any of their modules load, imports the ``.py`` instead when
it is newer than its compiled module (an edit, a checkout) or when ``FERRYMQ_PURE_PYTHON`` is set, so
the code that runs is always the code on disk; ``make`` (or ``pip install -e .``) compiles again.
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import logging
import os
import sys

log = logging.getLogger("ferrymq.compiled")

_PACKAGES = ("wire.", "server.")
#: module name -> "compiled" or why its source runs instead
STATE: dict[str, str] = {}


class _FreshCompiledFinder:
    @staticmethod
    def find_spec(fullname: str, path=None, target=None):
        if not fullname.startswith(_PACKAGES) or path is None:
            return None
        spec = importlib.machinery.PathFinder.find_spec(fullname, path)
        if spec is None or not isinstance(spec.loader, importlib.machinery.ExtensionFileLoader):
            return None
        source = _source_of(spec.origin)
        if source is None:  # a C-only module (wire._batchc): nothing to compare with
            return None
        if os.environ.get("FERRYMQ_PURE_PYTHON"):
            STATE[fullname] = "source (FERRYMQ_PURE_PYTHON)"
        elif os.stat(source).st_mtime > os.stat(spec.origin).st_mtime:
            STATE[fullname] = "source (newer than its compiled module: `make` compiles it again)"
        else:
            STATE[fullname] = "compiled"
            return spec
        return importlib.util.spec_from_file_location(fullname, source)


def _source_of(origin: str) -> str | None:
    for suffix in importlib.machinery.EXTENSION_SUFFIXES:
        if origin.endswith(suffix):
            source = origin[: -len(suffix)] + ".py"
            return source if os.path.exists(source) else None
    return None


def install() -> None:
    if not any(f is _FreshCompiledFinder for f in sys.meta_path):
        sys.meta_path.insert(0, _FreshCompiledFinder)


def report() -> None:
    """Log which hot-path modules run compiled (for the operator: a stale build is slower)."""
    stale = sorted(name for name, state in STATE.items() if state != "compiled")
    compiled = len(STATE) - len(stale)
    if stale:
        log.warning("%d modules run from source instead of compiled: %s", len(stale),
                    "; ".join(f"{name}: {STATE[name]}" for name in stale))
    log.info("%d hot-path modules run compiled", compiled)
    batch = sys.modules.get("wire.batch")
    if batch is not None and batch.C_FUNCTIONS is None:
        log.warning("wire._batchc is not built, so batch sends are encoded in Python (slower): install a C "
                    "compiler and zlib's header, then run `make compile`")
