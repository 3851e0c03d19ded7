"""Build hook for the optional C extensions; everything else is in pyproject.toml.

``wire._batchc`` and ``server.store._indexc`` speed up batch sends (see wire/batch.py). They are
optional: without a C compiler the install still succeeds and the Python code they mirror is used.
"""

from setuptools import Extension, setup

setup(ext_modules=[
    Extension(name, [path], optional=True, extra_compile_args=["-O2"])
    for name, path in [("wire._batchc", "wire/_batchc.c"), ("server.store._indexc", "server/store/_indexc.c")]
])
