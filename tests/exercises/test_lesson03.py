"""The exercise checkers of lesson 03 (the residual distribution; lab.exercises.lesson03): the reference passes, planted
mistakes are rejected with their own hints, a stub prints "not solved yet", and nothing raises."""
from __future__ import annotations

import pytest
import torch

from lab import sampling
from lab.exercises import lesson03 as check
from tests.helpers import rejects


def run(checker, fn, capsys):
    """(returned bool, printed text)."""
    ok = checker(fn)
    return ok, capsys.readouterr().out


def positive(t, d):
    return (t - d).clamp_min(0)


RESIDUAL_FAULTS = [
    (lambda t, d: torch.softmax(positive(t, d), -1), "softmax"),
    (lambda t, d: positive(t, d) / positive(t, d).sum(-1, keepdim=True), "NaN"),
    (lambda t, d: (t - d) / (t - d).sum(-1, keepdim=True), "clamp"),
    (lambda t, d: positive(d, t) / positive(d, t).sum(-1, keepdim=True), "wrong way round"),
    (lambda t, d: positive(t, d), "normalise"),
    (lambda t, d: torch.where(positive(t, d).sum() > 0, positive(t, d) / positive(t, d).sum().clamp_min(1e-30), t),
     "last axis"),
]


@pytest.mark.parametrize("checker", [check.residual_distribution, check.residual_without_softmax,
                                     check.residual_zero_mass], ids=lambda c: c.__name__)
def test_residual_checkers(checker, capsys):
    ok, out = run(checker, sampling.residual_distribution, capsys)
    assert ok, out
    for fault, word in RESIDUAL_FAULTS:
        if checker is check.residual_without_softmax and word == "NaN":
            continue  # zero mass is the next bug's: see test_bug_2_leaves_zero_mass_to_bug_3
        rejects(checker, fault, capsys, word)


@pytest.mark.parametrize("answer, kind", [(lambda r: r.tolist(), "list"), (lambda r: r.numpy(), "NumPy array"),
                                          (lambda r: tuple(r.tolist()), "tuple")], ids=["list", "numpy", "tuple"])
def test_right_values_of_another_type_pass_where_nothing_reuses_them(answer, kind, capsys):
    """residual_distribution is lesson 03's residual_fn, whose answer later cells call .tolist() on: it must be a
    tensor, and the hint names the type. The two bug fixes and residual_after_rejection are not reused: a list, tuple
    or array of the right values passes there."""
    def right(t, d):
        return answer(sampling.residual_distribution(t, d))

    rejects(check.residual_distribution, right, capsys, "the values are right, but return a torch.Tensor, "
            f"not a {kind}")
    for checker in (check.residual_without_softmax, check.residual_zero_mass):
        ok, out = run(checker, right, capsys)
        assert ok, out
    ok, out = run(check.residual_after_rejection, lambda t, d, token: right(t, d), capsys)
    assert ok, out


def test_residual_after_rejection(capsys):
    ok, _ = run(check.residual_after_rejection, lambda t, d, token: sampling.residual_distribution(t, d), capsys)
    assert ok

    def seed_002(t, d, token):  # the scalar version of seed lesson 002
        adjusted = (t[token] - d[token]).clamp_min(0)
        return adjusted / adjusted.sum()

    def without_token(t, d, token):
        rest = t.clone()
        rest[token] = 0
        return rest / rest.sum()

    rejects(check.residual_after_rejection, seed_002, capsys, "whole vocabulary", "tensor(nan)")
    rejects(check.residual_after_rejection, without_token, capsys, "not enough")
    rejects(check.residual_after_rejection, lambda t, d, token: t, capsys, "not from the target")


def test_residual_checker_catches_a_slightly_wrong_residual():
    assert check.residual_distribution(sampling.residual_distribution)

    def off(target_probs, draft_probs):  # 2% of the mass spread uniformly: still normalised, still wrong
        return 0.98 * sampling.residual_distribution(target_probs, draft_probs) + 0.02 / target_probs.shape[-1]

    assert not check.residual_distribution(off)


