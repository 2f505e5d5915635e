"""The drafter arena (lab.arena: run_arena, compare_adaptive, format_arena, format_reconciliation, and the views of
widgets.arena) on the bundled pair, and by hand: pooling, one arena row, its efficiency factors and the tables, on
synthetic step records with round numbers, so every value is worked out in the comments."""

from __future__ import annotations

import math

import numpy as np
import pytest

from lab.arena import (ARENA_DRAFTERS, DRAFTER_LABELS, EFFICIENCY_FACTORS, FORMULA_DRAFTERS, _baseline_row, _cell_row,
                       _pool, compare_adaptive, format_adaptive, format_arena, format_reconciliation, run_arena)
from lab.decode import generate
from lab.drafters import DraftModelDrafter
from lab.metrics import expected_tokens_per_call, predicted_speedup
from lab.registry import OWN_DRAFT
from lab.trace import Generation, StepRecord

FIELDS = ("task", "temperature", "drafter", "label", "n_draft", "new_tokens", "target_calls", "draft_calls",
          "acceptance_rate", "alpha", "per_position_acceptance", "tokens_per_target_call", "ar_ms_per_step",
          "draft_ms_per_call", "cost_ratio", "draft_ms_per_step", "verify_ms_per_step", "step_draft_cost",
          "verify_cost", "prefill_ms", "tokens_per_second", "baseline_tokens_per_second", "same_as_autoregressive",
          "prediction", "expected_tokens_per_call", "predicted_speedup", "predicted_with_verify_cost",
          "measured_speedup", "decode_speedup", "efficiency", "decode_efficiency", "target_call_cost",
          "efficiency_factors")
TASKS = ("prose", "copy_edit", "structured")


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
        # one prompt per cell, whose first token came from the prefill
        assert row["tokens_per_target_call"] == (row["new_tokens"] - 1) / row["target_calls"]
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
        if row["drafter"] in FORMULA_DRAFTERS:  # one draft forward per drafted token (DrafterSpec)
            assert row["prediction"] == "alpha, N, c" and row["n_draft"] == 4
            assert row["cost_ratio"] == row["draft_ms_per_call"] / row["ar_ms_per_step"] > 0
            assert row["predicted_speedup"] == predicted_speedup(row["alpha"], 4, row["cost_ratio"])
            assert row["expected_tokens_per_call"] == expected_tokens_per_call(row["alpha"], 4)
            # drafts after the first rejection are never examined, so alpha >= accepted / drafted
            assert row["alpha"] >= row["acceptance_rate"]
        elif row["drafter"] != "autoregressive":  # every other drafter: measured tokens per call and draft time
            assert row["prediction"] == "tokens/call, draft ms"
            assert row["predicted_speedup"] == row["tokens_per_target_call"] / (1 + row["step_draft_cost"])
    for row in arena["rows"]:
        if row["drafter"] in ("ngram", "lookahead", "suffix"):  # no draft forward pass
            assert row["cost_ratio"] is None and row["draft_calls"] == 0
        if row["drafter"] in OWN_DRAFT:  # their own geometry sets the draft
            assert row["n_draft"] is None
    assert "suffix decoding depth 24, spec factor 1" in arena["settings"]["geometry"]


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
    assert spec.decode_steps and all(0 < s.target_ms <= s.verify_ms for s in spec.decode_steps)
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
    assert list(fig.data[0].x) == [DRAFTER_LABELS[kind] for kind in ARENA_DRAFTERS]  # the registry's order
    assert list(fig.data[0].x[:4]) == ["draft model", "prompt lookup", "lookahead", "Medusa"]
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
    # a repeated entry would run and print the same cells twice
    for kwargs, name in (({"tasks": ("prose", "prose")}, "tasks"), ({"drafters": ("ngram", "ngram")}, "drafters"),
                         ({"temperatures": (0.0, 0)}, "temperatures")):
        with pytest.raises(ValueError, match=rf"{name} must not repeat an entry"):
            run_arena(pair, progress=False, **kwargs)
    # compare_adaptive names its own arguments
    for kwargs, name in (({"start_n": 0}, "start_n"), ({"temperature": -1.0}, "temperature must"),
                         ({"task": "poem"}, "task must"), ({"prompts": 0}, "prompts must"),
                         ({"prompts": 99}, "prompts must be at most"), ({"seed": 1.5}, "seed"),
                         ({"n_values": (0,)}, "n_values"), ({"n_values": 3}, "n_values"),
                         ({"max_n_draft": 2}, "max_n_draft"), ({"max_n_draft": 4.0}, "max_n_draft"),
                         ({"n_values": (2, 2)}, "distinct integers"), ({"n_values": np.array([])}, "n_values")):
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
    # an instructor's `arena --max-new-tokens 2`: one token a call at every N, and a "best fixed N" all the same
    for row in rows:
        if row["drafter"] == "model":
            row["tokens_per_target_call"] = 1.0
    text = format_adaptive(result)
    assert "best fixed N: none (no N had a draft accepted: 1 token per target call at every N" in text
    assert "best fixed N (measured)" not in text


