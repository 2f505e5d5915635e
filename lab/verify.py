"""Acceptance rules on plain tensors: which drafted tokens the target keeps, and the one token it adds.

Sources: Leviathan et al. 2023, Algorithm 1 (chain rejection sampling); greedy exact match is its
temperature-0 limit (a one-hot target accepts a draft iff it is the argmax). Token trees (lesson 10): recursive
rejection over siblings (SpecInfer, Miao et al. 2024, §4.2; EAGLE, Li et al. 2024), and Medusa's typical acceptance
(Cai et al. 2024, §2.3.1), which is *not* distribution-preserving.
"""
from __future__ import annotations

import math
from collections.abc import Mapping
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field

import torch

from lab.sampling import residual_unchecked
from lab.trees import chain_parents, check_parents
from lab.validation import check_number, check_probs, check_unbounded_ids, is_integer

__all__ = ["VerifyResult", "verify_greedy", "verify_sampled", "verify_tree_greedy", "verify_tree_sampled",
           "verify_tree_typical", "typical_threshold", "reject_child", "verify_tree_sampled_unchecked",
           "verify_tree_typical_unchecked"]


@dataclass
class VerifyResult:
    """``num_accepted`` drafts were accepted, then the target chose ``next_token``: ``kind`` is ``"resampled"`` (it
    replaced a rejected draft) or ``"bonus"`` (the accepted path ran to the end of the drafts). ``path``: the
    accepted draft indices in order (for a chain ``[0, ..., num_accepted - 1]``; for a tree one root-to-node
    path)."""

    num_accepted: int
    next_token: int
    kind: str
    path: list = field(default_factory=list)

    def __post_init__(self):
        if not self.path and self.num_accepted:
            self.path = list(range(self.num_accepted))


def verify_greedy(target_argmax: list, drafted: list) -> VerifyResult:
    """Greedy verification: accept drafts while they equal the target's argmax.

    ``target_argmax``: the target's argmax at each of the ``len(drafted) + 1`` positions (list of ints).
    Raises ``ValueError`` unless ``target_argmax`` has exactly ``len(drafted) + 1`` entries, or for a negative id,
    ``TypeError`` naming the argument for entries that are not token ids.
    """
    target_argmax = check_unbounded_ids("target_argmax", target_argmax)
    drafted = check_unbounded_ids("drafted", drafted)
    if len(target_argmax) != len(drafted) + 1:
        raise ValueError(f"target_argmax must hold len(drafted) + 1 = {len(drafted) + 1} entries (one per drafted "
                         f"position plus the bonus position), got {len(target_argmax)}")
    k = 0
    while k < len(drafted) and drafted[k] == target_argmax[k]:
        k += 1
    return VerifyResult(k, int(target_argmax[k]), "bonus" if k == len(drafted) else "resampled")


def verify_sampled(target_probs: torch.Tensor, drafted: list, draft_probs: torch.Tensor | None,
                   generator: torch.Generator | None) -> VerifyResult:
    """Chain rejection sampling; the emitted tokens are distributed exactly as the target's.

    ``target_probs``: float32 ``[n+1, V]`` (CPU) for the n drafted positions plus the bonus position;
    ``draft_probs``: float32 ``[n, V]``, or None for a deterministic drafter (verified as one-hot: accept with
    probability target(x), resample from the target with x removed). Draws come from ``generator`` (a
    ``torch.Generator``, or None for torch's global one).
    A chain is the one-child-per-level tree, so this is :func:`verify_tree_sampled` on ``[-1, 0, 1, ...]``.
    Raises ``ValueError`` and ``TypeError`` as :func:`verify_tree_sampled` does.
    """
    drafted = _drafted_list(drafted)
    return verify_tree_sampled(target_probs, drafted, chain_parents(len(drafted)), draft_probs, generator)


def _tree_args(tokens, parents, rows: int) -> list[int]:
    parents = check_parents(parents)
    if len(parents) != len(tokens):
        raise ValueError(f"parents must have one entry per drafted token ({len(tokens)}), got {len(parents)}")
    if rows != len(tokens) + 1:
        raise ValueError(f"the target needs {len(tokens) + 1} rows (the last committed token, then every node), "
                         f"got {rows}")
    return parents


