"""Hand-coded toy language models and one speculative step on them (seed lesson 000, the algorithm).

A toy model is any callable ``list[int] -> sequence of V probabilities`` (the next-token distribution given
the context). Small vocabularies make every probability visible, so the theory lessons (02-05) can check the
exactness of speculative sampling with tens of thousands of draws in a second.
"""
from __future__ import annotations

import random
from numbers import Real
from typing import Callable, Sequence

import torch

from lab.metrics import kl_divergence, total_variation  # noqa: F401  (re-exported for the lessons)
from lab.sampling import accept_or_reject, categorical, invert_cdf, probability_list, residual_distribution, uniform
from lab.validation import MAX_LENGTH, check_int, check_probs, check_token_ids, is_integer

ToyModel = Callable[[list], Sequence[float]]

__all__ = ["speculative_step", "bigram_model", "mixture_model", "fixed_model", "kl_divergence",
           "total_variation", "ToyModel"]


def fixed_model(probs: Sequence[float]) -> ToyModel:
    """A model that ignores its context and always returns ``probs`` (a distribution over V tokens, as a new list of
    floats on every call, so editing one changes nothing else).

    ``probs``: a list, 1-D tensor or NumPy array of V probabilities. Raises ``ValueError`` naming ``probs`` when it
    is not one distribution ``[V]`` (a scalar or a nested list / 2-D table), has NaN, negative or infinite entries,
    or sums further than 1e-3 from 1; ``TypeError`` for something that is not numbers."""
    probs = check_probs("probs", probs, dtype=torch.float64)
    if probs.dim() != 1:
        raise ValueError(f"probs must be one distribution [V] (a flat list), got shape {tuple(probs.shape)}; "
                         "for a next-token table use bigram_model")
    values = probs.tolist()
    return lambda context: list(values)  # a fresh list: a caller that edits it must not change the model


def bigram_model(table: Sequence[Sequence[float]]) -> ToyModel:
    """A model whose next-token distribution depends only on the last token: ``table[last]`` ([V][V]; row 0 for an
    empty context), as a new list of floats on every call.

    ``table``: a square nested list, 2-D tensor or NumPy array whose every row is a distribution. Raises
    ``ValueError`` naming ``table`` when it is not square ``[V][V]`` (1-D, 3-D, or V rows of another length), or a
    row is not a distribution (NaN, negative or infinite entries, a sum further than 1e-3 from 1); ``TypeError``
    for something that is not numbers. The model it returns raises ``TypeError`` for a context that is not a
    sequence of ids (None, text, a dict or set) and ``ValueError`` when the context's last token is
    not a token id in [0, V): not an integer (bools and floats, as tensors too, are not) or outside the range (a
    negative id does not wrap around to the last row)."""
    rows = check_probs("table", table, dtype=torch.float64)
    if rows.dim() != 2 or rows.size(0) != rows.size(1):
        raise ValueError(f"table must be square [V][V] (row = last token, column = next token), got shape "
                         f"{tuple(rows.shape)}")
    rows = rows.tolist()
    size = len(rows)

    def model(context):
        if isinstance(context, (str, bytes, dict, set)) or not hasattr(context, "__len__") \
                or not hasattr(context, "__getitem__"):  # None read as an empty context gave row 0
            raise TypeError(f"bigram model: the context must be a sequence of token ids (a list or tensor), got "
                            f"{type(context).__name__}")
        last = context[-1] if len(context) else 0
        if type(last) is not int:  # fast path: plain ints
            # is_integer: NumPy and integer 0-d tensors pass; bools (tensor(True) too) and floats (tensor(1.0)) don't
            if not is_integer(last):
                raise ValueError(f"bigram model: the last context token must be a token id in [0, {size}), got "
                                 f"{last!r}")
            last = int(last)
        if not 0 <= last < size:
            raise ValueError(f"bigram model: the last context token must be a token id in [0, {size}), got {last!r}")
        return list(rows[last])  # a fresh list, as fixed_model's

    return model


