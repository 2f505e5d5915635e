"""Speculative decoding of a batch: B sequences share every target forward, each keeping its own acceptance.

One step drafts for every unfinished row, then one target forward over a ``[rows, W]`` block verifies every row's
``[last] + drafts`` at once (W: the longest row's block; shorter blocks are padded). Rows accept different numbers
of drafts, so after a few steps they sit at different lengths: each row keeps its own committed length, its own
position ids and, logically, its own KV cache, and a per-row attention mask over the shared cache slots says which
slots belong to it. This is how a serving engine batches speculation (vLLM's scheduler verifies every running
request's drafts in one forward with per-request block tables and positions); lesson 13 measures what it costs.

**The cache layout.** One transformers ``DynamicCache`` with batch dimension = rows still running. Row r's committed
entries are slots ``[0, length_r)``; slots from ``length_r`` to the cache's end hold nothing of row r's (padding, or
another row's longer history) and its mask hides them. A step appends the whole padded block at slots
``[S, S + W)``; after verification each row's kept entries (its last token and its accepted path) are *moved down*
to ``[length_r, length_r + kept)`` and the cache is cut to the longest row. We compact rather than leave rejected
slots masked forever because a masked-only cache grows by W slots per step for every row, and each later forward
attends over all of them: with N = 4 and 2 tokens per step that is 2.5 times the slots a row needs. The move is a
gather of at most W slots per row and layer, and the keys stay valid where they land: a key is stored after rotary
encoding with its own position, and the mask, not the slot, decides who sees it (:func:`lab.kv.keep_positions`
makes the same argument for one sequence). vLLM needs no move at all: it writes each request's drafts into that
request's own cache blocks and, after a rejection, counts the rejected slots as free, so the next step overwrites
them. A row that finishes (EOS or ``max_new_tokens``) leaves the batch at once: it drafts nothing more and costs the
next forwards nothing, as a finished request leaves an engine's running batch.

**Continuous batching.** With ``max_rows`` below the number of prompts, at most ``max_rows`` rows run at once and
the other prompts wait in order; whenever rows finish, the next waiting prompts take their places before the next
step (Orca: Yu et al. 2022, §3 "iteration-level scheduling"; vLLM's scheduler does the same each step). A newcomer's
prompt is prefilled in a forward of its own and its KV entries join the shared cache as new batch rows (zero-padded
to the cache's length, or the cache padded to theirs: the masks hide padding either way). Without it a batch steps
until its slowest row is done, and rows that accepted more drafts save no forwards, since nothing takes their place.

**Drafting.** Each row has its own drafter instance, called through the ordinary protocol
(:class:`lab.drafters.DraftRequest`, ``observe`` with the row's own :class:`~lab.drafters.base.TargetOutput`,
``update``), so every drafter works: chains, token trees (``parents``), Lookahead's extra tokens, Medusa and EAGLE
(their ``reset`` receives the row's prefill hidden states). The draft model therefore runs one row at a time here;
engines batch the draft too (vLLM runs one draft forward for every request's next draft token).

**Verification** is :func:`lab.decode.verify_block` per row, with the row's own ``torch.Generator`` seeded
``seed + r`` (:func:`row_seeds`): the drafter's draws and the verifier's come in the same order as in
:func:`lab.decode.generate`, so row r's tokens equal ``generate(..., seed=seed + r)`` wherever the batched forward's
float32 logits lead to the same draws (greedy: token for token). Every row's sampled tokens are distributed as the
target's.

Sources: Leviathan et al. 2023, Algorithm 1; vLLM's speculative decoding in the V1 engine (``vllm/v1/spec_decode``,
the rejection sampler over a batch of requests with ``num_draft_tokens`` per request); lesson 13.
"""
from __future__ import annotations

import dataclasses
import time

import torch

from lab.decode import (DecodeSettings, branch_layout, checked_draft, checked_settings, committed_block, hand_over,
                        prefill_record, step_record, verify_block)
from lab.drafters.base import Draft, DraftRequest
from lab.kv import cache_length
from lab.metrics import summarize_steps
from lab.models import cache_kwarg, layer_states, new_cache, synchronize
from lab.trace import Generation
from lab.validation import check_int, is_integer, plain_number

