"""The exercise checkers of lesson 02 (the rejection step; lab.exercises.lesson02): the reference passes, planted
mistakes are rejected with their own hints, a stub prints "not solved yet", and nothing raises."""
from __future__ import annotations

import math

from lab import sampling
from lab.exercises import lesson02 as check
from tests.helpers import rejects


def run(checker, fn, capsys):
    """(returned bool, printed text)."""
    ok = checker(fn)
    return ok, capsys.readouterr().out


def reference_accept_probability(target_prob, draft_prob):
    if target_prob <= 0:
        return 0.0
    return 1.0 if draft_prob <= 0 else min(1.0, target_prob / draft_prob)


def test_accept_probability(capsys):
    ok, _ = run(check.accept_probability, reference_accept_probability, capsys)
    assert ok
    rejects(check.accept_probability, lambda t, d: t / d if d else math.inf, capsys, "can't exceed 1")
    rejects(check.accept_probability, lambda t, d: min(1.0, d / t), capsys, "upside down")
    rejects(check.accept_probability, lambda t, d: min(1.0, t / d), capsys, "can be 0")
    rejects(check.accept_probability, lambda t, d: min(1.0, t / d) if d else 1.0, capsys, "never be accepted")


def test_accept_or_reject(capsys):
    ok, out = run(check.accept_or_reject, sampling.accept_or_reject, capsys)
    assert ok, out
    ok, _ = run(check.accept_or_reject, lambda t, d, u: u * d < t, capsys)  # the division-free form
    assert ok
    rejects(check.accept_or_reject, lambda t, d, u: u <= min(1.0, t / d) if d else True, capsys, "strict `<`")
    rejects(check.accept_or_reject, lambda t, d, u: u < (min(1.0, d / t) if t else 1.0), capsys, "upside down")
    rejects(check.accept_or_reject, lambda t, d, u: u < min(1.0, t / d), capsys, "draft_prob can be 0")
    rejects(check.accept_or_reject, lambda t, d, u: u > min(1.0, t / d) if d else False, capsys, "reversed")
    rejects(check.accept_or_reject, lambda t, d, u: min(1.0, t / d) if d else 1.0, capsys, "True or False")


def test_accept_or_reject_with_the_difference_gets_its_own_hint(capsys):
    """A learner's `u < target_prob - draft_prob` (the residual's max(0, target - draft) in mind) got "the comparison
    is reversed", which fitted the cases but not the mistake."""
    ok, out = run(check.accept_or_reject, lambda t, d, u: u < t - d, capsys)
    assert not ok and "not the difference" in out and "reversed" not in out, out


def test_accept_or_reject_forgot_the_draft(capsys):
    rejects(check.accept_or_reject, lambda t, d, u: u < t, capsys, "RATIO target_prob / draft_prob")
    ok, out = run(check.accept_or_reject, lambda t, d, u: u < t, capsys)
    assert "reversed" not in out


def test_hints_for_a_zero_draft_guard_and_a_near_miss(capsys):
    # accepting whenever draft_prob == 0 also accepts a token the target cannot emit
    rejects(check.accept_or_reject, lambda t, d, u: True if d == 0 else u < min(1.0, t / d), capsys,
            "target gives probability 0 must never be accepted")
    # a 1e-6 offset that 4 significant digits hide: the message shows every digit
    out = rejects(check.accept_probability, lambda t, d: 0.0 if t <= 0 else min(1.0, t / (d + 1e-6)), capsys)
    assert "returned 0.7499990625" in out and "expected 0.7499999999" in out


# u == ratio must be rejected by a strict `<`, even in a solution that handles target_prob == 0 first.
def test_accept_or_reject_u_equal_to_the_ratio(capsys):
    def le_with_zero_guard(t, d, u):
        if t <= 0:
            return False
        return u <= min(1.0, t / d) if d > 0 else True

    assert le_with_zero_guard(0.375, 0.75, 0.5) is True and sampling.accept_or_reject(0.375, 0.75, 0.5) is False
    rejects(check.accept_or_reject, le_with_zero_guard, capsys, "strict `<`", "(0.375, 0.75, 0.5)")


def test_slips_from_a_learners_run_get_their_own_hints(capsys):
    import random

    rejects(check.accept_probability, lambda t, d: (t >= d) or t / d, capsys, "not a decision")
    rejects(check.accept_probability, lambda t, d: t / d, capsys, "two things")
    rejects(check.accept_probability, lambda t, d: min(t, d), capsys, "probability MASS")
    rejects(check.accept_probability, lambda t, d: 1 - min(1.0, t / d) if d > 0 else 0.0 if t > 0 else 1.0,
            capsys, "REJECTING")
    rejects(check.accept_or_reject, lambda t, d, u: (1 - u) < min(1, t / d) if d else t > 0, capsys,
            "not 1 - u")
    rejects(check.accept_or_reject, lambda t, d, u: random.random() * d < t, capsys, "the u you are given")
    rejects(check.accept_or_reject, lambda t, d, u: None, capsys, "forget a `return`")


def test_accept_or_reject_takes_the_ints_1_and_0_as_a_decision(capsys):
    """int(u * draft_prob < target_prob) is right: the lesson only tests the answer with `if`, so 1 and 0 (Python,
    NumPy or a one-element integer tensor) pass, with a word about the bool; other numbers get a hint naming bool."""
    import numpy as np
    import torch

    for to_int in (int, np.int64, lambda b: torch.tensor(b).int()):
        ok, out = run(check.accept_or_reject, lambda t, d, u, to_int=to_int: to_int(u * d < t), capsys)
        assert ok and "returns 1 and 0 rather than True and False" in out, out
    ok, out = run(check.accept_or_reject, lambda t, d, u: u * d < t, capsys)
    assert ok and "rather than True and False" not in out, out
    # the ints get the planted mistakes' hints like bools do
    rejects(check.accept_or_reject, lambda t, d, u: int(u <= min(1.0, t / d)) if d else 1, capsys, "strict `<`")
    rejects(check.accept_or_reject, lambda t, d, u: float(u * d < t), capsys, "returned 1.0 (float)",
            "return a bool, True or False")
    rejects(check.accept_or_reject, lambda t, d, u: 2 * int(u * d < t), capsys, "returned 2 (int)",
            "return a bool, True or False")


def test_smoothing_and_a_made_up_formula_get_their_own_hints(capsys):
    """A learner smoothed the division ((t + 1e-9) / (d + 1e-9)) and, separately, wrote u < min(1, 1 - d + t): both
    behave like `<=` on the edge cases and were told to "use a strict `<`", which they already did."""
    out = rejects(check.accept_or_reject, lambda t, d, u: u < (t + 1e-9) / (d + 1e-9), capsys, "small number")
    assert "strict `<`" not in out, out
    out = rejects(check.accept_or_reject, lambda t, d, u: u < min(1.0, 1.0 - d + t), capsys, "not 1 − draft + target")
    assert "strict `<`" not in out, out
