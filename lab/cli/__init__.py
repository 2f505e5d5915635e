"""Command line: ``python -m lab demo | bench | arena | train | pick``, one module per command.

``demo`` (:mod:`lab.cli.demo`) streams a speculative generation with coloured tokens (green accepted, grey
struck-through rejected, orange resampled, blue bonus) and prints the stats; ``--json`` prints one JSON object
{text, tokens, stats}. ``bench`` (:mod:`lab.cli.bench`) prints the side-by-side timing table (see :mod:`lab.bench`);
``arena`` (:mod:`lab.cli.arena`) the drafter arena (predicted vs measured speedup of every drafter,
:func:`lab.arena.run_arena`). ``train pair`` trains the bundled pair, ``train draft`` re-distils only its draft,
``train medusa`` / ``train eagle`` train the Medusa heads / EAGLE draft, and ``train card`` measures the pair and
writes its model card (:mod:`lab.cli.train`). ``pick`` recommends a drafting method for a workload (see
:mod:`lab.picker`, :mod:`lab.cli.pick`).

Bad options stop before any model is loaded, with one error line naming the flag and the allowed values (exit status
2); the checks that need the tokenizer (``--prompt`` must have a token; prompt + ``--max-new-tokens`` must fit the
target's context; ``--drafter`` must work with ``--pair``: GPT-2 has no Llama layers for an early exit) stop right
after the pair loads, before any generation, in the same form (``medusa`` and ``eagle``, trained for some pairs only,
are refused with another pair before it loads). ``bench`` and
``arena`` leave out, and name, the drafters a hub pair cannot have. A model that cannot be loaded gives one error line
and exit status 1, and so does ``train`` when what it reads is missing (the chat data, the draft a recipe adapts).

Each command module has ``add_parser(sub)`` (its options) and ``run(args) -> int`` (the command, importing torch and
the models only when it runs), so that ``--help`` and the option checks stay fast.
"""
from __future__ import annotations

import argparse
import shlex
import sys

from lab.cli import arena, bench, demo, pick, train
from lab.cli.options import PAIRS, OptionError

__all__ = ["main", "build_parser", "OptionError", "PAIRS", "COMMANDS"]

COMMANDS = {"demo": demo, "bench": bench, "arena": arena, "train": train, "pick": pick}
"""Command name -> its module (``add_parser``, ``run``), in the order ``--help`` lists them."""


def build_parser() -> argparse.ArgumentParser:
    """The ``python -m lab`` argument parser (one subcommand per task; see the module docstring)."""
    parser = argparse.ArgumentParser(prog="python -m lab", description="Speculative Decoding Lab: demos, "
                                     "benchmarks, the drafter arena, training and the strategy picker.")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for module in COMMANDS.values():
        module.add_parser(sub)
    return parser


def main(argv=None) -> int:
    """Run ``python -m lab`` with ``argv`` (default: ``sys.argv[1:]``); returns the exit status. Bad options raise
    ``SystemExit(2)`` from argparse after printing the usage and one error line naming the flag; the bad options
    only ``demo``, ``bench`` and ``arena`` can see (:class:`OptionError`: ``--n-draft`` for a drafter that takes
    none, a prompt with no tokens, a prompt plus
    ``--max-new-tokens`` beyond the target's context, too many ``--prompts``) print one such line and return 2. The
    parsed options carry ``invocation``, the command as typed (``"python -m lab arena --json"``), which a run's JSON
    records."""
    parser = build_parser()
    argv = sys.argv[1:] if argv is None else list(argv)
    args, unknown = parser.parse_known_args(argv)
    if unknown:  # argparse would blame the top-level parser: name the command and the options it does take
        commands = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices
        commands[args.command].error(f"unrecognized arguments: {' '.join(unknown)} (python -m lab {args.command} "
                                     "--help lists its options)")
    args.invocation = "python -m lab " + shlex.join(argv)  # recorded in the JSON a run writes (arena --json)
    command = COMMANDS[args.command]
    if args.command == "pick":
        return command.run(args)
    from lab.models import OFFLINE_PAIRS_HINT, ModelNotAvailableError

    if args.command == "train":
        try:
            return command.run(args)
        except (ModelNotAvailableError, FileNotFoundError) as error:  # no target, no chat data, no draft to adapt
            print(f"python -m lab train: {error}", file=sys.stderr)
            return 1

    try:
        return command.run(args)
    except ModelNotAvailableError as error:
        # the loader's advice is written for Python: word it for --pair; the Shakespeare pair ships in the repository
        # and always loads
        text = str(error)
        advice = ("use an offline pair: --pair smollm2-135m (the default) or --pair shakespeare (it ships in the "
                  "repository)")
        if OFFLINE_PAIRS_HINT in text:
            text = text.replace(OFFLINE_PAIRS_HINT, advice)
        elif args.pair != "shakespeare":
            text += " On the command line: --pair shakespeare runs the pair that ships in the repository."
        print(f"python -m lab {args.command}: {text}", file=sys.stderr)
        return 1
    except OptionError as error:
        print(f"python -m lab {args.command}: error: {error}", file=sys.stderr)
        return 2
