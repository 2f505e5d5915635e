"""``python -m lab bench``: lab vs transformers, autoregressive and speculative, side by side (:mod:`lab.bench`)."""
from __future__ import annotations

import json

from lab.cli.options import OptionError, add_run_options, no_draft_problem
from lab.registry import drafter_problem

__all__ = ["add_parser", "run"]


def add_parser(sub) -> None:
    """Add the ``bench`` command and its options to ``sub`` (the subparsers of :func:`lab.cli.build_parser`)."""
    b = sub.add_parser("bench", help="lab vs transformers: autoregressive and speculative, side by side",
                       description="Time this course's decode loop against transformers' generate, autoregressive "
                                   "and speculative, on held-out and copy-heavy prompts, and check that greedy "
                                   "outputs are identical (exit status 1 if not).")
    add_run_options(b, json_help="print the results as JSON instead of tables", max_new_tokens=128, prompts=5,
                    prompts_help="how many held-out prompts, 1 to 8 (the bundled held-out prompts; default: "
                                 "%(default)s)",
                    n_draft_help="draft tokens per step N, >= 1, for the draft model (ours and transformers' "
                                 "assistant), EAGLE and the early exit; prompt lookup drafts 5, Lookahead and Medusa "
                                 "follow their window / tree (default: %(default)s)")


def run(args) -> int:
    """``python -m lab bench``: time every method (:data:`lab.bench.BASE_METHODS` and
    :data:`lab.bench.EXTRA_METHODS`; with a hub pair the drafters it cannot have,
    :func:`lab.registry.drafter_problem`, are left out and named) on the first ``args.prompts`` held-out prompts and
    on their copy-heavy versions, and print the two tables (or JSON with ``args.json``). ``args`` comes from
    :func:`lab.cli.build_parser` (``pair``, ``prompts``, ``max_new_tokens``, ``n_draft``, ``json``). Returns the
    exit status: 0, or 1 if a method's greedy tokens differed from lab autoregressive decoding.

    Raises :class:`lab.cli.OptionError` naming ``--pair`` for a pair without a draft model and ``--prompts`` for more
    prompts than are bundled (both before the pair loads) and naming ``--max-new-tokens`` when the longest prompt
    plus the new tokens exceeds the target's context (before any timing); :func:`lab.cli.main` prints either as one
    line."""
    from lab.bench import EXTRA_METHODS, format_table, run_bench
    from lab.models import load_pair
    from lab.prompts import context_problem, copy_heavy_prompts, held_out_prompts

    if no_draft_problem(args.pair, "bench"):  # before the pair loads
        raise OptionError("--pair", no_draft_problem(args.pair, "bench"))
    prompts = held_out_prompts()
    if args.prompts > len(prompts):  # checked before the pair loads
        raise OptionError("--prompts", f"must be at most {len(prompts)} (the held-out prompts bundled), got "
                                       f"{args.prompts}")
    pair = load_pair(args.pair)
    chosen = prompts[: args.prompts]
    copy_heavy = copy_heavy_prompts(pair, chosen)
    problem = context_problem(pair, [pair.encode(p) for p in chosen + copy_heavy], args.max_new_tokens)
    if problem:
        raise OptionError("--max-new-tokens", problem)
    # A hub pair has no Medusa heads or EAGLE draft (GPT-2 no Llama layers for an early exit): leave those out
    # and say so, rather than fail after the other methods were timed.
    skipped = {}
    for method, kind in (("lab Medusa", "medusa"), ("lab EAGLE", "eagle"), ("lab early exit", "early-exit")):
        problem = drafter_problem(kind, pair, args.n_draft)
        if problem:
            skipped[method] = problem
    extra = tuple(method for method in EXTRA_METHODS if method not in skipped)
    results = {
        "held-out": run_bench(pair, chosen, args.max_new_tokens, args.n_draft, extra=extra),
        "copy-heavy": run_bench(pair, copy_heavy, args.max_new_tokens, args.n_draft, extra=extra),
    }
    if skipped:
        for result in results.values():
            result["settings"]["skipped"] = skipped
    if args.json:
        print(json.dumps(results, indent=1))
    else:
        print("\n\n".join(format_table(result, label) for label, result in results.items()))
    return 0 if all(result["identical"] for result in results.values()) else 1
