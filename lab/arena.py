"""The drafter arena (lesson 12, ``python -m lab arena``): every drafter, same target, same prompts, several kinds
of task, T = 0 and T = 1.

:func:`run_arena` runs every drafter on the same target and prompts for several kinds of task (the prompt sets of
:func:`lab.prompts.arena_prompts`) at T = 0 and T = 1, and sets the measured speedup beside the one Leviathan et
al.'s formula predicts from the measured acceptance and cost ratio; :func:`format_reconciliation` splits the gap
into :data:`EFFICIENCY_FACTORS`. Adaptive N: :func:`compare_adaptive` compares fixed draft lengths with
transformers' adaptive one. Plot with ``widgets.arena.arena_figure``.

The tasks depend on the pair (:func:`lab.prompts.arena_tasks`, :func:`default_tasks`). A chat pair (one with a chat
template, such as the real pair ``"smollm2-135m"``) answers held-out requests, each encoded as one user turn
(:func:`lab.prompts.encode_prompts`): chat, code, structured output and copy/edit (:data:`CHAT_TASKS`); the real
pair also answers the later requests of committed multi-turn and agent-loop conversations, which quote its earlier
answers (:data:`CONVERSATION_TASKS`). A plain-text
pair (the Shakespeare pair) continues text built from its held-out passages: prose, copy/edit (a passage rewritten
with small word changes), structured records and copy (:data:`ARENA_TASKS`; the first three by default). Every run
stops at the pair's end-of-text token (``pair.eos_token_id``; for a chat pair, the end of the assistant's turn).
"""
from __future__ import annotations

from numbers import Integral, Real

import torch

from lab.assets import committed_json
from lab.bench import pool_runs, repeats_label, run_fastest, run_interleaved, threads_label
from lab.load_meter import LoadMeter
from lab.models import processor_name
from lab.prompts import ARENA_TASKS, CHAT_TASKS, CONVERSATION_TASKS, arena_prompts, arena_tasks, context_problem, \
    encode_prompts
from lab.registry import DRAFTER_SPECS, DRAFTERS, OWN_DRAFT, check_has_draft, make_drafter, untrained_reason
from lab.validation import check_int, is_integer
from lab.words import in_words

__all__ = ["run_arena", "format_arena", "format_reconciliation", "compare_adaptive", "format_adaptive",
           "default_tasks", "ARENA_TASKS", "CHAT_TASKS", "CONVERSATION_TASKS", "ARENA_DRAFTERS", "DEFAULT_TASKS",
           "FORMULA_DRAFTERS", "EFFICIENCY_FACTORS", "DRAFTER_LABELS", "COMMITTED_ARENA_FILE", "committed_arena",
           "TREE_SHAPES_FILE", "committed_tree_shapes", "check_result", "ADAPTIVE_CAP"]


def check_result(result, name: str = "result", made_by: str = "run_arena(...)") -> dict:
    """``result`` unchanged when it looks like ``made_by``'s result: a dict with "settings" (a dict) and "rows" (a
    list of dicts that name their "task", "temperature" and "drafter"), as the formatters and the readings of
    :mod:`lab.arena_reading` take. Raises ``TypeError`` naming ``name`` for anything else (a raw KeyError deep in a
    reading told a learner nothing)."""
    rows = result.get("rows") if isinstance(result, dict) else None
    bad_row = (next((i for i, r in enumerate(rows)
                     if not (isinstance(r, dict) and {"task", "temperature", "drafter"} <= r.keys())), None)
               if isinstance(rows, list) else None)
    if bad_row is None and isinstance(rows, list) and isinstance(result.get("settings"), dict):
        return result
    shown = (f"row {bad_row}: {str(rows[bad_row])[:80]}" if bad_row is not None
             else f"a dict with keys {sorted(map(str, result))[:6]}" if isinstance(result, dict)
             else type(result).__name__)
    raise TypeError(f"{name} must be {made_by}'s result (a dict with 'settings' and 'rows', each row naming its "
                    f"task, temperature and drafter), got {shown}")


ARENA_DRAFTERS = DRAFTERS
"""The drafters :func:`run_arena` runs by default: every one :func:`lab.registry.make_drafter` builds."""
DEFAULT_TASKS = ("prose", "copy_edit", "structured")
"""The tasks :func:`run_arena` runs by default on a plain-text pair such as the Shakespeare pair (names of
:data:`lab.prompts.ARENA_TASKS`); a chat pair runs every one of :data:`lab.prompts.CHAT_TASKS`
(:func:`default_tasks`)."""
FORMULA_DRAFTERS = tuple(name for name, spec in DRAFTER_SPECS.items() if spec.one_forward_per_token)
"""Drafters with one draft forward per drafted token, in a chain, so Leviathan's α, N, c model predicts their
speedup (:attr:`lab.registry.DrafterSpec.one_forward_per_token`)."""
# The efficiency's factors, in the order the prediction's assumptions are replaced by measurements
# (run_arena's docstring; lesson 12).
EFFICIENCY_FACTORS = ("acceptance", "drafting", "target_call", "verification", "loop", "prefill")
DRAFTER_LABELS = {"autoregressive": "autoregressive", **{name: spec.label for name, spec in DRAFTER_SPECS.items()},
                  "adaptive": "draft model, adaptive N"}
"""Row kind -> its name in tables: the baseline, every drafter's :attr:`lab.registry.DrafterSpec.label`, and the
draft model with an adaptive N (lesson 12)."""


