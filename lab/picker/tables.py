"""The picker's data: the seed lessons' tables, the course's measured numbers, the method and task names and labels,
and the fixed settings of the draft-free methods. Nothing here decides: :func:`workload_row` and :func:`speedup_for`
only look the tables up; :mod:`lab.picker.rules` reads these.

Sources: :data:`STRATEGY_TABLE` is seed lesson 000's "Picking a draft" table plus one measured row (suffix decoding,
which the seeds do not know) and one published row (a target's own MTP modules, from the DeepSeek-V3 report:
:data:`MTP_REPORT`), :data:`WORKLOAD_TABLE` seed lesson 002's production settings;
:data:`ARENA_CHAT_SPEEDUPS`, :data:`ARENA_CHAT_PER_CALL`, :data:`ARENA_SUFFIX_SPEEDUPS` and
:data:`ARENA_SUFFIX_PER_CALL` are read from the committed arena run that lesson 12 reads (:data:`ARENA_FILE`, read
once at import), so a re-run of the arena moves them with it. The parallel (PARD) row takes the PARD authors' vLLM
numbers (:data:`PARD_REPORT`); :data:`PARALLEL_MEASURED` and :data:`PARALLEL_MEASURED_REAL` are this course's own
measurements of a parallel draft against the autoregressive draft it was adapted from (the two pairs' cards;
tests/lab/picker/test_parallel.py holds them to ``lab/assets/<pair>/parallel/``).
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "TASKS", "METHODS", "COPY_DEFAULTS", "METHOD_LABELS",
    "TASK_LABELS", "TASK_EXAMPLES", "method_phrase", "SETUP_ORDER", "SEED_000",
    "SEED_002",
    "MAX_TEMPERATURE", "MAX_API_TEMPERATURE", "SAMPLING_EPS", "SAMPLING_WARN_TEMPERATURE", "speedup_for",
    "StrategyRow", "WorkloadRow", "STRATEGY_TABLE", "WORKLOAD_TABLE",
    "STRATEGY_BY_METHOD", "WORKLOAD_BY_TASK", "NEAREST_ROW", "workload_row", "ARENA_CHAT_SPEEDUPS",
    "ARENA_CHAT_PER_CALL", "ARENA_CONVERSATION_NGRAM_SPEEDUPS", "ARENA_SEEDED_NGRAM", "served_speedup_for",
    "NGRAM_LOOKUP",
    "LOOKAHEAD_SETTINGS", "ARENA_SUFFIX_SPEEDUPS", "ARENA_SUFFIX_PER_CALL",
    "ARENA_RUN", "ARENA_FILE", "ARENA_ALPHA", "MTP_REPORT", "MTP_ACCEPTANCE", "MTP_SPEEDUP", "MTP_N", "PARD_REPORT",
    "PARD_VLLM_TABLE",
    "PARD_CHAT_SPEEDUPS", "PARALLEL_MEASURED", "PARALLEL_MEASURED_REAL",
]

TASKS = ("chat", "code", "structured", "long_text", "copy_edit", "agent")
METHODS = ("draft_model", "parallel", "medusa", "eagle", "mtp", "lookahead", "ngram", "suffix", "none")
COPY_DEFAULTS = {"copy_edit": "ngram", "agent": "suffix"}
"""The tasks whose answers repeat earlier text, which no seed row covers, and the copying method each defaults to;
heads that predict from the target's features are not weighed for them
(:func:`lab.picker.rules.choose_latency_bound`)."""
METHOD_LABELS = {
    "draft_model": "vanilla draft model",
    "parallel": "parallel (PARD) draft model",
    "medusa": "Medusa heads",
    "eagle": "EAGLE draft head",
    "mtp": "the target's MTP modules",
    "lookahead": "Lookahead decoding",
    "ngram": "n-gram prompt lookup",
    "suffix": "suffix decoding",
    "none": "no speculation",
}


def method_phrase(method: str, capital: bool = False) -> str:
    """The method's label with its article, for sentences ("a vanilla draft model", "an EAGLE draft head")."""
    text = {"draft_model": "a vanilla draft model", "eagle": "an EAGLE draft head",
            "parallel": "a parallel (PARD) draft model"}.get(method, METHOD_LABELS[method])
    return text[0].upper() + text[1:] if capital else text


