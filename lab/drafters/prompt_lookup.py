"""Prompt lookup (n-gram) drafting: propose what followed the last few tokens the previous time they appeared.

No draft model at all: the drafter searches the prompt and the text generated so far for the most recent earlier
occurrence of the context's last n tokens (n from ``max_ngram`` down to 1) and proposes the tokens that came after
it. It costs no draft forward pass, and it shines where the output repeats its input: edits, copies, code
refactors, structured records. It is deterministic, so verification treats its proposal as one-hot (exact under
sampling too).

Sources: Saxena 2023, "Prompt Lookup Decoding" (transformers' ``prompt_lookup_num_tokens``); vLLM's n-gram
speculation (``speculative_config={"method": "ngram", "prompt_lookup_max": ..., ...}``; seed lesson 002 quotes the
older ``speculative_model="[ngram]"`` / ``ngram_prompt_lookup_max`` names); lesson 08. One difference from all three:
they continue the *earliest* occurrence of the matched n-gram (transformers' ``PromptLookupCandidateGenerator`` takes
the first match left to right, vLLM's ``vllm/v1/spec_decode/ngram_proposer.py`` "the earliest position"), this
course by default the most recent, the copy a long text is usually continuing (lesson 08); ``match="earliest"`` takes
the engines' rule. vLLM also matches only n-grams between ``prompt_lookup_min`` and ``prompt_lookup_max`` (both 5 by
default), where this lookup falls back to 1.
"""
from __future__ import annotations

import torch

from lab.drafters.base import Draft, DraftRequest, check_request
from lab.validation import check_unbounded_ids, is_integer

__all__ = ["ngram_lookup", "PromptLookupDrafter", "MATCH_RULES"]

MATCH_RULES = ("recent", "earliest")
"""Which earlier occurrence of the matched n-gram a lookup continues: ``"recent"``, the most recent (this course's
default), or ``"earliest"`` (transformers' ``PromptLookupCandidateGenerator`` and vLLM's n-gram proposer)."""


def _check_positive(name: str, value) -> int:
    if not is_integer(value) or value < 1:
        raise ValueError(f"{name} must be an integer >= 1, got {value!r}")
    return int(value)


def _check_match(match) -> str:
    if not isinstance(match, str) or match not in MATCH_RULES:
        raise ValueError(f"match must be one of {MATCH_RULES}, got {match!r}")
    return str(match)  # a numpy.str_ too, kept as a plain str


def _token_ids(context) -> list:
    """``context`` as a list of Python ints: a 1-d integer tensor or a sequence of integers (Python, NumPy or
    integer 0-d tensors). Raises ``ValueError`` for anything else, e.g. a string, floats or a 2-d tensor."""
    if isinstance(context, torch.Tensor):
        if context.dim() != 1 or context.is_floating_point() or context.is_complex() or context.dtype == torch.bool:
            raise ValueError(f"context must be a 1-d integer tensor or a sequence of token ids, got a tensor of "
                             f"shape {tuple(context.shape)} and dtype {context.dtype}")
        return context.tolist()
    if isinstance(context, (str, bytes)):
        raise ValueError(f"context must be a sequence of integer token ids, not text ({context!r}): encode it first")
    try:
        tokens = list(context)
    except TypeError:
        raise ValueError(f"context must be a sequence of integer token ids, got {type(context).__name__}") from None
    if all(type(t) is int for t in tokens):  # the decode loop's case: plain ints, nothing to convert
        return tokens
    bad = next((t for t in tokens if not is_integer(t)), None)
    if bad is not None:
        raise ValueError(f"context must hold integer token ids, got {bad!r}")
    return [int(t) for t in tokens]


