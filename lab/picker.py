"""Choosing a speculative-decoding method for a workload, and the engine settings that serve it (lesson 14).

``recommend(task, temperature, has_small_same_family_model, can_finetune, latency_bound=True,
memory_headroom_gb=None, *, exclude=())`` returns a :class:`Recommendation`: a method, the draft length N, the
draft temperature, the reasons, the expected speedup range with its source, and the same choice rendered for vLLM
(``vllm_config()``, the ``--speculative-config`` JSON object; ``vllm_command()``), for transformers
(``hf_kwargs()`` for ``generate``, ``hf_assistant_config()`` for the assistant's generation config) and for this
course's own loop (``lab_drafter()``). ``python -m lab pick`` prints it; ``--markdown FILE`` writes
:meth:`Recommendation.to_markdown`, a one-page decision guide.

Method identifiers (``Recommendation.method``), stable lowercase strings:

- ``"draft_model"``: vanilla speculative decoding with a separate small draft model of the target's family
  (Leviathan et al. 2023);
- ``"medusa"``: Medusa heads trained on top of the target (Cai et al. 2024);
- ``"eagle"``: an EAGLE draft head that reads the target's hidden states (Li et al. 2024, 2025);
- ``"lookahead"``: Lookahead decoding, Jacobi iteration plus an n-gram pool, no draft at all (Fu et al. 2024);
- ``"ngram"``: prompt lookup, proposing what followed the last few tokens earlier in the context;
- ``"none"``: do not speculate.

Where the numbers come from. The expected speedups are the seed lessons' tables, reproduced in
:data:`STRATEGY_TABLE` (seed lesson 000, "Picking a draft": one range per method) and :data:`WORKLOAD_TABLE` (seed
lesson 002, production settings: method, k and speedup per workload); the throughput case uses seed 002's EAGLE-3
result (k = 1, the best k, cut cost by 20–54 %). The seed names no load for that result; applying it to
throughput-bound serving is this course's inference (lesson 13: at large batch sizes the shortest draft keeps its
gain longest), and lesson 13's roofline model (:mod:`lab.costs`) supplies the batch-size schedule that goes with
it. Prompt lookup on chat and long text, which the seed tables do not rate, takes lesson 12's measurements on prose
(:data:`ARENA_PROSE_SPEEDUPS`). The memory each method needs is computed from parameter counts in :data:`MEMORY_NEEDED_GB`. The
vLLM keys and ``method`` values are those of ``vllm/config/speculative.py`` (``SpeculativeConfig``) in vLLM's main
branch as read in November 2026 (commit 002e77c1; docs ``features/speculative_decoding``); the transformers keys are
``GenerationConfig`` fields of transformers 5.24. The Prometheus counters vLLM exports are listed in
:data:`VLLM_METRICS`, from ``vllm/v1/spec_decode/metrics.py``.

The rules, in order (each one adds a sentence to ``reasons``):

1. Temperature above :data:`MAX_TEMPERATURE` → ``"none"`` (seed 000 lists high-temperature sampling among the
   cases not to speculate; whether α actually falls depends on the pair: large, confident pairs usually lose α when
   sampling, while lesson 13 measured no drop on the bundled pair, so measure yours).
2. Not latency-bound (throughput, high batch) → ``"eagle"`` with N = 1 if a head can be trained and fits, else
   ``"none"`` (at high batch the accelerator is busy computing, and every rejected draft is wasted compute). Its
   vLLM config carries lesson 13's batch-size schedule, which stops drafting from the batch where that roofline
   model has N = 1 losing throughput (without it the gain would settle near 0.89×), so its range runs from 1× to
   seed 002's 2.17×.
3. Latency-bound: the workload row's method is the default (copy/edit, which has no row, defaults to
   ``"ngram"``); a learned head (EAGLE, Medusa) replaces it when it is feasible and its range in the strategy
   table is higher; when the default is not feasible, the best feasible fallback by the same ranges (prompt
   lookup, which the seed tables rate only for code and structured output, is rated elsewhere by its measured
   speedups on lesson 12's prose, :data:`ARENA_PROSE_SPEEDUPS`). Ties go to
   the workload row's method, then to the cheaper method; prompt lookup goes before Lookahead whenever both are
   feasible. Feasible = its prerequisite holds (a small same-family
   model; permission to train heads), it fits ``memory_headroom_gb``, and it is not in ``exclude``.
4. N: the top of the workload row's k range when greedy (T = 0), the bottom when sampling (the cautious end: large,
   confident pairs usually accept less when sampling; measure yours, lesson 13); Medusa drafts one token per head, so
   its N is the head count (:data:`MEDUSA_HEADS`, which vLLM's ``num_speculative_tokens`` must equal); Lookahead uses
   the n-gram size of lesson 09's defaults; throughput uses N = 1.

The picker's thresholds on acceptance are thresholds on α, the per-token acceptance probability of lesson 06's
formula (≈ the acceptance of the first drafted position; estimate it with :func:`lab.metrics.alpha_from_steps`,
lesson 12), not on the acceptance rate accepted ÷ drafted, which also falls as N grows. Seed lesson 000 gives its
0.6 and 0.85+ for α (its "acceptance rate" is per drafted token). The 0.7 under "revisit" is seed lesson 002's
">70 %" target, which that seed states for accepted ÷ drafted; the course applies it to α because α does not depend
on N and because lesson 06's formula puts the chat row's 2× at α ≈ 0.71 (N = 4, c = 0.1). Holding α to 0.7 is the
looser test: at N = 4 the formula turns α = 0.7 into an acceptance rate of about 0.44, and a 70 % acceptance rate
needs α ≈ 0.86.
"""
from __future__ import annotations

import json
import math
import shlex
from dataclasses import dataclass, field
from numbers import Integral, Real

import numpy as np

__all__ = [
    "recommend", "Recommendation", "TASKS", "METHODS", "METHOD_LABELS", "STRATEGY_TABLE", "WORKLOAD_TABLE",
    "StrategyRow", "WorkloadRow", "TASK_LABELS", "MEMORY_NEEDED_GB", "MEMORY_PARAMS", "MAX_TEMPERATURE",
    "SAMPLING_WARN_TEMPERATURE", "MEDUSA_HEADS",
    "VLLM_SPECULATIVE_KEYS", "VLLM_METHODS", "VLLM_METRICS", "stats_from_vllm_counters", "main",
]

TASKS = ("chat", "code", "structured", "long_text", "copy_edit")
METHODS = ("draft_model", "medusa", "eagle", "lookahead", "ngram", "none")
METHOD_LABELS = {
    "draft_model": "vanilla draft model",
    "medusa": "Medusa heads",
    "eagle": "EAGLE draft head",
    "lookahead": "Lookahead decoding",
    "ngram": "n-gram prompt lookup",
    "none": "no speculation",
}
TASK_LABELS = {"chat": "general chat", "code": "code generation", "structured": "structured output (JSON)",
               "long_text": "long text", "copy_edit": "copy / edit (output repeats the input)"}

# Cheaper first: what a method costs to set up (nothing / a model you have / heads you must train). Breaks ties.
_SETUP_ORDER = ("ngram", "lookahead", "draft_model", "medusa", "eagle")

SEED_000 = "seed lesson 000"
SEED_002 = "seed lesson 002"

MAX_TEMPERATURE = 1.0
"""Above this the picker returns ``"none"``: T = 1 samples the model's own distribution, higher flattens it
further, and seed lesson 000 lists high-temperature sampling among the cases not to speculate. (The effect on α
depends on the pair; lesson 13 measures it.)"""

SAMPLING_WARN_TEMPERATURE = 0.7
"""Seed lesson 002 samples at 0.7 in its production example, with the comment that a lower temperature means more
accepted drafts; above it the picker tells you to plan for the lower end of the range and to measure α."""


@dataclass(frozen=True)
class StrategyRow:
    """One row of seed lesson 000's "Picking a draft" table: a method, when to pick it, its speedup range."""

    method: str
    strategy: str
    when: str
    speedup: tuple


@dataclass(frozen=True)
class WorkloadRow:
    """One row of seed lesson 002's production-settings table: workload, method, k range, speedup range."""

    task: str
    workload: str
    method: str
    n_range: tuple
    speedup: tuple