__all__ = ["BatchGeneration", "generate_batch", "row_seeds"]


@dataclasses.dataclass
class BatchGeneration:
    """Result of :func:`generate_batch`.

    - ``rows``: one :class:`~lab.trace.Generation` per prompt, in order: ``.tokens`` (new ids), ``.steps`` (one
      :class:`~lab.trace.StepRecord` per batched target forward the row took part in) and ``.stats``
      (:func:`lab.metrics.summarize_steps`; its ``wall_ms`` and ``tokens_per_second`` use the whole batch's wall
      time, since the rows ran together).
    - ``stats``: the batch's totals: ``batch`` (rows), ``new_tokens``, ``target_calls`` (batched target forwards,
      prefill excluded), ``row_steps`` (rows verified, summed over the forwards), ``drafted_tokens``,
      ``accepted_tokens``, ``acceptance_rate`` (accepted ÷ drafted; None when nothing was drafted),
      ``tokens_per_target_call`` (tokens the decode steps committed ÷ row steps: the mean tokens a row commits per
      forward; the prefill's first token of each row is left out, as in :func:`lab.metrics.summarize_steps`),
      ``fed_slots`` (the positions the decode forwards processed, padding included) and ``padded_slots`` (of
      which padding; both leave out the prefill's forward, whose right-padding depends only on the prompts),
      ``prefill_ms``, ``wall_ms`` and ``tokens_per_second``: the goodput, committed tokens per second over the
      whole batch (prefill included).
    """

    rows: list
    stats: dict

    @property
    def tokens(self) -> list:
        """The new token ids of every row, ``list[list[int]]``."""
        return [row.tokens for row in self.rows]


def row_seeds(seed: int | None, batch: int) -> list:
    """The seed of each row's generator: ``seed + r`` for row r (None: every row fresh and nondeterministic).
    Row r of :func:`generate_batch` then draws as :func:`lab.decode.generate` with ``seed=seed + r`` does.
    Raises ``ValueError`` for a ``batch`` < 1 or a ``seed`` whose rows leave ``[-2**63, 2**64)`` (what
    ``torch.Generator.manual_seed`` takes: ``seed`` at most ``2**64 - batch``), ``TypeError`` for a ``seed`` that is
    not an integer."""
    if isinstance(batch, bool) or not isinstance(batch, int) or batch < 1:
        raise ValueError(f"batch must be an integer >= 1, got {batch!r}")
    if seed is None:
        return [None] * batch
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise TypeError(f"seed must be None or an integer, got {type(seed).__name__} {seed!r}")
    if not -2 ** 63 <= seed <= 2 ** 64 - batch:
        raise ValueError(f"seed must be in [-2**63, 2**64 - {batch}] with {batch} rows (row r draws with seed + r, "
                         f"and a seed must be below 2**64), got {seed}")
    return [seed + r for r in range(batch)]


@dataclasses.dataclass
class _Row:
    """One sequence's state in the batch: its checked settings, drafter and what it has committed so far."""

    index: int
    settings: DecodeSettings
    drafter: object
    committed: list
    length: int = 0                  # cache slots holding its committed tokens (all but the last)
    new: list = dataclasses.field(default_factory=list)
    steps: list = dataclasses.field(default_factory=list)
    done: bool = False


