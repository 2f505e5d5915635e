"""Side-by-side timing: lab autoregressive, lab speculative, transformers ``generate`` and transformers assisted
generation (``generate(assistant_model=…)``), on the same pair, prompts and settings, in one run; optionally also
lab prompt lookup (vs transformers' ``prompt_lookup_num_tokens``; :data:`SAME_RULE` looks up as transformers does, so
that row compares the loops alone), lab Lookahead decoding (lessons 08–09), and the
drafters that read the target itself: Medusa heads, the EAGLE draft and an early-exit draft (lessons 10–11).

Greedy decoding: in float32 every method must produce identical tokens, and the table says whether they did; in
bfloat16 it reports how far each agrees with lab autoregressive decoding (:func:`agreement_with`). Each method runs
once on a short warm-up, then once per prompt, the methods interleaved prompt by prompt; tokens/s = new tokens /
total wall time (prefill included; the drafter is built, and Medusa / EAGLE weights read, before the clock starts,
as in the arena). For a fair comparison transformers' assistant drafts the same fixed N per step as ours
(``num_assistant_tokens_schedule = "constant"``, no confidence stop) instead of its default policy, and each table's
settings line says so; with the draft model named (``drafters``), two more rows compare both loops under that
default policy (:data:`SAME_POLICY`). Results keep unrounded numbers; the tables round as they print.
Also here: the target's K-token cost curve (:func:`cost_curve`, other timings such as the draft's forward in the
same rounds), the draft model at several N (:func:`sweep_n_draft`, with decode-only speedups: :func:`pool_runs`)
and the speedup predicted with the measured verification cost (:func:`speedup_with_verify_cost`). ``python -m lab
bench`` (:mod:`lab.cli.bench`) prints the tables and the goal lines (:func:`goal_record`, :func:`goal_lines`):
speed goals are benchmarks, never timed tests.

The drafter arena, which runs every drafter on several kinds of task, is :mod:`lab.arena`.
"""
from __future__ import annotations

import time
from contextlib import contextmanager

import torch

from lab.costs import draft_step_ms, eagle_step_ms  # re-exported: the CLI and tests import them here
from lab.goals import NOT_MEASURED, goal_lines, goal_met, goal_record, not_judged  # re-exported: the bench's goal lines
from lab.load_meter import LoadMeter
from lab.models import processor_name, synchronize
from lab.prompts import check_prompts, context_problem, encode_prompts
from lab.drafters.eagle import saved_draft_vocab
from lab.registry import DRAFTER_SPECS, DRAFTERS, check_has_draft, make_drafter
from lab.validation import check_int, check_number, check_sampling_args

__all__ = ["run_bench", "format_table", "agreement_with", "cost_curve", "COST_CURVE_TOKENS", "speedup_with_verify_cost",
           "goal_met", "goal_lines", "not_judged", "eagle_step_ms", "sweep_n_draft", "SWEEP_N", "BASE_METHODS",
           "EXTRA_METHODS",
           "threads_label", "repeats_label", "run_fastest", "run_interleaved", "time_methods", "format_timing",
           "DRAFTER_METHODS", "BASELINE_METHODS", "check_drafters", "bench_rows", "HF_ASSISTED_POLICY", "SAME_POLICY",
           "SAME_RULE", "HF_LOOKUP_RULE", "FR_SPEC", "draft_step_ms", "pool_runs", "goal_record", "NOT_MEASURED",
           "NO_DECODE_STEP", "needs_draft_model", "EAGLE3_TREE", "EAGLE3_TREE_SHAPE"]

BASE_METHODS = ("lab autoregressive", "lab speculative", "HF generate", "HF assisted")
SAME_RULE = "lab prompt lookup, HF's rule"
"""The bench row of prompt lookup with transformers' own lookup (:data:`HF_LOOKUP_RULE`), beside "HF prompt lookup":
the same proposals (but for transformers' cut of a proposal at its first EOS), so the two rows compare the decode
loops; "lab prompt lookup" keeps the course's rule."""
HF_LOOKUP_RULE = (2, "earliest")
"""transformers' prompt lookup as ``(max_ngram, match)`` of :class:`lab.drafters.PromptLookupDrafter`: n-grams of at
most 2 tokens (``max_matching_ngram_size`` defaults to 2) and the earliest earlier occurrence
(``PromptLookupCandidateGenerator`` in ``generation/candidate_generator.py``, transformers 5.25)."""
FR_SPEC = "lab speculative, FR-Spec head"
"""The bench row of the draft model drafting with its LM head cut to the pair's draft vocabulary
(``DraftModelDrafter(draft, N, draft_vocab=saved_draft_vocab(pair))``, FR-Spec: Zhao et al. 2025, §3): the same draft
weights and N as "lab speculative", compared with "HF assisted" too. Only for a pair whose EAGLE draft has a draft
vocabulary (:func:`lab.drafters.eagle.saved_draft_vocab`: the real pair); run_bench's ``extra`` may name it."""
EAGLE3_TREE = "lab EAGLE-3, dynamic tree"
"""The bench row of the EAGLE-3 draft on an EAGLE-2 dynamic tree of :data:`EAGLE3_TREE_SHAPE`: the chat pair's bench
times it by default (its trained-drafter goal takes the best row), ``drafters`` naming eagle3 beside the chain."""
EAGLE3_TREE_SHAPE = (3, 3, 8)
"""``lab.drafters.DynamicTree(num_steps, topk, num_draft_tokens)`` of :data:`EAGLE3_TREE`: the fastest shape on chat
requests in the real pair's committed ``tree_shapes.json`` (``tools/tree_shapes.py``)."""
BASELINE_METHODS = ("lab autoregressive", "HF generate")
"""The rows every bench keeps, also when ``drafters`` narrows it: the two autoregressive baselines."""
HF_ASSISTED_POLICY = (20, 0.4)
"""transformers' default drafting policy for assisted generation, (``num_assistant_tokens``,
``assistant_confidence_threshold``): up to 20 draft tokens a step, stopping after one whose draft probability is
below 0.4 (``generation/configuration_utils.py`` defaults, transformers 5.25; with scikit-learn installed transformers
also retunes the threshold as it goes, which this course's environment does not)."""
SAME_POLICY = ("lab speculative, HF's default policy", "HF assisted, its default policy")
"""The two bench rows that draft with :data:`HF_ASSISTED_POLICY` instead of a fixed N: the draft model in the lab's
loop (``DraftModelDrafter(draft, 20, confidence=0.4)``) and transformers' assisted generation left at its defaults.
The first row's × HF counterpart is over the second; "lab speculative" and "HF assisted" both draft a fixed N."""
_COUNTERPARTS = {"model": ("HF assisted",) + SAME_POLICY, "ngram": (SAME_RULE, "HF prompt lookup"),
                 "eagle3": (EAGLE3_TREE,)}