# ---------------------------------------------------------------------------------------------------------
# By hand, on synthetic step records.


def _ar_generation():
    """8 autoregressive steps: verify 10 ms (target forward 8 ms) each; wall 100 ms of which prefill 10 ms."""
    steps = [StepRecord(index=i, position=i, drafted=[], num_accepted=0, emitted=[1], last_kind="bonus",
                        verify_ms=10.0, target_ms=8.0) for i in range(8)]
    return Generation(tokens=[1] * 8, steps=steps, stats={"wall_ms": 100.0, "prefill_ms": 10.0})


def _spec_generation():
    """2 steps of N = 4 (4 then 2 accepted; 5 + 3 tokens), each draft 4 ms over 4 calls, verify 12 ms of which the
    target's forward 10 ms; wall 40 ms of which prefill 10 ms."""
    steps = [StepRecord(index=0, position=0, drafted=[5, 6, 7, 8], num_accepted=4, emitted=[5, 6, 7, 8, 9],
                        last_kind="bonus", draft_ms=4.0, verify_ms=12.0, draft_calls=4, target_ms=10.0),
             StepRecord(index=1, position=5, drafted=[5, 6, 7, 8], num_accepted=2, emitted=[5, 6, 3],
                        last_kind="resampled", draft_ms=4.0, verify_ms=12.0, draft_calls=4, target_ms=10.0)]
    return Generation(tokens=[0] * 8, steps=steps, stats={"wall_ms": 40.0, "prefill_ms": 10.0})


@pytest.fixture()
def rows():
    base = _pool([(_ar_generation(), None), (_ar_generation(), None)])
    pooled = _pool([(_spec_generation(), None), (_spec_generation(), None)])
    return base, pooled, _cell_row("model", pooled, base, 4, 0.0, True)


def test_pool_sums_then_divides(rows):
    base, pooled, _ = rows
    assert base["decode_ms"] == 180.0 and pooled["decode_ms"] == 60.0      # wall - prefill, summed over prompts
    assert pooled["prefill_ms"] == 20.0 and pooled["steps"] == 4
    assert pooled["acceptance_rate"] == 12 / 16
    assert pooled["alpha"] == 12 / 14      # 12 accepted + 2 steps that stopped at a rejection; not 12 / 16


def test_cell_row_values(rows):
    _, _, row = rows
    alpha = 12 / 14
    e = expected_tokens_per_call(alpha, 4)
    assert row["ar_ms_per_step"] == 10.0
    assert row["cost_ratio"] == pytest.approx(0.1)                    # 1 ms per draft call / 10 ms AR step
    assert row["step_draft_cost"] == pytest.approx(0.4) and row["verify_cost"] == pytest.approx(1.2)
    assert row["measured_speedup"] == pytest.approx(2.5)              # 200 tokens/s over 80 tokens/s
    assert row["decode_speedup"] == pytest.approx(3.0)                # (16 / 60 ms) / (16 / 180 ms): prefill out
    assert row["predicted_speedup"] == pytest.approx(e / 1.4)         # 1 + N c = 1.4
    assert row["predicted_with_verify_cost"] == pytest.approx(e / 1.6)  # N c + v = 0.4 + 1.2
    assert row["target_call_cost"] == pytest.approx(1.25)             # 10 ms vs 8 ms per target forward


def test_efficiency_factors_values(rows):
    _, _, row = rows
    e = expected_tokens_per_call(12 / 14, 4)
    f = row["efficiency_factors"]
    expected = {"acceptance": 4 / e, "drafting": 1.0,
                "target_call": 1.4 / 1.6,      # (1 + d) / (1 + d + Δ), Δ = 10/10 - 8/10 = 0.2 AR steps
                "verification": 1.0,           # (1 + d + Δ) / (d + v) = 1.6 / 1.6
                "loop": (64 / 60) / (160 / 180),
                "prefill": 2.5 / 3.0}
    assert list(f) == list(EFFICIENCY_FACTORS)
    for key, value in expected.items():
        assert f[key] == pytest.approx(value), key
    assert math.prod(f.values()) == pytest.approx(row["efficiency"])


