"""Edge cases of the small public API: bools are not numbers, bad shapes and types give clear errors naming the
argument, NumPy numbers work, the bench leaves the shared pair as it found it, and optimal_n_draft stops at the peak.
"""
from __future__ import annotations

import os
import random
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from lab import costs, metrics, toy
from lab.sampling import check_sampling_args, probs_from_logits, sample

ROOT = Path(__file__).resolve().parents[1]


# --- bool is not a number; NumPy numbers are -----------------------------------------------------------------------
@pytest.mark.parametrize("call, name", [
    (lambda: probs_from_logits(torch.randn(5), temperature=True), "temperature"),
    (lambda: probs_from_logits(torch.randn(5), top_p=True), "top_p"),
    (lambda: check_sampling_args(temperature=False), "temperature"),
    (lambda: metrics.expected_tokens_per_call(True, 3), "alpha"),
    (lambda: metrics.predicted_speedup(0.5, 3, True), "cost_ratio"),
    (lambda: metrics.optimal_n_draft(True, 0.1), "alpha"),
    (lambda: toy.mixture_model(toy.fixed_model([1.0]), toy.fixed_model([1.0]), True), "weight"),
    (lambda: costs.pass_time(True, 5), "tokens"),
    (lambda: costs.pass_time(10, True), "ridge_tokens"),
])
def test_bool_is_rejected_naming_the_argument(call, name):
    with pytest.raises(ValueError, match=rf"^{name}\b.*got (True|False)"):
        call()


def test_numpy_numbers_are_accepted():
    logits = torch.tensor([1.0, 2.0, 0.5])
    assert torch.equal(probs_from_logits(logits, temperature=np.float32(0.5), top_p=np.float64(0.9)),
                       probs_from_logits(logits, temperature=0.5, top_p=0.9))
    assert metrics.expected_tokens_per_call(np.float32(0.5), np.int64(3)) == pytest.approx(1.875)
    assert metrics.predicted_speedup(np.float64(0.5), 3, np.float32(0.25)) == pytest.approx(1.875 / 1.75)
    assert toy.mixture_model(toy.fixed_model([1.0, 0.0]), toy.fixed_model([0.0, 1.0]), np.float32(0.25))([]) == \
        pytest.approx([0.75, 0.25])
    assert costs.pass_time(np.float64(40), np.int64(20)) == 2.0


# --- sampling ------------------------------------------------------------------------------------------------------
def test_sample_accepts_lists_and_numpy_arrays():
    assert sample([0.0, 1.0]) == 1
    assert sample(np.array([0.0, 0.0, 1.0])) == 2
    probs = torch.tensor([0.1, 0.2, 0.3, 0.4])
    for seed in range(5):  # a float32 tensor is sampled exactly as torch.multinomial samples it
        expected = int(torch.multinomial(probs, 1, generator=torch.Generator().manual_seed(seed)))
        assert sample(probs, torch.Generator().manual_seed(seed)) == expected
        assert sample(probs.tolist(), torch.Generator().manual_seed(seed)) == expected


@pytest.mark.parametrize("probs, error, message", [
    (torch.tensor([5.0, 5.0]), ValueError, r"probs must sum to 1 .*got a sum of 10"),
    (torch.tensor([[0.5, 0.5], [0.5, 0.5]]), ValueError, r"probs must be one distribution \[V\], got shape \(2, 2\)"),
    (torch.tensor(1.0), ValueError, "probs must have a vocabulary axis"),
    (torch.tensor([float("nan"), 1.0]), ValueError, "probs contains NaN"),
    ("ab", TypeError, "probs must be a tensor or sequence of probabilities"),
])
def test_sample_rejects_what_is_not_one_distribution(probs, error, message):
    with pytest.raises(error, match=message):
        sample(probs)


def test_sample_rejects_another_kind_of_generator():
    with pytest.raises(TypeError, match="generator must be None or a torch.Generator, got Random"):
        sample([0.5, 0.5], random.Random(0))


