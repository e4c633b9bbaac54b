# Two commands do all set-up on a fresh machine: `make demo` and `make test`.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.tree2mat-installed
# make demo's install: the core and skl2onnx (its pipeline), not the test extra's 2 GB of
# runtimes and tools. A stamp of its own, so that it never satisfies make test's. --no-compile:
# byte-compiling every module of scipy and scikit-learn at install took 45 of its 75 s and 90 MB
# (2 cores, 2026-11-27); Python compiles the few the demo imports as it runs.
DEMO_STAMP := $(VENV)/.tree2mat-demo-installed
DEMO   := build/demo
# The JavaScript runtimes (onnxruntime-node, onnxruntime-web, and playwright-core for the browser
# tests), from js/package-lock.json, when Node.js is on the PATH. onnxruntime-node's CPU binaries
# ship in its package: no install script runs (--ignore-scripts).
NODE_DIR   := build/node
NODE_STAMP := $(NODE_DIR)/.tree2mat-installed
HAS_NODE   := $(shell command -v node >/dev/null 2>&1 && command -v npm >/dev/null 2>&1 && echo yes)
export TREE2MAT_NODE_MODULES := $(CURDIR)/$(NODE_DIR)/node_modules

.PHONY: demo test test-fast test-tiers test-webgpu fuzz install node treeple floor clean

$(STAMP): pyproject.toml constraints.txt
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -c constraints.txt -e '.[test]'
	touch $(STAMP)

install: $(STAMP)

$(DEMO_STAMP): pyproject.toml constraints.txt
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check --no-compile -c constraints.txt -e '.[pipelines]'
	touch $(DEMO_STAMP)

$(NODE_STAMP): js/package.json js/package-lock.json
	mkdir -p $(NODE_DIR)
	cp js/package.json js/package-lock.json $(NODE_DIR)/
	cd $(NODE_DIR) && npm ci --no-audit --no-fund --ignore-scripts --loglevel=error
	touch $(NODE_STAMP)

node: $(NODE_STAMP)

# treeple's oblique trees (tests/frontends/test_treeple.py) in a venv of their own: treeple 0.10.3
# imports only with scikit-learn 1.6 (1.9: binary incompatible; 1.7: its fit fails), so the core
# install and pytest with constraints.txt, scikit-learn pinned to 1.6.1 instead.
TREEPLE_VENV  := build/treeple-venv
TREEPLE_STAMP := build/treeple/.installed
$(TREEPLE_STAMP): pyproject.toml constraints.txt
	mkdir -p build/treeple
	sed 's/^scikit-learn==.*/scikit-learn==1.6.1/' constraints.txt > build/treeple/constraints.txt
	test -x $(TREEPLE_VENV)/bin/python || $(PYTHON) -m venv $(TREEPLE_VENV)
	$(TREEPLE_VENV)/bin/python -m pip install --quiet --disable-pip-version-check -c build/treeple/constraints.txt -e '.[treeple]' treeple==0.10.3 pytest
	touch $(TREEPLE_STAMP)

treeple: $(TREEPLE_STAMP)

# The oldest onnxruntime the default graph is for (README), in a venv of its own: onnxruntime 1.16
# needs numpy < 2 (tests/runtimes/test_floor.py runs the graphs there; nothing else is installed).
FLOOR_VENV  := build/ort-floor
FLOOR_STAMP := $(FLOOR_VENV)/.installed
$(FLOOR_STAMP):
	test -x $(FLOOR_VENV)/bin/python || $(PYTHON) -m venv $(FLOOR_VENV)
	$(FLOOR_VENV)/bin/python -m pip install --quiet --disable-pip-version-check onnxruntime==1.16.3 'numpy>=1.24,<2'
	touch $(FLOOR_STAMP)

floor: $(FLOOR_STAMP)