def mixture_model(model: ToyModel, other: ToyModel, weight: float) -> ToyModel:
    """``(1 - weight) * model + weight * other``: a draft whose distance from ``model`` grows with ``weight``.

    ``weight``: a number in [0, 1] (NumPy floats work; a bool does not). Raises ``ValueError`` naming ``weight``
    for anything else (NaN, a string, a bool), ``TypeError`` when ``model`` or ``other`` is not callable; the
    mixed model raises ``ValueError`` when the two return distributions of different lengths."""
    if isinstance(weight, bool) or not isinstance(weight, Real) or not 0 <= weight <= 1:  # NaN fails 0 <= weight
        raise ValueError(f"weight must be a number in [0, 1], got {weight!r}")
    for name, value in (("model", model), ("other", other)):
        if not callable(value):
            raise TypeError(f"{name} must be a toy model (a callable context -> probabilities), got "
                            f"{type(value).__name__}")
    weight = float(weight)

    def mixed(context):
        a, b = model(context), other(context)
        if len(a) != len(b):
            raise ValueError(f"the two models have different vocabularies ({len(a)} vs {len(b)})")
        return [(1 - weight) * x + weight * y for x, y in zip(a, b)]

    return mixed


def _model_output(name: str, model: ToyModel, context: list) -> list[float]:
    """``model(context)`` as a list of floats, checked to be a distribution (toy vocabularies: one cheap pass)."""
    def label():  # built only for an error message
        shown = context if len(context) <= 8 else ["..."] + context[-8:]
        return f"{name}({shown})"

    return probability_list(label, model(context))


def speculative_step(prefix: list[int], target_model: ToyModel, draft_model: ToyModel, n_draft: int,
                     rng) -> list[int]:
    """One draft-verify step on toy models; returns ``prefix`` + accepted drafts + exactly one more token.

    1. The draft samples ``n_draft`` tokens autoregressively, keeping its probabilities.
    2. The target scores every drafted position (a real model does this in one forward pass).
    3. Each draft token is accepted iff ``u < min(1, target/draft)``; at the first rejection the step emits a
       token from the residual distribution ``max(0, target - draft)`` normalised and stops.
    4. If all are accepted, the step emits a bonus token from the target's distribution after the last draft.
    The emitted tokens are distributed exactly as ``n_accepted + 1`` tokens sampled from the target.

    ``prefix``: a list of token ids, or an integer tensor ``[L]`` (not modified; the result is a list of ints
    either way); ``n_draft``: an integer in [1, :data:`lab.validation.MAX_LENGTH`] (``numbers.Integral``, not
    bool); ``rng``: a ``random.Random`` or a ``torch.Generator``. Every distribution a model returns is checked
    (toy vocabularies make that cheap). Raises ``ValueError`` for ``n_draft`` outside [1, 65536], a model output
    that is not a distribution (NaN, a negative entry, a sum further than 1e-3 from 1; the message names the model
    and the context), or models with different vocabularies; ``TypeError`` for a prefix that is a string, not iterable
    (None) or holds something other than integers, a model that is not callable, or another kind of ``rng``.
    Source: Leviathan et al. 2023, Algorithm 1; seed lesson 000.
    """
    n_draft = check_int("n_draft", n_draft, 1, MAX_LENGTH)
    if not isinstance(rng, (random.Random, torch.Generator)):
        raise TypeError(f"rng must be random.Random or torch.Generator, got {type(rng).__name__}")
    context = check_token_ids("prefix", prefix, allow_empty=True)  # plain ints, so the result is list[int]
    for name, value in (("target_model", target_model), ("draft_model", draft_model)):
        if not callable(value):
            raise TypeError(f"{name} must be a toy model (a callable context -> probabilities), got "
                            f"{type(value).__name__}")
    drafts, draft_dists = [], []
    for _ in range(n_draft):
        dist = _model_output("draft_model", draft_model, context + drafts)
        token = invert_cdf(dist, uniform(rng))
        drafts.append(token)
        draft_dists.append(dist)
    out = list(context)
    for i, token in enumerate(drafts):
        target_dist = _model_output("target_model", target_model, out)
        if len(target_dist) != len(draft_dists[i]):
            raise ValueError(f"target vocabulary ({len(target_dist)}) != draft vocabulary ({len(draft_dists[i])})")
        if accept_or_reject(target_dist[token], draft_dists[i][token], uniform(rng)):
            out.append(token)
            continue
        residual = residual_distribution(torch.tensor(target_dist), torch.tensor(draft_dists[i]))
        out.append(categorical(residual.tolist(), rng))
        return out
    out.append(invert_cdf(_model_output("target_model", target_model, out), uniform(rng)))  # the bonus token
    return out
