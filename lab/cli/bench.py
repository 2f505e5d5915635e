"""``python -m lab bench``: lab vs transformers, autoregressive and speculative, side by side (:mod:`lab.bench`)."""
from __future__ import annotations

import argparse
import json

from lab.cli.options import (CHAT_PAIRS, MAX_DRAFT_LENGTH, OptionError, add_run_options, draft_length,
                             fit_threads_noting_changes, int_list, positive_int)
from lab.registry import (DRAFTER_SPECS, DRAFTERS, OWN_DRAFT, drafter_problem, drafters_in_words, own_draft_reason,
                          untrained_reason)
from lab.words import in_words

__all__ = ["add_parser", "run", "drafter_names", "selected_drafters", "refuse_untrained"]


def drafter_names(text: str) -> tuple:
    """argparse type of ``--drafter``: one drafter name of :data:`lab.registry.DRAFTERS` or several comma-separated
    (:func:`lab.bench.check_drafters`); an unknown or empty name is an error that lists the allowed ones."""
    from lab.bench import check_drafters

    try:
        return check_drafters(text, "each name")
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


GOAL_PROMPTS, GOAL_NEW_TOKENS = 3, 128
"""The bench's defaults on a chat pair (3 requests per kind, 128 new tokens each), the smallest run the speed goals
are judged on; a smaller run prints its numbers without a verdict (an instructor's 8-token run "met" a goal).
``GOAL_NEW_TOKENS`` is also the tables' token count on a plain-text pair, which has no goals."""
PLAIN_PROMPTS = 5
"""The bench's held-out passages per table on a plain-text pair (Shakespeare, GPT-2) when ``--prompts`` is not
given."""


def goals_unjudged_reason(prompts: int, max_new_tokens: int, busy: dict) -> str | None:
    """Why a bench run's goals get no verdict, or None when they do: fewer than :data:`GOAL_PROMPTS` requests per
    kind or :data:`GOAL_NEW_TOKENS` new tokens, or other programs keeping the machine busy during a part of it
    (``busy``: part name -> :attr:`lab.load_meter.LoadMeter.busy`)."""
    reasons = []
    if prompts < GOAL_PROMPTS or max_new_tokens < GOAL_NEW_TOKENS:
        reasons.append(f"a smaller run (--prompts {prompts}, --max-new-tokens {max_new_tokens}) than the goals are "
                       f"judged on (at least {GOAL_PROMPTS} and {GOAL_NEW_TOKENS})")
    parts = [part for part, was_busy in busy.items() if was_busy]
    if parts:
        reasons.append(f"other programs kept the machine busy during {in_words(parts)}; run it again once the "
                       "machine is quiet")
    return "; ".join(reasons) or None