def default_tasks(pair) -> tuple[str, ...]:
    """The tasks :func:`run_arena` runs when ``tasks`` is None: for a chat pair (``pair.has_chat_template``) every
    one of :func:`lab.prompts.arena_tasks`: :data:`CHAT_TASKS` ("chat", "code", "structured", "copy_edit"), and for
    the real pair ``"smollm2-135m"`` also :data:`CONVERSATION_TASKS` ("multi_turn", "agent": requests quoting
    earlier answers of their conversation), so every method gets a row on every kind; else :data:`DEFAULT_TASKS`
    ("prose", "copy_edit", "structured"). The first is :func:`compare_adaptive`'s default task: "chat" or
    "prose"."""
    return arena_tasks(pair) if pair.has_chat_template else DEFAULT_TASKS


def _pool(runs) -> dict:
    """Pooled measurements of ``[(generation, drafter)]`` (:func:`lab.bench.pool_runs`, with ``steps``: the decode
    steps; times in ms)."""
    pooled = pool_runs(gen for gen, _ in runs)
    return {**pooled, "steps": pooled["target_calls"]}


def _check_decoded(pooled, kind, temperature) -> None:
    """Raise ``ValueError`` when the pooled runs of ``kind`` made no decode step (every answer ended at the prefill's
    token): nothing to time per step."""
    if not pooled["steps"]:
        raise ValueError(f"{kind} at T = {temperature:g}: no decode step was run (every answer ended at its first "
                         "token, the prefill's); raise max_new_tokens or use other prompts")


def _cell_row(kind, pooled, base, n_draft, temperature, same) -> dict:
    """One arena row from the pooled runs of a drafter (``pooled``) and of autoregressive decoding (``base``)."""
    from lab.metrics import expected_tokens_per_call, predicted_speedup

    _check_decoded(base, "autoregressive", temperature)
    _check_decoded(pooled, kind, temperature)
    ar_ms = (base["draft_ms"] + base["verify_ms"]) / base["steps"]  # one autoregressive step, prefill excluded
    steps = pooled["steps"]
    draft_per_call = pooled["draft_ms"] / pooled["draft_calls"] if pooled["draft_calls"] else None
    c = draft_per_call / ar_ms if draft_per_call is not None else None
    measured = pooled["tokens_per_second"] / base["tokens_per_second"]
    decode = pooled["decode_tokens_per_second"] / base["decode_tokens_per_second"]
    row = {"drafter": kind, "label": DRAFTER_LABELS.get(kind, kind), "n_draft": n_draft,
           "new_tokens": pooled["new_tokens"], "target_calls": pooled["target_calls"],
           "draft_calls": pooled["draft_calls"], "acceptance_rate": pooled["acceptance_rate"],
           "alpha": pooled["alpha"], "per_position_acceptance": pooled["per_position_acceptance"],
           "tokens_per_target_call": pooled["tokens_per_target_call"],
           "ar_ms_per_step": ar_ms, "draft_ms_per_call": draft_per_call, "cost_ratio": c,
           "draft_ms_per_step": pooled["draft_ms"] / steps, "verify_ms_per_step": pooled["verify_ms"] / steps,
           "step_draft_cost": pooled["draft_ms"] / steps / ar_ms,
           "verify_cost": pooled["verify_ms"] / steps / ar_ms,
           "prefill_ms": pooled["prefill_ms"], "tokens_per_second": pooled["tokens_per_second"],
           "baseline_tokens_per_second": base["tokens_per_second"],
           "same_as_autoregressive": same if temperature == 0 else None}
    if kind in FORMULA_DRAFTERS and pooled["alpha"] is not None and c is not None and n_draft:
        row["prediction"] = "alpha, N, c"
        row["expected_tokens_per_call"] = expected_tokens_per_call(pooled["alpha"], n_draft)
        predicted = predicted_speedup(pooled["alpha"], n_draft, c)
        refined = row["expected_tokens_per_call"] / (n_draft * c + row["verify_cost"])
    else:  # no draft forward per token (or a tree, or a varying N): measured tokens per call, measured draft time
        row["prediction"] = "tokens/call, draft ms"
        row["expected_tokens_per_call"] = None
        predicted = pooled["tokens_per_target_call"] / (1 + row["step_draft_cost"])
        refined = pooled["tokens_per_target_call"] / (row["step_draft_cost"] + row["verify_cost"])
    row.update(predicted_speedup=predicted, predicted_with_verify_cost=refined, measured_speedup=measured,
               decode_speedup=decode, efficiency=measured / predicted, decode_efficiency=decode / predicted)
    # Where the prediction went: factors whose product is the efficiency (see run_arena's docstring).
    if row["prediction"] == "alpha, N, c":
        predicted_tokens, predicted_cost = row["expected_tokens_per_call"], 1 + n_draft * c
    else:
        predicted_tokens, predicted_cost = pooled["tokens_per_target_call"], 1 + row["step_draft_cost"]
    d = row["step_draft_cost"]
    extra_target = pooled["target_ms"] / steps / ar_ms - base["target_ms"] / base["steps"] / ar_ms
    timed_share = (pooled["draft_ms"] + pooled["verify_ms"]) / pooled["decode_ms"]
    base_timed_share = (base["draft_ms"] + base["verify_ms"]) / base["decode_ms"]
    row["target_call_cost"] = pooled["target_ms"] / steps / (base["target_ms"] / base["steps"])
    row["efficiency_factors"] = {
        "acceptance": pooled["tokens_per_target_call"] / predicted_tokens,
        "drafting": predicted_cost / (1 + d),
        "target_call": (1 + d) / (1 + d + extra_target),
        "verification": (1 + d + extra_target) / (d + row["verify_cost"]),
        "loop": timed_share / base_timed_share / base["tokens_per_target_call"],
        "prefill": measured / decode,
    }
    return row


