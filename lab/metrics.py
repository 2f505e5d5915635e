"""Measures of speculative decoding and the formulas that predict them.

Definitions used everywhere in the course (engines use the same names for different things, see lesson 06):
- acceptance rate: accepted draft tokens / drafted tokens (for a token tree every node counts as drafted, so
  compare trees with chains by tokens per target call).
- tokens per target call: new tokens / target forward passes in the decode loop (prefill not counted);
  vLLM calls this the mean acceptance length.
- per-position acceptance: for draft position i (0-based), the share of steps that drafted at least i+1
  tokens in which the token at position i was accepted (so it includes the chance that an earlier one failed);
  for a tree, position i is depth i of the accepted path.

Sources: Leviathan et al. 2023, section 3 (equation 1 and Theorem 3.8); seed lesson 000 (rule of thumb).
"""
from __future__ import annotations

import math
from numbers import Integral, Real

import torch

__all__ = ["expected_tokens_per_call", "predicted_speedup", "optimal_n_draft", "kl_divergence",
           "total_variation", "acceptance_probability", "chi_square", "summarize_steps", "alpha_from_steps",
           "cost_ratio_from_steps"]


def _check_alpha(alpha) -> float:
    if not isinstance(alpha, Real) or math.isnan(alpha) or not 0 <= alpha <= 1:
        raise ValueError(f"alpha (the acceptance rate) must be in [0, 1], got {alpha!r}")
    return float(alpha)


def _check_n(n_draft) -> int:
    if isinstance(n_draft, bool) or not isinstance(n_draft, Integral) or n_draft < 1:
        raise ValueError(f"n_draft must be an integer >= 1, got {n_draft!r}")
    return int(n_draft)


def _check_cost(cost_ratio) -> float:
    if not isinstance(cost_ratio, Real) or math.isnan(cost_ratio) or cost_ratio < 0 or math.isinf(cost_ratio):
        raise ValueError(f"cost_ratio (draft time / target time per forward pass) must be >= 0, got {cost_ratio!r}")
    return float(cost_ratio)


def expected_tokens_per_call(alpha: float, n_draft: int) -> float:
    """Expected tokens emitted per target call, ``(1 - alpha**(N+1)) / (1 - alpha)``; ``N + 1`` when alpha = 1.

    Assumes each drafted token is accepted independently with probability ``alpha`` (Leviathan et al. 2023,
    equation 1). Raises ``ValueError`` for alpha outside [0, 1] or ``n_draft`` < 1.
    """
    alpha, n = _check_alpha(alpha), _check_n(n_draft)
    if alpha == 1:
        return float(n + 1)
    return (1 - alpha ** (n + 1)) / (1 - alpha)


def predicted_speedup(alpha: float, n_draft: int, cost_ratio: float) -> float:
    """Predicted wall-clock speedup over autoregressive decoding: tokens per call / (1 + N * c).

    ``cost_ratio`` c = time of one draft forward / time of one target forward (unitless). One speculative step
    costs N draft passes plus one target pass over N+1 tokens, taken to cost the same as over one token
    (Leviathan et al. 2023, Theorem 3.8). Raises ``ValueError`` on bad alpha, N < 1 or c < 0.
    """
    return expected_tokens_per_call(alpha, n_draft) / (1 + _check_n(n_draft) * _check_cost(cost_ratio))


def optimal_n_draft(alpha: float, cost_ratio: float, max_n: int = 16) -> int:
    """The draft length N in 1..max_n with the largest :func:`predicted_speedup` (the smallest N on ties)."""
    alpha, cost_ratio, max_n = _check_alpha(alpha), _check_cost(cost_ratio), _check_n(max_n)
    return max(range(1, max_n + 1), key=lambda n: (round(predicted_speedup(alpha, n, cost_ratio), 12), -n))


def kl_divergence(target_probs, draft_probs) -> float:
    """KL(target || draft) in nats for two distributions ``[V]``; ``inf`` if draft misses target mass."""
    t = torch.as_tensor(target_probs, dtype=torch.float64)
    d = torch.as_tensor(draft_probs, dtype=torch.float64)
    if t.shape != d.shape:
        raise ValueError(f"target_probs {tuple(t.shape)} and draft_probs {tuple(d.shape)} must have the same shape")
    mask = t > 0
    if (d[mask] == 0).any():
        return math.inf
    return float((t[mask] * (t[mask] / d[mask]).log()).sum())