def _arena(rows, threads: int = 2, prompts: int = 2) -> dict:
    """One prose cell (the baseline and the speculative row) as run_arena returns it."""
    base, _, row = rows
    cell = [{"task": "prose", "temperature": 0.0, **_baseline_row(base, 0.0)},
            {"task": "prose", "temperature": 0.0, **row}]
    settings = {"pair": "p", "device": "cpu", "dtype": "float32", "threads": threads, "prompts_per_task": prompts,
                "max_new_tokens": 8, "n_draft": 4, "seed": 0, "repeats": 1, "geometry": "", "load_average": [0, 0]}
    return {"rows": cell, "settings": settings}


def test_format_tables_put_each_number_in_its_column(rows):
    arena = _arena(rows)
    cell = arena["rows"]
    table = format_arena(arena)
    # N | acceptance rate | α | tokens per target call | c
    assert f"| prose | 0 | draft model | 4 | 0.75 | {12 / 14:.2f} | 4.00 | 0.100 |" in table, table
    recon = format_reconciliation({"rows": cell})
    line = next(x for x in recon.splitlines() if x.startswith("| prose"))
    # × acceptance | × drafting | × target call | × verification | × loop | × prefill, then measured ×
    e = expected_tokens_per_call(12 / 14, 4)
    assert f"| {4 / e:.2f} | 1.00 | 0.88 | 1.00 | 1.20 | 0.83 | 2.50 |" in line, line


def test_compare_adaptive_best_fixed_n_is_the_fastest(pair):
    result = compare_adaptive(pair, n_values=[1, 3], max_new_tokens=12, prompts=1, progress=False)
    assert result["settings"]["max_n_draft"] == 16  # lab.arena.ADAPTIVE_CAP
    # a start above the cap raises the cap (arena --n-draft 17 failed here after the whole arena had run)
    assert compare_adaptive(pair, n_values=[1], start_n=17, max_new_tokens=3, prompts=1,
                            progress=False)["settings"]["max_n_draft"] == 17
    fixed = {r["n_draft"]: r["measured_speedup"] for r in result["rows"] if r["drafter"] == "model"}
    assert len(fixed) == 2 and fixed[1] != fixed[3]
    assert result["best_fixed_n"] == max(fixed, key=fixed.get)


def test_arena_heading_counts_one_prompt_and_one_thread(rows):
    heading = format_arena(_arena(rows, threads=1, prompts=1)).splitlines()[0]
    assert "(float32, 1 thread), 1 prompt per task ×" in heading, heading
    assert "seed 0, one timing per prompt" in heading, heading  # not "fastest of 1"


def test_arena_takes_numpy_temperatures_and_checks_the_context(pair):
    from lab.arena import compare_adaptive, run_arena

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


# ---------------------------------------------------------------------------------------------------------
# On a chat pair: the real target "smollm2-135m", whose prompts are held-out requests sent as user turns.


@pytest.fixture(scope="module")
def chat_pair(smollm2_pair):
    """The real pair's target without its draft model (the session fixture's models, shared; ``draft`` None): the
    arena on a chat pair, and what it refuses without a draft."""
    import dataclasses

    return dataclasses.replace(smollm2_pair, draft=None)


def test_arena_on_a_chat_pair_sends_each_prompt_as_a_user_turn(chat_pair, monkeypatch):
    import lab.decode
    from lab.prompts import chat_prompts, encode_prompts

    calls = []
    real = lab.decode.generate

    def spy(target, ids, **kwargs):
        calls.append((list(ids), kwargs["eos_token_id"]))
        return real(target, ids, **kwargs)

    monkeypatch.setattr(lab.decode, "generate", spy)
    result = run_arena(chat_pair, drafters=("ngram",), temperatures=(0.0,), max_new_tokens=8, prompts_per_task=1,
                       tasks=("copy_edit",), progress=False)
    rows = result["rows"]
    assert [(r["task"], r["drafter"]) for r in rows] == [("copy_edit", "autoregressive"), ("copy_edit", "ngram")]
    assert rows[1]["same_as_autoregressive"] is True  # greedy prompt lookup emits the target's own tokens
    assert 1 <= rows[1]["new_tokens"] == rows[0]["new_tokens"] <= 8
    # the request as one user turn of the chat template: <|im_start|> (id 1) system ... user ... assistant
    ids = encode_prompts(chat_pair, chat_prompts("copy_edit")[:1])[0]
    assert ids[0] == 1 and chat_pair.decode(ids).endswith("<|im_start|>assistant\n")
    assert chat_prompts("copy_edit")[0] in chat_pair.decode(ids)
    # warm-up on the first 16 tokens (baseline, then prompt lookup), then the prompt itself, every run ending at
    # the end of the assistant's turn (<|im_end|>, id 2)
    assert calls == [(ids[:16], 2), (ids[:16], 2), (ids, 2), (ids, 2)]
    assert result["settings"]["prompt_format"] == "chat" and result["settings"]["tasks"] == ["copy_edit"]
    assert "pair smollm2-135m (prompts as chat user turns) on cpu" in format_arena(result)