def _baseline_row(pooled, temperature) -> dict:
    _check_decoded(pooled, "autoregressive", temperature)
    ar_ms = (pooled["draft_ms"] + pooled["verify_ms"]) / pooled["steps"]
    return {"drafter": "autoregressive", "label": "autoregressive", "n_draft": None,
            "new_tokens": pooled["new_tokens"], "target_calls": pooled["target_calls"], "draft_calls": 0,
            "acceptance_rate": None, "alpha": None, "per_position_acceptance": [],
            "tokens_per_target_call": pooled["tokens_per_target_call"], "ar_ms_per_step": ar_ms,
            "draft_ms_per_call": None, "cost_ratio": None, "draft_ms_per_step": 0.0, "verify_ms_per_step": ar_ms,
            "step_draft_cost": 0.0, "verify_cost": 1.0, "prefill_ms": pooled["prefill_ms"],
            "tokens_per_second": pooled["tokens_per_second"], "baseline_tokens_per_second": pooled["tokens_per_second"],
            "same_as_autoregressive": True if temperature == 0 else None, "prediction": "baseline",
            "expected_tokens_per_call": 1.0, "predicted_speedup": 1.0, "predicted_with_verify_cost": 1.0,
            "measured_speedup": 1.0, "decode_speedup": 1.0, "efficiency": 1.0,
            "decode_efficiency": 1.0, "target_call_cost": 1.0,
            "efficiency_factors": dict.fromkeys(EFFICIENCY_FACTORS, 1.0)}


def _progress(total: int, progress: bool, desc: str):
    import os

    from tqdm.auto import tqdm

    disabled = not progress or os.environ.get("TQDM_DISABLE", "") not in ("", "0", "false", "False")
    return tqdm(total=total, desc=desc, disable=disabled, leave=False)


def _check_temperature(name: str, value) -> None:
    # any real number (NumPy floats too) but a bool; `not value >= 0` also rejects NaN
    if isinstance(value, bool) or not isinstance(value, Real) or not value >= 0 or value == float("inf"):
        raise ValueError(f"{name} must be a finite number >= 0, got {value!r}")


def _check_decodes(max_new_tokens) -> None:
    """The arena measures decode steps: the first new token comes from the prefill, so it needs a second."""
    if max_new_tokens < 2:
        raise ValueError(f"max_new_tokens must be >= 2 in the arena: the first new token comes from the prefill, so "
                         f"only a second one is written by a decode step, which the arena measures; got "
                         f"{max_new_tokens}")


def _check_arena_args(pair, tasks, temperatures, max_new_tokens, prompts_per_task, n_draft, repeats, drafters,
                      seed):
    for name, value in (("max_new_tokens", max_new_tokens), ("prompts_per_task", prompts_per_task),
                        ("n_draft", n_draft), ("repeats", repeats)):
        check_int(name, value, 1)
    _check_decodes(max_new_tokens)
    check_int("seed", seed, 0)
    allowed = arena_tasks(pair)
    if isinstance(tasks, str) or not tasks or any(t not in allowed for t in tasks):
        raise ValueError(f"tasks must be a non-empty sequence of names from {allowed} (the tasks of the "
                         f"{pair.name!r} pair), got {tasks!r}")
    if isinstance(drafters, str) or not drafters or any(d not in ARENA_DRAFTERS for d in drafters):
        raise ValueError(f"drafters must be a non-empty sequence of names from {ARENA_DRAFTERS}, got {drafters!r}")
    if "model" in drafters:
        check_has_draft(pair, "the arena's \"model\" drafter (leave it out of drafters)")
    if isinstance(temperatures, (str, Real)) or not hasattr(temperatures, "__len__") or len(temperatures) == 0:
        raise ValueError(f"temperatures must be a non-empty sequence of numbers >= 0, got {temperatures!r}")
    for t in temperatures:  # a NumPy array works too (len, not truth: an array's truth value is ambiguous)
        _check_temperature("temperatures", t)
    for name, values in (("tasks", list(tasks)), ("drafters", list(drafters)),
                         ("temperatures", [float(t) for t in temperatures])):
        if len(set(values)) < len(values):  # a repeat would run and print the same cell twice
            raise ValueError(f"{name} must not repeat an entry, got {values!r}")


