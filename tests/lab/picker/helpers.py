"""Helpers shared by the picker's tests: every workload the picker distinguishes, and vLLM's own names."""
from __future__ import annotations

import functools
import itertools

from lab.picker import TASKS, recommend

# Every user-settable field of vLLM's SpeculativeConfig, read from vllm/config/speculative.py on vLLM's main branch
# at commit 002e77c1f0ef (November 2026; the docs' features/speculative_decoding pages agree on the common keys).
# Internal fields vLLM fills in itself (target_model_config, draft_model_config, target_parallel_config,
# draft_parallel_config, draft_load_config) and tensor_parallel_size (kept only to warn) are left out.
VLLM_KEYS = {
    "enforce_eager", "num_speculative_tokens", "model", "method", "draft_tensor_parallel_size", "quantization",
    "moe_backend", "attention_backend", "kv_cache_dtype", "max_model_len", "revision", "code_revision",
    "index_share_for_mtp_iteration", "disable_padded_drafter_batch", "disable_eagle_block_drop",
    "use_local_argmax_reduction", "use_heterogeneous_vocab", "prompt_lookup_max", "prompt_lookup_min",
    "parallel_drafting", "num_speculative_tokens_per_batch_size", "suffix_decoding_max_tree_depth",
    "suffix_decoding_max_cached_requests", "suffix_decoding_max_spec_factor", "suffix_decoding_min_token_prob",
    "rejection_sample_method", "synthetic_acceptance_rates", "synthetic_acceptance_length",
    "enable_adaptive_verification", "draft_sample_method", "dspark_draft_topk",
}
# SpeculativeMethod in the same file (model-specific *_mtp names omitted).
VLLM_METHOD_VALUES = {"ngram", "medusa", "mlp_speculator", "draft_model", "suffix", "custom_class", "eagle", "eagle3",
                      "extract_hidden_states", "mtp", "dflash", "ngram_gpu", "dspark"}
# DraftSampleMethod in the same file.
VLLM_DRAFT_SAMPLE_METHODS = {"greedy", "probabilistic"}


def all_workloads():
    """Every combination of inputs the picker distinguishes."""
    for task, temperature, small, finetune, latency, memory, exclude in itertools.product(
            TASKS, (0.0, 0.5, 0.9, 1.3), (False, True), (False, True), (True, False), (None, 0.0, 2.0, 100.0),
            ((), ("eagle",), ("ngram", "lookahead"))):
        yield recommend(task, temperature, small, finetune, latency, memory, exclude=exclude)


@functools.lru_cache(maxsize=None)
def all_recommendations() -> tuple:
    """The recommendations for :func:`all_workloads`, computed once per test session (at first use)."""
    return tuple(all_workloads())
