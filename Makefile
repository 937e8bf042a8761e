# Dipper: `make demo` to see it work, `make test` to run the whole suite. `make help` lists every target.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
SF ?= 1
SUITE ?= tpch
LAYOUT ?= tuned
# Statistics of benchmark datasets keep range-sets of 20 intervals, so `bench run --stats` can compare
# zone maps and range-sets of any K up to 20 on one store.
BENCH_K ?= 20
JAVA := $(if $(JAVA_HOME),$(JAVA_HOME)/bin/java,java)
JAVA_HINT := install it with: apt-get install -y openjdk-17-jre-headless

.PHONY: help install java-check test-deps demo stop check test dataset bench bench-quick bench-datasets clean

help:
	@echo "make demo [SF=1]  generate TPC-H (tuned layout) and its statistics, start Spark + Thrift Server, query it"
	@echo "make stop         stop the server that make demo started"
	@echo "make check        install and run the tests that need no Java (-m \"not spark\"): for every edit"
	@echo "make test         install and run the whole test suite (real Spark, small data); per-test times in"
	@echo "                  .test-times.xml, and docs/tests.md from them with: .venv/bin/python -m tests.times"
	@echo "make dataset      generate SUITE=$(SUITE) at SF=$(SF) in LAYOUT=$(LAYOUT) [FILES=n] and collect its statistics"
	@echo "make bench        TPC-H and TPC-DS at SF=$(SF), tuned: every query as Spark, Spark-noDPP, Preds, Dipper;"
	@echo "                  results, tables and plots in docs/results/bench/ (python -m bench run --help for more)"
	@echo "make bench-quick  the harness on TPC-H SF 0.01 and three queries (what the test suite runs)"
	@echo "make bench-datasets  time and size generating TPC-H and TPC-DS at SF=$(SF); docs/results/datasets.md"
	@echo "make install      create $(VENV) and install Dipper with its bench and dev extras"
	@echo "make clean        remove $(VENV) and generated data under data/"

java-check:
	@command -v $(JAVA) >/dev/null 2>&1 || { echo "error: Java 17+ is required but '$(JAVA)' was not found; $(JAVA_HINT)" >&2; exit 1; }
	@v=$$($(JAVA) -version 2>&1 | sed -n 's/.*version "\([0-9][0-9]*\).*/\1/p' | head -n1); \
	  [ "$${v:-0}" -ge 17 ] || { echo "error: Java 17+ is required but $(JAVA) is version $${v:-unknown}; $(JAVA_HINT)" >&2; exit 1; }

# The marker file makes `make` reinstall only when pyproject.toml changes.
$(VENV)/.installed: pyproject.toml
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "error: Python 3.11+ is required, $(PYTHON) is " + sys.version.split()[0])'
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[bench,dev]'
	@touch $@

install: $(VENV)/.installed

demo: java-check install
	$(PY) -m bench generate --suite tpch --sf $(SF) --layout tuned
	$(PY) -m stats refresh --all
	$(PY) -m bench demo --sf $(SF)

stop: install
	$(PY) -m bench stop

# The shared-metastore test (tests/test_cluster.py) runs a real PostgreSQL server with its JDBC driver, both
# from Debian's packages.
SUDO := $(if $(filter 0,$(shell id -u)),,sudo)
test-deps:
	@if [ ! -f /usr/share/java/postgresql.jar ] || ! ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1; then \
	  echo "installing postgresql and libpostgresql-jdbc-java (Debian) for the shared-metastore test"; \
	  $(SUDO) apt-get update -qq && \
	  $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql libpostgresql-jdbc-java >/dev/null; \
	fi

# The tiers are pytest markers (pyproject.toml): `spark` on every test that needs Java, so `make check` runs
# with no JVM; -m differential or -m deployment picks one kind of test.
check: install
	$(PY) -m pytest -m "not spark" -q

# Per-test times go to .test-times.xml; `python -m tests.times` turns them into docs/tests.md.
test: java-check install test-deps
	$(PY) -m pytest --junitxml=.test-times.xml

dataset: java-check install
	$(PY) -m bench generate --suite $(SUITE) --sf $(SF) --layout $(LAYOUT) $(if $(FILES),--files $(FILES)) --collect-stats $(BENCH_K)

bench: java-check install
	$(MAKE) --no-print-directory dataset SUITE=tpch
	$(MAKE) --no-print-directory dataset SUITE=tpcds
	$(PY) -m bench run --suite tpch --sf $(SF) --layout tuned
	$(PY) -m bench run --suite tpcds --sf $(SF) --layout tuned

bench-quick: java-check install
	$(PY) -m bench generate --suite tpch --sf 0.01 --layout tuned --files 8 --collect-stats $(BENCH_K)
	$(PY) -m bench run --quick

bench-datasets: java-check install
	$(PY) -m bench measure-datasets --sf $(SF)

clean:
	rm -rf $(VENV) data