DRAFTER_METHODS = {name: (spec.bench_row,) + _COUNTERPARTS.get(name, ()) for name, spec in DRAFTER_SPECS.items()}
"""Each drafter of :data:`lab.registry.DRAFTERS` -> the bench rows that time it: its own row
(:attr:`lab.registry.DrafterSpec.bench_row`, the drafter :func:`lab.registry.make_drafter` builds) and, where there
is one, transformers' counterpart or a variant (the draft model with transformers' policy, prompt lookup with
transformers' rule, EAGLE-3 on a dynamic tree). The rows beyond :data:`BASE_METHODS` and :data:`EXTRA_METHODS`
run only when ``drafters`` names them, so a plain bench times what it always did; but ``python -m lab bench`` on
the real pair adds :data:`EAGLE3_TREE` (and :data:`FR_SPEC`) to its extras."""
EXTRA_METHODS = tuple(row for name, spec in DRAFTER_SPECS.items() if spec.plain_bench and name != "model"
                      for row in DRAFTER_METHODS[name])
"""The rows a bench may add to :data:`BASE_METHODS` (``run_bench``'s ``extra``): those of every drafter but the
draft model (already there) whose record says a plain bench times it (:attr:`lab.registry.DrafterSpec.plain_bench`),
in the registry's order: prompt lookup (ours, ours with transformers' rule, transformers'), Lookahead, Medusa, EAGLE,
the early exit."""


def bench_rows(extra=(), drafters=None) -> tuple:
    """The methods a bench times, in table order: :data:`BASE_METHODS` plus ``extra`` (names of
    :data:`EXTRA_METHODS`), or, when ``drafters`` is given (checked names, :func:`check_drafters`),
    :data:`BASELINE_METHODS` plus those drafters' rows (:data:`DRAFTER_METHODS`)."""
    if drafters is None:
        wanted = set(BASE_METHODS) | set(extra)
    else:
        wanted = set(BASELINE_METHODS) | {row for name in drafters for row in DRAFTER_METHODS[name]}
    order = BASE_METHODS[:1] + DRAFTER_METHODS["model"][:1] + (FR_SPEC,) + BASE_METHODS[2:3] + \
        DRAFTER_METHODS["model"][1:] + \
        tuple(row for name in DRAFTERS if name != "model" for row in DRAFTER_METHODS[name])
    return tuple(name for name in order if name in wanted)


def check_drafters(names, what: str = "drafters") -> tuple:
    """The drafter names ``names`` asks for, checked: a string (one name, or several comma-separated) or a list of
    such strings (a repeated ``--drafter``); returns them as a tuple in the order first given, each once.

    Raises ``ValueError`` naming ``what`` and listing :data:`lab.registry.DRAFTERS` for a name not among them (an
    empty one included) or when nothing is named."""
    items = [names] if isinstance(names, str) else list(names)
    chosen = []
    for item in items:
        if not isinstance(item, str):
            raise ValueError(f"{what} must be drafter names (str), got {type(item).__name__} {item!r}")
        for name in item.split(","):
            name = name.strip()
            if name not in DRAFTERS:
                raise ValueError(f"{what} must be one of {', '.join(DRAFTERS)} (comma-separated or repeated); "
                                 f"got {name!r}")
            if name not in chosen:
                chosen.append(name)
    if not chosen:
        raise ValueError(f"{what} must name at least one of {', '.join(DRAFTERS)}")
    return tuple(chosen)


def threads_label(count: int) -> str:
    """``"1 thread"`` or ``"N threads"``, for the tables' settings lines."""
    return f"{count} thread" + ("" if count == 1 else "s")


def repeats_label(count: int) -> str:
    """``"one timing per prompt"`` or ``"fastest of N"`` (timings per prompt), for the tables' settings lines."""
    return "one timing per prompt" if count == 1 else f"fastest of {count}"


def _rotated(names: list, i: int) -> list:
    """``names`` started at index ``i`` (mod its length): over the prompts, no method always runs first."""
    k = i % len(names)
    return names[k:] + names[:k]


def run_fastest(pair, ids, drafter_factory, temperature: float = 0.0, seed: int = 0, max_new_tokens: int = 64,
                repeats: int = 1):
    """``(generation, drafter)``: the fastest (by ``stats["wall_ms"]``) of ``repeats`` identical runs of
    :func:`lab.decode.generate` on one prompt's token ids, stopping at ``pair.eos_token_id``. ``drafter_factory``:
    a callable returning a fresh drafter, built before each run's clock starts, or None for autoregressive
    decoding (the drafter is then None)."""
    from lab.decode import generate

    best = None
    for _ in range(repeats):
        drafter = drafter_factory() if drafter_factory is not None else None
        synchronize(pair.device)
        gen = generate(pair.target, ids, drafter=drafter, max_new_tokens=max_new_tokens, temperature=temperature,
                       seed=seed, eos_token_id=pair.eos_token_id)
        synchronize(pair.device)
        if best is None or gen.stats["wall_ms"] < best[0].stats["wall_ms"]:
            best = (gen, drafter)
    return best


def run_interleaved(pair, encoded, methods: dict, temperature: float = 0.0, seed: int = 0, max_new_tokens: int = 64,
                    repeats: int = 1, tick=None) -> dict:
    """``{name: [(generation, drafter)] per prompt}`` for ``methods`` = {name: drafter factory or None}, on the
    prompts ``encoded`` (lists of token ids). Prompt by prompt, every method in turn (:func:`run_fastest`; prompt i
    with seed ``seed + i``), the order rotating from one prompt to the next: a change of load between prompts hits
    every method alike, and no method always runs first. ``tick()`` is called after each method's turn."""
    runs = {name: [] for name in methods}
    for i, ids in enumerate(encoded):
        for name in _rotated(list(methods), i):
            runs[name].append(run_fastest(pair, ids, methods[name], temperature, seed + i, max_new_tokens, repeats))
            if tick is not None:
                tick()
    return runs