def _drafted_list(tokens) -> list:
    """``tokens`` as a list; ``TypeError`` for None, text, a mapping or set (its keys, in no order) or another
    non-iterable ("not iterable" named nothing)."""
    if isinstance(tokens, (str, bytes, bytearray, Mapping, AbstractSet)) or not hasattr(tokens, "__iter__"):
        raise TypeError(f"drafted tokens must be a list of token ids, got {type(tokens).__name__}")
    return list(tokens)


def _prob_args(target_probs, tokens, generator, draft_probs=None) -> list[int]:
    """Checks shared by the sampling verifiers, O(n) per call (the rows are scanned by _check_rows): shapes, token
    ids inside the vocabulary, the generator's type. Returns the tokens as Python ints."""
    if not isinstance(target_probs, torch.Tensor):
        raise TypeError(f"target_probs must be a float tensor [n+1, V], got {type(target_probs).__name__}")
    if target_probs.dim() != 2:
        raise ValueError("target_probs must be a float tensor [n+1, V] (one row for the last committed token, then "
                         f"one per drafted node), got shape {tuple(target_probs.shape)}")
    if generator is not None and not isinstance(generator, torch.Generator):
        raise TypeError(f"generator must be a torch.Generator or None, got {type(generator).__name__} (a "
                        "random.Random works only with lab.toy)")
    vocab = target_probs.size(1)
    tokens = _drafted_list(tokens)
    if not all(type(t) is int for t in tokens):  # fast path: plain ints
        wrong = next((t for t in tokens if not is_integer(t)), None)
        if wrong is not None:
            raise TypeError(f"drafted tokens must be integer token ids, got {type(wrong).__name__} {wrong!r}")
        tokens = [int(t) for t in tokens]
    if tokens and not 0 <= min(tokens) <= max(tokens) < vocab:
        raise ValueError(f"drafted tokens must be ids in [0, {vocab}) (the width of target_probs), got "
                         f"{[t for t in tokens if not 0 <= t < vocab][:5]}")
    if draft_probs is not None and (not isinstance(draft_probs, torch.Tensor)
                                    or tuple(draft_probs.shape) != (len(tokens), vocab)):
        raise ValueError(f"draft_probs must be None or a float tensor [n, V] = [{len(tokens)}, {vocab}] (one row per "
                         f"drafted token, as wide as target_probs), got {type(draft_probs).__name__} "
                         f"{tuple(getattr(draft_probs, 'shape', ()))}")
    return tokens


def _row_tolerance(probs: torch.Tensor) -> float:
    # a bf16 / fp16 softmax row rounds each entry to 8 / 11 bits: its sum can miss 1 by a few thousandths
    return 1e-3 if probs.dtype in (torch.float32, torch.float64) else 2e-2


def _check_rows(target_probs, tokens, draft_probs=None) -> None:
    """The public verifiers' scan of their probability rows (a few passes over ``[n+1, V]``): every row of
    ``target_probs`` and ``draft_probs`` a distribution, and each draft row giving its own token a probability
    above 0 (the token was drawn from it). :func:`lab.decode.generate` skips this: its target rows come from
    :func:`lab.sampling.probs_from_logits` and it checks each step's draft rows itself."""
    check_probs("target_probs", target_probs, atol=_row_tolerance(target_probs))
    if draft_probs is not None and tokens:
        check_probs("draft_probs", draft_probs, atol=_row_tolerance(draft_probs))
        own = draft_probs[torch.arange(len(tokens)), torch.tensor(tokens)]
        if float(own.min()) <= 0:
            where = (own <= 0).nonzero().flatten().tolist()
            raise ValueError(f"draft_probs gives its own drafted token probability 0 at rows {where}; row i must be "
                             "the distribution drafted token i was drawn from (None for a deterministic drafter)")


