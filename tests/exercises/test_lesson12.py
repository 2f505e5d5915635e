"""The exercise checkers of lesson 12 (the drafter arena; lab.exercises.lesson12): the reference passes, planted
mistakes are rejected with their own hints, a stub prints "not solved yet", and nothing raises."""
from __future__ import annotations

import numpy as np
import pytest

from lab.drafters.draft_model import next_n_draft
from lab.exercises import lesson12 as check
from lab.metrics import expected_tokens_per_call
from tests.helpers import rejects


def stub(*args):
    raise NotImplementedError


# a mean of per-step ratios gets the "pool first" hint.
def test_cost_ratio_mean_of_ratios_hint(capsys):
    def mean_of_ratios(steps, ar):
        ratios = [s.draft_ms / s.draft_calls for s in steps if s.draft_calls]
        return sum(ratios) / len(ratios) / ar

    rejects(check.cost_ratio, mean_of_ratios, capsys, "pool first")


# alpha**N instead of alpha**(N+1) gets the bonus-token hint.
def test_efficiency_exponent_hint(capsys):
    def short_exponent(m, b, a, n, c):
        tokens = n + 1 if a == 1 else (1 - a ** n) / (1 - a)
        return (m / b) / (tokens / (1 + n * c))

    rejects(check.efficiency, short_exponent, capsys, "(the bonus token)")


def test_next_n_draft_without_a_return(capsys):
    rejects(check.next_n_draft, lambda n, a, d: None, capsys, "returned None", "`return`")


def test_reference_values():
    # 4 steps of a draft model: 8.0 ms over 16 forwards = 0.5 ms per forward, over a 4.6 ms autoregressive step.
    assert abs(check.reference_cost_ratio(check._STEP_LISTS[0], 4.6) - 0.5 / 4.6) < 1e-12
    # accepted 4 + 1 + 0 + 2 = 7; three steps stopped at a rejection: alpha = 7 / 10, the acceptance rate 7 / 16.
    assert check.reference_alpha_from_steps(check._STEP_LISTS[0]) == 0.7
    assert check.reference_alpha_from_steps([check._step(0, 0, 0.0, 5.0, calls=0)]) is None
    assert abs(check.reference_efficiency(300.0, 200.0, 0.75, 4, 0.1)
               - 1.5 / (expected_tokens_per_call(0.75, 4) / 1.4)) < 1e-12


def test_cost_ratio(capsys):
    assert check.cost_ratio(check.reference_cost_ratio)
    assert "✓" in capsys.readouterr().out
    wrong = {
        "draft_calls), not by the number of steps":
            lambda steps, ar: sum(s.draft_ms for s in steps) / len(steps) / ar,
        "not drafted tokens":
            lambda steps, ar: sum(s.draft_ms for s in steps) / sum(len(s.drafted) for s in steps) / ar,
        "AUTOREGRESSIVE": lambda steps, ar: (sum(s.draft_ms for s in steps) / sum(s.draft_calls for s in steps))
        / (sum(s.verify_ms for s in steps) / len(steps)),
        "not the other way round": lambda steps, ar: ar / (sum(s.draft_ms for s in steps)
                                                           / sum(s.draft_calls for s in steps)),
    }
    for hint, fn in wrong.items():
        assert not check.cost_ratio(fn)
        assert hint in capsys.readouterr().out

    def skips_idle_steps(steps, ar):  # correct too: a step with no draft forward adds no time and no call
        busy = [s for s in steps if s.draft_calls]
        return sum(s.draft_ms for s in busy) / sum(s.draft_calls for s in busy) / ar

    assert check.cost_ratio(skips_idle_steps)
    assert "✓" in capsys.readouterr().out
    assert not check.cost_ratio(stub)
    assert "not solved yet" in capsys.readouterr().out


def test_alpha_from_steps(capsys):
    assert check.alpha_from_steps(check.reference_alpha_from_steps)

    hints = ("never examined", "bonus", "that step's own len(drafted)", "examined nothing",
             "is the bonus token, the target's own", "pool the counts", "first position",
             "not by position", "return None, not 0",
             "alpha is 0.0, an estimate like any other", "not NaN")
    for (fn, _), hint in zip(check._ALPHA_FAULTS, hints):  # each planted mistake is caught with its own hint
        assert not check.alpha_from_steps(fn)
        assert hint in capsys.readouterr().out
    assert not check.alpha_from_steps(lambda steps: 0.5)
    assert not check.alpha_from_steps(stub)
    assert "not solved yet" in capsys.readouterr().out