def time_methods(pair, prompts, methods: dict, *, max_new_tokens: int = 64, temperature: float = 0.0,
                 seed: int = 0, repeats: int = 1) -> dict:
    """Time decoding methods on the same prompts, interleaved, with the machine's load measured: what lessons use
    to compare speeds on the learner's own machine.

    ``prompts``: strings, encoded by :func:`lab.prompts.encode_prompts` (a user turn for a chat pair).
    ``methods``: {name: drafter factory (a callable returning a fresh drafter) or None (autoregressive)}; the first
    is the baseline of the ``speedup`` column. Each method first runs once on a short warm-up (first-call
    allocations), then :func:`run_interleaved` runs them prompt by prompt, the fastest of ``repeats`` per prompt,
    inside a :class:`lab.load_meter.LoadMeter`.

    Returns ``{"rows": [...], "generations": {name: [Generation per prompt]}, "load": LoadMeter.summary(),
    "note": LoadMeter.note(), "settings": {...}}`` (``settings`` name the pair, device, processor, dtype, threads and
    the run's arguments); each row: ``method``, ``new_tokens``, ``seconds`` (wall,
    prefill included; to 0.001), ``tokens_per_second`` (to 0.01), ``speedup`` (tokens/s ÷ the first method's,
    divided unrounded, to 0.01; no goal is judged on it, and the EAGLE-3 cards print these rows as they are), and
    for drafters (:func:`pool_runs`, to 0.001) ``acceptance_rate`` (None when nothing was drafted), ``alpha``
    (:func:`lab.metrics.alpha_from_steps`; None when no draft was examined), ``tokens_per_target_call`` (None when
    no decode step ran: every answer ended at the prefill's token), ``target_calls``. Raises ``ValueError`` naming
    the argument for empty or non-callable ``methods``, bad ``max_new_tokens`` / ``repeats`` / ``temperature``,
    prompts that do not fit the target's context; ``TypeError`` for ``prompts`` that is not a list of strings."""
    prompts = check_prompts(prompts)
    if not isinstance(methods, dict) or not methods:
        raise ValueError("methods must be a non-empty dict {name: drafter factory or None}, got "
                         f"{type(methods).__name__ if not isinstance(methods, dict) else 'an empty dict'}")
    wrong = [name for name, factory in methods.items() if factory is not None and not callable(factory)]
    if wrong:
        raise ValueError(f"methods[{wrong[0]!r}] must be a callable returning a fresh drafter, or None for "
                         f"autoregressive decoding, got {type(methods[wrong[0]]).__name__}")
    max_new_tokens, repeats = check_int("max_new_tokens", max_new_tokens, 1), check_int("repeats", repeats, 1)
    temperature = check_sampling_args(temperature)[0]
    encoded = encode_prompts(pair, prompts)
    problem = context_problem(pair, encoded, max_new_tokens)
    if problem:
        raise ValueError(f"max_new_tokens: {problem}; shorten the prompts or lower max_new_tokens")
    for factory in methods.values():
        run_fastest(pair, encoded[0][:16], factory, temperature, seed, 8, 1)  # warm-up
    with LoadMeter() as meter:
        runs = run_interleaved(pair, encoded, methods, temperature, seed, max_new_tokens, repeats)
    rows, rates = [], []
    for name, method_runs in runs.items():
        pooled = pool_runs(gen for gen, _ in method_runs)
        rates.append(pooled["tokens_per_second"])  # the speedup divides these, not the rounded rates
        row = {"method": name, "new_tokens": pooled["new_tokens"], "seconds": round(pooled["wall_ms"] / 1000, 3),
               "tokens_per_second": round(pooled["tokens_per_second"], 2)}
        if methods[name] is not None:  # None stays None: nothing drafted, no draft examined, no decode step
            row.update({key: None if pooled[key] is None else round(pooled[key], 3)
                        for key in ("acceptance_rate", "alpha", "tokens_per_target_call")})
            row["target_calls"] = pooled["target_calls"]
        rows.append(row)
    for row, rate in zip(rows, rates):
        row["speedup"] = round(rate / rates[0], 2)
    settings = {"pair": pair.name, "device": str(pair.device), "processor": processor_name(pair.device),
                "dtype": str(pair.dtype).replace("torch.", ""), "threads": torch.get_num_threads(),
                "prompts": len(prompts), "max_new_tokens": max_new_tokens, "temperature": temperature, "seed": seed,
                "repeats": repeats}
    return {"rows": rows, "generations": {name: [g for g, _ in r] for name, r in runs.items()},
            "load": meter.summary(), "note": meter.note(), "settings": settings}


NO_DECODE_STEP = "n/a (no decode step)"
"""What the tables print for a drafter's tokens per target call (and a decode-only ratio) when no decode step ran:
every answer ended at its first new token, which the prefill writes."""


def format_number(value, digits: int, missing: str = "n/a") -> str:
    """``value`` with ``digits`` decimals, or ``missing`` for None: the tables round only when they print."""
    return missing if value is None else f"{value:.{digits}f}"


def pool_runs(gens) -> dict:
    """Pooled measurements of ``gens``, lab generations (:func:`lab.decode.generate`, one per prompt): sums over the
    prompts, then ratios. The keys of :func:`lab.metrics.summarize_steps` over every prompt's steps (counts over
    decode steps, each prefill record left out; ``acceptance_rate`` None when nothing was drafted,
    ``tokens_per_target_call`` None when no decode step ran), plus ``alpha`` (:func:`lab.metrics.alpha_from_steps`;
    None when no draft was examined), ``decoded_tokens`` (the new tokens less each prompt's first, the prefill's),
    ``prefill_ms`` (the prompts' ``stats["prefill_ms"]``: the target's prefill and the drafter's reset, a draft
    model's own prefill included), ``decode_ms`` (wall less prefill) and ``decode_tokens_per_second`` (decoded
    tokens over decode time; None when no decode step ran). Times in ms. Raises ``TypeError`` when an item is not a
    generation (no ``steps`` / ``stats``)."""
    from lab.metrics import alpha_from_steps, summarize_steps

    gens = list(gens)
    if not all(hasattr(g, "steps") and hasattr(g, "stats") for g in gens):
        raise TypeError("gens must be lab.decode.generate's generations (with .steps and .stats)")
    steps = [s for g in gens for s in g.steps]
    tokens = sum(len(g.tokens) for g in gens)
    wall = sum(g.stats["wall_ms"] for g in gens)
    prefill = sum(g.stats["prefill_ms"] for g in gens)
    pooled = summarize_steps(steps, tokens, wall)
    decoded, decode_ms = tokens - len(gens), wall - prefill
    rate = decoded / (decode_ms / 1000) if pooled["target_calls"] and decode_ms > 0 else None
    return {**pooled, "alpha": alpha_from_steps(steps), "decoded_tokens": decoded, "prefill_ms": prefill,
            "decode_ms": decode_ms, "decode_tokens_per_second": rate}


