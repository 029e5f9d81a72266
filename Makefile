# Recall: `make run` serves the dashboard, `make test` runs every check.
# Both create the virtual environment, install the package and the front-end
# packages (from the npm registry into static/vendor/) on first use.
PYTHON   ?= python3
VENV     := .venv
BIN      := $(VENV)/bin
STAMP    := $(VENV)/.installed
VENDOR   := static/vendor
VSTAMP   := $(VENDOR)/.installed
CHROMIUM ?= /usr/bin/chromium
HERMES   := .hermes-venv
HSTAMP   := $(HERMES)/.installed
SUDO     := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

.PHONY: run test lint bench screenshots clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

$(VSTAMP): package.json package-lock.json
	npm ci --no-audit --no-fund --loglevel=error
	mkdir -p $(VENDOR)
	cp node_modules/htmx.org/dist/htmx.min.js $(VENDOR)/htmx.min.js
	cp node_modules/chart.js/dist/chart.umd.min.js $(VENDOR)/chart.umd.min.js
	touch $(VSTAMP)

# A real Hermes Agent (its PyPI release, pinned in tests/hermes-agent.txt) in a venv of
# its own: the approvals tests decide staged writes through its own code.
$(HSTAMP): tests/hermes-agent.txt
	test -x $(HERMES)/bin/python || $(PYTHON) -m venv $(HERMES)
	$(HERMES)/bin/python -m pip install --quiet -r tests/hermes-agent.txt
	touch $(HSTAMP)

# Browser tests drive Debian's Chromium through Playwright (never a downloaded browser);
# Chinese text in pages and screenshots needs a CJK font (a bare Debian has none).
$(CHROMIUM):
	$(SUDO) apt-get update
	$(SUDO) apt-get install -y --no-install-recommends chromium fonts-wqy-zenhei

# The home comes from $$HERMES_HOME (else ~/.hermes, else a demo); PORT=8751 for another port.
PORT ?= 8750
run: $(STAMP) $(VSTAMP)
	$(BIN)/recall serve --port $(PORT)

test: $(STAMP) $(VSTAMP) $(HSTAMP) $(CHROMIUM)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/lint-imports
	$(BIN)/pytest

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/lint-imports

# Refresh the README's screenshots from the last browser-test run.
screenshots: test
	mkdir -p docs/screenshots
	cp test-output/screenshots/*.png docs/screenshots/

clean:
	rm -rf $(VENV) $(HERMES) $(VENDOR) node_modules .pytest_cache .ruff_cache test-output
