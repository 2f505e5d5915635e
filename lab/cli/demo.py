"""``python -m lab demo``: stream one speculative generation with coloured tokens (green accepted, grey
struck-through rejected, orange resampled, blue bonus; the end-of-text token as its label in the widgets: ⟨end⟩ for a
chat answer's ``<|im_end|>``, ⟨end of text⟩ for ``<|endoftext|>``)
and print the stats (after two tokens of warm-up off the clock, with a warning when other programs kept the machine
busy); ``--json`` prints one JSON object {text, tokens, stats, load} (``load``:
:meth:`lab.load_meter.LoadMeter.summary` of the run).

Without ``--temperature`` a pair with a chat template (the default, smollm2-135m) samples at
:data:`lab.cli.options.CHAT_TEMPERATURE` (0.8), as its greedy answers loop on open requests; a plain-text pair (the
Shakespeare pair) decodes greedily (0)."""
from __future__ import annotations

import json
import sys

from lab.cli.options import (CHAT_PAIRS, CHAT_TEMPERATURE, DEFAULT_PAIR, MAX_DRAFT_LENGTH, PAIRS, OptionError,
                             demo_temperature, draft_length, fit_threads_noting_changes, pair_help, positive_int,
                             probability, seed, temperature, warm_up_ids)
from lab.registry import (DRAFTERS, TRAINED_FOR, TRAINED_PAIRS, drafters_in_words, own_draft_reason, try_drafter,
                          untrained_reason)
from lab.words import acceptance_phrase, in_words, plural

__all__ = ["ANSI", "CHAT_PROMPT", "END_MARK", "add_parser", "run"]

CHAT_PROMPT = "Write a Python function that checks whether a string is a palindrome."
"""The default --prompt for a pair with a chat template (the user's message)."""

ANSI = {"accepted": "\x1b[32m", "rejected": "\x1b[9;38;5;246m", "resampled": "\x1b[1;38;5;166m", "bonus": "\x1b[1;34m",
        "target": "\x1b[0m", "prompt": "\x1b[2m", "reset": "\x1b[0m"}
"""The escape codes that colour each kind of token (and the prompt) on a terminal, in the widgets' meanings
(``widgets.style.KIND_COLORS``): green accepted, grey struck-through rejected (256-colour 246, #949494: a fixed grey,
as "bright black" is the background colour in some dark themes), orange resampled (256-colour 166,
#d75f00, the widgets' vermillion #D55E00), blue bonus. ``"target"``, the token of a step that drafted nothing (the
prefill's, a lookup miss), is plain text: no draft was accepted before it, so it is not a bonus."""


def add_parser(sub) -> None:
    """Add the ``demo`` command and its options to ``sub`` (the subparsers of :func:`lab.cli.build_parser`)."""
    p = sub.add_parser("demo", help="stream one speculative generation with coloured tokens",
                       description="Stream one speculative generation with coloured tokens (green accepted, grey "
                                   "struck-through rejected, orange resampled, blue bonus: the colours of the "
                                   "notebook widgets), then print the stats.")
    p.add_argument("--drafter", choices=DRAFTERS, default="model",
                   help=f"how to draft: {drafters_in_words(labels=True)}; {in_words(TRAINED_FOR)} need trained "
                        f"weights, committed for --pair {in_words(TRAINED_PAIRS)} only (default: %(default)s)")
    p.add_argument("--prompt", default=None,
                   help="text to continue; with a chat pair (smollm2-135m) the user's message, sent with the chat "
                        "template (default: a held-out passage; a coding request for a chat pair)")
    p.add_argument("--max-new-tokens", type=positive_int, default=80,
                   help="tokens to generate, >= 1 (default: %(default)s)")
    p.add_argument("--temperature", type=temperature, default=None,
                   help=f"target sampling temperature, 0 to 2; 0 = greedy (default: {CHAT_TEMPERATURE:g} for a pair "
                        "with a chat template such as smollm2-135m, whose greedy answers loop on open requests; 0 "
                        "for a plain-text pair such as shakespeare)")
    p.add_argument("--n-draft", type=draft_length, default=None,
                   help=f"draft tokens per step N, 1 to {MAX_DRAFT_LENGTH}, for {drafters_in_words(take_n=True)} "
                        f"(default: 4, or 20 with --confidence); {drafters_in_words(take_n=False)} refuse it: each "
                        "sets its own draft (a window, a tree, a match's length, a number of modules)")
    p.add_argument("--confidence", type=probability, default=None, metavar="P",
                   help="--drafter model only: end a step's draft after a token the draft gave a probability below "
                        "P, that token included (transformers' assistant_confidence_threshold; its default policy is "
                        "P = 0.4 with up to 20 drafts a step); --n-draft is then the most a step drafts (default: "
                        "off)")
    p.add_argument("--seed", type=seed, default=0,
                   help="random seed for sampling, a whole number from -2**63 to 2**64 - 1 (default: %(default)s)")
    p.add_argument("--pair", choices=PAIRS, default=DEFAULT_PAIR, metavar="PAIR", help=pair_help)
    p.add_argument("--json", action="store_true",
                   help="print one JSON object {text, tokens, stats, load} (load: how busy other programs kept the "
                        "machine during the run)")
    p.add_argument("--color", choices=["auto", "always", "never"], default="auto",
                   help="ANSI colours (auto: only on a terminal) (default: %(default)s)")