def _check_batch_args(prompts, drafters) -> tuple:
    """``(prompts as a list, drafters as a list of len(prompts))``. Raises ``ValueError`` naming the argument."""
    if isinstance(prompts, torch.Tensor):
        if prompts.dim() != 2 or prompts.size(0) == 0:
            raise ValueError(f"prompts must be a non-empty list of token-id lists (or a LongTensor [B, L]), got a "
                             f"tensor of shape {tuple(prompts.shape)}")
        prompts = prompts.tolist()
    if isinstance(prompts, (str, bytes)) or not hasattr(prompts, "__len__") or len(prompts) == 0:
        raise ValueError("prompts must be a non-empty list of prompts, each a list of token ids (encode text first: "
                         f"[pair.encode(text) for text in texts]), got {type(prompts).__name__} {prompts!r:.60}")
    prompts = list(prompts)
    if drafters is None:
        return prompts, [None] * len(prompts)
    if isinstance(drafters, (str, bytes, dict, set, frozenset)) or not hasattr(drafters, "__len__"):
        raise ValueError(f"drafters must be None or a list with one drafter (or None) per prompt, got "
                         f"{type(drafters).__name__}")
    drafters = list(drafters)
    if len(drafters) != len(prompts):
        raise ValueError(f"drafters must hold one drafter (or None) per prompt: {len(prompts)} prompts, got "
                         f"{len(drafters)} drafters")
    seen: dict = {}
    for r, drafter in enumerate(drafters):
        if drafter is None:
            continue
        if id(drafter) in seen:
            raise ValueError(f"drafters[{seen[id(drafter)]}] and drafters[{r}] are the same "
                             f"{type(drafter).__name__} object; each row needs its own drafter instance (a drafter "
                             "keeps one sequence's state)")
        seen[id(drafter)] = r
    return prompts, drafters


_SHARED_ARGS = ("target", "max_new_tokens", "temperature", "top_k", "top_p", "eos_token_id", "acceptance")
"""generate_batch's arguments common to every row: an error in one is not prefixed with the row that met it first."""