def add_parser(sub) -> None:
    """Add the ``bench`` command and its options to ``sub`` (the subparsers of :func:`lab.cli.build_parser`)."""
    b = sub.add_parser("bench", help="lab vs transformers: autoregressive and speculative, side by side",
                       description="Time this course's decode loop against transformers' generate, autoregressive "
                                   "and speculative, side by side, and check that greedy outputs agree. The real "
                                   "pair (smollm2-135m) runs in its fast dtype on chat, code, structured and "
                                   "copy/edit requests, then prints the target's K-token cost curve, the draft's "
                                   "efficiency and the speed goals; the Shakespeare pair runs in float32 on "
                                   "held-out and copy-heavy prompts. Exit status 1 if float32 outputs differ. With "
                                   "--batch: goodput against batch size x N instead (batched speculative "
                                   "decoding, lab.goodput).")
    add_run_options(b, json_help="print the results as JSON instead of tables", max_new_tokens=GOAL_NEW_TOKENS,
                    prompts=None, prompts_help="how many prompts per table, 1 to 8 (the bundled held-out prompts; "
                                               f"default: {GOAL_PROMPTS} per kind of request for a chat pair, "
                                               f"{PLAIN_PROMPTS} otherwise); with --batch, the distinct prompts "
                                               "queued, up to those bundled for --batch-task (32 for all four "
                                               "kinds; default: all)",
                    n_draft_help=f"draft tokens per step N, 1 to {MAX_DRAFT_LENGTH}, for "
                                 f"{in_words(k for k in DRAFTERS if k not in OWN_DRAFT and k != 'ngram')} (model: "
                                 "ours and transformers' assistant alike); ngram (prompt lookup) drafts "
                                 "--lookup-n-draft; "
                                 f"{drafters_in_words(take_n=False)} set their own draft (default: %(default)s)")
    b.add_argument("--drafter", action="append", type=drafter_names, default=None, metavar="NAME[,NAME...]",
                   help="time only these drafters beside lab autoregressive and HF generate, repeatable or "
                        f"comma-separated, from {', '.join(DRAFTERS)} (model and ngram bring transformers' "
                        "counterpart; "
                        f"{in_words(name for name, spec in DRAFTER_SPECS.items() if not spec.plain_bench)} are timed "
                        "only when named here, but EAGLE-3 on its dynamic tree also by default on the real pair); a "
                        "chat pair then prints its tables without the cost curve, N sweep and goals (default: every "
                        "method)")
    b.add_argument("--lookup-n-draft", type=draft_length, default=5,
                   help="tokens prompt lookup drafts per step, ours and transformers' prompt_lookup_num_tokens, "
                        f"1 to {MAX_DRAFT_LENGTH} (default: %(default)s)")
    batch = b.add_argument_group("goodput against batch size (--batch)")
    batch.add_argument("--batch", action="store_true",
                       help="instead of the method tables, time batched speculative decoding (lab.goodput): "
                            "goodput (committed tokens/s over the batch) for every batch size x N, the crossover "
                            "batch size where no N > 0 beats N = 0 any more, and the best N per batch size as "
                            "vLLM's num_speculative_tokens_per_batch_size; --max-new-tokens defaults to "
                            f"{BATCH_MAX_NEW_TOKENS} here")
    batch.add_argument("--batch-sizes", type=int_list(1), default=None, metavar="B,B,...",
                       help=f"batch sizes to time, comma-separated, each from 1 to {MAX_BATCH['cpu']} on a CPU "
                            f"({MAX_BATCH['cuda']} on a GPU) (default: "
                            f"{','.join(map(str, BATCH_DEFAULTS['batch_sizes']))})")
    batch.add_argument("--batch-n", type=int_list(0), default=None, metavar="N,N,...",
                       help="draft lengths to time, comma-separated, each >= 0; 0 = autoregressive (default: "
                            f"{','.join(map(str, BATCH_DEFAULTS['batch_n']))}; a drafter that sets its own draft, "
                            f"{', '.join(OWN_DRAFT)}, takes only 0,1: off and on)")
    batch.add_argument("--batch-drafter", choices=DRAFTERS, default=None,
                       help="the drafter of every row, one instance per row (default: ngram, prompt lookup, "
                            "whose drafting costs next to nothing, so the goodput measures verification; a draft "
                            "model drafts row by row here, so its cost grows with the batch)")
    batch.add_argument("--batch-task", choices=("all", *BATCH_TASKS), default=None,
                       help="the chat pair's requests of one kind, or all four kinds interleaved (default: all); "
                            "the Shakespeare pair always takes its held-out passages")
    batch.add_argument("--batch-requests", type=positive_int, default=None, metavar="R",
                       help=f"requests in the queue every batch size serves, from 1 to {8 * MAX_BATCH['cpu']} on a "
                            f"CPU ({8 * MAX_BATCH['cuda']} on a GPU); B of them run at once and a "
                            "finished one's place goes to the next (continuous batching) (default: twice the "
                            "largest batch size)")
    batch.add_argument("--rounds", type=positive_int, default=None,
                       help="interleaved rounds over every batch size x N, >= 1 (default: 1)")
    for action in b._actions:  # --max-new-tokens: 128 for the tables, BATCH_MAX_NEW_TOKENS with --batch
        if action.dest in TABLE_DEFAULTS:
            action.default = None
            action.help = action.help.replace("%(default)s", str(TABLE_DEFAULTS[action.dest]))
        if action.dest == "max_new_tokens":
            action.default = None
            action.help = (f"tokens to generate per prompt, >= {MIN_TABLE_TOKENS} for the method tables (default: "
                           f"{GOAL_NEW_TOKENS}), >= 1 with --batch (default: {BATCH_MAX_NEW_TOKENS} per row)")


BATCH_MAX_NEW_TOKENS = 32
"""``--max-new-tokens`` of ``bench --batch`` when none is given: 32 requests x 32 tokens of the real pair take seconds
per batch size and N on 2 CPU cores, so the default sweep stays within a few minutes."""
BATCH_TASKS = ("chat", "code", "structured", "copy_edit")  # lab.prompts.CHAT_TASKS: --help must not import torch
# The largest batch bench --batch times: a CPU machine like the course's (24 GiB) was killed for memory at 100,000
# rows and took minutes at 4,096; 256 ran in seconds (1.3 GB). A GPU's engines batch far more.
MAX_BATCH = {"cpu": 256, "cuda": 1024}
BATCH_DEFAULTS = {"batch_sizes": (1, 2, 4, 8, 16), "batch_n": (0, 2, 4), "batch_drafter": "ngram",
                  "batch_task": "all", "batch_requests": None, "rounds": 1}