def format_timing(result: dict) -> str:
    """:func:`time_methods`' result as a Markdown table, a settings line and the load note; n/a where a drafter
    drafted nothing (acceptance rate) or had no draft examined (α), :data:`NO_DECODE_STEP` without decode steps."""
    s = result["settings"]
    lines = [f"pair {s['pair']} on {s['device']} ({s['dtype']}, {threads_label(s['threads'])}), {s['prompts']} "
             f"prompt{'' if s['prompts'] == 1 else 's'} × up to {s['max_new_tokens']} new "
             f"token{'' if s['max_new_tokens'] == 1 else 's'}, "
             f"T = {s['temperature']:g}, methods interleaved prompt by prompt, {repeats_label(s['repeats'])}", "",
             "| method | tokens/s | speedup | acceptance rate | α | tokens per target call |",
             "|---|---|---|---|---|---|"]
    for row in result["rows"]:
        extra = (f"{format_number(row['acceptance_rate'], 2)} | {format_number(row['alpha'], 2)} | "
                 f"{format_number(row['tokens_per_target_call'], 2, NO_DECODE_STEP)}" if "alpha" in row else " | | ")
        lines.append(f"| {row['method']} | {row['tokens_per_second']:.1f} | {row['speedup']:.2f}× | {extra} |")
    return "\n".join(lines + ["", result["note"]])


def run_bench(pair, prompts: list[str], max_new_tokens: int = 128, n_draft: int = 4, extra=(),
              lookup_n_draft: int = 5, drafters=None) -> dict:
    """Time the four base methods (plus any of :data:`EXTRA_METHODS` named in ``extra``) on ``prompts``; or, when
    ``drafters`` names drafters (:func:`check_drafters`: registry names, e.g. ``("parallel",)`` or ``"model,eagle"``),
    only :data:`BASELINE_METHODS` and those drafters' rows (:data:`DRAFTER_METHODS`), ``extra`` left empty.

    Returns {"rows": [...], "identical": bool, "mismatched": [...], "settings": {...}}. Each row (unrounded:
    :func:`format_table` rounds): method, tokens (total new), seconds, tokens_per_second, and for lab drafters
    ``acceptance_rate`` (accepted ÷ drafted; None when nothing was drafted), ``alpha``
    (:func:`lab.metrics.alpha_from_steps` over every prompt's steps: accepted ÷ examined; None when no draft was
    examined), ``target_calls`` (decode steps) and ``tokens_per_target_call`` (the decode steps' tokens, each
    prompt's first new token, the prefill's, left out; None when no decode step ran); transformers' rows have
    neither. Ratios are against lab autoregressive and against the transformers counterpart (HF assisted for lab
    speculative, HF prompt lookup for lab prompt lookup and :data:`SAME_RULE`). ``n_draft`` is the draft model's N;
    prompt lookup drafts ``lookup_n_draft`` tokens from n-grams of up to 3
    (``PromptLookupDrafter(n_draft=lookup_n_draft)``; :data:`SAME_RULE` with :data:`HF_LOOKUP_RULE`), and
    transformers' ``prompt_lookup_num_tokens=lookup_n_draft``; Lookahead uses ``LookaheadDrafter()``;
    :data:`EAGLE3_TREE` the pair's EAGLE-3 draft on a :data:`EAGLE3_TREE_SHAPE` dynamic tree. Prompts are
    encoded by :func:`lab.prompts.encode_prompts` (as chat requests for a chat pair). Methods run prompt by prompt,
    each in turn (the order rotating), so a change in load hits all alike; ``settings["load"]`` holds the 1-minute
    load average before and after, ``settings["load_note"]`` the :class:`lab.load_meter.LoadMeter` note.
    ``agreement`` gives, per method, :func:`agreement_with` lab autoregressive decoding: in float32 all must be
    identical, in bfloat16 rounding may part them. ``pair.draft.generation_config`` is set for transformers'
    assistant during the run (N, a constant schedule, no confidence threshold) and put back afterwards; the
    settings record it (``hf_assistant``; ``hf_default_policy`` and ``sklearn_available`` for :data:`SAME_POLICY`,
    whose threshold transformers retunes when scikit-learn is installed), and the lookup rules (``lookup_n_draft``,
    ``lookup_rule``) where prompt lookup was timed; ``settings["extra"]`` says the same in words.

    Raises ``TypeError`` when ``prompts`` is not a list (or other sequence) of strings, e.g. a bare string;
    ``ValueError`` for an empty list or a prompt with no tokens, an unknown method or drafter, both ``extra`` and
    ``drafters``, ``max_new_tokens``, ``n_draft`` or ``lookup_n_draft`` that is not an integer >= 1, a prompt that
    with ``max_new_tokens`` exceeds the target's context, or a pair without a draft model when a row needs one
    (:func:`needs_draft_model`: every bench but ``drafters`` without ``"model"``).
    """
    prompts = check_prompts(prompts)
    max_new_tokens, n_draft = check_int("max_new_tokens", max_new_tokens, 1), check_int("n_draft", n_draft, 1)
    lookup_n_draft = check_int("lookup_n_draft", lookup_n_draft, 1)
    unknown = [name for name in extra if name not in EXTRA_METHODS + (FR_SPEC, EAGLE3_TREE)]
    if unknown:
        raise ValueError(f"extra must name methods from {EXTRA_METHODS + (FR_SPEC, EAGLE3_TREE)}, got {unknown}")
    if FR_SPEC in extra and saved_draft_vocab(pair) is None:
        raise ValueError(f"extra names {FR_SPEC!r}, but the {pair.name!r} pair has no draft vocabulary (its EAGLE "
                         "draft scores the whole vocabulary, or it has none)")
    if drafters is not None:
        drafters = check_drafters(drafters)
        if extra:
            raise ValueError(f"give extra or drafters, not both; got extra={tuple(extra)}, drafters={drafters}")
    if needs_draft_model(extra, drafters):
        check_has_draft(pair, "run_bench (lab speculative and transformers' assisted generation)")
    encoded = encode_prompts(pair, prompts)
    problem = context_problem(pair, encoded, max_new_tokens)
    if problem:
        raise ValueError(f"max_new_tokens: {problem}; shorten the prompts or lower max_new_tokens")

    if pair.draft is None:  # no assistant to set up: no row drafts with the draft model
        return _run_bench(pair, prompts, encoded, max_new_tokens, n_draft, extra, lookup_n_draft, drafters)
    with _assistant_policy(pair.draft, n_draft, 0.0):  # the same fixed N as ours, no confidence stop
        return _run_bench(pair, prompts, encoded, max_new_tokens, n_draft, extra, lookup_n_draft, drafters)


