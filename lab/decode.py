"""The autoregressive baseline and the one speculative decoding loop every drafter shares.

Each step: the drafter proposes → one target forward over [last committed token] + drafts → verification
(greedy match or rejection sampling) → commit the accepted drafts + one target token → roll the target's KV cache
back to the committed sequence → ``drafter.update`` → a :class:`~lab.trace.StepRecord` to ``on_step``.

With no drafter every step is a plain autoregressive step (one token per target call), through the same code.
Sources: Leviathan et al. 2023, Algorithm 1; Chen et al. 2023, Algorithm 2; seed lesson 000.
"""
from __future__ import annotations

import dataclasses
import time
import warnings
from numbers import Integral

import numpy as np
import torch

from lab.drafters.base import Draft, DraftRequest, TargetOutput
from lab.kv import cache_length, keep_positions
from lab.metrics import summarize_steps
from lab.models import LAST_LAYER, context_limit, forward, hidden_layers_of, new_cache, synchronize, vocab_size
from lab.sampling import probs_from_logits
from lab.trace import Generation, OnStep, StepRecord
from lab.trees import chain_parents, check_parents, depths, tree_attention_mask
from lab.validation import check_int, check_sampling_args, check_seed, check_token_ids, is_integer, plain_number
from lab.verify import verify_tree_greedy, verify_tree_sampled_unchecked, verify_tree_typical_unchecked

__all__ = ["generate", "autoregressive", "DecodeSettings", "checked_settings", "checked_draft", "verify_block",
           "step_record", "prefill_record", "branch_layout", "committed_block", "hand_over"]


def _prompt_list(prompt_ids, vocab: int) -> list[int]:
    return check_token_ids("prompt_ids", prompt_ids, vocab, hint="; encode text first: pair.encode(text)")


def _check_drafter(drafter) -> None:
    if isinstance(drafter, type):
        raise TypeError(f"drafter must be a drafter object, got the class {drafter.__name__} itself; create one, "
                        f"e.g. DraftModelDrafter(pair.draft, n_draft=4)")
    missing = [m for m in ("reset", "propose", "update") if not callable(getattr(drafter, m, None))]
    if missing:
        what = "a model" if isinstance(drafter, torch.nn.Module) else type(drafter).__name__
        raise TypeError(f"drafter must be a drafter (an object with reset, propose and update; see lab.drafters), got "
                        f"{what} ({type(drafter).__name__}, no {', '.join(missing)}); wrap a model: "
                        "DraftModelDrafter(model, n_draft)")


