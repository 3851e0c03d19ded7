"""Build hook for the optional C extensions; everything else is in pyproject.toml.

``wire._batchc`` and ``server.store._indexc`` speed up batch sends (see wire/batch.py). They are
optional: without a C compiler (or zlib's header, for ``_batchc``) the install still succeeds and the
Python code they mirror is used.
"""

from setuptools import Extension, setup

setup(ext_modules=[
    Extension("wire._batchc", ["wire/_batchc.c"], libraries=["z"], optional=True, extra_compile_args=["-O2"]),
    Extension("server.store._indexc", ["server/store/_indexc.c"], optional=True, extra_compile_args=["-O2"]),
])
