# frame: `make demo` builds from ../shared/corpus offline; `make test` runs the suite.
SHELL := /bin/bash
PY ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
export PREFECT_HOME ?= $(CURDIR)/.prefect
export PREFECT_SERVER_ANALYTICS_ENABLED ?= false
export PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS ?= 120
export PREFECT_LOCAL_STORAGE_PATH ?= $(CURDIR)/data/cache/prefect-results
export FRAME_CACHE_DIR ?= $(CURDIR)/data/cache
export HF_HUB_OFFLINE ?= 1

.PHONY: setup demo test bench qa-wide lint clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[dev]'
	touch $(STAMP)

setup: $(STAMP)

DEMO_VERSION ?= 0.1.0

# The demo release, then the folder of reports configs/eval-demo.toml's [systems.my-submission] scores
# (copy-sample's: S as each instance's report), then what to run next.
demo: $(STAMP)
	$(BIN)/frame build --config configs/demo.toml --release demo --version $(DEMO_VERSION)
	$(BIN)/frame generate --release data/releases/demo/$(DEMO_VERSION) --system copy-sample
	@echo "next (README.md, Evaluate a model): source $(VENV)/bin/activate, then"
	@echo "  frame score --release data/releases/demo/$(DEMO_VERSION) --config configs/eval-demo.toml"

test: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/lint-imports
	sh tests/setup_browser.sh
	$(BIN)/python tests/run_suite.py

bench: $(STAMP)
	$(BIN)/python -m pip install -q -e '.[dev,bench]'
	$(BIN)/python benchmarks/grounding.py
	$(BIN)/python benchmarks/ground_largest.py
	$(BIN)/python benchmarks/structural_similarity.py
	$(MAKE) demo
	$(BIN)/python benchmarks/meta_structure.py --release data/releases/demo/$(DEMO_VERSION)
	$(BIN)/python benchmarks/retrieval_recall.py --release data/releases/demo/$(DEMO_VERSION)
	$(BIN)/python benchmarks/metric_checklist.py --release data/releases/demo/$(DEMO_VERSION)
	$(BIN)/python benchmarks/refresh.py
	$(BIN)/python benchmarks/server.py
	$(BIN)/python benchmarks/scoring.py --release data/releases/demo/$(DEMO_VERSION)
	$(BIN)/python benchmarks/scoring_cold.py --release data/releases/demo/$(DEMO_VERSION) --server --repeat 2
	$(BIN)/python benchmarks/suite.py

# Grounding on filers frame was not tuned for (../shared/corpus/edgar-wide + the build corpus): per filing
# fact recall, item recall vs the peer parser, notes found/tagged, glued tokens, largest document, time.
qa-wide: $(STAMP)
	$(BIN)/python benchmarks/qa_wide.py

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/lint-imports

clean:
	rm -rf data/grounding data/raw data/cache .prefect
