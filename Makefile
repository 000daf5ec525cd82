# The two commands of the README:
#   make serve   set up, migrate the embedded SQLite database and start the service
#   make test    set up and run the whole test suite (PostgreSQL tests included)
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
HOST   ?= 127.0.0.1
PORT   ?= 8000

.PHONY: serve test install install-dev openapi sdk lint clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip

$(VENV)/.installed: pyproject.toml | $(BIN)/python
	$(BIN)/pip install --quiet -e .
	touch $@

$(VENV)/.installed-dev: pyproject.toml sdk/python/pyproject.toml | $(BIN)/python
	$(BIN)/pip install --quiet -e '.[dev]' -e sdk/python
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

lint: install-dev
	$(BIN)/ruff check service tests

clean:
	rm -rf $(VENV) var
