"""The compiled parts of FerryMQ, each beside the Python code that specifies it, and which of them runs.

Two kinds, both built at install when a C compiler is present and both optional:

* C extensions (``C_PARTS``): a module of the same behaviour as a Python function kept as its
  specification; the tests hold the two byte-for-byte equal. :func:`load` gives the extension, or None
  when it is not built or ``FERRYMQ_PURE_PYTHON`` is set, and the caller runs its Python code.
* Hot-path modules compiled by Cython unchanged (``CYTHON_SOURCES``): the same ``.py`` run faster.
  Python imports the compiled module whenever it exists, so an edited source is not what runs until
  it is compiled again (``make compile``; ``make test`` and ``make run`` do it). :func:`stale` names
  such modules; the test suite refuses to run with any, and the broker logs them. A compiled file left
  beside a source no list names (a module taken off ``CYTHON_SOURCES``) would be imported just the same
  and never rebuilt: :func:`unlisted` finds those.

This file imports nothing of FerryMQ: ``setup.py`` reads the lists from it.
"""

from __future__ import annotations

import importlib
import importlib.machinery
import logging
import os
import sys
from dataclasses import dataclass
from types import ModuleType

log = logging.getLogger("ferrymq.native")

#: set (to anything) to run every C part's Python specification instead
PURE_PYTHON_ENV = "FERRYMQ_PURE_PYTHON"


@dataclass(frozen=True)
class CPart:
    source: str  #: the C file, relative to the repository root
    spec: str  #: where its Python specification lives
    does: str  #: what it does, for the operator's log
    needs_zlib: bool = False


C_PARTS: tuple[CPart, ...] = (
    CPart("wire/_batchc.c", "wire/batch.py", "batch sends written as commit-log records", needs_zlib=True),
    CPart("wire/_crc.c", "wire/message.py", "BODYCRC folded with PCLMULQDQ", needs_zlib=True),
    CPart("wire/_headerc.c", "wire/serialization.py", "ROCKETMQ (binary) headers read and written"),
    CPart("server/store/_indexc.c", "server/store/index.py", "index entries of a batch put"),
    CPart("server/store/_writec.c", "server/store/mapped_file.py", "commit-log records written with pwrite"),
)

#: the modules a send, a pull and a group commit run through, compiled by Cython
CYTHON_SOURCES: tuple[str, ...] = (
    "wire/command.py", "wire/frame.py", "wire/connection.py", "wire/serialization.py", "wire/message.py",
    "wire/batch.py", "wire/topics.py",
    "remoting/protocol.py", "remoting/twisted_io.py", "remoting/dispatch.py", "remoting/pending.py",
    "server/broker/processors/send.py", "server/broker/processors/pull.py", "server/broker/processors/common.py",
    "server/broker/store_adapter.py", "server/broker/longpoll.py", "server/broker/parking.py",
    "server/broker/context.py", "server/broker/topics.py",
    "server/store/message_store.py", "server/store/commitlog.py", "server/store/consume_queue.py",
    "server/store/dispatch.py",
    "server/store/index.py", "server/store/mapped_file.py", "server/store/flush.py",
    "server/store/twisted_adapter.py", "server/store/status.py",
    # the gRPC port's calls: HTTP/2 read and answered, each call run, a send's message checked and stored
    "server/grpc/connection.py", "server/grpc/framing.py", "server/grpc/transport.py", "server/grpc/dispatch.py",
    "server/grpc/calls.py", "server/grpc/messages.py", "server/grpc/status.py",
)

#: ``ferrymq.<name>`` -> the folder of the repository it is built from
FOLDERS: dict[str, str] = {
    "wire": "wire", "remoting": "remoting", "server": "server", "sdk": "sdk_py", "gateways": "gateways",
    "pipeline": "pipeline", "testing": "testing",
}
_PACKAGE_OF_FOLDER = {folder: f"ferrymq.{name}" for name, folder in FOLDERS.items()}

#: module name -> "C" or why its Python specification runs instead
CHOICES: dict[str, str] = {}


