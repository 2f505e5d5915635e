"""From logits to probabilities, sampling, and the two formulas of speculative sampling.

Notation: ``target_probs`` is the distribution of the big model that verifies (Leviathan et al. 2023 call it
p, seed lesson 000 calls it q); ``draft_probs`` is the small model's (Leviathan's q, the seed's p).

Sources: Leviathan, Kalman & Matias, "Fast Inference from Transformers via Speculative Decoding" (2023),
section 2.3 and Appendix A.1; Chen et al., "Accelerating Large Language Model Decoding with Speculative
Sampling" (2023), Algorithm 2.
"""
from __future__ import annotations

import math
import random
from numbers import Real

import torch

__all__ = ["probs_from_logits", "check_sampling_args", "sample", "residual_distribution", "accept_or_reject",
           "check_probs"]


def check_sampling_args(temperature: float = 1.0, top_k: int | None = None, top_p: float | None = None) -> None:
    """Raise ``ValueError`` naming the argument when temperature < 0 or NaN, top_k < 1, or top_p not in (0, 1]."""
    if not isinstance(temperature, Real) or math.isnan(temperature) or temperature < 0 or math.isinf(temperature):
        raise ValueError(f"temperature must be a finite number >= 0 (0 = greedy), got {temperature!r}")
    if top_k is not None and (isinstance(top_k, bool) or not isinstance(top_k, int) or top_k < 1):
        raise ValueError(f"top_k must be None or an integer >= 1, got {top_k!r}")
    if top_p is not None and (not isinstance(top_p, Real) or math.isnan(top_p) or not 0 < top_p <= 1):
        raise ValueError(f"top_p must be None or a number in (0, 1], got {top_p!r}")


def probs_from_logits(logits: torch.Tensor, temperature: float = 1.0, top_k: int | None = None,
                      top_p: float | None = None) -> torch.Tensor:
    """Turn logits ``[..., V]`` into float32 probabilities ``[..., V]`` after temperature, top-k and top-p.

    - ``temperature == 0`` is greedy decoding: a one-hot vector on the argmax (first index on ties);
      top-k and top-p change nothing then.
    - top-k keeps the k largest logits (ties at the k-th value are kept, as transformers'
      ``TopKLogitsWarper`` does); top-p keeps the smallest set of most likely tokens whose mass reaches
      ``top_p`` (at least one token), applied after top-k and temperature, as transformers does.
    Apply the same call to target and draft logits: verification is exact only when both sides use the
    same processed distributions (Leviathan et al. 2023, section 2.3).

    Raises ``ValueError`` for NaN or +inf logits, temperature < 0, top_k < 1, top_p outside (0, 1].
    """
    check_sampling_args(temperature, top_k, top_p)
    logits = torch.as_tensor(logits)
    if not logits.is_floating_point():
        raise ValueError(f"logits must be a floating-point tensor, got dtype {logits.dtype}")
    logits = logits.float()
    if torch.isnan(logits).any() or torch.isposinf(logits).any():
        raise ValueError("logits contain NaN or +inf; check the model's output")
    if temperature == 0:
        return torch.nn.functional.one_hot(logits.argmax(-1), logits.size(-1)).float()
    logits = logits / temperature
    if top_k is not None and top_k < logits.size(-1):
        kth = torch.topk(logits, top_k, dim=-1).values[..., -1:]
        logits = logits.masked_fill(logits < kth, float("-inf"))
    probs = torch.softmax(logits, dim=-1)
    if top_p is not None and top_p < 1:
        sorted_probs, order = torch.sort(probs, dim=-1, descending=True)
        mass_before = sorted_probs.cumsum(-1) - sorted_probs
        drop_sorted = mass_before >= top_p
        drop_sorted[..., 0] = False  # always keep the most likely token
        drop = torch.zeros_like(drop_sorted).scatter(-1, order, drop_sorted)
        probs = probs.masked_fill(drop, 0.0)
        probs = probs / probs.sum(-1, keepdim=True)
    return probs


def sample(probs: torch.Tensor, generator: torch.Generator | None = None) -> int:
    """Draw one token id from a probability vector ``[V]`` (float), using ``generator`` for reproducibility."""
    return int(torch.multinomial(probs, 1, generator=generator))


