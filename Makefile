# keepgoing — developer commands. Every target creates .venv on first use.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: install demo demo-headless record-demo test lint typecheck unit chaos bench bench-peers build clean screenshots

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e ".[dev]"
	touch $(STAMP)

install: $(STAMP)

## The main job: the server and UI, the agent's group on the local backend, a live run.
## Open the printed URL; Ctrl-C stops everything.
demo: $(STAMP)
	$(BIN)/keepgoing demo

## The same scenarios without a browser, in the short CI mode; prints the evidence.
demo-headless: $(STAMP)
	$(BIN)/keepgoing demo --headless --fast

## Re-record the support-digest run the UI's "Replay a recorded run" opens first.
record-demo: $(STAMP)
	$(BIN)/python -m keepgoing._demo.record

## The whole test suite: lint, types, then every test.
test: $(STAMP)
	$(BIN)/ruff check --output-format=concise src tests bench examples
	$(BIN)/ruff format --check src tests bench examples
	$(BIN)/mypy
	$(BIN)/pytest

lint: $(STAMP)
	$(BIN)/ruff check --output-format=concise src tests bench examples
	$(BIN)/ruff format --check src tests bench examples

typecheck: $(STAMP)
	$(BIN)/mypy

unit: $(STAMP)
	$(BIN)/pytest tests/unit

## Only the fault tests: workers on a throwaway PostgreSQL (in network namespaces when
## run as root), SIGKILL and a database restart mid-load. `make test` runs them too.
chaos: $(STAMP)
	$(BIN)/pytest -m chaos -v

## The screenshots in the README, docs/ui.md and docs/demo.md, taken by the browser tests.
screenshots: $(STAMP)
	KEEPGOING_UI_SCREENSHOTS=1 $(BIN)/pytest tests/ui/test_browser.py tests/ui/test_demo_page.py \
		tests/ui/test_trouble_ui.py tests/ui/test_time_ui.py tests/ui/test_layout_ui.py

bench: $(STAMP)
	$(BIN)/python -m bench
	$(BIN)/python -m bench.messages
	$(BIN)/python -m bench.direct_call
	$(BIN)/python -m bench.volumes
	$(BIN)/python -m bench.retention
	$(BIN)/python -m bench.postgres
	$(BIN)/python -m bench.groups
	$(BIN)/python -m bench.ui_open
	$(BIN)/python -m bench.runs_list
	$(BIN)/python -m bench.gateway
	$(BIN)/python -m bench.demo_live
	$(BIN)/python -m bench.limits

## keepgoing beside DBOS, the same workloads in one run. DBOS goes into .venv-peers only:
## it is never a dependency of keepgoing.
PEERS := .venv-peers
$(PEERS)/.installed: pyproject.toml
	$(PYTHON) -m venv $(PEERS)
	$(PEERS)/bin/pip install --quiet --upgrade pip
	$(PEERS)/bin/pip install --quiet -e . "dbos==3.4.0"
	touch $(PEERS)/.installed

bench-peers: $(PEERS)/.installed
	$(PEERS)/bin/python -m bench.peers

build: $(STAMP)
	$(BIN)/python -m build

clean:
	rm -rf $(VENV) build dist .pytest_cache .mypy_cache .ruff_cache .hypothesis .keepgoing