def module_name(path: str) -> str:
    """``server/store/index.py`` -> ``ferrymq.server.store.index`` (likewise for a ``.c`` source)."""
    folder, _, rest = path.partition("/")
    return _PACKAGE_OF_FOLDER[folder] + "." + rest.rsplit(".", 1)[0].replace("/", ".")


_PART_OF_MODULE = {module_name(part.source): part for part in C_PARTS}


def built(module: str) -> ModuleType | None:
    """The C extension ``module`` if it is built, whatever the environment says (for its tests)."""
    if module not in _PART_OF_MODULE:
        raise KeyError(f"{module} is not a C part of FerryMQ (see wire/native.py)")
    try:
        return importlib.import_module(module)
    except ImportError:
        return None


def load(module: str) -> ModuleType | None:
    """The C extension the caller should use, or None to run its Python specification."""
    extension = built(module)
    if os.environ.get(PURE_PYTHON_ENV):
        CHOICES[module] = f"Python ({PURE_PYTHON_ENV} is set)"
        return None
    if extension is None:
        CHOICES[module] = "Python (not built: install a C compiler and zlib's header, then `make compile`)"
        return None
    CHOICES[module] = "C"
    return extension


def stale(modules: dict[str, ModuleType] | None = None) -> list[str]:
    """Cython-compiled modules loaded from a build older than their source (the edit does not run)."""
    modules = sys.modules if modules is None else modules
    found = []
    for source in CYTHON_SOURCES:
        module = modules.get(module_name(source))
        origin = getattr(module, "__file__", None) or ""
        if not origin.endswith(tuple(importlib.machinery.EXTENSION_SUFFIXES)):
            continue
        py = os.path.join(os.path.dirname(origin), os.path.basename(source))
        if os.path.exists(py) and os.stat(py).st_mtime > os.stat(origin).st_mtime:
            found.append(module_name(source))
    return found


def unlisted(root: str | None = None) -> list[str]:
    """Compiled files under the repository's ``root`` (this checkout by default) that neither list names:
    Python would import one instead of its ``.py``, and no build ever refreshes it."""
    root = root or os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    listed = {module_name(path) for path in CYTHON_SOURCES} | set(_PART_OF_MODULE)
    found = []
    for folder in FOLDERS.values():
        for directory, subdirs, files in os.walk(os.path.join(root, folder)):
            subdirs[:] = [d for d in subdirs if not d.startswith(".") and d != "__pycache__"]
            for name in files:
                suffix = next((s for s in importlib.machinery.EXTENSION_SUFFIXES if name.endswith(s)), None)
                if suffix is None:
                    continue
                path = os.path.relpath(os.path.join(directory, name[: -len(suffix)] + ".py"), root)
                if module_name(path) not in listed:
                    found.append(os.path.relpath(os.path.join(directory, name), root))
    return sorted(found)


def compiled_modules(modules: dict[str, ModuleType] | None = None) -> list[str]:
    """The loaded hot-path modules that run compiled by Cython."""
    modules = sys.modules if modules is None else modules
    return [
        module_name(source) for source in CYTHON_SOURCES
        if (getattr(modules.get(module_name(source)), "__file__", None) or "").endswith(
            tuple(importlib.machinery.EXTENSION_SUFFIXES))
    ]


def report() -> None:
    """Log which compiled parts run (a stale or missing build is slower, or runs old code)."""
    for module, choice in sorted(CHOICES.items()):
        part = _PART_OF_MODULE[module]
        if choice == "C":
            log.info("%s: C (%s)", module, part.does)
        else:
            log.warning("%s runs its Python specification %s: %s", part.does, part.spec, choice)
    log.info("%d hot-path modules run compiled by Cython", len(compiled_modules()))
    for module in stale():
        log.warning("%s is compiled from an older source, so the edit does not run: `make compile`", module)
    for path in unlisted():
        log.warning("%s is a compiled module no list in wire/native.py names: it runs instead of its source "
                    "and is never rebuilt; delete it", path)