def check_probs(name: str, probs: torch.Tensor, atol: float = 1e-3) -> torch.Tensor:
    """Return ``probs`` as float32 after checking it is a distribution over its last axis.

    Raises ``ValueError`` naming ``name`` for NaN, negative entries, or sums further than ``atol`` from 1.
    """
    probs = torch.as_tensor(probs, dtype=torch.float32)
    if probs.dim() == 0:
        raise ValueError(f"{name} must have a vocabulary axis, got a scalar")
    if torch.isnan(probs).any():
        raise ValueError(f"{name} contains NaN")
    if (probs < 0).any():
        raise ValueError(f"{name} has negative entries; probabilities must be >= 0")
    sums = probs.sum(-1)
    if ((sums - 1).abs() > atol).any():
        raise ValueError(f"{name} must sum to 1 over the last axis (got sums from {sums.min():.4g} "
                         f"to {sums.max():.4g}); pass probabilities, not logits or counts")
    return probs


def residual_distribution(target_probs: torch.Tensor, draft_probs: torch.Tensor) -> torch.Tensor:
    """The distribution to resample from after a rejection: ``max(0, target - draft)`` normalised.

    Shapes: both ``[..., V]`` (same V); returns float32 ``[..., V]``. Where the positive part has zero mass
    (target == draft), a rejection cannot happen, and the function returns ``target_probs`` so callers never
    divide by zero (DESIGN oracle 4). Tokens with target probability 0 get residual probability 0.

    Raises ``ValueError`` if the shapes differ (mismatched vocabularies) or either input is not a distribution.
    Source: Leviathan et al. 2023, Algorithm 1 and Appendix A.1; Chen et al. 2023, Algorithm 2.
    """
    target_probs = check_probs("target_probs", target_probs)
    draft_probs = check_probs("draft_probs", draft_probs)
    if target_probs.shape != draft_probs.shape:
        raise ValueError(f"target_probs {tuple(target_probs.shape)} and draft_probs {tuple(draft_probs.shape)} "
                         "must have the same shape (same vocabulary)")
    return _residual(target_probs, draft_probs)


def _residual(target_probs: torch.Tensor, draft_probs: torch.Tensor) -> torch.Tensor:
    # Unchecked core shared with the decode loop, whose inputs come from probs_from_logits.
    positive = (target_probs - draft_probs).clamp_min(0)
    mass = positive.sum(-1, keepdim=True)
    return torch.where(mass > 0, positive / mass.clamp_min(torch.finfo(torch.float32).tiny), target_probs)


def accept_or_reject(target_prob: float, draft_prob: float, u: float) -> bool:
    """The rejection step: accept a drafted token iff ``u < min(1, target_prob / draft_prob)``.

    ``target_prob`` and ``draft_prob`` are the two models' probabilities of the drafted token (floats in
    [0, 1]); ``u`` is a uniform draw in [0, 1). Computed as ``u * draft_prob < target_prob`` so a draft
    probability of 0 needs no division. A token with ``target_prob == 0`` is never accepted, and ``u == 0``
    accepts every token the target can produce.

    Raises ``ValueError`` if a probability is outside [0, 1] or NaN, or ``u`` is outside [0, 1).
    Source: Leviathan et al. 2023, Algorithm 1; seed lesson 000, step 2.
    """
    for name, value in (("target_prob", target_prob), ("draft_prob", draft_prob)):
        if not 0 <= float(value) <= 1:  # also rejects NaN
            raise ValueError(f"{name} must be a probability in [0, 1], got {value!r}")
    if not 0 <= float(u) < 1:
        raise ValueError(f"u must be a uniform draw in [0, 1), got {u!r}")
    if target_prob <= 0:
        return False
    return float(u) * float(draft_prob) < float(target_prob)


def uniform(rng) -> float:
    """One uniform draw in [0, 1) from a ``random.Random`` or a ``torch.Generator``."""
    if isinstance(rng, random.Random):
        return rng.random()
    if isinstance(rng, torch.Generator):
        return float(torch.rand((), generator=rng, dtype=torch.float64))
    raise TypeError(f"rng must be random.Random or torch.Generator, got {type(rng).__name__}")


def categorical(probs, rng) -> int:
    """Draw an index from a probability sequence by inverting its CDF with one uniform draw from ``rng``."""
    u = uniform(rng)
    total = 0.0
    last = 0
    for i, p in enumerate(probs):
        p = float(p)
        if p > 0:
            last = i
            total += p
            if u < total:
                return i
    return last  # rounding left u above the summed mass: the last token with mass
