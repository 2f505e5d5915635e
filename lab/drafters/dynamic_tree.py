"""EAGLE-2's dynamic draft tree: grow the tree where the draft is confident, then keep its best nodes.

Source: Li et al. 2024, "EAGLE-2: Faster Inference of Language Models with Dynamic Draft Trees" (arXiv 2406.16858):
a node's *value* is the product of the draft's probabilities along its path from the root, an estimate of the
chance that the target accepts the whole path (§3 shows the draft's confidence tracks acceptance). Expansion (§4.1):
at each depth only the top-k nodes by value are fed to the draft, each proposing its top-k children. Reranking
(§4.2): of every node drafted, the m of highest value go to verification. A child's value never exceeds its parent's,
so those m nodes form a tree. A static tree (:data:`lab.drafters.eagle.DEFAULT_TREE`) spends its nodes on the same
ranks whatever the context; this one spends them where the draft is sure.

The settings and their meaning are SGLang's (0.5.23): ``--speculative-num-steps`` (draft forwards, the deepest
level), ``--speculative-eagle-topk`` and ``--speculative-num-draft-tokens`` (the nodes verified, *counting* the last
verified token at the root: m + 1); the algorithm follows ``_select_top_k_tokens_first`` / ``_later`` in
``sglang/srt/speculative/spec_utils.py`` and ``organize_draft_results`` in ``sglang/srt/speculative/eagle_utils.py``.
SGLang's defaults for a Llama-architecture target such as SmolLM2 are 5 steps, top-4 and 8 tokens
(``_auto_choose_speculative_params`` in ``sglang/srt/arg_groups/speculative_hook.py``, pinned in
``tests/data/engines/sglang-0.5.23/``): :class:`DynamicTree`'s defaults. One difference: where values tie
exactly, SGLang's ``torch.topk`` picks either, this module the earlier node, so a kept node's parent is always kept.
The lesson is 11 (its exercise 2 reranks a drafter's candidates).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from lab.trees import check_parents
from lab.validation import check_int

__all__ = ["DynamicTree", "MAX_TOPK", "top_children", "expand_level", "rerank"]

MAX_TOPK = 256
"""The largest ``topk`` a :class:`DynamicTree` takes: each level scores topk² children (65,536 at this bound)."""


@dataclass(frozen=True)
class DynamicTree:
    """The shape of an EAGLE-2 dynamic tree, in SGLang's terms (pass it as an EAGLE drafter's ``tree``).

    - ``num_steps``: levels of the tree, and the draft's forwards per step counting the one over the new true pairs
      (which scores level 1; each later level takes one more) (``--speculative-num-steps``); at least 1.
    - ``topk``: children proposed per expanded node, and nodes expanded per level (``--speculative-eagle-topk``);
      1 to :data:`MAX_TOPK` (a level scores topk² children: the bound keeps a step's work and memory small).
    - ``num_draft_tokens``: the tree verified by the target, *counting its root*, the last verified token
      (``--speculative-num-draft-tokens``): ``num_draft_tokens - 1`` drafted nodes. At least 2 and at most
      1 + topk + (num_steps - 1)·topk², the nodes the expansion drafts.

    With ``topk = 1`` it is a chain of ``num_steps`` tokens (SGLang then forces ``num_draft_tokens = num_steps + 1``;
    a smaller value here keeps only the chain's first ``num_draft_tokens - 1``). Raises ``ValueError`` naming the
    field and its allowed range, for a value that is not an integer too."""

    num_steps: int = 5
    topk: int = 4
    num_draft_tokens: int = 8

    def __post_init__(self):  # stored as plain ints (a NumPy or one-element tensor count is taken as its value)
        object.__setattr__(self, "num_steps", check_int("num_steps", self.num_steps, 1))
        object.__setattr__(self, "topk", check_int("topk", self.topk, 1, MAX_TOPK))
        tokens = check_int("num_draft_tokens", self.num_draft_tokens, 2)
        if tokens > 1 + self.candidates:
            raise ValueError(f"num_draft_tokens must be at most 1 + topk + (num_steps - 1)·topk² = "
                             f"{1 + self.candidates} (the nodes the expansion drafts, plus the root), got {tokens}")
        object.__setattr__(self, "num_draft_tokens", tokens)

    @property
    def candidates(self) -> int:
        """Nodes the expansion drafts: ``topk`` on the first level, ``topk²`` on each later one."""
        return self.topk + (self.num_steps - 1) * self.topk ** 2

    @property
    def drafted(self) -> int:
        """Drafted nodes the target verifies: ``num_draft_tokens - 1``."""
        return self.num_draft_tokens - 1


def top_children(probs: torch.Tensor, topk: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The ``topk`` most probable next tokens of each row of ``probs`` ``[f, V]`` (float, rows summing to 1): ids
    LongTensor ``[f, topk]`` and their probabilities ``[f, topk]``, most probable first. Raises ``TypeError`` when
    ``probs`` is not a float tensor, ``ValueError`` when it is not 2-D or ``topk`` is not in ``[1, V]``."""
    if not isinstance(probs, torch.Tensor) or not probs.is_floating_point():
        raise TypeError(f"probs must be a float tensor [rows, V], got {type(probs).__name__}"
                        + (f" of dtype {probs.dtype}" if isinstance(probs, torch.Tensor) else ""))
    if probs.dim() != 2:
        raise ValueError(f"probs must be [rows, V], got shape {tuple(probs.shape)}")
    topk = check_int("topk", topk, 1, probs.size(1))
    values, ids = torch.topk(probs, topk, dim=-1)
    return ids, values


def expand_level(scores: torch.Tensor, probs: torch.Tensor, topk: int) -> dict:
    """One expansion step (EAGLE-2 §4.1; SGLang's ``_select_top_k_tokens_later``): the ``f`` expanded nodes of a
    level, of values ``scores`` ``[f]``, each propose their top-``topk`` children from ``probs`` ``[f, V]``; a
    child's value is its parent's times its probability.

    Returns ``{"tokens": [f·topk] ids, "scores": [f·topk] values, "rows": [f·topk] the parent's row in
    ``scores``, "chosen": [min(topk, f·topk)] the children to expand next, highest value first (ties: the earlier
    child)}``, children listed parent by parent, most probable first. Raises ``ValueError`` for shapes that do
    not match and as :func:`top_children` does."""
    if scores.dim() != 1 or probs.dim() != 2 or probs.size(0) != scores.size(0):
        raise ValueError(f"scores must be [f] and probs [f, V] with the same f, got {tuple(scores.shape)} and "
                         f"{tuple(probs.shape)}")
    ids, child_probs = top_children(probs, topk)
    values = (scores[:, None] * child_probs).reshape(-1)
    order = torch.sort(values, descending=True, stable=True).indices
    return {"tokens": ids.reshape(-1), "scores": values,
            "rows": torch.arange(scores.size(0)).repeat_interleave(ids.size(1)),
            "chosen": order[:topk]}


def rerank(scores: torch.Tensor, parents, count: int) -> list[int]:
    """Reranking (EAGLE-2 §4.2; SGLang's ``organize_draft_results``): the ``count`` drafted nodes of highest value
    ``scores`` ``[C]`` (nodes in drafting order, each after its parent), returned as their indices in drafting
    order, so every kept node comes after its parent. Ties go to the earlier node; as a child's value is at most its
    parent's, a kept node's parent (``parents[i]``, -1 at the root) is kept too, which is checked. Raises
    ``ValueError`` for ``scores`` that is not 1-D or holds NaN, ``count`` not in ``[1, C]``, a bad ``parents``
    array (:func:`lab.trees.check_parents`) or one of another length, ``TypeError`` when ``scores`` is not a tensor,
    ``RuntimeError`` if a kept node's parent is not kept (a child valued above its parent)."""
    parents = check_parents(parents)
    if not isinstance(scores, torch.Tensor):
        raise TypeError(f"scores must be a float tensor [C], got {type(scores).__name__}")
    if scores.dim() != 1 or len(parents) != scores.size(0):
        raise ValueError(f"scores must be [C] and parents hold C entries, got {tuple(scores.shape)} and "
                         f"{len(parents)}")
    count = check_int("count", count, 1, scores.size(0))
    order = torch.sort(scores, descending=True, stable=True).indices.tolist()  # the step's one device sync
    if math.isnan(float(scores[order[0]])):  # NaN sorts first in a descending sort
        raise ValueError("scores contains NaN: a node's value is a product of draft probabilities")
    keep = sorted(order[:count])
    kept = set(keep)
    orphan = [i for i in keep if parents[i] >= 0 and parents[i] not in kept]
    if orphan:
        raise RuntimeError(f"node {orphan[0]} is kept without its parent {parents[orphan[0]]}: a child's value must "
                           "not exceed its parent's")
    return keep