TASK_LABELS = {"chat": "general chat", "code": "code generation", "structured": "structured output (JSON)",
               "long_text": "long text", "copy_edit": "copy / edit (output repeats the input)",
               "agent": "agent loops, multi-turn edits (output repeats earlier outputs)"}

TASK_EXAMPLES = {
    "chat": "What makes a good cup of tea?",
    "code": "Write a Python function that checks whether a number is prime.",
    "structured": "Give the name, capital and population of France as a JSON object.",
    "long_text": "Write a short story about a lighthouse keeper who finds a message in a bottle.",
    "copy_edit": "Repeat this sentence exactly, with 'cat' changed to 'dog': The cat sat on the warm mat by the door.",
}
"""One request per one-turn task for the decision guide's "Try it in this course" snippet, on the course's real pair
(the agent task takes a committed agent loop instead: :func:`lab.prompts.conversation_requests`)."""

SETUP_ORDER = ("ngram", "suffix", "lookahead", "mtp", "draft_model", "parallel", "medusa", "eagle")
"""The drafting methods, cheaper to set up first (nothing / modules the target's checkpoint already holds / a model
you have / a model adapted from it, once per target family / heads you must train for each target). Breaks ties."""

SEED_000 = "seed lesson 000"
SEED_002 = "seed lesson 002"

MAX_TEMPERATURE = 1.0
"""Above this the picker returns ``"none"``: T = 1 samples the model's own distribution, higher flattens it
further, and seed lesson 000 lists high-temperature sampling among the cases not to speculate. (The effect on α
depends on the pair; lesson 13 measures it.)"""

MAX_API_TEMPERATURE = 2.0
"""The highest temperature the picker takes: the OpenAI API's range for ``temperature`` is 0 to 2, and the servers it
renders for take requests in that API (vLLM's ``SamplingParams`` "follow the sampling parameters from the OpenAI
text completion API" and refuse a temperature above 2.0 in ``_verify_args``: ``vllm/sampling_params.py`` of vLLM
0.34.0, pinned in ``tests/data/engines/``). Above it a value is a mistake, not a workload."""

SAMPLING_EPS = 1e-5
"""Temperatures below this are greedy: vLLM's ``_SAMPLING_EPS`` (``vllm/sampling_params.py`` of vLLM 0.34.0, pinned in
``tests/data/engines/``: ``SamplingParams`` with ``temperature < _SAMPLING_EPS`` is ``SamplingType.GREEDY``; SGLang
0.5.23's ``sampling_params.py``, pinned there too, uses 1e-6 the same way). transformers would divide the logits by
such a temperature and overflow to NaN, so the picker treats it as T = 0 and says so."""

SAMPLING_WARN_TEMPERATURE = 0.7
"""Seed lesson 002 samples at 0.7 in its production example, with the comment that a lower temperature means more
accepted drafts; above it the picker tells you to plan for the lower end of the range and to measure α."""


@dataclass(frozen=True)
class StrategyRow:
    """One row of seed lesson 000's "Picking a draft" table: a method, when to pick it, its speedup range, and where
    the range comes from (the seed, unless the row is this course's own measurement)."""

    method: str
    strategy: str
    when: str
    speedup: tuple
    source: str = SEED_000 + ', "Picking a draft" table'


@dataclass(frozen=True)
class WorkloadRow:
    """One row of seed lesson 002's production-settings table: workload, method, k range, speedup range."""

    task: str
    workload: str
    method: str
    n_range: tuple
    speedup: tuple


ARENA_FILE = Path(__file__).resolve().parents[1] / "assets" / "smollm2-135m" / "arena.json"
"""The real pair's committed arena run (what :func:`lab.arena.committed_arena` returns for ``"smollm2-135m"``; read
here directly so that the picker imports nothing from the rest of ``lab``)."""


# the cells the picker quotes: (task, T, drafter) for T = 0 and T = 1
_QUOTED = [(task, t, kind) for t in (0, 1) for task, kind in (("chat", "ngram"), ("chat", "lookahead"),
                                                               ("code", "ngram"), ("structured", "ngram"),
                                                               ("chat", "model"), ("chat", "eagle"),
                                                               ("copy_edit", "ngram"), ("copy_edit", "medusa"),
                                                               ("multi_turn", "suffix"), ("multi_turn", "ngram"),
                                                               ("agent", "suffix"), ("agent", "ngram"))]