def test_arena_defaults_to_the_pair_s_tasks(chat_pair, pair):
    from lab.arena import DEFAULT_TASKS, default_tasks
    from lab.prompts import CHAT_TASKS, CONVERSATION_TASKS

    # every kind has a row per method: the one-turn requests, then the real pair's conversations
    assert default_tasks(chat_pair) == CHAT_TASKS + CONVERSATION_TASKS == ("chat", "code", "structured",
                                                                            "copy_edit", "multi_turn", "agent")
    assert default_tasks(pair) == DEFAULT_TASKS == ("prose", "copy_edit", "structured")
    result = run_arena(chat_pair, drafters=("ngram",), temperatures=(0.0,), max_new_tokens=2, prompts_per_task=1,
                       progress=False)
    assert result["settings"]["tasks"] == list(CHAT_TASKS + CONVERSATION_TASKS)
    assert [(r["task"], r["drafter"]) for r in result["rows"]] == [
        (task, drafter) for task in CHAT_TASKS + CONVERSATION_TASKS for drafter in ("autoregressive", "ngram")]
    assert all(r["new_tokens"] == 2 and r["same_as_autoregressive"] is True for r in result["rows"])
    # one token would come from the prefill alone, with no decode step to measure
    with pytest.raises(ValueError, match=r"max_new_tokens must be >= 2 in the arena: the first new token comes"):
        run_arena(chat_pair, drafters=("ngram",), temperatures=(0.0,), max_new_tokens=1, progress=False)
    with pytest.raises(ValueError, match=r"max_new_tokens must be >= 2 in the arena"):
        compare_adaptive(chat_pair, max_new_tokens=1, progress=False)


def test_arena_on_a_chat_pair_names_the_tasks_it_has(chat_pair, pair):
    kwargs = {"drafters": ("ngram",), "temperatures": (0.0,), "max_new_tokens": 2, "progress": False}
    with pytest.raises(ValueError, match=r"tasks must be a non-empty sequence of names from \('chat', 'code', "
                                         r"'structured', 'copy_edit', 'multi_turn', 'agent'\) \(the tasks of the "
                                         r"'smollm2-135m' pair\), got \('prose',\)"):
        run_arena(chat_pair, tasks=("prose",), **kwargs)
    with pytest.raises(ValueError, match=r"from \('prose', 'copy_edit', 'structured', 'copy'\) \(the tasks of the "
                                         r"'shakespeare' pair\), got \('chat',\)"):
        run_arena(pair, tasks=("chat",), **kwargs)
    with pytest.raises(ValueError, match=r"task must be one of \('chat', 'code', 'structured', 'copy_edit', "
                                         r"'multi_turn', 'agent'\) \(the tasks of the 'smollm2-135m' pair\), got "
                                         r"'prose'"):
        compare_adaptive(chat_pair, task="prose", progress=False)
    with pytest.raises(ValueError, match="the 'smollm2-135m' pair has none"):  # chat_pair has no draft model
        run_arena(chat_pair, **dict(kwargs, drafters=("model", "ngram")))
    with pytest.raises(ValueError, match="compare_adaptive .* needs a draft model"):  # the default task is fine
        compare_adaptive(chat_pair, progress=False)


def test_compare_adaptive_on_a_chat_pair_runs_the_chat_requests(chat_pair):
    import dataclasses

    # the target as its own draft: a stand-in until the real draft is trained; greedy, it accepts every draft
    pair = dataclasses.replace(chat_pair, draft=chat_pair.target)
    result = compare_adaptive(pair, n_values=(1,), start_n=1, max_n_draft=2, max_new_tokens=3, prompts=1,
                              progress=False)
    assert result["settings"]["task"] == "chat" and result["settings"]["prompt_format"] == "chat"
    assert [r["drafter"] for r in result["rows"]] == ["autoregressive", "model", "adaptive"]
    assert all(r["task"] == "chat" and r["same_as_autoregressive"] is True for r in result["rows"])
    assert result["rows"][1]["acceptance_rate"] == 1.0
    assert "draft model on 1 chat prompt ×" in format_adaptive(result)


