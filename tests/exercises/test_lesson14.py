"""The exercise checkers of lesson 14 (vLLM's counters to our stats; lab.exercises.lesson14): the reference passes,
planted mistakes are rejected with their own hints, a stub prints "not solved yet", and nothing raises."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from lab import picker
from lab.exercises import lesson14 as check
from tests.helpers import rejects


def _picker_variant(**change):
    from lab import picker

    def fn(num_drafts, num_draft_tokens, num_accepted_tokens, accepted_per_position):
        d, t, a, p = num_drafts, num_draft_tokens, num_accepted_tokens, accepted_per_position
        out = picker.stats_from_vllm_counters(d, t, a, p)
        for key, f in change.items():
            out[key] = f(out[key], d, t, a, p)
        return out
    return fn


def _vllm_stats(d, t, a, p, per_position=list, number=float):
    if d == 0:
        return {"acceptance_rate": None, "tokens_per_target_call": None, "per_position_acceptance": []}
    return {"acceptance_rate": number(a / t), "tokens_per_target_call": number(1 + a / d),
            "per_position_acceptance": per_position([x / d for x in p])}


# an acceptance rate 5 % off is wrong.
def test_vllm_counter_stats_five_percent_off_are_rejected(capsys):
    fn = _picker_variant(acceptance_rate=lambda v, *_: None if v is None else v * 1.05)
    capsys.readouterr()
    assert check.stats_from_vllm_counters(fn) is False
    assert "acceptance_rate should be" in capsys.readouterr().out


# per_position_acceptance must have one entry per position; dropping the zero positions is wrong.
def test_vllm_counter_stats_per_position_list_must_keep_its_length(capsys):
    fn = _picker_variant(per_position_acceptance=lambda v, *_: [x for x in v if x])
    capsys.readouterr()
    assert check.stats_from_vllm_counters(fn) is False
    out = capsys.readouterr().out
    assert "every draft is rejected" in out and "per_position_acceptance should be" in out, out
    assert "keep one per draft position" in out and "zeros included" in out, out


@pytest.mark.parametrize("per_position, number", [
    (lambda xs: torch.tensor(xs), float),                      # float32 tensor: values off by float32 rounding
    (lambda xs: torch.tensor(xs, dtype=torch.float64), float),
    (lambda xs: np.asarray(xs, dtype=np.float32), float),
    (tuple, float),
    (list, lambda x: torch.tensor(x)),                         # 0-d float32 tensors
    (list, np.float32),
], ids=["tensor32", "tensor64", "numpy32", "tuple", "tensor-scalars", "numpy32-scalars"])
def test_stats_from_vllm_counters_accepts_float32_and_other_containers(per_position, number, capsys):
    ok = check.stats_from_vllm_counters(lambda *c: _vllm_stats(*c, per_position=per_position, number=number))
    out = capsys.readouterr().out
    assert ok, out


@pytest.mark.parametrize("per_position", [lambda xs: map(float, xs), lambda xs: (x for x in xs)], ids=["map", "gen"])
def test_stats_from_vllm_counters_refuses_a_one_shot_iterator(per_position, capsys):
    # lesson 14 indexes the list afterwards (theirs['per_position_acceptance'][0]): a map or generator fails there
    rejects(check.stats_from_vllm_counters, lambda *c: _vllm_stats(*c, per_position=per_position), capsys,
            "per_position_acceptance", "list")


def test_stats_from_vllm_counters_still_rejects_a_value_a_little_off(capsys):
    def off(num_drafts, num_draft_tokens, num_accepted_tokens, accepted_per_position):
        d = num_drafts
        out = _vllm_stats(num_drafts, num_draft_tokens, num_accepted_tokens, accepted_per_position)
        if d:
            out["acceptance_rate"] *= 1.0001
        return out

    rejects(check.stats_from_vllm_counters, off, capsys, "acceptance_rate should be")


def test_stats_from_vllm_counters_with_none_per_position_is_not_called_an_iterator(capsys):
    # None is a missing value, not a one-shot iterator: it reaches the comparison, which names the key
    out = rejects(check.stats_from_vllm_counters, lambda *c: {**_vllm_stats(*c), "per_position_acceptance": None},
                  capsys, "per_position_acceptance")
    assert "read only once" not in out, out


def test_stats_from_vllm_counters_reports_counters_changed_in_place(capsys):
    def divides_in_place(num_drafts, num_draft_tokens, num_accepted_tokens, accepted_per_position):
        if num_drafts == 0:
            return {"acceptance_rate": None, "tokens_per_target_call": None, "per_position_acceptance": []}
        for i in range(len(accepted_per_position)):
            accepted_per_position[i] /= num_drafts
        return {"acceptance_rate": num_accepted_tokens / num_draft_tokens,
                "tokens_per_target_call": 1 + num_accepted_tokens / num_drafts,
                "per_position_acceptance": accepted_per_position}

    rejects(check.stats_from_vllm_counters, divides_in_place, capsys, "changed accepted_per_position in place")


def stub(*args):
    raise NotImplementedError


def test_checker_passes_reference_and_rejects_planted_mistakes(capsys):
    assert check.stats_from_vllm_counters(picker.stats_from_vllm_counters)
    assert capsys.readouterr().out.startswith("✓")
    hints = set()
    for fault, hint in check._FAULTS:
        assert not check.stats_from_vllm_counters(fault)
        out = capsys.readouterr().out
        assert out.startswith("✗") and hint in out
        hints.add(hint)
    assert len(hints) == len(check._FAULTS) >= 3

    def forgets_bonus(num_drafts, num_draft_tokens, num_accepted_tokens, accepted_per_position):
        d, t, a, p = num_drafts, num_draft_tokens, num_accepted_tokens, accepted_per_position
        return {"acceptance_rate": a / t if t else None, "tokens_per_target_call": a / d if d else None,
                "per_position_acceptance": [x / d for x in p] if d else []}

    assert not check.stats_from_vllm_counters(forgets_bonus)
    assert "one too small" in capsys.readouterr().out


def test_checker_names_the_conditional_mistake_when_it_divides_by_zero(capsys):
    """The conditional per-position rate written without a guard divides by zero where a position accepted
    nothing; the hint still names the mistake, and the case that raised."""
    def conditional(num_drafts, num_draft_tokens, num_accepted_tokens, accepted_per_position):
        d, t, a, p = num_drafts, num_draft_tokens, num_accepted_tokens, accepted_per_position
        if d == 0:
            return {"acceptance_rate": None, "tokens_per_target_call": None, "per_position_acceptance": []}
        return {"acceptance_rate": a / t, "tokens_per_target_call": 1 + a / d,
                "per_position_acceptance": [x / (p[i - 1] if i else d) for i, x in enumerate(p)]}

    assert not check.stats_from_vllm_counters(conditional)
    out = capsys.readouterr().out
    assert "unconditional here, as in vLLM" in out
    assert "divided by zero on a run where every draft is rejected" in out


def test_checker_rejects_an_acceptance_rate_that_assumes_a_constant_n(capsys):
    """Dividing by num_drafts × len(accepted_per_position) is right whenever every step drafts N tokens; only the
    case whose draft length varies tells it apart."""
    def constant_n(num_drafts, num_draft_tokens, num_accepted_tokens, accepted_per_position):
        d, a, p = num_drafts, num_accepted_tokens, accepted_per_position
        if d == 0:
            return {"acceptance_rate": None, "tokens_per_target_call": None, "per_position_acceptance": []}
        return {"acceptance_rate": a / (d * len(p)), "tokens_per_target_call": 1 + a / d,
                "per_position_acceptance": [x / d for x in p]}

    cases = check._cases()
    varying = [c for c in cases if "varies" in c[0]]
    assert len(varying) == 1
    for label, counters, expected in cases:
        got = constant_n(**counters)
        same = not check._differences(got, expected)
        assert same == (label != varying[0][0]), label
    counters = varying[0][1]
    assert counters["num_draft_tokens"] != counters["num_drafts"] * len(counters["accepted_per_position"])
    assert not check.stats_from_vllm_counters(constant_n)
    assert "num_draft_tokens" in capsys.readouterr().out


def test_renamed_parameters_are_named_before_the_checks_pass_them_by_position(capsys):
    """The lesson calls the answer with to_stats(**counters): one with its parameters renamed passed the checks
    (which call by position) and then raised TypeError in the lesson's next cell."""
    def renamed(drafts, draft_tokens, accepted, per_position):
        return picker.stats_from_vllm_counters(drafts, draft_tokens, accepted, per_position)

    rejects(check.stats_from_vllm_counters, renamed, capsys, "to_stats(**counters)", "keep the parameter names "
            "num_drafts, num_draft_tokens, num_accepted_tokens, accepted_per_position")