def test_alpha_from_steps_names_a_run_wide_n(capsys):
    """A learner's rejection wherever num_accepted < the run's largest N got "a step that drafted nothing examined
    nothing", which one of the step lists could not tell apart from it."""
    def run_wide(steps):
        most = max((len(s.drafted) for s in steps), default=0)
        accepted = sum(s.num_accepted for s in steps)
        examined = accepted + sum(s.num_accepted < most for s in steps)
        return accepted / examined if examined else None

    assert not check.alpha_from_steps(run_wide)
    out = capsys.readouterr().out
    assert "that step's own len(drafted)" in out and "examined nothing" not in out, out


def test_alpha_from_steps_none_where_zero_is_due_is_not_called_a_missing_return(capsys):
    """None is a legal answer here (nothing examined), so testing `accepted` instead of `examined` is a logic slip,
    not a forgotten `return`; a function that returns None everywhere still gets that hint."""
    def tests_accepted(steps):
        accepted = sum(s.num_accepted for s in steps)
        rejections = sum(1 for s in steps if s.drafted and s.num_accepted < s.depth)
        return accepted / (accepted + rejections) if accepted else None

    assert not check.alpha_from_steps(tests_accepted)
    out = capsys.readouterr().out
    assert "returned None; expected 0" in out and "forget a `return`" not in out
    assert "alpha is 0.0, an estimate like any other" in out  # not the generic "None if that is 0"
    assert not check.alpha_from_steps(lambda steps: None)
    assert "forget a `return`" in capsys.readouterr().out


def test_efficiency(capsys):
    from lab.metrics import predicted_speedup

    assert check.efficiency(check.reference_efficiency)
    wrong = {
        "1 + N·c": lambda m, b, a, n, c: (m / b) / expected_tokens_per_call(a, n),
        "not 1 + c": lambda m, b, a, n, c: (m / b) / (expected_tokens_per_call(a, n) / (1 + c)),
        "above 1 when": lambda m, b, a, n, c: (b / m) / predicted_speedup(a, n, c),
        "not predicted / measured": lambda m, b, a, n, c: predicted_speedup(a, n, c) / (m / b),
    }
    for hint, fn in wrong.items():
        assert not check.efficiency(fn)
        assert hint in capsys.readouterr().out
    def written_out(m, b, a, n, c):  # right everywhere but at alpha = 1, where it divides 0 by 0
        return (m / b) / ((1 - a ** (n + 1)) / (1 - a) / (1 + n * c))

    assert not check.efficiency(written_out)
    assert "Handle alpha == 1" in capsys.readouterr().out
    assert not check.efficiency(lambda m, b, a, n, c: None)
    assert "did you forget a `return` statement?" in capsys.readouterr().out
    assert not check.efficiency(stub)
    assert "not solved yet" in capsys.readouterr().out


def test_next_n_draft(capsys):
    assert check.next_n_draft(lambda n, a, d: next_n_draft(n, a, d))
    wrong = {
        "n_drafted": lambda n, a, d: n + 2 if a == n else max(1, n - 1),
        "below 1": lambda n, a, d: n + 2 if a == d else n - 1,
        "by 2, not 1": lambda n, a, d: n + 1 if a == d else max(1, n - 1),
        "EVERY draft": lambda n, a, d: n + 2 if a > 0 else max(1, n - 1),
        "not reset to 1": lambda n, a, d: n + 2 if a == d else 1,
        "not the number of drafts this step made": lambda n, a, d: n + 2 if a == d else max(1, d - 1),
        "puts no cap on N": lambda n, a, d: min(10, n + 2) if a == d else max(1, n - 1),
    }
    for hint, fn in wrong.items():
        assert not check.next_n_draft(fn)
        assert hint in capsys.readouterr().out
    assert not check.next_n_draft(lambda n, a, d: str(n))
    assert "return an int" in capsys.readouterr().out
    # a NumPy integer is an int answer
    assert check.next_n_draft(lambda n, a, d: np.int64(next_n_draft(n, a, d)))
    assert capsys.readouterr().out.startswith("✓")
    assert not check.next_n_draft(stub)
    assert "not solved yet" in capsys.readouterr().out


def test_metrics_alpha_and_cost_ratio_are_the_lab_reference():
    from lab.metrics import alpha_from_steps, cost_ratio_from_steps

    assert check.reference_alpha_from_steps is alpha_from_steps and check.reference_cost_ratio is cost_ratio_from_steps
    with pytest.raises(ValueError, match="draft_calls"):
        cost_ratio_from_steps([check._step(0, 0, 0.0, 5.0, calls=0)], 4.6)
    with pytest.raises(ValueError, match="ar_ms_per_step"):
        cost_ratio_from_steps(check._STEP_LISTS[0], 0.0)


