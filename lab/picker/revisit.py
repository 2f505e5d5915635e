"""When to run the picker again: the conditions under which a recommendation stops holding, worded for
``Recommendation.revisit``.

A speculating method lists the thresholds that would change it (α, output length, temperature, load, a better
drafter, memory); a ``"none"`` lists only the changes that would lift what ruled speculation out, each tested by
asking the rules again with that one change (the ``lifts`` callable :func:`lab.picker.recommend` passes in).
"""
from __future__ import annotations

from lab.picker.decision import Decision
from lab.picker.tables import MAX_TEMPERATURE, SAMPLING_WARN_TEMPERATURE

__all__ = ["revisit_for", "revisit_none", "revisit_speculating"]


def revisit_for(decision: Decision, workload: dict, lifts) -> list:
    """The revisit list for ``decision`` on ``workload``: :func:`revisit_none` for ``"none"`` (the cause is the rule
    that decided: ``"temperature"``, ``"load"``, or ``"infeasible"`` for a latency-bound workload with no feasible
    method), else :func:`revisit_speculating`. ``lifts(**change) -> bool``: whether the workload with ``change``
    applied would speculate."""
    if decision.method == "none":
        cause = decision.rule if decision.rule in ("temperature", "load") else "infeasible"
        return revisit_none(workload, cause, lifts)
    return revisit_speculating(decision.method, workload["latency_bound"])


def revisit_none(workload: dict, cause: str, lifts) -> list:
    """When a "none" verdict is worth revisiting: the change that would lift what ruled speculation out (``cause``:
    "temperature", "load" or "infeasible"). A constraint is listed only if lifting it alone changes the verdict
    (``lifts(**change)``: :func:`lab.picker.recommend` run again with that one change says to speculate). The
    speculating methods' items (thresholds on α and the like) do not apply while nothing is drafted."""
    if cause == "temperature":
        return [f"the serving temperature comes down to {MAX_TEMPERATURE:g} or below: the picker considers "
                "speculation again, and α should be measured at that temperature (lesson 13)"]

    items = []
    if cause == "load":
        items.append("traffic drops to small batches or a latency target appears: speculation pays best there")
    if not workload["has_small_same_family_model"] and lifts(has_small_same_family_model=True):
        items.append("a small model of the target's family (same tokenizer) becomes available: a draft model needs "
                     "no training")
    if not workload["target_has_mtp"] and lifts(target_has_mtp=True):
        items.append("you serve a target whose checkpoint ships MTP modules (DeepSeek-V3/R1, Qwen3-Next, GLM-4.5, "
                     "MiMo, …): they draft with nothing to train or download" + (
                         ", and at N = 1 they are the picker's first choice under load" if cause == "load" else ""))
    if not workload.get("has_parallel_draft") and lifts(has_parallel_draft=True):
        items.append("a parallel (PARD) draft of the target's family becomes available (published, or adapted from a "
                     "small model of the family): it drafts N tokens in one forward")
    if not workload["can_finetune"] and lifts(can_finetune=True):
        items.append("training on the target becomes allowed (or a trained head for it appears): " + (
            "an EAGLE head at N = 1 is one of the two methods this course keeps under load" if cause == "load"
            else "EAGLE or Medusa heads (lessons 10 and 11)"))
    if workload["memory_headroom_gb"] is not None and lifts(memory_headroom_gb=None):
        items.append("more accelerator memory frees up: a drafter needs room for its weights and KV cache")
    if workload["exclude"] and lifts(exclude=()):
        items.append(f"a method you excluded ({', '.join(workload['exclude'])}) becomes an option again")
    return items


def revisit_speculating(method: str, latency_bound: bool) -> list:
    """When a speculating recommendation of ``method`` is worth revisiting (``latency_bound``: the workload's
    setting, which decides whether growing or shrinking batches are the change to watch)."""
    items = ["α, the per-token acceptance probability, falls below 0.7 on your own traffic — measure it as lesson "
             "12 does, accepted ÷ examined drafts (lab.metrics.alpha_from_steps); where only an engine's counters "
             "are at hand, the first drafted position's acceptance estimates the same α under lesson 06's model, "
             "from fewer drafts: per_position_acceptance[0] (vLLM: "
             "rate(…num_accepted_tokens_per_pos_total{position=\"0\"}[5m]) / ignoring(position) "
             "rate(…num_drafts_total[5m])). The 0.7 is seed lesson 002's target for a good speedup, "
             "which that seed states for the acceptance rate accepted ÷ drafted; this course applies it to α, "
             "because the acceptance rate also falls as N grows and by lesson 06's formula the chat row's 2× "
             "already needs α ≈ 0.71 at N = 4, c = 0.1. α is never below the acceptance rate, so this is the "
             "looser test (at N = 4 a 70 % acceptance rate needs α ≈ 0.86): do not compare the acceptance rate "
             "with 0.7",
             "outputs are very short (seed lesson 000 names about 15 new tokens): prefill is not sped up and the "
             "drafter's set-up is paid once per request, so speculation pays only while that set-up divided by the "
             "time saved per token is below the output length (lesson 13 times, on your machine, from how many new "
             "tokens the draft model stays ahead)",
             f"the sampling temperature goes above {SAMPLING_WARN_TEMPERATURE:g} (measure α again: large, confident "
             f"pairs usually lose some) or above {MAX_TEMPERATURE:g} (the picker turns speculation off)"]
    if latency_bound:
        items.append("traffic grows to large batches (throughput-bound): every rejected draft then costs compute "
                     "that other requests could use")
    else:
        items.append("traffic drops to small batches or a latency target appears: speculation pays best there")
    if method in ("ngram", "lookahead", "draft_model", "parallel", "medusa", "mtp"):
        items.append("a trained EAGLE head for your target becomes available (seed lesson 000: 3–4×)")
    if method == "mtp":
        items.append("you raise N above the number of MTP modules in the checkpoint: the engine runs a module again "
                     "for the extra tokens, so watch the per-position acceptance fall (vLLM's per-position counter)")
    if method == "parallel":
        items.append("its acceptance from the second position on is well below the autoregressive draft's, or its "
                     "forwards are a small part of the step (a tiny draft, a short N): compare tokens per second with "
                     "the draft it was adapted from; this course's Shakespeare pair is such a case")
    if method in ("draft_model", "parallel", "eagle", "medusa", "mtp"):
        items.append("free accelerator memory shrinks: the draft or heads (and their KV cache) compete with the "
                     "target's KV cache, i.e. with batch size")
    return items