def run_arena(pair, tasks=None, temperatures=(0.0, 1.0), max_new_tokens: int = 64,
              prompts_per_task: int = 3, n_draft: int = 4, seed: int = 0, progress: bool = True,
              drafters=ARENA_DRAFTERS, repeats: int = 1) -> dict:
    """Every drafter on the same target and prompts, per task and temperature, with predicted and measured speedup.

    - ``tasks``: names from :func:`lab.prompts.arena_tasks` (:data:`CHAT_TASKS`, and :data:`CONVERSATION_TASKS` for
      the real pair; :data:`ARENA_TASKS` for a plain-text pair; see :func:`arena_prompts`); None (the default) =
      :func:`default_tasks`. The first ``prompts_per_task`` prompts of each, encoded by
      :func:`lab.prompts.encode_prompts` (one user turn of a chat, or a conversation so far, for a chat pair; plain
      text otherwise); every run stops at ``pair.eos_token_id``. ``temperatures``: 0 is
      greedy; T > 0 samples with seed ``seed + i`` for prompt i (the same seeds for every drafter and the
      baseline). ``drafters``: kinds of :func:`lab.registry.make_drafter` (:data:`lab.registry.DRAFTERS`: "model",
      "ngram", "lookahead", "medusa", "eagle", "early-exit", "suffix", "mtp", "parallel", "eagle3"), built with
      ``n_draft`` (Lookahead, Medusa, suffix decoding and the MTP heads use their own window / tree / match length /
      depth, :data:`lab.registry.OWN_DRAFT`; suffix decoding's cache holds the earlier answers its prompt quotes, see
      :func:`lab.registry.make_drafter`); leave out
      those :func:`lab.registry.drafter_problem` says the pair cannot have (a hub pair has no trained heads or
      drafts). A drafter whose weights were never trained for the pair (:func:`lab.registry.untrained_reason`)
      gets no rows; ``settings["unavailable"]`` maps it to the reason and
      :func:`format_arena` shows it. Every cell also runs the autoregressive baseline.
    - Each run is one :func:`lab.decode.generate` call with a fresh drafter (built outside the timing). Within a
      cell the runs go prompt by prompt, the baseline and every drafter in turn, so a change in machine load hits
      all of them alike; ``repeats`` > 1 runs each prompt that many times and keeps the fastest (the outputs are
      identical). Every method runs once on a short warm-up first.

    Returns ``{"rows": [...], "settings": {...}}``, one row per (task, temperature, drafter), the
    ``"autoregressive"`` row first in each cell. Measures are pooled over the cell's prompts (sums, then ratios):

    - ``acceptance_rate`` = accepted / drafted tokens; ``per_position_acceptance`` (see :mod:`lab.metrics`);
      ``tokens_per_target_call`` = new tokens / target calls of the decode loop (prefill not counted).
    - ``alpha``: the per-token acceptance probability of Leviathan et al.'s model, estimated as accepted drafts /
      drafts the target examined (accepted + one per step that stopped at a rejection): under the model each
      examined draft is accepted with probability alpha, and drafts after the first rejection are never examined,
      which is why the acceptance rate, accepted / drafted, comes out lower than alpha.
    - ``ar_ms_per_step``: mean time of one autoregressive decode step in the same cell (the target forward over
      one token and the choice of its token; draft_ms + verify_ms of the baseline's step records, in ms).
    - ``cost_ratio`` c = ``draft_ms_per_call`` / ``ar_ms_per_step``, where ``draft_ms_per_call`` = the drafter's
      total draft_ms / its draft forward passes (``StepRecord.draft_calls``); None when there are none (prompt
      lookup, Lookahead). ``step_draft_cost`` = mean draft_ms per step / ``ar_ms_per_step`` (all drafting of a
      step, in target steps); ``verify_cost`` = mean verify_ms per step / ``ar_ms_per_step`` (how much more the
      target's call over [last] + drafts (+ tree or window tokens) costs than over one token: 1 in the model).
    - ``predicted_speedup``: for the chain drafters with one draft forward per drafted token
      (:data:`FORMULA_DRAFTERS`: "model", "eagle", "early-exit", "eagle3"; ``prediction`` = "alpha, N, c"):
      :func:`lab.metrics.predicted_speedup` ``(alpha, N, c)`` = (1 − α^(N+1)) / (1 − α) / (1 + N c) (Leviathan et
      al. 2023, equation 1, and Theorem 3.8 in its section "Walltime Improvement"). For prompt lookup, Lookahead,
      Medusa, suffix decoding, the MTP heads and the parallel draft (no draft forward per token, a varying N, a tree,
      a chain of their own depth, N tokens from one forward; ``prediction`` = "tokens/call, draft ms"): measured
      tokens per call / (1 + ``step_draft_cost``), the same model with the measured tokens per call in place of the
      i.i.d. formula and the measured drafting time in place of N c. Both assume a target call over many tokens
      costs what a one-token step costs.
    - ``measured_speedup`` = the drafter's tokens/s / the baseline's tokens/s, each = new tokens / total wall
      time of the ``generate`` calls (prefill included, as a user sees it); ``decode_speedup`` the same with
      the prefill time (``prefill_ms``, which includes the drafter's own prefill) left out of both.
    - ``predicted_with_verify_cost``: the same prediction with the measured ``verify_cost`` in place of 1 (expected
      tokens per call / (N c + verify_cost), or tokens per call / (step_draft_cost + verify_cost)): for a row
      predicted from its measured tokens per call, what is left between it and ``decode_speedup`` is the loop's own
      overhead; for a row predicted from α (a chain) it is also the acceptance and drafting factors.
    - ``efficiency`` = ``measured_speedup / predicted_speedup``; ``decode_efficiency`` = ``decode_speedup /
      predicted_speedup``. Below 1 when a multi-token target call costs more than a one-token one
      (``verify_cost`` > 1), when the loop's own work (verification, KV rollback, Python) adds to each step, and
      when the prefill, which speculation cannot shorten, dilutes the speedup.
    - ``target_call_cost``: the speculative step's target forward (``StepRecord.target_ms``) over the
      autoregressive step's, pooled: how much a call over [last] + drafts costs relative to one over one token.
    - ``efficiency_factors``: the efficiency split into six factors whose product it is. Each replaces one
      assumption of the prediction by its measurement, in turn, so each is 1 when its assumption holds and below 1
      when time (or tokens) is lost there. In autoregressive steps (``ar_ms_per_step``), with d =
      ``step_draft_cost``, Δ = the step's target forward minus the autoregressive step's target forward, and v =
      ``verify_cost``:

      - ``"acceptance"`` = measured tokens per call / predicted (the formula's ``expected_tokens_per_call``; 1 for
        the drafters predicted from measured tokens per call). Below 1 when acceptances are not independent and
        equally likely at every position, or when the last steps draft fewer than N because ``max_new_tokens`` is
        near.
      - ``"drafting"`` = (1 + N c) / (1 + d): the drafting time the formula counts vs the measured (1 for the
        drafters predicted from measured drafting time).
      - ``"target_call"`` = (1 + d) / (1 + d + Δ): the target forward over [last] + drafts (+ tree or window)
        costs more than over one token (the formula assumes it costs the same).
      - ``"verification"`` = (1 + d + Δ) / (d + v): the rest of the step beyond the forward (acceptance tests,
        KV-cache rollback, the drafter's update) vs the autoregressive step's argmax and bookkeeping.
      - ``"loop"`` = the share of the decode time inside drafting and verification (the step records'
        ``draft_ms + verify_ms`` over the decode wall time) / the baseline's share: work between steps.
      - ``"prefill"`` = ``measured_speedup / decode_speedup``: the prompt's forward (and the drafter's set-up),
        which speculation cannot shorten.

      The product of the first five is ``decode_efficiency``; with ``"prefill"`` it is ``efficiency`` (the
      algebra is in lesson 12; a test checks the identity on real runs).
    - ``same_as_autoregressive``: at T = 0, whether every prompt's tokens equal the baseline's (they must in
      float32; in bfloat16 a verification's matmul of another shape can round a near-tie the other way, so outputs
      may part); None at T > 0, where the output is only equal in distribution.
    - also ``task``, ``temperature``, ``drafter``, ``label``, ``n_draft`` (None for :data:`lab.registry.OWN_DRAFT`),
      ``new_tokens``, ``target_calls``, ``draft_calls``, ``draft_ms_per_step``, ``verify_ms_per_step``,
      ``prefill_ms``, ``tokens_per_second``, ``baseline_tokens_per_second``, ``expected_tokens_per_call``.

    ``settings`` records the pair, device, dtype, threads, ``prompt_format`` ("chat" or "text"), the arguments,
    the drafters' geometry and the machine's load over the timed runs (:class:`lab.load_meter.LoadMeter`:
    ``load_average`` before and after, ``other_cores`` busy with other processes, ``busy``, ``load_note``; the
    formatted table warns when busy): timings on a busy machine are not comparable. Values are not rounded
    (:func:`format_arena` rounds). tqdm shows progress unless ``progress=False`` or ``TQDM_DISABLE`` is set.
    Raises ``ValueError`` naming the argument for an unknown task (naming the pair's tasks) or drafter, a bad
    temperature (negative, infinite, NaN or a bool; NumPy floats are fine), a count < 1, a seed that is not an
    integer >= 0, ``prompts_per_task`` larger than a task has prompts, ``max_new_tokens`` < 2 (the first new token
    comes from the prefill: no decode step to measure), ``max_new_tokens`` that with the longest prompt exceeds
    the target's context, a task, drafter or temperature given twice, and a cell where every answer ended at its
    first token (no decode step to time).
    """
    tasks = default_tasks(pair) if tasks is None else tasks
    _check_arena_args(pair, tasks, temperatures, max_new_tokens, prompts_per_task, n_draft, repeats, drafters,
                      seed)
    unavailable = {kind: why for kind in drafters if (why := untrained_reason(kind, pair.name))}
    if len(unavailable) == len(drafters):
        raise ValueError(f"drafters: none of {tuple(drafters)} is available for the {pair.name!r} pair: "
                         + "; ".join(f"{kind}: {why}" for kind, why in unavailable.items()))
    drafters = tuple(kind for kind in drafters if kind not in unavailable)
    temperatures = [float(t) for t in temperatures]  # plain floats in the rows (JSON), whatever was passed
    prompts = {}
    for task in tasks:
        available = arena_prompts(pair, task)
        if prompts_per_task > len(available):
            raise ValueError(f"prompts_per_task must be at most {len(available)} (the {task!r} prompts), "
                             f"got {prompts_per_task}")
        prompts[task] = encode_prompts(pair, available[:prompts_per_task])
    problem = context_problem(pair, [ids for task in tasks for ids in prompts[task]], max_new_tokens)
    if problem:
        raise ValueError(f"max_new_tokens: {problem}; lower max_new_tokens")
    factories = {kind: (lambda kind=kind: make_drafter(kind, pair, n_draft)) for kind in drafters}
    warm = prompts[tasks[0]][0][:16]
    warm_temperatures = sorted(set(temperatures))
    # a bar of its own: loading every drafter's weights takes minutes on a busy machine, which read as a hang
    with _progress((1 + len(factories)) * len(warm_temperatures), progress, "arena warm-up (untimed)") as bar:
        for factory in (None, *factories.values()):  # first-call allocations, lazy imports, weight loading
            for temperature in warm_temperatures:
                run_fastest(pair, warm, factory, float(temperature), seed, 8, 1)
                bar.update()

    rows = []
    total = len(tasks) * len(temperatures) * (1 + len(drafters)) * prompts_per_task
    with _progress(total, progress, "arena") as bar, LoadMeter() as meter:
        for task in tasks:
            for temperature in temperatures:
                temperature = float(temperature)
                bar.set_postfix_str(f"{task}, T={temperature:g}")
                runs = run_interleaved(pair, prompts[task], {"autoregressive": None, **factories}, temperature,
                                       seed, max_new_tokens, repeats, bar.update)
                base_runs = runs.pop("autoregressive")
                base = _pool(base_runs)
                cell = [{"task": task, "temperature": temperature, **_baseline_row(base, temperature)}]
                for kind, kind_runs in runs.items():
                    same = all(r.tokens == b.tokens for (r, _), (b, _) in zip(kind_runs, base_runs))
                    n = n_draft if kind not in OWN_DRAFT else None
                    cell.append({"task": task, "temperature": temperature,
                                 **_cell_row(kind, _pool(kind_runs), base, n, temperature, same)})
                rows += cell
    settings = _arena_settings(pair, tasks, temperatures, max_new_tokens, prompts_per_task, n_draft, seed, repeats,
                               drafters, meter)
    return {"rows": rows, "settings": {**settings, "unavailable": unavailable}}


