"""The picker's rules: which method, N and draft temperature for a workload (the rules in order: the docstring of
:mod:`lab.picker`). Decisions only; :mod:`lab.picker.reasons` and :mod:`lab.picker.revisit` word them.

:func:`recommend` checks the inputs, applies rule 1, 2 or 3–4 to get a :class:`lab.picker.decision.Decision`,
and returns it as a :class:`lab.picker.Recommendation` with its reasons, source, engine notes and revisit list.
"""
from __future__ import annotations

from lab.picker.decision import Decision
from lab.picker.feasibility import obstacle
from lab.picker.load import load_schedule, unloaded_gain
from lab.picker.memory import MEDUSA_HEADS
from lab.picker.reasons import greedy_reason, notes_for, reasons_for, source_for
from lab.picker.recommendation import Recommendation
from lab.picker.revisit import revisit_for
from lab.picker.tables import (COPY_DEFAULTS, LOOKAHEAD_SETTINGS, MAX_TEMPERATURE, MTP_N, MTP_SPEEDUP, NGRAM_LOOKUP,
                               SETUP_ORDER,
                               speedup_for, workload_row)
from lab.picker.workload import check_workload

__all__ = ["recommend", "decide", "obstacle", "speedup_for", "draft_length", "choose_under_load",
           "choose_latency_bound"]

_HEADS = ("eagle", "medusa", "mtp")                 # drafting on the target's features: replace the default when
#                                                     their range is higher (the MTP modules ship with the target)
_FALLBACKS = ("draft_model", "mtp", "lookahead", "ngram")  # tried only when the default is not feasible
_DRAFTS_WITH_TEMPERATURE = ("draft_model", "parallel", "eagle", "mtp")  # sampled drafts; the rest: deterministic


def recommend(task: str, temperature: float, has_small_same_family_model: bool, can_finetune: bool,
              latency_bound: bool = True, memory_headroom_gb: float | None = None, *,
              exclude=(), target_has_mtp: bool = False, has_parallel_draft: bool = False) -> Recommendation:
    """Pick a speculative-decoding method, N and draft temperature for a workload (the rules: the docstring of
    :mod:`lab.picker`).

    Args:
        task: one of ``"chat"``, ``"code"``, ``"structured"``, ``"long_text"``, ``"copy_edit"``, ``"agent"``
            (agent loops and multi-turn edits: answers that repeat earlier answers).
        temperature: the target's sampling temperature, from 0 (greedy) to :data:`lab.picker.tables.MAX_API_TEMPERATURE`
            (2, the OpenAI API's range); below :data:`lab.picker.tables.SAMPLING_EPS` (1e-5) it is greedy, as in
            vLLM, and the reasons say so.
        has_small_same_family_model: a small model with the target's tokenizer exists (a vanilla draft).
        can_finetune: you may train extra parameters for the target (EAGLE or Medusa heads) — True also when a
            trained head for your target is published.
        latency_bound: True for interactive, small-batch serving; False for throughput-bound, high-batch serving.
        memory_headroom_gb: free accelerator memory (GB) beyond the target and its KV cache; None = not known
            (assumed to fit).
        exclude: methods you cannot use (e.g. ``("eagle",)`` when your engine has no EAGLE for your target's
            architecture); any of :data:`METHODS` but ``"none"``.
        target_has_mtp: the target's own checkpoint ships multi-token-prediction modules (DeepSeek-V3/R1's
            ``num_nextn_predict_layers`` = 1; Qwen3-Next, GLM-4.5, MiMo and others), which can draft with nothing
            trained or downloaded (method ``"mtp"``).
        has_parallel_draft: a parallel (PARD) draft of the target's family exists: published (the PARD authors'
            ``amd/PARD-*`` drafts for Llama 3, Qwen2.5/3 and DeepSeek-R1-Distill-Qwen) or adapted by you from a
            small same-family model (PARD's recipe; this course's ``python -m lab train parallel``). It drafts N
            tokens in one forward (method ``"parallel"``, latency-bound only).

    Returns:
        a :class:`Recommendation`.

    Raises:
        ValueError: unknown task, temperature outside [0, 2] or not finite, a flag that is not a bool (``numpy.bool_``
            counts; numbers, NumPy scalars included, are accepted for temperature and memory), negative or
            non-finite memory, or an unknown method in ``exclude`` (the message names the argument and the
            allowed values).
    """
    workload = check_workload(task, temperature, has_small_same_family_model, can_finetune, latency_bound,
                              memory_headroom_gb, exclude, target_has_mtp, has_parallel_draft)
    decision = decide(workload)

    def lifts(**change) -> bool:  # would this one change to the workload make speculation pay?
        # the decision alone: building the whole recommendation would word its own revisit list, asking again
        return decide(check_workload(**{**workload, **change})).method != "none"

    reasons = reasons_for(decision, workload)
    if workload["temperature"] == 0 and float(temperature) != 0:  # a tiny temperature, taken as greedy
        reasons.insert(0, greedy_reason(float(temperature)))
    return Recommendation(decision.method, decision.n_draft, decision.draft_temperature, workload["temperature"],
                          reasons, decision.speedup, source_for(decision, workload),
                          notes_for(decision, workload), revisit_for(decision, workload, lifts), workload,
                          decision.settings)