def test_committed_arena_of_the_real_pair_names_its_machine():
    """The committed run (lab/assets/smollm2-135m/arena.json) names its machine and has one row per method the pair
    has (lab.registry.pair_has: every drafter, the EAGLE-3 and parallel drafts included) on every kind of task,
    conversations included, at both temperatures (issue 23's goal for the arena)."""
    from lab.arena import ARENA_DRAFTERS, CHAT_TASKS, CONVERSATION_TASKS, committed_arena
    from lab.registry import pair_has

    run = committed_arena("smollm2-135m")
    settings = run["arena"]["settings"]
    assert settings["pair"] == "smollm2-135m" and settings["processor"] and settings["dtype"] in ("bfloat16", "float32")
    recorded = {(r["task"], r["temperature"], r["drafter"]) for r in run["arena"]["rows"]}
    wanted = {(task, t, kind) for task in CHAT_TASKS + CONVERSATION_TASKS for t in (0.0, 1.0)
              for kind in ("autoregressive", *(k for k in ARENA_DRAFTERS if pair_has(k, "smollm2-135m")))}
    missing = sorted({kind for _, _, kind in wanted - recorded})
    # a new drafter fails here until the committed run has it: the message says how to make one
    assert not missing, (f"the committed arena (lab/assets/smollm2-135m/arena.json) has no rows for {missing}: run "
                         f"`{run['command']}` on a quiet machine and commit its arena.json (the pair card, lesson 12 "
                         "and the README quote it)")
    assert recorded == wanted
    assert pair_has("eagle3", "smollm2-135m") and pair_has("parallel", "smollm2-135m") and pair_has("model", "x")
    assert run["adaptive"]["settings"]["pair"] == "smollm2-135m" and run["command"].startswith("python -m lab arena")
    assert committed_arena("shakespeare") is None and committed_arena("gpt2") is None


def test_committed_arena_rejects_a_file_that_is_not_an_arena(tmp_path, monkeypatch):
    import lab.arena as arena_module
    import lab.assets

    monkeypatch.setattr(lab.assets, "PAIR_DIR", tmp_path / "shakespeare")
    (tmp_path / "mine").mkdir()
    path = tmp_path / "mine" / "arena.json"
    path.write_text('{"rows": []}')
    with pytest.raises(ValueError, match="arena.json: expected .*keys 'arena' and 'adaptive'"):
        arena_module.committed_arena("mine")
    path.write_text('{"arena": {"rows": []}, "adaptive": {"rows": []}}')
    assert arena_module.committed_arena("mine") == {"arena": {"rows": []}, "adaptive": {"rows": []}}


def test_committed_tree_shapes_reads_the_pair_card_timing_and_refuses_other_json(tmp_path, monkeypatch):
    """committed_tree_shapes: the real pair's tree_shapes.json (tools/tree_shapes.py) with a row set per chat kind;
    None for a pair without one; JSON of another shape is a ValueError naming the file."""
    import lab.assets
    from lab.arena import CHAT_TASKS, committed_tree_shapes

    run = committed_tree_shapes("smollm2-135m")
    assert set(run["kinds"]) == set(CHAT_TASKS) and run["dtype"] and run["threads"] >= 1
    assert all(any(r["method"].startswith("EAGLE-3, chain") for r in kind["rows"]) for kind in run["kinds"].values())
    assert committed_tree_shapes("shakespeare") is None
    monkeypatch.setattr(lab.assets, "PAIR_DIR", tmp_path / "shakespeare")
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "tree_shapes.json").write_text('{"rows": []}')
    with pytest.raises(ValueError, match="tree_shapes.json: expected .*a 'kinds' mapping"):
        committed_tree_shapes("mine")


