"""vLLM's speculative-decoding counters and this course's ``stats``: the PromQL that turns one into the other in
production (:data:`VLLM_METRICS`) and the same arithmetic in Python (:func:`stats_from_vllm_counters`).

:func:`stats_from_vllm_counters` is also the worked answer to lesson 14's exercise (the learner writes it; the
lesson's checker compares against our own decode loop's stats, and the notebook falls back to this one).
"""
from __future__ import annotations

import math
from numbers import Real

__all__ = ["VLLM_METRICS", "stats_from_vllm_counters"]

VLLM_METRICS = {
    "acceptance_rate": ("rate(vllm:spec_decode_num_accepted_tokens_total[5m]) / "
                        "rate(vllm:spec_decode_num_draft_tokens_total[5m])"),
    "tokens_per_target_call": ("1 + rate(vllm:spec_decode_num_accepted_tokens_total[5m]) / "
                               "rate(vllm:spec_decode_num_drafts_total[5m])"),
    # ignoring(position): Prometheus divides series whose labels match exactly, and only the numerator has position
    "per_position_acceptance": ("rate(vllm:spec_decode_num_accepted_tokens_per_pos_total{position=\"i\"}[5m]) / "
                                "ignoring(position) rate(vllm:spec_decode_num_drafts_total[5m])"),
}
"""Our ``stats`` keys as PromQL over the counters vLLM exports when speculating (``vllm/v1/spec_decode/metrics.py``:
``vllm:spec_decode_num_drafts``, ``…_num_draft_tokens``, ``…_num_accepted_tokens``,
``…_num_accepted_tokens_per_pos`` with a ``position`` label; Prometheus adds ``_total`` to counters). The
per-position ratio divides ``ignoring(position)``: Prometheus matches the two sides of ``/`` on all their labels,
and the drafts counter has no ``position`` label, so without it the result is empty. vLLM's log
line calls the second one "mean acceptance length". vLLM counts only steps that carried a draft, so for prompt
lookup, where a step without a match is a target call with no draft, these read above our ``stats``, which count
every target call; they agree when every step drafts."""


def stats_from_vllm_counters(num_drafts: int, num_draft_tokens: int, num_accepted_tokens: int,
                             accepted_per_position) -> dict:
    """Our ``stats`` keys from vLLM's speculative-decoding counters.

    vLLM counts, per request and verification step that carried a draft (``vllm/v1/spec_decode/metrics.py``,
    ``SpecDecodingStats.observe_draft``): ``num_drafts`` += 1, ``num_draft_tokens`` += the tokens drafted (at least
    1), ``num_accepted_tokens`` += the drafted tokens accepted, and ``accepted_per_position[i]`` += 1 for every
    position i < accepted (so position i counts the drafts whose first i + 1 tokens were all accepted). So:

    - ``acceptance_rate`` = accepted / drafted tokens;
    - ``tokens_per_target_call`` = 1 + accepted / drafts (each step adds one token of the target's own, resampled
      or bonus: vLLM's "mean acceptance length"); over the steps that drafted, which is every target call for a
      draft model or EAGLE but not for prompt lookup (a step without a match has no draft);
    - ``per_position_acceptance[i]`` = accepted at position i / drafts (equal to ours when every step drafts N).

    Args:
        num_drafts, num_draft_tokens, num_accepted_tokens: counter values, whole numbers >= 0 (floats such as
            ``12.0``, as Prometheus reports counters, are accepted when they are whole).
        accepted_per_position: one whole count >= 0 per draft position (any iterable; trailing zeros allowed).

    Returns:
        a dict with ``acceptance_rate`` (float), ``tokens_per_target_call`` (float) and
        ``per_position_acceptance`` (list of floats, one per position). With no drafts the first two are None and
        the list is empty.

    Raises:
        ValueError: a count that is not a whole number >= 0, or counters that contradict each other:
            ``num_accepted_tokens`` > ``num_draft_tokens``; ``num_draft_tokens`` < ``num_drafts`` or > 0 with no
            drafts; a position count above ``num_drafts`` or above the one before it; position counts that do not
            sum to ``num_accepted_tokens``. The message names the argument.
    """
    num_drafts = _count("num_drafts", num_drafts)
    num_draft_tokens = _count("num_draft_tokens", num_draft_tokens)
    num_accepted_tokens = _count("num_accepted_tokens", num_accepted_tokens)
    if isinstance(accepted_per_position, (str, bytes)):
        raise ValueError(f"accepted_per_position must be a list of counts, got {accepted_per_position!r}")
    try:
        raw = list(accepted_per_position)
    except TypeError:
        raise ValueError(f"accepted_per_position must be a list of counts, got {accepted_per_position!r}") from None
    per_position = [_count(f"accepted_per_position[{i}]", x) for i, x in enumerate(raw)]
    if num_accepted_tokens > num_draft_tokens:
        raise ValueError(f"num_accepted_tokens ({num_accepted_tokens}) cannot exceed num_draft_tokens "
                         f"({num_draft_tokens}): only drafted tokens can be accepted")
    if num_draft_tokens < num_drafts:
        raise ValueError(f"num_draft_tokens ({num_draft_tokens}) cannot be below num_drafts ({num_drafts}): vLLM "
                         "counts a draft only when it holds at least one token")
    if num_drafts == 0 and num_draft_tokens > 0:
        raise ValueError(f"num_draft_tokens ({num_draft_tokens}) must be 0 when num_drafts is 0")
    for i, count in enumerate(per_position):
        if count > num_drafts:
            raise ValueError(f"accepted_per_position[{i}] ({count}) cannot exceed num_drafts ({num_drafts}): each "
                             "draft adds at most 1 per position")
        if i and count > per_position[i - 1]:
            raise ValueError(f"accepted_per_position must not increase with the position: [{i}] = {count} > "
                             f"[{i - 1}] = {per_position[i - 1]} (a position counts only when every earlier one "
                             "was accepted)")
    if sum(per_position) != num_accepted_tokens:
        raise ValueError(f"accepted_per_position must sum to num_accepted_tokens ({num_accepted_tokens}), got "
                         f"{sum(per_position)}: each accepted token adds 1 at its position")
    if num_drafts == 0:
        return {"acceptance_rate": None, "tokens_per_target_call": None, "per_position_acceptance": []}
    return {
        "acceptance_rate": num_accepted_tokens / num_draft_tokens,
        "tokens_per_target_call": 1 + num_accepted_tokens / num_drafts,
        "per_position_acceptance": [x / num_drafts for x in per_position],
    }


def _count(name: str, value) -> int:
    """``value`` as an int, if it is a whole number >= 0 (a counter); else ``ValueError`` naming ``name``."""
    if isinstance(value, bool) or not isinstance(value, Real) or not math.isfinite(value) or value < 0 \
            or value != int(value):
        raise ValueError(f"{name} must be a whole number >= 0 (a counter), got {value!r}")
    return int(value)
