"""The classic drafter: a small language model of the same family proposes tokens autoregressively.

Source: Leviathan et al. 2023 and Chen et al. 2023 (the draft model M_q); seed lesson 000.
"""
from __future__ import annotations

import torch

from lab.drafters.base import Draft, DraftRequest
from lab.kv import cache_length, rollback
from lab.models import forward, new_cache, vocab_size
from lab.sampling import probs_from_logits

__all__ = ["DraftModelDrafter"]


class DraftModelDrafter:
    """Draft ``n_draft`` tokens per step with ``draft_model`` (a transformers causal LM), keeping its KV cache.

    The draft cache holds every committed token except the newest ones still to be fed (``pending``): after a
    rejection it is rolled back to the accepted prefix; after a full acceptance it lacks the last draft, so the
    next proposal feeds that token and the target's bonus token together (the catch-up).

    At temperature 0 the drafts are the draft's argmax and ``Draft.probs`` is None (one-hot); otherwise tokens
    are sampled from the same processed distribution (temperature, top-k, top-p) the target uses, and the
    probabilities ``[n, V]`` float32 (CPU) go to verification.

    Raises ``ValueError`` for ``n_draft`` < 1.
    """

    def __init__(self, draft_model, n_draft: int = 4):
        if isinstance(n_draft, bool) or not isinstance(n_draft, int) or n_draft < 1:
            raise ValueError(f"n_draft must be an integer >= 1, got {n_draft!r}")
        self.model = draft_model
        self.n_draft = n_draft
        self.vocab_size = vocab_size(draft_model)
        self._cache = None
        self._pending: list[int] = []
        self._last: list[int] = []
        self._base = 0

    def reset(self, prompt_ids) -> None:
        """Prefill the draft cache with all prompt tokens but the last (which the first proposal feeds)."""
        prompt_ids = list(prompt_ids)
        self._cache = new_cache()
        if len(prompt_ids) > 1:
            forward(self.model, prompt_ids[:-1], self._cache, logits_to_keep=1)
        self._pending = prompt_ids[-1:]
        self._last = []

    def propose(self, request: DraftRequest) -> Draft:
        if self._cache is None:
            raise RuntimeError("call reset(prompt_ids) before propose()")
        n = min(self.n_draft, request.max_tokens)
        self._base = cache_length(self._cache) + len(self._pending)
        self._last = []
        if n <= 0:
            return Draft()
        greedy = request.temperature == 0
        rows = []
        feed = self._pending
        for _ in range(n):
            logits = forward(self.model, feed, self._cache, logits_to_keep=1)[-1]
            if greedy:
                token = int(logits.argmax())
            else:
                probs = probs_from_logits(logits, request.temperature, request.top_k, request.top_p).cpu()
                token = int(torch.multinomial(probs, 1, generator=request.generator))
                rows.append(probs)
            self._last.append(token)
            feed = [token]
        return Draft(list(self._last), None if greedy else torch.stack(rows), calls=n)

    def kv_length(self) -> int:
        """Positions in the draft's KV cache (0 before ``reset``)."""
        return 0 if self._cache is None else cache_length(self._cache)

    def update(self, num_accepted: int, next_token: int) -> None:
        drafted = len(self._last)
        if num_accepted < drafted:
            # Keep the committed prefix plus the accepted drafts; the cache had fed drafts[:-1] too.
            rollback(self._cache, self._base + num_accepted)
            self._pending = [next_token]
        elif drafted:
            self._pending = [self._last[-1], next_token]  # catch up on the last draft, never fed
        else:
            self._pending = self._pending + [next_token]
