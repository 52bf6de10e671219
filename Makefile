# sv-dagster: every target does its own set-up on a fresh clone (a .venv from requirements.lock).
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.sv-installed
# CLI scanners (semgrep, checkov, bandit) in their own venv: their pins clash with ours.
TOOLS_VENV  := .venv-tools
TOOLS_STAMP := $(TOOLS_VENV)/.sv-installed
export PATH := $(CURDIR)/$(BIN):$(PATH)
# The project's own Dagster instance unless DAGSTER_HOME is set.
export DAGSTER_HOME ?= $(CURDIR)/.dagster

EVAL_TARGETS := eval-e1 eval-e2 eval-e3 eval-e4 eval-e5 eval-e6
.PHONY: setup system-packages demo test lint ui bench bench-serving bench-demo lock clean samples check $(EVAL_TARGETS)

# make eval-e1 MODELS="gpt-5-mini heuristic" N=32 [SEED=42]
# make eval-e2 MODELS="gpt-5-mini tool-oracle" N=10 INCLUDE_TOOLS=false
# make eval-e5 MODELS=gpt-5-mini TARGET=llama-3.1-8b N=20   (TARGET: the model E5 attacks)
# make eval-e4 MODELS=heuristic DATASET=my_emails.jsonl   (your JSONL file as the test split)
MODELS ?= heuristic
N ?=
SEED ?= 42
INCLUDE_TOOLS ?= true
TARGET ?= heuristic
DATASET ?=

setup: $(STAMP) $(TOOLS_STAMP) system-packages

# Debian packages the tests and sandboxes use: bubblewrap (E3 runs untrusted patches under
# bwrap; without it E3 falls back to weaker protections and records which) and postgresql
# (the Postgres instance tests start a real server). Installed when missing and we are root
# (CI and these machines). Checked by a command each puts on PATH.
SYSTEM_PACKAGES := bwrap:bubblewrap pg_ctlcluster:postgresql chromium:chromium
system-packages:
	@missing=""; for pair in $(SYSTEM_PACKAGES); do command -v $${pair%%:*} >/dev/null || missing="$$missing $${pair#*:}"; done; \
	if [ -n "$$missing" ]; then \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	    echo "installing Debian packages:$$missing"; \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing >/dev/null; \
	  else echo "WARNING: missing Debian packages:$$missing (not root): E3's sandbox will be weaker, the Postgres tests fail"; fi; \
	fi

$(TOOLS_STAMP): tools/requirements.lock
	test -x $(TOOLS_VENV)/bin/python || $(PYTHON) -m venv $(TOOLS_VENV)
	$(TOOLS_VENV)/bin/python -m pip install --quiet --disable-pip-version-check -r tools/requirements.lock
	touch $(TOOLS_STAMP)

$(STAMP): requirements.lock pyproject.toml environments/*/pyproject.toml
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info[:2] == (3, 11) else "sv-dagster needs Python 3.11 (set PYTHON=...)")'
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -r requirements.lock
	@# Environment defaults (DAGSTER_HOME, the CLI's code location) for every process in the venv.
	$(BIN)/python scripts/write_env_pth.py
	mkdir -p $(DAGSTER_HOME) && cp -n configs/dagster.yaml $(DAGSTER_HOME)/dagster.yaml || true
	touch $(STAMP)

demo: setup
	$(BIN)/sv-dagster demo

# Two pytest-xdist workers, one per core; tests/conftest.py keeps each module on one worker.
TEST_WORKERS ?= 2
test: setup lint
	$(BIN)/python -m pytest -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder

# Formatting, lint, the import layering and types (pyproject: [tool.ruff], [tool.importlinter],
# [tool.mypy]; mypy's cache in the venv keeps a second run quick).
lint: setup
	$(BIN)/ruff format --check .
	$(BIN)/ruff check .
	$(BIN)/lint-imports --no-logo
	$(BIN)/mypy

$(EVAL_TARGETS): eval-%: setup
	$(BIN)/sv-dagster eval $* --models $(MODELS) --seed $(SEED) --include-tools $(INCLUDE_TOOLS) --target $(TARGET) $(if $(N),--n $(N)) $(if $(DATASET),--dataset "$(DATASET)")

# The regression gate over the latest evals (exit 1 on a regression), as CI would run it.
check: setup
	$(BIN)/sv-dagster check

ui: setup
	$(BIN)/dagster dev -w workspace.yaml -h 127.0.0.1 -p 3000

bench: setup
	$(BIN)/python bench/run.py

# SmolLM2 and the Qwen2.5-Coder 0.5B and 1.5B served against plain generate (one at a time,
# batched, int8), then E1 evals/hour served against in-process; converts each model on first
# use. A missed target fails the first, not the second.
bench-serving: setup
	-$(BIN)/python bench/serving.py --write
	$(BIN)/python bench/served_evals.py --write

# `sv-dagster demo` in a fresh instance and outputs root, timed against its 15-minute budget.
bench-demo: setup
	$(BIN)/python bench/demo.py --write

# Maintainers: re-pin the whole dependency set after editing requirements.in or a pyproject.
# torch resolves against the CPU build on this machine's disk (/opt/wheels), so the lock holds
# none of the CUDA packages PyPI's build requires; the lock then names plain torch==2.13.0,
# which pip satisfies from that same file (2.13.0+cpu sorts above 2.13.0).
lock: setup
	$(BIN)/uv pip compile requirements.in --python-version 3.11 --no-header --find-links /opt/wheels -o requirements.lock
	sed -i 's/^torch==2.13.0+cpu$$/torch==2.13.0/' requirements.lock
	$(BIN)/uv pip compile tools/requirements.in --python-version 3.11 --no-header -o tools/requirements.lock

samples: setup
	$(BIN)/python scripts/make_samples.py
	$(BIN)/python scripts/make_corpus_samples.py

clean:
	rm -rf $(VENV) $(TOOLS_VENV) .dagster outputs .pytest_cache test-output
