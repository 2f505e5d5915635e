"""Exercise checker for lesson 05 (acceptance vs divergence: the expected acceptance probability).

Each checker keeps the contract of :mod:`lab.exercises.harness`.
"""
from __future__ import annotations

import torch

from lab import metrics as _metrics
from lab.exercises.harness import checker, compare, same_float
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


def reference_expected_acceptance(target_probs, draft_probs):
    """The answer to the exercise: sum_x min(target(x), draft(x)) for ``[V]`` distributions
    (:func:`lab.metrics.acceptance_probability`)."""
    return _metrics.acceptance_probability(target_probs, draft_probs)


@checker
def expected_acceptance(fn):
    """Check ``fn(target_probs [V], draft_probs [V]) -> float``: the probability a drafted token is accepted,
    sum_x min(target(x), draft(x)) = 1 - TV(target, draft) (Leviathan et al. 2023, β). Returns True/False.
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
    return f"correct on all {n} cases, including greedy (one-hot) and disjoint distributions."