def decide(workload: dict) -> Decision:
    """Rules 1–4 on a checked workload (the dict :func:`lab.picker.workload.check_workload` returns), as a
    :class:`lab.picker.decision.Decision`, before anything is worded."""
    obstacles = {m: why for m in SETUP_ORDER if (why := obstacle(m, workload)) is not None}
    if workload["temperature"] > MAX_TEMPERATURE:  # 1. too hot: do not speculate
        return Decision("temperature", "none", obstacles=obstacles)
    if not workload["latency_bound"]:  # 2. throughput-bound: MTP or EAGLE at N = 1 if one can be had, else nothing
        return choose_under_load(workload, obstacles)
    return choose_latency_bound(workload, obstacles)  # 3. and 4. latency-bound: the row's method unless a head beats it


def draft_length(method: str, task: str, temperature: float) -> tuple:
    """Rule 4: (N, settings) for a latency-bound ``method``. Lookahead: its n-gram size minus 1 with lesson 09's
    window and n-gram size; Medusa: its head count (one token per head); MTP: :data:`lab.picker.tables.MTP_N` (one
    module, one token, DeepSeek-V3's setting); otherwise the top of the workload row's k range when greedy (T = 0),
    the bottom when sampling (the cautious end), with prompt lookup's n-gram sizes for ``"ngram"``."""
    if method == "lookahead":
        return LOOKAHEAD_SETTINGS["ngram"] - 1, {"window": LOOKAHEAD_SETTINGS["window"],
                                                 "ngram": LOOKAHEAD_SETTINGS["ngram"]}
    if method == "medusa":
        return MEDUSA_HEADS, {}
    if method == "mtp":
        return MTP_N, {}
    low, high = workload_row(task).n_range
    return (high if temperature == 0 else low), (dict(NGRAM_LOOKUP) if method == "ngram" else {})


def choose_under_load(workload: dict, obstacles: dict) -> Decision:
    """Rule 2, throughput-bound serving, N = 1 with lesson 13's batch-size schedule (drafting at the target's
    temperature): the target's own MTP modules when it ships them (nothing to train or load, and DeepSeek-V3 serves
    exactly this), else an EAGLE head when one is feasible, else ``"none"``. The range runs from 1× (drafting
    switched off by the schedule) to the method's gain at N = 1: MTP's published 1.8×; for EAGLE lesson 13's model,
    (1 + α) / (1 + c) ≈ 1.76× (seed lesson 002's 20–54 % cost cut, 2.17× as throughput, names no baseline and is
    more than one extra token a call can give over plain decoding). MTP goes first: it needs no head trained for the
    target and no weights beyond its checkpoint. A parallel (PARD) draft is never taken
    here: at N = 1 it makes one forward per step, as an autoregressive draft does, so its one advantage is gone."""
    schedule = {"num_speculative_tokens_per_batch_size": load_schedule()}
    temperature = workload["temperature"]
    if "mtp" not in obstacles:
        return Decision("load", "mtp", MTP_N, temperature, (1.0, MTP_SPEEDUP), "load", schedule, obstacles)
    if "eagle" in obstacles:
        return Decision("load", "none", obstacles=obstacles)
    return Decision("load", "eagle", 1, temperature, (1.0, round(unloaded_gain(), 2)), "load", schedule, obstacles)


def choose_latency_bound(workload: dict, obstacles: dict) -> Decision:
    """Rules 3 and 4, latency-bound serving.

    The default is the workload row's method (``"ngram"`` for copy/edit and ``"suffix"`` for agent loops and
    multi-turn edits, which have no row). Candidates: the default if feasible, the heads that draft from the
    target's features (EAGLE, Medusa, the target's MTP modules; not for copy/edit or agent loops, whose answers
    repeat text a head would have to guess), and, only when the default is not feasible, the fallbacks (a draft
    model, MTP, Lookahead, prompt lookup). A parallel (PARD) draft is considered wherever a draft model is (it is a
    draft model that proposes its N tokens in one forward): with the draft model as the default or among the
    fallbacks.
    Prompt lookup displaces Lookahead when both are feasible (their ranges come from different sources, our CPU
    arena and the seed's table, so they are not ranked by number: prompt lookup is what the engines serve, and
    the reasons quote lesson 12's committed run of the two on chat requests). The highest mid-range wins; ties go
    to the default, then to the cheaper method (:data:`lab.picker.tables.SETUP_ORDER`). No candidate: ``"none"``."""
    task, temperature = workload["task"], workload["temperature"]
    default = COPY_DEFAULTS.get(task) or workload_row(task).method
    considered = (default,) + (() if task in COPY_DEFAULTS else _HEADS) + (_FALLBACKS if default in obstacles else ())
    if "draft_model" in considered:
        considered += ("parallel",)
    candidates = {m: speedup_for(m, task) for m in considered if m not in obstacles}
    if not candidates:
        return Decision("latency", "none", obstacles=obstacles, default=default)
    lookup_over_lookahead = "ngram" in candidates and "lookahead" in candidates
    if lookup_over_lookahead:
        del candidates["lookahead"]

    def rank(method):
        low, high = candidates[method][0]
        return (-(low + high) / 2, method != default, SETUP_ORDER.index(method))

    method = min(candidates, key=rank)
    n_draft, settings = draft_length(method, task, temperature)
    draft_temperature = temperature if method in _DRAFTS_WITH_TEMPERATURE else 0.0
    speedup, basis = candidates[method]
    return Decision("latency", method, n_draft, draft_temperature, speedup, basis, settings, obstacles, default,
                    candidates, lookup_over_lookahead)
