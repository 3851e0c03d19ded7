"""Build hook for the compiled parts; everything else is in pyproject.toml.

* ``wire._batchc`` and ``server.store._indexc`` (C) write batch sends (see wire/batch.py); ``wire._headerc``
  (C) reads and writes ROCKETMQ (binary) headers (wire/serialization.py); ``wire._crc`` (C) computes
  BODYCRC with PCLMULQDQ where the CPU has it (wire/crc32_fast.h, also used by ``wire._batchc``);
  ``server.store._writec`` (C) writes commit-log records without letting go of the GIL (store/mapped_file.py).
* The broker's hot-path modules below are compiled with Cython, unchanged: the same ``.py`` files, run
  faster. ``wire/_compiled.py`` imports a module's source instead whenever it is newer than its build.

All of it is optional: without a C compiler, zlib's header or Cython the install still succeeds and the
Python code runs as it is.
"""

import os

from setuptools import Extension, setup

#: the modules a send, a pull and a group commit run through
HOT_PATH = [
    "wire/command.py", "wire/frame.py", "wire/serialization.py", "wire/message.py", "wire/batch.py",
    "wire/topics.py",
    "server/remoting/protocol.py", "server/remoting/dispatch.py", "server/remoting/pending.py",
    "server/broker/processors/send.py", "server/broker/processors/pull.py", "server/broker/processors/common.py",
    "server/broker/store_adapter.py", "server/broker/longpoll.py", "server/broker/schedule.py",
    "server/broker/context.py", "server/broker/topics.py",
    "server/store/message_store.py", "server/store/commitlog.py", "server/store/consume_queue.py",
    "server/store/index.py", "server/store/mapped_file.py", "server/store/flush.py",
    "server/store/twisted_adapter.py", "server/store/status.py",
]

extensions = [
    Extension("wire._batchc", ["wire/_batchc.c"], depends=["wire/crc32_fast.h"], libraries=["z"], optional=True,
              extra_compile_args=["-O2"]),
    Extension("wire._crc", ["wire/_crc.c"], depends=["wire/crc32_fast.h"], libraries=["z"], optional=True,
              extra_compile_args=["-O2"]),
    Extension("server.store._indexc", ["server/store/_indexc.c"], optional=True, extra_compile_args=["-O2"]),
    Extension("server.store._writec", ["server/store/_writec.c"], optional=True, extra_compile_args=["-O2"]),
    Extension("wire._headerc", ["wire/_headerc.c"], optional=True, extra_compile_args=["-O2"]),
]
try:
    from Cython.Build import cythonize
except ImportError:
    pass
else:
    compiled = cythonize(HOT_PATH, build_dir="build/cython", nthreads=os.cpu_count() or 1, quiet=True,
                         compiler_directives={"language_level": 3, "binding": True})
    for ext in compiled:
        ext.optional = True
    extensions += compiled

setup(ext_modules=extensions, options={"build_ext": {"parallel": os.cpu_count() or 1}})