"""The ``--batch-*`` options' values when not given (None in the parsed arguments, so that giving one without
``--batch`` is an error instead of silently doing nothing)."""
MIN_TABLE_TOKENS = 2
"""The fewest ``--max-new-tokens`` the method tables take: the first new token comes from the prefill, so only a
second one is written by a decode step, which acceptance, tokens per call and the speedups measure (as
:func:`lab.arena.run_arena` requires)."""
TABLE_DEFAULTS = {"n_draft": 4, "lookup_n_draft": 5}
"""``--n-draft`` and ``--lookup-n-draft`` when not given (None when parsed, so that giving one where it does not
apply, with ``--batch`` or for drafters that set their own draft, is an error instead of doing nothing)."""


def run(args) -> int:
    """``python -m lab bench``: time every method (:data:`lab.bench.BASE_METHODS` and
    :data:`lab.bench.EXTRA_METHODS`; with a hub pair the drafters it cannot have,
    :func:`lab.registry.drafter_problem`, are left out and named) on the first ``args.prompts`` held-out prompts and
    on their copy-heavy versions, and print the two tables (or JSON with ``args.json``). ``args`` comes from
    :func:`lab.cli.build_parser` (``pair``, ``prompts``, ``max_new_tokens``, ``n_draft``, ``json``). Returns the
    exit status: 0, or 1 if a method's greedy tokens differed from lab autoregressive decoding.

    Raises :class:`lab.cli.OptionError` naming ``--prompts`` for more prompts than are bundled (before the pair
    loads), ``--max-new-tokens`` below :data:`MIN_TABLE_TOKENS` (before the pair loads) or when the longest prompt
    plus the new tokens exceeds the target's context, ``--lookup-n-draft`` given while ``--drafter`` leaves prompt
    lookup out, and ``--pair`` for a pair without a draft model when a row drafts with it (every bench but
    ``--drafter`` without ``model``; after the pair loads, before any timing); :func:`lab.cli.main` prints each as
    one line."""
    from lab.bench import EXTRA_METHODS, format_table, run_bench
    from lab.models import load_pair
    from lab.prompts import context_problem, copy_heavy_prompts, held_out_prompts

    drafters = selected_drafters(args)
    refuse_untrained("--drafter", drafters or (), args.pair)
    batch_given, table_given = _given(args, BATCH_DEFAULTS), _given(args, TABLE_DEFAULTS)
    if batch_given and not getattr(args, "batch", False):
        raise OptionError(batch_given[0], "applies only with --batch (goodput against batch size); add --batch, or "
                                          f"leave {batch_given[0]} out for the method tables")
    if getattr(args, "batch", False):
        if drafters:
            raise OptionError("--drafter", "selects the drafters of the method tables; with --batch choose the "
                                           "drafter with --batch-drafter")
        if table_given:
            raise OptionError(table_given[0], "applies to the method tables; with --batch give the draft lengths "
                                              "with --batch-n")
        return _run_batch(args)
    if "--n-draft" in table_given and drafters and all(name in OWN_DRAFT or name == "ngram" for name in drafters):
        raise OptionError("--n-draft", f"does not apply to {', '.join(drafters)}: prompt lookup drafts "
                                       "--lookup-n-draft tokens, and Lookahead, Medusa, suffix decoding and the MTP "
                                       "heads set their own draft; leave --n-draft out")
    if "--lookup-n-draft" in table_given and drafters and "ngram" not in drafters:
        raise OptionError("--lookup-n-draft", f"does not apply to {', '.join(drafters)}: only prompt lookup "
                                              "(--drafter ngram) drafts --lookup-n-draft tokens; add ngram or leave "
                                              "--lookup-n-draft out")
    if args.max_new_tokens is not None and args.max_new_tokens < MIN_TABLE_TOKENS:
        raise OptionError("--max-new-tokens", f"must be >= {MIN_TABLE_TOKENS} for the method tables: the first new "
                                              "token comes from the prefill, so only a second one is written by a "
                                              "decode step, which the acceptance rate, tokens per target call and "
                                              f"speedups measure; got {args.max_new_tokens}")
    _fill_defaults(args, TABLE_DEFAULTS)
    args.max_new_tokens = args.max_new_tokens or GOAL_NEW_TOKENS
    if args.pair in CHAT_PAIRS:
        return _run_chat(args, args.prompts or GOAL_PROMPTS)
    args.prompts = args.prompts or PLAIN_PROMPTS
    prompts = held_out_prompts()
    if args.prompts > len(prompts):  # checked before the pair loads
        raise OptionError("--prompts", f"must be at most {len(prompts)} (the held-out prompts bundled), got "
                                       f"{args.prompts}")
    pair = load_pair(args.pair)
    fit_threads_noting_changes()  # a busy machine's spinning threads would time garbage
    chosen = prompts[: args.prompts]
    copy_heavy = copy_heavy_prompts(pair, chosen)
    problem = context_problem(pair, [pair.encode(p) for p in chosen + copy_heavy], args.max_new_tokens)
    if problem:
        raise OptionError("--max-new-tokens", problem)
    # A hub pair has no Medusa heads or EAGLE draft (GPT-2 no Llama layers for an early exit): leave those out
    # and say so, rather than fail after the other methods were timed.
    skipped = {}
    for method, kind in (("lab Medusa", "medusa"), ("lab EAGLE", "eagle"), ("lab early exit", "early-exit")):
        problem = None if drafters else drafter_problem(kind, pair, args.n_draft)
        if problem:
            skipped[method] = problem
    extra = () if drafters else tuple(method for method in EXTRA_METHODS if method not in skipped)
    check_drafters_for(pair, drafters, args.n_draft)
    check_draft_for(pair, drafters)
    results = {
        "held-out": run_bench(pair, chosen, args.max_new_tokens, args.n_draft, extra=extra,
                              lookup_n_draft=args.lookup_n_draft, drafters=drafters),
        "copy-heavy": run_bench(pair, copy_heavy, args.max_new_tokens, args.n_draft, extra=extra,
                                lookup_n_draft=args.lookup_n_draft, drafters=drafters),
    }
    if skipped:
        for result in results.values():
            result["settings"]["skipped"] = skipped
    if args.json:
        print(json.dumps(results, indent=1))
    else:
        print("\n\n".join(format_table(result, label) for label, result in results.items()))
    return 0 if all(result["identical"] for result in results.values()) else 1


