"""Build hook: the package layout and the compiled parts; everything else is in pyproject.toml.

The folders ``wire/``, ``remoting/``, ``server/``, ``sdk_py/``, ``gateways/``, ``pipeline/`` and ``testing/``
install as ``ferrymq.wire``, ``ferrymq.remoting``, ``ferrymq.server``, ``ferrymq.sdk``, ... (the list is
``FOLDERS`` in ``wire/native.py``): one namespace, nothing else at top level. The compiled parts (C extensions beside their Python specification, and hot-path
modules compiled by Cython) are listed in ``wire/native.py``. All of them are optional: without a C
compiler, zlib's header or Cython the install still succeeds and the Python code runs as it is.
``FERRYMQ_NO_CYTHON=1`` builds the C parts only (the hot-path modules then run from their source,
so an edit needs no compile).
"""

import os
import runpy
from types import SimpleNamespace

from setuptools import Extension, find_packages, setup

native = SimpleNamespace(**runpy.run_path(os.path.join(os.path.dirname(__file__) or ".", "wire", "native.py")))

package_dir = {f"ferrymq.{name}": folder for name, folder in native.FOLDERS.items()}
packages = [
    f"ferrymq.{name}{'.' + sub if sub else ''}"
    for name, folder in native.FOLDERS.items()
    for sub in ["", *find_packages(folder)]
]

extensions = [
    Extension(native.module_name(part.source), [part.source], depends=["wire/crc32_fast.h"],
              libraries=["z"] if part.needs_zlib else [], optional=True, extra_compile_args=["-O2"])
    for part in native.C_PARTS
]
try:
    if os.environ.get("FERRYMQ_NO_CYTHON"):
        raise ImportError("FERRYMQ_NO_CYTHON is set")
    from Cython.Build import cythonize
except ImportError:
    pass
else:
    compiled = cythonize([Extension(native.module_name(path), [path]) for path in native.CYTHON_SOURCES],
                         build_dir="build/cython", nthreads=os.cpu_count() or 1, quiet=True,
                         compiler_directives={"language_level": 3, "binding": True})
    for ext in compiled:
        ext.optional = True
    extensions += compiled

setup(packages=packages, package_dir=package_dir, ext_modules=extensions,
      options={"build_ext": {"parallel": os.cpu_count() or 1}})
