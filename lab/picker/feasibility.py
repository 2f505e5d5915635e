"""Which drafting methods a workload rules out, and why in words: :func:`obstacle` and :func:`obstacle_text`.

The rules (:mod:`lab.picker.rules`) ask it of every method they rank, and the engine renderers
(:mod:`lab.picker.substitutes`) ask it of the method an engine would run in place of one it lacks, so that a method
ruled out by ``exclude`` or by the memory headroom is ruled out for every engine alike.
"""
from __future__ import annotations

from lab.picker.memory import MEMORY_NEEDED_GB
from lab.picker.tables import method_phrase

__all__ = ["TRAINED", "obstacle", "obstacle_text"]

TRAINED = ("eagle", "medusa")
"""Heads someone must train for the target (``can_finetune``)."""


def obstacle(method: str, workload: dict) -> str | None:
    """The first constraint of ``workload`` that rules ``method`` (a drafting method) out, one of
    :data:`lab.picker.decision.OBSTACLES`; None when it is feasible. Feasible = not in ``exclude``, its prerequisite
    holds (a small same-family model; permission to train heads; MTP modules in the target's checkpoint), and it
    fits ``memory_headroom_gb``. A parallel (PARD) draft needs ``has_parallel_draft``: training one is adapting a
    draft model, not training heads on the target, so ``can_finetune`` alone does not provide it. A key missing
    from ``workload`` counts as unconstrained (no exclusions, memory not given) or absent (no model, no training)."""
    if method in workload.get("exclude", ()):
        return "excluded"
    if method == "draft_model" and not workload.get("has_small_same_family_model"):
        return "no_small_model"
    if method in TRAINED and not workload.get("can_finetune"):
        return "no_training"
    if method == "mtp" and not workload.get("target_has_mtp"):
        return "no_mtp"
    if method == "parallel" and not workload.get("has_parallel_draft"):
        return "no_parallel_draft"
    memory = workload.get("memory_headroom_gb")
    if memory is not None and MEMORY_NEEDED_GB.get(method, 0.0) > memory:
        return "memory"
    return None


def obstacle_text(method: str, obstacle: str, memory: float | None) -> str:
    """Why ``method`` is not an option, as a clause: ``obstacle`` is one of
    :data:`lab.picker.decision.OBSTACLES`; ``memory`` the workload's headroom (GB) for ``"memory"``."""
    are = "are" if method == "mtp" else "is"  # "the target's MTP modules" is a plural
    if obstacle == "excluded":
        return f"{method_phrase(method)} {are} ruled out (exclude)"
    if obstacle == "no_small_model":
        return "there is no small model of the target's family to draft with"
    if obstacle == "no_training":
        return f"{method_phrase(method)} must be trained for the target, and training is not an option"
    if obstacle == "no_mtp":
        return "the target's checkpoint ships no MTP modules (target_has_mtp, --target-has-mtp)"
    if obstacle == "no_parallel_draft":
        return ("there is no parallel (PARD) draft of the target's family, published or adapted "
                "(has_parallel_draft, --parallel-draft)")
    need = "need" if method == "mtp" else "needs"
    return (f"{method_phrase(method)} {need} about {MEMORY_NEEDED_GB.get(method, 0.0):g} GB beyond the target, more "
            f"than the {memory:g} GB headroom")