def test_probs_from_logits_rejects_an_empty_batch():
    with pytest.raises(ValueError, match=r"logits must hold at least one row \[\.\.\., V\], got shape \(0, 5\)"):
        probs_from_logits(torch.zeros(0, 5))


# --- toy models ----------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("call, error, message", [
    (lambda: toy.fixed_model([[0.5, 0.5]]), ValueError, r"probs must be one distribution \[V\].*shape \(1, 2\)"),
    (lambda: toy.fixed_model(1.0), ValueError, "probs must have a vocabulary axis"),
    (lambda: toy.fixed_model("ab"), TypeError, "probs must be a tensor or sequence"),
    (lambda: toy.bigram_model([0.5, 0.5]), ValueError, r"table must be square \[V\]\[V\].*shape \(2,\)"),
    (lambda: toy.bigram_model([[[0.5, 0.5]] * 2] * 2), ValueError, r"table must be square.*shape \(2, 2, 2\)"),
    (lambda: toy.bigram_model([[0.5, 0.5]] * 3), ValueError, r"table must be square.*shape \(3, 2\)"),
    (lambda: toy.mixture_model(toy.fixed_model([1.0]), toy.fixed_model([1.0]), "0.5"), ValueError,
     r"weight must be a number in \[0, 1\], got '0.5'"),
    (lambda: toy.mixture_model(toy.fixed_model([1.0]), toy.fixed_model([1.0]), float("nan")), ValueError,
     "weight must be a number in"),
    (lambda: toy.mixture_model(toy.fixed_model([1.0]), [1.0], 0.5), TypeError, "other must be a toy model"),
    (lambda: toy.speculative_step(None, toy.fixed_model([1.0]), toy.fixed_model([1.0]), 2, random.Random(0)),
     TypeError, "prefix must be a list of token ids or a LongTensor, got NoneType"),
    (lambda: toy.speculative_step([0], [1.0], toy.fixed_model([1.0]), 2, random.Random(0)), TypeError,
     "target_model must be a toy model"),
])
def test_toy_models_name_the_bad_argument(call, error, message):
    with pytest.raises(error, match=message):
        call()


def test_bigram_model_checks_the_last_token():
    model = toy.bigram_model([[0.5, 0.5], [0.1, 0.9]])
    assert model([]) == [0.5, 0.5] and model([0, 1]) == [0.1, 0.9]
    assert model([np.int64(1)]) == [0.1, 0.9] and model([0, torch.tensor(1)]) == [0.1, 0.9]
    for bad in (5, -1, 2, 1.0, True):  # -1 used to wrap around to the last row
        with pytest.raises(ValueError, match=r"the last context token must be a token id in \[0, 2\)"):
            model([0, bad])
    with pytest.raises(ValueError, match=r"token id in \[0, 2\), got 7"):
        toy.speculative_step([7], model, model, 2, random.Random(0))


# --- costs ---------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("args, message", [
    ((10, 0), r"ridge_tokens must be a finite number > 0, got 0"),
    ((float("nan"), 5), r"tokens must be a finite number >= 0, got nan"),
    ((-5, -1), r"tokens must be a finite number >= 0, got -5"),
    ((10, float("inf")), r"ridge_tokens must be a finite number > 0, got inf"),
    (("10", 5), r"tokens must be a finite number >= 0, got '10'"),
])
def test_pass_time_rejects_bad_arguments(args, message):
    with pytest.raises(ValueError, match=message):
        costs.pass_time(*args)


def test_pass_time_values():
    assert costs.pass_time(0, 5) == 1.0 and costs.pass_time(5, 5) == 1.0 and costs.pass_time(15, 5) == 3.0


def test_parameter_bytes_and_break_even_batch_errors():
    with pytest.raises(TypeError, match="model must be a torch.nn.Module"):
        costs.parameter_bytes("model")
    with pytest.raises(TypeError, match="target must be a torch.nn.Module"):
        costs.extra_parameter_bytes(torch.nn.Linear(2, 2), None)
    assert costs.parameter_bytes(torch.nn.Linear(2, 3)) == (2 * 3 + 3) * 4
    with pytest.raises(ValueError, match="max_batch must be an integer >= 1, got 0"):
        costs.break_even_batch(4, 0.8, 0.1, 295, max_batch=0)
    with pytest.raises(ValueError, match="alpha .* got True"):
        costs.break_even_batch(4, True, 0.1, 295)


