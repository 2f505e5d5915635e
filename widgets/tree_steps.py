"""Token-tree steps as the chain views draw them.

A token-tree drafter (Medusa, EAGLE with ``tree=``) records every node it drafted (``StepRecord.parents``), but a
stream of tokens can only show one line: :func:`chain_view` turns such a record into the chain ``TokenStream`` and
the race draw (the accepted path, then the first rejected child), and :func:`tree_residual` gives the distribution
the target resampled from after rejecting every child at the path's end, which the chain's own residual would get
wrong. Both read step records only; acceptance is still counted on the original record.
"""
from __future__ import annotations

import torch

from lab.trace import StepRecord, first_rejected_child
from lab.verify import reject_child

__all__ = ["chain_view", "tree_residual"]


def chain_view(record: StepRecord) -> StepRecord:
    """A token-tree step (Medusa, EAGLE with ``tree=``: ``record.parents`` set) as the chain ``TokenStream`` draws.

    The chain is the accepted path, then — when the target rejected every child of the path's last node — that
    node's first child as the one rejected draft, then the target's token. Probabilities are re-indexed so that row
    j still belongs to generated position j (``target_probs`` ``[len(chain) + 1, V]``, ``draft_probs``
    ``[len(chain), V]``). A chain record is returned unchanged. The result is for drawing only: its ``drafted``
    leaves out the off-path nodes, so count acceptance on the original record (:func:`lab.metrics.summarize_steps`).
    """
    if record.parents is None:
        return record
    child = first_rejected_child(record)
    nodes = list(record.path) + ([] if child is None else [child])
    target_probs = draft_probs = None
    if record.target_probs is not None:  # row 0: after the committed text; row 1 + i: after node i
        target_probs = record.target_probs[[0] + [1 + i for i in nodes]]
    if record.draft_probs is not None:
        draft_probs = record.draft_probs[nodes]
    return StepRecord(index=record.index, position=record.position, drafted=[record.drafted[i] for i in nodes],
                      num_accepted=record.num_accepted, emitted=list(record.emitted), last_kind=record.last_kind,
                      truncated=record.truncated, draft_ms=record.draft_ms, verify_ms=record.verify_ms,
                      draft_calls=record.draft_calls, target_probs=target_probs, draft_probs=draft_probs,
                      target_tokens=record.target_tokens, cache_before=record.cache_before,
                      acceptance=record.acceptance, prefill=record.prefill)


def tree_residual(record: StepRecord):
    """The residual the target resampled from at the end of a token-tree step's accepted path, and how many
    children of the path's last node it rejected first: ``(float32 tensor [V], count)``.

    As :func:`lab.verify.verify_tree_sampled` does, it starts from the target's row after the path's last node and,
    for each child in listed order, replaces it by the residual max(0, residual - q_child), normalised, where
    ``q_child`` is ``draft_probs[child]`` (one-hot on the child's token when ``draft_probs`` is None). That is the
    distribution sampled verification draws from; greedy verification takes the target's argmax and typical
    acceptance (``acceptance="typical"``) draws from the target's row itself. Returns None unless the record is a
    tree (``parents`` set) verified with exact acceptance whose target resampled and that carries ``target_probs``
    of a shape it can read."""
    if record.parents is None or record.last_kind != "resampled" or record.target_probs is None \
            or record.acceptance == "typical":
        return None
    last = record.path[-1] if record.path else -1
    children = [i for i, parent in enumerate(record.parents) if parent == last]
    target_rows = torch.as_tensor(record.target_probs).detach().float().cpu()
    if target_rows.dim() != 2 or target_rows.size(0) <= last + 1:
        return None  # a record this widget cannot read: the chain's residual (or its note) is shown instead
    residual = target_rows[last + 1]
    draft_rows = None if record.draft_probs is None else torch.as_tensor(record.draft_probs).detach().float().cpu()
    if draft_rows is not None and (draft_rows.dim() != 2 or draft_rows.shape[0] < len(record.drafted)
                                   or draft_rows.shape[1] != residual.numel()):
        return None
    for child in children:
        # lab.verify's own step, unchecked: rows a bf16 target recorded need not sum to 1 within 1e-3
        residual = reject_child(residual, child, int(record.drafted[child]), draft_rows)
    return residual, len(children)