def refuse_untrained(flag: str, kinds, pair_name: str) -> None:
    """Raise :class:`OptionError` naming ``flag`` for the first of ``kinds`` whose weights were never trained for the
    pair named ``pair_name`` (:func:`lab.registry.untrained_reason`): before the pair loads, so a hub pair is not
    downloaded only to be refused."""
    for kind in kinds:
        why = untrained_reason(kind, pair_name)
        if why:
            raise OptionError(flag, f"{kind} cannot run with pair {pair_name}: {why}")


def _given(args, defaults: dict) -> list[str]:
    """The flags (``--batch-n``, ...) of the options in ``defaults`` that were given (not None in ``args``)."""
    return ["--" + name.replace("_", "-") for name in defaults if getattr(args, name, None) is not None]


def _fill_defaults(args, defaults: dict) -> None:
    """Set each option of ``defaults`` that was not given to its default."""
    for name, value in defaults.items():
        if getattr(args, name, None) is None:
            setattr(args, name, value)


def selected_drafters(args) -> tuple | None:
    """The drafters ``--drafter`` named (its values are tuples, one per flag given), flattened in order, each once;
    None when the flag was not given (every method is timed)."""
    given = getattr(args, "drafter", None)
    if not given:
        return None
    out = []
    for names in given:
        out += [name for name in names if name not in out]
    return tuple(out)


def check_draft_for(pair, drafters) -> None:
    """Raise :class:`lab.cli.OptionError` naming ``--pair`` when ``pair`` has no draft model (``pair.draft`` is
    None) and a row of the bench ``drafters`` selects (None: every method) drafts with it
    (:func:`lab.bench.needs_draft_model`)."""
    from lab.bench import needs_draft_model

    if getattr(pair, "draft", None) is None and needs_draft_model(drafters=drafters):
        raise OptionError("--pair", f"{pair.name} has no draft model, which lab speculative and transformers' "
                                    "assisted generation draft with; choose a pair with one, or time only drafters "
                                    "that need none (--drafter ngram, lookahead, medusa, eagle, early-exit, ...)")


def check_drafters_for(pair, drafters, n_draft: int) -> None:
    """Raise :class:`lab.cli.OptionError` naming ``--drafter`` when a drafter asked for cannot run with ``pair``
    (:func:`lab.registry.drafter_problem`: weights trained for another pair, none at all, no Llama layers); an
    explicitly named drafter is an error to report, not a row to leave out. Nothing to check for None."""
    for kind in drafters or ():
        problem = drafter_problem(kind, pair, n_draft)
        if problem:
            raise OptionError("--drafter", f"{kind}: {problem}")


