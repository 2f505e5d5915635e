"""Exercise checkers for lesson 03 (the residual distribution, and two bugs to fix in it).

Each checker keeps the contract of :mod:`lab.exercises.harness`.
"""
from __future__ import annotations

import torch

from lab import sampling as _sampling
from lab.exercises.harness import checker, compare, same_tensor, same_tensor_type
from lab.exercises.harness import float32_tensor as _t

__all__ = ["residual_distribution", "residual_after_rejection", "residual_without_softmax", "residual_zero_mass",
           "reference_residual_distribution"]


_RESIDUAL_CASES = [
    (_t([0.5, 0.3, 0.2, 0.0]), _t([0.2, 0.5, 0.2, 0.1])),
    (_t([0.1, 0.2, 0.3, 0.4]), _t([0.4, 0.3, 0.2, 0.1])),
    (_t([0.25, 0.25, 0.25, 0.25]), _t([0.7, 0.1, 0.1, 0.1])),
    (_t([0.6, 0.4]), _t([1.0, 0.0])),
    (_t([0.0, 1.0, 0.0]), _t([0.5, 0.25, 0.25])),
    (_t([0.2, 0.3, 0.5]), _t([0.2, 0.3, 0.5])),
    (_t([0.125, 0.375, 0.5, 0.0, 0.0]), _t([0.125, 0.125, 0.25, 0.25, 0.25])),
    # a draft that nearly matches the target: a residual mass of 0.01, small but real (a learner's guard `mass > 0.1`
    # returned the target here and passed)
    (_t([0.5, 0.5]), _t([0.51, 0.49])),
    (_t([0.5, 0.5]), _t([0.501, 0.499])),  # mass 0.001: a guard at 0.005 passed the case above
    (_t([1e-6, 1 - 1e-6]), _t([0.0, 1.0])),  # mass 1e-6: a guard at 5e-4 passed the one above
    (_t([1e-8, 1 - 1e-8, 0.0]), _t([0.0, 1.0, 0.0])),  # mass 1e-8: a guard at 1e-7 passed the one above
]
_RESIDUAL_BATCH = (_t([[0.5, 0.3, 0.2, 0.0], [0.1, 0.2, 0.3, 0.4]]), _t([[0.2, 0.5, 0.2, 0.1], [0.4, 0.3, 0.2, 0.1]]))
# One row with target == draft next to one without: a zero-mass guard must work row by row.
_RESIDUAL_MIXED_BATCH = (_t([[0.2, 0.3, 0.5], [0.5, 0.3, 0.2]]), _t([[0.2, 0.3, 0.5], [0.2, 0.3, 0.5]]))


def reference_residual_distribution(target_probs, draft_probs):
    """The answer to the residual exercises: :func:`lab.sampling.residual_distribution` (``[..., V]`` in, ``[..., V]``
    out)."""
    return _sampling.residual_distribution(target_probs, draft_probs)


_EPS_HINT = ("a constant added to the sum (sum + eps) shrinks every row a little, and most where the residual mass is "
             "itself small: with a mass of 1e-6 the row no longer sums to 1. Divide by the sum itself, and deal with "
             "the rows whose sum is 0 on their own (what must such a row return?).")
_HALF_HINT = ("the values are right to about 3 digits: somewhere the computation ran in half precision (float16 or "
              "bfloat16). Compute in the inputs' dtype (float32), not only return it: probabilities rounded to 3 "
              "digits no longer sum to 1 exactly.")
_FLOOR_HINT = ("a floor on the sum (clamp_min) changes every row whose residual mass is below it, and a good draft "
               "makes such rows common: that row then no longer sums to 1. Divide by the sum itself, and deal with "
               "the rows whose sum is 0 on their own.")
# eps values a learner may add to the sum or use as its floor: 1, 2, 3 and 5 of each power of ten from 1e-12 to 0.5
_EPS_VALUES = tuple(m * 10.0 ** -k for k in range(1, 13) for m in (5, 3, 2, 1))