def needs_draft_model(extra=(), drafters=None) -> bool:
    """Whether the bench rows of ``extra`` / ``drafters`` (as :func:`bench_rows` takes them; ``drafters`` checked)
    include one that drafts with the pair's draft model (:data:`DRAFTER_METHODS` ``["model"]``, :data:`FR_SPEC`):
    every bench does but one that names ``drafters`` without ``"model"``."""
    return any(row in DRAFTER_METHODS["model"] + (FR_SPEC,) for row in bench_rows(extra, drafters))


_MISSING = object()


def _policy(n_draft: int, confidence: float) -> dict:
    """The generation-config fields transformers' assistant drafts with: ``n_draft`` a step, a constant schedule,
    a stop after a draft token below probability ``confidence`` (0: never)."""
    return {"num_assistant_tokens": n_draft, "num_assistant_tokens_schedule": "constant",
            "assistant_confidence_threshold": confidence}


@contextmanager
def _assistant_policy(assistant, n_draft: int, confidence: float):
    """transformers' assisted generation drafts with ``assistant``'s generation config: for the block, a constant
    ``n_draft`` per step stopping below draft probability ``confidence`` (0: never); then the config as it was (the
    pair is shared by lessons and tests)."""
    config = assistant.generation_config
    policy = _policy(n_draft, confidence)
    saved = {key: getattr(config, key, _MISSING) for key in policy}
    for key, value in policy.items():
        setattr(config, key, value)
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is _MISSING:
                delattr(config, key)
            else:
                setattr(config, key, value)


def _run_bench(pair, prompts, encoded, max_new_tokens, n_draft, extra, lookup_n_draft, drafters=None) -> dict:
    from lab.decode import generate
    from lab.drafters import DraftModelDrafter, DynamicTree, Eagle3Drafter, PromptLookupDrafter
    from lab.metrics import alpha_from_steps, summarize_steps

    target, draft, eos = pair.target, pair.draft, pair.eos_token_id

    def hf(ids, assistant=None, lookup=None):
        from transformers.utils import logging as hf_logging

        x = torch.tensor([ids], device=pair.device)
        more = {"prompt_lookup_num_tokens": lookup} if lookup else {}
        # transformers' assisted generation calls the assistant's generate with a generation_config and explicit
        # lengths, which its own deprecation check then reports (5.24); our arguments are not the cause.
        verbosity = hf_logging.get_verbosity()
        hf_logging.set_verbosity_error()
        try:
            out = target.generate(x, attention_mask=torch.ones_like(x), max_new_tokens=max_new_tokens,
                                  do_sample=False, eos_token_id=eos, pad_token_id=eos, assistant_model=assistant,
                                  **more)
        finally:
            hf_logging.set_verbosity(verbosity)
        return {"tokens": out[0, len(ids):].tolist()}

    def _hf_default_policy(ids):
        with _assistant_policy(draft, *HF_ASSISTED_POLICY):  # then the bench's fixed N again
            return hf(ids, assistant=draft)

    def ours(build):
        """A method whose set-up calls ``build()`` for a fresh drafter (reading Medusa / EAGLE weights from disk), so
        that the timed call that follows decodes only. transformers builds its candidate generator inside
        ``generate``, so the HF rows' set-up (cheap next to a prompt's decoding) stays on the clock."""
        def prepare():
            drafter = build()
            return lambda ids: _lab_run(ids, drafter)
        return prepare

    def _lab_run(ids, drafter):
        gen = generate(target, ids, drafter=drafter, max_new_tokens=max_new_tokens, eos_token_id=eos)
        return {"tokens": gen.tokens, "stats": gen.stats, "steps": gen.steps}

    rows = bench_rows(extra, drafters)
    fr_vocab = saved_draft_vocab(pair) if FR_SPEC in rows else None  # read from disk once, not per prompt
    # name -> set-up, which returns the run to time on one prompt's ids; the set-up is never timed.
    lookup_tokens = lookup_n_draft  # transformers' prompt lookup drafts as many as ours
    methods = {
        # every drafter's own row: the drafter the registry builds (DrafterSpec.bench_row)
        **{spec.bench_row: ours(lambda kind=kind: make_drafter(kind, pair, n_draft))
           for kind, spec in DRAFTER_SPECS.items()},
        "lab autoregressive": ours(lambda: None),
        FR_SPEC: ours(lambda: DraftModelDrafter(draft, n_draft, draft_vocab=fr_vocab)),
        SAME_POLICY[0]: ours(lambda: DraftModelDrafter(draft, HF_ASSISTED_POLICY[0],
                                                       confidence=HF_ASSISTED_POLICY[1])),
        SAME_POLICY[1]: lambda: lambda ids: _hf_default_policy(ids),
        "HF generate": lambda: hf,
        "HF assisted": lambda: lambda ids: hf(ids, assistant=draft),
        # replaces the record's row above: prompt lookup drafts its own N (--lookup-n-draft), not n_draft
        "lab prompt lookup": ours(lambda: make_drafter("ngram", pair, lookup_tokens)),
        SAME_RULE: ours(lambda: PromptLookupDrafter(HF_LOOKUP_RULE[0], lookup_tokens, match=HF_LOOKUP_RULE[1])),
        "HF prompt lookup": lambda: lambda ids: hf(ids, lookup=lookup_tokens),
        EAGLE3_TREE: ours(lambda: Eagle3Drafter.from_pretrained(pair, tree=DynamicTree(*EAGLE3_TREE_SHAPE))),
    }
    untimed = [name for name in rows if name not in methods]
    if untimed:  # a row of DRAFTER_METHODS with nothing here to time it
        raise ValueError(f"lab.bench._run_bench has no timing for the bench row(s) {', '.join(untimed)}: add each "
                         "to its methods")
    methods = {name: methods[name] for name in rows}
    for prepare in methods.values():
        prepare()(encoded[0][:16])  # warm-up: first-call allocations, lazy imports
    totals = {name: {"tokens": 0, "seconds": 0.0, "steps": [], "lab": False} for name in methods}
    outputs = {name: [] for name in methods}
    with LoadMeter() as meter:
        for i, ids in enumerate(encoded):  # prompt by prompt, every method in turn: load changes hit all alike
            for name in _rotated(list(methods), i):
                run = methods[name]()  # a fresh drafter per prompt, built before the clock starts
                synchronize(pair.device)
                t0 = time.perf_counter()
                out = run(ids)
                synchronize(pair.device)
                total = totals[name]
                total["seconds"] += time.perf_counter() - t0
                total["tokens"] += len(out["tokens"])
                outputs[name].append(out["tokens"])
                if "stats" in out:  # the lab's loop: step records (transformers' rows have none)
                    total["lab"] = True
                    total["steps"] += out["steps"]
    results = {}
    for name, total in totals.items():  # unrounded: format_table rounds when it prints
        row = {"method": name, "tokens": total["tokens"], "seconds": total["seconds"],
               "tokens_per_second": total["tokens"] / total["seconds"]}
        if total["lab"] and name != "lab autoregressive":
            # pooled over the prompts as lab.metrics.summarize_steps counts them (decode steps; each prefill record
            # left out): None where nothing was drafted, no draft examined (alpha) or no decode step ran
            pooled = summarize_steps(total["steps"], total["tokens"], total["seconds"] * 1000)
            row.update({key: pooled[key] for key in ("acceptance_rate", "tokens_per_target_call", "target_calls")})
            row["alpha"] = alpha_from_steps(total["steps"])  # accepted / examined
        results[name] = row
    base = results["lab autoregressive"]["tokens_per_second"]
    for row in results.values():
        row["vs_lab_autoregressive"] = row["tokens_per_second"] / base
    results["lab autoregressive"]["vs_hf_counterpart"] = base / results["HF generate"]["tokens_per_second"]
    counterparts = (("lab speculative", "HF assisted"), (FR_SPEC, "HF assisted"), SAME_POLICY,
                    ("lab prompt lookup", "HF prompt lookup"), (SAME_RULE, "HF prompt lookup"))
    for ours_name, theirs in counterparts:
        if ours_name in results and theirs in results:
            results[ours_name]["vs_hf_counterpart"] = (results[ours_name]["tokens_per_second"]
                                                       / results[theirs]["tokens_per_second"])
    reference = outputs["lab autoregressive"]
    agreement = {name: agreement_with(reference, outs) for name, outs in outputs.items()}
    identical = all(outs == reference for outs in outputs.values())
    mismatched = [name for name, outs in outputs.items() if outs != reference]
    settings = {"pair": pair.name, "device": str(pair.device), "processor": processor_name(pair.device),
                "dtype": str(pair.dtype).replace("torch.", ""),
                "prompts": len(prompts), "max_new_tokens": max_new_tokens, "n_draft": n_draft, "greedy": True,
                "threads": torch.get_num_threads(), "load": list(meter.load_average), "other_cores": meter.summary()[
                    "other_cores"], "busy": meter.busy, "load_note": meter.note()}
    if drafters is not None:
        settings["drafters"] = list(drafters)
    settings.update(_row_settings(pair, rows, n_draft, lookup_tokens, fr_vocab))
    return {"rows": list(results.values()), "identical": identical, "mismatched": mismatched,
            "agreement": agreement, "settings": settings}