ECHO_CHARS, ECHO_LINES = 300, 8
"""A prompt longer than four times ``ECHO_CHARS`` characters or ``ECHO_LINES`` lines is echoed as its head and tail,
each at most ``ECHO_CHARS`` characters and ``ECHO_LINES`` lines (a 6,000-token ``--prompt`` filled a projector's
screen before the first generated token)."""
END_MARK = "\u27e8end\u27e9"
"""What the stream prints for the end-of-text token when its text is empty: the label ``TokenStream`` gives a chat
answer's ``<|im_end|>`` (:func:`lab.detok.special_token_text`)."""


def echoed_prompt(prompt: str) -> str:
    """``prompt`` as the demo prints it before the answer: whole, or for a long one (:data:`ECHO_CHARS`,
    :data:`ECHO_LINES`) its head and tail around a line that counts the characters left out (the tail stays, since
    a plain-text pair's answer continues it)."""
    if len(prompt) <= 4 * ECHO_CHARS and len(prompt.rstrip("\n").split("\n")) <= 4 * ECHO_LINES:
        return prompt
    head = "\n".join(prompt[:ECHO_CHARS].split("\n")[:ECHO_LINES])
    tail = "\n".join(prompt[-ECHO_CHARS:].split("\n")[-ECHO_LINES:])
    left_out = len(prompt) - len(head) - len(tail)
    shortened = f"{head}\n[… {left_out:,} characters of the prompt not shown …]\n{tail}"
    return shortened if len(shortened) < len(prompt) else prompt  # blank lines: shortening would lengthen it


def _calls_phrase(new_tokens: int, calls: int, ended: bool = False) -> str:
    """How the tokens were written, in numbers a viewer can divide: the prefill's first token, then the decode
    tokens over the target calls (the ratio printed as tokens per target call). ``ended``: the answer ended with
    its end token, which the phrase then says (else ``--max-new-tokens`` stopped it)."""
    if new_tokens == 0:
        return "no token written"
    end = " (the answer ended)" if ended else ""
    if calls == 0:
        if new_tokens != 1:
            return plural(new_tokens, "token") + end
        return ("1 token, the prefill's: the answer ended there" if ended
                else "1 token, the prefill's: --max-new-tokens 1 allowed no more")
    return (f"the prefill's first token, then {plural(new_tokens - 1, 'token')} from "
            f"{plural(calls, 'target call')}{end}")


def _rate_phrase(stats: dict) -> str:
    """Tokens per second over the whole call, with the prefill's share named, and over the decode steps alone."""
    def rate(value):
        return f"{value:.{0 if value >= 10 else 1}f}"

    text = f"{rate(stats['tokens_per_second'])} tokens/s"
    decode_ms = stats.get("wall_ms", 0.0) - stats.get("prefill_ms", 0.0)
    if stats["new_tokens"] > 1 and decode_ms > 0 and "prefill_ms" in stats:
        text += (f" (the prefill's {stats['prefill_ms']:.0f} ms included; "
                 f"{rate((stats['new_tokens'] - 1) / decode_ms * 1000)} tokens/s after it)")
    return text


def _acceptance_phrase(stats: dict, tree: bool, struck: bool) -> str:
    """:func:`lab.words.acceptance_phrase` of ``stats``; a coloured stream of token trees (``struck``) adds that it
    strikes through only the first rejected child at a path's end."""
    phrase = acceptance_phrase(stats["acceptance_rate"], stats.get("accepted_tokens"), stats.get("drafted_tokens"),
                               tree)
    if tree and struck and phrase.endswith(")"):
        phrase = phrase[:-1] + "; the stream strikes through only the first rejected child at its end)"
    return phrase


