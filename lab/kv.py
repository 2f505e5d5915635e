"""KV-cache helpers over transformers caches: how long a cache is, rolling it back after a rejection, and a
teaching scratch buffer that holds draft entries apart until the accepted ones are moved into the cache (lesson 07).

A speculative step appends the drafted tokens' keys and values to the target's cache while verifying them; the
rejected ones must leave again, or the next forward would attend to tokens that were never committed.
"""
from __future__ import annotations

import torch

from lab.validation import check_int, check_token_ids, check_unbounded_ids, is_integer  # is_integer: never bools

__all__ = ["cache_length", "rollback", "keep_positions", "ScratchKVCache", "two_cache_greedy", "next_position",
           "draft_keep_length", "emitted_tokens"]


def cache_length(cache) -> int:
    """Number of token positions the cache holds (0 for an empty cache). Raises ``TypeError`` for anything that is
    not a transformers cache (``None``, a legacy tuple of ``(key, value)`` pairs)."""
    if not callable(getattr(cache, "get_seq_length", None)):
        raise TypeError(f"cache must be a transformers cache (e.g. DynamicCache, with get_seq_length and crop), "
                        f"got {type(cache).__name__}")
    return int(cache.get_seq_length())


def rollback(cache, length: int):
    """Keep the first ``length`` positions of ``cache`` (in place) and return it.

    Uses the transformers cache API (``crop``). Since transformers 5.18 ``crop`` takes only a negative count of
    tokens to remove (a positive value raises; up to 5.17 it was read, with a deprecation warning, as the length to
    keep, as in 4.x), and ``crop(0)`` in 4.x empties the cache; passing the negative count only when something must
    go works with all of them (checked on 5.25; ``cache_utils.py``, ``DynamicLayer.crop``).

    ``length`` may be a Python or NumPy integer or an integer 0-d tensor. Raises ``ValueError`` if it is not an
    integer, is negative or is longer than the cache, ``TypeError`` if ``cache`` is not a transformers cache. Runs
    every decoding step, so the checks are kept cheap.
    """
    current = cache_length(cache)
    if type(length) is not int and is_integer(length):
        length = int(length)
    if type(length) is not int or not 0 <= length <= current:
        raise ValueError(f"length must be an integer in [0, {current}] (the cache holds {current} positions), "
                         f"got {length!r}")
    if length < current:
        cache.crop(length - current)
    return cache


def keep_positions(cache, start: int, keep) -> object:
    """Keep the first ``start`` positions of ``cache`` plus the positions ``start + k`` for ``k`` in ``keep``
    (increasing), moved down to ``start, start + 1, ...``; drop everything else. In place; returns the cache.

    Keys are stored after rotary position encoding, so an entry is valid only at the position it was encoded for;
    moving it is safe exactly when it lands on that position. After a token tree is verified (lesson 10) the cache
    holds every node in listed order, but only the accepted path is committed. The path's node of depth d was
    encoded at position ``prefix + d - 1`` (:mod:`lab.trees`), which is exactly the slot it moves to, so its keys
    stay valid. transformers has ``crop`` for a suffix but no call that drops positions in the middle, so this
    gathers each layer's kept keys and values into the slots after ``start`` and crops the rest (work in the kept
    entries, not the context); tests show the logits after it equal a fresh forward. When ``keep`` is
    ``0, 1, ..., k-1`` it is :func:`rollback` (``crop``).

    ``start`` and the offsets may be Python or NumPy integers or integer 0-d tensors; ``keep`` may be any iterable
    of them or a 1-d integer tensor. Raises ``ValueError`` if ``start`` is outside the cache or ``keep`` is not
    increasing integer offsets inside it, and ``TypeError`` when ``keep`` is not a sequence at all (None) or
    entries must move but the cache has no per-layer storage (``cache.layers``, as a transformers ``DynamicCache`` has).
    """
    current = cache_length(cache)
    if isinstance(keep, torch.Tensor) and keep.dim() == 1 and not keep.is_floating_point() and keep.dtype != torch.bool:
        keep = keep.tolist()
    else:
        try:
            keep = list(keep)
        except TypeError:  # None: "'NoneType' object is not iterable" named no argument
            raise TypeError(f"keep must be increasing integer offsets (a list or a 1-d integer tensor), got "
                            f"{type(keep).__name__}") from None
    if not all(type(k) is int for k in keep):  # fast path: plain ints
        if not all(is_integer(k) for k in keep):
            raise ValueError(f"keep must hold integer offsets, got {keep}")
        keep = [int(k) for k in keep]
    if type(start) is not int and is_integer(start):
        start = int(start)
    if type(start) is not int or not 0 <= start <= current:
        raise ValueError(f"start must be an integer in [0, {current}], got {start!r}")
    if any(b <= a for a, b in zip(keep, keep[1:])) or (keep and not 0 <= keep[0] <= keep[-1] < current - start):
        raise ValueError(f"keep must be increasing offsets in [0, {current - start}), got {keep}")
    if keep == list(range(len(keep))):
        return rollback(cache, start + len(keep))
    # move only the kept entries (a gather copies them first, so source and target slots may overlap), then crop:
    # rebuilding each layer over the whole context cost 3.8 ms a step on the real pair (300 cached positions)
    index = {}
    with torch.inference_mode():  # lab.models.forward fills caches with inference tensors
        for layer in _layers(cache):
            device = layer.keys.device
            if device not in index:
                index[device] = torch.tensor([start + k for k in keep], device=device)
            for name in ("keys", "values"):
                stored = getattr(layer, name)
                stored[..., start:start + len(keep), :] = stored.index_select(-2, index[device])
    return rollback(cache, start + len(keep))