def test_a_recognised_mistake_names_the_case_it_failed(capsys):
    """The hint of a planted mistake came without the inputs, the expected value and what the answer gave."""
    out = rejects(check.stats_from_vllm_counters, check._FAULTS[0][0], capsys, "one too small",
                  "on a run of 6 steps at N = 4 (num_drafts=6", "tokens_per_target_call should be 3.3333, got 2.3333")
    assert out.index("should be") < out.index("Hint:")


def test_make_steps_and_counters_follow_vllm():
    steps = check.make_steps([1, 0], [3, 1])
    assert [len(s.drafted) for s in steps] == [3, 1] and [len(s.emitted) for s in steps] == [2, 1]
    for bad in (([1], [0]), ([2], [1]), ([1, 1], [2]), ([1], 0)):
        with pytest.raises(ValueError, match="n_draft|accepted"):
            check.make_steps(*bad)
    # vLLM counts a draft only when it holds tokens: a step that drafted nothing adds to no counter.
    from lab.trace import StepRecord

    empty = StepRecord(index=2, position=0, drafted=[], num_accepted=0, emitted=[0], last_kind="bonus")
    assert check.counters_from_steps(steps + [empty]) == {
        "num_drafts": 2, "num_draft_tokens": 4, "num_accepted_tokens": 1, "accepted_per_position": [1, 0, 0]}