def test_residual_zero_mass_guard_must_work_row_by_row(capsys):
    """A guard on the whole batch (`if positive.sum() == 0`) passed: no batch case held a row with target == draft
    next to one without; it gives NaN in that row. A uniform fallback got the softmax hint."""
    def batch_guard(t, d):
        positive = (t - d).clamp_min(0)
        return t if positive.sum() == 0 else positive / positive.sum(-1, keepdim=True)

    def uniform_fallback(t, d):
        positive = (t - d).clamp_min(0)
        mass = positive.sum(-1, keepdim=True)
        return torch.where(mass > 0, positive / mass.clamp_min(1e-30), torch.full_like(t, 1 / t.shape[-1]))

    def any_row_guard(t, d):  # a learner's: any row without mass sends every row to the target
        positive = (t - d).clamp_min(0)
        return t if (positive.sum(-1) == 0).any() else positive / positive.sum(-1, keepdim=True)

    for checker in (check.residual_distribution, check.residual_zero_mass):
        rejects(checker, batch_guard, capsys, "guard each row, not the whole batch")
        out = rejects(checker, any_row_guard, capsys, "guard each row, not the whole batch")
        assert "subtract the draft first" not in out  # it did subtract: the hint it got before
        rejects(checker, uniform_fallback, capsys, "not a uniform distribution")
        ok, out = run(checker, sampling.residual_distribution, capsys)
        assert ok, out


def test_a_residual_that_forgot_the_clamp_in_the_numerator(capsys):
    def unclamped(t, d):  # divides by the positive mass, but keeps the negative differences
        mass = (t - d).clamp_min(0).sum(-1, keepdim=True)
        return torch.where(mass > 0, (t - d) / mass.clamp_min(1e-30), t)

    rejects(check.residual_distribution, unclamped, capsys, "clamp negative differences to 0")


def test_bug_2_leaves_zero_mass_to_bug_3(capsys):
    """Lesson 03's bug 2 (softmax) is fixed by dividing by the sum; that fix used to fail bug 2's check with the
    NaN hint of bug 3, the next section. Bug 2's check now has no case of zero residual mass, and says so; bug 3's
    check rejects the same function with the NaN hint."""
    def divided(t, d):
        missing = (t - d).clamp_min(0)
        return missing / missing.sum(-1, keepdim=True)

    ok, out = run(check.residual_without_softmax, divided, capsys)
    assert ok, out
    assert out.startswith("✓ residual_without_softmax: correct on all 11 cases where the residual has mass"), out
    assert "target == draft is the next bug" in out, out
    rejects(check.residual_zero_mass, divided, capsys, "0/0 = NaN", "Return target_probs")
    rejects(check.residual_distribution, divided, capsys, "0/0 = NaN")
    # bug 2's own mistakes are still caught, with their hints
    rejects(check.residual_without_softmax, lambda t, d: torch.softmax((t - d).clamp_min(0), -1), capsys,
            "softmax is for logits")
    rejects(check.residual_without_softmax, lambda t, d: (t - d).clamp_min(0) / (t - d).clamp_min(0).sum(), capsys,
            "last axis")


def test_residual_after_rejection_names_the_residuals_own_slips(capsys):
    """The subtraction reversed, no clamp and no normalisation got the generic hint here, though the residual
    exercises name each (from a learner's run)."""
    def pos(t, d):
        return (t - d).clamp_min(0)

    rejects(check.residual_after_rejection, lambda t, d, k: pos(d, t) / pos(d, t).sum(), capsys, "wrong way round")
    rejects(check.residual_after_rejection, lambda t, d, k: pos(t, d), capsys, "normalise")
    rejects(check.residual_after_rejection, lambda t, d, k: (t - d) / (t - d).sum(), capsys, "clamp negative")


def test_a_fixed_axis_and_a_none_for_zero_mass_get_their_own_hints(capsys):
    """A learner summed over dim=1 (IndexError on a [V] case) and another returned None on purpose for zero mass:
    both got generic hints ("did you forget a `return`?" for the second)."""
    def axis_one(t, d):
        positive = (t - d).clamp_min(0)
        mass = positive.sum(dim=1, keepdim=True)
        return torch.where(mass > 0, positive / mass.clamp_min(1e-30), t)

    def none_at_zero_mass(t, d):
        positive = (t - d).clamp_min(0)
        if float(positive.sum()) == 0:
            return None
        return positive / positive.sum(-1, keepdim=True)

    rejects(check.residual_distribution, axis_one, capsys, "IndexError", "count axes from the end (dim=-1")
    out = rejects(check.residual_zero_mass, none_at_zero_mass, capsys, "returned None on this input and a value on "
                                                                        "others", "special cases too")
    assert "forget a `return`" not in out


def test_a_sum_without_keepdim_is_named(capsys):
    """A learner's .sum(-1) without keepdim=True got the general batch hint: it passes on [V] and fails on a batch."""
    rejects(check.residual_without_softmax, lambda t, d: (t - d).clamp_min(0) / (t - d).clamp_min(0).sum(-1),
            capsys, "keepdim=True")