def ngram_lookup(context, max_ngram: int = 3, n_draft: int = 5, match: str = "recent") -> list:
    """The continuation of the most recent earlier occurrence of the context's longest matching suffix n-gram (with
    ``match="earliest"``: of the earliest, the engines' rule).

    ``context``: the token ids so far (prompt + generated): a list of ints (NumPy integers and integer 0-d tensors
    are accepted too) or a 1-d integer tensor. For n = ``max_ngram``, ``max_ngram`` − 1,
    …, 1: take the last n tokens of ``context`` and look for the same n tokens starting at an earlier index
    ``i`` (``i < len(context) − n``, so the suffix never matches itself), scanning from the most recent such
    index backwards (``match="earliest"``: from index 0 forwards, as transformers and vLLM do). The first hit
    returns ``context[i + n : i + n + n_draft]`` — between 1 and ``n_draft``
    tokens (fewer when the hit is close to the end of the context). Occurrences may overlap the suffix:
    in ``[7, 7, 7]`` the bigram ``[7, 7]`` also starts at index 0, so the proposal is ``[7]``. Sizes n longer than
    ``len(context) − 1`` are skipped (there is no earlier index left). No hit at any n → ``[]``.

    Returns list[int] (plain Python ints) of length 0..``n_draft``. Raises ``ValueError`` if ``max_ngram`` or
    ``n_draft`` is not an integer >= 1, ``match`` is not one of :data:`MATCH_RULES`, or ``context`` is not a sequence
    of integer token ids (a string is text, not token ids).
    """
    max_ngram = _check_positive("max_ngram", max_ngram)
    n_draft = _check_positive("n_draft", n_draft)
    earliest = _check_match(match) == "earliest"
    tokens = _token_ids(context)
    length = len(tokens)
    for n in range(min(max_ngram, length - 1), 0, -1):
        suffix = tokens[length - n:]
        first = suffix[0]
        # i = length - n is the suffix itself, never a match
        starts = range(length - n) if earliest else range(length - n - 1, -1, -1)
        for i in starts:
            if tokens[i] == first and tokens[i:i + n] == suffix:
                return tokens[i + n:i + n + n_draft]
    return []


class PromptLookupDrafter:
    """Propose up to ``n_draft`` tokens copied from the prompt / earlier output (:func:`ngram_lookup`).

    ``PromptLookupDrafter(max_ngram=3, n_draft=5)``: match the last ``max_ngram`` … 1 tokens and continue their most
    recent earlier occurrence (``match="earliest"``: the earliest, the rule of transformers and vLLM; transformers'
    own ``prompt_lookup_num_tokens=5`` looks up as ``PromptLookupDrafter(2, 5, match="earliest")``, and also cuts a
    proposal at its first end-of-sequence token, which this drafter, knowing no EOS, leaves to verification). Each
    proposal costs
    no draft forward pass (``Draft.calls == 0``) and is deterministic (``Draft.probs is None``, verified as
    one-hot). When nothing matches, the proposal is empty and the step is a plain autoregressive step.

    The drafter keeps no state between steps (each proposal looks at ``request.tokens``, the committed sequence),
    so nothing can leak from one generation to the next. Raises ``ValueError`` for ``max_ngram`` or ``n_draft``
    below 1 or a ``match`` not in :data:`MATCH_RULES`.
    """

    def __init__(self, max_ngram: int = 3, n_draft: int = 5, match: str = "recent"):
        self.max_ngram = _check_positive("max_ngram", max_ngram)
        self.n_draft = _check_positive("n_draft", n_draft)
        self.match = _check_match(match)

    def reset(self, prompt_ids) -> None:
        """Nothing to prepare: the lookup reads the committed tokens at each step. ``prompt_ids`` are still checked
        as every drafter checks them: ``TypeError`` naming it for text, None or ids that are not integers,
        ``ValueError`` for a negative id (the lookup knows no vocabulary, so ``>= 0`` is all it can check)."""
        check_unbounded_ids("prompt_ids", prompt_ids)

    def propose(self, request: DraftRequest) -> Draft:
        """Up to ``min(n_draft, request.max_tokens)`` tokens from :func:`ngram_lookup` on the committed tokens;
        deterministic (``probs`` None, verified as one-hot), no draft forward (``calls`` 0)."""
        check_request(request)
        n = min(self.n_draft, request.max_tokens)
        if n <= 0:
            return Draft()
        return Draft(ngram_lookup(request.tokens, self.max_ngram, n, self.match), None, calls=0)

    def update(self, num_accepted: int, next_token: int) -> None:
        """Nothing to roll back."""

    def __repr__(self) -> str:
        return f"PromptLookupDrafter(max_ngram={self.max_ngram}, n_draft={self.n_draft}, match={self.match!r})"
