"""The autoregressive baseline and the one speculative decoding loop every drafter shares.

Each step: the drafter proposes → one target forward over [last committed token] + drafts → verification
(greedy match or rejection sampling) → commit the accepted drafts + one target token → roll the target's KV cache
back to the committed sequence → ``drafter.update`` → a :class:`~lab.trace.StepRecord` to ``on_step``.

With no drafter every step is a plain autoregressive step (one token per target call), through the same code.
Sources: Leviathan et al. 2023, Algorithm 1; Chen et al. 2023, Algorithm 2; seed lesson 000.
"""
from __future__ import annotations

import time

import torch

from lab.drafters.base import Draft, DraftRequest
from lab.kv import cache_length, rollback
from lab.metrics import summarize_steps
from lab.models import context_limit, forward, new_cache, vocab_size
from lab.sampling import check_sampling_args, probs_from_logits
from lab.trace import Generation, OnStep, StepRecord
from lab.verify import verify_greedy, verify_sampled

__all__ = ["generate", "autoregressive"]


def _prompt_list(prompt_ids, vocab: int) -> list[int]:
    if isinstance(prompt_ids, torch.Tensor):
        if prompt_ids.dim() == 2 and prompt_ids.size(0) == 1:
            prompt_ids = prompt_ids[0]
        if prompt_ids.dim() != 1:
            raise ValueError(f"prompt_ids must be a list of ids or a tensor [L] or [1, L], got shape "
                             f"{tuple(prompt_ids.shape)}")
        prompt_ids = prompt_ids.tolist()
    ids = [int(t) for t in prompt_ids]
    if not ids:
        raise ValueError("prompt_ids must hold at least one token")
    bad = [t for t in ids if not 0 <= t < vocab]
    if bad:
        raise ValueError(f"prompt_ids must be token ids in [0, {vocab}); got {bad[:5]}")
    return ids