def _run_chat(args, count: int) -> int:
    """``python -m lab bench`` on a chat pair (``"smollm2-135m"``), in the fast dtype (``dtype="auto"``): one table
    per kind of request (:data:`lab.prompts.CHAT_TASKS`, the first ``count`` of each), then the target's
    K-token cost curve with the draft model's forward, the EAGLE step and the drafting steps timed in the same
    rotating rounds (:func:`lab.bench.cost_curve`'s ``also``: c compares times taken under the same load), the draft
    model at each N of :data:`lab.bench.SWEEP_N` on the chat requests with its efficiency (measured ÷ predicted
    speedup, the prediction from that N's measured α, c and the cost of a target forward over N + 1 tokens), both
    over whole generations and over decode steps only (prefill excluded, as the prediction is), the cost curve and
    the sweep each inside a :class:`lab.load_meter.LoadMeter` whose note is printed and kept; then the speed goals,
    met or not on this machine, judged on unrounded values (:func:`lab.bench.goal_record`): the trained-drafter goal
    on the chat table's rows alone (one run), the sweep's best N reported beside it; a run smaller than
    :data:`GOAL_PROMPTS` x :data:`GOAL_NEW_TOKENS`, or one timed on a busy machine, keeps the numbers but no verdict
    (:func:`goals_unjudged_reason`, :func:`lab.goals.not_judged`). Returns 1 when outputs differ
    in float32 (in bfloat16 the tables report agreement)."""
    import torch

    from lab.bench import (EAGLE3_TREE, EXTRA_METHODS, FR_SPEC, NO_DECODE_STEP, SAME_RULE, cost_curve, draft_step_ms,
                           eagle_step_ms, format_number, format_table, goal_lines, goal_record, not_judged, run_bench,
                           speedup_with_verify_cost, sweep_n_draft)
    from lab.costs import time_forward
    from lab.drafters.eagle import saved_draft_vocab
    from lab.load_meter import LoadMeter
    from lab.models import load_pair
    from lab.prompts import CHAT_TASKS, chat_prompts, context_problem, encode_prompts

    if count > len(chat_prompts("chat")):
        raise OptionError("--prompts", f"must be at most {len(chat_prompts('chat'))} (the held-out requests per "
                                       f"kind), got {count}")
    pair = load_pair(args.pair, dtype="auto")
    fit_threads_noting_changes()  # a busy machine's spinning threads would time garbage
    n = args.n_draft
    chosen = {kind: chat_prompts(kind)[:count] for kind in CHAT_TASKS}
    problem = context_problem(pair, encode_prompts(pair, [p for ps in chosen.values() for p in ps]),
                              args.max_new_tokens)
    if problem:
        raise OptionError("--max-new-tokens", problem)
    drafters = selected_drafters(args)
    check_draft_for(pair, drafters)
    if drafters:  # only the tables: the cost curve, N sweep and goals need the draft model's and EAGLE's rows
        check_drafters_for(pair, drafters, n)
        results = {kind: run_bench(pair, prompts, args.max_new_tokens, n, lookup_n_draft=args.lookup_n_draft,
                                   drafters=drafters) for kind, prompts in chosen.items()}
        if args.json:
            print(json.dumps(results, indent=1))
        else:
            print("\n\n".join(format_table(result, kind.replace("_", "/")) for kind, result in results.items()))
        return 0 if all(r["identical"] for r in results.values()) or pair.dtype != torch.float32 else 1
    skipped = {method: why for method, kind in (("lab Medusa", "medusa"), ("lab EAGLE", "eagle"),
                                                ("lab early exit", "early-exit"))
               if (why := drafter_problem(kind, pair, args.n_draft))}
    extra = tuple(m for m in EXTRA_METHODS if m not in skipped and m != "lab lookahead")
    fr_vocab = saved_draft_vocab(pair)
    if fr_vocab is not None:  # the draft model with its head cut to the EAGLE draft's vocabulary
        extra += (FR_SPEC,)
    if drafter_problem("eagle3", pair, n) is None:  # EAGLE-3 on its fastest tree: a candidate for the trained goal
        extra += (EAGLE3_TREE,)
    results = {kind: run_bench(pair, prompts, args.max_new_tokens, n, extra=extra, lookup_n_draft=args.lookup_n_draft)
               for kind, prompts in chosen.items()}
    # the draft's forward, the EAGLE step and the drafting steps in the cost curve's rotating rounds: a ratio to the
    # target's forward compares times taken under the same load
    timers = {"draft": lambda: time_forward(pair.draft, context=128)}
    if "lab EAGLE" not in skipped:
        from lab.drafters.eagle import EagleDrafter

        eagle_model = EagleDrafter.from_pretrained(pair).model
        timers["eagle"] = lambda: eagle_step_ms(eagle_model, context=128)
    if FR_SPEC in extra:  # one drafting step with the whole head and with FR-Spec's rows
        from lab.drafters import DraftModelDrafter

        whole, cut = DraftModelDrafter(pair.draft, 1), DraftModelDrafter(pair.draft, 1, draft_vocab=fr_vocab)
        timers["whole"] = lambda: draft_step_ms(whole, context=128)
        timers["fr_spec"] = lambda: draft_step_ms(cut, context=128)
    with LoadMeter() as curve_meter:  # after the tables, which warmed the models up
        curve = cost_curve(pair.target, also=timers)
    draft_ms, eagle_ms = curve.pop("draft"), curve.pop("eagle", None)
    head_ms = {key: curve.pop(key) for key in ("whole", "fr_spec")} if FR_SPEC in extra else None
    c = draft_ms / curve[1]
    c_eagle = None if eagle_ms is None else eagle_ms / curve[1]
    with LoadMeter() as sweep_meter:
        sweep = sweep_n_draft(pair, chosen["chat"], args.max_new_tokens)
    for row in sweep:  # measured ÷ predicted, the prediction from this N's α, c and verification cost
        verify = curve[row["n_draft"] + 1] / curve[1]
        predicted = None if row["alpha"] is None else speedup_with_verify_cost(row["alpha"], row["n_draft"], c,
                                                                                verify)
        decode = row["decode_vs_lab_autoregressive"]
        # the prediction counts decode steps only: decode_efficiency compares like with like, efficiency also
        # charges the prefills (the target's and the draft's) to the speculative run
        row.update(verify_ratio=verify, predicted=predicted,
                   efficiency=None if predicted is None else row["vs_lab_autoregressive"] / predicted,
                   decode_efficiency=None if predicted is None or decode is None else decode / predicted)
    best_n = max(sweep, key=lambda row: row["vs_lab_autoregressive"])
    chat = {row["method"]: row for row in results["chat"]["rows"]}
    edit = {row["method"]: row for row in results["copy_edit"]["rows"]}
    # one run: the chat table's rows (the sweep, a separate run, is reported beside the goal, not judged in it)
    trained = {f"{m}, N = {n}" if m == "lab speculative" else m: chat[m]["vs_lab_autoregressive"]
               for m in ("lab speculative", "lab Medusa", "lab EAGLE", EAGLE3_TREE) if m in chat}
    best = max(trained, key=trained.get)
    # the goal is on alpha (accepted / examined, lab.metrics.alpha_from_steps); the acceptance rate
    # (accepted / drafted) is named beside it, since the tables print that one
    eagle_gain = eagle_rate_gain = None
    eagle_missing = "not measured in this run (no EAGLE draft for this pair)"
    if "lab EAGLE" in chat:
        eagle, spec = chat["lab EAGLE"], chat["lab speculative"]
        if None in (eagle["alpha"], spec["alpha"]):
            eagle_missing = "n/a: ran, but " + " and ".join(
                name for name, row in (("EAGLE", eagle), ("the draft model", spec)) if row["alpha"] is None) \
                + " had no draft examined (no alpha)"
        else:
            eagle_gain = eagle["alpha"] - spec["alpha"]
        if None not in (eagle["acceptance_rate"], spec["acceptance_rate"]):
            eagle_rate_gain = eagle["acceptance_rate"] - spec["acceptance_rate"]
    efficiency_missing = (f"n/a: ran, but no draft was examined at N = {best_n['n_draft']} (no alpha to predict from)"
                          if best_n["alpha"] is None else "n/a: ran, but no decode step was run (nothing to time)")
    goals = [goal_record(f"best trained drafter ({best}) x autoregressive on chat requests", trained[best], 2.0),
             goal_record("prompt lookup x autoregressive on copy/edit requests",
                         edit.get("lab prompt lookup", {}).get("vs_lab_autoregressive"), 2.5),
             goal_record("lab speculative x transformers assisted generation (same draft), chat",
                         chat["lab speculative"]["vs_hf_counterpart"], 1.2),
             goal_record("the same with the draft's LM head cut to the EAGLE draft's vocabulary (FR-Spec; same "
                         "weights; transformers' assistant keeps its whole head), chat",
                         chat.get(FR_SPEC, {}).get("vs_hf_counterpart"), 1.2,
                         missing="not measured in this run (the pair's EAGLE draft has no draft vocabulary)"),
             goal_record("lab prompt lookup x transformers prompt lookup, copy/edit",
                         edit.get("lab prompt lookup", {}).get("vs_hf_counterpart"), 1.0),
             goal_record("the same with transformers' lookup rule (n-grams <= 2, earliest occurrence), copy/edit",
                         edit.get(SAME_RULE, {}).get("vs_hf_counterpart"), 1.0),
             goal_record(f"draft-model decode-only efficiency (measured speedup over decode steps, prefills "
                         f"excluded as in the prediction, / predicted speedup) at its best N = {best_n['n_draft']}, "
                         "chat", best_n["decode_efficiency"], 0.9, missing=efficiency_missing),
             goal_record("draft model cost ratio c (its forward / the target's, KV cache of 128)", c, 0.1,
                         at_most=True),
             goal_record(f"EAGLE alpha (accepted / examined) minus the draft model's, chat, N = {n} (acceptance "
                         f"rate: {'n/a' if eagle_rate_gain is None else format(eagle_rate_gain, '+.3f')})",
                         eagle_gain, 0.10, missing=eagle_missing),
             goal_record("EAGLE cost ratio c (one drafting step / a target forward)", c_eagle, 0.1, at_most=True,
                         missing="not measured in this run (no EAGLE draft for this pair)")]
    unjudged = goals_unjudged_reason(count, args.max_new_tokens, {
        "the tables": any(result["settings"]["busy"] for result in results.values()),
        "the cost curve": curve_meter.busy, "the N sweep": sweep_meter.busy})
    if unjudged:  # the numbers stay, for information; no verdict is printed from them
        goals = not_judged(goals, unjudged)
    summary = {"cost_curve_ms": curve, "draft_ms": draft_ms, "cost_ratio_c": c, "eagle_step_ms": eagle_ms,
               "eagle_cost_ratio_c": c_eagle, "draft_step_ms": head_ms,
               "cost_curve_load": {**curve_meter.summary(), "note": curve_meter.note()},
               "n_sweep": sweep, "n_sweep_load": {**sweep_meter.summary(), "note": sweep_meter.note()},
               "best_n": best_n["n_draft"], "goals": goals}
    if skipped:
        for result in results.values():
            result["settings"]["skipped"] = skipped
    if args.json:
        print(json.dumps({**results, "summary": summary}, indent=1))
    else:
        print("\n\n".join(format_table(result, kind.replace("_", "/")) for kind, result in results.items()))
        base = curve[1]
        print(f"\ntarget forward over K new tokens (KV cache of 128), relative to K = 1 ({base:.1f} ms): "
              + ", ".join(f"K = {k}: {ms / base:.2f}" for k, ms in curve.items()))
        print(f"draft model forward: {draft_ms:.2f} ms, c = {c:.3f}"
              + ("" if eagle_ms is None else f"; EAGLE drafting step: {eagle_ms:.2f} ms, c = {c_eagle:.3f}"))
        if head_ms is not None:
            print(f"a draft-model drafting step (DraftModelDrafter.next_logits, KV cache of 128): whole head "
                  f"{head_ms['whole']:.2f} ms, FR-Spec head ({len(fr_vocab):,} rows) "
                  f"{head_ms['fr_spec']:.2f} ms")
        print("the target's curve and these steps, timed in the same rotating rounds: " + curve_meter.note())
        print("\nthe draft model at each N on the chat requests (greedy, interleaved with autoregressive; decode "
              "only: prefills excluded, as in the prediction):\n\n"
              "| N | tokens/s | × lab AR | × lab AR, decode only | acceptance rate | α (accepted ÷ examined) | "
              "tokens per target call | verify cost (K = N + 1) | predicted | efficiency | decode-only efficiency "
              "|\n|---|---|---|---|---|---|---|---|---|---|---|")
        for row in sweep:
            print(f"| {row['n_draft']} | {row['tokens_per_second']:.1f} | {row['vs_lab_autoregressive']:.2f} | "
                  f"{format_number(row['decode_vs_lab_autoregressive'], 2, NO_DECODE_STEP)} | "
                  f"{format_number(row['acceptance_rate'], 3)} | {format_number(row['alpha'], 3)} | "
                  f"{format_number(row['tokens_per_target_call'], 3, NO_DECODE_STEP)} | {row['verify_ratio']:.3f} | "
                  f"{format_number(row['predicted'], 3)} | {format_number(row['efficiency'], 3)} | "
                  f"{format_number(row['decode_efficiency'], 3)} |")
        print("\n" + sweep_meter.note())
        print("\ngoals (issue 21; each ratio within one interleaved run):\n" + goal_lines(summary["goals"]))
        decode = best_n["decode_vs_lab_autoregressive"]
        print(f"- the N sweep's best, a separate run (not judged above): the draft model at N = {best_n['n_draft']}, "
              f"{best_n['vs_lab_autoregressive']:.2f}x autoregressive on chat requests ("
              + (NO_DECODE_STEP if decode is None else f"{decode:.2f}x over decode steps") + ")")
    same = all(r["identical"] for r in results.values())
    return 0 if same or pair.dtype != torch.float32 else 1


