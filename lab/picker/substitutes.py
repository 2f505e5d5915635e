"""What the engine renderers share: the placeholder names for drafter weights, the nearest method an engine runs
when it has no drafter for the recommended one, and the check of model names.

Every engine module (:mod:`lab.picker.engines` for vLLM and transformers, :mod:`lab.picker.sglang`,
:mod:`lab.picker.trtllm`, :mod:`lab.picker.llamacpp`) reads these, so that a method one engine lacks is replaced by
the same rule everywhere (:data:`SUBSTITUTES`), and a substitute the workload rules out (``exclude``, the memory
headroom, no small same-family model) is never rendered: when every substitute is ruled out the engine serves the
target alone and its notes say why (:func:`no_substitute_note`).
"""
from __future__ import annotations

from lab.picker.feasibility import obstacle, obstacle_text
from lab.picker.tables import METHOD_LABELS, method_phrase

__all__ = ["PLACEHOLDERS", "SUBSTITUTES", "nearest_method", "no_substitute_note", "fallback_note", "check_model_name"]

PLACEHOLDERS = {"draft_model": "<same-family draft model>", "eagle": "<EAGLE-3 head for the target>",
                "medusa": "<Medusa heads for the target>", "parallel": "<PARD draft for the target's family>"}
"""What the settings name as the drafter's weights when none is given (method -> placeholder)."""

SUBSTITUTES = {"lookahead": ("ngram",), "suffix": ("ngram",), "medusa": ("draft_model", "ngram"),
               "eagle": ("draft_model", "ngram"), "parallel": ("draft_model", "ngram")}
"""Method -> what an engine without a drafter for it runs instead, nearest first: Lookahead and suffix decoding ->
prompt lookup (draft-free, as they are); a learned head (Medusa; EAGLE in transformers) -> a draft model when the
workload has one, else prompt lookup (the draft-free method every engine ships); a parallel (PARD) draft -> the PARD
draft itself (or the draft it was adapted from) run as an ordinary draft model, one forward per drafted token, else
prompt lookup. Every engine ships both substitutes, so only the workload can rule one out."""


def nearest_method(method: str, native, workload: dict) -> str:
    """The course method an engine whose own drafters are ``native`` (a collection of methods) runs for ``method``:
    ``method`` itself when native (and ``"none"`` for ``"none"``); else the first of :data:`SUBSTITUTES` ``[method]``
    that the engine has and ``workload`` does not rule out (:func:`lab.picker.feasibility.obstacle`: not excluded,
    within the memory headroom, a draft model only with a small same-family model, except for a PARD draft, which is
    its own draft model); ``"none"`` when every substitute is ruled out."""
    if method == "none" or method in native:
        return method
    for candidate in SUBSTITUTES[method]:
        if candidate in native and _blocked(method, candidate, workload) is None:
            return candidate
    return "none"


def _blocked(method: str, candidate: str, workload: dict) -> str | None:
    """Why ``workload`` rules out ``candidate`` as the substitute for ``method`` (an obstacle), or None."""
    why = obstacle(candidate, workload)
    if method == "parallel" and why == "no_small_model":  # the PARD draft is the draft model
        return None
    return why


def no_substitute_note(engine: str, method: str, workload: dict) -> str:
    """The note for an ``engine`` (its name as printed, e.g. "SGLang 0.5.23") that has no drafter for ``method`` and
    whose substitutes :func:`nearest_method` found all ruled out: what rules each one out, and that the engine's
    settings serve the target alone."""
    why = "; ".join(obstacle_text(candidate, _blocked(method, candidate, workload), workload.get("memory_headroom_gb"))
                    for candidate in SUBSTITUTES[method])
    nearest = " or ".join(METHOD_LABELS[candidate] for candidate in SUBSTITUTES[method])
    return (f"{engine} has no drafter for {method_phrase(method)}, and what it would run instead ({nearest}) cannot "
            f"run here: {why}. Its settings therefore leave speculation off, and it serves the target alone.")


def fallback_note(engine: str, method: str, served: str, workload: dict) -> str:
    """The note for an ``engine`` that has no drafter for ``method`` and runs ``served``, a later substitute than
    the first: what rules out the nearer ones."""
    skipped = SUBSTITUTES[method][:SUBSTITUTES[method].index(served)]
    why = "; ".join(obstacle_text(candidate, _blocked(method, candidate, workload), workload.get("memory_headroom_gb"))
                    for candidate in skipped)
    return (f"{engine} has no drafter for {method_phrase(method)}, and the nearest it has cannot run here ({why}): "
            f"its settings run {METHOD_LABELS[served]} instead.")


def check_model_name(name: str, value) -> str:
    """``value``, a model name or path for a rendered command line or guide (every renderer checks its ``target``):
    a str, not empty, without surrounding spaces, on one line (no newline or other control character, which would
    break the command or the Markdown around it), and not starting with ``-`` (the engine's argument parser would
    read it as a flag: ``vllm serve -tp``). Raises ``ValueError`` naming ``name``."""
    if not isinstance(value, str) or not value.strip() or value != value.strip() or not value.isprintable() \
            or value.startswith("-"):
        raise ValueError(f"{name} must be a model name or path on one line, such as meta-llama/Llama-3.1-70B-Instruct "
                         f"(not empty, no surrounding spaces, no control characters, not starting with '-'; write "
                         f"./-name for a file whose name starts with '-'), got {value!r:.80}")
    return value
