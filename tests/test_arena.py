"""The drafter arena (lab.bench.run_arena, compare_adaptive, format_arena, widgets.arena) on the bundled pair, and
the adaptive draft length of DraftModelDrafter (transformers' "heuristic" schedule) on the tiny fixtures."""
import math

import numpy as np
import pytest
import torch

from lab.bench import (
    ARENA_DRAFTERS,
    EFFICIENCY_FACTORS,
    compare_adaptive,
    format_adaptive,
    format_arena,
    format_reconciliation,
    run_arena,
)
from lab.decode import generate
from lab.drafters import DraftModelDrafter
from lab.drafters.base import DraftRequest
from lab.drafters.draft_model import next_n_draft
from lab.metrics import expected_tokens_per_call, predicted_speedup

FIELDS = ("task", "temperature", "drafter", "label", "n_draft", "new_tokens", "target_calls", "draft_calls",
          "acceptance_rate", "alpha", "per_position_acceptance", "tokens_per_target_call", "ar_ms_per_step",
          "draft_ms_per_call", "cost_ratio", "draft_ms_per_step", "verify_ms_per_step", "step_draft_cost",
          "verify_cost", "prefill_ms", "tokens_per_second", "baseline_tokens_per_second", "same_as_autoregressive",
          "prediction", "expected_tokens_per_call", "predicted_speedup", "predicted_with_verify_cost",
          "measured_speedup", "decode_speedup", "efficiency", "decode_efficiency", "target_call_cost",
          "efficiency_factors")
TASKS = ("prose", "copy_edit", "structured")


@pytest.fixture(scope="module")
def pair():
    from lab.models import load_pair

    return load_pair()


@pytest.fixture(scope="module")
def arena(pair):
    return run_arena(pair, tasks=TASKS, temperatures=(0.0, 1.0), max_new_tokens=8, prompts_per_task=1,
                     progress=False)


def test_arena_rows_have_every_field(arena):
    rows = arena["rows"]
    assert len(rows) == len(TASKS) * 2 * (1 + len(ARENA_DRAFTERS))
    for row in rows:
        assert set(FIELDS) <= set(row), set(FIELDS) - set(row)
        assert row["new_tokens"] == 8  # max_new_tokens is exact (no EOS in these continuations)
        assert 1 <= row["tokens_per_target_call"] <= 1 + 14  # at most a Medusa path + 1, never below one per call
        assert row["tokens_per_target_call"] == row["new_tokens"] / row["target_calls"]
    cells = {(r["task"], r["temperature"]) for r in rows}
    assert cells == {(t, T) for t in TASKS for T in (0.0, 1.0)}
    for task, temperature in cells:
        cell = [r for r in rows if (r["task"], r["temperature"]) == (task, temperature)]
        assert [r["drafter"] for r in cell] == ["autoregressive", *ARENA_DRAFTERS]
        base = cell[0]
        assert base["measured_speedup"] == base["predicted_speedup"] == base["efficiency"] == 1.0
        assert all(r["baseline_tokens_per_second"] == base["tokens_per_second"] for r in cell)
    assert arena["settings"]["prompts_per_task"] == 1 and len(arena["settings"]["load_average"]) == 2


def test_greedy_rows_match_autoregressive(arena):
    greedy = [r for r in arena["rows"] if r["temperature"] == 0]
    assert len(greedy) == len(TASKS) * (1 + len(ARENA_DRAFTERS))
    assert all(r["same_as_autoregressive"] is True for r in greedy)
    assert all(r["same_as_autoregressive"] is None for r in arena["rows"] if r["temperature"] > 0)


def test_predictions_and_efficiency(arena):
    for row in arena["rows"]:
        assert row["efficiency"] == row["measured_speedup"] / row["predicted_speedup"]
        assert row["decode_efficiency"] == row["decode_speedup"] / row["predicted_speedup"]
        assert row["measured_speedup"] == row["tokens_per_second"] / row["baseline_tokens_per_second"]
        if row["drafter"] in ("model", "eagle", "early-exit"):
            assert row["prediction"] == "alpha, N, c" and row["n_draft"] == 4
            assert row["cost_ratio"] == row["draft_ms_per_call"] / row["ar_ms_per_step"] > 0
            assert row["predicted_speedup"] == predicted_speedup(row["alpha"], 4, row["cost_ratio"])
            assert row["expected_tokens_per_call"] == expected_tokens_per_call(row["alpha"], 4)
            # drafts after the first rejection are never examined, so alpha >= accepted / drafted
            assert row["alpha"] >= row["acceptance_rate"]
        elif row["drafter"] in ("ngram", "lookahead", "medusa"):
            assert row["prediction"] == "tokens/call, draft ms"
            assert row["predicted_speedup"] == row["tokens_per_target_call"] / (1 + row["step_draft_cost"])
    for row in arena["rows"]:
        if row["drafter"] in ("ngram", "lookahead"):
            assert row["cost_ratio"] is None and row["draft_calls"] == 0


