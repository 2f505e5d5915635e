"""lab.check: answers a little off (0.5 % on a float, 2.5 for 2, a p-value 5 % off) are wrong, and planted mistakes
get their own hints (a missing `return`, u equal to the ratio, n·(d + t))."""

import pytest

from conftest import rejects
from lab import check, check_arena, check_decoding, metrics, sampling


# _same_float's relative tolerance is 1e-6; an answer 0.5 % off is wrong, not "close enough".
@pytest.mark.parametrize("checker, right", [
    (check.step_latency, lambda t, d, n: n * d + t),
    (check.predicted_speedup, metrics.predicted_speedup),
    (check.expected_tokens_per_call, metrics.expected_tokens_per_call),
    (check_arena.efficiency, check_arena._ref_efficiency),
], ids=["step_latency", "predicted_speedup", "expected_tokens_per_call", "efficiency"])
def test_an_answer_half_a_percent_off_is_rejected(checker, right, capsys):
    assert checker(right)
    rejects(checker, lambda *a: right(*a) * 1.005, capsys, "expected")


# an integer answer must be a whole number; 2.5 is not "2".
def test_integer_checkers_reject_non_whole_numbers(capsys):
    rejects(check.best_n_draft, lambda a, c, m: metrics.optimal_n_draft(a, c, m) + 0.5, capsys, "returned")
    rejects(check_decoding.next_position, lambda p, k: p + k + 1.5, capsys, "returned")
    # a whole float has the right value but breaks lesson 06's table (it formats N with :d): refused with that hint
    rejects(check.best_n_draft, lambda a, c, m: float(metrics.optimal_n_draft(a, c, m)), capsys, "return N as an int")


# a function that forgot its `return` gets the hint that says so.
@pytest.mark.parametrize("checker", [check.step_latency, check.expected_tokens_per_call, check_arena.efficiency],
                         ids=lambda c: c.__name__)
def test_missing_return_gets_its_own_hint(checker, capsys):
    rejects(checker, lambda *a: None, capsys, "returned None", "did you forget a `return` statement?")


# every planted fault is caught with its own hint (this one was not exercised).
def test_step_latency_n_of_each(capsys):
    rejects(check.step_latency, lambda t, d, n: n * (d + t), capsys, "not N of each")


# u == ratio must be rejected by a strict `<`, even in a solution that handles target_prob == 0 first.
def test_accept_or_reject_u_equal_to_the_ratio(capsys):
    def le_with_zero_guard(t, d, u):
        if t <= 0:
            return False
        return u <= min(1.0, t / d) if d > 0 else True

    assert le_with_zero_guard(0.375, 0.75, 0.5) is True and sampling.accept_or_reject(0.375, 0.75, 0.5) is False
    rejects(check.accept_or_reject, le_with_zero_guard, capsys, "strict `<`", "(0.375, 0.75, 0.5)")


# the chi-square p-value tolerance is 1e-4 relative; a p-value 5 % off is wrong.
def test_chi_square_pvalue_five_percent_off_is_rejected(capsys):
    import torch
    from scipy.stats import chisquare

    def good(tokens, probs):
        counts = torch.bincount(torch.tensor(tokens), minlength=len(probs)).tolist()
        return chisquare(counts, [p * len(tokens) for p in probs]).pvalue

    assert check.chi_square_pvalue(good)
    rejects(check.chi_square_pvalue, lambda tokens, probs: good(tokens, probs) * 1.05, capsys, "expected")