# --- optimal_n_draft: stops at the peak, same answers as trying every N ---------------------------------------------
def scan(alpha, c, max_n):
    return max(range(1, max_n + 1), key=lambda n: (round(metrics.predicted_speedup(alpha, n, c), 12), -n))


def test_optimal_n_draft_matches_the_full_scan():
    alphas = [i / 20 for i in range(21)] + [0.999, 1 - 1e-9, 0.123456789]
    cs = [j / 20 for j in range(21)] + [1e-3, 1e-6, 1e-12, 0.0153, 1.5]
    for alpha in alphas:
        for c in cs:
            for max_n in (1, 2, 3, 5, 8, 16, 33, 64):
                assert metrics.optimal_n_draft(alpha, c, max_n) == scan(alpha, c, max_n), (alpha, c, max_n)


def test_optimal_n_draft_work_grows_with_the_best_n_not_max_n(monkeypatch):
    calls = []
    real = metrics.predicted_speedup
    plateau = scan(0.5, 0.0, 200)  # c = 0: the speedup rises to a plateau (2 after rounding)
    assert scan(0.9, 0.01, 64) == 24

    def counting(*args):
        calls.append(args)
        return real(*args)

    monkeypatch.setattr(metrics, "predicted_speedup", counting)
    assert metrics.optimal_n_draft(0.9, 0.01, max_n=10 ** 6) == 24
    assert len(calls) < 30
    calls.clear()
    assert metrics.optimal_n_draft(0.5, 0.0, max_n=10 ** 6) == plateau < 100
    assert len(calls) < 100
    calls.clear()
    assert metrics.optimal_n_draft(1.0, 0.5, max_n=10 ** 6) == 10 ** 6  # alpha = 1, c < 1: rises all the way
    assert len(calls) < 50


def test_optimal_n_draft_search_agrees_with_the_scan(monkeypatch):
    # Up to max_n = 1024 the function scans; force its search onto small ranges to hold it to the scan, including
    # alpha within a float step of 1 and c on both sides of 1 (a first version's "still rising" test lost its digits
    # there: (1 - 2**-53, 0.5, 16) gave 4).
    monkeypatch.setattr(metrics, "_SCAN_LIMIT", 0)
    alphas = [0, 5e-324, 1e-9, 0.1, 0.5, 0.9, 0.999, 1 - 1e-6, 1 - 1e-9, 1 - 1e-12, 1 - 2 ** -53, 1]
    for alpha in alphas:
        for c in [0, 1e-12, 1e-6, 0.05, 0.5, 0.999999, 1, 1.5, 1e3, 1.7e308]:
            for max_n in (1, 2, 3, 5, 16, 100):
                assert metrics.optimal_n_draft(alpha, c, max_n) == scan(alpha, c, max_n), (alpha, c, max_n)


def test_optimal_n_draft_alpha_near_one_huge_max_n(monkeypatch):
    # alpha near 1: consecutive speedups agree to a float's resolution long before the peak, and trying every N up
    # to 10**9 took minutes. The answer is the full scan's (checked once: scan(0.99999, 0.0, 4 * 10**6) = 3633115).
    assert scan(0.99995, 0.0, 200_000) == metrics.optimal_n_draft(0.99995, 0.0, 200_000)
    assert scan(0.9999, 1e-7, 100_000) == metrics.optimal_n_draft(0.9999, 1e-7, 100_000)
    calls = []
    real = metrics.predicted_speedup
    monkeypatch.setattr(metrics, "predicted_speedup", lambda *args: calls.append(args) or real(*args))
    assert metrics.optimal_n_draft(0.99999, 0.0, max_n=10 ** 9) == 3633115
    assert metrics.optimal_n_draft(0.9999999, 1e-9, max_n=10 ** 7) == 10 ** 7   # still rising at max_n
    assert metrics.optimal_n_draft(0.5, 2.0, max_n=10 ** 9) == 1                # a draft dearer than the target
    assert len(calls) < 200


