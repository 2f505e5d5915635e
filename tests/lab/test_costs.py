"""lab.costs: the KV-cache formula equals the bytes a real transformers cache holds, parameter bytes count what each
drafter adds, and the throughput model has the limits lesson 13 relies on."""

from __future__ import annotations

import copy
import math
import time
from fractions import Fraction

import pytest
import torch

from lab import costs, metrics
from lab.models import forward, new_cache


def filled_cache(model, n=13):
    cache = new_cache()
    forward(model, list(range(1, n + 1)), cache)
    return cache


# --- KV cache ---------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["target", "draft"])
def test_formula_matches_dynamic_cache_tiny(name, request):
    model = request.getfixturevalue(name)
    cache = filled_cache(model, 13)
    assert costs.cache_bytes(cache) == 13 * costs.kv_cache_bytes_per_token(model)  # a model: bytes from its weights
    assert costs.cache_bytes(cache) == 13 * costs.kv_cache_bytes_per_token(model.config, bytes_per_value=4)
    assert costs.cache_bytes(cache) == 13 * costs.kv_bytes_per_token(
        model.config.num_hidden_layers, model.config.num_key_value_heads,
        model.config.hidden_size // model.config.num_attention_heads, 4)


def test_formula_matches_gqa_and_half_precision(target):
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(vocab_size=64, hidden_size=64, intermediate_size=64, num_hidden_layers=3,
                         num_attention_heads=8, num_key_value_heads=2, head_dim=16, max_position_embeddings=64)
    torch.manual_seed(0)
    model = LlamaForCausalLM(config).to(torch.bfloat16).eval()
    cache = filled_cache(model, 9)
    assert costs.cache_bytes(cache) == 9 * costs.kv_cache_bytes_per_token(config, bytes_per_value=2)
    assert costs.kv_cache_bytes_per_token(config, bytes_per_value=2) == 2 * 3 * 2 * 16 * 2


def test_formula_matches_dynamic_cache_bundled_pair(pair):
    for model in (pair.target, pair.draft):
        assert costs.cache_bytes(filled_cache(model, 21)) == 21 * costs.kv_cache_bytes_per_token(model.config)
    assert costs.kv_cache_bytes_per_token(pair.target.config) == 2 * 6 * 6 * 64 * 4


def test_formula_matches_eagle_and_early_exit_caches(pair):
    from lab.drafters import EagleDrafter, EarlyExitDrafter

    eagle = EagleDrafter.from_pretrained(pair).model
    cache = new_cache()
    with torch.no_grad():
        eagle(torch.randn(11, pair.target.config.hidden_size), torch.arange(1, 12), cache=cache)
    assert costs.cache_bytes(cache) == 11 * costs.kv_cache_bytes_per_token(eagle.layer)
    early = EarlyExitDrafter(pair.target, num_layers=2).model
    assert costs.cache_bytes(filled_cache(early, 7)) == 7 * costs.kv_cache_bytes_per_token(early.config)
    assert costs.kv_cache_bytes_per_token(early.config) * 3 == costs.kv_cache_bytes_per_token(pair.target.config)


def test_cache_bytes_layouts_and_errors(target):
    assert costs.cache_bytes(new_cache()) == 0
    k = torch.zeros(1, 2, 5, 8)
    assert costs.cache_bytes(((k, k), (k, k))) == 4 * k.numel() * 4
    with pytest.raises(TypeError, match="not a transformers cache"):
        costs.cache_bytes(object())
    with pytest.raises(TypeError, match=r"a tuple of \(key, value\) pairs, got an item int 1"):
        costs.cache_bytes([1, 2])  # "'int' object is not iterable" named nothing
    for bad in (((1, 2, 3),), ((k,),)):  # not (key, value) pairs: a tensor was counted alone, or nothing
        with pytest.raises(TypeError, match="a tuple of \\(key, value\\) pairs, got an item tuple"):
            costs.cache_bytes(bad)


def test_published_configs():
    assert costs.kv_cache_bytes_per_token(costs.LLAMA_3_1_70B) == 327_680   # 320 KiB per token in bf16
    assert costs.kv_cache_bytes_per_token(costs.LLAMA_3_1_8B) == 131_072    # 128 KiB
    assert costs.kv_cache_bytes_per_token(costs.LLAMA_3_1_8B, bytes_per_value=1) == 65_536
    assert costs.llama_parameter_count(costs.LLAMA_3_1_8B) == 8_030_261_248
    assert 70.5e9 < costs.llama_parameter_count(costs.LLAMA_3_1_70B) < 70.6e9


def test_kv_errors():
    with pytest.raises(ValueError, match="kv_heads"):
        costs.kv_bytes_per_token(2, 0, 64, 2)
    for layers in (0, -1):   # the docstring's non-positive counts: no layers is no model to size
        with pytest.raises(ValueError, match=rf"layers must be an integer in \[1, 1048576\], got {layers}"):
            costs.kv_bytes_per_token(layers, 2, 64, 2)
    with pytest.raises(ValueError, match="bytes_per_value"):
        costs.kv_bytes_per_token(2, 2, 64, -2)
    with pytest.raises(ValueError, match="bytes_per_value"):
        costs.kv_cache_bytes_per_token({"num_hidden_layers": 2, "num_attention_heads": 2, "hidden_size": 8})
    with pytest.raises(ValueError, match="num_hidden_layers"):
        costs.kv_cache_bytes_per_token({"num_attention_heads": 2, "hidden_size": 8}, 2)


# --- parameters ---------------------------------------------------------------------------------------------------
def test_parameter_bytes(target, draft, pair):
    assert costs.parameter_bytes(target) == sum(p.numel() for p in target.parameters()) * 4
    assert costs.parameter_bytes(copy.deepcopy(draft).to(torch.float16)) == costs.parameter_bytes(draft) // 2
    # the bundled target ties its embedding and LM head: one tensor, counted once
    assert costs.parameter_bytes(pair.target) == pair.target.num_parameters() * 4
    for model in (target, draft, pair.target, pair.draft):
        assert costs.llama_parameter_count(model.config) == model.num_parameters()


def test_extra_parameter_bytes(pair):
    from lab.drafters import EagleDrafter, EarlyExitDrafter, MedusaDrafter
    from lab.drafters.eagle import trainable_parameters

    assert costs.extra_parameter_bytes(pair.draft, pair.target) == costs.parameter_bytes(pair.draft)
    assert costs.extra_parameter_bytes(EarlyExitDrafter(pair.target, num_layers=3).model, pair.target) == 0
    heads = MedusaDrafter.from_pretrained(pair).heads
    assert costs.extra_parameter_bytes(heads, pair.target) == sum(p.numel() for p in heads.parameters()) * 4
    eagle = EagleDrafter.from_pretrained(pair).model
    extra = costs.extra_parameter_bytes(eagle, pair.target)
    # its own layers (plus the unused 1-row embedding of its inner LlamaModel); the target's head is not counted
    assert trainable_parameters(eagle) * 4 <= extra < trainable_parameters(eagle) * 4 + 4096


# --- throughput under load ------------------------------------------------------------------------------------
@pytest.mark.parametrize("alpha,n,c", [(0.75, 4, 0.1), (0.6, 1, 0.05), (0.9, 7, 0.0), (0.0, 3, 0.2), (1.0, 5, 0.1)])
def test_gain_limits(alpha, n, c):
    at_one = costs.speculative_throughput_gain(1, n, alpha, c, 295)
    assert at_one == pytest.approx(metrics.expected_tokens_per_call(alpha, n) / (1 + n * c))
    assert at_one == pytest.approx(metrics.predicted_speedup(alpha, n, c))
    big = costs.speculative_throughput_gain(4096, n, alpha, c, 295)
    assert big == pytest.approx(metrics.expected_tokens_per_call(alpha, n) / (n + 1 + n * c))
    if alpha < 1 or c > 0:
        assert big < 1
    gains = [costs.speculative_throughput_gain(b, n, alpha, c, 295) for b in range(1, 600, 7)]
    assert all(a >= b - 1e-12 for a, b in zip(gains, gains[1:]))  # never rises with the batch


def test_gain_ridge_and_bytes():
    # with 4-byte weights the ridge is at twice the tokens: the same batch is still memory-bound
    assert costs.speculative_throughput_gain(100, 4, 0.75, 0.1, 295, bytes_per_param=4) == pytest.approx(
        metrics.predicted_speedup(0.75, 4, 0.1))
    assert costs.speculative_throughput_gain(100, 4, 0.75, 0.1, 295) < metrics.predicted_speedup(0.75, 4, 0.1)
    # a chip with a tiny ridge is compute-bound even at batch 1
    assert costs.speculative_throughput_gain(1, 4, 0.75, 0.1, 1) < 1
    assert costs.pass_time(10, 20) == 1 and costs.pass_time(40, 20) == 2


def test_break_even_batch():
    b = costs.break_even_batch(4, 0.75, 0.1, 295)
    assert costs.speculative_throughput_gain(b, 4, 0.75, 0.1, 295) < 1
    assert costs.speculative_throughput_gain(b - 1, 4, 0.75, 0.1, 295) >= 1
    assert costs.break_even_batch(1, 0.75, 0.1, 295) > b        # a short draft survives a larger batch
    assert costs.break_even_batch(4, 0.0, 0.1, 295) == 1        # nothing accepted: loses at once
    assert costs.break_even_batch(4, 1.0, 0.0, 295) is None     # free, perfect drafts never lose


def test_draft_length_schedule_is_the_best_n_at_every_batch():
    alpha, c, ridge = 0.75, 0.1, 295
    schedule = costs.draft_length_schedule(alpha, c, ridge, max_n=6, max_batch=400)
    # contiguous ranges covering 1..max_batch, neighbours with different N
    assert schedule[0][0] == 1 and schedule[-1][1] == 400
    assert all(a[1] + 1 == b[0] and a[2] != b[2] for a, b in zip(schedule, schedule[1:]))
    for first, last, n in schedule:
        for batch in range(first, last + 1):
            gains = [1.0] + [costs.speculative_throughput_gain(batch, k, alpha, c, ridge) for k in range(1, 7)]
            assert max(gains) == pytest.approx(gains[n], rel=1e-12), (batch, n)
            assert all(g < gains[n] - 1e-12 for g in gains[:n])  # smaller N lose: the smallest best N is kept
    # batch 1 is lesson 06's best N; speculation is off exactly from N = 1's break-even batch
    assert schedule[0][2] == metrics.optimal_n_draft(alpha, c, max_n=6)
    off = next(first for first, _, n in schedule if n == 0)
    assert off == costs.break_even_batch(1, alpha, c, ridge) and schedule[-1][2] == 0
    assert costs.draft_length_schedule(1.0, 0.0, ridge, max_n=3, max_batch=5) == [[1, 5, 3]]   # free, perfect drafts
    # ties: free, perfect drafts on a ridge of 4 tokens gain 2 at batch 2 for every N (the smallest wins) and
    # exactly 1 from batch 4 (no speculation wins)
    assert costs.draft_length_schedule(1.0, 0.0, 4, max_n=3, max_batch=6) == [[1, 1, 3], [2, 3, 1], [4, 6, 0]]
    # past the ridge those gains are exactly 1 on paper but not in floats: rounding keeps the ranges clean
    assert costs.draft_length_schedule(1.0, 0.0, ridge, max_n=8, max_batch=400) == [
        [1, 36, 8], [37, 42, 7], [43, 49, 6], [50, 58, 5], [59, 73, 4], [74, 98, 3], [99, 147, 2], [148, 294, 1],
        [295, 400, 0]]
    assert costs.draft_length_schedule(0.0, 0.1, ridge, max_batch=5) == [[1, 5, 0]]            # nothing accepted


@pytest.mark.parametrize("bad,match", [
    (dict(max_n=0), "max_n"), (dict(max_batch=0), "max_batch"), (dict(alpha=1.5), "alpha"),
    (dict(cost_ratio=-1), "cost_ratio"), (dict(flops_per_byte=0), "flops_per_byte"), (dict(max_n=True), "max_n"),
    # a tester's 10**4 x 10**4 ran for minutes: the sizes are capped
    (dict(max_n=65), r"max_n must be an integer in \[1, 64\]"),
    (dict(max_batch=4097), r"max_batch must be an integer in \[1, 4096\]"),
])
def test_draft_length_schedule_errors(bad, match):
    args = dict(alpha=0.75, cost_ratio=0.1, flops_per_byte=295) | bad
    with pytest.raises(ValueError, match=match):
        costs.draft_length_schedule(**args)


@pytest.mark.parametrize("bad,match", [
    (dict(batch=0), "batch"), (dict(n_draft=0), "n_draft"), (dict(alpha=1.5), "alpha"), (dict(alpha=-0.1), "alpha"),
    (dict(cost_ratio=-0.1), "cost_ratio"), (dict(flops_per_byte=0), "flops_per_byte"),
    (dict(bytes_per_param=0), "bytes_per_param"), (dict(batch=2.5), "batch"), (dict(alpha=math.nan), "alpha"),
])
def test_gain_errors(bad, match):
    args = dict(batch=8, n_draft=4, alpha=0.75, cost_ratio=0.1, flops_per_byte=295) | bad
    with pytest.raises(ValueError, match=match):
        costs.speculative_throughput_gain(**args)


def test_break_even_tokens():
    assert costs.break_even_tokens(6.0, 4.5, 1.5) == 3       # a tie at 2 tokens is not a win
    assert costs.break_even_tokens(0.0, 5.0, 3.0) == 1
    assert costs.break_even_tokens(50.0, 4.6, 2.8) == 28
    assert costs.break_even_tokens(100.0, 1.25, 1.0) == 401
    assert costs.break_even_tokens(5.0, 3.0, 3.0) is None
    for setup, ar, spec in [(1.7, 0.3, 0.1), (0.3, 0.3, 0.2), (1e-9, 1.0, 0.9)]:
        n = costs.break_even_tokens(setup, ar, spec)
        assert setup + n * spec < n * ar and (n == 1 or not setup + (n - 1) * spec < (n - 1) * ar)
    with pytest.raises(ValueError, match="setup_ms"):
        costs.break_even_tokens(-1.0, 3.0, 2.0)


@pytest.mark.parametrize("bad,match", [
    ((math.nan, 3.0, 2.0), "setup_ms"), ((5.0, math.inf, 2.0), "ar_ms_per_token"),
    ((5.0, 3.0, -2.0), "spec_ms_per_token"), ((5.0, "3", 2.0), "ar_ms_per_token"),
])
def test_break_even_tokens_errors(bad, match):
    with pytest.raises(ValueError, match=match):
        costs.break_even_tokens(*bad)


def test_break_even_tokens_near_equal_times_are_instant_and_exact():
    """Per-token times a hair apart used to send a counting loop through ~10^13 steps; the closed form answers at
    once, and exactly: n is the first whole number past setup / saving, with the saving taken exactly."""
    start = time.perf_counter()
    spec = 4.6 - 1e-12
    n = costs.break_even_tokens(50.0, 4.6, spec)
    saving = Fraction(4.6) - Fraction(spec)
    assert (n - 1) * saving <= 50 < n * saving
    assert n == pytest.approx(50 / 1e-12, rel=1e-3)   # about 5 * 10^13 tokens
    # one unit in the last place apart: the saving is exactly 2**-50 ms, and 50 ms is exactly 50 * 2**50 savings,
    # a tie there, so the answer is the next token
    assert math.nextafter(4.6, 0) == 4.6 - 2 ** -50
    assert costs.break_even_tokens(50.0, 4.6, math.nextafter(4.6, 0)) == 50 * 2 ** 50 + 1
    assert costs.break_even_tokens(0.0, 4.6, math.nextafter(4.6, 0)) == 1
    assert costs.break_even_tokens(1e300, 1.0, 0.5) == int(Fraction(1e300) * 2) + 1
    assert time.perf_counter() - start < 1.0   # the old loop needed about 1 s for 4.6 - 1e-11 and hung at 1e-12


@pytest.mark.parametrize("setup", [0.0, 50.0])
def test_break_even_tokens_never(setup):
    """Speculation never catches up when its per-token time is not below autoregressive, however small the
    difference and whatever the set-up."""
    assert costs.break_even_tokens(setup, 4.6, 4.6) is None
    assert costs.break_even_tokens(setup, 4.6, math.nextafter(4.6, 10)) is None
    assert costs.break_even_tokens(setup, 2.0, 2.5) is None
    assert costs.break_even_tokens(setup, 0.0, 0.0) is None


def test_time_forward(target):
    ms = costs.time_forward(target, batch=2, new_tokens=3, context=5, repeats=2)
    assert ms > 0
    with pytest.raises(ValueError, match="exceeds"):
        costs.time_forward(target, new_tokens=10, context=250)
    with pytest.raises(ValueError, match="batch"):
        costs.time_forward(target, batch=0)


# --- edge values ------------------------------------------------------------------------------------------------------
# a config.json dict names its dtype as "torch_dtype" (older transformers) — the size comes from there.
def test_kv_bytes_from_a_config_json_with_torch_dtype():
    config = {"num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 8, "hidden_size": 4096,
              "torch_dtype": "bfloat16"}
    assert costs.kv_cache_bytes_per_token(config) == 131_072          # 2 · 32 · 8 · 128 · 2 bytes
    assert costs.kv_cache_bytes_per_token({**config, "torch_dtype": "float32"}) == 262_144


def test_ridge_that_overflows_names_both_arguments():
    from lab import costs

    with pytest.raises(ValueError, match="flops_per_byte \\* bytes_per_param"):
        costs.speculative_throughput_gain(1, 4, 0.75, 0.1, 1e308, 1e308)
    with pytest.raises(ValueError, match="flops_per_byte \\* bytes_per_param"):
        costs.speculative_throughput_gain(1, 4, 0.75, 0.1, 1e-320)


def test_llama_parameter_count_defaults_to_untied_and_wants_a_bool():
    from lab import costs

    untied = costs.llama_parameter_count(costs.LLAMA_3_1_8B)
    config = {k: v for k, v in costs.LLAMA_3_1_8B.items() if k != "tie_word_embeddings"}
    assert costs.llama_parameter_count(config) == untied == 8_030_261_248  # LlamaConfig's default: untied
    with pytest.raises(ValueError, match="tie_word_embeddings"):
        costs.llama_parameter_count({**config, "tie_word_embeddings": "false"})


def test_kv_config_errors_name_the_problem():
    from lab import costs

    config = {"num_hidden_layers": 2, "num_attention_heads": 4, "hidden_size": 64}
    with pytest.raises(ValueError, match="does not know .'bf16'"):
        costs.kv_cache_bytes_per_token({**config, "dtype": "bf16"})
    for key in ("head_dim", "num_key_value_heads"):
        with pytest.raises(ValueError, match=key):
            costs.kv_cache_bytes_per_token({**config, key: 0}, 2)


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
    with pytest.raises(ValueError, match=r"max_batch must be an integer in \[1, 65536\], got 0"):
        costs.break_even_batch(4, 0.8, 0.1, 295, max_batch=0)
    with pytest.raises(ValueError, match="alpha .* got True"):
        costs.break_even_batch(4, True, 0.1, 295)


def test_timing_helpers_name_a_wrong_model_and_bad_counts(pair, target):
    """time_forward(pair) raised an AttributeError about .config; a float seed torch's own "manual_seed expected a
    long"; repeats=10**9 ran for hours and batch=10**9 asked the allocator for 264 GB."""
    from lab.drafters import DraftModelDrafter

    with pytest.raises(TypeError, match="model must be a torch.nn.Module"):
        costs.time_forward(pair)
    for kwargs, words in ((dict(seed=1.5), "seed must be an integer"), (dict(repeats=10**9), r"repeats .* \[1, 1000\]"),
                          (dict(batch=10**9), r"batch must be an integer in \[1, 4096\]")):
        with pytest.raises(ValueError, match=words):
            costs.time_forward(target, **kwargs)
    with pytest.raises(TypeError, match=r"drafter must be a lab.drafters.DraftModelDrafter"):
        costs.draft_step_ms(pair.draft)
    with pytest.raises(ValueError, match="seed must be an integer"):
        costs.draft_step_ms(DraftModelDrafter(pair.draft, 1), seed=None)
    with pytest.raises(TypeError, match="model must be an EAGLE draft"):
        costs.eagle_step_ms(target)


# --- numbers no float holds, and sizes in the wrong unit ------------------------------------------------------------
@pytest.mark.parametrize("call, message", [
    (lambda: costs.pass_time(10**400, 5), r"tokens must be a finite number >= 0, got 1000"),
    (lambda: costs.break_even_tokens(10**400, 3.0, 2.0), "setup_ms must be a finite number"),
    (lambda: costs.speculative_throughput_gain(10**400, 4, 0.75, 0.1, 295),
     r"batch must be an integer in \[1, 65536\]"),
    (lambda: costs.speculative_throughput_gain(8, 4, 0.75, 1e308, 295), "n_draft \\* cost_ratio"),
    (lambda: costs.speculative_throughput_gain(8, 4, 0.75, 0.1, 10**400), "flops_per_byte must be a finite number"),
    (lambda: costs.break_even_batch(4, 0.75, 0.1, 295, max_batch=10**400), r"max_batch must be an integer in \[1, 6"),
    (lambda: costs.kv_bytes_per_token(10**400, 8, 128, 2), r"layers must be an integer in \[1, 1048576\]"),
    (lambda: costs.kv_bytes_per_token(32, 8, 128, 16), r"bytes_per_value must be a number of bytes in \(0, 8\].*bits"),
    (lambda: costs.kv_bytes_per_token(32, 8, 128, 10**400), "bytes_per_value must be a finite number > 0"),
    (lambda: costs.kv_cache_bytes_per_token({"num_hidden_layers": 2, "num_attention_heads": 4, "hidden_size": 64,
                                             "dtype": "int8"}), "torch.int8 is not a floating-point type"),
])
def test_numbers_too_large_or_in_bits_are_named(call, message):
    """A tester's 10**400 raised a bare OverflowError ("int too large to convert to float") from these, a
    bytes_per_value of 16 (bf16's bits) gave a cache eight times too large, and an int8 config dtype sized one;
    c = 1e308 blamed flops_per_byte."""
    with pytest.raises(ValueError, match=message):
        call()


def test_the_largest_allowed_sizes_still_answer():
    assert costs.kv_bytes_per_token(1 << 20, 1, 1, 8) == 2 * (1 << 20) * 8
    assert costs.kv_bytes_per_token(32, 8, 128, 0.5) == 2 * 32 * 8 * 128 // 2     # a 4-bit cache
    assert costs.speculative_throughput_gain(1 << 16, 4, 0.75, 0.1, 295) < 1
    assert costs.break_even_batch(4, 0.75, 0.1, 295, max_batch=1 << 16) is not None