def _arena_rows() -> tuple[dict, dict]:
    """The committed run's settings and its T = 0 and T = 1 rows keyed by (task, 0 or 1, drafter). Raises
    ``ValueError`` naming :data:`ARENA_FILE` when a cell the picker quotes is missing or has no α."""
    run = json.loads(ARENA_FILE.read_text())["arena"]
    rows = {(r["task"], int(r["temperature"]), r["drafter"]): r for r in run["rows"] if r["temperature"] in (0, 1)}
    missing = [key for key in _QUOTED if key not in rows or rows[key]["alpha"] is None]
    if missing:
        raise ValueError(f"{ARENA_FILE}: the picker quotes these (task, T, drafter) cells, which it lacks or which "
                         f"have no α: {missing}; re-run `python -m lab arena --json` on the real pair")
    return run["settings"], rows


_ARENA_SETTINGS, _ARENA = _arena_rows()

ARENA_RUN = (f"lesson 12's committed arena (real pair, {_ARENA_SETTINGS['dtype']}, CPU with "
             f"{_ARENA_SETTINGS['threads']} threads, {_ARENA_SETTINGS['prompts_per_task']} requests × "
             f"{_ARENA_SETTINGS['max_new_tokens']} tokens per task)")
"""How the reasons name the run the measured numbers below come from (:data:`ARENA_FILE`)."""

ARENA_ALPHA = {key: round(row["alpha"], 2) for key, row in _ARENA.items() if row["alpha"] is not None}
"""α (Leviathan's per-token acceptance, two decimals) of every drafter row of :data:`ARENA_FILE`, keyed by (task,
T, drafter kind): the reasons quote what sampling did to it."""

ARENA_SUFFIX_SPEEDUPS = {(task, t): round(_ARENA[(task, t, "suffix")]["measured_speedup"], 2)
                         for task in ("multi_turn", "agent") for t in (0, 1)}
"""Measured speedups (× autoregressive, prefill included) of suffix decoding on the real pair's multi-turn and
agent-loop requests at T = 0 and T = 1, from :data:`ARENA_FILE` (two decimals). Their range is suffix decoding's
row in :data:`STRATEGY_TABLE`. Each is the faster of two timings against that cell's own autoregressive run; the
tokens per target call (:data:`ARENA_SUFFIX_PER_CALL`) are the steadier number."""

ARENA_SUFFIX_PER_CALL = {task: tuple(round(_ARENA[(task, 0, kind)]["tokens_per_target_call"], 2)
                                    for kind in ("suffix", "ngram")) for task in ("multi_turn", "agent")}
"""Tokens per target call of (suffix decoding, prompt lookup at N = 4) on the same requests at T = 0, from
:data:`ARENA_FILE`."""

ARENA_CONVERSATION_NGRAM_SPEEDUPS = {(task, t): round(_ARENA[(task, t, "ngram")]["measured_speedup"], 2)
                                     for task in ("multi_turn", "agent") for t in (0, 1)}
"""Measured speedups of prompt lookup (N = 4) on the same multi-turn and agent-loop requests as
:data:`ARENA_SUFFIX_SPEEDUPS`, from :data:`ARENA_FILE`: what an engine without suffix decoding serves on the agent
task, quoted instead of the structured-JSON row that stands in for the task elsewhere."""

MTP_REPORT = "DeepSeek-V3 technical report (arXiv 2412.19437), §5.4.3"
"""Where the MTP row's numbers come from: DeepSeek-V3 ships one multi-token-prediction module in its checkpoint
(``num_nextn_predict_layers`` = 1) and, used as a draft of one token, reports its acceptance and speedup there."""

MTP_ACCEPTANCE = (0.85, 0.90)
""":data:`MTP_REPORT`: how often the second token, the one the MTP module drafts, is accepted (low, high)."""

MTP_SPEEDUP = 1.8
""":data:`MTP_REPORT`: tokens per second with the MTP module drafting, × decoding without it."""

MTP_N = 1
"""The MTP draft length the picker uses: one token, from one module, as in :data:`MTP_REPORT` (vLLM accepts a larger
N and then runs the module again for each further token, which it was not trained for)."""

PARD_REPORT = ("An et al. 2025, PARD (arXiv 2504.18583); the authors' vLLM v1 table (vLLM 0.16.0, A100 / H20, "
               "github.com/AMD-AGI/PARD README)")
