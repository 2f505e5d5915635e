"""The exercise checkers of lesson 05 (acceptance vs divergence; lab.exercises.lesson05): the reference passes, planted
mistakes are rejected with their own hints, a stub prints "not solved yet", and nothing raises."""
from __future__ import annotations

import re

import torch

from lab import metrics
from lab.exercises import lesson05 as check
from tests.helpers import rejects


def run(checker, fn, capsys):
    """(returned bool, printed text)."""
    ok = checker(fn)
    return ok, capsys.readouterr().out


def test_expected_acceptance(capsys):
    ok, _ = run(check.expected_acceptance, lambda t, d: float(torch.minimum(t, d).sum()), capsys)
    assert ok
    ok, _ = run(check.expected_acceptance, lambda t, d: 1 - metrics.total_variation(t, d), capsys)
    assert ok
    rejects(check.expected_acceptance, lambda t, d: float((t * d).sum()), capsys, "two independent samples")
    rejects(check.expected_acceptance, lambda t, d: metrics.total_variation(t, d), capsys, "1 - TV")
    rejects(check.expected_acceptance, lambda t, d: float(torch.maximum(t, d).sum()), capsys, "use min")
    rejects(check.expected_acceptance, lambda t, d: 1 - metrics.kl_divergence(t, d), capsys, "1 - KL")
    # the expectation under the draft, written with a division: NaN where the draft gives a token probability 0
    rejects(check.expected_acceptance, lambda t, d: float((d * torch.clamp(t / d, max=1)).sum()), capsys,
            "0 x (0/0) is NaN", "sum min(target, draft)")


def test_expected_acceptance_largest_difference(capsys):
    fault = lambda t, d: float(1 - (t - d).abs().max())  # noqa: E731
    rejects(check.expected_acceptance, fault, capsys, "largest single-token difference", "returned 0.75",
                   "expected 0.5")
    rejects(check.expected_acceptance, lambda t, d: float(1 - (t - d).abs().sum()), capsys, "HALF")


def test_expected_acceptance_refuses_rounding_and_names_the_mean(capsys):
    """Every expected answer had at most two decimals, so round(x, 2) passed (a learner's run)."""
    rejects(check.expected_acceptance, lambda t, d: round(float(torch.minimum(t, d).sum()), 2), capsys,
            "unrounded")
    rejects(check.expected_acceptance, lambda t, d: float(torch.minimum(t, d).mean()), capsys, "not the mean")


def test_expected_acceptance_names_python_min_a_per_token_answer_and_unweighted_ratios(capsys):
    rejects(check.expected_acceptance, lambda t, d: float(min(t, d).sum()), capsys, "torch.minimum")
    rejects(check.expected_acceptance, lambda t, d: torch.minimum(t, d), capsys, "return ONE number",
            "returned 3 values")
    rejects(check.expected_acceptance, lambda t, d: torch.minimum(t, d).tolist(), capsys, "return ONE number")
    rejects(check.expected_acceptance, lambda t, d: float(torch.clamp(t / d, max=1.0).sum()), capsys,
            "weight it by the chance that the draft proposes x")


def test_a_one_element_tensor_is_refused_with_the_reason(capsys):
    """sum(-1, keepdim=True) gives tensor([0.7]): the right value, but the lesson's f"{x:.2f}" refuses it."""
    out = rejects(check.expected_acceptance, lambda t, d: torch.minimum(t, d).sum(-1, keepdim=True), capsys,
                  "tensor of shape [1]", "keepdim=True", ".item()")
    assert "returned tensor([0.7])" in out
    assert check.expected_acceptance(lambda t, d: torch.minimum(t, d).sum())  # a 0-d tensor is one number


def test_a_right_but_slow_answer_is_told_what_the_real_pair_cell_would_take(capsys):
    """sum(min(a, b) for a, b in zip(...)) passed, and the real-pair cell then called it about 1,000 times on the
    49,152-token rows: 477 s with no output, where the vectorised answer takes about 60 s (a learner's run)."""
    ok, out = run(check.expected_acceptance, lambda t, d: float(sum(min(a, b) for a, b in zip(t, d))), capsys)
    assert ok and out.startswith("✓ expected_acceptance: correct on all"), out
    assert "Warning: it is slow" in out and "49,152 tokens" in out and "about 1,000 times" in out, out
    assert re.search(r"took [\d,]+ ms", out) and "the cell would take about" in out, out
    assert "torch operations on the whole rows" in out and "torch.minimum" not in out, out
    # right answers of several torch operations (the reference validates its inputs too): a reviewer's busy machine
    # gave the reference the warning in 2 of 25 checks when the two were timed apart and on torch's 2 threads
    for right in (lambda t, d: float(torch.minimum(t, d).sum()), lambda t, d: 1 - 0.5 * float((t - d).abs().sum()),
                  check.reference_expected_acceptance, lambda t, d: float(torch.stack([t, d]).min(0).values.sum()),
                  lambda t, d: float(torch.where(t < d, t, d).sum())):
        ok, out = run(check.expected_acceptance, right, capsys)
        assert ok and "Warning" not in out, out
    threads = torch.get_num_threads()
    check.expected_acceptance(check.reference_expected_acceptance)
    assert torch.get_num_threads() == threads  # timed on one thread, then given back


def test_an_answer_that_raises_on_the_real_pairs_rows_is_named(capsys):
    def small_only(t, d):  # right on every small case
        if len(t) > 100:
            raise IndexError("index 100 is out of bounds")
        return float(torch.minimum(t, d).sum())

    rejects(check.expected_acceptance, small_only, capsys, "right on the small cases, but on two rows of 49,152 "
            "tokens", "raised IndexError: index 100")
