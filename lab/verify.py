"""Acceptance rules on plain tensors: which drafted tokens the target keeps, and the one token it adds.

Sources: Leviathan et al. 2023, Algorithm 1 (chain rejection sampling); greedy exact match is its
temperature-0 limit (a one-hot target accepts a draft iff it is the argmax).
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from lab.sampling import _residual

__all__ = ["VerifyResult", "verify_greedy", "verify_sampled"]


@dataclass
class VerifyResult:
    """``num_accepted`` leading drafts were accepted, then the target chose ``next_token``: ``kind`` is
    ``"resampled"`` (it replaced a rejected draft) or ``"bonus"`` (every draft was accepted)."""

    num_accepted: int
    next_token: int
    kind: str


def verify_greedy(target_argmax: list, drafted: list) -> VerifyResult:
    """Greedy verification: accept drafts while they equal the target's argmax.

    ``target_argmax``: the target's argmax at each of the ``len(drafted) + 1`` positions (list of ints).
    """
    k = 0
    while k < len(drafted) and drafted[k] == target_argmax[k]:
        k += 1
    return VerifyResult(k, int(target_argmax[k]), "bonus" if k == len(drafted) else "resampled")


def verify_sampled(target_probs: torch.Tensor, drafted: list, draft_probs: torch.Tensor | None,
                   generator: torch.Generator | None) -> VerifyResult:
    """Chain rejection sampling; the emitted tokens are distributed exactly as the target's.

    ``target_probs``: float32 ``[n+1, V]`` (CPU) for the n drafted positions plus the bonus position;
    ``draft_probs``: float32 ``[n, V]``, or None for a deterministic drafter (verified as one-hot: accept with
    probability target(x), resample from the target with x removed). Draws come from ``generator``.
    """
    n = len(drafted)
    for i, token in enumerate(drafted):
        target_p = float(target_probs[i, token])
        draft_p = 1.0 if draft_probs is None else float(draft_probs[i, token])
        u = float(torch.rand((), generator=generator, dtype=torch.float64))
        if target_p > 0 and u * draft_p < target_p:  # u < min(1, target/draft), see accept_or_reject
            continue
        if draft_probs is None:
            draft_row = torch.zeros_like(target_probs[i])
            draft_row[token] = 1.0
        else:
            draft_row = draft_probs[i]
        residual = _residual(target_probs[i], draft_row)
        return VerifyResult(i, int(torch.multinomial(residual, 1, generator=generator)), "resampled")
    return VerifyResult(n, int(torch.multinomial(target_probs[n], 1, generator=generator)), "bonus")