def _row_settings(pair, rows, n_draft: int, lookup_n_draft: int, fr_vocab) -> dict:
    """The settings of the bench rows ``rows`` that the table's settings line must disclose, as fields and in words
    (``"extra"``): transformers' assistant policy, the lookup rules, each drafter's geometry; only those of rows
    timed, each named once."""
    from lab.drafters import LookaheadDrafter, PromptLookupDrafter

    settings, parts = {}, []
    if "HF assisted" in rows:  # not transformers' default policy: the bench fixes N, as ours
        settings["hf_assistant"] = _policy(n_draft, 0.0)
        parts.append(f"HF assisted: num_assistant_tokens = {n_draft}, schedule constant, "
                     "assistant_confidence_threshold 0 (no confidence stop)")
    if SAME_POLICY[1] in rows:
        from transformers.utils import is_sklearn_available

        settings["hf_default_policy"] = _policy(*HF_ASSISTED_POLICY)
        # transformers retunes a nonzero threshold as it goes only when scikit-learn is importable
        settings["sklearn_available"] = bool(is_sklearn_available())
        retuned = ("scikit-learn is installed, so transformers retunes that threshold as it goes (the lab row keeps "
                   f"{HF_ASSISTED_POLICY[1]})" if settings["sklearn_available"] else
                   "a fixed threshold here: transformers retunes it only when scikit-learn is installed, and it is not")
        parts.append(f"HF's default policy: up to {HF_ASSISTED_POLICY[0]} drafts a step, stopping after one below "
                     f"draft probability {HF_ASSISTED_POLICY[1]} ({retuned})")
    if any(row in rows for row in DRAFTER_METHODS["ngram"]):
        lookup = PromptLookupDrafter(n_draft=lookup_n_draft)
        settings["lookup_n_draft"] = lookup_n_draft
        settings["lookup_rule"] = {"lab": {"max_ngram": lookup.max_ngram, "match": lookup.match},
                                   "hf": {"max_matching_ngram_size": HF_LOOKUP_RULE[0], "match": HF_LOOKUP_RULE[1]}}
        parts.append(f"prompt lookup: n-grams <= {lookup.max_ngram} tokens, {lookup.n_draft} drafted (HF's rule: "
                     f"<= {HF_LOOKUP_RULE[0]}, the {HF_LOOKUP_RULE[1]} occurrence; HF prompt_lookup_num_tokens = "
                     f"{lookup_n_draft}, max_matching_ngram_size = {HF_LOOKUP_RULE[0]})")
    if FR_SPEC in rows:
        parts.append(f"FR-Spec head: the draft scores {len(fr_vocab):,} of its {pair.draft.config.vocab_size:,} "
                     "tokens")
    if "lab lookahead" in rows:
        lookahead = LookaheadDrafter()
        parts.append(f"lookahead: W = {lookahead.window}, n-gram {lookahead.ngram}, pool {lookahead.pool_size}")
    if "lab Medusa" in rows:
        from lab.drafters.medusa import DEFAULT_TREE

        parts.append(f"Medusa: {len(DEFAULT_TREE)}-node tree")
    if "lab EAGLE" in rows:
        parts.append(f"EAGLE: chain of N = {n_draft}")
    if EAGLE3_TREE in rows:
        parts.append("EAGLE-3 tree: EAGLE-2 dynamic tree of {} levels, top-{}, {} tokens".format(*EAGLE3_TREE_SHAPE))
    if "lab early exit" in rows:
        layers = pair.target.config.num_hidden_layers
        parts.append(f"early exit: {max(1, layers // 2)} of {layers} layers, N = {n_draft}")
    if parts:
        settings["extra"] = "; ".join(parts)
    return settings