def generate(target, prompt_ids, *, drafter=None, max_new_tokens: int, temperature: float = 0.0,
             top_k: int | None = None, top_p: float | None = None, eos_token_id: int | None = None,
             seed: int | None = None, on_step: OnStep | None = None, record_probs: bool = False,
             acceptance: str = "exact") -> Generation:
    """Generate up to ``max_new_tokens`` tokens after ``prompt_ids`` with ``target``, speculatively if ``drafter``.

    - ``target``: a transformers causal LM in eval mode. ``prompt_ids``: list[int], or a LongTensor or NumPy integer
      array ``[L]``/``[1, L]``.
    - ``drafter``: any :class:`lab.drafters.Drafter` (None = autoregressive decoding).
    - ``temperature`` 0 is greedy (output identical, token for token, to greedy autoregressive decoding);
      otherwise tokens are sampled from the target's distribution after temperature / top-k / top-p, exactly
      (the draft only changes speed).
    - Generation stops after ``eos_token_id`` (included) or exactly ``max_new_tokens`` tokens.
    - ``seed`` makes sampling reproducible (a CPU ``torch.Generator``) for one drafter and its settings: another
      drafter draws the random numbers at other points, so the same seed gives other text, from the same
      distribution (speculation is exact in distribution, not sample for sample); ``on_step`` receives one
      :class:`~lab.trace.StepRecord` per target call as it happens; ``record_probs`` stores per-position target
      and draft distributions in the records.
    - A drafter may propose a token tree (``Draft.parents``): one target forward verifies every node with a tree
      attention mask and position ids (:mod:`lab.trees`), and the KV cache keeps only the accepted path.
    - Each step's :class:`~lab.drafters.Draft` is checked (O(n) on its tokens, plus its n probability rows) and its
      ids become plain ints. A draft that would run past the target's context (a drafter that ignores
      ``request.max_tokens``) is cut to what fits; extra tokens past the end sit at the last position.
    - ``acceptance``: "exact" (rejection sampling; the default) or "typical" (Medusa's typical acceptance, Cai et
      al. 2024, §2.3.1: faster, **not** distributed as the target; used only when sampling, T > 0, with a drafter:
      otherwise it changes nothing and a ``UserWarning`` says so).

    The prefill is the first target call: the whole prompt, whose last position gives the first new token (the
    time to the first token is the prefill's); ``.steps[0]`` records it (``StepRecord.prefill``), and every later
    record is a decode step feeding ``[last token] + drafts``; the drafter is reset with the prompt and that first
    token.

    Returns :class:`~lab.trace.Generation` with ``.tokens`` (new ids), ``.steps`` and ``.stats`` (see
    :func:`lab.metrics.summarize_steps`; times in ms, ``tokens_per_second`` over the whole call, prefill
    included, whose time is ``stats["prefill_ms"]``).

    Integer arguments (``max_new_tokens``, ``top_k``, ``eos_token_id``, ``seed``, the prompt's ids) may be any
    ``numbers.Integral`` (``int``, ``numpy.int64``; not bool), a one-element integer tensor or a 0-d NumPy array, as
    the temperature may be a one-element float tensor. Any temperature > 0 works, however small (see
    :func:`lab.sampling.probs_from_logits`). All arguments are checked once, before the first step.

    Raises ``TypeError`` naming the argument for text or floats as ``prompt_ids`` (encode text first:
    ``pair.encode(text)``), a ``drafter`` without ``reset``/``propose``/``update`` (a model must be wrapped:
    ``DraftModelDrafter(model, n_draft)``) or a drafter class instead of an instance, a ``target`` that is not a
    causal LM, a non-integer ``seed`` or ``eos_token_id``, a ``record_probs`` that is not a bool (``numpy.bool_``
    works), or a non-callable ``on_step`` or a class as ``on_step`` (a widget must be created first). Raises
    ``ValueError`` for max_new_tokens < 1, bad sampling arguments,
    an unknown ``acceptance``, token ids (prompt or ``eos_token_id``) outside the vocabulary, a seed
    outside what ``torch.Generator.manual_seed`` accepts, a prompt + max_new_tokens longer than the target's
    or the draft model's context, a drafter whose vocabulary differs, a hidden-state drafter (Medusa, EAGLE) built
    for a target of another width, a draft tree whose parents array is malformed, or logits that
    give no valid distribution (NaN, +inf, or all -inf in a row). A drafter whose ``propose`` returns no ``Draft``,
    non-integer ids, ids outside the vocabulary or unusable ``probs`` (wrong shape; NaN, inf or negative entries;
    rows not summing to 1; probability 0 for its own token) gets a ``TypeError`` / ``ValueError`` naming its class.
    """
    settings = checked_settings(target, prompt_ids, drafter, max_new_tokens, temperature, top_k, top_p,
                                eos_token_id, seed, on_step, record_probs, acceptance)
    start = time.perf_counter()
    # the prefill is the first target call: it reads the whole prompt and its last row gives the first new token,
    # as in vLLM and EAGLE's reference code (transformers also verifies drafts made from the prompt in that call)
    cache, prompt_logits, prompt_hidden = _prefill(target, settings)
    record = prefill_record(prompt_logits, settings)
    steps, new = [record], list(record.emitted)
    committed = list(settings.prompt) + new
    observe = kv_length = None
    if drafter is not None:
        if settings.hidden:
            drafter.reset(committed, hidden=prompt_hidden)
        else:
            drafter.reset(committed)
        observe = getattr(drafter, "observe", None)      # optional: wants the step's target output
        kv_length = getattr(drafter, "kv_length", None)  # optional: its own KV-cache length (for the KV viewer)
    synchronize(target.device)
    prefill_ms = (time.perf_counter() - start) * 1000
    if on_step is not None:
        on_step(record)

    last = new[-1]
    ended = new[-1] == settings.eos_token_id
    while len(new) < settings.max_new_tokens and not ended:
        remaining = settings.max_new_tokens - len(new)
        t0 = time.perf_counter()
        draft_kv = [kv_length()] if kv_length is not None else None
        if drafter is None:
            draft = Draft()
        else:
            draft = drafter.propose(DraftRequest(committed, remaining - 1, settings.temperature, settings.top_k,
                                                 settings.top_p, settings.generator))
        if draft_kv is not None:
            draft_kv.append(kv_length())
        t1 = time.perf_counter()
        base = cache_length(cache)
        draft, parents = checked_draft(draft, drafter, settings, base)
        all_logits, all_hidden = _target_forward(target, cache, last, draft, base, settings.hidden,
                                                 settings.hidden_layers)
        t_forward = time.perf_counter()
        result, target_probs = verify_block(all_logits[: len(draft.tokens) + 1], draft, parents, settings)
        # keep the last token's and the accepted path's keys and values; drop rejected nodes and extra tokens
        keep_positions(cache, base, [0] + [1 + i for i in result.path])
        if drafter is not None:
            hand_over(drafter, observe, result, committed_block(draft, result, remaining, settings.eos_token_id),
                      all_logits, all_hidden)
            if draft_kv is not None:
                draft_kv.append(kv_length())
        synchronize(target.device)  # a GPU queues keep_positions and the hand-over: time them here, not in the
        # next step's draft
        t2 = time.perf_counter()
        record = step_record(len(steps), len(new), remaining, draft, parents, result, target_probs, settings,
                             times=(t0, t1, t_forward, t2), fed=all_logits.size(0), base=base, draft_kv=draft_kv)
        steps.append(record)
        committed += record.emitted
        new += record.emitted
        last = result.next_token
        if on_step is not None:
            on_step(record)
        if record.truncated or record.emitted[-1] == settings.eos_token_id:  # cut short, or ended by EOS
            break

    wall_ms = (time.perf_counter() - start) * 1000
    stats = summarize_steps(steps, len(new), wall_ms)
    stats["prefill_ms"] = prefill_ms
    return Generation(tokens=new, steps=steps, stats=stats)


