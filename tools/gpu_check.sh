#!/usr/bin/env bash
# One script that checks the GPU path in about five minutes, most wanted first, so that a run cut short still
# answers the main question:
#   1. the bundled pair on CUDA (versions, device, dtype);
#   2. the arena and fixed vs adaptive N (issue 6's goal: the draft model's efficiency at its best N; the efficiency
#      factors show whether the target-call loss measured on CPU goes away);
#   3. the bench (lab vs transformers, greedy parity);
#   4. the engine's oracles on CUDA (chains, token trees, KV rollback, the pair, Medusa, EAGLE);
#   5. the solutions notebooks 00, 10 and 11 on CUDA (nbval, lax).
# Every step after the first runs even when an earlier one fails; the last lines list each step's exit status, and the script exits
# 1 if any failed. Each step's output also goes to $LOG_DIR (default $OUT when set, else runs/gpu_check).
#   bash tools/gpu_check.sh              (uses .venv if present, else python3)
# On a machine without network whose Python lacks the notebook packages (plotly, ipywidgets, nbval, ...), first fetch
# their wheels here with `bash tools/gpu_wheels.sh`, copy .whl/ over and install them there (see that script's header).
set -uo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-$( [ -x .venv/bin/python ] && echo .venv/bin/python || echo python3 )}
LOG_DIR=${LOG_DIR:-${OUT:-runs/gpu_check}}
mkdir -p "$LOG_DIR"
export TQDM_DISABLE=1 PYTHONWARNINGS=ignore PYTHONUNBUFFERED=1
# the notebooks' kernels start in solutions/ and must import lab from this checkout
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
summary=()
failed=0
finish() {  # also when the run is killed at a time limit: the summary of the steps that ended
    echo "=== summary"
    printf '%s\n' "${summary[@]}" | tee "$LOG_DIR/summary.log"
}
trap finish EXIT

step() {  # step NAME COMMAND...: run, show and log the output, remember the exit status
    local name=$1; shift
    echo "=== $name: $*"
    local start=$SECONDS
    "$@" 2>&1 | tee "$LOG_DIR/$name.log"
    local rc=${PIPESTATUS[0]}
    summary+=("$name: exit $rc in $((SECONDS - start)) s")
    [ "$rc" -eq 0 ] || failed=1
    return "$rc"
}

if step pair "$PY" - <<'PY'
import platform, torch, transformers
assert torch.cuda.is_available(), "no CUDA device visible"
print("GPU:", torch.cuda.get_device_name(0), "| python", platform.python_version(), "| torch", torch.__version__,
      "| transformers", transformers.__version__)
from lab.models import load_pair
pair = load_pair("shakespeare")
assert pair.device.type == "cuda", pair.device
print("bundled pair loaded on", pair.device, "as", pair.dtype)
PY
then :; else  # no GPU, or lab does not import: every later step would fail or time the CPU
    summary+=("the other steps were not run: the pair step must pass first")
    exit 1
fi
step arena "$PY" -m lab arena --prompts 3 --max-new-tokens 64
step bench "$PY" -m lab bench
step oracles env LAB_TEST_DEVICE=cuda "$PY" -m pytest -q -x tests/lab/test_decode.py tests/lab/test_kv.py \
    tests/lab/test_trees.py tests/lab/test_models.py tests/lab/drafters
step lessons "$PY" -m pytest -q --nbval-lax --nbval-current-env solutions/00_tour.ipynb \
    solutions/10_medusa_tree_attention.ipynb solutions/11_eagle_feature_drafts.ipynb
exit $failed