STRATEGY_TABLE = (
    StrategyRow("draft_model", "Vanilla draft (1B/3B Llama family)", "Quick start, nothing to train", (1.8, 2.3)),
    StrategyRow("medusa", "Medusa heads", "Training heads on the target is allowed", (2.0, 3.0)),
    StrategyRow("eagle", "EAGLE-2 / 3", "Production serving, fastest option", (3.0, 4.0)),
    StrategyRow("lookahead", "Lookahead", "No draft model, nothing trained or added", (1.3, 1.6)),
)
"""Seed lesson 000, "Picking a draft" (strategy, when to pick, speedup); the "when to pick" column is in the
course's own words."""

WORKLOAD_TABLE = (
    WorkloadRow("chat", "General chat", "draft_model", (4, 5), (2.0, 2.5)),
    WorkloadRow("code", "Code generation", "ngram", (3, 5), (1.5, 2.0)),
    WorkloadRow("structured", "Structured JSON", "ngram", (5, 7), (2.0, 3.0)),
    WorkloadRow("long_text", "Long text", "draft_model", (3, 4), (1.8, 2.2)),
)
"""Seed lesson 002, production settings (workload, recommended method, k, expected speedup). It has no copy/edit
row; the picker uses the structured-JSON row, the nearest n-gram workload, for copy/edit."""

ARENA_PROSE_SPEEDUPS = {("ngram", 0): 1.37, ("ngram", 1): 1.02, ("lookahead", 0): 0.98, ("lookahead", 1): 0.76}
"""Measured speedups (× autoregressive) of prompt lookup and Lookahead on lesson 12's prose prompts at T = 0 and
T = 1, from the arena table committed with that lesson (bundled pair, CPU; tests/test_lesson_claims.py holds these
to it). The seed tables give prompt lookup no range for chat or long text; the picker uses these two instead."""

SHORT_OUTPUT_MEASURED = {"first_win_tokens": 2, "speedup_at_15": 1.53}
"""Lesson 13's committed run on the bundled pair: the fewest new tokens at which speculation (the draft model) was
ahead, and its speedup at 15 new tokens, the output length seed lesson 000 warns about (tests/test_lesson_claims.py
holds these to that run)."""

_STRATEGY = {row.method: row for row in STRATEGY_TABLE}
_WORKLOAD = {row.task: row for row in WORKLOAD_TABLE}
_NEAREST_ROW = {"copy_edit": "structured"}

# Seed lesson 002 quotes a November 2025 study of EAGLE-3: k = 1, the best k, cut cost by 20–54 % (a wrong k can
# raise it by 175 %). The seed names no load; the picker uses the result for throughput-bound serving, which is this
# course's inference (lesson 13: as the batch grows, the shortest draft keeps its gain longest). Serving cost per
# token falling by a fraction f means 1 / (1 - f) times the tokens for the same hardware.
_LOAD_COST_CUT = (0.20, 0.54)
_LOAD_SPEEDUP = tuple(round(1 / (1 - cut), 2) for cut in _LOAD_COST_CUT)
# Lesson 13's EAGLE-like scenario for its roofline model (lab.costs.speculative_throughput_gain): α, c, and an H100
# SXM's bf16 ridge point (FLOPs per byte). Under load the picker quotes that model's saturated gain and schedule.
_LOAD_ALPHA, _LOAD_COST_RATIO, _LOAD_RIDGE = 0.8, 0.02, 295.0


def _saturated_gain() -> float:
    """Lesson 13's model of EAGLE at N = 1 under a saturating batch: E / (N + 1 + N c), about 0.89."""
    from lab.costs import speculative_throughput_gain

    return speculative_throughput_gain(1 << 16, 1, _LOAD_ALPHA, _LOAD_COST_RATIO, _LOAD_RIDGE)


def _load_break_even() -> int:
    """The batch from which that model's N = 1 costs throughput (about 263)."""
    from lab.costs import break_even_batch

    return break_even_batch(1, _LOAD_ALPHA, _LOAD_COST_RATIO, _LOAD_RIDGE)


def _load_schedule() -> list:
    """vLLM's ``num_speculative_tokens_per_batch_size`` for N = 1 under that model (0 past the break-even)."""
    from lab.costs import draft_length_schedule

    return draft_length_schedule(_LOAD_ALPHA, _LOAD_COST_RATIO, _LOAD_RIDGE, max_n=1)


# --- memory: what each method adds on the accelerator ---------------------------------------------------------
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
N; vLLM requires ``num_speculative_tokens`` to equal the checkpoint's head count (its Medusa proposer returns one
draft token per head), so use your checkpoint's count if it differs."""
_MEDUSA_PARAMS = MEDUSA_HEADS * (_HIDDEN * _HIDDEN + _HIDDEN * _VOCAB)  # a residual block + a vocabulary layer each
_DRAFT_PARAMS = 1.0e9

MEMORY_NEEDED_GB = {
    # weights, then as much again for the draft's own KV cache and activations (a rule of thumb: measure yours)
    "draft_model": round(2 * _bf16_gb(_DRAFT_PARAMS), 2),
    "eagle": round(2 * _bf16_gb(_EAGLE_PARAMS), 2),
    # Medusa heads keep no KV cache, but each carries a vocabulary-sized output layer (Cai et al. 2024, eq. 1)
    "medusa": round(_bf16_gb(_MEDUSA_PARAMS), 2),
    "ngram": 0.0,
    "lookahead": 0.0,
}
"""Accelerator memory (GB) each method needs beyond the target and its KV cache, computed for a Llama 3 8B target
in bfloat16 (see the arithmetic above; the EAGLE figure is an EAGLE-1/2 head, an EAGLE-3 head needs more). Draft-free
methods need none."""

MEMORY_PARAMS = {"draft_model": _DRAFT_PARAMS, "eagle": _EAGLE_PARAMS, "medusa": _MEDUSA_PARAMS}
"""The parameter counts behind :data:`MEMORY_NEEDED_GB` (for the lesson to show the arithmetic)."""


# --- engines -----------------------------------------------------------------------------------------------------
VLLM_SPECULATIVE_KEYS = frozenset({
    "enforce_eager", "num_speculative_tokens", "model", "method", "draft_tensor_parallel_size",
    "quantization", "moe_backend", "attention_backend", "kv_cache_dtype", "max_model_len", "revision",
    "code_revision", "index_share_for_mtp_iteration", "disable_padded_drafter_batch", "disable_eagle_block_drop",
    "use_local_argmax_reduction", "use_heterogeneous_vocab", "prompt_lookup_max", "prompt_lookup_min",
    "parallel_drafting", "num_speculative_tokens_per_batch_size", "suffix_decoding_max_tree_depth",
    "suffix_decoding_max_cached_requests", "suffix_decoding_max_spec_factor", "suffix_decoding_min_token_prob",
    "rejection_sample_method", "synthetic_acceptance_rates", "synthetic_acceptance_length",
    "enable_adaptive_verification", "draft_sample_method", "dspark_draft_topk",
})
"""User-settable fields of vLLM's ``SpeculativeConfig`` (``vllm/config/speculative.py``, main at commit 002e77c1,
November 2026), i.e. the keys ``--speculative-config`` accepts. Left out: fields vLLM fills in itself
(``target_model_config``, ``draft_model_config``, ``target_parallel_config``, ``draft_parallel_config``,
``draft_load_config``) and ``tensor_parallel_size``, which exists only to warn that ``draft_tensor_parallel_size``
was meant."""

VLLM_METHODS = frozenset({"ngram", "medusa", "mlp_speculator", "draft_model", "suffix", "custom_class", "eagle",
                          "eagle3", "extract_hidden_states", "mtp", "dflash", "ngram_gpu", "dspark"})
"""``SpeculativeMethod`` values in the same file (the model-specific ``*_mtp`` names omitted; ``"mtp"`` covers
them)."""

VLLM_METRICS = {
    "acceptance_rate": ("rate(vllm:spec_decode_num_accepted_tokens_total[5m]) / "
                        "rate(vllm:spec_decode_num_draft_tokens_total[5m])"),
    "tokens_per_target_call": ("1 + rate(vllm:spec_decode_num_accepted_tokens_total[5m]) / "
                               "rate(vllm:spec_decode_num_drafts_total[5m])"),
    "per_position_acceptance": ("rate(vllm:spec_decode_num_accepted_tokens_per_pos_total{position=\"i\"}[5m]) / "
                                "rate(vllm:spec_decode_num_drafts_total[5m])"),
}
"""Our ``stats`` keys as PromQL over the counters vLLM exports when speculating (``vllm/v1/spec_decode/metrics.py``:
``vllm:spec_decode_num_drafts``, ``…_num_draft_tokens``, ``…_num_accepted_tokens``,
``…_num_accepted_tokens_per_pos`` with a ``position`` label; Prometheus adds ``_total`` to counters). vLLM's log
line calls the second one "mean acceptance length". vLLM counts only steps that carried a draft, so for prompt
lookup, where a step without a match is a target call with no draft, these read above our ``stats``, which count
every target call; they agree when every step drafts."""