@dataclasses.dataclass(frozen=True)
class DecodeSettings:
    """:func:`generate`'s arguments after :func:`checked_settings`: plain Python values the loop reads (one per
    sequence; :func:`lab.batched.generate_batch` holds one per row)."""

    prompt: list            # the prompt's ids, plain ints
    max_new_tokens: int
    temperature: float      # 0 = greedy
    top_k: int | None
    top_p: float | None
    eos_token_id: int | None
    generator: torch.Generator  # private to this call: the drafter's and the verifier's draws
    vocab: int              # the target's logit width
    limit: int | None       # the target's context (None: unbounded)
    hidden: bool            # the drafter reads the target's hidden states (Medusa, EAGLE)
    hidden_layers: tuple    # which layers, concatenated (the drafter's hidden_layers; EAGLE-3: three)
    record_probs: bool
    typical: bool           # Medusa's typical acceptance applies (asked for, and sampling)


def checked_settings(target, prompt_ids, drafter, max_new_tokens, temperature, top_k, top_p, eos_token_id, seed,
                     on_step, record_probs, acceptance) -> DecodeSettings:
    """Every argument of :func:`generate` checked, once per call (the loop checks only each step's Draft, O(n)),
    and its private generator seeded (``seed``; None: a fresh nondeterministic seed). Returns a
    :class:`DecodeSettings`. Raises the ``TypeError`` / ``ValueError`` :func:`generate` documents. Also used per row
    by :func:`lab.batched.generate_batch`, so both loops accept and reject the same arguments."""
    if not callable(getattr(target, "get_output_embeddings", None)):
        raise TypeError(f"target must be a transformers causal LM (e.g. pair.target), got {type(target).__name__}")
    max_new_tokens = check_int("max_new_tokens", max_new_tokens, 1)
    temperature, top_k, top_p = check_sampling_args(temperature, top_k, top_p)
    if acceptance not in ("exact", "typical"):
        raise ValueError(f"acceptance must be 'exact' or 'typical', got {acceptance!r}")
    if acceptance == "typical" and (drafter is None or temperature == 0):
        warnings.warn("acceptance='typical' applies only when sampling (temperature > 0) with a drafter; this call "
                      "is " + ("greedy" if temperature == 0 else "autoregressive") + ", so it changes nothing",
                      UserWarning, stacklevel=3)  # generate's caller
    if drafter is not None:
        _check_drafter(drafter)
    seed = check_seed("seed", seed, none_allowed=True)
    if not isinstance(record_probs, (bool, np.bool_)):
        raise TypeError(f"record_probs must be True or False, got {type(record_probs).__name__} {record_probs!r}")
    if on_step is not None and not callable(on_step):
        raise TypeError(f"on_step must be None or a callable taking a StepRecord, got {type(on_step).__name__}")
    if isinstance(on_step, type):  # a widget class: calling it with a record would build a widget per step
        raise TypeError(f"on_step must be a callable taking a StepRecord, got the class {on_step.__name__} itself; "
                        f"create one first, e.g. stream = {on_step.__name__}(pair.tokenizer), then on_step=stream")
    vocab = vocab_size(target)
    if eos_token_id is not None:
        given, eos_token_id = eos_token_id, plain_number(eos_token_id)
        if not is_integer(eos_token_id):
            raise TypeError(f"eos_token_id must be None or an integer token id, got {type(given).__name__} "
                            f"{given!r}")
        eos_token_id = int(eos_token_id)
        if not 0 <= eos_token_id < vocab:
            raise ValueError(f"eos_token_id must be a token id in [0, {vocab}), got {eos_token_id}")
    prompt = _prompt_list(prompt_ids, vocab)
    limit = context_limit(target)
    if limit is not None and len(prompt) + max_new_tokens > limit:
        raise ValueError(f"prompt ({len(prompt)} tokens) + max_new_tokens ({max_new_tokens}) exceeds the target's "
                         f"context of {limit} positions; shorten the prompt or lower max_new_tokens")
    if drafter is not None and getattr(drafter, "vocab_size", vocab) != vocab:
        raise ValueError(f"the drafter's vocabulary ({drafter.vocab_size}) differs from the target's ({vocab}): "
                         "target and draft must share a tokenizer")
    draft_limit = getattr(drafter, "context_limit", None)
    if draft_limit is not None and len(prompt) + max_new_tokens > draft_limit:
        raise ValueError(f"prompt ({len(prompt)} tokens) + max_new_tokens ({max_new_tokens}) exceeds the draft "
                         f"model's context of {draft_limit} positions (the target's: {limit or 'unbounded'}); "
                         "shorten the prompt, lower max_new_tokens or use a draft with a longer context")
    if getattr(drafter, "needs_hidden_states", False):
        built_for = getattr(getattr(getattr(drafter, "target", None), "config", None), "hidden_size", None)
        if built_for is not None and built_for != target.config.hidden_size:
            raise ValueError(f"{type(drafter).__name__} reads the target's hidden states and was built for a target "
                             f"of hidden size {built_for}, but this target's is {target.config.hidden_size}: build "
                             "it from the target you decode with (e.g. MedusaDrafter.from_pretrained(pair) with "
                             "generate(pair.target, ...))")
        states = int(target.config.num_hidden_layers) + 1  # embeddings + one per layer
        layers = hidden_layers_of(drafter)
        if not layers or any(isinstance(i, bool) or not isinstance(i, Integral) or not -states <= i < states
                             for i in layers):
            raise ValueError(f"{type(drafter).__name__}.hidden_layers must be indices into the target's {states} "
                             f"hidden states (0 = embeddings, -1 = the last layer), got {layers}")
    generator = torch.Generator()
    if seed is None:
        generator.seed()  # a fresh nondeterministic seed for this private generator; torch's global RNG is untouched
    else:
        generator.manual_seed(seed)
    return DecodeSettings(prompt=prompt, max_new_tokens=max_new_tokens, temperature=temperature, top_k=top_k,
                          top_p=top_p, eos_token_id=eos_token_id, generator=generator, vocab=vocab, limit=limit,
                          hidden=bool(getattr(drafter, "needs_hidden_states", False)),
                          hidden_layers=hidden_layers_of(drafter), record_probs=bool(record_probs),
                          typical=acceptance == "typical" and temperature != 0 and drafter is not None)


