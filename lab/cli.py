"""Command line: ``python -m lab demo | bench | arena | train | pick``.

``demo`` streams a speculative generation with coloured tokens (green accepted, red struck-through rejected,
orange resampled, blue bonus) and prints the stats; ``--json`` prints one JSON object {text, tokens, stats}.
``bench`` prints the side-by-side timing table (see :mod:`lab.bench`); ``arena`` the drafter arena (predicted vs
measured speedup of every drafter, :func:`lab.bench.run_arena`). ``train pair`` trains the bundled pair,
``train draft`` re-distils only its draft, ``train medusa`` / ``train eagle`` train the Medusa heads / EAGLE draft, and
``train card`` measures the pair and writes its model card. ``pick`` recommends a drafting method for a workload
(see :mod:`lab.picker`).

Bad options stop before any model is loaded, with one error line naming the flag and the allowed values (exit status
2); the checks that need the tokenizer (``--prompt`` must have a token; prompt + ``--max-new-tokens`` must fit the
target's context; ``--drafter`` must work with ``--pair``: GPT-2 has no Llama layers for an early exit) stop right
after the pair loads, before any generation, in the same form (``medusa`` and ``eagle``, trained for the bundled
target only, are refused with a hub pair before it loads). ``bench`` and
``arena`` leave out, and name, the drafters a hub pair cannot have. A model that cannot be loaded gives one error line
and exit status 1.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

DRAFTERS = ("model", "ngram", "lookahead", "medusa", "eagle", "early-exit")  # the --drafter choices
PAIRS = ("shakespeare", "gpt2", "smollm2", "qwen2.5")
"""The --pair choices: the names of :data:`lab.models.PRESETS`, repeated here so that the command line can check
--pair without importing torch (tests/test_cli_errors.py keeps the two equal)."""

ANSI = {"accepted": "\x1b[32m", "rejected": "\x1b[9;31m", "resampled": "\x1b[1;33m", "bonus": "\x1b[1;34m",
        "prompt": "\x1b[2m", "reset": "\x1b[0m"}


class OptionError(Exception):
    """A bad option argparse cannot check: a prompt with no tokens or a prompt plus ``--max-new-tokens`` longer
    than the target's context (found once the pair is loaded), or a ``bench`` / ``arena`` ``--prompts`` above the
    prompts bundled (found before it loads). :func:`main` prints ``python -m lab COMMAND: error: FLAG: MESSAGE`` and
    returns 2, as argparse does for the options it can check itself."""

    def __init__(self, flag: str, message: str):
        super().__init__(f"{flag}: {message}")
        self.flag = flag


def make_drafter(kind: str, pair, n_draft: int):
    """The drafter for ``--drafter kind`` on ``pair`` (``ValueError`` for an unknown kind)."""
    from lab.drafters import DraftModelDrafter, LookaheadDrafter, PromptLookupDrafter

    if kind == "model":
        return DraftModelDrafter(pair.draft, n_draft=n_draft)
    if kind == "ngram":  # prompt lookup (lesson 08): no draft model
        return PromptLookupDrafter(max_ngram=3, n_draft=n_draft)
    if kind == "lookahead":  # Lookahead decoding (lesson 09): the target drafts for itself; n_draft is not used
        return LookaheadDrafter()
    if kind == "medusa":  # Medusa heads + tree attention (lesson 10); the tree fixes the draft length
        from lab.drafters.medusa import MedusaDrafter

        return MedusaDrafter.from_pretrained(pair)
    if kind == "eagle":  # EAGLE feature-space draft (lesson 11), chain of n_draft
        from lab.drafters.eagle import EagleDrafter

        return EagleDrafter.from_pretrained(pair, n_draft=n_draft)
    if kind == "early-exit":  # the target's first half of layers + its own head (lesson 10)
        from lab.drafters.early_exit import EarlyExitDrafter

        return EarlyExitDrafter(pair.target, num_layers=max(1, pair.target.config.num_hidden_layers // 2),
                                n_draft=n_draft)
    raise ValueError(f"unknown drafter {kind!r}; choose from {', '.join(DRAFTERS)}")


OWN_DRAFT = ("lookahead", "medusa")
"""Drafters whose own geometry (Lookahead's window, Medusa's tree) sets what they draft: N does not apply."""


def own_draft_reason(kind: str) -> str | None:
    """What sets the draft of drafter ``kind`` when it is one of :data:`OWN_DRAFT` (so N does not apply), else
    None."""
    if kind not in OWN_DRAFT:
        return None
    return ("its window W and n-gram size set" if kind == "lookahead" else "its tree of candidates sets") + \
        " what it drafts"


TRAINED_FOR_BUNDLED = ("medusa", "eagle")
"""Drafters whose weights were trained for the bundled target only (lab/assets/shakespeare/medusa, .../eagle)."""


def try_drafter(kind: str, pair, n_draft: int = 4):
    """``(drafter, None)``, or ``(None, why)`` when :func:`make_drafter` cannot build ``kind`` for ``pair`` (its
    error message): a hub pair has no Medusa heads or EAGLE draft, and GPT-2 has no Llama layers for an early exit.
    For the bundled pair, which has every drafter, a missing or damaged asset raises: it is an error to see, not a
    drafter to leave out."""
    try:
        return make_drafter(kind, pair, n_draft), None
    except (FileNotFoundError, ValueError) as error:
        if pair.name == "shakespeare":
            raise
        return None, str(error)


def drafter_problem(kind: str, pair, n_draft: int = 4) -> str | None:
    """Why ``kind`` cannot be built for ``pair`` (:func:`try_drafter`), or None when it can. Always None for the
    bundled pair, without building anything."""
    return None if pair.name == "shakespeare" else try_drafter(kind, pair, n_draft)[1]


def _positive_int(text: str) -> int:
    """argparse type: a whole number >= 1 (argparse prefixes the flag to the message)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a whole number >= 1, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a whole number >= 1, got {text!r}")
    return value