"""Where the parallel-draft row's numbers come from. The paper's abstract (v4) reports up to 3.67× on LLaMA3.1-8B in
vLLM, 1.15× EAGLE-3's speed there; the authors' README re-measures with vLLM's V1 engine and gives the per-task
table of :data:`PARD_VLLM_TABLE`. Their drafts are 0.5–1.5 B models (PARD-Qwen2.5-0.5B, PARD-Qwen3-0.6B,
PARD-Llama-3.2-1B, PARD-DeepSeek-R1-Distill-Qwen-1.5B) for 8–70 B targets, each serving its whole family."""

PARD_VLLM_TABLE = {
    # target: {benchmark: (PARD speedup, EAGLE-3 speedup)} over autoregressive decoding, best draft_k per task
    "Llama 3.1 8B": {"humaneval": (4.76, 3.13), "gsm8k": (4.00, 2.60), "mt_bench": (2.72, 2.42)},
    "Llama 3.3 70B": {"humaneval": (5.38, 3.59), "gsm8k": (4.52, 2.94), "mt_bench": (2.70, 2.64)},
    "Qwen3 8B": {"humaneval": (5.05, 2.10), "gsm8k": (4.40, 1.91), "mt_bench": (2.52, 1.66)},
}
""":data:`PARD_REPORT`'s table: speedup × autoregressive decoding of PARD and of EAGLE-3 per target and benchmark
(HumanEval: code; GSM8K: maths; MT-Bench: multi-turn chat)."""

PARD_CHAT_SPEEDUPS = tuple(sorted(row["mt_bench"][0] for row in PARD_VLLM_TABLE.values()))
"""PARD's MT-Bench (chat) speedups from :data:`PARD_VLLM_TABLE`, lowest first (2.52, 2.70, 2.72): the parallel row's
range is their lowest and highest. The picker offers a parallel draft where it would offer a draft model (general
chat and long text, and as a fallback), so it rates it by the chat benchmark, not by the code benchmark's 4.8–5.4×."""

PARALLEL_MEASURED = {
    "pair": "shakespeare",
    "draft": "1 layer, width 128, 475,648 parameters (lab/assets/shakespeare/parallel/)",
    "draft_ms_per_step": {2: (1.40, 2.22), 3: (1.56, 3.45), 4: (1.30, 3.16)},
    "tokens_per_target_call": {2: (1.85, 2.08), 3: (1.89, 2.31), 4: (1.90, 2.45)},
    "speedup": {2: (1.11, 1.14), 3: (1.22, 1.46), 4: (1.18, 1.26)},
    "agreement": (0.56, 0.24, 0.18, 0.16),
}
"""This course's parallel draft on the Shakespeare pair against the autoregressive draft it was adapted from (its
card, ``lab/assets/shakespeare/parallel/README.md``; greedy, float32, one thread, 2-core CPU, 2026-12-03): per K =
N, (parallel, autoregressive) draft milliseconds per step, tokens per target call and speedup over autoregressive
decoding; and the parallel draft's held-out teacher-forced agreement with the target at positions 1–4. One forward
for K tokens made drafting 1.6–2.4× cheaper, yet the draft is so small that its forwards were never the step's main
cost, and its acceptance from position 2 on fell well below the autoregressive draft's: not faster on that pair."""

PARALLEL_MEASURED_REAL = {
    "pair": "smollm2-135m",
    "draft": "2 layers, width 256, a 49,152-token output layer, 1,852,928 stored parameters "
             "(lab/assets/smollm2-135m/parallel/)",
    "draft_ms_per_step": {2: (9.91, 18.52), 3: (9.79, 27.76), 4: (10.40, 37.58)},
    "tokens_per_target_call": {2: (1.44, 1.47), 3: (1.51, 1.61), 4: (1.53, 1.69)},
    "speedup": {2: (1.22, 1.17), 3: (1.27, 1.03), 4: (1.25, 1.01)},
    "agreement": (0.47, 0.22, 0.14, 0.11),
}
"""The same measurement on the real pair (its card, ``lab/assets/smollm2-135m/parallel/README.md``; greedy, bfloat16,
one thread, 2-core CPU, 2026-12-04), in the same layout as :data:`PARALLEL_MEASURED`. Its draft's forward is mostly
the output layer over 49,152 tokens, so N sequential forwards cost nearly N times one: one forward made drafting
1.9–3.6× cheaper, and although the parallel draft's acceptance past position 1 fell as on the Shakespeare pair, it
was faster than the draft model it was adapted from at every N."""

