"""Run every benchmark module in turn."""

import importlib
import pkgutil

import benchmarks

for info in sorted(pkgutil.iter_modules(benchmarks.__path__), key=lambda i: i.name):
    if info.name.endswith("_bench"):
        print(f"== {info.name}")
        importlib.import_module(f"benchmarks.{info.name}").main()