def test_suffix_decoding_on_a_conversation_reads_the_answers_it_quotes(chat_pair):
    """The arena's suffix row on the real pair's multi-turn requests: greedy output equal to autoregressive decoding
    in float32, its own geometry (no N), and a fresh drafter per run whose cache holds the answers the request
    quotes (what the server that wrote them would have cached) and nothing else."""
    from lab.prompts import assistant_turns, conversation_requests, encode_prompts
    from lab.registry import make_drafter

    result = run_arena(chat_pair, tasks=("multi_turn",), drafters=("ngram", "suffix"), temperatures=(0.0,),
                       max_new_tokens=12, prompts_per_task=1, progress=False)
    rows = {r["drafter"]: r for r in result["rows"]}
    assert rows["suffix"]["label"] == "suffix decoding" and rows["suffix"]["n_draft"] is None
    assert rows["suffix"]["same_as_autoregressive"] is True and rows["suffix"]["draft_calls"] == 0
    assert rows["suffix"]["new_tokens"] == rows["autoregressive"]["new_tokens"]
    ids = encode_prompts(chat_pair, conversation_requests("multi_turn")[:1])[0]
    drafter = make_drafter("suffix", chat_pair, 4)
    drafter.reset(ids)
    quoted = assistant_turns(chat_pair, ids)
    assert len(quoted) == len(drafter.cache) == 1 and all(answer in drafter.cache for answer in quoted)
    assert len(make_drafter("suffix", chat_pair, 4).cache) == 0  # nothing carried over from another request


def test_a_drafter_not_trained_for_the_pair_is_shown_unavailable(pair):
    """A pair without parallel-draft weights (here the Shakespeare models under another name) runs the arena without
    that drafter: no rows, the reason in the settings and under the table; asking for it alone is a ValueError."""
    import dataclasses

    other = dataclasses.replace(pair, name="my-pair")
    result = run_arena(other, tasks=("prose",), temperatures=(0.0,), drafters=("model", "parallel"),
                       max_new_tokens=4, prompts_per_task=1, progress=False)
    assert [r["drafter"] for r in result["rows"]] == ["autoregressive", "model"]
    why = result["settings"]["unavailable"]["parallel"]
    assert why == ("no parallel weights are trained for the 'my-pair' pair (committed for 'shakespeare', "
                   "'smollm2-135m' only)")
    assert f"not available for this pair: parallel draft (PARD) ({why})" in format_arena(result)
    assert result["settings"]["drafters"] == ["model"]
    with pytest.raises(ValueError, match="drafters: none of"):
        run_arena(other, tasks=("prose",), temperatures=(0.0,), drafters=("parallel",), max_new_tokens=4,
                  prompts_per_task=1, progress=False)


def test_a_cell_with_no_decode_step_is_named_not_a_division_by_zero():
    """A chat target can end every answer at its first token (the prefill's): no step is left to time, and the
    arena says so instead of raising ZeroDivisionError."""
    from lab.arena import _baseline_row, _cell_row

    none = {"steps": 0, "draft_ms": 0.0, "verify_ms": 0.0}
    some = dict(none, steps=3)
    with pytest.raises(ValueError, match=r"autoregressive at T = 0: no decode step was run .*raise max_new_tokens"):
        _baseline_row(none, 0.0)
    with pytest.raises(ValueError, match=r"ngram at T = 1: no decode step was run"):
        _cell_row("ngram", none, some, None, 1.0, None)


def test_the_untimed_warm_up_shows_a_bar_of_its_own(pair, monkeypatch, capsys):
    """Loading every drafter before the timing takes minutes on a busy machine: it has its own progress bar, counted
    per drafter and temperature, so the command does not look hung before the arena's bar appears."""
    monkeypatch.setenv("TQDM_DISABLE", "0")
    run_arena(pair, tasks=("prose",), temperatures=(0.0,), max_new_tokens=2, prompts_per_task=1, n_draft=2,
              drafters=("ngram",), progress=True)
    err = capsys.readouterr().err
    # its total: autoregressive decoding and one drafter at one temperature (tqdm may not draw the bar's last state:
    # it redraws at most every 0.1 s, and leave=False clears it)
    assert "arena warm-up (untimed):" in err and " 0/2 [" in err and "arena:" in err


def test_a_greedy_answer_that_parted_from_autoregressive_decoding_is_explained_by_its_dtype(rows):
    """A contributor read "= AR: NO" for a correct drafter in bfloat16 with no word why: the table now says, and in
    float32 (where the oracles are exact) calls it a bug."""
    arena = _arena(rows)
    assert "= AR NO" not in format_arena(arena)
    arena["rows"][1]["same_as_autoregressive"] = False
    assert "In float32 this is a bug in the drafter or the loop" in format_arena(arena)
    arena["settings"]["dtype"] = "bfloat16"
    table = format_arena(arena)
    assert "In bfloat16 a near-tie can round the other way" in table and "is a bug" not in table