def test_checker_never_raises_and_reports_stubs(capsys):
    assert not check.stats_from_vllm_counters(stub)
    assert "not solved yet" in capsys.readouterr().out
    for bad in (lambda *a: None, lambda *a: {"acceptance_rate": 0.5}, lambda *a: 1 / 0, 42,
                lambda *a: {"acceptance_rate": "x", "tokens_per_target_call": [], "per_position_acceptance": 3}):
        assert not check.stats_from_vllm_counters(bad)
        assert capsys.readouterr().out.startswith("✗")


@pytest.mark.parametrize("empty,phrase", [
    # a number where the run has no drafts, or no dict at all there: the empty run is named with its own hint
    (lambda: {"acceptance_rate": 0.0, "tokens_per_target_call": 1.0, "per_position_acceptance": []}, "still return"),
    (lambda: {"acceptance_rate": float("nan"), "tokens_per_target_call": float("nan"),
              "per_position_acceptance": []}, "not 0, nan or 1"),
    (lambda: None, "with no drafts there is no rate"),
])
def test_the_empty_run_gets_its_own_hint(empty, phrase, capsys):
    def learner(num_drafts, num_draft_tokens, num_accepted_tokens, accepted_per_position):
        if num_drafts == 0:
            return empty()
        return _vllm_stats(num_drafts, num_draft_tokens, num_accepted_tokens, accepted_per_position)

    out = rejects(check.stats_from_vllm_counters, learner, capsys, phrase)
    assert "no speculative steps at all" in out, out


def test_a_slip_in_one_key_or_two_slips_at_once_get_the_hints_that_fit_them(capsys):
    """A learner's × 100 on the acceptance rate alone, and a wrong acceptance rate together with a wrong tokens per
    call, got no hint: a planted mistake had to explain every key at once. Each wrong key now gets the hint of the
    mistake that gives it on every case."""
    percent_rate = _picker_variant(acceptance_rate=lambda v, d, t, a, p: None if v is None else 100 * v)
    out = rejects(check.stats_from_vllm_counters, percent_rate, capsys, "acceptance_rate should be", "percentages")
    assert out.count("Hint:") == 1
    two_slips = _picker_variant(acceptance_rate=lambda v, d, t, a, p: None if v is None else a / d,
                                tokens_per_target_call=lambda v, d, t, a, p: None if v is None else a / d)
    out = rejects(check.stats_from_vllm_counters, two_slips, capsys, "divides by the wrong count", "one too small")
    assert out.count("Hint:") == 2


def test_per_position_counts_left_undivided_are_named(capsys):
    counts = _picker_variant(per_position_acceptance=lambda v, d, t, a, p: list(p))
    out = rejects(check.stats_from_vllm_counters, counts, capsys, "shares of steps, not counts")
    assert out.count("Hint:") == 1


@pytest.mark.parametrize("digits", [0, 2, 3])
def test_per_position_shares_rounded_before_returning_are_named(digits, capsys):
    # the formula is right, so no planted mistake fitted and the learner got no hint at all
    rounded = _picker_variant(per_position_acceptance=lambda v, d, t, a, p: [round(x, digits) for x in v])
    how = "to whole numbers (round(x)?)" if digits == 0 else f"to {digits} decimals (round(x, {digits})?)"
    out = rejects(check.stats_from_vllm_counters, rounded, capsys, "per_position_acceptance should be",
                  f"per_position_acceptance is rounded {how}", "round only where you print them")
    assert out.count("Hint:") == 1
    if digits == 3:  # rounded to the digits the message shows: every digit, or the two would read alike
        assert "should be [0.8333333333333334," in out and "got [0.833," in out, out


def test_every_rounded_key_is_named_in_one_hint(capsys):
    def rounded(v, *_):
        return None if v is None else [round(x, 2) for x in v] if isinstance(v, list) else round(v, 2)

    fn = _picker_variant(acceptance_rate=rounded, per_position_acceptance=rounded)
    out = rejects(check.stats_from_vllm_counters, fn, capsys,
                  "acceptance_rate and per_position_acceptance are rounded to 2 decimals (round(x, 2)?)")
    assert out.count("Hint:") == 1
    # a share a little off is no rounding: no such hint
    out = rejects(check.stats_from_vllm_counters,
                  _picker_variant(per_position_acceptance=lambda v, *_: [x * 1.001 for x in v]), capsys)
    assert "rounded" not in out, out