def _load_settings(meter) -> dict:
    """The settings' record of the machine's load over the timed runs (:class:`lab.load_meter.LoadMeter`)."""
    summary = meter.summary()
    return {"load_average": summary["load_average"], "other_cores": summary["other_cores"], "busy": meter.busy,
            "load_note": meter.note()}


def _arena_settings(pair, tasks, temperatures, max_new_tokens, prompts_per_task, n_draft, seed, repeats, drafters,
                    meter) -> dict:
    geometry = [spec.geometry(pair, n_draft) for kind, spec in DRAFTER_SPECS.items()  # the registry's order
                if kind in drafters and spec.geometry]
    return {"pair": pair.name, "device": str(pair.device), "processor": processor_name(pair.device),
            "dtype": str(pair.dtype).replace("torch.", ""), "threads": torch.get_num_threads(),
            "prompt_format": _prompt_format(pair), "tasks": list(tasks),
            "temperatures": [float(t) for t in temperatures],
            "max_new_tokens": max_new_tokens, "prompts_per_task": prompts_per_task, "n_draft": n_draft,
            "seed": seed, "repeats": repeats, "drafters": list(drafters), "geometry": "; ".join(geometry),
            **_load_settings(meter)}


def _prompt_format(pair) -> str:
    """How :func:`lab.prompts.encode_prompts` encodes ``pair``'s prompts: "chat" (one user turn) or "text"."""
    return "chat" if pair.has_chat_template else "text"