def _run_batch(args) -> int:
    """``python -m lab bench --batch``: :func:`lab.goodput.measure_goodput` on the pair (a chat pair in its fast
    dtype, on its held-out requests of the ``--batch-task`` kind, or of every kind interleaved: chat, code,
    structured, copy/edit, chat, ...; the Shakespeare pair in float32 on its held-out passages), printed by
    :func:`lab.goodput.format_goodput` (or as
    JSON with ``--json``). ``--prompts`` caps the distinct prompts (default: all; a queue of ``--batch-requests``
    larger than that repeats them). Returns 0. Raises :class:`lab.cli.OptionError` naming ``--batch-drafter`` for
    a drafter the pair cannot have, ``--prompts`` above the prompts bundled, ``--max-new-tokens`` past the
    target's context."""
    from lab.goodput import format_goodput, measure_goodput
    from lab.models import load_pair
    from lab.prompts import CHAT_TASKS, chat_prompts, context_problem, encode_prompts, held_out_prompts

    refuse_untrained("--batch-drafter", [args.batch_drafter] if args.batch_drafter else [], args.pair)
    if getattr(args, "batch_n", None) is None and (args.batch_drafter or "") in OWN_DRAFT:
        args.batch_n = (0, 1)  # N does not apply: one speculative column beside autoregressive decoding
    _fill_defaults(args, BATCH_DEFAULTS)
    chat = args.pair in CHAT_PAIRS
    if chat:
        kinds = CHAT_TASKS if args.batch_task == "all" else (args.batch_task,)
        per_kind = [chat_prompts(kind) for kind in kinds]
        prompts = [kind[i] for i in range(max(map(len, per_kind))) for kind in per_kind if i < len(kind)]
    else:
        prompts = held_out_prompts()
    if args.prompts is not None and args.prompts > len(prompts):
        raise OptionError("--prompts", f"must be at most {len(prompts)} (the prompts bundled), got {args.prompts}")
    prompts = prompts[: args.prompts or len(prompts)]
    max_new_tokens = args.max_new_tokens or BATCH_MAX_NEW_TOKENS
    if 0 not in args.batch_n or not any(args.batch_n):
        raise OptionError("--batch-n", "must include 0 (autoregressive decoding), the baseline every goodput is "
                          "compared with and the crossover is found against, and an N > 0 to compare with it; got "
                          f"{','.join(map(str, args.batch_n))}")
    if args.batch_drafter in OWN_DRAFT and set(args.batch_n) != {0, 1}:
        raise OptionError("--batch-n", f"{args.batch_drafter} sets its own draft "
                          f"({own_draft_reason(args.batch_drafter)}), so N does not apply: give 0,1 (off and on) or "
                          f"leave --batch-n out; got {','.join(map(str, args.batch_n))}")
    from lab.models import pick_device

    most = MAX_BATCH["cuda" if pick_device(None).type == "cuda" else "cpu"]
    if max(args.batch_sizes) > most:
        raise OptionError("--batch-sizes", f"must each be at most {most} on this machine (larger batches run out of "
                          f"memory or take minutes on a CPU), got {max(args.batch_sizes)}")
    if args.batch_requests is not None and args.batch_requests < max(args.batch_sizes):
        raise OptionError("--batch-requests", f"must be at least the largest --batch-sizes, {max(args.batch_sizes)} "
                          f"(a smaller queue never fills that batch), got {args.batch_requests}")
    if args.batch_requests is not None and args.batch_requests > 8 * most:
        raise OptionError("--batch-requests", f"must be at most {8 * most} on this machine (8 x the largest batch "
                          f"size it allows), got {args.batch_requests}")
    pair = load_pair(args.pair, dtype="auto") if chat else load_pair(args.pair)
    fit_threads_noting_changes()  # a busy machine's spinning threads would time garbage
    if any(args.batch_n):
        problem = drafter_problem(args.batch_drafter, pair, max(args.batch_n))
        if problem is None and args.batch_drafter == "model" and pair.draft is None:
            problem = "the pair has no draft model"
        if problem:
            raise OptionError("--batch-drafter", problem)
    encoded = encode_prompts(pair, prompts)
    problem = context_problem(pair, encoded, max_new_tokens)
    if problem:
        raise OptionError("--max-new-tokens", problem)
    result = measure_goodput(pair, encoded, batch_sizes=args.batch_sizes, n_values=args.batch_n,
                             drafter=args.batch_drafter, max_new_tokens=max_new_tokens, rounds=args.rounds,
                             requests=args.batch_requests)
    result["settings"]["task"] = args.batch_task if chat else "held-out passages"
    if args.json:
        result = {**result, "best": {str(b): n for b, n in result["best"].items()}}
        print(json.dumps(result, indent=1))
    else:
        print(format_goodput(result))
    return 0