def _draw(probs: torch.Tensor, generator, name: str) -> int:
    if generator is not None:  # rows on CUDA with generate's CPU generator: multinomial wants them on one device
        probs = probs.to(generator.device)
    # multinomial already rejects NaN, inf and negative entries; say which distribution was at fault
    try:
        return int(torch.multinomial(probs, 1, generator=generator))
    except RuntimeError as error:
        raise ValueError(f"{name} is not a valid distribution (NaN, inf, negative entries or no mass): "
                         f"{error}") from None


def _kids(parents: list[int]) -> dict:
    kids: dict = {}
    for i, p in enumerate(parents):
        kids.setdefault(p, []).append(i)
    return kids


def verify_tree_greedy(target_argmax: list, tokens: list, parents) -> VerifyResult:
    """Greedy tree verification: from the top, descend to the child whose token is the target's argmax, as long
    as there is one; the longest path that matches the target's own greedy choices.

    ``target_argmax``: ``len(tokens) + 1`` ints; entry 0 is the target's choice after the last committed token,
    entry ``1 + i`` its choice after node i. ``parents``: see :mod:`lab.trees`. Raises ``ValueError`` on a bad
    parents array, a ``target_argmax`` without ``len(tokens) + 1`` entries or a negative id, ``TypeError`` naming
    the argument for entries that are not token ids (a float is not truncated).
    """
    target_argmax = check_unbounded_ids("target_argmax", target_argmax)
    tokens = check_unbounded_ids("tokens", tokens)
    parents = _tree_args(tokens, parents, len(target_argmax))
    kids = _kids(parents)
    node, path = -1, []
    while True:
        row = node + 1
        match = next((c for c in kids.get(node, []) if tokens[c] == target_argmax[row]), None)
        if match is None:
            kind = "resampled" if kids.get(node) else "bonus"
            return VerifyResult(len(path), int(target_argmax[row]), kind, path)
        path.append(match)
        node = match


def verify_tree_sampled(target_probs: torch.Tensor, tokens: list, parents, draft_probs: torch.Tensor | None,
                        generator: torch.Generator | None) -> VerifyResult:
    """Recursive rejection sampling over a token tree; the emitted tokens are distributed exactly as the target's.

    At the current node the target's distribution is ``r`` (its row); each child c in listed order is accepted
    with probability ``min(1, r(x_c) / q_c(x_c))``, where ``q_c`` is the distribution c was drawn from
    (``draft_probs[c]``; one-hot when ``draft_probs`` is None). Accepting descends into c; rejecting replaces ``r``
    by the residual ``norm(max(0, r - q_c))`` and tries the next sibling. When no child is left the next token is
    drawn from ``r``. Each stage outputs exactly ``r`` whatever the later stages' proposals are, by the same
    argument as for one draft (Leviathan et al. 2023, Appendix A.1), so siblings drawn with or without replacement
    (``q_c`` with earlier siblings removed) or chosen deterministically (top-k) are all exact.

    ``target_probs``: float32 ``[n+1, V]`` (row 0 after the last committed token, row 1 + i after node i);
    ``draft_probs``: float32 ``[n, V]`` or None. Draws come from ``generator`` (a ``torch.Generator``, or None
    for torch's global one).

    Raises ``ValueError`` for a bad parents array, ``target_probs`` that is not ``[n+1, V]``, ``draft_probs`` that
    is not ``[n, V]``, drafted ids outside ``[0, V)``, a row of either that is not a distribution (NaN, inf or
    negative entries, or not summing to 1 within 1e-3: logits, or a softmax over the wrong axis), or a draft row
    giving its own token probability 0; ``TypeError`` for a ``target_probs`` that is not a tensor, a drafted token
    that is not an integer id, or a generator that is not a ``torch.Generator``.
    """
    tokens = _prob_args(target_probs, tokens, generator, draft_probs)
    _check_rows(target_probs, tokens, draft_probs)
    return verify_tree_sampled_unchecked(target_probs, tokens, parents, draft_probs, generator)


