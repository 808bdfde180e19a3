# Every target does its own set-up: a venv with the pinned dependencies, then the jar cache.
PYTHON ?= python3.11
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: setup demo test test-quick clean

$(STAMP): pyproject.toml
	@command -v $(PYTHON) >/dev/null || { echo "error: $(PYTHON) not found; eosbench needs Python 3.11" >&2; exit 3; }
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip==25.3
	$(BIN)/pip install --quiet -e '.[test]'
	touch $(STAMP)

setup: $(STAMP)
	$(BIN)/eosbench setup

demo: setup
	$(BIN)/eosbench demo

test: setup
	$(BIN)/pytest

test-quick: setup
	$(BIN)/pytest -m 'not heavy'

clean:
	rm -rf $(VENV) .pytest_cache