# --- metrics.alpha_from_steps --------------------------------------------------------------------------------------
def test_alpha_from_steps_reads_a_generator_once():
    from types import SimpleNamespace

    steps = [SimpleNamespace(drafted=[1, 2, 3], num_accepted=1, last_kind="resampled"),
             SimpleNamespace(drafted=[1, 2], num_accepted=2, last_kind="bonus")]
    assert metrics.alpha_from_steps(steps) == 3 / 4
    assert metrics.alpha_from_steps(s for s in steps) == 3 / 4


def test_alpha_from_steps_a_tree_path_ending_at_a_shallow_leaf_rejected_nothing():
    from lab.trace import StepRecord

    # Tree: node 0 (depth 1) has child 2 (depth 2); node 1 (depth 1) is a leaf. Depth 2.
    leaf = StepRecord(index=0, position=0, drafted=[5, 6, 7], num_accepted=1, emitted=[6, 9], last_kind="bonus",
                      parents=[-1, -1, 0], path=[1])
    rejected = StepRecord(index=1, position=2, drafted=[5, 6, 7], num_accepted=1, emitted=[5, 8],
                          last_kind="resampled", parents=[-1, -1, 0], path=[0])
    full = StepRecord(index=2, position=4, drafted=[5, 6, 7], num_accepted=2, emitted=[5, 7, 3], last_kind="bonus",
                      parents=[-1, -1, 0], path=[0, 2])
    assert leaf.depth == 2 and leaf.num_accepted < leaf.depth
    assert metrics.alpha_from_steps([leaf]) == 1.0          # one examined level, accepted, then a bonus token
    assert metrics.alpha_from_steps([leaf, rejected]) == 2 / 3
    assert metrics.alpha_from_steps([leaf, rejected, full]) == 4 / 5


# --- bench: arguments, and the shared pair is left as it was -------------------------------------------------------
@pytest.fixture(scope="module")
def pair():
    from lab.models import load_pair

    return load_pair("shakespeare")


def test_run_bench_rejects_bad_prompts(pair):
    from lab.bench import run_bench

    with pytest.raises(TypeError, match=r"prompts must be a list of strings, got one str: wrap it in a list"):
        run_bench(pair, "ROMEO.")
    with pytest.raises(ValueError, match="prompts must be a non-empty list of strings"):
        run_bench(pair, [])
    with pytest.raises(TypeError, match="prompts must be a list of strings, got an item of type int"):
        run_bench(pair, ["ROMEO.", 3])
    with pytest.raises(ValueError, match=r"prompts\[1\] is '', which has no tokens"):
        run_bench(pair, ["ROMEO.", ""])
    with pytest.raises(ValueError, match="max_new_tokens must be an integer >= 1, got 0"):
        run_bench(pair, ["ROMEO."], max_new_tokens=0)
    with pytest.raises(ValueError, match=r"max_new_tokens: prompt \(\d+ tokens\) \+ 600 new tokens exceed the "
                                         r"target's context of 512 positions"):
        run_bench(pair, ["ROMEO."], max_new_tokens=600)


def test_prompt_builders_check_their_counts(pair):
    from lab.bench import copy_heavy_prompts, record_prompts

    for repeats in (0, -1, True, 2.0):
        with pytest.raises(ValueError, match="repeats must be an integer >= 1"):
            copy_heavy_prompts(pair, repeats=repeats)
    for records in (0, 1):  # one record and the next one's opening is not a prompt: it used to return []
        with pytest.raises(ValueError, match="records must be an integer >= 2"):
            record_prompts(pair, records=records)
    with pytest.raises(TypeError, match="texts must be a list of strings, got one str"):
        copy_heavy_prompts(pair, "ROMEO.\nBut soft")
    two = copy_heavy_prompts(pair, ["ROMEO.\nBut soft, what light\n"], repeats=np.int64(2))
    assert len(two) == 1 and two[0].count("ROMEO.\nBut soft, what light\n\n\n") == 2
    assert len(record_prompts(pair, records=np.int64(2))) > len(record_prompts(pair, records=4)) > 0


