# keepgoing — developer commands. Every target creates .venv on first use.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: install demo test lint typecheck unit chaos bench build clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e ".[dev]"
	touch $(STAMP)

install: $(STAMP)

## The main job: a quickstart on embedded SQLite that kills its worker mid-step.
demo: $(STAMP)
	$(BIN)/keepgoing demo

## The whole test suite: lint, types, then every test.
test: $(STAMP)
	$(BIN)/ruff check src tests bench examples
	$(BIN)/ruff format --check src tests bench examples
	$(BIN)/mypy
	$(BIN)/pytest

lint: $(STAMP)
	$(BIN)/ruff check src tests bench examples
	$(BIN)/ruff format --check src tests bench examples

typecheck: $(STAMP)
	$(BIN)/mypy

unit: $(STAMP)
	$(BIN)/pytest tests/unit

## Only the fault tests: workers on a throwaway PostgreSQL (in network namespaces when
## run as root), SIGKILL and a database restart mid-load. `make test` runs them too.
chaos: $(STAMP)
	$(BIN)/pytest -m chaos -v

bench: $(STAMP)
	$(BIN)/python -m bench
	$(BIN)/python -m bench.messages
	$(BIN)/python -m bench.volumes
	$(BIN)/python -m bench.postgres

build: $(STAMP)
	$(BIN)/python -m build

clean:
	rm -rf $(VENV) build dist .pytest_cache .mypy_cache .ruff_cache .hypothesis .keepgoing