def total_variation(target_probs, draft_probs) -> float:
    """Total variation distance ``0.5 * sum |target - draft|`` for two distributions ``[V]``."""
    t = torch.as_tensor(target_probs, dtype=torch.float64)
    d = torch.as_tensor(draft_probs, dtype=torch.float64)
    if t.shape != d.shape:
        raise ValueError(f"target_probs {tuple(t.shape)} and draft_probs {tuple(d.shape)} must have the same shape")
    return float(0.5 * (t - d).abs().sum())


def acceptance_probability(target_probs, draft_probs) -> float:
    """Probability that one drafted token is accepted: ``sum min(target, draft) = 1 - TV`` (Leviathan, sec. 3.1)."""
    t = torch.as_tensor(target_probs, dtype=torch.float64)
    d = torch.as_tensor(draft_probs, dtype=torch.float64)
    return float(torch.minimum(t, d).sum())


def chi_square(counts, probs, min_expected: float = 5.0):
    """Pearson chi-square test of observed ``counts`` [V] against a distribution ``probs`` [V] (scipy).

    Categories whose expected count is below ``min_expected`` are pooled into one bin, as the test requires.
    Any observation in a zero-probability category makes the p-value 0. Returns
    an object with ``statistic`` and ``pvalue`` (scipy's ``Power_divergenceResult``).
    """
    from scipy.stats import chisquare

    counts = torch.as_tensor(counts, dtype=torch.float64)
    probs = torch.as_tensor(probs, dtype=torch.float64)
    total = counts.sum()
    if ((probs == 0) & (counts > 0)).any():
        from types import SimpleNamespace

        return SimpleNamespace(statistic=math.inf, pvalue=0.0)  # an impossible token was seen
    expected = probs * total
    big = expected >= min_expected
    obs = counts[big].tolist()
    exp = expected[big].tolist()
    if (~big).any() and float(expected[~big].sum()) > 0:  # zero-probability bins with no counts add nothing
        obs.append(float(counts[~big].sum()))
        exp.append(float(expected[~big].sum()))
    scale = sum(obs) / sum(exp)
    return chisquare(obs, [e * scale for e in exp])


def summarize_steps(steps, new_tokens: int, wall_ms: float) -> dict:
    """The ``stats`` dict of a generation from its step records (see module docstring for definitions)."""
    drafted = sum(len(s.drafted) for s in steps)
    accepted = sum(s.num_accepted for s in steps)
    longest = max((s.depth for s in steps), default=0)
    per_position = []
    for i in range(longest):  # a tree's position i is its depth i
        eligible = [s for s in steps if s.depth > i]
        per_position.append(sum(s.num_accepted > i for s in eligible) / len(eligible))
    return {
        "new_tokens": new_tokens,
        "target_calls": len(steps),
        "draft_calls": sum(s.draft_calls for s in steps),
        "drafted_tokens": drafted,
        "accepted_tokens": accepted,
        "acceptance_rate": accepted / drafted if drafted else None,
        "tokens_per_target_call": new_tokens / len(steps) if steps else None,
        "per_position_acceptance": per_position,
        "draft_ms": sum(s.draft_ms for s in steps),
        "verify_ms": sum(s.verify_ms for s in steps),
        "target_ms": sum(s.target_ms for s in steps),
        "wall_ms": wall_ms,
        "tokens_per_second": new_tokens / (wall_ms / 1000) if wall_ms > 0 else None,
    }


def alpha_from_steps(steps) -> float | None:
    """Leviathan's per-token acceptance α estimated from step records: accepted drafts / drafts the target examined.
    A step examines its drafts up to the first rejection, so each step that stopped short of its depth
    (``StepRecord.depth``) adds one failed trial; drafts after a rejection are never examined. None when no draft
    was examined. Source: Leviathan et al. 2023, §3.1 (α as the expected acceptance per draft); lesson 12."""
    accepted = sum(s.num_accepted for s in steps)
    rejections = sum(1 for s in steps if s.drafted and s.num_accepted < s.depth)
    return accepted / (accepted + rejections) if accepted + rejections else None


def cost_ratio_from_steps(steps, ar_ms_per_step: float) -> float:
    """Measured cost ratio c: the mean draft time per draft forward (total ``draft_ms`` / total ``draft_calls``, ms)
    over ``ar_ms_per_step``, the time of one autoregressive target step (ms). Raises ``ValueError`` when the steps
    made no draft forward or ``ar_ms_per_step`` is not positive. Lesson 12."""
    calls = sum(s.draft_calls for s in steps)
    if calls == 0:
        raise ValueError("steps must include draft forward passes (draft_calls > 0) to measure c")
    if not ar_ms_per_step > 0:
        raise ValueError(f"ar_ms_per_step must be > 0 ms, got {ar_ms_per_step!r}")
    return sum(s.draft_ms for s in steps) / calls / ar_ms_per_step
