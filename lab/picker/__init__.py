"""Choosing a speculative-decoding method for a workload, and the engine settings that serve it (lesson 14).

``recommend(task, temperature, has_small_same_family_model, can_finetune, latency_bound=True, memory_headroom_gb=None,
*, exclude=(), target_has_mtp=False, has_parallel_draft=False)`` returns a :class:`Recommendation`: a method, the draft
length N, the draft temperature, the reasons, the expected speedup range with its source, and the same choice rendered
for five engines: vLLM (``vllm_config()``, the ``--speculative-config`` JSON object; ``vllm_command()``), SGLang
(``sglang_args()``, server flags; ``sglang_command()``), TensorRT-LLM (``trtllm_config()``, its ``speculative_config``;
``trtllm_yaml()``), llama.cpp (``llamacpp_args()``, ``llama-server`` flags; ``llamacpp_command()``) and transformers
(``hf_kwargs()`` for ``generate``, ``hf_assistant_config()`` for the assistant's generation config), and for this
course's own loop (``lab_drafter()``). Where an engine has no drafter for the method, it gets the nearest one it has
that the workload allows (not in ``exclude``, within the memory headroom; :mod:`~lab.picker.substitutes`), or, with
none left, serves the target alone; ``engine_notes()`` says so, ``served()`` lists what each engine runs, and the
summary quotes the expected speedup of what each engine serves beside the method's own. ``python -m lab pick``
prints it; ``--markdown FILE`` writes :meth:`Recommendation.to_markdown`, a one-page decision guide.

Method identifiers (``Recommendation.method``), stable lowercase strings:

- ``"draft_model"``: vanilla speculative decoding with a separate small draft model of the target's family
  (Leviathan et al. 2023);
- ``"parallel"``: a parallel (PARD) draft model, a small model of the target's family adapted to propose N tokens in
  one forward from mask tokens (An et al. 2025, arXiv 2504.18583); only when ``has_parallel_draft`` says one exists;
- ``"medusa"``: Medusa heads trained on top of the target (Cai et al. 2024);
- ``"eagle"``: an EAGLE draft head that reads the target's hidden states (Li et al. 2024, 2025);
- ``"mtp"``: the multi-token-prediction modules some targets ship in their own checkpoint (DeepSeek-V3/R1, Qwen3-Next,
  GLM-4.5, MiMo, ...), drafting from the target's hidden states with nothing trained or downloaded (DeepSeek-AI
  2024, arXiv 2412.19437); only when ``target_has_mtp`` says the target has them;
- ``"lookahead"``: Lookahead decoding, Jacobi iteration plus an n-gram pool, no draft at all (Fu et al. 2024);
- ``"ngram"``: prompt lookup, proposing what followed the last few tokens earlier in the context;
- ``"suffix"``: suffix decoding, drafting from a cache of earlier outputs as well as the prompt (Oliaro et al. 2024);
- ``"none"``: do not speculate.

Where the numbers come from. The expected speedups are the seed lessons' tables, reproduced in
:data:`STRATEGY_TABLE` (seed lesson 000, "Picking a draft": one range per method) and :data:`WORKLOAD_TABLE` (seed
lesson 002, production settings: method, k and speedup per workload); the throughput case uses seed 002's EAGLE-3
result (k = 1, the best k, cut cost by 20–54 %). The seed names no load for that result; applying it to
throughput-bound serving is this course's inference (lesson 13: at large batch sizes the shortest draft keeps its
gain longest), and lesson 13's roofline model (:mod:`lab.costs`) supplies the batch-size schedule that goes with
it. Prompt lookup on chat and long text, which the seed tables do not rate, takes lesson 12's committed
measurements on chat requests (:data:`ARENA_CHAT_SPEEDUPS`). The target's MTP modules, which the seeds do not know,
take the one number the DeepSeek-V3 report publishes for them (§5.4.3: the drafted token accepted 85–90 % of the time,
1.8× the tokens per second, with one module drafting one token). A parallel (PARD) draft takes the PARD authors'
MT-Bench speedups in vLLM (:data:`lab.picker.tables.PARD_VLLM_TABLE`: 2.52–2.72× over three targets), beside this
course's own measurement on the Shakespeare pair, where it was not faster than its autoregressive draft
(:data:`lab.picker.tables.PARALLEL_MEASURED`). The memory each method needs is computed from
parameter counts in :data:`MEMORY_NEEDED_GB`. Each engine's keys, flags and method names are those of its own
code at a pinned release (vLLM 0.34.0, SGLang 0.5.23, TensorRT-LLM at commit 0004396, llama.cpp as vendored in
llama-cpp-python 0.3.36, the installed transformers), and the tests check every rendered setting against the
sets parsed from those files (``tests/data/engines/``). The
Prometheus counters vLLM exports are listed in :data:`VLLM_METRICS`, from ``vllm/v1/spec_decode/metrics.py``.

The rules, in order (each one adds a sentence to ``reasons``):

0. The temperature must lie in the OpenAI API's range, 0 to 2 (:data:`lab.picker.tables.MAX_API_TEMPERATURE`);
   below 1e-5 it is greedy, as in vLLM (:data:`lab.picker.tables.SAMPLING_EPS`), and the reasons say so.
1. Temperature above :data:`MAX_TEMPERATURE` → ``"none"`` (seed 000 lists high-temperature sampling among the
   cases not to speculate; whether α actually falls depends on the pair: large, confident pairs usually lose α when
   sampling, as lesson 13 measured on the real pair, while a pair unsure on most positions can even gain, so
   measure yours).
2. Not latency-bound (throughput, high batch) → the target's own ``"mtp"`` modules with N = 1 when it ships them
   and they fit (nothing to train or load), else ``"eagle"`` with N = 1 if a head can be trained and fits, else
   ``"none"`` (at high batch the accelerator is busy computing, and every rejected draft is wasted compute). The
   vLLM config carries lesson 13's batch-size schedule, which stops drafting from the batch where that roofline
   model has N = 1 losing throughput (without it the gain would settle near 0.89×), so the range runs from 1× to
   the method's published gain (MTP: the DeepSeek-V3 report's 1.8×; EAGLE: seed 002's 2.17×).
3. Latency-bound: the workload row's method is the default (copy/edit, which has no row, defaults to
   ``"ngram"``); a head drafting from the target's features (EAGLE, Medusa, the target's MTP modules) replaces it
   when it is feasible and its range in the strategy table is higher (not for copy/edit or agent loops, whose
   answers repeat text); a parallel (PARD) draft is ranked wherever a draft model is (as the default or a
   fallback), since it is one; when the default is not feasible, the best feasible fallback by the same ranges (prompt
   lookup, which the seed tables rate only for code and structured output, is rated elsewhere by its measured
   speedups on lesson 12's chat requests, :data:`ARENA_CHAT_SPEEDUPS`). Ties go to
   the workload row's method, then to the cheaper method; prompt lookup goes before Lookahead whenever both are
   feasible. Feasible = its prerequisite holds (a small same-family
   model; permission to train heads; MTP modules in the target's checkpoint; a PARD draft of the target's family),
   it fits ``memory_headroom_gb``, and it
   is not in ``exclude``.
4. N: the top of the workload row's k range when greedy (T = 0), the bottom when sampling (the cautious end: large,
   confident pairs usually accept less when sampling; measure yours, lesson 13); Medusa drafts one token per head, so
   its N is the head count (:data:`MEDUSA_HEADS`; vLLM releases before 0.34.0 required it); the target's MTP
   modules draft N = 1, one token from one module as DeepSeek-V3 reports it (engines accept more and run the
   module again, with falling acceptance); Lookahead uses the n-gram size of lesson 09's defaults; throughput uses
   N = 1.

The picker's thresholds on acceptance are thresholds on α, the per-token acceptance probability of lesson 06's
formula (≈ the acceptance of the first drafted position; estimate it with :func:`lab.metrics.alpha_from_steps`,
lesson 12), not on the acceptance rate accepted ÷ drafted, which also falls as N grows. Seed lesson 000 gives its
0.6 and 0.85+ for α (its "acceptance rate" is per drafted token). The 0.7 under "revisit" is seed lesson 002's
">70 %" target, which that seed states for accepted ÷ drafted; the course applies it to α because α does not depend
on N and because lesson 06's formula puts the chat row's 2× at α ≈ 0.71 (N = 4, c = 0.1). Holding α to 0.7 is the
looser test: at N = 4 the formula turns α = 0.7 into an acceptance rate of about 0.44, and a 70 % acceptance rate
needs α ≈ 0.86.

The package, one concept per module: :mod:`~lab.picker.tables` (the seed tables, measured numbers, names and
labels), :mod:`~lab.picker.memory` (what each method adds in memory), :mod:`~lab.picker.feasibility` (which
methods a workload rules out, and why), :mod:`~lab.picker.load` (the numbers of the
throughput-bound case, from :mod:`lab.costs`), :mod:`~lab.picker.workload` (checking the inputs),
:mod:`~lab.picker.rules` (the rules above as decisions, and :func:`recommend`), :mod:`~lab.picker.decision` (a
decision as data), :mod:`~lab.picker.reasons` and :mod:`~lab.picker.revisit` (the decision in words),
:mod:`~lab.picker.engines` (vLLM, transformers and this course's settings, and the other engines' gathered),
:mod:`~lab.picker.sglang`, :mod:`~lab.picker.trtllm` and :mod:`~lab.picker.llamacpp` (one engine each),
:mod:`~lab.picker.substitutes` (the nearest method an engine runs instead, honouring ``exclude`` and memory),
:mod:`~lab.picker.gpus` (checking GPU counts and SGLang's running-request cap), :mod:`~lab.picker.recommendation`
(:class:`Recommendation` and its text renderings), :mod:`~lab.picker.counters` (vLLM's counters as our stats) and
:mod:`~lab.picker.command` (what ``python -m lab pick`` does after parsing its flags: :func:`report`). Importing
the package does not import torch (the command line builds its parser from :data:`TASKS` and :data:`METHODS`).
"""
from __future__ import annotations