def generate_batch(target, prompts, *, drafters=None, max_new_tokens: int, temperature: float = 0.0,
                   top_k: int | None = None, top_p: float | None = None, eos_token_id: int | None = None,
                   seed: int | None = None, acceptance: str = "exact", max_rows: int | None = None) -> BatchGeneration:
    """Generate up to ``max_new_tokens`` tokens after each of ``prompts`` with ``target``, the rows batched into
    one target forward per step, speculatively for rows with a drafter.

    - ``target``: a transformers causal LM (Llama layout, as :func:`lab.decode.generate` takes). ``prompts``: B
      prompts, each a list of token ids (lengths may differ), or a LongTensor ``[B, L]``.
    - ``drafters``: None (every row autoregressive), or a list of B entries, each a drafter instance of its own
      (:mod:`lab.drafters`) or None for an autoregressive row. Any mix works; rows run ragged.
    - ``temperature``, ``top_k``, ``top_p``, ``eos_token_id``, ``acceptance``: as in :func:`lab.decode.generate`,
      for every row. ``seed``: row r's generator is seeded ``seed + r`` (:func:`row_seeds`).
    - Each row stops after ``eos_token_id`` (included) or exactly ``max_new_tokens`` tokens, and then leaves the
      batch.
    - ``max_rows``: at most this many rows run at once (continuous batching: a waiting prompt joins as soon as a
      row finishes; see the module docstring). None runs every prompt from the first step. A row's tokens do not
      depend on it (greedy: token for token in float32), only the batch's speed does.

    One step: each running row's drafter proposes (per row, through the drafter protocol); one target forward over
    ``[rows, W]`` (float32 logits ``[rows, W, V]``) verifies every row's block with per-row position ids and a
    4-D attention mask ``[rows, 1, W, slots + W]`` (a row sees its own committed slots and its block's causal or
    tree mask, nothing else); :func:`lab.decode.verify_block` per row; each row's kept entries move down to its
    next free slots (see the module docstring for why compacting beats masking dead slots). Greedy rows equal
    :func:`lab.decode.generate` token for token in float32.

    Returns :class:`BatchGeneration`. Raises ``ValueError`` naming the argument for empty ``prompts``, a
    ``drafters`` list whose length differs from the prompts', the same drafter object in two rows, a ``max_rows``
    below 1, and everything :func:`lab.decode.generate` rejects (``max_new_tokens`` < 1, bad sampling arguments,
    ids outside the vocabulary, a prompt that with ``max_new_tokens`` exceeds the context, a seed out of range);
    ``TypeError`` as :func:`lab.decode.generate` does (text instead of ids, a drafter class instead of an instance,
    ...). An error in a row's own prompt or drafter starts with ``row r (prompts[r], ...)``; one in an argument all
    rows share does not.
    """
    prompts, drafters = _check_batch_args(prompts, drafters)
    max_rows = len(prompts) if max_rows is None else check_int("max_rows", max_rows, 1)
    if seed is not None and is_integer(plain_number(seed)):
        seed = int(plain_number(seed))  # a NumPy integer or an integer tensor works as in generate
    seeds = row_seeds(seed, len(prompts))
    rows = []
    for r, (prompt, drafter) in enumerate(zip(prompts, drafters)):
        try:
            settings = checked_settings(target, prompt, drafter, max_new_tokens, temperature, top_k, top_p,
                                        eos_token_id, seeds[r], None, False, acceptance)
        except (ValueError, TypeError) as error:  # say which row: its prompt, or its drafter
            if str(error).startswith(tuple(f"{name} must" for name in _SHARED_ARGS)):
                raise  # an argument every row shares: no row is to blame
            where = f"prompts[{r}]" + ("" if drafter is None else f", drafters[{r}]")
            raise type(error)(f"row {r} ({where}): {error}") from None
        rows.append(_Row(r, settings, drafter, list(settings.prompt)))

    start = time.perf_counter()
    waiting = list(rows)
    running = waiting[:max_rows]  # the cache's batch dimension, in this order
    del waiting[:max_rows]
    cache = new_cache()
    running = _admit(target, cache, running)
    synchronize(target.device)  # the prefill, not its launch
    prefill_ms = (time.perf_counter() - start) * 1000

    calls = fed = padded = 0
    while running or waiting:
        # continuous batching: the queue fills the rows that finished (again if newcomers end in their prefill)
        while waiting and len(running) < max_rows:
            t_admit = time.perf_counter()
            newcomers = waiting[: max_rows - len(running)]
            del waiting[: len(newcomers)]
            if running:
                joined = new_cache()
                newcomers = _admit(target, joined, newcomers)
                if newcomers:
                    _append_rows(cache, joined, len(newcomers))
            else:
                cache = new_cache()
                newcomers = _admit(target, cache, newcomers)
            running += newcomers
            synchronize(target.device)
            prefill_ms += (time.perf_counter() - t_admit) * 1000
        if not running:  # every row ended in its prefill (EOS first, or max_new_tokens = 1)
            break
        slots, width, blocks = _draft_all(running, cache)
        hidden_wanted = any(row.settings.hidden for row in running)
        t_forward0 = time.perf_counter()
        logits, hidden = _batched_forward(target, cache, blocks, slots, width, hidden_wanted)
        forward_s = time.perf_counter() - t_forward0
        calls += 1
        fed += len(running) * width
        padded += sum(width - len(block["tokens"]) for block in blocks)
        kept = []
        for i, (row, block) in enumerate(zip(running, blocks)):
            # as generate hands it over: only if read, its drafter's layers (lab.models.layer_states)
            row_hidden = layer_states(hidden, row.settings.hidden_layers)[i] if row.settings.hidden else None
            kept.append(_verify_row(row, block, logits[i], row_hidden, forward_s))
        survivors = [i for i, row in enumerate(running) if not row.done]
        _compact(cache, slots, [row.length for row in running], kept, survivors)
        for row, keep in zip(running, kept):
            row.length += len(keep)
        running = [running[i] for i in survivors]

    wall_ms = (time.perf_counter() - start) * 1000
    generations = []
    for row in rows:
        stats = summarize_steps(row.steps, len(row.new), wall_ms)
        stats["prefill_ms"] = prefill_ms
        generations.append(Generation(tokens=row.new, steps=row.steps, stats=stats))
    stats = _batch_stats(generations, calls, fed, padded, prefill_ms, wall_ms)
    stats["max_rows"] = max_rows
    return BatchGeneration(rows=generations, stats=stats)


def _admit(target, cache, rows) -> list:
    """Prefill ``rows`` into ``cache`` (empty; batch rows in the order of ``rows``): each row's first new token
    comes from its prompt's last position (its prefill record, as in :func:`lab.decode.generate`), then its
    drafter is reset with the prompt and that token, with the prompt's hidden states if it reads them. Rows that
    ended there (EOS, or ``max_new_tokens`` = 1) leave the cache at once; returns the rows still running, in
    cache order."""
    prompt_hidden = _prefill(target, cache, rows)
    for row in rows:
        if row.drafter is None:
            continue
        if row.settings.hidden:
            row.drafter.reset(row.committed, hidden=prompt_hidden[row.index])
        else:
            row.drafter.reset(row.committed)
    survivors = [i for i, row in enumerate(rows) if not row.done]
    if len(survivors) < len(rows) and survivors:
        _select_rows(cache, survivors, max(rows[i].length for i in survivors))
    return [rows[i] for i in survivors]