def _fmt(value, digits: int = 2) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "yes" if value else "NO"
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return str(value)


def format_arena(result: dict) -> str:
    """The arena result as a Markdown table (one row per task, temperature and drafter) plus a settings line.

    Columns: N, acceptance rate, α (Leviathan's per-token acceptance), tokens per target call, c (draft forward /
    autoregressive step), predicted and measured speedup (× autoregressive), efficiency = measured / predicted,
    and, at T = 0, whether the tokens equal the autoregressive ones. Raises ``TypeError`` for anything but
    :func:`run_arena`'s result (:func:`check_result`)."""
    check_result(result)
    s = result["settings"]
    load = s.get("load_average")
    chat = " (prompts as chat user turns)" if s.get("prompt_format") == "chat" else ""
    where = s['device'] + (f": {s['processor']}" if s.get("processor") else "")
    lines = [f"pair {s['pair']}{chat} on {where} ({s['dtype']}, {threads_label(s['threads'])}), "
             f"{s['prompts_per_task']} prompt{'' if s['prompts_per_task'] == 1 else 's'} per task × "
             f"{s['max_new_tokens']} new tokens, N = {s['n_draft']}, seed {s['seed']}, "
             f"{repeats_label(s['repeats'])}" + (f"; {s['geometry']}" if s.get("geometry") else "")
             + (f"; load average {load[0]} → {load[1]}" if load else ""), "",
             "| task | T | drafter | N | acceptance rate | α | tokens per target call | c | predicted × | "
             "measured × | efficiency | = AR |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for row in result["rows"]:
        lines.append(
            f"| {row['task']} | {row['temperature']:g} | {row['label']} | {_fmt(row['n_draft'])} | "
            f"{_fmt(row['acceptance_rate'])} | {_fmt(row['alpha'])} | {_fmt(row['tokens_per_target_call'])} | "
            f"{_fmt(row['cost_ratio'], 3)} | {_fmt(row['predicted_speedup'])} | {_fmt(row['measured_speedup'])} | "
            f"{_fmt(row['efficiency'])} | {_fmt(row['same_as_autoregressive'])} |")
    formula = [DRAFTER_LABELS[kind] for kind in FORMULA_DRAFTERS]
    lines += ["", f"predicted: (1 − α^(N+1)) / (1 − α) / (1 + N c) for {in_words(formula)}; "
              "tokens per call / (1 + draft time per step / AR step) for the others. measured: tokens/s ratio, "
              "prefill included."]
    if any(row.get("same_as_autoregressive") is False for row in result["rows"]):
        lines += ["", "= AR NO: the greedy answer parted from autoregressive decoding's. " + (
            f"In {s['dtype']} a near-tie can round the other way when the target scores a block of tokens instead "
            "of one, so this is expected; exactness is checked in float32 (tests/lab/test_real_pair_oracles.py)."
            if s["dtype"] != "float32" else "In float32 this is a bug in the drafter or the loop: please report it.")]
    if s.get("unavailable"):
        lines += ["", "not available for this pair: " + "; ".join(f"{DRAFTER_LABELS.get(kind, kind)} ({why})"
                                                               for kind, why in s["unavailable"].items())]
    return "\n".join(lines + _busy_lines(s))


def _busy_lines(settings) -> list[str]:
    """The load note's warning, as lines to append to a table, when the machine was busy during the timing."""
    return ["", settings["load_note"]] if settings.get("busy") else []


def format_reconciliation(result: dict) -> str:
    """Where each drafter's predicted speedup went, as a Markdown table: predicted ×, the six
    ``efficiency_factors`` (see :func:`run_arena`), measured × and efficiency, one line per drafter row of
    ``result`` (:func:`run_arena` or :func:`compare_adaptive`; autoregressive rows are left out). Raises
    ``ValueError`` if ``result`` has no drafter rows."""
    rows = [r for r in result.get("rows", []) if r.get("drafter") != "autoregressive"]
    if not rows:
        raise ValueError("result holds no drafter rows: pass run_arena(...) or compare_adaptive(...)'s return value")
    lines = ["| task | T | drafter | N | predicted × | × acceptance | × drafting | × target call | × verification | "
             "× loop | × prefill | measured × | efficiency |", "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for row in rows:
        f = row["efficiency_factors"]
        lines.append(f"| {row['task']} | {row['temperature']:g} | {row['label']} | {_fmt(row['n_draft'])} | "
                     f"{_fmt(row['predicted_speedup'])} | " + " | ".join(_fmt(f[k]) for k in EFFICIENCY_FACTORS)
                     + f" | {_fmt(row['measured_speedup'])} | {_fmt(row['efficiency'])} |")
    lines += ["", "predicted × the six factors = measured. Each swaps one assumption of the prediction for its "
              "measurement: tokens per call; drafting time; the target call over N + 1 tokens vs one; the "
              "verification and rollback; the work between steps; the prefill (lesson 12)."]
    return "\n".join(lines)


ADAPTIVE_CAP = 16
"""The adaptive draft length's default cap in :func:`compare_adaptive` (a start above it raises the cap to the
start)."""


def compare_adaptive(pair, task: str | None = None, n_values=(1, 2, 3, 4, 6, 8), start_n: int = 4,
                     max_n_draft: int | None = None, max_new_tokens: int = 64, prompts: int = 3,
                     temperature: float = 0.0, seed: int = 0, repeats: int = 1, progress: bool = True) -> dict:
    """The draft model at every fixed N in ``n_values`` and with the adaptive N (transformers' "heuristic"
    schedule, :func:`lab.drafters.draft_model.next_n_draft`, starting at ``start_n``, capped at ``max_n_draft``:
    None = :data:`ADAPTIVE_CAP`, or ``start_n`` when that is longer),
    on the first ``prompts`` prompts of ``task`` at ``temperature``, against the autoregressive baseline.
    ``task``: one of :func:`lab.prompts.arena_tasks`; None (the default) = the first of :func:`default_tasks`,
    "chat" for a chat pair and "prose" otherwise. The prompts are encoded as in :func:`run_arena`.

    Returns ``{"rows": [...], "settings": {...}, "best_fixed_n": int}``: one row per fixed N (``drafter`` =
    "model") and one for the adaptive drafter (``drafter`` = "adaptive", ``n_draft`` None, ``mean_n_draft`` = the
    mean N it used per step), each with the fields of :func:`run_arena`'s rows (the adaptive row is predicted from
    its measured tokens per call, as its N varies). ``best_fixed_n`` is the fixed N with the highest measured
    speedup. Raises ``ValueError`` naming the argument for a count < 1 (``prompts``, ``start_n``, ``repeats``; for
    ``max_new_tokens`` < 2, as :func:`run_arena`), a ``task`` the pair has no prompts for (naming its tasks), a
    negative or infinite ``temperature``, a bad ``seed``, bad ``n_values``, or ``max_new_tokens`` that with the
    longest prompt exceeds the target's context.
    """
    from lab.drafters import DraftModelDrafter

    task = default_tasks(pair)[0] if task is None else task
    allowed = arena_tasks(pair)
    if task not in allowed:
        raise ValueError(f"task must be one of {allowed} (the tasks of the {pair.name!r} pair), got {task!r}")
    for name, value in (("max_new_tokens", max_new_tokens), ("prompts", prompts), ("start_n", start_n),
                        ("repeats", repeats)):
        check_int(name, value, 1)
    _check_decodes(max_new_tokens)
    _check_temperature("temperature", temperature)
    check_int("seed", seed, 0)
    if isinstance(n_values, (str, Integral)) or not hasattr(n_values, "__len__") or len(n_values) == 0 \
            or any(not is_integer(n) or n < 1 for n in n_values) or len(set(map(int, n_values))) < len(n_values):
        raise ValueError(f"n_values must be a non-empty sequence of distinct integers >= 1, got {n_values!r}")
    n_values = [int(n) for n in n_values]
    start_n = int(start_n)
    max_n_draft = (max(ADAPTIVE_CAP, start_n) if max_n_draft is None
                   else check_int("max_n_draft", max_n_draft, start_n))
    check_has_draft(pair, "compare_adaptive (it times the draft model)")
    available = arena_prompts(pair, task)
    if prompts > len(available):
        raise ValueError(f"prompts must be at most {len(available)} (the {task!r} prompts), got {prompts}")
    encoded = encode_prompts(pair, available[:prompts])
    problem = context_problem(pair, encoded, max_new_tokens)
    if problem:
        raise ValueError(f"max_new_tokens: {problem}; lower max_new_tokens")
    temperature = float(temperature)
    run_fastest(pair, encoded[0][:16], None, temperature, seed, 8, 1)
    run_fastest(pair, encoded[0][:16], lambda: DraftModelDrafter(pair.draft, start_n), temperature, seed, 8, 1)
    methods = {"autoregressive": None}
    methods.update({n: (lambda n=n: DraftModelDrafter(pair.draft, n)) for n in n_values})
    methods["adaptive"] = lambda: DraftModelDrafter(pair.draft, start_n, adaptive=True, max_n_draft=max_n_draft)
    with _progress(len(methods) * prompts, progress, "adaptive N") as bar, LoadMeter() as meter:
        runs = run_interleaved(pair, encoded, methods, temperature, seed, max_new_tokens, repeats, bar.update)
    base_runs = runs.pop("autoregressive")
    base = _pool(base_runs)
    rows = [_baseline_row(base, temperature)]
    for n, kind_runs in runs.items():
        same = all(r.tokens == b.tokens for (r, _), (b, _) in zip(kind_runs, base_runs))
        adaptive = n == "adaptive"
        row = _cell_row("adaptive" if adaptive else "model", _pool(kind_runs), base, None if adaptive else n,
                        temperature, same)
        if adaptive:
            used = [k for _, drafter in kind_runs for k in drafter.n_draft_history]
            row["mean_n_draft"] = sum(used) / len(used) if used else None
            row["n_draft_history"] = used
        else:
            row["mean_n_draft"] = float(n)
        rows.append(row)
    for row in rows:
        row.update(task=task, temperature=temperature)
    fixed = [r for r in rows if r["drafter"] == "model"]
    best = max(fixed, key=lambda r: r["measured_speedup"])["n_draft"]
    settings = {"pair": pair.name, "device": str(pair.device), "processor": processor_name(pair.device),
                "threads": torch.get_num_threads(),
                "prompt_format": _prompt_format(pair), "task": task, "prompts": prompts,
                "max_new_tokens": max_new_tokens, "temperature": temperature, "seed": seed, "repeats": repeats,
                "start_n": start_n, "max_n_draft": max_n_draft, "n_values": list(n_values), **_load_settings(meter)}
    return {"rows": rows, "settings": settings, "best_fixed_n": best}


def format_adaptive(result: dict) -> str:
    """:func:`compare_adaptive`'s result as a Markdown table plus a settings line. Raises ``TypeError`` for anything
    else (:func:`check_result`)."""
    s = check_result(result, made_by="compare_adaptive(...)")["settings"]
    lines = [f"draft model on {s['prompts']} {s['task']} prompt{'' if s['prompts'] == 1 else 's'} × "
             f"{s['max_new_tokens']} new tokens, T = {s['temperature']:g}, {s['device']}, "
             f"{threads_label(s['threads'])}; adaptive: start N = {s['start_n']}, "
             f"+2 after a fully accepted step, −1 otherwise, at most {s['max_n_draft']}; "
             f"load average {s['load_average'][0]} → {s['load_average'][1]}", "",
             "| drafter | N (mean) | acceptance rate | tokens per target call | tokens/s | predicted × | measured × | "
             "efficiency | = AR |", "|---|---|---|---|---|---|---|---|---|"]
    for row in result["rows"]:
        lines.append(f"| {row['label']} | {_fmt(row.get('mean_n_draft'), 1)} | {_fmt(row['acceptance_rate'])} | "
                     f"{_fmt(row['tokens_per_target_call'])} | {_fmt(row['tokens_per_second'], 0)} | "
                     f"{_fmt(row['predicted_speedup'])} | {_fmt(row['measured_speedup'])} | "
                     f"{_fmt(row['efficiency'])} | {_fmt(row['same_as_autoregressive'])} |")
    fixed = [r for r in result["rows"] if r["drafter"] == "model"]
    if not any((r["tokens_per_target_call"] or 0) > 1 for r in fixed):
        # one token a call at every N: no draft was accepted, so the fastest N is the clock's noise
        lines += ["", "best fixed N: none (no N had a draft accepted: 1 token per target call at every N; the "
                      "answers may be too short to draft, raise --max-new-tokens)"]
        return "\n".join(lines + _busy_lines(s))
    best = next(r for r in fixed if r["n_draft"] == result["best_fixed_n"])
    factors = ", ".join(f"{k.replace('_', ' ')} {best['efficiency_factors'][k]:.2f}" for k in EFFICIENCY_FACTORS)
    lines += ["", f"best fixed N (measured): {result['best_fixed_n']}; its efficiency {best['efficiency']:.2f} "
                  f"(decode only {best['decode_efficiency']:.2f}) = {factors}"]
    return "\n".join(lines + _busy_lines(s))


COMMITTED_ARENA_FILE = "arena.json"
"""The file, in a pair's asset folder (``lab/assets/<pair>/``), that holds the arena run committed with it."""


def committed_arena(pair_name: str) -> dict | None:
    """The arena run committed for the bundled pair ``pair_name`` (``lab/assets/<pair>/arena.json``), which lessons
    and the picker quote as "the committed run": ``{"arena": run_arena(...), "adaptive": compare_adaptive(...),
    "command": str, "date": str}``, as written by ``python -m lab arena --json`` (its settings name the machine:
    ``processor``, ``dtype``, ``threads``, load). None for a pair without one (hub pairs, and ``"shakespeare"``,
    whose arena is run in lesson 12 itself). Raises ``ValueError`` naming the file when it is not that JSON."""
    return committed_json(pair_name, COMMITTED_ARENA_FILE, lambda run: isinstance(run, dict) and
                          {"arena", "adaptive"} <= set(run),
                          "the JSON of `python -m lab arena --json` (keys 'arena' and 'adaptive')")


TREE_SHAPES_FILE = "tree_shapes.json"
"""The file of a pair's committed timing of draft-tree shapes (``python tools/tree_shapes.py --json``)."""


def committed_tree_shapes(pair_name: str) -> dict | None:
    """The timing of draft-tree shapes committed for the bundled pair ``pair_name``
    (``lab/assets/<pair>/tree_shapes.json``, written by ``python tools/tree_shapes.py --json``): the pair's EAGLE-3
    draft as a chain of 4, on a static tree and on EAGLE-2 dynamic trees, beside Medusa's tree, greedy, per kind of
    request: ``{"date", "dtype", "threads", "prompts", "max_new_tokens", "kinds": {kind: {"rows": [...], "note"}}}``.
    The arena drafts EAGLE-3 as a chain; lesson 12 reads this beside it (:func:`lab.arena_reading.read_tree_shapes`).
    None for a pair without one. Raises ``ValueError`` naming the file when it is not that JSON."""
    return committed_json(pair_name, TREE_SHAPES_FILE, lambda run: isinstance(run, dict) and
                          isinstance(run.get("kinds"), dict),
                          "the JSON of `python tools/tree_shapes.py --json` (a 'kinds' mapping)")