_NGRAM_LOOKUP = {"prompt_lookup_max": 4, "prompt_lookup_min": 2}  # seed 002 looks back 4; vLLM's docs example min 2
_LOOKAHEAD = {"window": 4, "ngram": 3}  # LookaheadDrafter's defaults, the settings lesson 09 uses
_PLACEHOLDER = {"draft_model": "<same-family draft model>", "eagle": "<EAGLE-3 head for the target>",
                "medusa": "<Medusa heads for the target>"}


# --- the recommendation ------------------------------------------------------------------------------------------
@dataclass
class Recommendation:
    """A speculative-decoding choice for one workload, and how to run it.

    Attributes:
        method: one of :data:`METHODS` (``"draft_model" | "medusa" | "eagle" | "lookahead" | "ngram" | "none"``).
        n_draft: draft tokens per step N (int; 0 for ``"none"``).
        draft_temperature: temperature the draft samples at (float), 0.0 for a deterministic or greedy draft
            (verified as one-hot), None for ``"none"``.
        temperature: the target's sampling temperature (0 = greedy), as given.
        reasons: why, one sentence each (list[str]).
        expected_speedup: (low, high) wall-clock speedup over autoregressive decoding (for throughput-bound
            serving, the gain in throughput); (1.0, 1.0) for ``"none"``.
        source: where ``expected_speedup`` comes from (a seed table row, or the arithmetic on a cited result).
        notes: how the engines express the choice, where they cannot express it exactly (list[str]).
        revisit: conditions under which to run the picker again (list[str]).
        workload: the inputs, as a dict.
        settings: method-specific settings (prompt-lookup window sizes, Lookahead window and n-gram size; under
            load, vLLM's ``num_speculative_tokens_per_batch_size`` schedule, which :meth:`vllm_config` passes on).
    """

    method: str
    n_draft: int
    draft_temperature: float | None
    temperature: float
    reasons: list = field(default_factory=list)
    expected_speedup: tuple = (1.0, 1.0)
    source: str = ""
    notes: list = field(default_factory=list)
    revisit: list = field(default_factory=list)
    workload: dict = field(default_factory=dict)
    settings: dict = field(default_factory=dict)

    @property
    def label(self) -> str:
        """Human name of the method, e.g. "EAGLE draft head"."""
        return METHOD_LABELS[self.method]

    @property
    def speculates(self) -> bool:
        """False when the recommendation is plain decoding (method \"none\")."""
        return self.method != "none"

    # --- vLLM ----------------------------------------------------------------------------------------------
    def vllm_config(self, draft_model: str | None = None, draft_tensor_parallel_size: int | None = None,
                    tensor_parallel_size: int = 1) -> dict:
        """The ``--speculative-config`` JSON object for vLLM (``{}`` for ``"none"``: serve without it).

        Args:
            draft_model: name or path of the draft model / EAGLE head / Medusa heads (a placeholder when None).
            draft_tensor_parallel_size: GPUs the draft is sharded over; added to the object for the model-based
                methods that take it (``draft_model``, ``eagle``). vLLM's ``SpeculativeConfig`` accepts only 1 or
                the target's ``tensor_parallel_size``, and its draft-model proposer
                (``vllm/v1/spec_decode/draft_model.py``) further requires the target's size for ``draft_model``.
                None leaves it to vLLM (the target's size).
            tensor_parallel_size: GPUs the target is sharded over (``--tensor-parallel-size``, default 1), used
                only to check ``draft_tensor_parallel_size``.

        Lookahead has no vLLM proposer; its config is the n-gram one, the nearest draft-free method vLLM ships (see
        ``notes``). Medusa's ``num_speculative_tokens`` is :data:`MEDUSA_HEADS`, its head count. Keys: see
        :data:`VLLM_SPECULATIVE_KEYS`.

        Raises:
            ValueError: ``tensor_parallel_size`` or ``draft_tensor_parallel_size`` not an integer >= 1, a draft size
                other than 1 or ``tensor_parallel_size``, or (for ``draft_model``) other than
                ``tensor_parallel_size``; the message names the argument and the allowed values.
        """
        tensor_parallel_size = _check_tp("tensor_parallel_size", tensor_parallel_size)
        if draft_tensor_parallel_size is not None:
            draft_tensor_parallel_size = _check_tp("draft_tensor_parallel_size", draft_tensor_parallel_size)
            allowed = sorted({1, tensor_parallel_size})
            if draft_tensor_parallel_size not in allowed:
                raise ValueError(
                    f"draft_tensor_parallel_size must be 1 or the target's tensor_parallel_size "
                    f"({tensor_parallel_size}), i.e. one of {allowed}; got {draft_tensor_parallel_size}")
            if self.method == "draft_model" and draft_tensor_parallel_size != tensor_parallel_size:
                raise ValueError(
                    f"draft_tensor_parallel_size must equal tensor_parallel_size ({tensor_parallel_size}) for a "
                    f"draft model: vLLM's draft-model proposer rejects any other size; got "
                    f"{draft_tensor_parallel_size}")
        if self.method == "none":
            return {}
        if self.method in ("ngram", "lookahead"):
            return {"method": "ngram", "num_speculative_tokens": self.n_draft, **_NGRAM_LOOKUP}
        name = draft_model if draft_model is not None else _PLACEHOLDER[self.method]
        config = {"method": {"draft_model": "draft_model", "eagle": "eagle3", "medusa": "medusa"}[self.method],
                  "model": name, "num_speculative_tokens": self.n_draft}
        if self.method in ("draft_model", "eagle") and self.draft_temperature:
            # vLLM drafts greedily by default (verified as one-hot); sampling the draft needs its probabilities
            config["draft_sample_method"] = "probabilistic"
        if "num_speculative_tokens_per_batch_size" in self.settings:
            config["num_speculative_tokens_per_batch_size"] = self.settings["num_speculative_tokens_per_batch_size"]
        if draft_tensor_parallel_size is not None and self.method in ("draft_model", "eagle"):
            config["draft_tensor_parallel_size"] = draft_tensor_parallel_size
        return config

    def vllm_json(self, **kwargs) -> str:
        """:meth:`vllm_config` as the JSON text ``--speculative-config`` takes ("" for ``"none"``); same arguments
        and errors."""
        config = self.vllm_config(**kwargs)
        return json.dumps(config) if config else ""

    def vllm_command(self, target: str = "<target-model>", tensor_parallel_size: int = 1,
                     draft_model: str | None = None, draft_tensor_parallel_size: int | None = None) -> str:
        """A ``vllm serve`` command line for this recommendation, shell-quoted.

        ``tensor_parallel_size`` shards the target over that many GPUs (``--tensor-parallel-size``);
        ``draft_model`` and ``draft_tensor_parallel_size`` go into ``--speculative-config`` as in
        :meth:`vllm_config`. Raises ``ValueError`` (naming the argument) for a size that is not an integer >= 1
        and for a draft size vLLM rejects (anything but 1 or ``tensor_parallel_size``; for ``draft_model``,
        anything but ``tensor_parallel_size``).
        """
        tensor_parallel_size = _check_tp("tensor_parallel_size", tensor_parallel_size)
        parts = ["vllm", "serve", shlex.quote(target)]
        if tensor_parallel_size > 1:
            parts += ["--tensor-parallel-size", str(tensor_parallel_size)]
        text = self.vllm_json(draft_model=draft_model, draft_tensor_parallel_size=draft_tensor_parallel_size,
                              tensor_parallel_size=tensor_parallel_size)
        if text:
            parts += ["--speculative-config", shlex.quote(text)]
        return " ".join(parts)

    # --- transformers --------------------------------------------------------------------------------------
    def _uses_assistant(self) -> bool:
        if self.method == "draft_model":
            return True
        # transformers has no EAGLE or Medusa drafter: the nearest is an assistant model, if the workload has one
        return self.method in ("eagle", "medusa") and bool(self.workload.get("has_small_same_family_model"))

    def hf_kwargs(self, assistant_model=None) -> dict:
        """Keyword arguments for transformers' ``model.generate`` (transformers 5.24).

        ``assistant_model``: the loaded draft model to pass (a placeholder string when None). Sampling:
        ``do_sample`` and, when T > 0, ``temperature``. Draft length: for prompt lookup ``prompt_lookup_num_tokens``
        (with ``max_matching_ngram_size``); for an assistant model N is **not** a ``generate`` argument in this
        release — transformers reads ``num_assistant_tokens`` (and ``assistant_confidence_threshold``) from the
        assistant's own generation config, so set :meth:`hf_assistant_config` there. EAGLE, Medusa and Lookahead
        have no transformers drafter; the nearest one is returned and ``notes`` says so.
        """
        kwargs = {"do_sample": self.temperature > 0}
        if self.temperature > 0:
            kwargs["temperature"] = self.temperature
        if self.method == "none":
            return kwargs
        if self._uses_assistant():
            kwargs["assistant_model"] = assistant_model if assistant_model is not None else \
                _PLACEHOLDER["draft_model"]
        else:
            kwargs["prompt_lookup_num_tokens"] = self.n_draft
            kwargs["max_matching_ngram_size"] = _NGRAM_LOOKUP["prompt_lookup_max"]
        return kwargs

    def hf_assistant_config(self) -> dict:
        """Attributes to set on ``assistant_model.generation_config`` (``{}`` without an assistant model).

        - ``num_assistant_tokens`` = N with the ``"constant"`` schedule (transformers' ``"heuristic"`` schedule
          instead grows N by 2 after a full acceptance and shrinks it by 1 after a rejection);
        - ``assistant_confidence_threshold`` = 0.0, so that the assistant drafts all N tokens every step. An unset
          threshold becomes 0.4 in transformers 5.24 (``GenerationConfig._get_default_generation_params``): the
          assistant then stops drafting at the first token it gives less than that probability
          (``ConfidenceCriteria`` in ``generation/stopping_criteria.py``), and with scikit-learn installed the
          threshold is re-tuned as it runs (``AssistedCandidateGenerator.update_candidate_strategy``), so the
          draft length varies from step to step. Only a value > 0 adds that stopping rule.
        """
        if self.method == "none" or not self._uses_assistant():
            return {}
        return {"num_assistant_tokens": self.n_draft, "num_assistant_tokens_schedule": "constant",
                "assistant_confidence_threshold": 0.0}

    def hf_snippet(self, target: str = "<target-model>") -> str:
        """Python lines that run this recommendation with transformers (names are placeholders to fill)."""
        lines = ["from transformers import AutoModelForCausalLM, AutoTokenizer", "",
                 f"tokenizer = AutoTokenizer.from_pretrained({target!r})",
                 f"target = AutoModelForCausalLM.from_pretrained({target!r})"]
        kwargs = self.hf_kwargs()
        if "assistant_model" in kwargs:
            lines.append(f"assistant = AutoModelForCausalLM.from_pretrained({_PLACEHOLDER['draft_model']!r})")
            for key, value in self.hf_assistant_config().items():
                lines.append(f"assistant.generation_config.{key} = {value!r}")
            kwargs["assistant_model"] = _Raw("assistant")
        args = ", ".join(f"{k}={v!r}" for k, v in kwargs.items())
        lines += ['inputs = tokenizer("…", return_tensors="pt")',
                  f"out = target.generate(**inputs, max_new_tokens=256, {args})"]
        return "\n".join(lines)

    # --- this course -------------------------------------------------------------------------------------
    def lab_drafter(self) -> str | None:
        """The drafter expression for :func:`lab.decode.generate` in this course (None: autoregressive)."""
        if self.method == "draft_model":
            return f"DraftModelDrafter(pair.draft, n_draft={self.n_draft})"
        if self.method == "ngram":
            return f"PromptLookupDrafter(max_ngram={_NGRAM_LOOKUP['prompt_lookup_max']}, n_draft={self.n_draft})"
        if self.method == "lookahead":
            return f"LookaheadDrafter(window={_LOOKAHEAD['window']}, ngram={_LOOKAHEAD['ngram']})"
        if self.method == "medusa":
            return "MedusaDrafter.from_pretrained(pair)"
        if self.method == "eagle":
            return f"EagleDrafter.from_pretrained(pair, n_draft={self.n_draft})"
        return None

    # --- rendering -----------------------------------------------------------------------------------------
    def speedup_text(self) -> str:
        """The expected speedup range for display, e.g. \"1.5–2×\" (\"1×\" without speculation)."""
        low, high = self.expected_speedup
        return "1×" if not self.speculates else f"{low:g}–{high:g}×"

    def draft_temperature_text(self) -> str:
        """The draft temperature for display, with what it means."""
        if self.draft_temperature is None:
            return "n/a"
        if self.draft_temperature == 0:
            return "0 (deterministic or greedy draft, verified as one-hot)"
        return f"{self.draft_temperature:g} (the draft samples at the target's temperature)"

    def workload_text(self) -> str:
        """The workload this recommendation answers, as one line."""
        w = self.workload
        memory = w.get("memory_headroom_gb")
        parts = [f"task {w.get('task')}", f"temperature {w.get('temperature'):g}",
                 "latency-bound" if w.get("latency_bound") else "throughput-bound (high batch)",
                 f"same-family small model: {'yes' if w.get('has_small_same_family_model') else 'no'}",
                 f"may train heads / fine-tune: {'yes' if w.get('can_finetune') else 'no'}",
                 f"memory headroom: {'not given' if memory is None else f'{memory:g} GB'}"]
        if w.get("exclude"):
            parts.append("ruled out: " + ", ".join(w["exclude"]))
        return " · ".join(parts)

    def to_dict(self) -> dict:
        """Everything as JSON-ready data (the vLLM and transformers settings with placeholders)."""
        return {"method": self.method, "label": self.label, "n_draft": self.n_draft,
                "draft_temperature": self.draft_temperature, "temperature": self.temperature,
                "expected_speedup": list(self.expected_speedup), "source": self.source,
                "reasons": list(self.reasons), "notes": list(self.notes), "revisit": list(self.revisit),
                "workload": dict(self.workload), "settings": dict(self.settings),
                "vllm_config": self.vllm_config(), "hf_kwargs": self.hf_kwargs(),
                "hf_assistant_config": self.hf_assistant_config(), "lab_drafter": self.lab_drafter()}

    def summary(self, target: str = "<target-model>", tensor_parallel_size: int = 1) -> str:
        """Plain-text rendering (what ``python -m lab pick`` prints). Raises ``ValueError`` (naming the argument)
        when ``tensor_parallel_size`` is not an integer >= 1, as :meth:`vllm_command` does."""
        lines = [f"Workload: {self.workload_text()}",
                 f"Method: {self.label} ({self.method})"]
        if self.speculates:
            lines.append(f"Draft tokens per step N: {self.n_draft} · draft temperature: "
                         f"{self.draft_temperature_text()}")
        lines.append(f"Expected speedup: {self.speedup_text()} — source: {self.source}")
        lines.append("Why:")
        lines += [f"  - {r}" for r in self.reasons]
        lines.append("vLLM:")
        lines.append("  " + self.vllm_command(target, tensor_parallel_size))
        lines.append("transformers generate kwargs: " + _kwargs_text(self.hf_kwargs()))
        if self.hf_assistant_config():
            lines.append("  on assistant_model.generation_config: " + _kwargs_text(self.hf_assistant_config()))
        if self.notes:
            lines.append("Engine notes:")
            lines += [f"  - {n}" for n in self.notes]
        lines.append("Revisit when:")
        lines += [f"  - {r}" for r in self.revisit]
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.summary()

    def to_markdown(self, target: str = "<target-model>", tensor_parallel_size: int = 1) -> str:
        """A one-page decision guide for the workload, as Markdown. Raises ``ValueError`` (naming the argument)
        when ``tensor_parallel_size`` is not an integer >= 1, as :meth:`vllm_command` does."""
        w = self.workload
        task = TASK_LABELS.get(w.get("task"), w.get("task"))
        title = f"# Speculative decoding for {task} at T = {self.temperature:g}"
        out = [title, "", f"**Workload.** {self.workload_text()}.", "",
               f"## Decision: {self.label} (`{self.method}`)", "",
               "| setting | value |", "|---|---|",
               f"| method | {self.label} (`{self.method}`) |",
               f"| draft tokens per step N | {self.n_draft if self.speculates else 'n/a'} |",
               f"| draft temperature | {self.draft_temperature_text()} |",
               f"| target temperature | {self.temperature:g} |",
               f"| expected speedup | {self.speedup_text()} |",
               f"| source of that range | {self.source} |"]
        for key, value in self.settings.items():
            out.append(f"| {key} | {value} |")
        out += ["", "## Why", ""] + [f"- {r}" for r in self.reasons]
        out += ["", "## Serve it with vLLM", ""]
        if self.speculates:
            out += ["```bash", self.vllm_command(target, tensor_parallel_size), "```", "",
                    "The same object goes to Python as `LLM(model=..., speculative_config=...)`:", "",
                    "```json", json.dumps(self.vllm_config(), indent=2), "```"]
        else:
            out += ["```bash", self.vllm_command(target, tensor_parallel_size), "```", "",
                    "No `--speculative-config`: serve the target alone."]
        out += ["", "## Run it with transformers", "", "```python", self.hf_snippet(target), "```"]
        if self.lab_drafter():
            out += ["", "## Try it in this course", "", "```python",
                    "from lab.decode import generate",
                    "from lab.models import load_pair",
                    f"from lab.drafters import {self.lab_drafter().split('(')[0].split('.')[0]}",
                    'pair = load_pair("shakespeare")  # the bundled pair',
                    'prompt_ids = pair.encode("ROMEO.\\n")',
                    f"drafter = {self.lab_drafter()}",
                    "run = generate(pair.target, prompt_ids, drafter=drafter, max_new_tokens=200, "
                    f"temperature={self.temperature:g})",
                    "print(run.stats['acceptance_rate'], run.stats['tokens_per_target_call'])", "```"]
        if self.notes:
            out += ["", "## Engine notes", ""] + [f"- {n}" for n in self.notes]
        out += ["", "## Check it in production", "",
                "vLLM exports these counters while it speculates; our `stats` keys are ratios of them:", "",
                "| our stats key | PromQL over vLLM's counters |", "|---|---|"]
        out += [f"| `{key}` | `{expr}` |" for key, expr in VLLM_METRICS.items()]
        out += ["", "## When to revisit", ""] + [f"- {r}" for r in self.revisit]
        return "\n".join(out) + "\n"