def _prefill(target, settings: DecodeSettings) -> tuple:
    """The prefill, the generation's first target call: ``(cache, logits [1, V] float32, hidden)``, a new KV cache
    holding every prompt token, the target's logits at the last prompt position (they give the first new token)
    and its hidden states ``[len(prompt), len(hidden_layers) · D]`` when the drafter reads them (else None): the
    drafter is then reset with the prompt and that first token, the hidden states covering all but its last token,
    as after every step."""
    cache = new_cache()
    out = forward(target, settings.prompt, cache, logits_to_keep=1, output_hidden_states=settings.hidden,
                  hidden_layers=settings.hidden_layers)
    logits, hidden = out if settings.hidden else (out, None)
    synchronize(logits.device)
    return cache, logits[-1:], hidden


def prefill_record(logits: torch.Tensor, settings: DecodeSettings) -> StepRecord:
    """The prefill's :class:`~lab.trace.StepRecord`: the first new token from the target's ``logits [1, V]``
    (float32) at the prompt's last position, chosen as an autoregressive step's (argmax, or drawn with the call's
    generator); no draft, ``target_tokens`` the prompt's length, ``cache_before`` 0. Its ``*_ms`` fields are 0: its
    time is the generation's ``stats["prefill_ms"]``, so sums over steps are decode time. Also used per row by
    :func:`lab.batched.generate_batch`."""
    result, target_probs = verify_block(logits, Draft(), [], settings)
    return step_record(0, 0, settings.max_new_tokens, Draft(), [], result, target_probs, settings,
                       times=(0.0,) * 4, fed=len(settings.prompt), base=0, draft_kv=None, prefill=True,
                       prompt=list(settings.prompt))


