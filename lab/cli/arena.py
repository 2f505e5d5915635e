"""``python -m lab arena``: the drafter arena (lesson 12, :mod:`lab.arena`), then fixed vs adaptive N."""
from __future__ import annotations

import argparse
import json
import sys
import time

from lab.cli.bench import drafter_names, refuse_untrained, selected_drafters
from lab.cli.options import (CHAT_PAIRS, MAX_DRAFT_LENGTH, OptionError, add_run_options, fit_threads_noting_changes,
                             positive_int)
from lab.registry import OWN_DRAFT, drafter_problem, own_draft_reason

__all__ = ["add_parser", "run"]


def add_parser(sub) -> None:
    """Add the ``arena`` command and its options to ``sub`` (the subparsers of :func:`lab.cli.build_parser`)."""
    a = sub.add_parser("arena", help="every drafter on several kinds of prompt at T = 0 and 1: predicted vs "
                                     "measured speedup, then fixed vs adaptive N",
                       description="The drafter arena (lesson 12): every drafter on the same target and prompts, "
                                   "for several kinds of task at T = 0 and T = 1: chat, code, structured output "
                                   "and copy/edit requests (sent as user turns) with a chat pair such as "
                                   "smollm2-135m, which also answers the later requests of multi-turn and "
                                   "agent-loop conversations; prose, copy/edit and structured records with "
                                   "shakespeare. Prints "
                                   "the speedup lesson 06's formula predicts beside the measured one, where the "
                                   "difference went, and fixed vs adaptive N for the draft model. Drafters the "
                                   "pair cannot have are left out and named. Exit status 1 if a float32 greedy "
                                   "run differed from autoregressive decoding (in bfloat16 a differing run is "
                                   "reported, not failed: near-ties round by block shape).")
    add_run_options(a, json_help="print the arena, the adaptive comparison, the command and the time as JSON (what "
                                 "lab/assets/<pair>/arena.json commits)", max_new_tokens=64,
                    prompts=3, prompts_help="prompts per task, from 1 to the prompts bundled for each task run: 4 "
                                            "for shakespeare's structured, 8 for its other tasks and smollm2-135m's "
                                            "single requests, 12 for multi_turn and agent (default: %(default)s)",
                    n_draft_help=f"draft tokens per step N for the drafters that take one, 1 to {MAX_DRAFT_LENGTH} "
                                 "(default: %(default)s)")
    for action in a._actions:  # the arena measures decode steps: the prefill writes the first token
        if action.dest == "n_draft":  # None when not given, so that giving it where no drafter takes it is an error
            action.default = None
            action.help = action.help.replace("%(default)s", str(N_DRAFT_DEFAULT))
        if action.dest == "max_new_tokens":
            action.help = "tokens to generate per prompt, >= 2: the prefill writes the first (default: %(default)s)"
    a.add_argument("--repeats", type=positive_int, default=1,
                   help="time each run this often and keep the fastest, >= 1 (default: %(default)s)")
    a.add_argument("--task", type=_task_names, default=None, metavar="TASK[,TASK...]",
                   help="run only these kinds of request, comma-separated: chat, code, structured, copy_edit, "
                        "multi_turn, agent with smollm2-135m; prose, copy_edit, structured with shakespeare "
                        "(default: all of the pair's)")
    a.add_argument("--drafter", action="append", type=drafter_names, default=None, metavar="NAME[,NAME...]",
                   help="run only these drafters beside autoregressive decoding, repeatable or comma-separated; "
                        "fixed vs adaptive N runs only when model (the draft model) is among them (default: every "
                        "drafter the pair can have)")


N_DRAFT_DEFAULT = 4
"""``--n-draft`` when not given."""


def _task_names(text: str) -> tuple:
    """argparse type of ``--task``: comma-separated names, each once (checked against the pair's tasks in
    :func:`run`)."""
    names = tuple(dict.fromkeys(part.strip() for part in text.split(",")))
    if not all(names):
        raise argparse.ArgumentTypeError(f"an empty task name in {text!r}")
    return names


def _bundled_prompt_counts(pair_name: str) -> dict[str, int] | None:
    """``{task: prompts}`` of the arena's default tasks for a bundled pair, counted without loading it (its
    tokenizer): the chat requests and the conversation requests for a pair of :data:`lab.cli.options.CHAT_PAIRS`
    (``"smollm2-135m"``); for
    ``"shakespeare"`` one prompt per held-out text, but the structured records, which need no tokenizer to count.
    None for a hub pair: its tasks depend on whether its tokenizer has a chat template, known once it loads."""
    from lab.arena import DEFAULT_TASKS
    from lab.prompts import CHAT_TASKS, CONVERSATION_TASKS, chat_prompts, conversation_requests, held_out_prompts, \
        record_prompts

    if pair_name in CHAT_PAIRS:  # a chat pair: lab.arena.default_tasks is every chat task and conversation kind
        return {**{task: len(chat_prompts(task)) for task in CHAT_TASKS},
                **{task: len(conversation_requests(task)) for task in CONVERSATION_TASKS}}
    if pair_name == "shakespeare":
        return {task: len(record_prompts(None)) if task == "structured" else len(held_out_prompts())
                for task in DEFAULT_TASKS}
    return None


def _check_tasks(chosen, allowed) -> None:
    """Raise :class:`OptionError` naming ``--task`` when a name in ``chosen`` (None: every task) is not one of
    ``allowed``."""
    for task in chosen or ():
        if task not in allowed:
            raise OptionError("--task", f"{task!r} is not a task of this pair; choose from {', '.join(allowed)}")


