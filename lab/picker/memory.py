"""The picker's memory model: what each method adds on the accelerator beyond the target and its KV cache.

Computed from parameter counts for a reference target, Llama 3 8B in bfloat16 (its ``config.json``: hidden 4096,
8 KV heads × 128 = 1024, MLP 14336, vocabulary 128256); a draft of 1B parameters is seed lesson 000's example
("Llama 3 1B"). :data:`MEMORY_PARAMS` holds the counts, :data:`MEMORY_NEEDED_GB` the gigabytes the rules compare
with ``memory_headroom_gb``.
"""
from __future__ import annotations

__all__ = ["MEDUSA_HEADS", "MEMORY_NEEDED_GB", "MEMORY_PARAMS"]


def _bf16_gb(params: float) -> float:
    """Gigabytes (1e9 bytes) that ``params`` parameters take in bfloat16 (2 bytes each)."""
    return params * 2 / 1e9


# Reference target for the arithmetic: Llama 3 8B (hidden 4096, 8 KV heads × 128 = 1024, MLP 14336, vocabulary
# 128256; its config.json). A draft of 1B parameters is seed lesson 000's example ("Llama 3 1B").
_HIDDEN, _KV_DIM, _MLP, _VOCAB = 4096, 1024, 14336, 128256
_LAYER_PARAMS = 2 * _HIDDEN * _HIDDEN + 2 * _HIDDEN * _KV_DIM + 3 * _HIDDEN * _MLP  # q, o; k, v; gate, up, down
# An EAGLE-1/2 head: one decoder layer + the 2h → h input projection, the target's LM head shared. An EAGLE-3 head
# is larger (its own output layer over a reduced draft vocabulary and a 3h → h fusion of three target layers).
_EAGLE_PARAMS = _LAYER_PARAMS + 2 * _HIDDEN * _HIDDEN
MEDUSA_HEADS = 4
"""Medusa heads assumed: the four of seed lesson 002's Medusa diagram (heads 0–3 for t+1 … t+4; seed lesson 000
draws the same four but makes head_0 the target's own LM head, leaving three added heads). Here all four are added
heads (head k predicts token t + 1 + k, as in lesson 10). Medusa drafts one token per head, so this is also Medusa's
N; vLLM's Medusa proposer, before 0.34.0 dropped it, required ``num_speculative_tokens`` to equal the checkpoint's
head count (one draft token per head), so use your checkpoint's count if it differs."""
_MEDUSA_PARAMS = MEDUSA_HEADS * (_HIDDEN * _HIDDEN + _HIDDEN * _VOCAB)  # a residual block + a vocabulary layer each
# One MTP module in DeepSeek-V3's form (§2.2 of its report): two RMSNorms, the 2h → h projection of [h; embedding] and
# one decoder block, the embedding and output head shared with the target: the EAGLE-1/2 head's count (norms left out).
_MTP_PARAMS = _LAYER_PARAMS + 2 * _HIDDEN * _HIDDEN
_DRAFT_PARAMS = 1.0e9

MEMORY_NEEDED_GB = {
    # weights, then as much again for the draft's own KV cache and activations (a rule of thumb: measure yours)
    "draft_model": round(2 * _bf16_gb(_DRAFT_PARAMS), 2),
    # a PARD draft is a draft model with one more embedding row (the mask token): the same 1B and cache by the same
    # rule; its KV cache holds the committed prefix only, the N - 1 mask positions being rolled back every step
    # (PARD's pard_infer.py, remove_kv_num; lab.drafters.parallel)
    "parallel": round(2 * _bf16_gb(_DRAFT_PARAMS), 2),
    "eagle": round(2 * _bf16_gb(_EAGLE_PARAMS), 2),
    # MTP modules ship in the target's checkpoint, so nothing is trained or downloaded, but they are not free on the
    # accelerator: an engine loads them only when MTP is on (vLLM builds the draft from the target's checkpoint with
    # the MTP architecture, and keeps a KV cache for it: `uses_draft_kv_cache` covers "mtp" in vLLM 0.34.0's
    # vllm/config/speculative.py). One module and its cache, by the same rule of thumb as EAGLE's head.
    "mtp": round(2 * _bf16_gb(_MTP_PARAMS), 2),
    # Medusa heads keep no KV cache, but each carries a vocabulary-sized output layer (Cai et al. 2024, eq. 1)
    "medusa": round(_bf16_gb(_MEDUSA_PARAMS), 2),
    "ngram": 0.0,
    "lookahead": 0.0,
    # no weights; vLLM 0.34.0 keeps its corpus of earlier responses on the device, token ids and a hash index
    # (suffix_decoding_corpus_tokens, 2**20 by default: a few MB), negligible beside the target's KV cache
    "suffix": 0.0,
}
"""Accelerator memory (GB) each method needs beyond the target and its KV cache, computed for a Llama 3 8B target
in bfloat16 (see the arithmetic above; the EAGLE figure is an EAGLE-1/2 head, an EAGLE-3 head needs more; the MTP
figure is one module, which the target's checkpoint already holds but which sits on the accelerator only while MTP
drafts). Draft-free methods need none."""

MEMORY_PARAMS = {"draft_model": _DRAFT_PARAMS, "parallel": _DRAFT_PARAMS, "eagle": _EAGLE_PARAMS,
                 "medusa": _MEDUSA_PARAMS, "mtp": _MTP_PARAMS}
"""The parameter counts behind :data:`MEMORY_NEEDED_GB` (for the lesson to show the arithmetic)."""
