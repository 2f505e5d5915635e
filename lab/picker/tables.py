"""The picker's data: the seed lessons' tables, the course's measured numbers, the method and task names and labels,
and the fixed settings of the draft-free methods. Nothing here decides; :mod:`lab.picker.rules` reads these.

Sources: :data:`STRATEGY_TABLE` is seed lesson 000's "Picking a draft" table plus one measured row (suffix decoding,
which the seeds do not know) and one published row (a target's own MTP modules, from the DeepSeek-V3 report:
:data:`MTP_REPORT`), :data:`WORKLOAD_TABLE` seed lesson 002's production settings;
:data:`ARENA_CHAT_SPEEDUPS`, :data:`ARENA_SUFFIX_SPEEDUPS` and :data:`ARENA_SUFFIX_PER_CALL` come from the committed
arena run that lesson 12 reads (tests/notebooks/test_lesson_claims.py holds them to it).
"""
from __future__ import annotations

from dataclasses import dataclass

__all__ = [
    "TASKS", "METHODS", "METHOD_LABELS", "TASK_LABELS", "SETUP_ORDER", "SEED_000", "SEED_002", "MAX_TEMPERATURE",
    "SAMPLING_WARN_TEMPERATURE", "StrategyRow", "WorkloadRow", "STRATEGY_TABLE", "WORKLOAD_TABLE",
    "STRATEGY_BY_METHOD", "WORKLOAD_BY_TASK", "NEAREST_ROW", "workload_row", "ARENA_CHAT_SPEEDUPS",
    "NGRAM_LOOKUP", "LOOKAHEAD_SETTINGS", "ARENA_SUFFIX_SPEEDUPS", "ARENA_SUFFIX_PER_CALL",
    "ARENA_RUN", "MTP_REPORT", "MTP_ACCEPTANCE", "MTP_SPEEDUP", "MTP_N",
]

TASKS = ("chat", "code", "structured", "long_text", "copy_edit", "agent")
METHODS = ("draft_model", "medusa", "eagle", "mtp", "lookahead", "ngram", "suffix", "none")
METHOD_LABELS = {
    "draft_model": "vanilla draft model",
    "medusa": "Medusa heads",
    "eagle": "EAGLE draft head",
    "mtp": "the target's MTP modules",
    "lookahead": "Lookahead decoding",
    "ngram": "n-gram prompt lookup",
    "suffix": "suffix decoding",
    "none": "no speculation",
}
TASK_LABELS = {"chat": "general chat", "code": "code generation", "structured": "structured output (JSON)",
               "long_text": "long text", "copy_edit": "copy / edit (output repeats the input)",
               "agent": "agent loops, multi-turn edits (output repeats earlier outputs)"}

SETUP_ORDER = ("ngram", "suffix", "lookahead", "mtp", "draft_model", "medusa", "eagle")
"""The drafting methods, cheaper to set up first (nothing / modules the target's checkpoint already holds / a model
you have / heads you must train). Breaks ties."""

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


ARENA_RUN = "lesson 12's committed arena (real pair, bfloat16, 2-core CPU, 2 requests × 48 tokens per task)"
"""The run the measured numbers below come from: ``lab/assets/smollm2-135m/arena.json``."""

ARENA_SUFFIX_SPEEDUPS = {("multi_turn", 0): 1.82, ("multi_turn", 1): 2.17, ("agent", 0): 1.71, ("agent", 1): 1.04}
"""Measured speedups (× autoregressive, prefill included) of suffix decoding on the real pair's multi-turn and
agent-loop requests at T = 0 and T = 1, from :data:`ARENA_RUN` (tests/notebooks/test_lesson_claims.py holds these to
it). Their range is suffix decoding's row in :data:`STRATEGY_TABLE`."""

ARENA_SUFFIX_PER_CALL = {"multi_turn": (2.04, 1.96), "agent": (1.97, 2.03)}
"""Tokens per target call of (suffix decoding, prompt lookup at N = 4) on the same requests at T = 0, from
:data:`ARENA_RUN` (held to it by tests/notebooks/test_lesson_claims.py)."""

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
)
"""Seed lesson 000, "Picking a draft" (strategy, when to pick, speedup); the "when to pick" column is in the
course's own words. The last two rows are not the seed's. Suffix decoding (Oliaro et al. 2024, arXiv 2411.04975): its
range is this course's measurement (:data:`ARENA_SUFFIX_SPEEDUPS`); the paper reports up to 5.3× on agentic SQL on
GPUs. A target's own MTP modules: the one published number, :data:`MTP_REPORT`'s 1.8× at N = 1, as low and high
alike (no range is published; the course has not measured MTP on an accelerator)."""

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


ARENA_CHAT_SPEEDUPS = {("ngram", 0): 1.09, ("ngram", 1): 0.96, ("lookahead", 0): 0.92, ("lookahead", 1): 0.86}
"""Measured speedups (× autoregressive) of prompt lookup and Lookahead on chat requests at T = 0 and T = 1, from the
real pair's committed arena run that lesson 12 reads (``lab/assets/smollm2-135m/arena.json``: bfloat16, 2-core CPU,
2 requests × 48 tokens; tests/notebooks/test_lesson_claims.py holds these to it). The seed tables give prompt
lookup no range for chat or long text; the picker uses these instead."""

NGRAM_LOOKUP = {"prompt_lookup_max": 4, "prompt_lookup_min": 2}
"""Prompt lookup's n-gram sizes: seed lesson 002 looks back 4 tokens; the minimum 2 is vLLM's docs example."""

LOOKAHEAD_SETTINGS = {"window": 4, "ngram": 3}
"""Lookahead's Jacobi window and n-gram size: ``LookaheadDrafter``'s defaults, the settings lesson 09 uses."""