@torch.inference_mode()
def _select_rows(cache, survivors: list, length: int) -> None:
    """Keep only the ``survivors`` batch rows (indices) of ``cache``, cut to ``length`` slots; in place."""
    select = torch.tensor(survivors)
    for layer in cache.layers:
        for name in ("keys", "values"):
            tensor = getattr(layer, name)
            setattr(layer, name, tensor.index_select(0, select.to(tensor.device))[:, :, :length])


@torch.inference_mode()
def _append_rows(cache, joined, count: int) -> None:
    """Append the ``count`` batch rows of the cache ``joined`` (freshly prefilled) after ``cache``'s rows, in place:
    every layer's keys and values are zero-padded on the slot axis to the longer of the two and concatenated on the
    batch axis. ``joined`` may be empty (its prompts were one token long): its rows are then all padding."""
    slots = max(cache_length(cache), cache_length(joined))
    for i, layer in enumerate(cache.layers):
        for name in ("keys", "values"):
            tensor = getattr(layer, name)
            b, heads, length, dim = tensor.shape
            extra = getattr(joined.layers[i], name) if i < len(joined.layers) else None
            if extra is None or extra.dim() != 4:  # an empty cache, or a layer not yet written
                extra = tensor.new_zeros(count, heads, 0, dim)
            parts = []
            for part in (tensor, extra):
                pad = slots - part.shape[2]
                if pad:
                    part = torch.cat([part, part.new_zeros(part.shape[0], heads, pad, dim)], dim=2)
                parts.append(part)
            setattr(layer, name, torch.cat(parts, dim=0))


def _batch_stats(generations, calls: int, fed: int, padded: int, prefill_ms: float, wall_ms: float) -> dict:
    new = sum(len(g.tokens) for g in generations)
    row_steps = sum(g.stats["target_calls"] for g in generations)  # decode steps: the prefill records left out
    decoded = new - len(generations)  # each row's first token came from the prefill
    drafted = sum(g.stats["drafted_tokens"] for g in generations)
    accepted = sum(g.stats["accepted_tokens"] for g in generations)
    return {"batch": len(generations), "new_tokens": new, "target_calls": calls, "row_steps": row_steps,
            "drafted_tokens": drafted, "accepted_tokens": accepted,
            "acceptance_rate": accepted / drafted if drafted else None,
            "tokens_per_target_call": decoded / row_steps if row_steps else None,
            "fed_slots": fed, "padded_slots": padded, "prefill_ms": prefill_ms, "wall_ms": wall_ms,
            "tokens_per_second": new / (wall_ms / 1000) if wall_ms > 0 else None}


def _prefill(target, cache, rows) -> dict:
    """The rows' prefill, one batched target forward: every prompt into ``cache``, right-padded (row r's at slots
    ``[0, len)``), and each row's first new token drawn from the logits at its last prompt position, recorded as
    its prefill :class:`~lab.trace.StepRecord` and committed (``row.done`` if that ends it). Returns
    ``{row index: hidden [len, len(hidden_layers) · D] float32}`` for rows whose drafter reads the target's hidden
    states."""
    hidden_wanted = any(row.settings.hidden for row in rows)
    width = max(len(row.settings.prompt) for row in rows)
    blocks = []
    for row in rows:
        n = len(row.settings.prompt)
        blocks.append({"tokens": row.settings.prompt, "positions": list(range(n)),
                       "mask": torch.ones(n, n, dtype=torch.bool).tril()})
    # logits only at the rows' last prompt positions (a vocabulary-wide row for every padded slot would be waste)
    last = sorted({len(row.settings.prompt) - 1 for row in rows})
    logits, hidden = _batched_forward(target, cache, blocks, 0, width, hidden_wanted,
                                      logits_to_keep=torch.tensor(last))
    out = {}
    for i, row in enumerate(rows):
        n = len(row.settings.prompt)
        record = prefill_record(logits[i, last.index(n - 1)][None], row.settings)  # its time: the batch's prefill_ms
        row.steps.append(record)
        row.committed += record.emitted
        row.new += record.emitted
        row.length = n
        row.done = record.emitted[-1] == row.settings.eos_token_id or len(row.new) >= row.settings.max_new_tokens
        if row.settings.hidden:
            out[row.index] = layer_states(hidden, row.settings.hidden_layers)[i, :n]
    return out


