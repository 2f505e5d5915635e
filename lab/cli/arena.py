"""``python -m lab arena``: the drafter arena (lesson 12, :mod:`lab.arena`), then fixed vs adaptive N."""
from __future__ import annotations

import json
import sys

from lab.cli.options import OptionError, add_run_options, no_draft_problem, positive_int
from lab.registry import drafter_problem

__all__ = ["add_parser", "run"]


def add_parser(sub) -> None:
    """Add the ``arena`` command and its options to ``sub`` (the subparsers of :func:`lab.cli.build_parser`)."""
    a = sub.add_parser("arena", help="every drafter on prose, copy/edit and structured prompts at T = 0 and 1: "
                                     "predicted vs measured speedup, then fixed vs adaptive N",
                       description="The drafter arena (lesson 12): every drafter on the same target and prompts, "
                                   "for prose, copy/edit and structured output at T = 0 and T = 1. Prints the "
                                   "speedup lesson 06's formula predicts beside the measured one, where the "
                                   "difference went, and fixed vs adaptive N for the draft model. Exit status 1 if "
                                   "a greedy run differed from autoregressive decoding.")
    add_run_options(a, json_help="print the arena and the adaptive comparison as JSON", max_new_tokens=64,
                    prompts=3, prompts_help="prompts per task, 1 to 4 with the bundled pair (default: %(default)s)",
                    n_draft_help="draft tokens per step N for the drafters that take one, >= 1 (default: "
                                 "%(default)s)")
    a.add_argument("--repeats", type=positive_int, default=1,
                   help="time each run this often and keep the fastest, >= 1 (default: %(default)s)")


def run(args) -> int:
    """``python -m lab arena``: the full arena table, then fixed vs adaptive N for the draft model (prose, T = 0).
    Exit status 1 if any greedy run differed from autoregressive decoding. Raises :class:`lab.cli.OptionError`
    naming ``--pair`` for a pair without a draft model and ``--prompts`` for more prompts than a task has (both
    before the pair loads) and naming ``--max-new-tokens``
    when a prompt plus the new tokens exceeds the target's context (before any run)."""
    from lab.arena import (
        ARENA_DRAFTERS,
        DEFAULT_TASKS,
        compare_adaptive,
        format_adaptive,
        format_arena,
        format_reconciliation,
        run_arena,
    )
    from lab.models import load_pair
    from lab.prompts import arena_prompts, context_problem, held_out_prompts, record_prompts

    # Checked before the pair loads: every task is built from the held-out texts, one prompt per text except
    # the structured records, which need no tokenizer to count.
    if no_draft_problem(args.pair, "arena"):
        raise OptionError("--pair", no_draft_problem(args.pair, "arena"))
    most = min(len(held_out_prompts()), len(record_prompts(None)))
    if args.prompts > most:
        raise OptionError("--prompts", f"must be at most {most} (the structured prompts bundled), got {args.prompts}")
    pair = load_pair(args.pair)
    # compare_adaptive runs the prose prompts, one of run_arena's default tasks
    encoded = [pair.encode(p) for task in DEFAULT_TASKS for p in arena_prompts(pair, task)[: args.prompts]]
    problem = context_problem(pair, encoded, args.max_new_tokens)
    if problem:
        raise OptionError("--max-new-tokens", problem)
    skipped = {kind: drafter_problem(kind, pair, args.n_draft) for kind in ARENA_DRAFTERS}
    skipped = {kind: why for kind, why in skipped.items() if why}
    if skipped:  # a hub pair: no Medusa heads, no EAGLE draft (GPT-2: no early exit either)
        print(f"python -m lab arena: not run with pair {args.pair}: "
              + "; ".join(f"{kind} ({why})" for kind, why in skipped.items()), file=sys.stderr)
    arena = run_arena(pair, max_new_tokens=args.max_new_tokens, prompts_per_task=args.prompts,
                      n_draft=args.n_draft, repeats=args.repeats,
                      drafters=tuple(kind for kind in ARENA_DRAFTERS if kind not in skipped))
    adaptive = compare_adaptive(pair, max_new_tokens=args.max_new_tokens, prompts=args.prompts,
                                start_n=args.n_draft, repeats=args.repeats)
    if args.json:
        print(json.dumps({"arena": arena, "adaptive": adaptive}, indent=1))
    else:
        print(format_arena(arena) + "\n\nWhere the predicted speedup went\n\n" + format_reconciliation(arena)
              + "\n\n" + format_adaptive(adaptive))
    rows = arena["rows"] + adaptive["rows"]
    return 0 if all(row["same_as_autoregressive"] is not False for row in rows) else 1