def generate(target, prompt_ids, *, drafter=None, max_new_tokens: int, temperature: float = 0.0,
             top_k: int | None = None, top_p: float | None = None, eos_token_id: int | None = None,
             seed: int | None = None, on_step: OnStep | None = None, record_probs: bool = False) -> Generation:
    """Generate up to ``max_new_tokens`` tokens after ``prompt_ids`` with ``target``, speculatively if ``drafter``.

    - ``target``: a transformers causal LM in eval mode. ``prompt_ids``: list[int] or LongTensor ``[L]``/``[1, L]``.
    - ``drafter``: any :class:`lab.drafters.Drafter` (None = autoregressive decoding).
    - ``temperature`` 0 is greedy (output identical, token for token, to greedy autoregressive decoding);
      otherwise tokens are sampled from the target's distribution after temperature / top-k / top-p, exactly
      (the draft only changes speed).
    - Generation stops after ``eos_token_id`` (included) or exactly ``max_new_tokens`` tokens.
    - ``seed`` makes sampling reproducible (a CPU ``torch.Generator``); ``on_step`` receives one
      :class:`~lab.trace.StepRecord` per target call as it happens; ``record_probs`` stores per-position target
      and draft distributions in the records.

    Returns :class:`~lab.trace.Generation` with ``.tokens`` (new ids), ``.steps`` and ``.stats`` (see
    :func:`lab.metrics.summarize_steps`; times in ms, ``tokens_per_second`` over the whole call, prefill
    included, whose time is ``stats["prefill_ms"]``).

    Raises ``ValueError`` for max_new_tokens < 1, bad sampling arguments, token ids outside the vocabulary,
    a prompt + max_new_tokens longer than the target's context, or a drafter whose vocabulary differs.
    """
    if isinstance(max_new_tokens, bool) or not isinstance(max_new_tokens, int) or max_new_tokens < 1:
        raise ValueError(f"max_new_tokens must be an integer >= 1, got {max_new_tokens!r}")
    check_sampling_args(temperature, top_k, top_p)
    vocab = vocab_size(target)
    prompt = _prompt_list(prompt_ids, vocab)
    limit = context_limit(target)
    if limit is not None and len(prompt) + max_new_tokens > limit:
        raise ValueError(f"prompt ({len(prompt)} tokens) + max_new_tokens ({max_new_tokens}) exceeds the target's "
                         f"context of {limit} positions; shorten the prompt or lower max_new_tokens")
    if drafter is not None and getattr(drafter, "vocab_size", vocab) != vocab:
        raise ValueError(f"the drafter's vocabulary ({drafter.vocab_size}) differs from the target's ({vocab}): "
                         "target and draft must share a tokenizer")
    greedy = temperature == 0
    generator = torch.Generator().manual_seed(seed if seed is not None else torch.seed())

    start = time.perf_counter()
    cache = new_cache()
    if len(prompt) > 1:  # the cache holds every committed token but the last, which each step feeds first
        forward(target, prompt[:-1], cache, logits_to_keep=1)
    observe = kv_length = None
    if drafter is not None:
        drafter.reset(prompt)
        observe = getattr(drafter, "observe", None)      # optional: wants the step's logits (Lookahead)
        kv_length = getattr(drafter, "kv_length", None)  # optional: its own KV-cache length (for the KV viewer)
    prefill_ms = (time.perf_counter() - start) * 1000

    committed, new, steps = list(prompt), [], []
    last = prompt[-1]
    while len(new) < max_new_tokens:
        remaining = max_new_tokens - len(new)
        t0 = time.perf_counter()
        draft_kv = [kv_length()] if kv_length is not None else None
        if drafter is None:
            draft = Draft()
        else:
            draft = drafter.propose(DraftRequest(committed, remaining - 1, temperature, top_k, top_p, generator))
        if draft_kv is not None:
            draft_kv.append(kv_length())
        t1 = time.perf_counter()

        base = cache_length(cache)
        n = len(draft.tokens)
        if draft.extra_tokens:  # e.g. Lookahead's Jacobi window: more rows in the same target forward
            logits = forward(target, [last] + draft.tokens + draft.extra_tokens, cache,
                             **_branch_layout(base, n, draft))
        else:
            logits = forward(target, [last] + draft.tokens, cache)  # [n+1, V]: one target call verifies all drafts
        fed = logits.size(0)
        if observe is not None:
            observe(logits)
        logits = logits[: n + 1]
        if greedy:
            result = verify_greedy(logits.argmax(-1).tolist(), draft.tokens)
            target_probs = torch.softmax(logits, -1).cpu() if record_probs else None
        else:
            target_probs = probs_from_logits(logits, temperature, top_k, top_p).cpu()
            result = verify_sampled(target_probs, draft.tokens, draft.probs, generator)
        rollback(cache, base + 1 + result.num_accepted)  # drop the rejected drafts' keys and values
        if drafter is not None:
            drafter.update(result.num_accepted, result.next_token)
            if draft_kv is not None:
                draft_kv.append(kv_length())
        t2 = time.perf_counter()

        block = draft.tokens[: result.num_accepted] + [result.next_token]
        cut = min(len(block), remaining)
        if eos_token_id is not None and eos_token_id in block[:cut]:
            cut = block.index(eos_token_id) + 1
        emitted = block[:cut]
        record = StepRecord(
            index=len(steps), position=len(new), drafted=list(draft.tokens), num_accepted=result.num_accepted,
            emitted=emitted, last_kind=result.kind, truncated=cut < len(block),
            draft_ms=(t1 - t0) * 1000, verify_ms=(t2 - t1) * 1000, draft_calls=draft.calls,
            target_probs=target_probs if record_probs else None,
            draft_probs=(draft.probs if record_probs else None),
            target_tokens=fed, cache_before=base, draft_cache=tuple(draft_kv) if draft_kv is not None else None)
        steps.append(record)
        committed += emitted
        new += emitted
        last = result.next_token
        if on_step is not None:
            on_step(record)
        if cut < len(block) or (eos_token_id is not None and emitted[-1] == eos_token_id):
            break

    wall_ms = (time.perf_counter() - start) * 1000
    stats = summarize_steps(steps, len(new), wall_ms)
    stats["prefill_ms"] = prefill_ms
    return Generation(tokens=new, steps=steps, stats=stats)


def _branch_layout(base: int, n: int, draft: Draft) -> dict:
    """Attention mask ``[q, q]`` over the step's new tokens and their position ids, for ``[last] + drafts + extra``.

    ``[last] + drafts`` is causal at positions ``base .. base + n`` (the chain never sees the extra tokens); extra
    row i sits at ``base + extra_positions[i]`` and sees what ``draft.extra_mask[i]`` allows. Raises ``ValueError``
    if the drafter's mask or positions do not match its extra tokens."""
    extra = len(draft.extra_tokens)
    q = 1 + n + extra
    extra_mask = torch.as_tensor(draft.extra_mask, dtype=torch.bool) if draft.extra_mask is not None else None
    if extra_mask is None or tuple(extra_mask.shape) != (extra, q) or len(draft.extra_positions) != extra:
        raise ValueError(f"a draft with {extra} extra tokens needs extra_mask [{extra}, {q}] and {extra} "
                         "extra_positions")
    mask = torch.ones(q, q, dtype=torch.bool).tril()
    mask[1 + n:] = extra_mask
    positions = list(range(base, base + n + 1)) + [base + int(offset) for offset in draft.extra_positions]
    return {"attention_mask": mask, "position_ids": positions}


def autoregressive(target, prompt_ids, **kwargs) -> Generation:
    """Plain one-token-per-call decoding: :func:`generate` with no drafter (same arguments)."""
    return generate(target, prompt_ids, drafter=None, **kwargs)