def checked_draft(draft, drafter, settings: DecodeSettings, base: int) -> tuple:
    """``(draft, parents)``: the drafter's proposal checked (:func:`_check_draft`; a tree's parents too), cut to the
    positions left in the target's context after the ``base`` cached ones and the last committed token
    (:func:`_fit_context`), and its parents array (a chain's ``[-1, 0, 1, ...]`` when it is not a tree).
    ``drafter`` None (autoregressive) skips the checks. Raises the ``TypeError`` / ``ValueError`` of
    :func:`_check_draft` and of a malformed tree (naming the drafter's class)."""
    if drafter is not None:
        draft = _check_draft(draft, drafter, settings.vocab)
    tree = draft.parents is not None
    if tree:
        draft = dataclasses.replace(draft, parents=_check_tree(draft))
    if settings.limit is not None:
        draft = _fit_context(draft, settings.limit - 1 - base)
    return draft, (list(draft.parents) if tree else chain_parents(len(draft.tokens)))


def _target_forward(target, cache, last: int, draft: Draft, base: int, hidden: bool,
                    hidden_layers: tuple = LAST_LAYER) -> tuple:
    """One target forward over ``[last] + draft.tokens (+ draft.extra_tokens)`` appended to ``cache`` (``base``
    positions): ``(logits [rows, V] float32, hidden [rows, len(hidden_layers) · D] or None)``, one row per fed
    token. A chain is causal; a tree or Lookahead's window gets its mask and positions from :func:`branch_layout`."""
    if draft.extra_tokens or draft.parents is not None:  # Lookahead's Jacobi window, or a token tree
        out = forward(target, [last] + draft.tokens + draft.extra_tokens, cache, output_hidden_states=hidden,
                      hidden_layers=hidden_layers, **branch_layout(base, len(draft.tokens), draft))
    else:  # [n+1, V]: one target call verifies all drafts
        out = forward(target, [last] + draft.tokens, cache, output_hidden_states=hidden, hidden_layers=hidden_layers)
    all_logits, all_hidden = out if hidden else (out, None)
    synchronize(all_logits.device)  # time the forward itself, not just its launch (verification syncs right after)
    return all_logits, all_hidden


