#!/usr/bin/env bash
# One script that checks the GPU path in a few minutes: the engine's oracles on CUDA (chains and token trees), the
# bundled pair, Medusa and EAGLE on CUDA, lessons 00, 10 and 11 on CUDA, the bench on the GPU, and the arena (issue
# 6's goal: the draft model's efficiency at its best N; the efficiency factors show whether the target-call loss
# measured on CPU goes away). Run from the repository root on a machine with CUDA:
#   bash tools/gpu_check.sh            (uses .venv if present, else the current python)
set -euo pipefail
PY=${PY:-$( [ -x .venv/bin/python ] && echo .venv/bin/python || echo python3 )}
export TQDM_DISABLE=1 PYTHONWARNINGS=ignore
$PY - <<'PY'
import torch
assert torch.cuda.is_available(), "no CUDA device visible"
print("GPU:", torch.cuda.get_device_name(0), "| torch", torch.__version__)
from lab.models import load_pair
pair = load_pair("shakespeare")
assert pair.device.type == "cuda", pair.device
print("bundled pair loaded on", pair.device)
PY
LAB_TEST_DEVICE=cuda $PY -m pytest -q -x tests/test_engine.py tests/test_kv.py tests/test_drafters_lookup.py \
    tests/test_trees.py tests/test_early_exit.py tests/test_pair.py tests/test_medusa.py tests/test_eagle.py
$PY -m pytest -q --nbval-lax --nbval-current-env solutions/00_tour.ipynb solutions/10_medusa_tree_attention.ipynb \
    solutions/11_eagle_feature_drafts.ipynb
$PY -m lab bench
$PY -m lab arena --prompts 3 --max-new-tokens 64
