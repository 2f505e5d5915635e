"""The course's one rule for comparing two measured speedups: "ahead of", "level with" or "behind"
(:func:`compare_speedups`, level within :data:`LEVEL`).

Kept apart from :mod:`lab.metrics`, which imports torch, so that ``python -m lab pick`` can word lesson 12's
measurements without paying torch's import; :mod:`lab.metrics` re-exports both names.
"""
from __future__ import annotations

import math
from numbers import Real

__all__ = ["LEVEL", "compare_speedups"]

LEVEL = 0.03
"""Two measured speedups are *level* when they differ by less than this share of the larger (3 %). Timing the same
drafter on the same requests twice moved its speedup by that much in lesson 12's committed runs (the draft model at
N = 4 in the arena and again in the adaptive comparison: 1.00× and 0.97× in one run, 0.99× and 1.00× in the next).
Every "ahead of / level with / behind" the course prints follows it (:func:`compare_speedups`)."""


def compare_speedups(speedup, other) -> str:
    """``"ahead of"``, ``"level with"`` or ``"behind"``: the measured ``speedup`` against ``other`` (ratios over
    autoregressive decoding, e.g. 1.32 for 1.32×; any positive numbers on one scale, such as tokens/s), level when
    they differ by less than :data:`LEVEL` of the larger. A one-element tensor or 0-d NumPy array is taken as its
    value (:func:`lab.validation.plain_number`). Raises ``ValueError`` naming the argument when either is not a
    finite number > 0."""
    values = []
    for name, given in (("speedup", speedup), ("other", other)):
        value = given
        if not isinstance(given, Real):
            # a tensor or array: lab.validation imports torch, which such a value has already loaded
            from lab.validation import plain_number

            value = plain_number(given)
        if isinstance(value, bool) or not isinstance(value, Real) or not math.isfinite(value) or value <= 0:
            raise ValueError(f"{name} must be a finite number > 0, got {given!r}")
        values.append(float(value))
    a, b = values
    if abs(a - b) < LEVEL * max(a, b):
        return "level with"
    return "ahead of" if a > b else "behind"
