# Two commands from a fresh clone: `make run` and `make test`. Everything else is set up here.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed-stamp
CONF   ?= conf/standalone.conf
# The compiled parts' sources (wire/native.py lists them): an edit to any of them compiles again.
CYTHON_SOURCES := $(shell $(PYTHON) -c 'import runpy; print(*runpy.run_path("wire/native.py")["CYTHON_SOURCES"])')
NATIVE_SOURCES := $(wildcard wire/*.c wire/*.h server/store/*.c) $(CYTHON_SOURCES)
# An install builds everything again; an old Cython build must not outlive it (FERRYMQ_NO_CYTHON=1 builds none).
DROP_CYTHON_BUILDS := rm -f $(foreach s,$(CYTHON_SOURCES),$(basename $(s)).cpython-*.so)

.PHONY: run test unit compat bench compile clean

$(STAMP): pyproject.toml setup.py wire/native.py $(NATIVE_SOURCES)
	@echo "Installing FerryMQ into $(VENV) and compiling its hot path (1-2 minutes; the first time pip also downloads the dependencies)"
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(DROP_CYTHON_BUILDS)
	$(BIN)/pip install -q -e '.[test]'
	touch $(STAMP)

# Compile the hot path again after editing it (until then the old build runs, and pytest refuses to start).
compile: $(STAMP)
	$(DROP_CYTHON_BUILDS)
	$(BIN)/pip install -q -e '.[test]'

run: $(STAMP)
	$(BIN)/ferrymq standalone -c $(CONF)

test: $(STAMP)
	$(BIN)/pytest -q

unit: $(STAMP)
	$(BIN)/pytest -q tests

compat: $(STAMP)
	$(BIN)/pytest -q compat_tests

bench: $(STAMP)
	$(BIN)/pip install -q -e '.[test,bench]'
	$(BIN)/python -m benchmarks

clean:
	rm -rf $(VENV) data .pytest_cache build *.egg-info