def _residual_faults():
    def pos(t, d):
        return (t - d).clamp_min(0)

    return [  # on a tie the earlier fault's hint is given: the whole-batch guard before the missing guard
        (lambda t, d: t if float(pos(t, d).sum()) == 0 else pos(t, d) / pos(t, d).sum(-1, keepdim=True),
         "guard each row, not the whole batch: a batch can hold a row where target == draft (zero residual mass) "
         "next to rows where it differs; take each row's own mass (a sum that keeps the row axis) and choose, row "
         "by row, between the normalised residual and target_probs."),
        (lambda t, d: t if bool((pos(t, d).sum(-1) == 0).any()) else pos(t, d) / pos(t, d).sum(-1, keepdim=True),
         "guard each row, not the whole batch: one row with zero residual mass must not send the other rows to "
         "target_probs (their residual has mass); decide row by row, from each row's own mass."),
        (lambda t, d: torch.where(pos(t, d).sum(-1, keepdim=True) > 0.1,
                                  pos(t, d) / pos(t, d).sum(-1, keepdim=True).clamp_min(1e-12), t),
         "guard only the rows whose residual mass is 0: a small mass, like 0.01 when the draft nearly matches the "
         "target, is a real distribution to resample from (a good draft makes such rows common)."),
        # a constant added to the sum, guarded with where or not, and a floor on the sum (a value between the grid's
        # points may still get the formula's hint)
        *[(lambda t, d, eps=eps, guard=guard: torch.where(pos(t, d).sum(-1, keepdim=True) > 0,
                                                          pos(t, d) / (pos(t, d).sum(-1, keepdim=True) + eps), t)
           if guard else pos(t, d) / (pos(t, d).sum(-1, keepdim=True) + eps), _EPS_HINT)
          for eps in _EPS_VALUES for guard in (True, False)],
        *[(lambda t, d, eps=eps: torch.where(pos(t, d).sum(-1, keepdim=True) > 0,
                                             pos(t, d) / pos(t, d).sum(-1, keepdim=True).clamp_min(eps), t),
           _FLOOR_HINT) for eps in _EPS_VALUES if eps >= 1e-7],
        *[(lambda t, d, dtype=dtype: _sampling.residual_distribution(t, d).to(dtype), _HALF_HINT)
          for dtype in (torch.float16, torch.bfloat16)],
        *[(lambda t, d, dtype=dtype: _sampling.residual_distribution(t.to(dtype), d.to(dtype)).to(t.dtype), _HALF_HINT)
          for dtype in (torch.float16, torch.bfloat16)],  # computed in half, returned as float32
        (lambda t, d: torch.softmax(pos(t, d), -1),
         "softmax is for logits: exp() gives every token, even those with zero residual mass (and zero target "
         "probability), some probability. Divide the positive part by its sum instead."),
        (lambda t, d: pos(t, d) / pos(t, d).sum(-1, keepdim=True),
         "when target == draft the positive part is all zeros and 0/0 = NaN. Return target_probs in that case "
         "(a rejection can't happen there, but batched code computes the residual anyway)."),
        (lambda t, d: pos(t, d) / pos(t, d).sum(-1),
         "keep the summed axis: .sum(-1, keepdim=True) gives one sum per row, shape [rows, 1], which divides each row "
         "by its own sum; without keepdim the sums, shape [rows], line up with the vocabulary axis instead."),
        (lambda t, d: (t - d) / (t - d).sum(-1, keepdim=True),
         "clamp negative differences to 0 before normalising: max(0, target - draft)."),
        (lambda t, d: torch.where(pos(t, d).sum(-1, keepdim=True) > 0,
                                  (t - d) / pos(t, d).sum(-1, keepdim=True).clamp_min(1e-30), t),
         "clamp negative differences to 0 before normalising: the numerator is max(0, target - draft) too, not "
         "target - draft (a probability can't be negative)."),
        (lambda t, d: pos(d, t) / pos(d, t).sum(-1, keepdim=True),
         "the subtraction is the wrong way round, or min stands where the formula has max (normalised, min(0, "
         "target - draft) is the same as max(0, draft - target)): the residual is max(0, target - draft), the "
         "mass the target has and the draft under-proposes."),
        (lambda t, d: pos(t, d),
         "normalise: divide max(0, target - draft) by its sum so the residual sums to 1."),
        (lambda t, d: torch.where(pos(t, d).sum(-1, keepdim=True) > 0, pos(t, d) / pos(t, d).sum(-1, keepdim=True)
                                  .clamp_min(1e-30), torch.zeros_like(t)),
         "with zero residual mass return target_probs, not zeros: zeros are not a distribution."),
        (lambda t, d: torch.where(pos(t, d).sum() > 0, pos(t, d) / pos(t, d).sum().clamp_min(1e-30), t),
         "normalise each row over the vocabulary (the last axis): use .sum(-1, keepdim=True), not .sum()."),
        (lambda t, d: (t + 0 * d) / t.sum(-1, keepdim=True),
         "resampling from the target itself counts the accepted mass twice: subtract the draft first."),
        (lambda t, d: torch.where(pos(t, d).sum(-1, keepdim=True) > 0,
                                  pos(t, d) / pos(t, d).sum(-1, keepdim=True).clamp_min(1e-30),
                                  torch.full_like(t, 1 / t.shape[-1])),
         "with zero residual mass return target_probs, not a uniform distribution: target == draft there, and the "
         "target's own distribution is the one to keep."),
    ]


def _has_zero_mass(target, draft) -> bool:
    """Whether some row of the pair has no residual mass (target <= draft everywhere, e.g. target == draft)."""
    return bool(((target - draft).clamp_min(0).sum(-1) == 0).any())