def reject_child(residual: torch.Tensor, child: int, token: int, draft_probs) -> torch.Tensor:
    """The distribution left after the target rejects node ``child`` (drafted ``token``): ``norm(max(0, residual -
    q_child))``, float ``[V]`` in ``residual``'s dtype, with ``q_child = draft_probs[child]`` (``draft_probs``:
    float ``[n, V]``), one-hot on ``token`` when ``draft_probs`` is None.

    ``residual``: float ``[V]``, the target's distribution at the parent node (or what earlier rejected siblings
    left of it); ``child``: the node's index (a Python int in ``[0, n)``); ``token``: its drafted id in ``[0, V)``.
    Unchecked, for speed (:func:`lab.sampling.residual_unchecked`): an index out of range raises torch's
    ``IndexError``. Where nothing is left (``residual <= q_child`` everywhere) the result is ``residual``
    unchanged. Shared with the TokenStream widget's tree residual, so the chart shows what
    :func:`verify_tree_sampled_unchecked` draws from by construction."""
    if draft_probs is None:
        draft_row = torch.zeros_like(residual)
        draft_row[token] = 1.0
    else:
        draft_row = draft_probs[child]
    return residual_unchecked(residual, draft_row)


def verify_tree_sampled_unchecked(target_probs: torch.Tensor, tokens: list, parents, draft_probs: torch.Tensor | None,
                                  generator: torch.Generator | None) -> VerifyResult:
    """:func:`verify_tree_sampled` without its O(n·V) checks of the rows, for arguments already checked:
    ``tokens`` plain Python ints in ``[0, V)``, ``target_probs`` float ``[n+1, V]`` whose rows are distributions
    (e.g. from :func:`lab.sampling.probs_from_logits`), ``draft_probs`` float ``[n, V]`` (each row giving its own
    token probability > 0) or None. :func:`lab.decode.generate` checks each step's draft and calls this. Same
    result and the same random draws as :func:`verify_tree_sampled`. Still raises ``ValueError`` for a bad
    parents array or ``target_probs`` without ``len(tokens) + 1`` rows; unchecked rows may give wrong results."""
    parents = _tree_args(tokens, parents, target_probs.size(0))
    kids = _kids(parents)
    node, path = -1, []
    residual = target_probs[0]
    while True:
        accepted = None
        for c in kids.get(node, []):
            token = tokens[c]
            target_p = float(residual[token])
            draft_p = 1.0 if draft_probs is None else float(draft_probs[c, token])
            u = float(torch.rand((), generator=generator, dtype=torch.float64))
            if target_p > 0 and u * draft_p < target_p:  # u < min(1, target/draft), see accept_or_reject
                accepted = c
                break
            residual = reject_child(residual, c, token, draft_probs)
        if accepted is None:
            kind = "resampled" if kids.get(node) else "bonus"
            token = _draw(residual, generator, "target_probs (or its residual after draft_probs)")
            return VerifyResult(len(path), token, kind, path)
        path.append(accepted)
        node = accepted
        residual = target_probs[node + 1]


def typical_threshold(target_probs: torch.Tensor, epsilon: float = 0.09, delta: float = 0.3) -> torch.Tensor:
    """Medusa's typical-acceptance threshold ``min(epsilon, delta * exp(-H(target)))`` per row, float32 ``[...]``
    (Cai et al. 2024, §2.3.1: a confident target demands a likely token, an uncertain one accepts more). The
    defaults are the Medusa code's ``posterior_threshold = 0.09`` (epsilon, a hard cap) and ``posterior_alpha =
    0.3`` (delta, about its square root).

    ``target_probs``: rows of probabilities ``[..., V]`` (a list is taken as a float32 tensor); the result keeps a
    float64 input's dtype, float32 otherwise. Raises ``ValueError`` unless ``0 < epsilon <= 1`` and ``0 < delta <
    inf`` (numbers or one-element tensors; ``TypeError`` for anything else), and for ``target_probs`` that is not a
    distribution over its last axis (:func:`lab.validation.check_probs`, with the verifiers' tolerance for bfloat16
    and float16 rows: NaN, negative entries, rows not summing to 1)."""
    is_tensor = isinstance(target_probs, torch.Tensor)
    target_probs = check_probs("target_probs", target_probs,
                               atol=_row_tolerance(target_probs) if is_tensor else 1e-3,
                               dtype=torch.float64 if is_tensor and target_probs.dtype == torch.float64
                               else torch.float32)
    return _typical_threshold(target_probs, epsilon, delta)