def agreement_with(reference: list[list[int]], outputs: list[list[int]]) -> dict:
    """How far ``outputs`` (one token list per prompt) agree with ``reference`` (lab autoregressive decoding's):
    ``{"same": prompts with identical tokens, "prompts": count, "first_divergence": the earliest index where a
    prompt's tokens differ (None when all are identical)}``. In bfloat16 a speculative run can part from the
    autoregressive one where a verification's matmul, of another shape, rounds a near-tie the other way. Raises
    ``ValueError`` when the two hold different numbers of prompts (zip would drop the extra ones silently)."""
    if len(reference) != len(outputs):
        raise ValueError(f"reference and outputs must hold the same number of prompts, got {len(reference)} and "
                         f"{len(outputs)}")
    same, first = 0, None
    for ref, out in zip(reference, outputs):
        if ref == out:
            same += 1
            continue
        index = next((i for i, (a, b) in enumerate(zip(ref, out)) if a != b), min(len(ref), len(out)))
        first = index if first is None else min(first, index)
    return {"same": same, "prompts": len(reference), "first_divergence": first}


def format_table(result: dict, label: str = "held-out") -> str:
    """The bench result as a Markdown table plus a settings line (``label`` names the prompt set) and the load note.
    Rounds as it prints (tokens/s to 0.1, ratios to 0.01, rates and tokens per call to 0.001); a lab drafter's row
    reads n/a where it drafted nothing (acceptance rate) or had no draft examined (α), and :data:`NO_DECODE_STEP`
    for its tokens per call where no decode step ran; transformers' rows leave those cells blank."""
    s = result["settings"]
    load = s.get("load") or [None, None]
    load_text = ("" if None in load else f"; load average {load[0]} before, {load[1]} after")
    on = f"{s['device']}, {s['processor']}" if s.get("processor") else s["device"]  # which CPU: runs differ by it
    lines = [f"pair {s['pair']} on {on} ({s['dtype']}, {threads_label(s['threads'])}), {s['prompts']} {label} "
             f"prompt{'' if s['prompts'] == 1 else 's'} × {s['max_new_tokens']} new "
             f"token{'' if s['max_new_tokens'] == 1 else 's'}, greedy"
             + (f", draft model N = {s['n_draft']}"  # only where a draft model drafted (not --drafter ngram)
                if any(row["method"] == "lab speculative" for row in result["rows"]) else "")
             + (f"; {s['extra']}" if s.get("extra") else "") + load_text, "",
             "| method | tokens/s | × lab AR | × HF counterpart | acceptance rate | α | tokens per target call |",
             "|---|---|---|---|---|---|---|"]
    for row in result["rows"]:
        drafter = "alpha" in row  # a lab drafter's row: step records (transformers' rows have none)
        cells = [format_number(row.get("acceptance_rate"), 3), format_number(row["alpha"], 3),
                 format_number(row.get("tokens_per_target_call"), 3, NO_DECODE_STEP)] if drafter else ["", "", ""]
        counterpart = format_number(row.get("vs_hf_counterpart"), 2, "")
        lines.append(f"| {row['method']} | {row['tokens_per_second']:.1f} | {row['vs_lab_autoregressive']:.2f} | "
                     f"{counterpart} | " + " | ".join(cells) + " |")
    same = "yes" if result["identical"] else f"NO (differ: {', '.join(result['mismatched'])})"
    count = {4: "four", 5: "five", 6: "six", 7: "seven", 8: "eight", 9: "nine", 10: "ten", 11: "eleven"}.get(
        len(result["rows"]), str(len(result["rows"])))
    if s["dtype"] == "float32" or result["identical"]:
        lines += ["", f"all {count} produced identical tokens: {same}"]
    else:  # bfloat16: report how far each method agrees instead of claiming bitwise identity
        parts = []
        for name, agree in result["agreement"].items():
            if name == "lab autoregressive":
                continue
            part = f"{name} {agree['same']}/{agree['prompts']}"
            if agree["first_divergence"] is not None:
                part += f" (first divergence at token {agree['first_divergence']})"
            parts.append(part)
        lines += ["", f"agreement with lab autoregressive in {s['dtype']}, prompts with identical tokens "
                  "(matmuls of other shapes round near-ties differently, so bf16 outputs may part): "
                  + "; ".join(parts)]
    if s.get("load_note"):  # always: a quiet machine is worth saying too
        lines += ["", s["load_note"]]
    if s.get("skipped"):  # python -m lab bench on a hub pair
        lines.append(f"not run with pair {s['pair']}: "
                     + "; ".join(f"{method} ({why})" for method, why in s["skipped"].items()))
    return "\n".join(lines)


COST_CURVE_TOKENS = (1, 2, 3, 4, 5, 7, 9, 17)
"""The K of :func:`cost_curve`: one decoding step, then verifications of N = 1, 2, 3, 4, 6, 8, 16 drafted tokens."""
SWEEP_N = (1, 2, 3, 4, 6, 8)
"""The draft lengths :func:`sweep_n_draft` tries (each has its verification cost in :data:`COST_CURVE_TOKENS`)."""


