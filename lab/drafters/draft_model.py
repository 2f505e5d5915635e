"""The classic drafter: a small language model of the same family proposes tokens autoregressively.

Source: Leviathan et al. 2023 (the approximation model M_q) and Chen et al. 2023 (the draft model p); seed lesson
000. The reduced draft vocabulary (``draft_vocab``) is FR-Spec's (Zhao et al. 2025, §3). The adaptive draft length
(:func:`next_n_draft`) is transformers' ``num_assistant_tokens_schedule="heuristic"``
(``transformers/generation/candidate_generator.py``, ``AssistedCandidateGenerator.update_candidate_strategy``,
checked on transformers 5.24); the confidence stop is transformers' ``assistant_confidence_threshold``
(``generation/stopping_criteria.py``, ``ConfidenceCriteria``, checked on transformers 5.25).
"""
from __future__ import annotations

from numbers import Real

import numpy as np
import torch

from lab.drafters.base import Draft, DraftRequest, check_request, draft_token
from lab.drafters.draft_vocab import check_draft_vocab, full_vocab_logits
from lab.kv import cache_length, rollback
from lab.models import cache_kwarg, context_limit, forward, new_cache, vocab_size
from lab.validation import check_int, check_token_ids

__all__ = ["DraftModelDrafter", "next_n_draft"]


def next_n_draft(n_draft: int, num_accepted: int, n_drafted: int, max_n_draft: int | None = None) -> int:
    """The next step's draft length under transformers' "heuristic" schedule.

    If the target accepted every drafted token (``num_accepted == n_drafted``) the draft length grows by 2,
    otherwise it shrinks by 1, never below 1; ``max_n_draft`` (our addition; transformers has no cap) bounds the
    growth. ``n_drafted`` is what was actually drafted, which can be less than ``n_draft`` when the step was
    capped by ``max_new_tokens`` (transformers compares with the candidates it actually produced, too). The
    source: ``AssistedCandidateGenerator.update_candidate_strategy`` in transformers'
    ``generation/candidate_generator.py`` (``num_assistant_tokens += 2`` / ``max(1, num_assistant_tokens - 1)``).

    Raises ``ValueError`` naming the argument for ``n_draft`` < 1, a negative ``n_drafted``, ``num_accepted``
    outside ``[0, n_drafted]`` or ``max_n_draft`` < 1.
    """
    check_int("n_draft", n_draft, 1)  # any numbers.Integral (int, numpy.int64, ...) but bool
    check_int("n_drafted", n_drafted, 0)
    check_int("num_accepted", num_accepted, 0)
    if num_accepted > n_drafted:
        raise ValueError(f"num_accepted ({num_accepted}) cannot exceed n_drafted ({n_drafted})")
    if max_n_draft is not None:
        check_int("max_n_draft", max_n_draft, 1)
    n = n_draft + 2 if num_accepted == n_drafted else max(1, n_draft - 1)
    return min(n, max_n_draft) if max_n_draft is not None else n


