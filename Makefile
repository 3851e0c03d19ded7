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

# The extras a development install has: `test` and `spark` (PySpark for tests/pipeline and compat_tests).
EXTRAS := test,spark,grpc
# The requirements pip resolves before FerryMQ's own build (runtime, the extras above and build system), so
# that the download and the compile are separate, announced steps.
define REQUIREMENTS
import tomllib
p = tomllib.load(open("pyproject.toml", "rb"))
extras = [r for name in "$(EXTRAS)".split(",") for r in p["project"]["optional-dependencies"][name]]
print(*p["project"]["dependencies"], *extras, *p["build-system"]["requires"], sep="\n")
endef
export REQUIREMENTS
# setuptools prints a boxed notice on every editable install about folders named like the package; no
# folder here is named `ferrymq`, so the notice does not apply and is not shown.
QUIET_EDITABLE := PYTHONWARNINGS="ignore:Editable installation"

.PHONY: run test unit compat bench compile clean

$(STAMP): pyproject.toml setup.py wire/native.py $(NATIVE_SOURCES)
	@echo "== Setting up FerryMQ in $(VENV): the first time about 3-7 minutes on 2 cores, later only what changed"
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else f"FerryMQ needs Python 3.11 or newer, and $(PYTHON) is {sys.version.split()[0]}: run make PYTHON=python3.11 (or newer)")'
	@echo "-- 1/3 virtual environment and pip"
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	@echo "-- 2/3 dependencies from PyPI (Twisted, construct, Cython, pytest, PySpark, ...): 2-4 minutes the first time"
	$(PYTHON) -c "$$REQUIREMENTS" > $(VENV)/requirements.txt
	$(BIN)/pip install -q -r $(VENV)/requirements.txt
	@echo "-- 3/3 FerryMQ, editable: C extensions and the Cython-compiled hot path ($(words $(CYTHON_SOURCES)) modules, 2-5 minutes; quiet while it compiles)"
	$(DROP_CYTHON_BUILDS)
	$(QUIET_EDITABLE) $(BIN)/pip install -q -e '.[$(EXTRAS)]'
	touch $(STAMP)
	@echo "== FerryMQ is installed in $(VENV) (ferrymq --help; .venv/bin/ferrymq admin for the admin tool)"

# Compile the hot path again after editing it (until then the old build runs, and pytest refuses to start).
compile: $(STAMP)
	$(DROP_CYTHON_BUILDS)
	$(QUIET_EDITABLE) $(BIN)/pip install -q -e '.[$(EXTRAS)]'

run: $(STAMP)
	$(BIN)/ferrymq standalone -c $(CONF)

# A complete run (exit status 0 or 1) rewrites docs/compatibility.md's table from its results.
RESULTS := $(VENV)/last-run.xml
REPORT_COMPAT = status=$$?; if [ $$status -le 1 ]; then $(BIN)/python -m compat_tests.report $(RESULTS) --write docs/compatibility.md; fi; exit $$status

# Two pytest workers: most of the suite's time is spent waiting on clients' fixed timers and servers' ticks,
# so two run side by side on 2 cores. The root conftest.py keeps each module, and each session server, on one
# worker. WORKERS=0 (the default) runs in one process: on 2 cores two workers were no faster while an
# Apache broker of the session spins a core (docs in compat_tests/README.md), and timing-bound tests failed.
WORKERS ?= 0
DIST    := -n $(WORKERS) --dist loadgroup

test: $(STAMP)
	$(BIN)/pytest -q $(DIST) -o junit_family=xunit1 --junitxml=$(RESULTS); $(REPORT_COMPAT)

unit: $(STAMP)
	$(BIN)/pytest -q $(DIST) tests

compat: $(STAMP)
	$(BIN)/pytest -q $(DIST) compat_tests -o junit_family=xunit1 --junitxml=$(RESULTS); $(REPORT_COMPAT)

bench: $(STAMP)
	$(QUIET_EDITABLE) $(BIN)/pip install -q -e '.[$(EXTRAS),bench]'
	$(BIN)/python -m benchmarks

clean:
	rm -rf $(VENV) data .pytest_cache build *.egg-info