def test_efficiency_factors_multiply_to_the_efficiency(arena):
    for row in arena["rows"]:
        f = row["efficiency_factors"]
        assert tuple(f) == EFFICIENCY_FACTORS
        assert all(v > 0 for v in f.values())
        assert math.isclose(math.prod(f.values()), row["efficiency"], rel_tol=1e-9)
        assert math.isclose(math.prod(f.values()) / f["prefill"], row["decode_efficiency"], rel_tol=1e-9)
        assert f["prefill"] == row["measured_speedup"] / row["decode_speedup"]
        if row["drafter"] == "autoregressive":
            assert set(f.values()) == {1.0} and row["target_call_cost"] == 1.0
        elif row["prediction"] == "alpha, N, c":
            assert f["acceptance"] == row["tokens_per_target_call"] / row["expected_tokens_per_call"]
            assert f["drafting"] == (1 + 4 * row["cost_ratio"]) / (1 + row["step_draft_cost"])
        else:  # predicted from the measured tokens per call and drafting time: nothing to lose there
            assert f["acceptance"] == 1.0 and f["drafting"] == 1.0
        if row["drafter"] != "autoregressive":
            # step cost: predicted / measured, split three ways at the target's forward
            assert math.isclose(f["drafting"] * f["target_call"] * f["verification"],
                                (1 + (4 * row["cost_ratio"] if row["prediction"] == "alpha, N, c"
                                      else row["step_draft_cost"])) / (row["step_draft_cost"] + row["verify_cost"]),
                                rel_tol=1e-9)
            assert row["target_call_cost"] > 0


def test_target_ms_is_the_forward_inside_verify_ms(pair):
    prompt = pair.encode("ROMEO:\nWhat light")
    spec = generate(pair.target, prompt, drafter=DraftModelDrafter(pair.draft, 4), max_new_tokens=12)
    assert spec.steps and all(0 < s.target_ms <= s.verify_ms for s in spec.steps)
    assert spec.stats["target_ms"] == sum(s.target_ms for s in spec.steps)


def test_format_arena_and_figure(arena):
    from widgets.arena import arena_figure

    table = format_arena(arena)
    lines = table.splitlines()
    assert lines[2].startswith("| task | T | drafter | N | acceptance rate | α |")
    body = [line for line in lines if line.startswith("| prose") or line.startswith("| copy_edit")
            or line.startswith("| structured")]
    assert len(body) == len(arena["rows"])
    assert "| prose | 0 | draft model | 4 |" in table
    fig = arena_figure(arena)
    assert len(fig.data) == 2 * len(TASKS) * 2  # measured + predicted bars per panel
    assert [t.name for t in fig.data[:2]] == ["measured", "predicted"]
    assert list(fig.data[0].x) == ["draft model", "prompt lookup", "lookahead", "Medusa", "EAGLE", "early exit"]
    with pytest.raises(ValueError, match="no drafter rows"):
        arena_figure({"rows": []})
    table = format_reconciliation(arena)
    assert table.splitlines()[0].startswith("| task | T | drafter | N | predicted × | × acceptance | × drafting |")
    assert sum(line.startswith("| prose") for line in table.splitlines()) == 2 * len(ARENA_DRAFTERS)
    with pytest.raises(ValueError, match="no drafter rows"):
        format_reconciliation({"rows": arena["rows"][:1]})