class _Raw:
    """A name printed as-is inside generated code (its repr is the bare name)."""

    def __init__(self, name: str):
        self.name = name

    def __repr__(self) -> str:
        return self.name


def _kwargs_text(kwargs: dict) -> str:
    return ", ".join(f"{k}={v!r}" for k, v in kwargs.items()) if kwargs else "(none)"


def _a(method: str, capital: bool = False) -> str:
    """The method's label with its article, for sentences ("a vanilla draft model", "an EAGLE draft head")."""
    text = {"draft_model": "a vanilla draft model", "eagle": "an EAGLE draft head"}.get(method, METHOD_LABELS[method])
    return text[0].upper() + text[1:] if capital else text


def _check_tp(name: str, value) -> int:
    if isinstance(value, bool) or not isinstance(value, Integral) or value < 1:
        raise ValueError(f"{name} must be an integer >= 1 (GPUs), got {value!r}")
    return int(value)


# --- validation --------------------------------------------------------------------------------------------------
def _check_bool(name: str, value) -> bool:
    # numpy.bool_ is no bool subclass; 1 or "yes" would silently mean True
    if not isinstance(value, (bool, np.bool_)):
        raise ValueError(f"{name} must be True or False, got {type(value).__name__} {value!r}")
    return bool(value)


def _check_inputs(task, temperature, has_small, can_finetune, latency_bound, memory, exclude):
    if not isinstance(task, str) or task not in TASKS:
        raise ValueError(f"task must be one of {', '.join(TASKS)}; got {task!r}")
    if isinstance(temperature, bool) or not isinstance(temperature, Real) or not math.isfinite(temperature) \
            or temperature < 0:
        raise ValueError(f"temperature must be a finite number >= 0 (0 = greedy), got {temperature!r}")
    flags = (_check_bool("has_small_same_family_model", has_small), _check_bool("can_finetune", can_finetune),
             _check_bool("latency_bound", latency_bound))
    if memory is not None and (isinstance(memory, bool) or not isinstance(memory, Real)
                               or not math.isfinite(memory) or memory < 0):
        raise ValueError(f"memory_headroom_gb must be None (unknown) or a finite number >= 0, got {memory!r}")
    if isinstance(exclude, str):
        exclude = (exclude,)
    try:
        exclude = tuple(exclude)
    except TypeError:
        raise ValueError(f"exclude must be a list of methods, got {exclude!r}") from None
    allowed = [m for m in METHODS if m != "none"]
    bad = [m for m in exclude if m not in allowed]
    if bad:
        raise ValueError(f"exclude may only name {', '.join(allowed)}; got {bad!r}")
    return (float(temperature), *flags, None if memory is None else float(memory),
            tuple(m for m in allowed if m in exclude))