@pytest.mark.parametrize("threshold", [0.1, 0.19, 0.005])
def test_a_guard_above_zero_mass_fails_both_residual_checks(capsys, threshold):
    """A learner's `torch.where(mass > 0.1, missing / mass, target)` passed: the smallest mass in the cases was 0.2.
    A draft that nearly matches the target (mass 0.01) now tells it apart."""
    def guarded(target_probs, draft_probs):
        missing = (target_probs - draft_probs).clamp_min(0)
        mass = missing.sum(-1, keepdim=True)
        return torch.where(mass > threshold, missing / mass.clamp_min(1e-12), target_probs)

    for check_fn in (check.residual_distribution, check.residual_zero_mass):
        ok, out = run(check_fn, guarded, capsys)
        assert not ok and "guard only the rows whose residual mass is 0" in out, out


def test_min_in_place_of_max_is_named_with_the_subtraction(capsys):
    """min(0, t - d), normalised, equals max(0, d - t) normalised: a learner told only "the subtraction is the wrong
    way round" would swap t and d and still be wrong."""
    def min_instead(t, d):
        negative = (t - d).clamp_max(0)
        return negative / negative.sum(-1, keepdim=True)

    rejects(check.residual_distribution, min_instead, capsys, "min stands where the formula has max")


def test_the_row_guard_hint_does_not_hand_over_the_code(capsys):
    def batch_guard(t, d):
        positive = (t - d).clamp_min(0)
        return t if float(positive.sum()) == 0 else positive / positive.sum(-1, keepdim=True)

    out = rejects(check.residual_zero_mass, batch_guard, capsys, "guard each row")
    assert "torch.where" not in out and "keepdim=True" not in out, out


def test_a_constant_added_to_the_sum_and_a_threshold_guard_are_caught(capsys):
    """A learner's ``mass + eps`` (guarded with where or not) and a guard ``mass > 5e-4`` passed or got only the
    formula hint: a case of residual mass 1e-6 catches both, and the eps mistake has its own hint."""
    def with_eps(eps, guard):
        def residual(t, d):
            missing = (t - d).clamp_min(0)
            mass = missing.sum(-1, keepdim=True)
            return torch.where(mass > 0, missing / (mass + eps), t) if guard else missing / (mass + eps)
        return residual

    for eps in (0.1, 3e-6, 1e-2, 1e-6, 1e-8, 1e-11):
        for guard in (True, False):
            out = rejects(check.residual_distribution, with_eps(eps, guard), capsys, "a constant added to the sum")
            assert "torch.where" not in out and "clamp" not in out, out  # the hint does not hand over the guard
    ok, out = run(check.residual_distribution, with_eps(1e-20, True), capsys)  # too small to matter: passes
    assert ok, out

    def threshold(t, d):
        missing = (t - d).clamp_min(0)
        mass = missing.sum(-1, keepdim=True)
        return torch.where(mass > 5e-4, missing / mass.clamp_min(1e-30), t)

    rejects(check.residual_distribution, threshold, capsys, "guard only the rows whose residual mass is 0")

    def floored(t, d):
        missing = (t - d).clamp_min(0)
        mass = missing.sum(-1, keepdim=True)
        return torch.where(mass > 0, missing / mass.clamp_min(1e-4), t)

    rejects(check.residual_distribution, floored, capsys, "a floor on the sum (clamp_min)")

    def guarded_at(limit):
        def residual(t, d):
            missing = (t - d).clamp_min(0)
            mass = missing.sum(-1, keepdim=True)
            return torch.where(mass > limit, missing / mass.clamp_min(1e-30), t)
        return residual

    rejects(check.residual_distribution, guarded_at(1e-7), capsys)  # a mass of 1e-8 is a real distribution too


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=str)
def test_a_half_precision_answer_gets_the_dtype_hint(dtype, capsys):
    rejects(check.residual_distribution, lambda t, d: sampling.residual_distribution(t, d).to(dtype), capsys,
            "half precision", "Compute in the inputs' dtype (float32)")


def test_a_residual_computed_in_half_precision_gets_the_dtype_hint_even_returned_as_float32(capsys):
    def computed_in_half(t, d):
        return sampling.residual_distribution(t.half(), d.half()).float()

    rejects(check.residual_distribution, computed_in_half, capsys, "somewhere the computation ran in half precision")