def cost_curve(model, tokens=COST_CURVE_TOKENS, context: int = 128, repeats: int = 5, rounds: int = 3,
               also: dict | None = None) -> dict:
    """The cost of one forward of ``model`` over K new tokens (each K of ``tokens``) on a KV cache of ``context``
    tokens, in ms: ``{K: ms}``, unrounded. ``rounds`` rounds each time every K once with
    :func:`lab.costs.time_forward` (median of ``repeats``), the order of the K rotating from round to round so that
    a change in load hits all; the curve keeps each K's median over the rounds. Verifying N drafted tokens costs
    one forward over N + 1, so ``curve[N + 1] / curve[1]`` is what speculation pays per target call where
    autoregressive decoding pays 1.

    ``also``: ``{name (str): callable returning ms}``, other timings taken in the same rotating rounds (a draft
    model's forward, an EAGLE step: :func:`eagle_step_ms`), so that a ratio to ``curve[1]`` such as the cost ratio
    c compares times taken under the same load; each median over the rounds is returned under its name, after
    the K. Raises ``ValueError`` naming ``tokens`` when it is empty, holds a K that is not an integer >= 1 or
    holds one twice, naming ``also`` for a name that is not a string or a value that is not callable; as
    ``time_forward`` does for a K past the model's context; for ``rounds`` < 1."""
    import statistics
    from functools import partial

    from lab.costs import time_forward

    tokens = [check_int("tokens", k, 1) for k in tokens]
    if not tokens:
        raise ValueError("tokens must name at least one K (new tokens per forward), got none")
    if len(set(tokens)) != len(tokens):
        raise ValueError(f"tokens must name each K once, got {tokens}")
    also = dict(also or {})
    for name, timer in also.items():
        if not isinstance(name, str) or not callable(timer):
            raise ValueError(f"also must map names (str) to callables returning ms, got {name!r}: "
                             f"{type(timer).__name__}")
    rounds = check_int("rounds", rounds, 1)
    timers = {k: partial(time_forward, model, new_tokens=k, context=context, repeats=repeats) for k in tokens}
    timers.update(also)
    names = list(timers)
    times: dict = {name: [] for name in names}
    for r in range(rounds):
        for name in _rotated(names, r):
            times[name].append(timers[name]())
    return {name: statistics.median(ms) for name, ms in times.items()}


def speedup_with_verify_cost(alpha: float, n_draft: int, cost_ratio: float, verify_ratio: float) -> float:
    """The speedup over autoregressive decoding that chain drafting should give: expected tokens per target call
    ``(1 - α^(N+1)) / (1 - α)`` (Leviathan et al. 2023, eq. 1) over the cost of one step in target forwards,
    ``N · c + verify_ratio``, where ``c`` is a draft forward's cost ÷ a target forward's and ``verify_ratio`` the
    cost of a target forward over N + 1 tokens ÷ over 1 (:func:`cost_curve`). With ``verify_ratio`` = 1 it is
    :func:`lab.metrics.predicted_speedup` (Theorem 3.8's assumption). ``alpha``: Leviathan's per-token acceptance
    (:func:`lab.metrics.alpha_from_steps`), not accepted ÷ drafted, which counts drafts after a rejection that were
    never examined. Raises ``ValueError`` as :func:`lab.metrics.predicted_speedup` does, and for a ``verify_ratio``
    that is not a finite number > 0."""
    import math

    from lab.metrics import expected_tokens_per_call, predicted_speedup

    verify_ratio = check_number("verify_ratio", verify_ratio, "(0, inf)")
    if not (verify_ratio > 0 and math.isfinite(verify_ratio)):
        raise ValueError(f"verify_ratio must be a finite number > 0, got {verify_ratio}")
    predicted_speedup(alpha, n_draft, cost_ratio)  # its checks of alpha, n_draft and cost_ratio
    # float: one-element tensors (an α computed with torch) give a tensor here, and the annotation says float
    return float(expected_tokens_per_call(alpha, n_draft) / (n_draft * cost_ratio + verify_ratio))


def sweep_n_draft(pair, prompts: list[str], max_new_tokens: int = 128, n_values=SWEEP_N) -> list[dict]:
    """The draft model at each N of ``n_values`` against lab autoregressive decoding on ``prompts`` (encoded by
    :func:`lab.prompts.encode_prompts`), greedy. Every method runs once on a short warm-up; then
    :func:`run_interleaved` runs them prompt by prompt, autoregressive and every N in turn, the order rotating, so
    load changes hit all alike; each drafter is built before its clock starts. Returns one row per N (unrounded):
    ``n_draft``, ``tokens_per_second`` and ``vs_lab_autoregressive`` (whole generations, prefill included),
    ``decode_vs_lab_autoregressive`` (decode steps only: wall less ``stats["prefill_ms"]``, which holds the
    target's prefill and the draft model's own prefill in its reset, over the tokens after each prompt's first,
    :func:`pool_runs`; None when no decode step ran), ``acceptance_rate`` (accepted ÷ drafted; None when nothing was
    drafted), ``alpha`` (:func:`lab.metrics.alpha_from_steps`: accepted ÷ examined, what Leviathan's formula takes;
    None when no draft was examined), ``tokens_per_target_call`` (decode steps; None when none ran) and
    ``target_calls``. The best N is the row with the highest ``vs_lab_autoregressive``. Raises ``TypeError`` /
    ``ValueError`` as :func:`run_bench` does for prompts and counts, ``ValueError`` naming ``n_values`` when it is
    empty, holds an N < 1 or holds one twice, and for a pair without a draft model."""
    from lab.drafters import DraftModelDrafter

    prompts = check_prompts(prompts)
    check_has_draft(pair, "sweep_n_draft")
    max_new_tokens = check_int("max_new_tokens", max_new_tokens, 1)
    n_values = [check_int("n_values", n, 1) for n in n_values]
    if not n_values or len(set(n_values)) != len(n_values):
        raise ValueError(f"n_values must name at least one draft length N, each once, got {n_values}")
    encoded = encode_prompts(pair, prompts)
    problem = context_problem(pair, encoded, max_new_tokens)
    if problem:
        raise ValueError(f"max_new_tokens: {problem}")
    # 0: autoregressive; a factory per N, called by run_fastest before the clock starts
    methods = {0: None, **{n: (lambda n=n: DraftModelDrafter(pair.draft, n)) for n in n_values}}
    for factory in methods.values():
        run_fastest(pair, encoded[0][:16], factory, max_new_tokens=8)  # warm-up: first-call allocations
    runs = run_interleaved(pair, encoded, methods, max_new_tokens=max_new_tokens)
    base = pool_runs(gen for gen, _ in runs[0])
    rows = []
    for n in n_values:
        pooled = pool_runs(gen for gen, _ in runs[n])
        decode = (None if None in (pooled["decode_tokens_per_second"], base["decode_tokens_per_second"])
                  else pooled["decode_tokens_per_second"] / base["decode_tokens_per_second"])
        rows.append({"n_draft": n, "tokens_per_second": pooled["tokens_per_second"],
                     "vs_lab_autoregressive": pooled["tokens_per_second"] / base["tokens_per_second"],
                     "decode_vs_lab_autoregressive": decode, "acceptance_rate": pooled["acceptance_rate"],
                     "alpha": pooled["alpha"], "tokens_per_target_call": pooled["tokens_per_target_call"],
                     "target_calls": pooled["target_calls"]})
    return rows