# --- the rules ---------------------------------------------------------------------------------------------------
def _feasible(method: str, has_small: bool, can_finetune: bool, memory, exclude) -> tuple:
    """(ok, why not) for one method under the workload's constraints."""
    if method in exclude:
        return False, f"{_a(method)} is ruled out (exclude)"
    if method == "draft_model" and not has_small:
        return False, "there is no small model of the target's family to draft with"
    if method in ("eagle", "medusa") and not can_finetune:
        return False, f"{_a(method)} must be trained for the target, and training is not an option"
    need = MEMORY_NEEDED_GB.get(method, 0.0)
    if memory is not None and need > memory:
        return False, (f"{_a(method)} needs about {need:g} GB beyond the target, more than the "
                       f"{memory:g} GB headroom")
    return True, ""


def _range_for(method: str, task: str) -> tuple:
    """(speedup range, source) for ``method`` on ``task``: its workload row if that row recommends it, else the
    strategy table."""
    row = _WORKLOAD.get(task) or _WORKLOAD[_NEAREST_ROW[task]]
    if row.method == method:
        note = "" if task in _WORKLOAD else " (nearest row: the seed has no copy/edit row)"
        return row.speedup, f"{SEED_002}, production-settings table, row \"{row.workload}\"{note}"
    if method == "ngram":  # chat or long text: no seed row recommends prompt lookup there
        return ((ARENA_PROSE_SPEEDUPS[("ngram", 1)], ARENA_PROSE_SPEEDUPS[("ngram", 0)]),
                "lesson 12's arena: prompt lookup on prose at T = 1 and T = 0, bundled pair on a CPU")
    strategy = _STRATEGY[method]
    return strategy.speedup, f"{SEED_000}, \"Picking a draft\" table, row \"{strategy.strategy}\""


def _n_for(task: str, temperature: float) -> tuple:
    row = _WORKLOAD.get(task) or _WORKLOAD[_NEAREST_ROW[task]]
    low, high = row.n_range
    return (high if temperature == 0 else low), row


def _revisit_none(workload: dict, cause: str) -> list:
    """When a "none" verdict is worth revisiting: the change that would lift what ruled speculation out (``cause``:
    "temperature", "load" or "infeasible"). A constraint is listed only if lifting it alone changes the verdict
    (:func:`recommend` run again with that one change). The speculating methods' items (thresholds on α and the
    like) do not apply while nothing is drafted."""
    if cause == "temperature":
        return [f"the serving temperature comes down to {MAX_TEMPERATURE:g} or below: the picker considers "
                "speculation again, and α should be measured at that temperature (lesson 13)"]

    def lifts(**change) -> bool:
        return recommend(**{**workload, **change}).method != "none"

    items = []
    if cause == "load":
        items.append("traffic drops to small batches or a latency target appears: speculation pays best there")
    if not workload["has_small_same_family_model"] and lifts(has_small_same_family_model=True):
        items.append("a small model of the target's family (same tokenizer) becomes available: a draft model needs "
                     "no training")
    if not workload["can_finetune"] and lifts(can_finetune=True):
        items.append("training on the target becomes allowed (or a trained head for it appears): " + (
            "an EAGLE head at N = 1 is the one method this course keeps under load" if cause == "load"
            else "EAGLE or Medusa heads (lessons 10 and 11)"))
    if workload["memory_headroom_gb"] is not None and lifts(memory_headroom_gb=None):
        items.append("more accelerator memory frees up: a drafter needs room for its weights and KV cache")
    if workload["exclude"] and lifts(exclude=()):
        items.append(f"a method you excluded ({', '.join(workload['exclude'])}) becomes an option again")
    return items