class DraftModelDrafter:
    """Draft ``n_draft`` tokens per step with ``draft_model`` (a transformers causal LM), keeping its KV cache.

    The draft cache holds every committed token except the newest ones still to be fed (``pending``): after a
    rejection it is rolled back to the accepted prefix; after a full acceptance it lacks the last draft, so the
    next proposal feeds that token and the target's bonus token together (the catch-up).

    At temperature 0 the drafts are the draft's argmax and ``Draft.probs`` is None (one-hot); otherwise tokens
    are sampled from the same processed distribution (temperature, top-k, top-p) the target uses, and the
    probabilities ``[n, V]`` float32 (CPU) go to verification.

    ``adaptive=True`` changes the draft length N after every step as transformers' assisted generation does with
    ``num_assistant_tokens_schedule="heuristic"`` (:func:`next_n_draft`): +2 after a step whose drafts were all
    accepted, −1 (never below 1) otherwise, and at most ``max_n_draft``. ``n_draft`` is the starting N and
    ``self.n_draft`` the current one; :meth:`reset` restores the start, so each generation begins from the same N
    (transformers' "heuristic_transient"; its plain "heuristic" carries N over between ``generate`` calls).
    ``n_draft_history`` lists the N used at each step of the current generation. With ``adaptive=False`` (the
    default) N never changes. Greedy output is the target's either way: N only changes speed.

    ``confidence`` (a float in (0, 1), default None: off) stops a step's drafting early, as transformers'
    ``assistant_confidence_threshold`` does: after each drafted token, if the probability the draft gave it (the
    draft's softmax at T = 0, the processed distribution it was sampled from otherwise) is below ``confidence``,
    the step proposes what it has, that token included. N is then the most a step drafts (transformers' default is
    N = 20 with ``confidence=0.4``). A shorter proposal changes only speed: verification is the same.

    ``draft_vocab`` (default None: the draft scores its whole vocabulary) is a reduced draft vocabulary, LongTensor
    ``[V_d]`` of token ids (:mod:`lab.drafters.draft_vocab`; FR-Spec, Zhao et al. 2025, §3): each draft forward
    then applies only those rows of the draft's LM head to its last hidden state, and every other token gets
    probability 0, so it is never drafted (verification stays exact; the target reaches such tokens through the
    residual or the bonus token). With a 49k-token vocabulary and a 2-layer draft the head takes almost half of a
    forward's time (the real pair's draft on the course's CPU; with 8,192 rows the forward costs a third less,
    :func:`lab.bench.draft_step_ms`). Only for a Llama draft whose output layer is a plain ``nn.Linear`` without
    bias or hooks, whose logits are exactly its weight applied to the last layer's state; the rows are read when
    the drafter is built (change the draft's weights or dtype afterwards, and build a new drafter). With
    ``confidence``, the probability compared is the one over the draft vocabulary (renormalised there, so higher
    than the whole head's).

    ``n_draft`` and ``max_n_draft`` may be any ``numbers.Integral`` (``int``, ``numpy.int64``; not bool);
    ``adaptive`` must be a bool (``numpy.bool_`` too). Raises ``ValueError`` for ``n_draft`` < 1, ``max_n_draft`` <
    ``n_draft``, ``max_n_draft`` without ``adaptive``, a ``confidence`` outside (0, 1), or a ``draft_vocab`` that is
    malformed or given for a draft that is not a Llama; ``TypeError`` when ``draft_model`` is not a causal LM (a
    drafter or a ``ModelPair``, say) or ``adaptive`` is not a bool (``"no"`` would be truthy).
    """

    def __init__(self, draft_model, n_draft: int = 4, adaptive: bool = False, max_n_draft: int | None = None,
                 confidence: float | None = None, draft_vocab=None):
        if not callable(getattr(draft_model, "get_output_embeddings", None)):
            raise TypeError(f"draft_model must be a transformers causal LM (e.g. pair.draft), got "
                            f"{type(draft_model).__name__}")
        n_draft = check_int("n_draft", n_draft, 1)
        if not isinstance(adaptive, (bool, np.bool_)):
            raise TypeError(f"adaptive must be True or False, got {type(adaptive).__name__} {adaptive!r}")
        if max_n_draft is not None:
            if not adaptive:
                raise ValueError("max_n_draft only applies with adaptive=True")
            max_n_draft = check_int("max_n_draft (at least n_draft)", max_n_draft, n_draft)
        if confidence is not None:
            if isinstance(confidence, bool) or not isinstance(confidence, Real) or not 0 < confidence < 1:
                raise ValueError(f"confidence must be None or a probability in (0, 1), got {confidence!r}")
            confidence = float(confidence)
        self.confidence = confidence
        self.model = draft_model
        self.n_draft = n_draft
        self.initial_n_draft = n_draft
        self.adaptive = bool(adaptive)
        self.max_n_draft = max_n_draft
        self.n_draft_history: list[int] = []
        self.vocab_size = vocab_size(draft_model)
        self.context_limit = context_limit(draft_model)  # generate checks prompt + new tokens against it up front
        self.draft_vocab, self._head = None, None
        if draft_vocab is not None:
            head = draft_model.get_output_embeddings()
            model_type = getattr(draft_model.config, "model_type", None)
            plain = (type(head) is torch.nn.Linear and head.bias is None and not head._forward_hooks
                     and not head._forward_pre_hooks)
            if model_type != "llama" or not plain:
                raise ValueError(f"draft_vocab needs a Llama draft whose LM head is a plain nn.Linear without bias or "
                                 f"hooks (logits = its weight on the last layer's state), got model_type "
                                 f"{model_type!r} with a {type(head).__name__} head")
            self.draft_vocab = check_draft_vocab(draft_vocab, self.vocab_size).to(head.weight.device)
            self._head = head.weight.detach()[self.draft_vocab].contiguous()  # [V_d, D]: the rows it scores
            self._cache_kwarg = cache_kwarg(type(draft_model.get_decoder()))
        self._cache = None
        self._pending: list[int] = []
        self._last: list[int] = []
        self._base = 0

    def reset(self, prompt_ids) -> None:
        """Prefill the draft cache with every token of ``prompt_ids`` but the last, which the first proposal feeds
        (the decode loop resets with the prompt and the prefill's first new token: the draft reads the whole prompt
        here). Raises ``TypeError`` / ``ValueError`` naming ``prompt_ids`` when they are not token ids of the draft's
        vocabulary (a list, or a tensor ``[L]`` / ``[1, L]``), before anything changes."""
        prompt_ids = check_token_ids("prompt_ids", prompt_ids, self.vocab_size)
        self._cache = new_cache()
        if len(prompt_ids) > 1:
            forward(self.model, prompt_ids[:-1], self._cache, logits_to_keep=1)
        self._pending = prompt_ids[-1:]
        self._last = []
        self.n_draft = self.initial_n_draft
        self.n_draft_history = []

    def propose(self, request: DraftRequest) -> Draft:
        """Run the draft model ``min(n_draft, request.max_tokens)`` times (fewer when a token falls below
        ``confidence``), one token per forward on its KV cache: argmax at T = 0 (``probs`` None, verified as
        one-hot), else a sample with its float32 ``[n, V]`` rows. The draft reads its own KV cache, not
        ``request.tokens``; raises ``ValueError`` when ``request.tokens`` is not as long as the sequence that cache
        and :meth:`update` have followed (a missed ``update``, or a request for another sequence), ``RuntimeError``
        before :meth:`reset`."""
        check_request(request)
        if self._cache is None:
            raise RuntimeError("call reset(prompt_ids) before propose()")
        n = min(self.n_draft, request.max_tokens)
        base = cache_length(self._cache) + len(self._pending)
        if len(request.tokens) != base:  # the draft follows its own cache; a request it has not seen is refused
            raise ValueError(f"request.tokens holds {len(request.tokens)} committed tokens, but this drafter has "
                             f"seen {base} (reset(prompt_ids), then update(num_accepted, next_token) after every "
                             "step): it drafts from its KV cache, so call update after each step and reset for a "
                             "new sequence")
        self._base = base
        self._last = []
        if n <= 0:
            return Draft()
        self.n_draft_history.append(self.n_draft)
        greedy = request.temperature == 0
        rows = []
        feed = self._pending
        for _ in range(n):
            logits = self.next_logits(feed)
            token, probs = draft_token(logits, request)
            if probs is not None:
                rows.append(probs)
            self._last.append(token)
            feed = [token]
            if self.confidence is not None:
                p = torch.softmax(logits.float(), -1)[token] if probs is None else probs[token]
                if p.item() < self.confidence:
                    break
        return Draft(list(self._last), None if greedy else torch.stack(rows), calls=len(self._last))

    def next_logits(self, feed) -> torch.Tensor:
        """One draft forward: the draft's next-token logits ``[V]`` float32 after feeding ``feed`` (token ids) on its
        KV cache, which grows by ``len(feed)`` (what :meth:`propose` runs per drafted token). With a draft vocabulary
        only its rows of the LM head are computed and every other logit is ``-inf``. Raises ``ValueError`` for ids
        outside the vocabulary or a feed past the draft's context, as :func:`lab.models.forward` does."""
        if self._head is None:
            return forward(self.model, feed, self._cache, logits_to_keep=1)[-1]
        ids = torch.as_tensor(feed, dtype=torch.long).view(1, -1)
        if ids.numel() == 0 or int(ids.min()) < 0 or int(ids.max()) >= self.vocab_size:
            raise ValueError(f"feed must be 1 or more token ids in [0, {self.vocab_size}), got {ids.view(-1).tolist()}")
        end = cache_length(self._cache) + ids.size(1)
        if self.context_limit is not None and end > self.context_limit:
            raise ValueError(f"this forward would use position {end - 1}, past the draft's context limit of "
                             f"{self.context_limit} positions")
        ids = ids.to(self.model.device)
        decoder = self.model.get_decoder()
        with torch.inference_mode():
            hidden = decoder(input_ids=ids, use_cache=True, **{self._cache_kwarg: self._cache}).last_hidden_state
            reduced = hidden[0, -1] @ self._head.T
        return full_vocab_logits(reduced.float(), self.draft_vocab, self.vocab_size)

    def kv_length(self) -> int:
        """Positions in the draft's KV cache (0 before ``reset``)."""
        return 0 if self._cache is None else cache_length(self._cache)

    def update(self, num_accepted: int, next_token: int) -> None:
        """Roll the draft's KV cache back to the committed prefix plus the ``num_accepted`` accepted drafts
        (:func:`lab.kv.rollback`), queue what the cache has not seen (``next_token``, and after a full acceptance the
        last draft too) for the next step, and, when adaptive, choose the next N (:func:`next_n_draft`). Raises
        ``ValueError`` for ``num_accepted`` outside ``[0, drafted tokens]`` (−1 rolled back a committed entry) or a
        ``next_token`` that is not an integer >= 0 (the next forward checks it against the draft's vocabulary)."""
        drafted = len(self._last)
        num_accepted = check_int(f"num_accepted (the last draft holds {drafted} tokens)", num_accepted, 0, drafted)
        next_token = check_int("next_token", next_token, 0)
        if self.adaptive and drafted:  # a step that drafted nothing says nothing about N
            self.n_draft = next_n_draft(self.n_draft, num_accepted, drafted, self.max_n_draft)
        if num_accepted < drafted:
            # Keep the committed prefix plus the accepted drafts; the cache had fed drafts[:-1] too.
            rollback(self._cache, self._base + num_accepted)
            self._pending = [next_token]
        elif drafted:
            self._pending = [self._last[-1], next_token]  # catch up on the last draft, never fed
        else:
            self._pending = self._pending + [next_token]
