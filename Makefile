# Every target does its own set-up: a venv with the pinned dependencies, then the jar cache.
PYTHON ?= python3.11
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: setup setup-all demo test test-quick clean prometheus

$(STAMP): pyproject.toml
	@command -v $(PYTHON) >/dev/null || { echo "error: $(PYTHON) not found; eosbench needs Python 3.11" >&2; exit 3; }
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip==25.3
	$(BIN)/pip install --quiet -e '.[test]'
	touch $(STAMP)

# The real Prometheus server and promtool, from Debian (the tests check configs and metrics with them).
prometheus:
	@command -v promtool >/dev/null || { \
	  if [ "$$(id -u)" = 0 ]; then apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends prometheus >/dev/null; \
	  else echo "error: promtool not found; install Debian's prometheus package (sudo apt-get install prometheus)" >&2; exit 3; fi; }

# The jars the demo runs on; every other bundle is resolved by the first command that uses it.
setup: $(STAMP) prometheus
	$(BIN)/eosbench setup

# Every bundle: the tests start HDFS, YARN, the local S3 and the peers, and Maven's minutes belong
# before the first test, not inside one test's timeout.
setup-all: $(STAMP) prometheus
	$(BIN)/eosbench setup --all

demo: setup
	$(BIN)/eosbench demo

test: setup-all
	$(BIN)/pytest

test-quick: setup-all
	$(BIN)/pytest -m 'not heavy'

clean:
	rm -rf $(VENV) .pytest_cache