def test_alpha_from_steps_refuses_a_fraction(capsys):
    """A Fraction is exact and passed, then lesson 12's f"{alpha:.2f}" raised TypeError (Python 3.11)."""
    from fractions import Fraction

    def exact(steps):
        value = check.reference_alpha_from_steps(steps)
        accepted = sum(s.num_accepted for s in steps)
        return None if value is None else Fraction(accepted) / Fraction(accepted + sum(
            1 for s in steps if s.drafted and s.num_accepted < len(s.drafted)))

    assert not check.alpha_from_steps(exact)
    assert "returned the Fraction" in capsys.readouterr().out


def test_answers_that_skip_the_prefill_record_pass(capsys):
    """The lesson passes generate's steps, the prefill's record (step 0) first: skipping it is right, by its flag or
    by its index, and the checkers' step lists hold it as real runs do."""
    assert any(s.prefill for s in check._STEP_LISTS[0]) and not any(s.prefill for s in check._STEP_LISTS[-1])

    def cost_after_prefill(steps, ar):
        decode = [s for s in steps if s.index > 0]
        return sum(s.draft_ms for s in decode) / sum(s.draft_calls for s in decode) / ar

    def alpha_after_prefill(steps):
        decode = [s for s in steps if not s.prefill]
        accepted = sum(s.num_accepted for s in decode)
        examined = accepted + sum(1 for s in decode if s.drafted and s.num_accepted < len(s.drafted))
        return accepted / examined if examined else None

    assert check.cost_ratio(cost_after_prefill) and check.alpha_from_steps(alpha_after_prefill)
    assert capsys.readouterr().out.count("✓") == 2


@pytest.mark.parametrize("checker, fn, hint", [
    (check.next_n_draft, lambda n, a, d: min(16, n + 2) if a == d else max(1, n - 1), "puts no cap on N"),
    (check.next_n_draft, lambda n, a, d: n + 2 if a == d else max(1, n - 2), "only -1 after a rejection"),
    (check.efficiency, lambda m, b, a, n, c: (m / b) / (expected_tokens_per_call(a, n) / (1 + (n + 1) * c)),
     "not 1 + (N + 1)·c"),
    (check.efficiency, lambda m, b, a, n, c: 100 * check.reference_efficiency(m, b, a, n, c), "not a percentage"),
    # a learner's four, which got the generic hints
    (check.cost_ratio, lambda steps, ar: sum(s.draft_ms for s in steps if not s.prefill)
     / len([s for s in steps if not s.prefill]) / ar, "with or without the prefill's record"),
    (check.efficiency, lambda m, b, a, n, c: (m / b) / (sum(a ** i for i in range(1, n + 1)) / (1 + n * c)),
     "runs from i = 0 to N"),
    (check.efficiency, lambda m, b, a, n, c: round(check.reference_efficiency(m, b, a, n, c), 2), "unrounded"),
])
def test_more_planted_mistakes(checker, fn, hint, capsys):
    rejects(checker, fn, capsys, hint)


def test_an_unexplained_mistake_gets_a_pointer_not_the_answer(capsys):
    """The fallback hint (no planted mistake matches) points back to the lesson's text, without the formula."""
    cases = [(check.cost_ratio, lambda steps, ar: 0.25, "sum of draft_ms"),
             (check.alpha_from_steps, lambda steps: 0.5, "accepted / examined"),
             (check.efficiency, lambda m, b, a, n, c: 0.5, "predicted_speedup(alpha"),
             (check.next_n_draft, lambda n, a, d: n + 3 if a == d else n, "max(1, N - 1)")]
    for checker, fn, answer in cases:
        assert not checker(fn)
        out = capsys.readouterr().out
        assert "hint" in out.lower() and answer not in out, out


def test_dropping_the_first_record_is_caught(capsys):
    """A learner's `steps = steps[1:]` ("skip the prefill") passed both checkers: the decode-only step list held two
    identical steps, so losing one changed neither alpha nor c. Its two steps differ now."""
    assert check.cost_ratio(check.reference_cost_ratio) and check.alpha_from_steps(check.reference_alpha_from_steps)
    capsys.readouterr()
    assert not check.cost_ratio(lambda steps, ar: check.reference_cost_ratio(steps[1:], ar))
    assert not check.alpha_from_steps(lambda steps: check.reference_alpha_from_steps(steps[1:]))
    out = capsys.readouterr().out
    assert out.count("skip the prefill by its flag (step.prefill), not by position") == 2
