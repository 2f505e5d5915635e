"""The course's one rule for comparing two measured speedups: "ahead of", "level with" or "behind"
(:func:`compare_speedups`, level within :data:`LEVEL`), and the one check that a speedup does not exceed what its
tokens per target call allow (:func:`beyond_tokens_per_call`).

Kept apart from :mod:`lab.metrics`, which imports torch, so that ``python -m lab pick`` can word lesson 12's
measurements without paying torch's import; :mod:`lab.metrics` re-exports both names.
"""
from __future__ import annotations

import math
from numbers import Real

__all__ = ["LEVEL", "beyond_tokens_per_call", "compare_speedups"]

LEVEL = 0.03
"""Two measured speedups are *level* when they differ by less than this share of the larger (3 %). Timing the same
drafter on the same requests twice moved its speedup by that much in lesson 12's committed runs (the draft model at
N = 4 in the arena and again in the adaptive comparison: 1.00× and 0.97× in one run, 0.99× and 1.00× in the next).
Every "ahead of / level with / behind" the course prints follows it (:func:`compare_speedups`)."""


def _positive(name: str, given) -> float:
    """``given`` as a float, or ``ValueError`` naming ``name`` when it is not a finite number > 0."""
    value = given
    if not isinstance(given, Real):
        # a tensor or array: lab.validation imports torch, which such a value has already loaded
        from lab.validation import plain_number

        value = plain_number(given)
    try:
        finite = isinstance(value, Real) and not isinstance(value, bool) and math.isfinite(value)
    except OverflowError:  # 10**400: an int no float holds, raised a bare OverflowError
        finite = False
    if not finite or value <= 0:
        shown = repr(given) if len(repr(given)) <= 40 else f"{repr(given)[:40]}…"
        raise ValueError(f"{name} must be a finite number > 0, got {shown}")
    return float(value)


def compare_speedups(speedup, other) -> str:
    """``"ahead of"``, ``"level with"`` or ``"behind"``: the measured ``speedup`` against ``other`` (ratios over
    autoregressive decoding, e.g. 1.32 for 1.32×; any positive numbers on one scale, such as tokens/s), level when
    they differ by less than :data:`LEVEL` of the larger. A one-element tensor or 0-d NumPy array is taken as its
    value (:func:`lab.validation.plain_number`). Raises ``ValueError`` naming the argument when either is not a
    finite number > 0."""
    a, b = _positive("speedup", speedup), _positive("other", other)
    if abs(a - b) < LEVEL * max(a, b):
        return "level with"
    return "ahead of" if a > b else "behind"


def beyond_tokens_per_call(speedup, tokens_per_call) -> bool:
    """Whether the measured ``speedup`` (× autoregressive decoding) is ahead of its ``tokens_per_call`` (decoded tokens
    over decode-step target calls, :func:`lab.metrics.summarize_steps`; 1.0 for autoregressive decoding) by the course's
    level rule, :func:`compare_speedups`: above it by at least :data:`LEVEL` of the speedup (so 1.04 on 1.00 is beyond,
    1.03 on 1.00 is level with it).

    That is a speedup the clock cannot have given. A target forward over several tokens does a one-token forward's
    work and more, and drafting costs time too, so a speculative run that decoded ``n`` tokens in ``calls`` target
    calls took at least ``calls`` autoregressive steps where autoregressive decoding took ``n``: its speedup is at most
    ``n / calls``, its tokens per target call (the prefill, the same in both runs, only pulls the ratio towards 1).
    Beyond timing noise's share (:data:`LEVEL`), the baseline ran slow or the speculative run ran fast, and
    the timings should not be read. Raises ``ValueError`` naming the argument when either is not a finite number
    > 0."""
    return compare_speedups(_positive("speedup", speedup), _positive("tokens_per_call", tokens_per_call)) == "ahead of"
