# Every target does its own set-up: a fresh clone needs only python3 (and root for apt-get).
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed-stamp
export DEBIAN_FRONTEND := noninteractive

.PHONY: setup system-deps browser lint test bench demo docs clean

$(STAMP): pyproject.toml
	test -x $(PY) || python3 -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[dev]'
	touch $@

# Graphviz's `dot` renders the graph views; Debian's package provides it.
system-deps:
	@if ! command -v dot >/dev/null 2>&1; then \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    apt-get update -qq && apt-get install -y -qq graphviz >/dev/null; \
	  else \
	    echo "note: graphviz 'dot' is missing and cannot be installed without root; graph views will not render" >&2; \
	  fi; \
	fi

setup: $(STAMP) system-deps

# The browser tests open pages in Debian's Chromium (never a downloaded browser build).
browser:
	@if ! command -v chromium >/dev/null 2>&1; then \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    apt-get update -qq && apt-get install -y -qq chromium >/dev/null; \
	  else \
	    echo "note: chromium is missing and cannot be installed without root; browser tests will skip" >&2; \
	  fi; \
	fi

lint: setup
	$(VENV)/bin/ruff check pypto tests bench
	$(VENV)/bin/ruff format --check pypto tests bench
	$(VENV)/bin/mypy

# two workers: the machines that run it have two cores, and every test is single-threaded
test: lint browser
	$(PY) -m pytest -n 2

bench: setup
	$(PY) -m bench

demo: setup
	$(PY) -m pypto demo

docs: setup
	$(PY) -m pypto docs

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache .hypothesis