def verify_block(logits: torch.Tensor, draft: Draft, parents: list, settings: DecodeSettings) -> tuple:
    """Verify one block: ``(VerifyResult, target_probs)`` from the target's ``logits [n+1, V]`` over the drafts.

    Greedy (T = 0): the longest path matching the target's argmax (:func:`lab.verify.verify_tree_greedy`);
    ``target_probs`` is the untempered softmax when ``record_probs``, else None. Sampling: rejection sampling
    (exact) or Medusa's typical acceptance over the processed distributions ``[n+1, V]`` float32 (CPU), drawn
    with the call's generator. A chain is the tree ``[-1, 0, 1, ...]``, so one verifier serves both."""
    if settings.temperature == 0:
        result = verify_tree_greedy(logits.argmax(-1).tolist(), draft.tokens, parents)
        return result, (torch.softmax(logits, -1).cpu() if settings.record_probs else None)
    target_probs = probs_from_logits(logits, settings.temperature, settings.top_k, settings.top_p).cpu()
    # the verifiers without their row scan: these rows are valid by construction, the draft's checked already
    if settings.typical:
        return verify_tree_typical_unchecked(target_probs, draft.tokens, parents, settings.generator), target_probs
    result = verify_tree_sampled_unchecked(target_probs, draft.tokens, parents, draft.probs, settings.generator)
    return result, target_probs


def step_record(index: int, position: int, remaining: int, draft: Draft, parents: list, result, target_probs,
                settings: DecodeSettings, *, times: tuple, fed: int, base: int, draft_kv,
                prefill: bool = False, prompt: list | None = None) -> StepRecord:
    """The :class:`~lab.trace.StepRecord` of one step: what it emitted (the accepted drafts + the target's token,
    cut after EOS or at the ``remaining`` tokens), its timings from ``times = (t0, t1, t_forward, t2)`` (seconds:
    before drafting, after drafting, after the target's forward, after verification and rollback) and its cache
    bookkeeping (``fed`` positions processed, ``base`` cached before, the drafter's ``draft_kv`` lengths);
    ``prefill`` marks the prefill's record (an empty draft over the whole prompt), which carries the ``prompt``'s
    ids."""
    t0, t1, t_forward, t2 = times
    emitted = committed_block(draft, result, remaining, settings.eos_token_id)
    return StepRecord(
        index=index, position=position, drafted=list(draft.tokens), num_accepted=result.num_accepted,
        emitted=emitted, last_kind=result.kind, truncated=len(emitted) < result.num_accepted + 1,
        draft_ms=(t1 - t0) * 1000, verify_ms=(t2 - t1) * 1000, target_ms=(t_forward - t1) * 1000,
        draft_calls=draft.calls,
        target_probs=target_probs if settings.record_probs else None,
        draft_probs=(draft.probs if settings.record_probs else None),
        target_tokens=fed, cache_before=base, draft_cache=tuple(draft_kv) if draft_kv is not None else None,
        parents=list(parents) if draft.parents is not None else None, path=list(result.path),
        acceptance="typical" if settings.typical else "exact", prefill=prefill, prompt=prompt)


def committed_block(draft: Draft, result, remaining: int, eos_token_id: int | None) -> list[int]:
    """The tokens one verified step commits: the accepted drafts along ``result.path`` and the target's
    ``result.next_token``, cut after the first ``eos_token_id`` among them and to at most ``remaining`` tokens (the
    generation ends with a cut block). A list of 1 to ``result.num_accepted + 1`` token ids."""
    block = [draft.tokens[i] for i in result.path] + [result.next_token]
    cut = min(len(block), remaining)
    if eos_token_id is not None and eos_token_id in block[:cut]:
        cut = block.index(eos_token_id) + 1
    return block[:cut]


def hand_over(drafter, observe, result, block: list, logits: torch.Tensor, hidden) -> None:
    """Tell ``drafter`` what one step committed: ``observe(TargetOutput)`` (when the drafter has it) with the rows of
    the committed path, then ``update(num_accepted, next_token)``. A step the generation cut (``block`` shorter than
    the accepted drafts plus the target's token: an EOS among the accepted drafts, or ``max_new_tokens`` reached) is
    reported as the text that was committed: its last token stands as ``next_token`` and the drafts before it as the
    accepted ones, so a drafter that keeps outputs across requests (suffix decoding's cache) never stores a token
    past the end of the answer. ``logits`` ``[rows, V]`` and ``hidden`` (``[rows, D]`` or a list of them, or None)
    are the step's target rows."""
    kept = len(block) - 1  # the accepted drafts that stay; all of them unless the step was cut
    if observe is not None:
        observe(TargetOutput(logits, hidden, [0] + [1 + i for i in result.path[:kept]]))
    drafter.update(kept, block[-1])


