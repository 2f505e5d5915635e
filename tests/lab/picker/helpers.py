"""Helpers shared by the picker's tests: every workload the picker distinguishes, suffix-decoding recommendations,
and vLLM's own names (parsed from the pinned source)."""
from __future__ import annotations

import functools
import itertools

from lab.picker import TASKS, Recommendation, recommend
from tests.lab.picker.engine_sources import vllm_source

# vLLM's own names, parsed from vllm/config/speculative.py of the pinned release (tests/data/engines/vllm-0.34.0),
# not copied: the user-settable SpeculativeConfig fields, SpeculativeMethod's values, DraftSampleMethod's values.
VLLM_KEYS = vllm_source().keys
VLLM_METHOD_VALUES = vllm_source().methods
VLLM_DRAFT_SAMPLE_METHODS = vllm_source().draft_sample_methods


def all_workloads():
    """Every combination of inputs the picker distinguishes, for a target without MTP modules; then, for a target
    with them, the combinations that move MTP (0.5 GB is below one module's need; excluding the draft-free methods
    leaves it the only draft on chat without a small model or training); then, with a parallel (PARD) draft of the
    family, the combinations that move it (2 GB is below a draft model's need; excluding the draft-free methods makes it
    a fallback on code, JSON, copy/edit and agent loops)."""
    for task, temperature, small, finetune, latency, memory, exclude in itertools.product(
            TASKS, (0.0, 0.5, 0.9, 1.3), (False, True), (False, True), (True, False), (None, 0.0, 2.0, 100.0),
            ((), ("eagle",), ("ngram", "lookahead"))):
        yield recommend(task, temperature, small, finetune, latency, memory, exclude=exclude)
    for task, temperature, small, finetune, latency, memory, exclude in itertools.product(
            TASKS, (0.0, 0.9, 1.3), (False, True), (False, True), (True, False), (None, 0.5),
            ((), ("ngram", "lookahead"))):
        yield recommend(task, temperature, small, finetune, latency, memory, exclude=exclude, target_has_mtp=True)
    for task, temperature, small, finetune, latency, memory, exclude in itertools.product(
            TASKS, (0.0, 0.9), (False, True), (False, True), (True, False), (None, 2.0),
            ((), ("ngram", "lookahead", "suffix"))):
        yield recommend(task, temperature, small, finetune, latency, memory, exclude=exclude, has_parallel_draft=True)


@functools.lru_cache(maxsize=None)
def all_recommendations() -> tuple:
    """The recommendations for :func:`all_workloads`, computed once per test session (at first use)."""
    return tuple(all_workloads())


def suffix_recommendations() -> tuple:
    """Recommendations for suffix decoding (method ``"suffix"``) beyond those the rules pick (agent loops): on code,
    greedy and sampled, with and without a small model, and under load with a batch-size schedule."""
    out = []
    cases = ((0.0, False, None), (0.7, True, None), (0.0, False, [[1, 64, 4], [65, 512, 0]]))
    for temperature, small, schedule in cases:
        workload = {"task": "code", "temperature": temperature, "latency_bound": schedule is None,
                    "has_small_same_family_model": small, "can_finetune": False, "memory_headroom_gb": None}
        settings = {"num_speculative_tokens_per_batch_size": schedule} if schedule else {}
        out.append(Recommendation("suffix", 4, 0.0, temperature, workload=workload, settings=settings))
    return tuple(out)