def _layers(cache) -> list:
    """The per-layer key/value holders of a transformers cache (``cache.layers`` in transformers 5.x)."""
    layers = getattr(cache, "layers", None)
    if layers is None:
        raise TypeError(f"{type(cache).__name__} has no per-layer key/value storage (`.layers`); "
                        "ScratchKVCache needs a transformers DynamicCache")
    return list(layers)


class ScratchKVCache:
    """A teaching KV cache in two parts: committed entries, and a scratch buffer that drafts are written to first.

    This is the design seed lesson 000 describes: drafted entries are kept apart and join the cache only once
    accepted, which the seed says vLLM and TensorRT-LLM's LookaheadDecoder do. The engine code read for lesson 07
    gets the same effect otherwise: vLLM writes the drafts' entries into the request's own cache slots and, after a
    rejection, simply does not count the rejected slots as computed, so the next step overwrites them (a rollback by
    length, like :func:`rollback`); TensorRT-LLM's tree methods copy the accepted path's entries into place after
    verification (like :func:`keep_positions`). This class keeps the two parts apart over a transformers
    ``DynamicCache`` so each stage can be inspected.

    - ``append(tokens)``: forward ``tokens`` and commit their entries at once (the prefill, or already verified
      tokens). Returns logits ``[n, V]`` float32.
    - ``write(tokens)``: forward ``tokens`` after the committed entries *and* the scratch entries already written,
      and keep their keys/values in scratch. Returns logits ``[n, V]``. The committed cache is left exactly as it
      was (``committed_length`` does not change).
    - ``commit(count)``: move the first ``count`` scratch entries to the committed cache and discard the rest
      (``commit(0)`` discards everything). ``discard()`` is ``commit(0)``.

    Keys and values are stored after rotary position encoding, so a scratch entry is valid only at the position it
    was encoded for. A chain's accepted drafts are the first entries of the buffer and were encoded at exactly the
    positions they are committed to, so ``commit`` keeps a prefix and never reorders; a tree's accepted path is
    scattered through the buffer and needs :func:`keep_positions` (lesson 10).
    ``tokens`` / ``committed_tokens`` / ``scratch_tokens`` record which token ids the entries belong to.

    Raises ``TypeError`` for a ``model`` that is not a transformers model (None, a pair), for tokens that are not
    integer ids (text, floats) and ``ValueError`` for an empty token
    list, ids outside the vocabulary, a block past the model's context (see :func:`lab.models.forward`) or a
    ``count`` outside ``[0, scratch_length]``.
    """

    def __init__(self, model, cache=None):
        from lab.models import check_model, new_cache

        check_model("ScratchKVCache's model", model, runs=True)  # None failed only at the first append
        self.model = model
        self.cache = cache if cache is not None else new_cache()
        self.committed_tokens: list = []
        self.scratch_tokens: list = []
        self._scratch: list = []  # per layer: (keys, values), each [batch, heads, scratch_length, head_dim]

    @property
    def committed_length(self) -> int:
        """Positions held in the committed cache."""
        return cache_length(self.cache)

    @property
    def scratch_length(self) -> int:
        """Positions waiting in the scratch buffer."""
        return len(self.scratch_tokens)

    def _tokens(self, tokens, name: str = "tokens") -> list:
        return check_token_ids(name, tokens, hint="; encode text first: pair.encode(text)")

    def append(self, tokens):
        """Forward ``tokens`` straight into the committed cache (no scratch); returns logits ``[n, V]``.

        Raises ``ValueError`` if scratch entries are pending (commit or discard them first): committed entries
        must stay a contiguous prefix of the sequence."""
        from lab.models import forward

        tokens = self._tokens(tokens)
        if self.scratch_tokens:
            raise ValueError(f"{self.scratch_length} scratch entries are pending; call commit(count) or discard() "
                             "before appending committed tokens")
        logits = forward(self.model, tokens, self.cache)
        self.committed_tokens += tokens
        return logits

    def write(self, tokens):
        """Forward ``tokens`` after committed + scratch entries; their keys/values go to scratch. Logits ``[n, V]``.
        Raises ``ValueError`` on an empty cache (prefill first)."""
        from lab.models import forward

        tokens = self._tokens(tokens)
        committed = self.committed_length
        if committed == 0 and not self.scratch_tokens:
            raise ValueError("the cache is empty: append (prefill) at least one committed token before writing drafts")
        layers = _layers(self.cache)
        for layer, (keys, values) in zip(layers, self._scratch):  # lay the scratch entries on for this forward
            layer.keys = torch.cat([layer.keys, keys], dim=-2)
            layer.values = torch.cat([layer.values, values], dim=-2)
        try:
            logits = forward(self.model, tokens, self.cache)
        finally:
            layers = _layers(self.cache)
            self._scratch = [(layer.keys[..., committed:, :], layer.values[..., committed:, :]) for layer in layers]
            for layer in layers:  # and take them off again: the committed cache only ever holds committed tokens
                layer.keys = layer.keys[..., :committed, :]
                layer.values = layer.values[..., :committed, :]
        self.scratch_tokens += tokens
        return logits

    def commit(self, count: int) -> None:
        """Keep the first ``count`` scratch entries (append them to the committed cache); discard the rest.

        ``count`` may be a Python or NumPy integer or an integer 0-d tensor. Raises ``ValueError`` for anything
        else or a count outside ``[0, scratch_length]``."""
        if type(count) is not int and is_integer(count):
            count = int(count)
        if type(count) is not int or not 0 <= count <= self.scratch_length:
            raise ValueError(f"count must be an integer in [0, {self.scratch_length}] (the scratch entries "
                             f"pending), got {count!r}")
        if count:
            for layer, (keys, values) in zip(_layers(self.cache), self._scratch):
                layer.keys = torch.cat([layer.keys, keys[..., :count, :]], dim=-2)
                layer.values = torch.cat([layer.values, values[..., :count, :]], dim=-2)
            self.committed_tokens += self.scratch_tokens[:count]
        self.scratch_tokens = []
        self._scratch = []

    def discard(self) -> None:
        """Drop every scratch entry (a rejection of the whole block)."""
        self.commit(0)

    def slots(self) -> list:
        """What each cache slot holds, in order: ``[(token_id, "committed" | "scratch"), ...]``."""
        return ([(t, "committed") for t in self.committed_tokens] + [(t, "scratch") for t in self.scratch_tokens])

    def __repr__(self) -> str:
        return f"ScratchKVCache(committed={self.committed_length}, scratch={self.scratch_length})"