def _residual_body(name, fn, zero_mass: bool = True, tensor: bool = False):
    """Check ``fn`` against the residual cases; ``zero_mass=False`` leaves out every case with a row of zero residual
    mass (lesson 03's bug 2 is about softmax; zero mass is bug 3, the next exercise). ``tensor=True`` wants a
    torch.Tensor (the hint names it); otherwise a list or array of the right values passes."""
    faults = _residual_faults()
    same = same_tensor_type if tensor else same_tensor
    cases = [c for c in _RESIDUAL_CASES if zero_mass or not _has_zero_mass(*c)]
    batches = [b for b in (_RESIDUAL_BATCH, _RESIDUAL_MIXED_BATCH) if zero_mass or not _has_zero_mass(*b)]
    hint = ("residual = max(0, target - draft) / its sum over the vocabulary"
            + ("; target_probs where that sum is 0." if zero_mass else "."))
    n = compare(name, fn, cases, reference_residual_distribution, faults, same, hint)
    n += compare(name, fn, batches, reference_residual_distribution, faults,
                 same, "a batch [rows, V] must give one residual per row (normalise over the last "
                 + ("axis, and guard zero mass row by row)." if zero_mass else "axis)."))
    if zero_mass:
        return f"correct on all {n} cases, including target == draft and a batch of rows."
    return (f"correct on all {n} cases where the residual has mass, including a batch of rows (target == draft "
            "is the next bug).")


@checker
def residual_distribution(fn):
    """Check ``fn(target_probs [..., V], draft_probs [..., V]) -> [..., V]``: normalised max(0, target − draft).

    Where the positive part has zero mass the answer is ``target_probs``. Reference:
    :func:`lab.sampling.residual_distribution` (Leviathan et al. 2023, Algorithm 1). Returns True/False.

    The answer must be a torch.Tensor: the lesson keeps this function as ``residual_fn``, calls ``.tolist()`` on its
    answer and builds ``residual_after_rejection`` on it. The two bug fixes after it, which nothing reuses, and
    ``residual_after_rejection`` also take a list or array of the right values.
    """
    return _residual_body("residual_distribution", fn, tensor=True)


@checker
def residual_without_softmax(fn):
    """Check the fix of the softmax bug in lesson 03 (same contract as :func:`residual_distribution`), on cases
    where every row has residual mass: an unguarded division passes here, and :func:`residual_zero_mass` (the
    lesson's next bug) asks for the guard."""
    return _residual_body("residual_without_softmax", fn, zero_mass=False)


@checker
def residual_zero_mass(fn):
    """Check the fix of the NaN-at-zero-mass bug in lesson 03 (same contract as :func:`residual_distribution`)."""
    return _residual_body("residual_zero_mass", fn)


_AFTER_REJECTION_CASES = [
    (_t([0.5, 0.3, 0.2, 0.0]), _t([0.2, 0.5, 0.2, 0.1]), 1),
    (_t([0.1, 0.2, 0.3, 0.4]), _t([0.4, 0.3, 0.2, 0.1]), 0),
    (_t([0.6, 0.4]), _t([1.0, 0.0]), 0),
    (_t([0.25, 0.25, 0.25, 0.25]), _t([0.7, 0.1, 0.1, 0.1]), 0),
    (_t([0.125, 0.375, 0.5, 0.0, 0.0]), _t([0.125, 0.125, 0.25, 0.25, 0.25]), 3),
]


@checker
def residual_after_rejection(fn):
    """Check ``fn(target_probs [V], draft_probs [V], rejected_token) -> [V]``, the distribution to resample from.

    The answer does not depend on which token was rejected: it is the residual over the whole vocabulary.
    The planted faults include seed lesson 002's version, which uses only the two scalar probabilities of the
    rejected token (0 / 0 = NaN, because a rejected token always has target < draft). Returns True/False.
    """
    def scalar(t, d, token):
        adjusted = (t[token] - d[token]).clamp_min(0)
        return adjusted / adjusted.sum()

    def without_token(t, d, token):
        rest = t.clone()
        rest[token] = 0
        return rest / rest.sum()

    faults = [
        (scalar, "the residual is a distribution over the whole vocabulary, not a number for the rejected token: "
                 "compute max(0, target - draft) for every token, then normalise."),
        (without_token, "removing the rejected token from the target and renormalising is not enough: every token "
                        "loses the mass min(target, draft) that acceptance already gave it."),
        (lambda t, d, token: t, "resample from the residual max(0, target - draft), not from the target."),
        (lambda t, d, token: torch.softmax((t - d).clamp_min(0), -1),
         "divide by the sum; softmax gives mass to tokens whose residual is 0."),
    ]
    # the residual's own slips (the subtraction reversed, no clamp, no normalisation, ...), whatever the token
    faults += [(lambda t, d, token, residual=residual: residual(t, d), hint) for residual, hint in _residual_faults()]
    n = compare("residual_after_rejection", fn, _AFTER_REJECTION_CASES,
                lambda t, d, token: reference_residual_distribution(t, d), faults, same_tensor,
                "return the residual over the vocabulary: max(0, target - draft) / its sum.")
    return f"correct on all {n} cases: the rejected token's identity does not matter."
