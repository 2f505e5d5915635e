"""Exercise checker for lesson 05 (acceptance vs divergence: the expected acceptance probability).

Each checker keeps the contract of :mod:`lab.exercises.harness`.
"""
from __future__ import annotations

import time

import torch

from lab import metrics as _metrics
from lab.exercises.harness import checker, compare, Fail, run_case, same_float
from lab.exercises.harness import float32_tensor as _t

__all__ = ["expected_acceptance", "reference_expected_acceptance"]


_ACCEPTANCE_CASES = [
    (_t([0.5, 0.3, 0.2]), _t([0.2, 0.3, 0.5])),
    (_t([0.6, 0.4]), _t([0.8, 0.2])),
    (_t([0.25, 0.25, 0.25, 0.25]), _t([0.25, 0.25, 0.25, 0.25])),
    (_t([0.5, 0.5, 0.0]), _t([0.0, 0.0, 1.0])),
    (_t([0.0, 1.0, 0.0]), _t([0.0, 1.0, 0.0])),
    (_t([0.0, 1.0, 0.0]), _t([1.0, 0.0, 0.0])),
    (_t([0.7, 0.2, 0.1, 0.0]), _t([0.4, 0.3, 0.2, 0.1])),
    # 0.5; the largest single difference would say 1 - 0.25 = 0.75: only a sum over tokens gets this right
    (_t([0.5, 0.5, 0.0, 0.0]), _t([0.25, 0.25, 0.25, 0.25])),
    # an answer with more than two decimals (0.6333): round(x, 2) passed every case above
    (_t([0.4137, 0.3312, 0.2551]), _t([0.1023, 0.2759, 0.6218])),
]


# The real pair's vocabulary (SmolLM2: 49,152 tokens), and about how many rows the lesson's real-pair cell scores: 2
# answers of up to 120 tokens at 4 temperatures; and how long that cell takes with the course's answer (2-core CPU).
REAL_VOCAB = 49_152
REAL_PAIR_CALLS = 1_000
REAL_PAIR_CELL_S = 60
# A call on two rows of REAL_VOCAB tokens slower than SLOW_CALL_S, and SLOW_FACTOR times two torch operations on the
# same rows timed right after it (a busy machine slows both: torch's threads wait for cores), is reported as slow.
# Torch operations on whole rows take about 0.01 ms on a quiet 2-core CPU and up to about 30 ms on a busy one; the
# natural loop, sum(min(a, b) for a, b in zip(...)) over tensors, 250-500 ms (a loop over .tolist() floats: 10 ms).
SLOW_CALL_S = 0.02
SLOW_FACTOR = 10


def _real_sized_rows():
    """Two float32 distributions of ``REAL_VOCAB`` tokens, as probs_from_logits gives the lesson's real-pair cell."""
    gen = torch.Generator().manual_seed(5)
    return tuple(torch.softmax(2 * torch.randn(REAL_VOCAB, generator=gen), -1) for _ in range(2))


def _seconds_per_call(fns, args, rounds: int = 5, enough: float = 1.0) -> list:
    """The fastest call of each function in ``fns`` on ``args``, in seconds, over ``rounds`` rounds that call them in
    turn (fewer rounds once the first took ``enough``), with torch on one thread: on a busy machine torch's threads
    stall a call now and then (0.01 ms or 50-100 ms, little between), and timing the functions in turn, each at its
    best, keeps such a stall from passing for the answer's own slowness. A loop in Python is as slow on one thread."""
    threads = torch.get_num_threads()
    best = [float("inf")] * len(fns)
    torch.set_num_threads(1)
    try:
        for _ in range(rounds):
            for i, fn in enumerate(fns):
                start = time.perf_counter()
                fn(*args)
                best[i] = min(best[i], time.perf_counter() - start)
            if best[0] >= enough:  # the first (the answer) is slow beyond doubt
                break
    finally:
        torch.set_num_threads(threads)
    return best


def _whole_rows(target_probs, draft_probs):
    """The sum over tokens in two torch operations on whole rows: the yardstick of :func:`_speed_note` (the reference
    answer also validates its arguments, which takes longer than the sum)."""
    return float(torch.minimum(target_probs, draft_probs).sum())