# --------------------------------------------------------------------------------------------------------------
# A two-cache greedy speculative loop with its bookkeeping spelled out (lesson 07's find-the-bug exercises)

def next_position(position: int, num_accepted: int) -> int:
    """Position of the newest committed token after a step that accepted ``num_accepted`` drafts: the step commits
    ``num_accepted`` drafts plus the target's own token, so positions advance by ``num_accepted + 1``. Both are
    integers >= 0; ``ValueError`` naming the argument otherwise."""
    return check_int("position", position, 0) + check_int("num_accepted", num_accepted, 0) + 1


def draft_keep_length(held: int, num_accepted: int, n_draft: int) -> int:
    """How many entries the draft's cache keeps after verification.

    While drafting ``n_draft`` tokens the draft fed the pending token(s) and every draft but the last (the last
    one's logits were never needed), so it ``held`` entries ending in ``drafts[n_draft - 2]``. The accepted
    drafts stay; the ``n_draft - 1 - num_accepted`` rejected ones that were fed must go. After a full acceptance
    nothing goes, and the last draft still has to be fed next time (with the target's bonus token).

    ``n_draft`` >= 1, ``num_accepted`` in ``[0, n_draft]``, ``held`` >= the ``n_draft - 1`` drafts it was fed;
    ``ValueError`` naming the argument otherwise."""
    n_draft = check_int("n_draft", n_draft, 1)
    num_accepted = check_int("num_accepted", num_accepted, 0, n_draft)
    held = check_int("held", held, n_draft - 1)
    return held - max(0, n_draft - 1 - num_accepted)