def _check_draft(draft, drafter, vocab: int) -> Draft:
    """The drafter's proposal with its token ids as plain ints, checked once per step: O(n) on the tokens, and on
    ``probs`` (when given) O(n·V) over its n small rows. Raises ``TypeError`` / ``ValueError`` naming the
    drafter's class: a ``propose`` that returns no :class:`Draft`, token ids that are not integers or lie outside
    ``[0, V)``, or ``probs`` that is not ``[n, V]``, holds NaN/inf/negative entries, has rows not summing to 1,
    or gives a drafted token probability 0 (rejection sampling would then accept that token always, silently
    breaking exactness). ``probs`` come back as float32 on the CPU, where verification draws with the call's CPU
    generator, whatever device the drafter used; the checks run on the float32 values, so rows of a low-precision
    dtype must still sum to 1 within 1e-3 (bfloat16 rows often do not: sample in float32)."""
    who = type(drafter).__name__
    if not isinstance(draft, Draft):
        raise TypeError(f"{who}.propose must return a lab.drafters.Draft (e.g. Draft(tokens)), got "
                        f"{type(draft).__name__}")
    tokens = check_token_ids(f"Draft.tokens (from {who}.propose)", draft.tokens, vocab, allow_empty=True)
    extra = (check_token_ids(f"Draft.extra_tokens (from {who}.propose)", draft.extra_tokens, vocab, allow_empty=True)
             if draft.extra_tokens else draft.extra_tokens)
    if extra and not all(is_integer(offset) for offset in draft.extra_positions):  # checked before any int()
        raise ValueError(f"{who}.propose returned Draft.extra_positions that are not integer offsets: "
                         f"{list(draft.extra_positions)}")
    probs, n = draft.probs, len(tokens)
    if probs is not None:
        if not isinstance(probs, torch.Tensor) or not probs.is_floating_point() or tuple(probs.shape) != (n, vocab):
            raise ValueError(f"{who}.propose returned Draft.probs of {type(probs).__name__} "
                             f"{tuple(getattr(probs, 'shape', ()))}; it must be None or a float tensor [len(tokens), "
                             f"V] = [{n}, {vocab}], row i the distribution token i was drawn from")
        probs = probs.detach().to("cpu", torch.float32)
        if n:
            own = probs[torch.arange(n), torch.tensor(tokens)]
            rows = probs.sum(-1, dtype=torch.float64)
            bad = ~torch.isfinite(probs).all() | (probs.min() < 0) | (own.min() <= 0) | ((rows - 1).abs().max() > 1e-3)
            if bad:  # one sync per step; which rule broke is worked out only when one did
                if not torch.isfinite(probs).all() or probs.min() < 0:
                    why = "NaN, inf or negative entries"
                elif own.min() <= 0:
                    where = (own <= 0).nonzero().flatten().tolist()
                    why = f"probability 0 for its own drafted token at positions {where}"
                else:
                    why = f"rows that do not sum to 1 (sums {[round(float(r), 4) for r in rows]})"
                raise ValueError(f"{who}.propose returned Draft.probs with {why}; each row must be the distribution "
                                 "its token was drawn from (None for a deterministic drafter)")
    return dataclasses.replace(draft, tokens=tokens, extra_tokens=extra, probs=probs)


def _fit_context(draft: Draft, room: int) -> Draft:
    """``draft`` cut to the ``room`` positions left in the target's context after the last committed token.

    A drafter that ignores ``request.max_tokens`` may propose past the end of the context: a chain keeps its
    first ``room`` tokens, a tree its nodes of level < ``room`` (renumbered; children follow their parents, so
    parents stay before children), and ``probs`` the matching rows. Extra tokens (Lookahead's window) are never
    committed; those past the end sit at the last position instead, where their guesses are never needed."""
    if draft.parents is None:
        cut = len(draft.tokens) > room
        if cut:
            draft = dataclasses.replace(draft, tokens=draft.tokens[:room],
                                        probs=None if draft.probs is None else draft.probs[:room])
    elif len(draft.tokens) > room:  # a tree of n nodes is at most n levels deep
        level = depths(draft.parents).tolist()
        if max(level) >= room:
            keep = [i for i, d in enumerate(level) if d < room]
            new_index = {old: new for new, old in enumerate(keep)}
            draft = dataclasses.replace(
                draft, tokens=[draft.tokens[i] for i in keep],
                parents=[-1 if draft.parents[i] < 0 else new_index[int(draft.parents[i])] for i in keep],
                probs=None if draft.probs is None else draft.probs[keep])
    if draft.extra_tokens and any(int(offset) > room for offset in draft.extra_positions):
        draft = dataclasses.replace(draft, extra_positions=[min(int(offset), room) for offset in draft.extra_positions])
    return draft