def _draft_all(running, cache) -> tuple:
    """Each running row's draft for this step: ``(slots before the step, block width W, blocks)``; a block is a
    dict with the row's ``tokens`` (``[last] + drafts + extra``), ``positions``, ``mask`` (bool ``[q, q]`` over
    the block), ``draft``, ``parents``, timings and the drafter's KV lengths."""
    slots = cache_length(cache)
    blocks = []
    for row in running:
        settings, drafter = row.settings, row.drafter
        remaining = settings.max_new_tokens - len(row.new)
        kv_length = getattr(drafter, "kv_length", None)
        t0 = time.perf_counter()
        draft_kv = [kv_length()] if kv_length is not None else None
        if drafter is None:
            draft = Draft()
        else:
            draft = drafter.propose(DraftRequest(row.committed, remaining - 1, settings.temperature, settings.top_k,
                                                 settings.top_p, settings.generator))
        if draft_kv is not None:
            draft_kv.append(kv_length())
        t1 = time.perf_counter()
        base = row.length
        draft, parents = checked_draft(draft, drafter, settings, base)
        n = len(draft.tokens)
        tokens = [row.committed[-1]] + draft.tokens + list(draft.extra_tokens)
        if draft.extra_tokens or draft.parents is not None:  # a tree, or Lookahead's window
            layout = branch_layout(base, n, draft)
            mask, positions = layout["attention_mask"], list(layout["position_ids"])
        else:
            mask, positions = torch.ones(n + 1, n + 1, dtype=torch.bool).tril(), list(range(base, base + n + 1))
        blocks.append({"tokens": tokens, "positions": positions, "mask": mask, "draft": draft, "parents": parents,
                       "remaining": remaining, "times": (t0, t1), "draft_kv": draft_kv, "base": base})
    return slots, max(len(block["tokens"]) for block in blocks), blocks


@torch.inference_mode()
def _batched_forward(target, cache, blocks, slots: int, width: int, hidden: bool, logits_to_keep: int = 0) -> tuple:
    """One target forward over every row's block, padded to ``width``, appended to ``cache`` at slots
    ``[slots, slots + width)``: ``(logits [rows, width or logits_to_keep, V] float32, hidden states or None)``,
    the hidden states as transformers returns them (a tuple of ``[rows, width, D]``, one per layer and the
    embeddings; :func:`lab.models.layer_states` picks a drafter's).

    Row r's query i (i below its block's length q) may attend to the row's own committed slots ``[0, base)``
    (``blocks[r]["base"]``, 0 when absent, as in the prefill) and to the block slots its ``mask`` (bool ``[q, q]``)
    allows; padded queries attend only to themselves, so no softmax row is empty, and no real query sees them.
    Positions are the block's own (the keys keep theirs: they are stored after rotary encoding)."""
    rows = len(blocks)
    device = target.device
    ids = torch.zeros(rows, width, dtype=torch.long)
    positions = torch.zeros(rows, width, dtype=torch.long)
    allow = torch.zeros(rows, width, slots + width, dtype=torch.bool)
    for r, block in enumerate(blocks):
        q, base = len(block["tokens"]), block.get("base", 0)
        ids[r, :q] = torch.tensor(block["tokens"], dtype=torch.long)
        positions[r, :q] = torch.tensor(block["positions"], dtype=torch.long)
        positions[r, q:] = base  # padding: a valid position whose result is never read
        allow[r, :q, :base] = True
        allow[r, :q, slots:slots + q] = block["mask"]
        pad = torch.arange(q, width)
        allow[r, pad, slots + pad] = True
    dtype = next(target.parameters()).dtype
    additive = torch.zeros(allow.shape, dtype=dtype)
    additive.masked_fill_(~allow, torch.finfo(dtype).min)  # 0 = attend, as lab.models.forward builds its masks
    kwargs = {cache_kwarg(type(target)): cache, "use_cache": True, "logits_to_keep": logits_to_keep}
    if hidden:
        kwargs["output_hidden_states"] = True
    out = target(input_ids=ids.to(device), attention_mask=additive[:, None].to(device),
                 position_ids=positions.to(device), **kwargs)
    logits = out.logits.float()
    synchronize(logits.device)  # time the forward itself, not its launch
    return logits, (out.hidden_states if hidden else None)