STRATEGY_TABLE = (
    StrategyRow("draft_model", "Vanilla draft (1B/3B Llama family)", "Quick start, nothing to train", (1.8, 2.3)),
    StrategyRow("medusa", "Medusa heads", "Training heads on the target is allowed", (2.0, 3.0)),
    StrategyRow("eagle", "EAGLE-2 / 3", "Production serving, fastest option", (3.0, 4.0)),
    StrategyRow("lookahead", "Lookahead", "No draft model, nothing trained or added", (1.3, 1.6)),
    StrategyRow("suffix", "Suffix decoding", "Agent loops and multi-turn edits: answers repeat earlier answers",
                (min(ARENA_SUFFIX_SPEEDUPS.values()), max(ARENA_SUFFIX_SPEEDUPS.values())),
                ARENA_RUN + ": suffix decoding on multi-turn and agent-loop requests at T = 0 and T = 1"),
    StrategyRow("mtp", "MTP modules of the target", "Target checkpoint ships MTP modules", (MTP_SPEEDUP, MTP_SPEEDUP),
                MTP_REPORT + ": one module drafting one token, second token accepted 85–90 %, 1.8× tokens per "
                "second"),
    StrategyRow("parallel", "Parallel draft (PARD)", "A PARD draft; its forwards cost time",
                (PARD_CHAT_SPEEDUPS[0], PARD_CHAT_SPEEDUPS[-1]),
                PARD_REPORT + ": MT-Bench, three targets, 2.52–2.72× (EAGLE-3 1.66–2.64× in the same runs)"),
)
"""Seed lesson 000, "Picking a draft" (strategy, when to pick, speedup); the "when to pick" column is in the
course's own words. The last three rows are not the seed's. Suffix decoding (Oliaro et al. 2024, arXiv 2411.04975): its
range is this course's measurement (:data:`ARENA_SUFFIX_SPEEDUPS`); the paper reports up to 5.3× on agentic SQL on
GPUs. A target's own MTP modules: the one published number, :data:`MTP_REPORT`'s 1.8× at N = 1, as low and high
alike (no range is published; the course has not measured MTP on an accelerator). A parallel (PARD) draft: the
authors' chat speedups (:data:`PARD_CHAT_SPEEDUPS`); the course's own parallel drafts, far smaller than theirs, were
not faster than their autoregressive draft on the Shakespeare pair (:data:`PARALLEL_MEASURED`) and faster on the real
pair (:data:`PARALLEL_MEASURED_REAL`)."""

WORKLOAD_TABLE = (
    WorkloadRow("chat", "General chat", "draft_model", (4, 5), (2.0, 2.5)),
    WorkloadRow("code", "Code generation", "ngram", (3, 5), (1.5, 2.0)),
    WorkloadRow("structured", "Structured JSON", "ngram", (5, 7), (2.0, 3.0)),
    WorkloadRow("long_text", "Long text", "draft_model", (3, 4), (1.8, 2.2)),
)
"""Seed lesson 002, production settings (workload, recommended method, k, expected speedup). It has no copy/edit
or agent row; the picker uses the structured-JSON row, the nearest n-gram workload, for both (its k range)."""

STRATEGY_BY_METHOD = {row.method: row for row in STRATEGY_TABLE}
""":data:`STRATEGY_TABLE` by method."""

WORKLOAD_BY_TASK = {row.task: row for row in WORKLOAD_TABLE}
""":data:`WORKLOAD_TABLE` by task (no ``"copy_edit"``: see :data:`NEAREST_ROW`)."""

NEAREST_ROW = {"copy_edit": "structured", "agent": "structured"}
"""Tasks without a row of their own -> the task whose row stands in for them."""


def workload_row(task: str) -> WorkloadRow:
    """The workload row for ``task`` (one of :data:`TASKS`): its own, or the nearest (:data:`NEAREST_ROW`).
    Raises ``KeyError`` for an unknown task (``recommend`` checks the task first)."""
    return WORKLOAD_BY_TASK.get(task) or WORKLOAD_BY_TASK[NEAREST_ROW[task]]