def _typical_threshold(target_probs: torch.Tensor, epsilon: float, delta: float) -> torch.Tensor:
    """:func:`typical_threshold` without its check of the rows: the verifier's rows were checked already, or are
    trusted (the unchecked path of the decode loop). ``epsilon`` and ``delta`` are checked here."""
    shown_epsilon, shown_delta = epsilon, delta
    epsilon, delta = check_number("epsilon", epsilon, "(0, 1]"), check_number("delta", delta, "(0, inf)")
    if not 0 < epsilon <= 1:
        raise ValueError(f"epsilon must be a number in (0, 1], got {shown_epsilon!r}")
    if not 0 < delta < math.inf:
        raise ValueError(f"delta must be a finite number > 0, got {shown_delta!r}")
    entropy = -(target_probs * torch.log(target_probs.clamp_min(1e-30))).sum(-1)
    return torch.clamp(delta * torch.exp(-entropy), max=epsilon)


def verify_tree_typical(target_probs: torch.Tensor, tokens: list, parents, generator: torch.Generator | None,
                        epsilon: float = 0.09, delta: float = 0.3) -> VerifyResult:
    """Medusa's typical acceptance over a token tree: a node passes when its token's target probability (in its
    parent's row) is above :func:`typical_threshold` of that row; the accepted path is the longest run of passing
    nodes from the top (the first listed among equally long ones), and the next token is drawn from the target's
    row at its end. No random draw decides acceptance, so the output is **not** distributed as the target's: it
    favours likely tokens (lesson 10 measures how far it drifts). Shapes as in :func:`verify_tree_sampled`.

    Raises ``ValueError`` for a bad parents array, ``target_probs`` that is not ``[n+1, V]``, drafted ids outside
    ``[0, V)``, ``epsilon``/``delta`` out of range (see :func:`typical_threshold`) or a row of ``target_probs`` that
    is not a distribution; ``TypeError`` for a ``target_probs`` that is not a tensor, a drafted token that is not an
    integer id, or a generator that is not a ``torch.Generator``.
    """
    tokens = _prob_args(target_probs, tokens, generator)
    _check_rows(target_probs, tokens)
    return verify_tree_typical_unchecked(target_probs, tokens, parents, generator, epsilon, delta)


def verify_tree_typical_unchecked(target_probs: torch.Tensor, tokens: list, parents,
                                  generator: torch.Generator | None, epsilon: float = 0.09,
                                  delta: float = 0.3) -> VerifyResult:
    """:func:`verify_tree_typical` without its checks of the rows and tokens, for arguments already checked (as
    for :func:`verify_tree_sampled_unchecked`: plain int ``tokens`` in ``[0, V)``, ``target_probs`` float
    ``[n+1, V]`` of distributions). Same result and random draws as :func:`verify_tree_typical`. Raises
    ``ValueError`` for a bad parents array, a row count other than ``len(tokens) + 1`` or ``epsilon``/``delta``
    out of range."""
    parents = _tree_args(tokens, parents, target_probs.size(0))
    kids = _kids(parents)
    threshold = _typical_threshold(target_probs, epsilon, delta)
    best: list = []
    reached = {-1: []}  # node -> its accepted path from the top (parents come before children)
    for i, p in enumerate(parents):
        if p in reached and float(target_probs[p + 1, tokens[i]]) > float(threshold[p + 1]):
            reached[i] = reached[p] + [i]
            if len(reached[i]) > len(best):
                best = reached[i]
    end = best[-1] if best else -1
    kind = "resampled" if kids.get(end) else "bonus"
    token = _draw(target_probs[end + 1], generator, "target_probs")
    return VerifyResult(len(best), token, kind, best)
