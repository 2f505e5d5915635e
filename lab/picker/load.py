"""Throughput-bound serving: the numbers behind the picker's one exception under load, EAGLE at N = 1.

Seed lesson 002 quotes a November 2025 study of EAGLE-3: k = 1, the best k, cut cost by 20–54 % (a wrong k can
raise it by 175 %). The seed names no load; the picker uses the result for throughput-bound serving, which is this
course's inference (lesson 13: as the batch grows, the shortest draft keeps its gain longest). Serving cost per
token falling by a fraction f means 1 / (1 - f) times the tokens for the same hardware. Lesson 13's roofline model
(:mod:`lab.costs`) supplies where that gain ends and the batch-size schedule that goes with it.

``lab.costs`` is imported inside the functions: it imports torch, and ``import lab.picker`` stays light because the
command line builds its parser from :data:`lab.picker.TASKS` before any model work.
"""
from __future__ import annotations

import functools

__all__ = ["LOAD_COST_CUT", "LOAD_SPEEDUP", "LOAD_ALPHA", "LOAD_COST_RATIO", "LOAD_RIDGE", "saturated_gain",
           "unloaded_gain", "load_break_even", "load_schedule"]

LOAD_COST_CUT = (0.20, 0.54)
"""Seed lesson 002: the fraction of serving cost EAGLE-3 at k = 1 cut (low, high)."""

LOAD_SPEEDUP = tuple(round(1 / (1 - cut), 2) for cut in LOAD_COST_CUT)
""":data:`LOAD_COST_CUT` as throughput, 1 / (1 - cut): (1.25, 2.17). Not a speedup over plain decoding: the seed does
not name the cut's baseline, and at N = 1 a target call yields at most 2 tokens, so over plain decoding the gain
stays below 2 / (1 + c) (:func:`unloaded_gain` is lesson 13's model of it). The picker quotes :func:`unloaded_gain`."""

# Lesson 13's EAGLE-like scenario for its roofline model (lab.costs.speculative_throughput_gain): α, c, and an H100
# SXM's bf16 ridge point (FLOPs per byte). Under load the picker quotes that model's saturated gain and schedule.
LOAD_ALPHA, LOAD_COST_RATIO, LOAD_RIDGE = 0.8, 0.02, 295.0


def saturated_gain() -> float:
    """Lesson 13's model of EAGLE at N = 1 under a saturating batch: E / (N + 1 + N c), about 0.89."""
    from lab.costs import speculative_throughput_gain

    return speculative_throughput_gain(1 << 16, 1, LOAD_ALPHA, LOAD_COST_RATIO, LOAD_RIDGE)


def unloaded_gain() -> float:
    """Lesson 13's model of EAGLE at N = 1 on one sequence, where a target pass costs the same for 1 or 2 tokens:
    (1 + α) / (1 + c), about 1.76: the top of the picker's range under load."""
    from lab.costs import speculative_throughput_gain

    return speculative_throughput_gain(1, 1, LOAD_ALPHA, LOAD_COST_RATIO, LOAD_RIDGE)


def load_break_even() -> int:
    """The batch from which that model's N = 1 costs throughput (about 263)."""
    from lab.costs import break_even_batch

    return break_even_batch(1, LOAD_ALPHA, LOAD_COST_RATIO, LOAD_RIDGE)


def load_schedule() -> list:
    """vLLM's ``num_speculative_tokens_per_batch_size`` for N = 1 under that model (0 past the break-even): a fresh
    list of ``[first_batch, last_batch, n_draft]`` ranges on every call."""
    return [list(row) for row in _load_schedule()]


@functools.lru_cache(maxsize=1)
def _load_schedule() -> tuple:
    # constant inputs, and the sweep costs about 30 ms: every recommendation under load asks for it
    from lab.costs import draft_length_schedule

    return tuple(tuple(row) for row in draft_length_schedule(LOAD_ALPHA, LOAD_COST_RATIO, LOAD_RIDGE, max_n=1))
