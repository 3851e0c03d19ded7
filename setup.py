"""Build hook for the optional C extension; everything else is in pyproject.toml.

``wire._batchc`` speeds up batch sends (see wire/batch.py). It is optional: without a C compiler the
install still succeeds and the pure-Python implementation is used.
"""

from setuptools import Extension, setup

setup(ext_modules=[Extension("wire._batchc", ["wire/_batchc.c"], optional=True, extra_compile_args=["-O2"])])