from lab.picker.command import report
from lab.picker.counters import VLLM_METRICS, stats_from_vllm_counters
from lab.picker.engines import VLLM_METHODS, VLLM_SPECULATIVE_KEYS, VLLM_SUFFIX_DEFAULTS
from lab.picker.llamacpp import LLAMACPP_SPEC_TYPES
from lab.picker.memory import MEDUSA_HEADS, MEMORY_NEEDED_GB, MEMORY_PARAMS
from lab.picker.recommendation import Recommendation
from lab.picker.rules import recommend
from lab.picker.sglang import SGLANG_ALGORITHMS
from lab.picker.tables import (ARENA_CHAT_SPEEDUPS, MAX_TEMPERATURE, METHOD_LABELS, METHODS,
                               SAMPLING_WARN_TEMPERATURE, STRATEGY_TABLE, TASK_LABELS, TASKS,
                               WORKLOAD_TABLE, StrategyRow, WorkloadRow)
from lab.picker.trtllm import TRTLLM_DECODING_TYPES

__all__ = [
    "recommend", "Recommendation", "TASKS", "METHODS", "METHOD_LABELS", "STRATEGY_TABLE", "WORKLOAD_TABLE",
    "StrategyRow", "WorkloadRow", "TASK_LABELS", "MEMORY_NEEDED_GB", "MEMORY_PARAMS", "MAX_TEMPERATURE",
    "SAMPLING_WARN_TEMPERATURE", "MEDUSA_HEADS", "ARENA_CHAT_SPEEDUPS",
    "VLLM_SPECULATIVE_KEYS", "VLLM_METHODS", "VLLM_SUFFIX_DEFAULTS", "SGLANG_ALGORITHMS", "TRTLLM_DECODING_TYPES",
    "LLAMACPP_SPEC_TYPES", "VLLM_METRICS", "stats_from_vllm_counters", "report",
]