ARENA_CHAT_SPEEDUPS = {(kind, t): round(_ARENA[("chat", t, kind)]["measured_speedup"], 2)
                       for kind in ("ngram", "lookahead") for t in (0, 1)}
"""Measured speedups (× autoregressive) of prompt lookup and Lookahead on chat requests at T = 0 and T = 1, from the
real pair's committed arena run that lesson 12 reads (``lab/assets/smollm2-135m/arena.json``: bfloat16, 2-core CPU,
two decimals). The seed tables give prompt
lookup no range for chat or long text; the picker uses these instead. That run kept the faster of two timings of
every method; where a speedup still exceeds the tokens per target call it was made with (:data:`ARENA_CHAT_PER_CALL`)
beyond timing noise (:func:`lab.compare.beyond_tokens_per_call`), which a speedup cannot honestly do, the reasons say
so."""

ARENA_CHAT_PER_CALL = {(kind, t): round(_ARENA[("chat", t, kind)]["tokens_per_target_call"], 2)
                       for kind in ("ngram", "lookahead") for t in (0, 1)}
"""Tokens per target call of the same runs as :data:`ARENA_CHAT_SPEEDUPS` (two decimals).
Every target call costs at least one autoregressive step, so a speedup above these is timing noise
(:func:`lab.compare.beyond_tokens_per_call` flags one beyond the course's level rule)."""

ARENA_SEEDED_NGRAM = {(task, t): (round(_ARENA[(task, t, "ngram")]["measured_speedup"], 2),
                                   round(_ARENA[(task, t, "ngram")]["tokens_per_target_call"], 2))
                      for task in ("code", "structured") for t in (0, 1)}
"""(measured speedup, tokens per target call) of prompt lookup (N = 4) on the real pair's code and structured
requests at T = 0 and T = 1, from :data:`ARENA_FILE` (two decimals): quoted beside the seed's range for those rows,
the seed's production-settings figure."""

def speedup_for(method: str, task: str) -> tuple:
    """((low, high), basis) for ``method`` on ``task``, latency-bound: its workload row if that row recommends it
    (basis ``"workload_row"``); for prompt lookup elsewhere (chat, long text: no seed row rates it), lesson 12's
    measured speedups on chat requests at T = 1 and T = 0, lower first (``"arena"``); else the strategy table's range
    (``"strategy"``; for suffix decoding that row is lesson 12's measurement on conversations, for MTP the
    DeepSeek-V3 report's 1.8×, each row's ``source``). The rules rank methods by it, and a recommendation quotes it
    for the method an engine serves in place of the one recommended (:func:`served_speedup_for`)."""
    row = workload_row(task)
    if row.method == method:
        return row.speedup, "workload_row"
    if method == "ngram":
        return tuple(sorted((ARENA_CHAT_SPEEDUPS[("ngram", 1)], ARENA_CHAT_SPEEDUPS[("ngram", 0)]))), "arena"
    return STRATEGY_BY_METHOD[method].speedup, "strategy"


def served_speedup_for(method: str, task: str) -> tuple:
    """((low, high), basis) to quote for ``method`` when an engine serves it in place of the recommended one:
    :func:`speedup_for`, except prompt lookup on the agent task, which is quoted from the committed arena's
    multi-turn and agent-loop requests (``"arena_conversations"``, :data:`ARENA_CONVERSATION_NGRAM_SPEEDUPS`), the
    run suffix decoding's range comes from, so that the two ranges on one card compare like for like. The ranking
    keeps :func:`speedup_for`: the seed's GPU figures for every method, not one CPU measurement among them."""
    if method == "ngram" and task == "agent":
        return ((min(ARENA_CONVERSATION_NGRAM_SPEEDUPS.values()), max(ARENA_CONVERSATION_NGRAM_SPEEDUPS.values())),
                "arena_conversations")
    return speedup_for(method, task)


NGRAM_LOOKUP = {"prompt_lookup_max": 4, "prompt_lookup_min": 2}
"""Prompt lookup's n-gram sizes: seed lesson 002 looks back 4 tokens; the minimum 2 is vLLM's docs example."""

LOOKAHEAD_SETTINGS = {"window": 4, "ngram": 3}
"""Lookahead's Jacobi window and n-gram size: ``LookaheadDrafter``'s defaults, the settings lesson 09 uses."""