def test_run_bench_restores_the_drafts_generation_config(pair, monkeypatch):
    import lab.decode
    from lab.bench import run_bench

    config = pair.draft.generation_config
    before = (config.num_assistant_tokens, config.num_assistant_tokens_schedule, config.assistant_confidence_threshold)
    config.num_assistant_tokens, config.num_assistant_tokens_schedule = 7, "heuristic"
    config.assistant_confidence_threshold = 0.25
    try:
        result = run_bench(pair, ["ROMEO.\nBut soft"], max_new_tokens=2, n_draft=3)
        assert result["identical"] and result["settings"]["n_draft"] == 3
        assert (config.num_assistant_tokens, config.num_assistant_tokens_schedule,
                config.assistant_confidence_threshold) == (7, "heuristic", 0.25)

        seen = []

        def failing(*args, **kwargs):  # what the config is during the run, then a failure mid-run
            seen.append((config.num_assistant_tokens, config.num_assistant_tokens_schedule,
                         config.assistant_confidence_threshold))
            raise RuntimeError("boom")

        monkeypatch.setattr(lab.decode, "generate", failing)
        with pytest.raises(RuntimeError, match="boom"):
            run_bench(pair, ["ROMEO."], max_new_tokens=2, n_draft=5)
        assert seen == [(5, "constant", 0.0)]
        assert (config.num_assistant_tokens, config.num_assistant_tokens_schedule,
                config.assistant_confidence_threshold) == (7, "heuristic", 0.25)
    finally:
        config.num_assistant_tokens, config.num_assistant_tokens_schedule, \
            config.assistant_confidence_threshold = before


def test_arena_takes_numpy_temperatures_and_checks_the_context(pair):
    from lab.bench import compare_adaptive, run_arena

    kwargs = {"tasks": ("prose",), "max_new_tokens": 2, "prompts_per_task": 1, "drafters": ("ngram",),
              "progress": False}
    result = run_arena(pair, temperatures=(np.float32(0.0),), **kwargs)
    assert result["settings"]["temperatures"] == [0.0]
    assert [row["drafter"] for row in result["rows"]] == ["autoregressive", "ngram"]
    assert all(type(row["temperature"]) is float for row in result["rows"])  # rows stay JSON-ready
    assert run_arena(pair, temperatures=np.array([0.0]), **kwargs)["settings"]["temperatures"] == [0.0]
    for bad in ((True,), (np.float64("nan"),), np.float32(0.0), np.array([])):
        with pytest.raises(ValueError, match="temperatures must be"):
            run_arena(pair, temperatures=bad, **kwargs)
    with pytest.raises(ValueError, match=r"max_new_tokens: prompt \(\d+ tokens\) \+ 500 new tokens exceed"):
        run_arena(pair, temperatures=(0.0,), **dict(kwargs, max_new_tokens=500))
    with pytest.raises(ValueError, match=r"max_new_tokens: the longest prompt \(\d+ tokens\) \+ 500 new tokens"):
        compare_adaptive(pair, n_values=(1,), max_new_tokens=500, prompts=2, progress=False)


def test_cli_demo_beyond_the_context_is_one_line_and_exit_status_2(pair):
    from lab.models import held_out_prompts

    n = len(pair.encode(held_out_prompts()[0]))
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONWARNINGS="ignore")
    done = subprocess.run([sys.executable, "-m", "lab", "demo", "--max-new-tokens", "600"], capture_output=True,
                          text=True, cwd=ROOT, env=env, timeout=300, check=False)
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr == (f"python -m lab demo: error: --max-new-tokens: prompt ({n} tokens) + 600 new tokens "
                           "exceed the target's context of 512 positions\n")