def _revisit(method: str, latency_bound: bool) -> list:
    items = ["α, the per-token acceptance probability, falls below 0.7 on your own traffic — estimate it as the "
             "first drafted position's acceptance, per_position_acceptance[0] (vLLM: "
             "…num_accepted_tokens_per_pos_total{position=\"0\"} / …num_drafts_total), or with "
             "lab.metrics.alpha_from_steps (lesson 12). The 0.7 is seed lesson 002's target for a good speedup, "
             "which that seed states for the acceptance rate accepted ÷ drafted; this course applies it to α, "
             "because the acceptance rate also falls as N grows and by lesson 06's formula the chat row's 2× "
             "already needs α ≈ 0.71 at N = 4, c = 0.1. α is never below the acceptance rate, so this is the "
             "looser test (at N = 4 a 70 % acceptance rate needs α ≈ 0.86): do not compare the acceptance rate "
             "with 0.7",
             "outputs are very short (seed lesson 000 names about 15 new tokens): prefill is not sped up and the "
             "drafter's set-up is paid once per request, so speculation pays only while that set-up divided by the "
             "time saved per token is below the output length (lesson 13: on the bundled pair it already won at "
             f"{SHORT_OUTPUT_MEASURED['first_win_tokens']} new tokens and gave "
             f"{SHORT_OUTPUT_MEASURED['speedup_at_15']:g}× at 15)",
             f"the sampling temperature goes above {SAMPLING_WARN_TEMPERATURE:g} (measure α again: large, confident "
             f"pairs usually lose some) or above {MAX_TEMPERATURE:g} (the picker turns speculation off)"]
    if latency_bound:
        items.append("traffic grows to large batches (throughput-bound): every rejected draft then costs compute "
                     "that other requests could use")
    else:
        items.append("traffic drops to small batches or a latency target appears: speculation pays best there")
    if method in ("ngram", "lookahead", "draft_model", "medusa"):
        items.append("a trained EAGLE head for your target becomes available (seed lesson 000: 3–4×)")
    if method in ("draft_model", "eagle", "medusa"):
        items.append("free accelerator memory shrinks: the draft or heads (and their KV cache) compete with the "
                     "target's KV cache, i.e. with batch size")
    return items


