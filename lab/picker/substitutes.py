"""What the engine renderers share: the placeholder names for drafter weights, and the nearest method an engine
can run when it has no drafter for the recommended one.

Every engine module (:mod:`lab.picker.engines` for vLLM and transformers, :mod:`lab.picker.sglang`,
:mod:`lab.picker.trtllm`, :mod:`lab.picker.llamacpp`) reads these, so that a method one engine lacks is replaced by
the same rule everywhere: a learned head the engine cannot load falls back to a draft model when the workload has
a small same-family model, else to n-gram prompt lookup (the draft-free method every engine ships).
"""
from __future__ import annotations

__all__ = ["PLACEHOLDERS", "nearest_method", "check_model_name"]

PLACEHOLDERS = {"draft_model": "<same-family draft model>", "eagle": "<EAGLE-3 head for the target>",
                "medusa": "<Medusa heads for the target>", "parallel": "<PARD draft for the target's family>"}
"""What the settings name as the drafter's weights when none is given (method -> placeholder)."""


def nearest_method(has_small_model: bool) -> str:
    """The method an engine without a drafter for a learned head runs instead: ``"draft_model"`` when the workload
    has a small same-family model (``has_small_model``), else ``"ngram"`` (prompt lookup needs nothing). Used for
    Medusa (and for EAGLE in transformers); the caller adds a note saying so. A parallel (PARD) draft needs no such
    choice: it is itself a causal LM of the target's family, so an engine without parallel drafting runs it (or the
    draft it was adapted from) as an ordinary draft model, ``"draft_model"``."""
    return "draft_model" if has_small_model else "ngram"


def check_model_name(name: str, value) -> str:
    """``value``, a model name or path for a rendered command line or guide (every renderer checks its ``target``):
    a str, not empty, without surrounding spaces and on one line (no newline or other control character, which would
    break the command or the Markdown around it). Raises ``ValueError`` naming ``name``."""
    if not isinstance(value, str) or not value.strip() or value != value.strip() or not value.isprintable():
        raise ValueError(f"{name} must be a model name or path on one line, such as meta-llama/Llama-3.1-70B-Instruct "
                         f"(not empty, no surrounding spaces, no control characters), got {value!r:.80}")
    return value
