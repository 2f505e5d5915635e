"""Exercise checkers for lesson 02 (the rejection step: acceptance probability, accept or reject).

Each checker keeps the contract of :mod:`lab.exercises.harness`.
"""
from __future__ import annotations

import math
from numbers import Integral

import torch

from lab import sampling as _sampling
from lab.exercises.harness import as_bool, checker, compare, Fail, outcome_of, same_float, show_value

__all__ = ["accept_probability", "accept_or_reject", "reference_accept_probability"]


def reference_accept_probability(target_prob, draft_prob):
    """The answer to the acceptance-probability exercise: min(1, target_prob / draft_prob) as a float; 0 when
    ``target_prob`` is 0, 1 when only ``draft_prob`` is."""
    if target_prob <= 0:
        return 0.0
    if draft_prob <= 0:
        return 1.0
    return min(1.0, target_prob / draft_prob)


_ACCEPT_PROB_CASES = [(0.6, 0.8), (0.8, 0.6), (0.3, 0.3), (0.0, 0.5), (0.2, 0.0), (0.0, 0.0), (0.05, 0.9), (1.0, 0.25),
                      (0.375, 0.75)]


@checker
def accept_probability(fn):
    """Check ``fn(target_prob, draft_prob) -> float``: the chance min(1, target/draft) of accepting a draft.

    A draft probability of 0 must not divide by zero (accept if the target gives the token mass); a target
    probability of 0 gives 0. Source: Leviathan et al. 2023, Algorithm 1. Returns True/False.
    """
    faults = [
        (lambda t, d: t / d if d > 0 else math.inf,
         "a probability can't exceed 1: cap the ratio with min(1, target/draft). When the target likes the token "
         "more than the draft does, the draft token is always accepted."),
        (lambda t, d: min(1.0, d / t),
         "the ratio is upside down: accept with target/draft, so tokens the draft over-proposes get accepted less."),
        (lambda t, d: min(1.0, t / d),
         "draft_prob can be 0 (a deterministic or top-k draft); handle it before dividing: the token is then "
         "accepted whenever target_prob > 0."),
        (lambda t, d: min(1.0, t / d) if d > 0 else 0.0,
         "when draft_prob is 0 the ratio is infinite, so the acceptance probability is 1 (if target_prob > 0)."),
        (lambda t, d: min(1.0, t / d) if d > 0 else 1.0,
         "a token the target gives probability 0 must never be accepted, even when draft_prob is 0."),
        (lambda t, d: t / d,
         "two things: cap the ratio with min(1, ...) (a probability can't exceed 1), and handle draft_prob == 0 "
         "before dividing (the token is then accepted whenever target_prob > 0)."),
        (lambda t, d: min(t, d),
         "min(target, draft) is the probability MASS both models share for this token (lesson 05 sums it); the "
         "chance of accepting a drafted token is the RATIO, min(1, target / draft)."),
        (lambda t, d: max(1.0, t / d) if d > 0 else 1.0 if t > 0 else 0.0,
         "use min, not max: the ratio is capped at 1 from above."),
        (lambda t, d: 1 - min(1.0, t / d) if d > 0 else 0.0 if t > 0 else 1.0,
         "that is the chance of REJECTING the draft: accept with min(1, target/draft) itself."),
    ]
    for args in _ACCEPT_PROB_CASES:  # a bool is a decision, not a probability (True == 1 would pass some cases)
        out = outcome_of(fn, args)
        if out[0] == "ok" and isinstance(out[1], bool):
            raise Fail(f"accept_probability{args} returned {out[1]!r}; return the probability as a float in [0, 1] "
                       "(min(1, target_prob / draft_prob)), not a decision: lesson 02's next exercise makes the "
                       "decision with u.")
    n = compare("accept_probability", fn, _ACCEPT_PROB_CASES, reference_accept_probability, faults, same_float,
                "return min(1, target_prob / draft_prob), with the two zero cases handled first.")
    return f"correct on all {n} cases."


# u values are exact binary fractions so that u == target/draft can be tested exactly.
_ACCEPT_CASES = [
    (0.375, 0.75, 0.49), (0.375, 0.75, 0.5), (0.375, 0.75, 0.8), (0.75, 0.375, 0.99), (0.0, 0.5, 0.0),
    (0.25, 0.0, 0.3), (0.5, 0.5, 0.999), (0.1, 0.9, 0.05), (0.1, 0.9, 0.2), (0.6, 0.8, 0.7), (0.0, 0.0, 0.25),
    (1.0, 0.5, 0.0),
    (0.0, 0.5, 1e-10),  # a draw just above 0 on an impossible token: a smoothed division accepts it, `<=` does not
    (0.375, 0.75, 0.5625),  # between the ratio (0.5) and 1 - draft + target (0.625)
]


def _decision(value):
    """``value`` as a bool when it is one (:func:`lab.exercises.harness.as_bool`) or the whole number 0 or 1 that
    ``int(u * draft_prob < target_prob)`` gives; None otherwise. The lesson's later cells use the answer in an ``if``,
    where 1 and 0 act as True and False."""
    decision = as_bool(value)
    if decision is not None:
        return decision
    if isinstance(value, torch.Tensor) and value.numel() == 1 and not value.is_floating_point():
        value = value.item()
    if isinstance(value, Integral) and value in (0, 1):
        return bool(value)
    return None