def _check_tree(draft: Draft) -> list[int]:
    parents = check_parents(draft.parents)
    if len(parents) != len(draft.tokens):
        raise ValueError(f"Draft.parents must have one entry per draft token ({len(draft.tokens)}), "
                         f"got {len(parents)}")
    if draft.extra_tokens:
        raise ValueError("a draft is either a token tree or carries extra tokens, not both")
    return parents


def branch_layout(base: int, n: int, draft: Draft) -> dict:
    """Attention mask ``[q, q]`` over the step's new tokens and their position ids, for ``[last] + drafts + extra``.

    ``[last] + drafts`` is causal at positions ``base .. base + n`` for a chain; for a tree (``draft.parents``)
    each node sees ``last``, its ancestors and itself and sits at ``base + d`` for a node of depth d (first
    level d = 1; ``base + 1 + lab.trees.depths``). The
    drafts never see the extra tokens; extra row i sits at ``base + extra_positions[i]`` and sees what
    ``draft.extra_mask[i]`` allows. Raises ``ValueError`` if the drafter's mask or positions do not match its
    extra tokens, the mask is not bool (or 0/1 integers) or an offset is not an integer."""
    extra = len(draft.extra_tokens)
    q = 1 + n + extra
    mask = torch.zeros(q, q, dtype=torch.bool)
    if draft.parents is not None:
        parents = [p + 1 for p in draft.parents]  # as a tree under `last`, which becomes node 0
        mask[: 1 + n, : 1 + n] = tree_attention_mask([-1] + parents, 0)
        positions = [base] + (depths(draft.parents) + base + 1).tolist()
        return {"attention_mask": mask, "position_ids": positions}
    extra_mask = torch.as_tensor(draft.extra_mask) if draft.extra_mask is not None else None
    if extra_mask is not None:
        # an additive 0 / -inf float mask cast to bool would be read inverted; 0/1 integers are taken as bool
        if extra_mask.is_floating_point() or extra_mask.is_complex() or (
                extra_mask.dtype != torch.bool and bool(((extra_mask != 0) & (extra_mask != 1)).any())):
            raise ValueError(f"Draft.extra_mask must be bool (True: may attend) or 0/1 integers, got dtype "
                             f"{extra_mask.dtype}")
        extra_mask = extra_mask.to(torch.bool)
    if draft.extra_positions is not None and not all(is_integer(offset) for offset in draft.extra_positions):
        raise ValueError(f"Draft.extra_positions must be integer offsets, got {list(draft.extra_positions)}")
    if extra_mask is None or tuple(extra_mask.shape) != (extra, q) or len(draft.extra_positions) != extra:
        raise ValueError(f"a draft with {extra} extra tokens needs extra_mask [{extra}, {q}] and {extra} "
                         "extra_positions")
    mask[: 1 + n, : 1 + n] = torch.ones(1 + n, 1 + n, dtype=torch.bool).tril()
    mask[1 + n:] = extra_mask
    positions = list(range(base, base + n + 1)) + [base + int(offset) for offset in draft.extra_positions]
    return {"attention_mask": mask, "position_ids": positions}


def autoregressive(target, prompt_ids, **kwargs) -> Generation:
    """Plain one-token-per-call decoding: :func:`generate` with no drafter (same arguments, same return value,
    raises ``TypeError`` / ``ValueError`` as it does). The baseline whose one target pass per token lesson 01
    measures; every speedup in the course is relative to it."""
    return generate(target, prompt_ids, drafter=None, **kwargs)