def _verify_row(row: _Row, block: dict, logits: torch.Tensor, hidden, forward_s: float) -> list:
    """Verify one row's block from its rows of the batched forward (``logits [W, V]``), hand the drafter its
    output, record the step and commit; returns the block offsets whose cache entries the row keeps
    (``[0] + [1 + i for each accepted node i]``)."""
    started = time.perf_counter()
    draft, parents, settings = block["draft"], block["parents"], row.settings
    q = len(block["tokens"])
    row_logits = logits[:q]
    row_hidden = None if hidden is None else hidden[:q]
    result, target_probs = verify_block(row_logits[: len(draft.tokens) + 1], draft, parents, settings)
    keep = [0] + [1 + i for i in result.path]
    drafter = row.drafter
    if drafter is not None:
        hand_over(drafter, getattr(drafter, "observe", None), result,
                  committed_block(draft, result, block["remaining"], settings.eos_token_id), row_logits, row_hidden)
        if block["draft_kv"] is not None:
            block["draft_kv"].append(drafter.kv_length())
    t0, t1 = block["times"]
    t_forward = t1 + forward_s  # this row's target time is the whole batched forward, then its own verification
    t2 = t_forward + (time.perf_counter() - started)
    record = step_record(len(row.steps), len(row.new), block["remaining"], draft, parents, result, target_probs,
                         settings, times=(t0, t1, t_forward, t2), fed=q, base=block["base"],
                         draft_kv=block["draft_kv"])
    row.steps.append(record)
    row.committed += record.emitted
    row.new += record.emitted
    if record.truncated or record.emitted[-1] == settings.eos_token_id or len(row.new) >= settings.max_new_tokens:
        row.done = True
    return keep


@torch.inference_mode()
def _compact(cache, slots: int, lengths: list, kept: list, survivors: list) -> None:
    """After a step: move row r's kept block entries (offsets ``kept[r]`` from slot ``slots``) down to its slots
    ``[lengths[r], lengths[r] + len(kept[r]))``, keep only the ``survivors`` rows (batch indices) and cut the cache
    to the longest surviving row. In place, every layer's keys and values."""
    if not survivors:
        return
    rows, most = len(kept), max(len(k) for k in kept)
    source = torch.zeros(rows, most, dtype=torch.long)
    target_slots = torch.zeros(rows, most, dtype=torch.long)
    for r, keep in enumerate(kept):
        source[r, : len(keep)] = torch.tensor(keep)
        # past a row's own kept entries the copy writes its slot-0 entry again into slots it does not use
        target_slots[r] = lengths[r] + torch.arange(most)
    new_length = max(lengths[r] + len(kept[r]) for r in survivors)
    select = None if len(survivors) == rows else torch.tensor(survivors)
    for layer in cache.layers:
        for name in ("keys", "values"):
            tensor = getattr(layer, name)
            b, heads, _, dim = tensor.shape
            src = source.to(tensor.device).view(b, 1, most, 1).expand(b, heads, most, dim)
            dst = target_slots.to(tensor.device).view(b, 1, most, 1).expand(b, heads, most, dim)
            moved = tensor[:, :, slots:].gather(2, src)
            tensor.scatter_(2, dst, moved)
            if select is not None:
                tensor = tensor.index_select(0, select.to(tensor.device))
            setattr(layer, name, tensor[:, :, :new_length])