def emitted_tokens(drafts: list, num_accepted: int, next_token: int) -> list:
    """The tokens a step adds to the output: the accepted drafts, then the target's own token.

    ``drafts``: the step's drafted ids; ``num_accepted``: how many leading drafts the target accepted, an integer
    in ``[0, len(drafts)]``; ``next_token``: the target's own token id (an integer >= 0). Raises ``ValueError``
    naming the argument otherwise (a negative count would silently drop drafts from the end), ``TypeError`` naming
    ``drafts`` when they are not token ids."""
    drafts = check_unbounded_ids("drafts", drafts)
    num_accepted = check_int("num_accepted", num_accepted, 0)
    if num_accepted > len(drafts):
        raise ValueError(f"num_accepted must be an integer in [0, {len(drafts)}] (the number of drafts), "
                         f"got {num_accepted}")
    return drafts[:num_accepted] + [check_int("next_token", next_token, 0)]


def two_cache_greedy(target, draft_model, prompt_ids, max_new_tokens: int, n_draft: int = 4, *,
                     advance=next_position, draft_keep=draft_keep_length, emit=emitted_tokens) -> dict:
    """Greedy speculative decoding with both KV caches and explicit position ids, every rule pluggable.

    A compact version of :func:`lab.decode.generate` + :class:`lab.drafters.DraftModelDrafter` for reading and
    breaking (lesson 07): ``advance(position, num_accepted)`` moves the position of the last committed token,
    ``draft_keep(held, num_accepted, n_draft)`` says how many draft-cache entries survive verification, and
    ``emit(drafts, num_accepted, next_token)`` the tokens added to the output. The target's position ids come from
    ``position`` (not from its cache length), so a wrong ``advance`` shows up as drifting text.

    Returns ``{"tokens": list[int] (exactly max_new_tokens), "emitted": every token the steps emitted (the last
    step may overshoot max_new_tokens), "target_calls": int, "accepted": int, "drafted": int, "draft_cache": the
    draft's cache, "draft_pending": the committed tokens it has not been fed yet}``.
    Raises ``ValueError`` for an empty prompt or ``n_draft`` / ``max_new_tokens`` < 1 (and, from
    :func:`lab.models.forward`, for positions past the context), ``TypeError`` for text or float ids, and
    ``ValueError`` naming the rule when ``emit`` returns no tokens (or something that is not a list of ids),
    ``advance`` no whole position >= 0, or ``draft_keep`` no whole count in 0..held.
    """
    from lab.models import forward, new_cache

    prompt = check_token_ids("prompt_ids", prompt_ids, hint="; encode text first: pair.encode(text)")
    n_draft, max_new_tokens = check_int("n_draft", n_draft, 1), check_int("max_new_tokens", max_new_tokens, 1)
    target_cache, draft_cache = new_cache(), new_cache()
    if len(prompt) > 1:  # both caches hold every committed token but the last
        forward(target, prompt[:-1], target_cache)
        forward(draft_model, prompt[:-1], draft_cache)
    position = len(prompt) - 1          # where the last committed token sits
    last, pending = prompt[-1], prompt[-1:]
    out, calls, accepted_total = [], 0, 0
    while len(out) < max_new_tokens:
        # 1. draft: feed the pending tokens, then each new draft (all but the last)
        drafts, feed = [], pending
        for i in range(n_draft):
            drafts.append(int(forward(draft_model, feed, draft_cache, logits_to_keep=1)[-1].argmax()))
            feed = [drafts[-1]]
        held = cache_length(draft_cache)
        # 2. verify: one target forward over [last] + drafts at explicit positions
        base = cache_length(target_cache)
        positions = list(range(position, position + n_draft + 1))
        argmax = forward(target, [last] + drafts, target_cache, position_ids=positions).argmax(-1).tolist()
        calls += 1
        k = 0
        while k < n_draft and drafts[k] == argmax[k]:
            k += 1
        next_token = argmax[k]
        accepted_total += k
        # 3. roll both caches back to the committed tokens
        rollback(target_cache, base + 1 + k)
        rollback(draft_cache, check_int("draft_keep(held, num_accepted, n_draft)", draft_keep(held, k, n_draft),
                                        0, held))
        pending = [drafts[-1], next_token] if k == n_draft else [next_token]
        # 4. emit, and move to the new last token (a rule that emits nothing would loop for ever)
        emitted = emit(drafts, k, next_token)
        if not isinstance(emitted, (list, tuple)) or not emitted:
            raise ValueError(f"emit(drafts, num_accepted, next_token) must return a non-empty list of token ids (a "
                             f"step always emits at least the target's token); got {emitted!r}")
        out += [check_int("a token emit returned", t, 0) for t in emitted]
        position = check_int("advance(position, num_accepted)", advance(position, k), 0)
        last = next_token
    return {"tokens": out[:max_new_tokens], "emitted": out, "target_calls": calls, "accepted": accepted_total,
            "drafted": calls * n_draft, "draft_cache": draft_cache, "draft_pending": pending}