def _check_prompt_count(counts: dict[str, int], wanted: int) -> None:
    """Raise :class:`OptionError` naming ``--prompts`` when ``wanted`` is more than the task with the fewest
    prompts in ``counts`` (``{task: prompts}``) has."""
    task = min(counts, key=counts.get)
    if wanted > counts[task]:
        raise OptionError("--prompts", f"must be at most {counts[task]} (the {task} prompts bundled), got {wanted}")


def run(args) -> int:
    """``python -m lab arena``: the full arena table on the pair's default tasks (:func:`lab.arena.default_tasks`:
    chat requests for a chat pair, with smollm2-135m also the multi-turn and agent conversation requests;
    Shakespeare prose, copy/edit and records otherwise), then fixed vs adaptive N for
    the draft model (on the first of those tasks, T = 0), then both read in words (:mod:`lab.arena_reading`). A chat
    pair runs in its fast dtype (``dtype="auto"``).
    Drafters the pair cannot have (:func:`lab.registry.drafter_problem`) are left out and named on stderr. Exit
    status 1 if any greedy run differed from autoregressive decoding in float32. Raises
    :class:`lab.cli.OptionError` naming ``--prompts`` for more prompts than a task has (before the pair loads for
    the bundled pairs; for a hub pair once it loads) and naming ``--max-new-tokens`` below 2 (before the pair loads)
    or when a prompt plus the new tokens exceeds the target's context (before any run)."""
    import torch

    from lab.arena import (ARENA_DRAFTERS, compare_adaptive, default_tasks, format_adaptive, format_arena,
                           format_reconciliation, run_arena)
    from lab.arena_reading import read_adaptive, read_arena
    from lab.models import load_pair
    from lab.prompts import arena_prompts, context_problem, encode_prompts

    named = selected_drafters(args)  # --drafter's names in order, each once; None: every drafter
    if args.n_draft is not None and named and all(kind in OWN_DRAFT for kind in named):
        raise OptionError("--n-draft", f"does not apply to {', '.join(named)}: {own_draft_reason(named[0])}; leave "
                                       "--n-draft out")
    args.n_draft = N_DRAFT_DEFAULT if args.n_draft is None else args.n_draft
    refuse_untrained("--drafter", named or (), args.pair)  # before the pair loads
    if args.max_new_tokens < 2:  # before the pair loads (lab.arena refuses it too)
        raise OptionError("--max-new-tokens", f"must be >= 2 in the arena: the prefill writes the first new token "
                                              f"and the arena measures the decode steps after it; got "
                                              f"{args.max_new_tokens}")
    chosen = getattr(args, "task", None)
    counts = _bundled_prompt_counts(args.pair)
    if counts is not None:
        _check_tasks(chosen, tuple(counts))
        _check_prompt_count({t: n for t, n in counts.items() if chosen is None or t in chosen}, args.prompts)
    pair = load_pair(args.pair, dtype="auto" if args.pair in CHAT_PAIRS else None)  # the real pair: fast dtype
    fit_threads_noting_changes()  # a busy machine's spinning threads would time garbage
    _check_tasks(chosen, default_tasks(pair))  # a hub pair's tasks are known once it loads
    tasks = chosen or default_tasks(pair)  # run_arena's default; compare_adaptive runs the first of them
    texts = {task: arena_prompts(pair, task) for task in tasks}
    _check_prompt_count({task: len(prompts) for task, prompts in texts.items()}, args.prompts)
    encoded = encode_prompts(pair, [p for task in tasks for p in texts[task][: args.prompts]])
    problem = context_problem(pair, encoded, args.max_new_tokens)
    if problem:
        raise OptionError("--max-new-tokens", problem)
    wanted = named or ARENA_DRAFTERS
    skipped = {kind: drafter_problem(kind, pair, args.n_draft) for kind in wanted}
    skipped = {kind: why for kind, why in skipped.items() if why}
    if skipped and named:  # asked for by name: an error, not a silent gap
        kind = next(iter(skipped))
        raise OptionError("--drafter", f"{kind} cannot run with pair {args.pair}: {skipped[kind]}")
    if skipped:  # a hub pair: no Medusa heads, no EAGLE draft (GPT-2: no early exit either)
        print(f"python -m lab arena: not run with pair {args.pair}: "
              + "; ".join(f"{kind} ({why})" for kind, why in skipped.items()), file=sys.stderr)
    arena = run_arena(pair, tasks=tasks, max_new_tokens=args.max_new_tokens, prompts_per_task=args.prompts,
                      n_draft=args.n_draft, repeats=args.repeats,
                      drafters=tuple(kind for kind in wanted if kind not in skipped))
    adaptive = None
    if "model" in wanted and "model" not in skipped:  # fixed vs adaptive N is the draft model's
        adaptive = compare_adaptive(pair, task=tasks[0], max_new_tokens=args.max_new_tokens, prompts=args.prompts,
                                    start_n=args.n_draft, repeats=args.repeats)
    if args.json:
        # the file lab.arena.committed_arena reads: the run, and the command and time that made it
        ended = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
        print(json.dumps({"arena": arena, "adaptive": adaptive, "command": getattr(args, "invocation", None),
                          "date": ended}, indent=1))
    else:
        print(format_arena(arena) + "\n\nWhere the predicted speedup went\n\n" + format_reconciliation(arena)
              + ("" if adaptive is None else "\n\n" + format_adaptive(adaptive))
              + "\n\nThe run, read (lab.arena_reading)\n\n" + read_arena({"arena": arena, "adaptive": adaptive})
              + ("" if adaptive is None else "\n\n" + read_adaptive(adaptive)))
    rows = arena["rows"] + (adaptive["rows"] if adaptive else [])
    if pair.dtype != torch.float32:  # bfloat16 rounds near-ties differently per block shape: reported, not failed
        return 0
    return 0 if all(row["same_as_autoregressive"] is not False for row in rows) else 1