# Train a real model from a seed, convert it, verify it against scikit-learn; then the same for a
# whole pipeline (preprocessing and a forest) through skl2onnx.
# Bytecode is written as the demo imports (an empty PYTHONDONTWRITEBYTECODE is unset for Python):
# with the install's --no-compile and an environment that sets it, each of the six commands
# compiled scipy's and scikit-learn's modules anew, 45 s of the demo's run instead of 21 s.
demo: export PYTHONDONTWRITEBYTECODE :=
demo: $(DEMO_STAMP)
	@mkdir -p $(DEMO)
	$(BIN)/python examples/train_demo.py $(DEMO)/model.joblib
	$(BIN)/tree2mat convert $(DEMO)/model.joblib -o $(DEMO)/model.onnx
	$(BIN)/tree2mat verify $(DEMO)/model.joblib $(DEMO)/model.onnx --json $(DEMO)/report.json
	$(BIN)/python examples/pipeline_demo.py $(DEMO)/pipeline
	$(BIN)/tree2mat convert $(DEMO)/pipeline/pipeline.joblib -o $(DEMO)/pipeline/pipeline.onnx
	$(BIN)/tree2mat verify $(DEMO)/pipeline/pipeline.joblib $(DEMO)/pipeline/pipeline.onnx --data $(DEMO)/pipeline/rows.npy

# Lint (ruff), type check (mypy, tree2mat and cli) and the layer contract (lint-imports, see
# pyproject.toml) before the tests: a finding fails make test.
# Each of pytest's two workers runs the libraries' OpenMP code on one thread (OMP_NUM_THREADS=1):
# two workers each spinning two OpenMP threads on two cores made single fits 50 times slower.
# The runtime matrix (tests/runtimes/test_runtimes.py) runs the Python runtimes always and the Node.js ones
# when node is present (the Makefile installs their npm packages first).
test: $(STAMP) $(if $(HAS_NODE),$(NODE_STAMP)) $(TREEPLE_STAMP) $(FLOOR_STAMP)
	$(BIN)/ruff check .
	$(BIN)/mypy
	$(BIN)/lint-imports
	OMP_NUM_THREADS=1 $(BIN)/python -m pytest -q -n 2
	OMP_NUM_THREADS=1 $(TREEPLE_VENV)/bin/python -m pytest -q tests/frontends/test_treeple.py

# The fast tier for development (a few minutes on 2 cores, a tenth of make test): lint, types, layers and every test
# not marked slow. CI runs make test, which runs them all.
test-fast: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/mypy
	$(BIN)/lint-imports
	OMP_NUM_THREADS=1 $(BIN)/python -m pytest -q -n 2 -m "not slow"

# The tiers from measured durations: the suite as make test runs it, with pytest's durations;
# tests/tiers.py writes the tests of 3 s or more to tests/slow.txt (conftest.py marks them slow).
test-tiers: $(STAMP)
	@mkdir -p build
	OMP_NUM_THREADS=1 $(BIN)/python -m pytest -q -n 2 --durations=0 --durations-min=0.2 | tee build/durations.log
	$(BIN)/python tests/tiers.py build/durations.log > tests/slow.txt

# WebGPU in headless Chromium (onnxruntime-web's WebGPU backend on SwiftShader's adapter): the
# runtime matrix's models and the browser example (examples/web). Not part of make test (CI has
# no browser); installs Debian's chromium when it is missing (apt-get, as root or with sudo).
CHROMIUM ?= /usr/bin/chromium
SUDO     := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
test-webgpu: $(STAMP) $(NODE_STAMP)
	test -x $(CHROMIUM) || $(SUDO) apt-get install -y chromium || ($(SUDO) apt-get update && $(SUDO) apt-get install -y chromium)
	rm -f build/webgpu.json
	TREE2MAT_WEBGPU=1 TREE2MAT_CHROMIUM=$(CHROMIUM) $(BIN)/python -m pytest -q tests/runtimes/test_webgpu.py

# The hostile tier, longer than make test's run of it: the model readers fuzzed (FUZZ_EXAMPLES
# damaged files per reader, fresh random ones each run) and tests/hostile (code in model files,
# outputs over inputs, sizes and graphs that would take minutes or gigabytes, signals at any
# moment: FUZZ_EXAMPLES spliced .skops files, FUZZ_EXAMPLES / 20 signalled commands).
FUZZ_EXAMPLES ?= 5000
fuzz: $(STAMP)
	OMP_NUM_THREADS=1 TREE2MAT_FUZZ_EXAMPLES=$(FUZZ_EXAMPLES) $(BIN)/python -m pytest -q -n 2 tests/frontends/test_fuzz.py tests/hostile --hypothesis-show-statistics

clean:
	rm -rf $(VENV) build .pytest_cache .hypothesis .mypy_cache .ruff_cache .import_linter_cache