def test_efficiency_waterfall(arena):
    from widgets.arena import efficiency_waterfall

    row = next(r for r in arena["rows"] if r["drafter"] == "model")
    fig = efficiency_waterfall(row)
    bars = fig.data[0]
    assert list(bars.measure) == ["absolute"] + ["relative"] * len(EFFICIENCY_FACTORS) + ["total"]
    assert bars.y[0] == row["predicted_speedup"]
    assert math.isclose(sum(bars.y), row["measured_speedup"], rel_tol=1e-9)  # the steps walk down to the measurement
    assert "draft model" in fig.layout.title.text
    with pytest.raises(ValueError, match="efficiency_factors"):
        efficiency_waterfall({"drafter": "model"})


def test_arena_rejects_bad_arguments(pair):
    with pytest.raises(ValueError, match="tasks"):
        run_arena(pair, tasks=("poetry",), progress=False)
    with pytest.raises(ValueError, match="prompts_per_task"):
        run_arena(pair, tasks=("structured",), prompts_per_task=50, progress=False)
    with pytest.raises(ValueError, match="temperatures"):
        run_arena(pair, temperatures=(-1.0,), progress=False)
    with pytest.raises(ValueError, match="drafters"):
        run_arena(pair, drafters=("oracle",), progress=False)
    with pytest.raises(ValueError, match="max_new_tokens"):
        run_arena(pair, max_new_tokens=0, progress=False)
    with pytest.raises(ValueError, match="seed"):
        run_arena(pair, seed="x", progress=False)
    with pytest.raises(ValueError, match="temperatures"):
        run_arena(pair, temperatures=0.0, progress=False)
    # compare_adaptive names its own arguments
    for kwargs, name in (({"start_n": 0}, "start_n"), ({"temperature": -1.0}, "temperature must"),
                         ({"task": "poem"}, "task must"), ({"prompts": 0}, "prompts must"),
                         ({"prompts": 99}, "prompts must be at most"), ({"seed": 1.5}, "seed"),
                         ({"n_values": (0,)}, "n_values"), ({"n_values": 3}, "n_values"),
                         ({"max_n_draft": 2}, "max_n_draft"), ({"max_n_draft": 4.0}, "max_n_draft")):
        with pytest.raises(ValueError, match=name):
            compare_adaptive(pair, progress=False, **kwargs)


def test_compare_adaptive(pair):
    # NumPy integers count as integers, as elsewhere in lab
    result = compare_adaptive(pair, n_values=[np.int64(1), np.int64(3)], max_n_draft=np.int64(16), max_new_tokens=12,
                              prompts=1, progress=False)
    rows = result["rows"]
    assert [r["drafter"] for r in rows] == ["autoregressive", "model", "model", "adaptive"]
    assert [r["n_draft"] for r in rows] == [None, 1, 3, None]
    assert all(r["same_as_autoregressive"] is True for r in rows)
    adaptive = rows[-1]
    history = adaptive["n_draft_history"]
    assert history[0] == 4 and all(1 <= n <= 16 for n in history)
    assert all(b in (a + 2, max(1, a - 1), 16) for a, b in zip(history, history[1:]))
    assert adaptive["mean_n_draft"] == sum(history) / len(history)
    assert result["best_fixed_n"] in (1, 3)
    assert "draft model, adaptive N" in format_adaptive(result)
    best = next(r for r in rows if r["n_draft"] == result["best_fixed_n"])
    assert f"its efficiency {best['efficiency']:.2f}" in format_adaptive(result)


# ---------------------------------------------------------------------------------------------------------
# The adaptive rule (transformers' num_assistant_tokens_schedule="heuristic").

def test_next_n_draft_rule():
    assert next_n_draft(4, 4, 4) == 6            # all accepted: +2
    assert next_n_draft(4, 3, 4) == 3            # a rejection: -1
    assert next_n_draft(1, 0, 1) == 1            # never below 1
    assert next_n_draft(6, 2, 2) == 8            # a truncated step whose drafts were all accepted still grows
    assert next_n_draft(15, 4, 4, max_n_draft=16) == 16 and next_n_draft(16, 16, 16, max_n_draft=16) == 16
    for args, name in (((0, 0, 0), "n_draft"), ((4, 5, 4), "num_accepted"), ((4, 0, -1), "n_drafted"),
                       ((4, 1, 2, 0), "max_n_draft")):
        with pytest.raises(ValueError, match=name):
            next_n_draft(*args)