def _model_name(text: str) -> str:
    """argparse type: a model name or path for the rendered command lines (not empty, no surrounding spaces)."""
    if not text.strip() or text != text.strip():
        raise argparse.ArgumentTypeError(f"must be a model name or path such as meta-llama/Llama-3.1-70B-Instruct, "
                                         f"got {text!r}")
    return text


def _finite_nonnegative(what: str, example: str):
    """An argparse type for a finite number >= 0, described in its messages as ``what`` (e.g. "number of GB")."""
    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"must be a {what} >= 0{example}, got {text!r}") from None
        if not (value >= 0 and value != float("inf")):
            raise argparse.ArgumentTypeError(f"must be a finite {what} >= 0{example}, got {text!r}")
        return value

    return parse


def _seed(text: str) -> int:
    """argparse type: a whole number that ``torch.Generator.manual_seed`` accepts."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a whole number, got {text!r}") from None
    if not -2 ** 63 <= value < 2 ** 64:
        raise argparse.ArgumentTypeError(f"must be a whole number from -2**63 to 2**64 - 1, got {text!r}")
    return value


_temperature = _finite_nonnegative("number", " (0 = greedy)")
_gigabytes = _finite_nonnegative("number of GB", "")


def demo(args) -> int:
    """``python -m lab demo``: stream one speculative generation (``args`` from :func:`main`'s parser); returns the
    exit status.

    Raises :class:`OptionError` naming ``--n-draft`` when it is given for a drafter that takes none (lookahead,
    medusa), ``--prompt`` for a prompt that encodes to no tokens or that alone fills the target's context, and
    ``--max-new-tokens`` when the prompt plus the new tokens exceed it, and ``--drafter`` for one the pair cannot
    have (medusa or eagle with a hub pair, before it loads; early-exit on GPT-2) (all before generating);
    :func:`main` prints either as one line."""
    from lab.decode import generate
    from lab.detok import Detokenizer
    from lab.models import context_limit, held_out_prompts, load_pair

    if args.n_draft is not None and own_draft_reason(args.drafter):
        raise OptionError("--n-draft", f"does not apply to --drafter {args.drafter}: "
                                       f"{own_draft_reason(args.drafter)}; leave --n-draft out")
    if args.drafter in TRAINED_FOR_BUNDLED and args.pair != "shakespeare":
        what, has = ("Medusa heads", "them") if args.drafter == "medusa" else ("an EAGLE draft", "one")
        raise OptionError("--drafter", f"{args.drafter} needs {what} trained for the target, and only the bundled "
                                       f"shakespeare pair has {has}; with --pair {args.pair} choose another drafter")
    n_draft = 4 if args.n_draft is None else args.n_draft
    pair = load_pair(args.pair)
    prompt = args.prompt if args.prompt is not None else held_out_prompts()[0]
    prompt_ids = pair.encode(prompt)
    if not prompt_ids:
        raise OptionError("--prompt", f"must contain at least one token, got {prompt!r}")
    limit = context_limit(pair.target)
    if limit is not None and len(prompt_ids) >= limit:
        raise OptionError("--prompt", f"has {len(prompt_ids)} tokens; the target's context holds {limit} positions, "
                                      f"so a prompt may have at most {limit - 1} (one position is left for a new "
                                      "token)")
    if limit is not None and len(prompt_ids) + args.max_new_tokens > limit:
        raise OptionError("--max-new-tokens", f"prompt ({len(prompt_ids)} tokens) + {args.max_new_tokens} new tokens "
                                              f"exceed the target's context of {limit} positions")
    drafter, problem = try_drafter(args.drafter, pair, n_draft)  # before the prompt is printed: a bad option
    if problem:
        raise OptionError("--drafter", f"{args.drafter} does not work with --pair {args.pair}: {problem}")
    color = args.color == "always" or (args.color == "auto" and sys.stdout.isatty())

    def paint(kind: str, text: str) -> str:
        return f"{ANSI[kind]}{text}{ANSI['reset']}" if color else text

    # Each token prints the text it adds to the prompt + accepted tokens, so a character split over tokens prints
    # once, whole; rejected drafts are decoded after the accepted tokens they followed, without joining the text.
    text = Detokenizer(pair, prompt_ids)

    def show(record):
        # A tree's nodes follow their ancestors from before this step; a chain's rejected drafts follow the accepted.
        tree_texts = text.texts_after(record.drafted, record.parents) if record.parents and color else None
        accepted = record.emitted[: record.num_accepted]
        parts = [paint("accepted", text.push(t) or "") for t in accepted]
        if len(record.emitted) > record.num_accepted:
            if record.rejected and color:
                if tree_texts is None:
                    rejected = "".join(s or "" for s in text.texts_after(record.rejected))
                else:  # the alternatives off the accepted path, one per node
                    on_path = set(record.path)
                    rejected = "|".join(s for i, s in enumerate(tree_texts) if i not in on_path and s)
                parts.append(paint("rejected", rejected))
            parts.append(paint(record.last_kind, text.push(record.emitted[-1]) or ""))
        sys.stdout.write("".join(parts))
        sys.stdout.flush()

    if not args.json:
        sys.stdout.write(paint("prompt", prompt))
        if color:
            sys.stdout.write(f"\n{ANSI['accepted']}accepted{ANSI['reset']} {ANSI['rejected']}rejected{ANSI['reset']} "
                             f"{ANSI['resampled']}resampled{ANSI['reset']} {ANSI['bonus']}bonus{ANSI['reset']}\n")
    gen = generate(pair.target, prompt_ids, drafter=drafter,
                   max_new_tokens=args.max_new_tokens, temperature=args.temperature, seed=args.seed,
                   eos_token_id=pair.eos_token_id, on_step=None if args.json else show)
    stats = {k: v for k, v in gen.stats.items()}
    if args.json:
        print(json.dumps({"text": pair.decode(gen.tokens), "tokens": gen.tokens, "stats": stats}))
        return 0
    sys.stdout.write(text.flush())  # bytes of a character the run stopped in the middle of, as decode shows them
    rate = stats["acceptance_rate"]
    print("\n\n" + " · ".join([
        f"acceptance rate {rate:.2f}" if rate is not None else "acceptance rate n/a",
        f"tokens per target call {stats['tokens_per_target_call']:.2f}",
        f"{stats['target_calls']} target call{'s' if stats['target_calls'] != 1 else ''} for {stats['new_tokens']} tokens",
        f"{stats['tokens_per_second']:.0f} tokens/s",
        f"device {pair.device}"]))
    return 0


def build_parser() -> argparse.ArgumentParser:
    """The ``python -m lab`` argument parser (one subcommand per task; see the module docstring)."""
    parser = argparse.ArgumentParser(prog="python -m lab", description="Speculative Decoding Lab: demos, "
                                     "benchmarks, the drafter arena, training and the strategy picker.")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    pair_help = f"model pair preset, one of {', '.join(PAIRS)} (default: %(default)s; only shakespeare is bundled)"

    p = sub.add_parser("demo", help="stream one speculative generation with coloured tokens",
                       description="Stream one speculative generation with coloured tokens (green accepted, red "
                                   "struck-through rejected, orange resampled, blue bonus), then print the stats.")
    p.add_argument("--drafter", choices=DRAFTERS, default="model",
                   help="how to draft: a draft model, n-gram prompt lookup, Lookahead, Medusa heads, the EAGLE draft "
                        "or an early exit from the target; medusa and eagle only with the bundled pair (default: %(default)s)")
    p.add_argument("--prompt", default=None, help="text to continue (default: a held-out passage)")
    p.add_argument("--max-new-tokens", type=_positive_int, default=80,
                   help="tokens to generate, >= 1 (default: %(default)s)")
    p.add_argument("--temperature", type=_temperature, default=0.0,
                   help="target sampling temperature, >= 0; 0 = greedy (default: %(default)s)")
    p.add_argument("--n-draft", type=_positive_int, default=None,
                   help="draft tokens per step N, >= 1, for model, ngram, eagle and early-exit (default: 4); "
                        "lookahead and medusa refuse it: their window / tree sets what they draft")
    p.add_argument("--seed", type=_seed, default=0,
                   help="random seed for sampling, a whole number from -2**63 to 2**64 - 1 (default: %(default)s)")
    p.add_argument("--pair", choices=PAIRS, default="shakespeare", metavar="PAIR", help=pair_help)
    p.add_argument("--json", action="store_true", help="print one JSON object {text, tokens, stats}")
    p.add_argument("--color", choices=["auto", "always", "never"], default="auto",
                   help="ANSI colours (auto: only on a terminal) (default: %(default)s)")

    b = sub.add_parser("bench", help="lab vs transformers: autoregressive and speculative, side by side",
                       description="Time this course's decode loop against transformers' generate, autoregressive "
                                   "and speculative, on held-out and copy-heavy prompts, and check that greedy "
                                   "outputs are identical (exit status 1 if not).")
    b.add_argument("--json", action="store_true", help="print the results as JSON instead of tables")
    b.add_argument("--max-new-tokens", type=_positive_int, default=128,
                   help="tokens to generate per prompt, >= 1 (default: %(default)s)")
    b.add_argument("--n-draft", type=_positive_int, default=4,
                   help="draft tokens per step N, >= 1, for the draft model (ours and transformers' assistant), "
                        "EAGLE and the early exit; prompt lookup drafts 5, Lookahead and Medusa follow their "
                        "window / tree (default: %(default)s)")
    b.add_argument("--prompts", type=_positive_int, default=5,
                   help="how many held-out prompts, 1 to 8 (the bundled held-out prompts; default: %(default)s)")
    b.add_argument("--pair", choices=PAIRS, default="shakespeare", metavar="PAIR", help=pair_help)

    a = sub.add_parser("arena", help="every drafter on prose, copy/edit and structured prompts at T = 0 and 1: "
                                     "predicted vs measured speedup, then fixed vs adaptive N",
                       description="The drafter arena (lesson 12): every drafter on the same target and prompts, "
                                   "for prose, copy/edit and structured output at T = 0 and T = 1. Prints the "
                                   "speedup lesson 06's formula predicts beside the measured one, where the "
                                   "difference went, and fixed vs adaptive N for the draft model. Exit status 1 if "
                                   "a greedy run differed from autoregressive decoding.")
    a.add_argument("--json", action="store_true", help="print the arena and the adaptive comparison as JSON")
    a.add_argument("--max-new-tokens", type=_positive_int, default=64,
                   help="tokens to generate per prompt, >= 1 (default: %(default)s)")
    a.add_argument("--prompts", type=_positive_int, default=3,
                   help="prompts per task, 1 to 4 with the bundled pair (default: %(default)s)")
    a.add_argument("--n-draft", type=_positive_int, default=4,
                   help="draft tokens per step N for the drafters that take one, >= 1 (default: %(default)s)")
    a.add_argument("--repeats", type=_positive_int, default=1,
                   help="time each run this often and keep the fastest, >= 1 (default: %(default)s)")
    a.add_argument("--pair", choices=PAIRS, default="shakespeare", metavar="PAIR", help=pair_help)

    t = sub.add_parser("train", help="train the bundled pair, its draft, Medusa heads or EAGLE draft, or measure the pair",
                       description="Train the bundled Shakespeare pair (or its Medusa heads / EAGLE draft), measure "
                                   "it and rewrite its model card, or fine-tune a copy-capable target beside it.")
    t.add_argument("what", choices=["pair", "draft", "card", "medusa", "eagle", "copy-target"],
                   help="pair: tokenizer, target and draft; draft: re-distil the draft only; card: measure; "
                        "medusa / eagle: train the Medusa heads / EAGLE draft on the committed target; "
                        "copy-target: fine-tune the committed target to copy from its context (saved in the "
                        "cache, not over the bundled pair)")
    t.add_argument("--threads", type=_positive_int, default=None,
                   help="torch CPU threads for training and for the card's timings, >= 1 (default: torch's own "
                        "choice)")

    from lab.picker import METHODS, TASKS  # stdlib only: cheap to import

    k = sub.add_parser("pick", help="recommend a speculative-decoding method and its vLLM / transformers settings",
                       description="Recommend a speculative-decoding method, draft length N and draft temperature "
                                   "for a workload (lesson 14), with the reasons, the expected speedup and its "
                                   "source, and the settings for vLLM and transformers.")
    k.add_argument("--task", required=True, choices=TASKS, help="the workload: " + ", ".join(TASKS))
    k.add_argument("--temperature", type=_temperature, default=0.0,
                   help="target sampling temperature, >= 0; 0 = greedy (default: %(default)s)")
    k.add_argument("--small-model", action=argparse.BooleanOptionalAction, default=False,
                   help="a small model of the target's family exists (vanilla draft) (default: no)")
    k.add_argument("--can-finetune", action="store_true", help="you may train EAGLE / Medusa heads for the target")
    k.add_argument("--throughput", action="store_true", help="throughput-bound, high-batch serving")
    k.add_argument("--memory-gb", type=_gigabytes, default=None,
                   help="free accelerator memory beyond the target and its KV cache, GB >= 0 (default: not known, "
                        "assumed to fit)")
    k.add_argument("--exclude", action="append", choices=[m for m in METHODS if m != "none"], metavar="METHOD",
                   help="a method you cannot use, one of " + ", ".join(m for m in METHODS if m != "none")
                        + " (repeatable)")
    k.add_argument("--target", type=_model_name, default="<target-model>",
                   help="target model name for the vllm command line (default: %(default)s)")
    k.add_argument("--tensor-parallel-size", type=_positive_int, default=1,
                   help="GPUs the target is sharded over, >= 1 (default: %(default)s)")
    k.add_argument("--markdown", metavar="FILE", default=None, help="also write a one-page decision guide to FILE")
    k.add_argument("--json", action="store_true", help="print the recommendation as JSON")
    return parser


def main(argv=None) -> int:
    """Run ``python -m lab`` with ``argv`` (default: ``sys.argv[1:]``); returns the exit status. Bad options raise
    ``SystemExit(2)`` from argparse after printing the usage and one error line naming the flag; the bad options
    only ``demo``, ``bench`` and ``arena`` can see (:class:`OptionError`: ``--n-draft`` for a drafter that takes
    none, a prompt with no tokens, a prompt plus
    ``--max-new-tokens`` beyond the target's context, too many ``--prompts``) print one such line and return 2."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command == "pick":
        from lab.picker import main as pick_main

        return pick_main(args)
    if args.command in ("demo", "bench", "arena"):
        from lab.models import ModelNotAvailableError

        try:
            if args.command == "demo":
                return demo(args)
            if args.command == "bench":
                from lab.bench import main as bench_main

                return bench_main(args)
            from lab.bench import arena_main

            return arena_main(args)
        except ModelNotAvailableError as error:
            # the loader's advice is written for Python; on the command line the bundled pair is the default
            advice = (f" On the command line: leave out --pair {args.pair} to run the bundled pair."
                      if args.pair != "shakespeare" else "")
            print(f"python -m lab {args.command}: {error}{advice}", file=sys.stderr)
            return 1
        except OptionError as error:
            print(f"python -m lab {args.command}: error: {error}", file=sys.stderr)
            return 2
    from lab import train

    if args.threads is not None:  # for `card` too, whose decode timings (cost per token, c) depend on it
        import torch

        torch.set_num_threads(args.threads)
    if args.what == "copy-target":
        out = train.train_copy_target(threads=args.threads)
        print((Path(out) / "training.json").read_text())
        return 0
    if args.what in ("medusa", "eagle"):
        card = train.train_medusa(threads=args.threads) if args.what == "medusa" else \
            train.train_eagle(threads=args.threads)
        print(Path(card).read_text())
        return 0
    if args.what != "card":
        train.train_pair(threads=args.threads, draft_only=args.what == "draft")
    train.write_card()
    print((train.PAIR_DIR / "README.md").read_text())
    return 0
