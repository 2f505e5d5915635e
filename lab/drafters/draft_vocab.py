"""A reduced draft vocabulary: the draft scores only the target's most frequent tokens.

With a 49k-token vocabulary and a small draft, the LM head costs more than the draft's layers. FR-Spec (Zhao et al.
2025, "FR-Spec: Accelerating Large-Vocabulary Language Models via Frequency-Ranked Speculative Sampling", §3)
restricts the draft's LM head to the target's LM-head rows of the most frequent tokens; EAGLE-3 (Li et al. 2025,
§3) trains its own head over such a subset and maps draft ids to target ids with a ``d2t`` table. Here the rows
are the target's own (shared, frozen) and the table is ``draft_vocab`` (target ids, ``draft_vocab[i]`` is the
target id of draft id ``i``; EAGLE-3's ``d2t[i]`` stores ``draft_vocab[i] - i``).

Exactness is kept: the draft's distribution is zero outside the subset, so rejection sampling against the target
(:func:`lab.verify.verify_sampled`) still returns the target's distribution; tokens outside it are never drafted,
only reached through the residual distribution or the bonus token.
"""
from __future__ import annotations

import torch

from lab.validation import check_int, check_token_ids

__all__ = ["frequent_tokens", "check_draft_vocab", "full_vocab_logits"]


def frequent_tokens(token_ids, size: int, vocab_size: int, always=()) -> torch.Tensor:
    """The ``size`` most frequent ids in ``token_ids`` (any iterable of LongTensors or int lists), most frequent
    first, ties broken by the smaller id; the ids in ``always`` (e.g. the end-of-turn token) are put in first, in
    the order given. Ids that never occur fill the remaining places in id order. Returns LongTensor ``[size]``.
    Raises ``ValueError`` for ``size`` outside ``[1, vocab_size]``, an id outside ``[0, vocab_size)`` (in
    ``token_ids`` or ``always``), or more distinct ``always`` ids than ``size``."""
    size, vocab_size = check_int("size", size, 1), check_int("vocab_size", vocab_size, 1)
    if size > vocab_size:
        raise ValueError(f"size must be at most vocab_size ({vocab_size}), got {size}")
    always = list(dict.fromkeys(check_token_ids("always", always, vocab_size, allow_empty=True)))
    if len(always) > size:
        raise ValueError(f"always holds {len(always)} distinct ids, more than size ({size})")
    counts = torch.zeros(vocab_size, dtype=torch.float64)
    for ids in token_ids:
        ids = torch.as_tensor(ids, dtype=torch.long).flatten()
        if ids.numel() and (ids.min() < 0 or ids.max() >= vocab_size):
            raise ValueError(f"token_ids must lie in [0, {vocab_size}), got ids from {int(ids.min())} to "
                             f"{int(ids.max())}")
        counts += torch.bincount(ids, minlength=vocab_size).double()
    counts[always] = float("-inf")  # placed first below, in the given order
    # stable sort on -count keeps id order among equal counts
    order = torch.sort(-counts, stable=True).indices
    return torch.cat([torch.tensor(always, dtype=torch.long), order[: size - len(always)]])


def check_draft_vocab(draft_vocab, vocab_size: int) -> torch.Tensor:
    """``draft_vocab`` as a LongTensor ``[V_d]`` of distinct target ids in ``[0, vocab_size)``; ``ValueError``
    otherwise (naming the argument)."""
    ids = torch.as_tensor(draft_vocab).flatten()
    if ids.numel() == 0:  # an empty list is a float tensor: say what is wrong, not its dtype
        raise ValueError(f"draft_vocab must hold 1..{vocab_size} ids in [0, {vocab_size}), got none")
    if ids.is_floating_point() or ids.dtype == torch.bool:
        raise ValueError(f"draft_vocab must hold integer token ids, got dtype {ids.dtype}")
    ids = ids.long()
    if ids.numel() == 0 or ids.min() < 0 or ids.max() >= vocab_size:
        raise ValueError(f"draft_vocab must hold 1..{vocab_size} ids in [0, {vocab_size})")
    if ids.unique().numel() != ids.numel():
        raise ValueError("draft_vocab must not repeat an id")
    return ids


def full_vocab_logits(reduced: torch.Tensor, draft_vocab: torch.Tensor, vocab: int) -> torch.Tensor:
    """Logits ``[..., V_d]`` over a draft vocabulary (target ids ``draft_vocab`` ``[V_d]``) spread over the whole
    vocabulary ``[..., vocab]``: ``-inf`` (probability 0) at every other id, so those tokens are never drafted."""
    full = reduced.new_full((*reduced.shape[:-1], vocab), float("-inf"))
    full[..., draft_vocab] = reduced
    return full