def _speed_note(fn) -> str:
    """"" when ``fn`` (already found right) is not far slower on two real-sized rows than torch operations on them
    (:data:`SLOW_CALL_S`, :data:`SLOW_FACTOR`); else a warning with its time per call, what the real-pair cell would
    take with it, and a hint. Raises :class:`Fail` when ``fn`` raises on those rows."""
    rows = _real_sized_rows()
    outcome = run_case(fn, rows)
    if outcome[0] == "raise":
        raise Fail(f"right on the small cases, but on two rows of {REAL_VOCAB:,} tokens (the real pair's vocabulary, "
                   f"which the lesson's real-pair cell passes it) your function raised {outcome[1]}: {outcome[2]}")
    seconds, reference = _seconds_per_call([fn, _whole_rows], rows)
    if seconds <= max(SLOW_CALL_S, SLOW_FACTOR * reference):
        return ""
    spent = seconds * REAL_PAIR_CALLS
    return (f"\n  Warning: it is slow. One call on two rows of {REAL_VOCAB:,} tokens (the real pair's vocabulary) "
            f"took {seconds * 1e3:,.0f} ms, where torch operations on the whole rows take {reference * 1e3:.2f} ms "
            f"here. The real-pair cell below calls it about {REAL_PAIR_CALLS:,} times: about {_duration(spent)} in "
            f"your function, so the cell would take about {_duration(spent + REAL_PAIR_CELL_S)} instead of "
            f"{_duration(REAL_PAIR_CELL_S)}.\n  Hint: a loop in Python over the tokens handles one number at a time; "
            f"torch operations on the whole rows handle all {REAL_VOCAB:,} tokens in one call. Rewrite it that way "
            "and rerun this check.")


def _duration(seconds: float) -> str:
    """``seconds`` as "40 s", "a minute" or "8 minutes"."""
    if seconds < 90:
        return f"{seconds:.0f} s"
    return "a minute" if seconds < 105 else f"{seconds / 60:.0f} minutes"


def reference_expected_acceptance(target_probs, draft_probs):
    """The answer to the exercise: sum_x min(target(x), draft(x)) for ``[V]`` distributions
    (:func:`lab.metrics.acceptance_probability`)."""
    return _metrics.acceptance_probability(target_probs, draft_probs)


@checker
def expected_acceptance(fn):
    """Check ``fn(target_probs [V], draft_probs [V]) -> float``: the probability a drafted token is accepted,
    sum_x min(target(x), draft(x)) = 1 - TV(target, draft) (Leviathan et al. 2023, β). Returns True/False.

    A function found right is then timed on two rows of the real pair's 49,152 tokens: one far slower than torch
    operations on the whole rows (a Python loop over the tokens) passes with a warning of what the lesson's
    real-pair cell, which calls it about 1,000 times, would take.
    """
    def kl(t, d):
        return _metrics.kl_divergence(t, d)

    faults = [
        (lambda t, d: 1 - kl(t, d),
         "1 - KL is not the acceptance probability (KL can exceed 1 and is infinite for disjoint supports); the "
         "exact expression is sum of min(target, draft)."),
        (lambda t, d: _metrics.total_variation(t, d),
         "that is the total variation distance itself; acceptance is 1 - TV."),
        (lambda t, d: float((t * d).sum()),
         "sum(target * draft) is the chance that two independent samples agree, not the acceptance probability."),
        (lambda t, d: float(torch.maximum(t, d).sum()), "use min, not max: accepted mass is what both models share."),
        (lambda t, d: float((t * torch.where(d > 0, torch.clamp(t / d.clamp_min(1e-30), max=1.0),
                                             torch.ones_like(t))).sum()),
         "the drafted token comes from the DRAFT: average min(1, target/draft) under draft_probs, not target_probs."),
        (lambda t, d: float(1 - (t - d).abs().max()),
         "the largest single-token difference is not the distance that matters: every token's shortfall counts. "
         "Acceptance is 1 - TV, with TV = 0.5 * sum |target - draft| over ALL tokens (or directly sum min(target, "
         "draft))."),
        (lambda t, d: float((d * torch.clamp(t / d, max=1.0)).sum()),
         "where draft(x) = 0 your term is 0 x (target/0), and 0 x inf or 0 x (0/0) is NaN in floating point. Such "
         "tokens are never drafted and add nothing: sum min(target, draft), the same expectation without a "
         "division."),
        (lambda t, d: float(torch.clamp(t / d, max=1.0).sum()),
         "min(1, target/draft) is the chance that ONE token x is accepted once drafted; weight it by the chance "
         "that the draft proposes x (draft(x)) before summing: unweighted, the sum can pass 1, which no "
         "probability can. Weighted, it is sum_x min(target(x), draft(x))."),
        (lambda t, d: float(torch.minimum(t, d).mean()),
         "sum over the tokens, not the mean: the accepted probability mass is sum_x min(target(x), draft(x)); "
         ".mean() divides it by the vocabulary size."),
        (lambda t, d: round(float(torch.minimum(t, d).sum()), 2),
         "return the value unrounded: round only where you print it."),
        (lambda t, d: float(1 - (t - d).abs().sum()),
         "TV is HALF the sum of |target - draft| (each unit of mass moved is counted twice, once where it leaves "
         "and once where it arrives): acceptance = 1 - 0.5 * sum |target - draft|."),
    ]
    n = compare("expected_acceptance", fn, _ACCEPTANCE_CASES, reference_expected_acceptance, faults, same_float,
                "work the case above by hand: the chance that the draft proposes x and the target keeps it, added "
                "over every token x. Keep full precision (float32 or float64, nothing rounded).")
    return f"correct on all {n} cases, including greedy (one-hot) and disjoint distributions." + _speed_note(fn)