def recommend(task: str, temperature: float, has_small_same_family_model: bool, can_finetune: bool,
              latency_bound: bool = True, memory_headroom_gb: float | None = None, *,
              exclude=()) -> Recommendation:
    """Pick a speculative-decoding method, N and draft temperature for a workload (rules: module docstring).

    Args:
        task: one of ``"chat"``, ``"code"``, ``"structured"``, ``"long_text"``, ``"copy_edit"``.
        temperature: the target's sampling temperature, >= 0 (0 = greedy).
        has_small_same_family_model: a small model with the target's tokenizer exists (a vanilla draft).
        can_finetune: you may train extra parameters for the target (EAGLE or Medusa heads) — True also when a
            trained head for your target is published.
        latency_bound: True for interactive, small-batch serving; False for throughput-bound, high-batch serving.
        memory_headroom_gb: free accelerator memory (GB) beyond the target and its KV cache; None = not known
            (assumed to fit).
        exclude: methods you cannot use (e.g. ``("eagle",)`` when your engine has no EAGLE for your target's
            architecture); any of :data:`METHODS` but ``"none"``.

    Returns:
        a :class:`Recommendation`.

    Raises:
        ValueError: unknown task, temperature < 0 or not finite, a flag that is not a bool (``numpy.bool_``
            counts; numbers, NumPy scalars included, are accepted for temperature and memory), negative or
            non-finite memory, or an unknown method in ``exclude`` (the message names the argument and the
            allowed values).
    """
    temperature, has_small, finetune, latency_bound, memory, exclude = _check_inputs(
        task, temperature, has_small_same_family_model, can_finetune, latency_bound, memory_headroom_gb, exclude)
    workload = {"task": task, "temperature": temperature, "has_small_same_family_model": has_small,
                "can_finetune": finetune, "latency_bound": latency_bound, "memory_headroom_gb": memory,
                "exclude": list(exclude)}
    reasons, notes = [], []

    def none(source: str, cause: str) -> Recommendation:
        return Recommendation("none", 0, None, temperature, reasons, (1.0, 1.0), source, notes,
                              _revisit_none(workload, cause), workload, {})

    # 1. Temperature too high.
    if temperature > MAX_TEMPERATURE:
        reasons.append(f"Sampling at T = {temperature:g} flattens the target's distribution beyond its own (T = 1), "
                       "and seed lesson 000 lists high-temperature sampling among the cases not to speculate. What "
                       "it does to α depends on the pair: large, confident pairs usually lose α when sampling, while "
                       "lesson 13 measured no drop on the bundled pair (α 0.70 at T = 0, 0.71 at T = 2). Measure α "
                       "at your temperature before turning speculation on (lesson 13).")
        return none(f"{SEED_000}, \"When NOT to spec-decode\"", "temperature")

    # 2. Throughput-bound.
    if not latency_bound:
        reasons.append("At high batch sizes the accelerator is busy computing rather than waiting on memory, so "
                       "verifying N extra positions per sequence is no longer free, and every rejected draft is "
                       "compute taken from other requests. vLLM's guide aims speculation at medium-to-low request "
                       "rates and memory-bound workloads for this reason.")
        ok, why = _feasible("eagle", has_small, finetune, memory, exclude)
        if ok:
            high = _LOAD_SPEEDUP[1]
            saturated = round(_saturated_gain(), 2)
            reasons.append("A trained EAGLE head with N = 1 is the exception: seed lesson 002 reports that EAGLE-3 at "
                           f"k = 1, the best k, cut cost by {_LOAD_COST_CUT[0]:.0%}–{_LOAD_COST_CUT[1]:.0%}, while a "
                           "wrong k can raise it by 175 %. The seed does not say at what load; applying the result "
                           "here is this course's inference (lesson 13: as the batch grows, the shortest draft keeps "
                           "its gain longest). A cost cut f means 1 / (1 − f) the throughput.")
            reasons.append(f"That gain does not hold at every load: lesson 13's roofline model (α {_LOAD_ALPHA:g}, "
                           f"c {_LOAD_COST_RATIO:g}, an H100's ridge of {_LOAD_RIDGE:g} FLOPs per byte) puts N = 1 "
                           f"below autoregressive decoding from a batch of {_load_break_even()} sequences, settling "
                           f"at {saturated:.2f}× when the accelerator is saturated. The config below therefore "
                           "carries that model's batch-size schedule, which stops drafting from that batch on: with "
                           "it the model never falls below 1×, so the range runs from 1× (a saturated server, "
                           f"drafting off) to the seed's {high:g}×.")
            notes.append("vLLM varies N with the batch size through `num_speculative_tokens_per_batch_size`, "
                         "(first batch size, last batch size, N) triples with N = 0 for no drafts; the config above "
                         "carries lesson 13's schedule for N = 1 (lab.costs.draft_length_schedule). Recompute it "
                         "with your α, c and accelerator.")
            _memory_reason(reasons, "eagle", memory)
            return Recommendation("eagle", 1, temperature, temperature, reasons, (1.0, high),
                                  f"{SEED_002}, EAGLE-3 at k = 1 (20–54 % cost cut, as 1 / (1 − cut): up to "
                                  f"{high:g}×; applied under load by this course); 1× where lesson 13's batch-size "
                                  f"schedule turns drafting off ({saturated:g}× there without it)",
                                  _engine_notes("eagle", has_small) + notes, _revisit("eagle", False), workload,
                                  {"num_speculative_tokens_per_batch_size": _load_schedule()})
        reasons.append("The one exception this course makes under load, an EAGLE head at N = 1 (seed lesson 002: "
                       f"EAGLE-3 at k = 1 cut cost by 20–54 %), is not available: {why}.")
        if task == "copy_edit":
            reasons.append("Outputs that mostly copy the input are the case to measure anyway: n-gram drafts cost "
                           "nothing and are accepted in long runs.")
        return none(f"{SEED_000}, \"When NOT to spec-decode\"; {SEED_002}, EAGLE-3 at k = 1 (applied under load by "
                    "this course)", "load")

    # 3. Latency-bound: the workload row's method, unless a learned head beats it.
    n_draft, row = _n_for(task, temperature)
    default = "ngram" if task == "copy_edit" else row.method
    if task == "copy_edit":
        reasons.append("The output mostly repeats the input, so looking up what followed the last tokens earlier in "
                       "the context drafts whole copied spans at no cost (lesson 08); the seed tables have no "
                       "copy/edit row, so the structured-JSON n-gram row stands in for it.")
    else:
        reasons.append(f"Seed lesson 002 recommends {_a(row.method)} for {row.workload.lower()} "
                       f"(k {row.n_range[0]}–{row.n_range[1]}, {row.speedup[0]:g}–{row.speedup[1]:g}×).")
    candidates = {}
    default_ok, default_why = _feasible(default, has_small, finetune, memory, exclude)
    if default_ok:
        candidates[default] = _range_for(default, task)
    else:
        reasons.append(f"It is not an option here: {default_why}.")
    heads = () if task == "copy_edit" else ("eagle", "medusa")
    fallbacks = ("draft_model", "lookahead", "ngram")
    for method in heads + (fallbacks if not default_ok else ()):
        if method in candidates:
            continue
        ok, _ = _feasible(method, has_small, finetune, memory, exclude)
        if ok:
            candidates[method] = _range_for(method, task)
    if not candidates:
        reasons.append("No drafting method is feasible with these constraints.")
        return none("no feasible method", "infeasible")
    preferred_lookup = []
    if "ngram" in candidates and "lookahead" in candidates:
        # Both are draft-free; their ranges come from different sources (our CPU arena, the seed's table), so
        # they are not ranked by number: prompt lookup is what the engines serve, and lesson 12 measured it ahead.
        del candidates["lookahead"]
        if task in ("chat", "long_text"):
            preferred_lookup.append(
                "Of the two draft-free methods the picker takes prompt lookup over Lookahead: lesson 12 measured it "
                f"ahead on prose ({ARENA_PROSE_SPEEDUPS[('ngram', 0)]:g}× against "
                f"{ARENA_PROSE_SPEEDUPS[('lookahead', 0)]:g}× greedy, {ARENA_PROSE_SPEEDUPS[('ngram', 1)]:g}× "
                f"against {ARENA_PROSE_SPEEDUPS[('lookahead', 1)]:g}× at T = 1), and vLLM, which has no Lookahead, "
                "serves prompt lookup in its place.")
    if "ngram" in candidates and task in ("chat", "long_text"):
        preferred_lookup.append(
            "The seed tables rate prompt lookup only for code and JSON, so its range here is lesson 12's measurement "
            "on this course's CPU pair; prose repeats its context less than code does, so measure it on your "
            "traffic.")

    def rank(method):
        low, high = candidates[method][0]
        return (-(low + high) / 2, method != default, _SETUP_ORDER.index(method))

    method = min(candidates, key=rank)
    (low, high), source = candidates[method]
    if method != default:
        if default_ok:
            reasons.append(f"{_a(method, True)} is feasible and seed lesson 000 gives it {low:g}–{high:g}×, "
                           f"above the {candidates[default][0][0]:g}–{candidates[default][0][1]:g}× of "
                           f"{_a(default)}.")
        else:
            reasons.append(f"The best feasible alternative is {_a(method)} ({low:g}–{high:g}×; source: {source}).")
    if method == "ngram":
        reasons.extend(preferred_lookup)
    if method == "eagle" and "medusa" in candidates:
        reasons.append("EAGLE beats Medusa when both can be trained: its draft reads the target's features, and "
                       "seed lesson 000 puts its α (per-token acceptance) at 0.85+, against about 0.6 for a vanilla "
                       "draft and "
                       "slightly less than a good vanilla draft for Medusa; pass exclude=('eagle',) if your engine "
                       "lacks EAGLE for this target.")
    if method in ("eagle", "medusa") and _feasible("draft_model", has_small, finetune, memory, exclude)[0]:
        reasons.append("The small same-family model remains the no-training option (vanilla draft).")

    settings = {}
    if method == "lookahead" and task in ("chat", "long_text"):
        reasons.append("Measure it against prompt lookup before you commit: on the bundled pair lesson 12 measured "
                       f"Lookahead at {ARENA_PROSE_SPEEDUPS[('lookahead', 0)]:g}× on greedy prose and "
                       f"{ARENA_PROSE_SPEEDUPS[('lookahead', 1)]:g}× at T = 1, below prompt lookup's "
                       f"{ARENA_PROSE_SPEEDUPS[('ngram', 0)]:g}× and {ARENA_PROSE_SPEEDUPS[('ngram', 1)]:g}×: its target calls, which "
                       "also carry the Jacobi window and the n-gram candidates, gave fewer tokens each and are not "
                       "free on a CPU. The 1.3–1.6× range is the seed's, "
                       "for accelerators where verifying a few more positions costs almost nothing; vLLM, which has "
                       "no Lookahead, serves the config below as prompt lookup.")
    if method == "lookahead":
        n_draft = _LOOKAHEAD["ngram"] - 1
        settings = {"window": _LOOKAHEAD["window"], "ngram": _LOOKAHEAD["ngram"]}
        reasons.append(f"Lookahead verifies n-grams of {_LOOKAHEAD['ngram']} tokens that start at the last committed "
                       f"token, so N = {n_draft}, with a Jacobi window of {_LOOKAHEAD['window']} (lesson 09's "
                       "defaults).")
    elif method == "medusa":
        n_draft = MEDUSA_HEADS
        reasons.append(f"N = {n_draft}: Medusa drafts one token per head, so N is the number of heads "
                       f"({MEDUSA_HEADS} assumed here, as in seed lesson 002's diagram and in the memory figure); "
                       "vLLM's num_speculative_tokens must equal your checkpoint's head count.")
    else:
        if method == "ngram":
            settings = dict(_NGRAM_LOOKUP)
        which = "top" if temperature == 0 else "bottom"
        reasons.append(f"N = {n_draft}: the {which} of the workload's k range {row.n_range[0]}–{row.n_range[1]} "
                       + ("(greedy decoding, where a good pair's drafts are accepted most often, so longer drafts "
                          "pay)." if temperature == 0 else
                          "(sampling: large, confident pairs usually accept less than when greedy, so the shorter "
                          "end is the safer start; measure α at your temperature, lesson 13, and see lesson 06 for "
                          "the best N at that α)."))
    if temperature > SAMPLING_WARN_TEMPERATURE:
        deterministic = method in ("ngram", "lookahead", "medusa")
        reasons.append(f"At T = {temperature:g} (above seed lesson 002's {SAMPLING_WARN_TEMPERATURE:g}) plan for the "
                       "lower end of the range and measure α at this temperature"
                       + (": a deterministic draft is accepted with exactly the target's probability of the drafted "
                          "token, which sampling spreads over other tokens (lesson 12 measured prompt lookup and "
                          "Lookahead losing most of their acceptance at T = 1)." if deterministic else
                          ": large, confident pairs usually lose α when sampling, though a sampled draft can hold "
                          "much of it (lesson 13: the draft model; lesson 12: EAGLE's α fell by only 0.05–0.11 at "
                          "T = 1)."))
    _memory_reason(reasons, method, memory)

    if method in ("draft_model", "eagle"):
        draft_temperature = temperature
        if temperature > 0:
            reasons.append(f"The draft samples at T = {temperature:g} too, so both distributions are sharpened or "
                           "flattened alike and the draft stays close to the distribution it is verified against (their "
                           "overlap is the acceptance probability, lesson 05); vLLM needs "
                           "draft_sample_method = \"probabilistic\" for that, which the config below sets.")
    else:
        draft_temperature = 0.0
    return Recommendation(method, n_draft, draft_temperature, temperature, reasons, (low, high), source,
                          _engine_notes(method, has_small) + notes, _revisit(method, True), workload, settings)


def _memory_reason(reasons: list, method: str, memory) -> None:
    need = MEMORY_NEEDED_GB.get(method, 0.0)
    if need == 0:
        if method in ("ngram", "lookahead"):
            reasons.append("It needs no extra parameters and no extra memory.")
        return
    if memory is None:
        reasons.append(f"Memory headroom not given: this assumes the extra ~{need:g} GB fits (computed for a Llama 3 "
                       "8B target in bfloat16); pass memory_headroom_gb to check.")
    else:
        reasons.append(f"It needs ~{need:g} GB beyond the target, within the {memory:g} GB headroom.")


