# Speculative Decoding Lab. Every target creates (once) and reuses a virtual environment in .venv,
# so a machine with only python3 needs nothing else.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
# The CPU build of torch 2.13.0 installs quickly on the course machines; on a GPU box set e.g. TORCH_SPEC=torch
# (any torch >= 2.4 works) or use your own environment (see README).
TORCH_SPEC ?= torch==2.13.0
STAMP := $(VENV)/.installed
export TQDM_DISABLE ?= 1
NBVAL_ENV := PYTHONWARNINGS=ignore TQDM_DISABLE=1

.PHONY: lab test demo lessons bench install unit notebooks clean-venv

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -c "import torch" 2>/dev/null || $(BIN)/python -m pip install -q "$(TORCH_SPEC)"
	$(BIN)/python -m pip install -q -e ".[dev]"
	touch $(STAMP)

install: $(STAMP)

lab: $(STAMP)  ## set up and open the course in JupyterLab
	$(BIN)/jupyter lab lessons/00_tour.ipynb

demo: $(STAMP)  ## stream one speculative generation in the terminal
	$(BIN)/python -m lab demo

bench: $(STAMP)  ## lab vs transformers timing table
	$(BIN)/python -m lab bench

lessons: $(STAMP)  ## regenerate lessons/ from solutions/
	$(BIN)/python tools/make_lessons.py

unit: $(STAMP)
	$(NBVAL_ENV) $(BIN)/python -m pytest -q tests

notebooks: $(STAMP)
	$(BIN)/python tools/make_lessons.py --check
	$(NBVAL_ENV) $(BIN)/python -m pytest -q --nbval --nbval-current-env solutions
	$(NBVAL_ENV) $(BIN)/python -m pytest -q --nbval-lax --nbval-current-env lessons

test: unit notebooks  ## everything CI runs

clean-venv:
	rm -rf $(VENV)