def test_adaptive_follows_scripted_acceptances(draft):
    drafter = DraftModelDrafter(draft, n_draft=2, adaptive=True, max_n_draft=7)
    prompt = [3, 1, 4, 1, 5, 9, 2, 6]
    drafter.reset(prompt)
    tokens = list(prompt)
    # accepted per step as a share of what was drafted: "all" or a count
    script = ["all", "all", 1, "all", "all", 0, 0, 0, 0, 0, 0, "all", 2]
    expected_n = [2, 4, 6, 5, 7, 7, 6, 5, 4, 3, 2, 1, 3]
    seen = []
    for accept, n in zip(script, expected_n):
        draft_out = drafter.propose(DraftRequest(tokens, max_tokens=100))
        seen.append(len(draft_out.tokens))
        assert drafter.n_draft == n
        k = len(draft_out.tokens) if accept == "all" else accept
        drafter.update(k, 7)
        tokens += draft_out.tokens[:k] + [7]
    assert seen == expected_n
    assert drafter.n_draft_history == expected_n
    assert drafter.n_draft == 2  # the last step accepted 2 of 3
    # a step capped by max_new_tokens: 1 drafted of N = 2, and accepted -> N still grows, to 4
    out = drafter.propose(DraftRequest(tokens, max_tokens=1))
    assert len(out.tokens) == 1
    drafter.update(1, 7)
    assert drafter.n_draft == 4
    drafter.reset(prompt)  # each generation starts from the initial N ("heuristic_transient")
    assert drafter.n_draft == 2 and drafter.n_draft_history == []


def test_fixed_n_never_changes(draft):
    drafter = DraftModelDrafter(draft, n_draft=3)
    drafter.reset([1, 2, 3])
    for accepted in (3, 0, 3):
        out = drafter.propose(DraftRequest([1, 2, 3], max_tokens=100))
        assert len(out.tokens) == 3
        drafter.update(accepted, 5)
    assert drafter.n_draft == 3 and drafter.n_draft_history == [3, 3, 3]


@pytest.mark.parametrize("which", ["draft", "noisy_draft"])
def test_adaptive_greedy_parity(request, target, which):
    model = request.getfixturevalue(which)  # a random draft (N shrinks) and a close one (N grows)
    for seed, max_new in ((0, 1), (1, 17), (2, 40)):
        prompt = torch.randint(0, 64, (6,), generator=torch.Generator().manual_seed(seed)).tolist()
        plain = generate(target, prompt, max_new_tokens=max_new)
        drafter = DraftModelDrafter(model, n_draft=2, adaptive=True, max_n_draft=8)
        spec = generate(target, prompt, drafter=drafter, max_new_tokens=max_new)
        assert spec.tokens == plain.tokens
        assert [s.depth for s in spec.steps if s.drafted] == [
            min(n, max_new - s.position - 1) for n, s in zip(drafter.n_draft_history,
                                                              [s for s in spec.steps if s.drafted])]
    eos = plain.tokens[5]
    drafter = DraftModelDrafter(model, n_draft=1, adaptive=True)
    spec = generate(target, prompt, drafter=drafter, max_new_tokens=40, eos_token_id=eos)
    assert spec.tokens == generate(target, prompt, max_new_tokens=40, eos_token_id=eos).tokens


def test_adaptive_grows_with_a_close_draft(target, noisy_draft, draft):
    prompt = [5, 17, 33, 2, 8, 40]
    close = DraftModelDrafter(noisy_draft, n_draft=2, adaptive=True, max_n_draft=12)
    generate(target, prompt, drafter=close, max_new_tokens=60)
    far = DraftModelDrafter(draft, n_draft=2, adaptive=True, max_n_draft=12)
    generate(target, prompt, drafter=far, max_new_tokens=60)
    assert max(close.n_draft_history) > 2      # long accepted runs let N grow
    assert far.n_draft_history.count(1) > len(far.n_draft_history) // 2  # a random draft is pushed down to N = 1


def test_adaptive_arguments(draft):
    with pytest.raises(ValueError, match="adaptive=True"):
        DraftModelDrafter(draft, n_draft=2, max_n_draft=8)
    with pytest.raises(ValueError, match="max_n_draft"):
        DraftModelDrafter(draft, n_draft=4, adaptive=True, max_n_draft=3)
    with pytest.raises(ValueError, match="n_draft"):
        DraftModelDrafter(draft, n_draft=0, adaptive=True)