def rejected_child_text(record, text) -> str:
    """The text of a token-tree step's first rejected child (:func:`lab.trace.first_rejected_child`), the draft
    ``TokenStream`` strikes through too; "" when there is none. ``text`` is the run's
    :class:`lab.detok.Detokenizer` after the accepted tokens were pushed."""
    from lab.trace import first_rejected_child

    child = first_rejected_child(record)
    return "" if child is None else text.texts_after([record.drafted[child]])[0] or ""


def run(args) -> int:
    """``python -m lab demo``: stream one speculative generation (``args`` from :func:`lab.cli.build_parser`);
    returns the exit status.

    Raises :class:`OptionError` (all before generating) naming ``--n-draft`` when it is given for a drafter that
    takes none (lookahead, medusa, suffix, mtp), ``--confidence`` for a drafter other than model, ``--prompt`` for a
    prompt that is empty or only whitespace (as ``RaceDashboard`` refuses its free text), that encodes to no tokens
    or that alone fills the target's context, ``--max-new-tokens`` when the prompt
    plus the new tokens exceed it, and ``--drafter`` for one the pair cannot have (medusa, eagle, mtp, parallel or
    eagle3 with a pair they were not trained for, before it loads; early-exit on GPT-2).
    :func:`lab.cli.main` prints either as one line."""
    from lab.bench import HF_ASSISTED_POLICY
    from lab.decode import generate
    from lab.detok import Detokenizer, show_controls, special_token_text, token_display_text
    from lab.load_meter import BUSY_WARNING, LoadMeter, thread_advice
    from lab.models import context_limit, load_pair
    from lab.prompts import held_out_prompts
    from lab.trace import own_token_kind

    if args.n_draft is not None and own_draft_reason(args.drafter):
        raise OptionError("--n-draft", f"does not apply to --drafter {args.drafter}: "
                                       f"{own_draft_reason(args.drafter)}; leave --n-draft out")
    if args.confidence is not None and args.drafter != "model":
        raise OptionError("--confidence", f"applies to --drafter model only (the draft model's confidence stop), not "
                                          f"--drafter {args.drafter}; leave --confidence out")
    if args.prompt is not None and not args.prompt.strip():  # as RaceDashboard's free text: nothing to answer or
        # continue (an unset shell variable, say), refused before the pair loads
        raise OptionError("--prompt", f"is empty or only whitespace, got {args.prompt!r}: give some text, or leave "
                                      "--prompt out for the default")
    untrained = untrained_reason(args.drafter, args.pair)
    if untrained:
        raise OptionError("--drafter", f"{args.drafter}: {untrained}; with --pair {args.pair} choose another drafter")
    if args.n_draft is not None:
        n_draft = args.n_draft
    else:  # transformers' default policy caps a confident draft at 20 tokens (lab.bench.HF_ASSISTED_POLICY)
        n_draft = 4 if args.confidence is None else HF_ASSISTED_POLICY[0]
    pair = load_pair(args.pair, dtype="auto" if args.pair in CHAT_PAIRS else None)  # the real pair: fast dtype
    fit_threads_noting_changes()  # while other programs hold cores, torch gets the cores they leave
    chat = pair.has_chat_template  # an instruction-tuned target answers a user turn
    temperature_used = demo_temperature(args.temperature, chat)
    prompt = args.prompt if args.prompt is not None else CHAT_PROMPT if chat else held_out_prompts()[0]
    try:
        prompt_ids = pair.encode_chat(prompt) if chat else pair.encode(prompt)
    except ValueError as error:  # not valid Unicode (bytes that were not UTF-8), or a special token the template moves
        raise OptionError("--prompt", str(error).split(": ", 1)[-1]) from None
    if not prompt_ids:
        raise OptionError("--prompt", f"must contain at least one token, got {prompt!r}")
    limit = context_limit(pair.target)
    if limit is not None and len(prompt_ids) >= limit:
        raise OptionError("--prompt", f"has {len(prompt_ids)} tokens; the target's context holds {limit} positions, "
                                      f"so a prompt may have at most {limit - 1} (one position is left for a new "
                                      "token)")
    if limit is not None and len(prompt_ids) + args.max_new_tokens > limit:
        raise OptionError("--max-new-tokens", f"prompt ({len(prompt_ids)} tokens) + {args.max_new_tokens} new tokens "
                                              f"exceed the target's context of {limit} positions: at most "
                                              f"{limit - len(prompt_ids)} with this prompt")
    # built before the prompt is printed: a drafter the pair cannot have is a bad option
    drafter, problem = try_drafter(args.drafter, pair, n_draft, args.confidence)
    if problem:
        raise OptionError("--drafter", f"{args.drafter} does not work with --pair {args.pair}: {problem}")
    color = args.color == "always" or (args.color == "auto" and sys.stdout.isatty())

    def paint(kind: str, text: str) -> str:
        text = show_controls(text)  # an escape sequence in the prompt or a token must not drive the terminal
        return f"{ANSI[kind]}{text}{ANSI['reset']}" if color else text

    # Each token prints the text it adds to the prompt + accepted tokens, so a character split over tokens prints
    # once, whole; rejected drafts are decoded after the accepted tokens they followed, without joining the text.
    text = Detokenizer(pair, prompt_ids)

    def push(token: int) -> str:
        # A special token shows as its label, as in the widgets: a chat answer's closing <|im_end|> is "⟨end⟩", so
        # the viewer sees where the answer ended (an empty piece hid it).
        piece = special_token_text(text.push(token) or "")
        return piece or END_MARK if token == pair.eos_token_id else piece

    def show(record):
        accepted = record.emitted[: record.num_accepted]
        parts = [paint("accepted", push(t)) for t in accepted]
        if len(record.emitted) > record.num_accepted:
            if record.rejected and color:
                if record.parents is None:  # a chain's rejected draft and the unchecked ones after it
                    rejected = "".join(s or "" for s in text.texts_after(record.rejected))
                else:
                    rejected = rejected_child_text(record, text)
                if rejected:  # not in the answer: its line breaks and tabs show as marks (↵, ⇥), as in the widgets
                    parts.append(paint("rejected", token_display_text(rejected, "rejected")))
            parts.append(paint(own_token_kind(record), push(record.emitted[-1])))
        sys.stdout.write("".join(parts))
        sys.stdout.flush()

    if not args.json:
        sys.stdout.write(paint("prompt", echoed_prompt(prompt) + ("\n" if chat else "")))
        if color:
            # greedy: the token that replaces a rejected draft is the target's argmax, nothing is sampled
            replaced = "resampled" if temperature_used > 0 else "corrected (the target's argmax)"
            sys.stdout.write(f"\n{ANSI['accepted']}accepted{ANSI['reset']} {ANSI['rejected']}rejected{ANSI['reset']} "
                             f"{ANSI['resampled']}{replaced}{ANSI['reset']} {ANSI['bonus']}bonus{ANSI['reset']} "
                             "plain: the target's token where nothing was drafted\n")
    # The target's first forwards pay one-off costs (allocations, kernel choice): two tokens off the clock, so the
    # tokens/s below is the steady speed. Without a drafter: suffix decoding would cache the warm-up's answer.
    # The prompt's tail is enough for that; a long prompt is not prefilled twice.
    generate(pair.target, warm_up_ids(prompt_ids), max_new_tokens=min(2, args.max_new_tokens),
             eos_token_id=pair.eos_token_id)
    with LoadMeter() as load:
        gen = generate(pair.target, prompt_ids, drafter=drafter,
                       max_new_tokens=args.max_new_tokens, temperature=temperature_used, seed=args.seed,
                       eos_token_id=pair.eos_token_id, on_step=None if args.json else show)
    stats = {k: v for k, v in gen.stats.items()}
    if args.json:
        shown = gen.tokens[:-1] if chat and gen.tokens[-1:] == [pair.eos_token_id] else gen.tokens
        print(json.dumps({"text": pair.decode(shown), "tokens": gen.tokens, "stats": stats, "load": load.summary()}))
        return 0
    # bytes of a character the run stopped in the middle of, as decode shows them
    sys.stdout.write(show_controls(text.flush()))
    per_call = stats["tokens_per_target_call"]  # None: no decode step
    print("\n\n" + " · ".join([
        _acceptance_phrase(stats, tree=any(step.parents is not None for step in gen.steps), struck=color),
        f"tokens per target call {per_call:.2f}" if per_call is not None else "tokens per target call n/a",
        _calls_phrase(stats["new_tokens"], stats["target_calls"],
                      ended=gen.tokens[-1:] == [pair.eos_token_id]),
        _rate_phrase(stats),
        f"temperature {temperature_used:g}" + (" (greedy)" if temperature_used == 0 else f", seed {args.seed}"),
        f"device {pair.device}"]))
    if load.busy:  # only then: a quiet run's line stays one line
        print(BUSY_WARNING + f" (other processes kept {load.other_cores:.2f} of {load.cores} cores busy)"
              + thread_advice())
    return 0