def _engine_notes(method: str, has_small: bool) -> list:
    notes = []
    if method == "lookahead":
        notes.append("vLLM has no Lookahead proposer (seed lesson 000 names TensorRT-LLM's LookaheadDecoder, "
                     "which went with TensorRT-LLM's old backend, lesson 14): the vLLM config is the n-gram method, "
                     "its nearest draft-free relative; transformers likewise gets prompt lookup. This course runs "
                     "real Lookahead with LookaheadDrafter.")
    if method == "eagle":
        notes.append("vLLM's method is \"eagle3\" for an EAGLE-3 head and \"eagle\" for an EAGLE-1/2 head; match "
                     "your checkpoint.")
    if method in ("eagle", "medusa"):
        nearest = "an assistant (draft) model" if has_small else "prompt lookup"
        name = "EAGLE" if method == "eagle" else "Medusa"
        notes.append(f"transformers' generate has no {name} drafter; the transformers settings use {nearest}, the "
                     "nearest it ships.")
    if method == "draft_model":
        notes.append("transformers samples the assistant with the target's own logits processors, so the draft "
                     "temperature follows the target's; in vLLM, draft_sample_method = \"probabilistic\" is what "
                     "makes the draft sample rather than take its argmax.")
    return notes


# --- vLLM metrics → our stats (lesson 14's exercise has the learner write this) ----------------------------------
def stats_from_vllm_counters(num_drafts: int, num_draft_tokens: int, num_accepted_tokens: int,
                             accepted_per_position) -> dict:
    """Our ``stats`` keys from vLLM's speculative-decoding counters.

    vLLM counts, per request and verification step that carried a draft (``vllm/v1/spec_decode/metrics.py``,
    ``SpecDecodingStats.observe_draft``): ``num_drafts`` += 1, ``num_draft_tokens`` += the tokens drafted (at least
    1), ``num_accepted_tokens`` += the drafted tokens accepted, and ``accepted_per_position[i]`` += 1 for every
    position i < accepted (so position i counts the drafts whose first i + 1 tokens were all accepted). So:

    - ``acceptance_rate`` = accepted / drafted tokens;
    - ``tokens_per_target_call`` = 1 + accepted / drafts (each step adds one token of the target's own, resampled
      or bonus: vLLM's "mean acceptance length"); over the steps that drafted, which is every target call for a
      draft model or EAGLE but not for prompt lookup (a step without a match has no draft);
    - ``per_position_acceptance[i]`` = accepted at position i / drafts (equal to ours when every step drafts N).

    Args:
        num_drafts, num_draft_tokens, num_accepted_tokens: counter values, whole numbers >= 0 (floats such as
            ``12.0``, as Prometheus reports counters, are accepted when they are whole).
        accepted_per_position: one whole count >= 0 per draft position (any iterable; trailing zeros allowed).

    Returns:
        a dict with ``acceptance_rate`` (float), ``tokens_per_target_call`` (float) and
        ``per_position_acceptance`` (list of floats, one per position). With no drafts the first two are None and
        the list is empty.

    Raises:
        ValueError: a count that is not a whole number >= 0, or counters that contradict each other:
            ``num_accepted_tokens`` > ``num_draft_tokens``; ``num_draft_tokens`` < ``num_drafts`` or > 0 with no
            drafts; a position count above ``num_drafts`` or above the one before it; position counts that do not
            sum to ``num_accepted_tokens``. The message names the argument.
    """
    num_drafts = _count("num_drafts", num_drafts)
    num_draft_tokens = _count("num_draft_tokens", num_draft_tokens)
    num_accepted_tokens = _count("num_accepted_tokens", num_accepted_tokens)
    if isinstance(accepted_per_position, (str, bytes)):
        raise ValueError(f"accepted_per_position must be a list of counts, got {accepted_per_position!r}")
    try:
        raw = list(accepted_per_position)
    except TypeError:
        raise ValueError(f"accepted_per_position must be a list of counts, got {accepted_per_position!r}") from None
    per_position = [_count(f"accepted_per_position[{i}]", x) for i, x in enumerate(raw)]
    if num_accepted_tokens > num_draft_tokens:
        raise ValueError(f"num_accepted_tokens ({num_accepted_tokens}) cannot exceed num_draft_tokens "
                         f"({num_draft_tokens}): only drafted tokens can be accepted")
    if num_draft_tokens < num_drafts:
        raise ValueError(f"num_draft_tokens ({num_draft_tokens}) cannot be below num_drafts ({num_drafts}): vLLM "
                         "counts a draft only when it holds at least one token")
    if num_drafts == 0 and num_draft_tokens > 0:
        raise ValueError(f"num_draft_tokens ({num_draft_tokens}) must be 0 when num_drafts is 0")
    for i, count in enumerate(per_position):
        if count > num_drafts:
            raise ValueError(f"accepted_per_position[{i}] ({count}) cannot exceed num_drafts ({num_drafts}): each "
                             "draft adds at most 1 per position")
        if i and count > per_position[i - 1]:
            raise ValueError(f"accepted_per_position must not increase with the position: [{i}] = {count} > "
                             f"[{i - 1}] = {per_position[i - 1]} (a position counts only when every earlier one "
                             "was accepted)")
    if sum(per_position) != num_accepted_tokens:
        raise ValueError(f"accepted_per_position must sum to num_accepted_tokens ({num_accepted_tokens}), got "
                         f"{sum(per_position)}: each accepted token adds 1 at its position")
    if num_drafts == 0:
        return {"acceptance_rate": None, "tokens_per_target_call": None, "per_position_acceptance": []}
    return {
        "acceptance_rate": num_accepted_tokens / num_draft_tokens,
        "tokens_per_target_call": 1 + num_accepted_tokens / num_drafts,
        "per_position_acceptance": [x / num_drafts for x in per_position],
    }


def _count(name: str, value) -> int:
    """``value`` as an int, if it is a whole number >= 0 (a counter); else ``ValueError`` naming ``name``."""
    if isinstance(value, bool) or not isinstance(value, Real) or not math.isfinite(value) or value < 0 \
            or value != int(value):
        raise ValueError(f"{name} must be a whole number >= 0 (a counter), got {value!r}")
    return int(value)


# --- CLI ---------------------------------------------------------------------------------------------------------
_FLAGS = {"memory_headroom_gb": "--memory-gb", "tensor_parallel_size": "--tensor-parallel-size",
          "temperature": "--temperature", "task": "--task", "exclude": "--exclude"}


def _flag_message(message: str) -> str:
    """A ``ValueError`` message from :func:`recommend` with its leading argument name replaced by the CLI flag."""
    for name, flag in _FLAGS.items():
        if message.startswith(name + " "):
            return flag + message[len(name):]
    return message


def main(args) -> int:
    """``python -m lab pick``: print the recommendation; ``--markdown FILE`` also writes the decision guide.

    ``args`` carries task, temperature, small_model, can_finetune, throughput, memory_gb, markdown, target,
    tensor_parallel_size, json, exclude. A bad value prints one line naming the flag to stderr and returns 2 (before
    anything is printed to stdout; a ``--markdown`` path whose folder does not exist counts as a bad value); a
    guide that cannot be written for another reason (permissions, a full disk) prints one line and returns 1.
    """
    import sys
    from pathlib import Path

    def fail(message: str, status: int) -> int:
        print(f"python -m lab pick: {message}", file=sys.stderr)
        return status

    try:
        rec = recommend(args.task, args.temperature, bool(args.small_model), bool(args.can_finetune),
                        latency_bound=not args.throughput, memory_headroom_gb=args.memory_gb,
                        exclude=tuple(args.exclude or ()))
        tp = args.tensor_parallel_size
        command = rec.vllm_command(args.target, tp)
    except ValueError as error:
        return fail(_flag_message(str(error)), 2)
    path = None
    if args.markdown is not None:
        if not str(args.markdown).strip():
            return fail("--markdown: give a file name, e.g. guide.md (got an empty one)", 2)
        path = Path(args.markdown)
        if path.is_dir():
            return fail(f"--markdown: {path} is a folder; give a file name, e.g. {path / 'guide.md'}", 2)
        if not path.parent.is_dir():
            return fail(f"--markdown: cannot write {path}: the folder {path.parent} does not exist", 2)
    if args.json:
        data = rec.to_dict()
        data["vllm_command"] = command
        print(json.dumps(data, indent=1))
    else:
        print(rec.summary(args.target, tp))
    if path is not None:
        try:
            path.write_text(rec.to_markdown(args.target, tp), encoding="utf-8")
        except OSError as error:
            return fail(f"--markdown: cannot write {path}: {error.strerror or error}", 1)
        if not args.json:
            print(f"\nDecision guide written to {path}")
    return 0