def _same_decision(a, b) -> bool:
    a, b = _decision(a), _decision(b)
    return a is not None and a == b


@checker
def accept_or_reject(fn):
    """Check ``fn(target_prob, draft_prob, u) -> bool``: accept iff ``u < min(1, target_prob / draft_prob)``. The ints
    1 and 0 pass as True and False (the lesson tests the answer with ``if``); other numbers are refused.

    Planted faults it tells apart: ``<=`` instead of ``<`` (accepts impossible tokens when u == 0), the ratio
    inverted, division by a zero draft probability, the difference target - draft in place of the ratio, the
    comparison reversed. Reference:
    :func:`lab.sampling.accept_or_reject`. Returns True/False.
    """
    def ratio(t, d):
        return min(1.0, t / d)

    faults = [  # on a tie the earlier fault's hint is given: the smoothing before the `<=` it behaves like
        (lambda t, d, u: u < (t + 1e-9) / (d + 1e-9),
         "a small number added to avoid dividing by zero moves the answer exactly where it matters: a target "
         "probability of 0 no longer gives a ratio of 0 (so u = 0 accepts an impossible token), and u equal to the "
         "ratio no longer rejects. Handle draft_prob == 0 exactly instead: compare u * draft_prob < target_prob, or "
         "treat the ratio as infinite."),
        (lambda t, d, u: u < min(1.0, 1.0 - d + t),
         "the chance to keep the draft is the ratio target_prob / draft_prob (capped at 1), not 1 − draft + target: "
         "a draft that proposes a token twice as often as the target must be kept half the time."),
        (lambda t, d, u: u <= ratio(t, d) if d > 0 else True,
         "use a strict `<`: with `<=`, u == 0 accepts a token whose target probability is 0, and u equal to the "
         "ratio accepts with probability slightly above min(1, target/draft)."),
        (lambda t, d, u: u < (min(1.0, d / t) if t > 0 else 1.0),
         "the ratio is upside down: it is target_prob / draft_prob."),
        (lambda t, d, u: u < ratio(t, d),
         "draft_prob can be 0; compare u * draft_prob < target_prob (no division), or treat the ratio as infinite."),
        (lambda t, d, u: u < t - d,
         "compare u with the RATIO target_prob / draft_prob (capped at 1), not the difference: max(0, target - draft) "
         "is the residual's numerator, what is left to draw after a rejection; the chance to keep the draft is the "
         "ratio."),
        (lambda t, d, u: u > ratio(t, d) if d > 0 else False,
         "the comparison is reversed: accept when u is BELOW the acceptance probability."),
        (lambda t, d, u: u < ratio(t, d) if d > 0 else False,
         "a zero draft probability makes the ratio infinite: accept (if the target gives the token mass)."),
        (lambda t, d, u: u < t,
         "compare u with the RATIO target_prob / draft_prob (capped at 1), not with target_prob alone: a token the "
         "draft proposes often must be thinned by its draft probability."),
        (lambda t, d, u: True if d == 0 else u < ratio(t, d),
         "a token the target gives probability 0 must never be accepted, even when draft_prob is 0 too: check "
         "target_prob first (or compare u * draft_prob < target_prob, which handles both)."),
        (lambda t, d, u: (1 - u) < ratio(t, d) if d > 0 else t > 0,
         "compare u itself, not 1 - u: 1 - u is uniform too, so the acceptance rate would come out right, but a "
         "given draw must give the decision u < min(1, target/draft) gives (the tests replay fixed draws)."),
    ]
    first = [outcome_of(fn, args) for args in _ACCEPT_CASES]
    # four more passes: a function that draws its own number agrees with itself on all twelve cases twice in a row
    # about one time in twenty, five times in a row about once in 10^5
    again = [outcome_of(fn, args) for _ in range(4) for args in _ACCEPT_CASES]
    if any(a[0] == "ok" and b[0] == "ok" and _decision(a[1]) is not None and _decision(a[1]) != _decision(b[1])
           for a, b in zip(first * 4, again)):
        raise Fail("accept_or_reject gave two different answers to the same (target_prob, draft_prob, u).\n  Hint: "
                   "decide with the u you are given (u < min(1, target_prob / draft_prob)); do not draw a new "
                   "random number inside the function.")
    for args, out in zip(_ACCEPT_CASES, first):
        if out[0] == "ok" and out[1] is None:
            raise Fail(f"accept_or_reject{args} returned None: did you forget a `return` statement? Return True or "
                       "False (a comparison such as `u < ...` gives a bool).")
        if out[0] == "ok" and _decision(out[1]) is None:
            raise Fail(f"accept_or_reject{args} returned {show_value(out[1], exact=True)} ({type(out[1]).__name__}); "
                       "return a bool, True or False (a comparison such as `u < ...` gives one; the ints 1 and 0 pass "
                       "too).")
    n = compare("accept_or_reject", fn, _ACCEPT_CASES, _sampling.accept_or_reject, faults, _same_decision,
                "accept iff u < min(1, target_prob / draft_prob); handle draft_prob == 0 and target_prob == 0.")
    summary = f"correct on all {n} cases, including u == ratio, u == 0 and a zero draft probability."
    if any(out[0] == "ok" and as_bool(out[1]) is None for out in first):  # 1 and 0: right, and worth a word
        summary += (" (Your function returns 1 and 0 rather than True and False: the lesson's `if` treats them "
                    "alike, and the comparison without int(...) gives the bool itself.)")
    return summary
