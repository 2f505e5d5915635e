"""Side-by-side timing: lab autoregressive, lab speculative, transformers ``generate`` and transformers assisted
generation (``generate(assistant_model=…)``), on the same pair, prompts and settings, in one run; optionally also
lab prompt lookup (vs transformers' ``prompt_lookup_num_tokens``), lab Lookahead decoding (lessons 08–09), and the
drafters that read the target itself: Medusa heads, the EAGLE draft and an early-exit draft (lessons 10–11).

Greedy decoding, so every method must produce identical tokens; the table says whether they did. Each method runs
once on a short warm-up, then once per prompt; tokens/s = new tokens / total wall time (prefill included; the
drafter is built, and Medusa / EAGLE weights read, before the clock starts, as in the arena). For a
fair comparison transformers' assistant drafts the same fixed N per step as ours (``num_assistant_tokens_schedule =
"constant"``) instead of its adaptive default. ``python -m lab bench`` (:mod:`lab.cli.bench`) prints two tables:
held-out prose prompts, and copy-heavy prompts (:func:`lab.prompts.copy_heavy_prompts`), where prompt lookup is
meant to reach 2× autoregressive. Speed goals live here, never in timed tests.

The drafter arena, which runs every drafter on several kinds of task, is :mod:`lab.arena`.
"""
from __future__ import annotations

import time

import torch

from lab.prompts import check_prompts, context_problem, encode_prompts
from lab.registry import check_has_draft, make_drafter
from lab.validation import check_int

__all__ = ["run_bench", "format_table", "BASE_METHODS", "EXTRA_METHODS", "synchronize", "threads_label"]

BASE_METHODS = ("lab autoregressive", "lab speculative", "HF generate", "HF assisted")
EXTRA_METHODS = ("lab prompt lookup", "HF prompt lookup", "lab lookahead", "lab Medusa", "lab EAGLE",
                 "lab early exit")


def synchronize(device) -> None:
    """Wait for the queued GPU work on ``device`` (a ``torch.device`` or its name) before reading a clock; nothing
    to wait for on a CPU."""
    if torch.device(device).type == "cuda":
        torch.cuda.synchronize()


def threads_label(count: int) -> str:
    """``"1 thread"`` or ``"N threads"``, for the tables' settings lines."""
    return f"{count} thread" + ("" if count == 1 else "s")


def run_bench(pair, prompts: list[str], max_new_tokens: int = 128, n_draft: int = 4, extra=()) -> dict:
    """Time the four base methods (plus any of :data:`EXTRA_METHODS` named in ``extra``) on ``prompts``.

    Returns {"rows": [...], "identical": bool, "mismatched": [...], "settings": {...}}. Each row: method, tokens
    (total new), seconds, tokens_per_second, and for lab drafters the acceptance rate and tokens per target call.
    Ratios are against lab autoregressive and against the transformers counterpart (HF assisted for lab
    speculative, HF prompt lookup for lab prompt lookup). ``n_draft`` is the draft model's N; prompt lookup and
    Lookahead use their drafters' defaults (``PromptLookupDrafter()``: n-grams of up to 3 tokens, 5 drafted tokens,
    and transformers' ``prompt_lookup_num_tokens=5``; ``LookaheadDrafter()``). ``pair.draft.generation_config``
    is set for transformers' assistant during the run (N, a constant schedule, no confidence threshold) and put
    back afterwards.

    Raises ``TypeError`` when ``prompts`` is not a list (or other sequence) of strings, e.g. a bare string;
    ``ValueError`` for an empty list or a prompt with no tokens, an unknown method, ``max_new_tokens`` or
    ``n_draft`` that is not an integer >= 1, or a prompt that with ``max_new_tokens`` exceeds the target's context.
    """
    prompts = check_prompts(prompts)
    check_has_draft(pair, "run_bench (transformers' assisted generation needs it)")
    max_new_tokens, n_draft = check_int("max_new_tokens", max_new_tokens, 1), check_int("n_draft", n_draft, 1)
    unknown = [name for name in extra if name not in EXTRA_METHODS]
    if unknown:
        raise ValueError(f"extra must name methods from {EXTRA_METHODS}, got {unknown}")
    encoded = encode_prompts(pair, prompts)
    problem = context_problem(pair, encoded, max_new_tokens)
    if problem:
        raise ValueError(f"max_new_tokens: {problem}; shorten the prompts or lower max_new_tokens")

    assistant_config = pair.draft.generation_config
    saved = {key: getattr(assistant_config, key, _MISSING) for key in _ASSISTANT_KEYS}
    assistant_config.num_assistant_tokens = n_draft
    assistant_config.num_assistant_tokens_schedule = "constant"
    assistant_config.assistant_confidence_threshold = 0.0
    try:
        return _run_bench(pair, prompts, encoded, max_new_tokens, n_draft, extra)
    finally:  # the pair is shared (lessons, tests): leave its draft's config as it was
        for key, value in saved.items():
            if value is _MISSING:
                delattr(assistant_config, key)
            else:
                setattr(assistant_config, key, value)


_MISSING = object()
_ASSISTANT_KEYS = ("num_assistant_tokens", "num_assistant_tokens_schedule", "assistant_confidence_threshold")


def _run_bench(pair, prompts, encoded, max_new_tokens, n_draft, extra) -> dict:
    from lab.decode import generate
    from lab.drafters import DraftModelDrafter, LookaheadDrafter, PromptLookupDrafter

    target, draft, eos = pair.target, pair.draft, pair.eos_token_id

    def hf(ids, assistant=None, lookup=None):
        from transformers.utils import logging as hf_logging

        x = torch.tensor([ids], device=pair.device)
        more = {"prompt_lookup_num_tokens": lookup} if lookup else {}
        # transformers' assisted generation calls the assistant's generate with a generation_config and explicit
        # lengths, which its own deprecation check then reports (5.24); our arguments are not the cause.
        verbosity = hf_logging.get_verbosity()
        hf_logging.set_verbosity_error()
        try:
            out = target.generate(x, attention_mask=torch.ones_like(x), max_new_tokens=max_new_tokens,
                                  do_sample=False, eos_token_id=eos, pad_token_id=eos, assistant_model=assistant,
                                  **more)
        finally:
            hf_logging.set_verbosity(verbosity)
        return {"tokens": out[0, len(ids):].tolist()}

    def ours(build):
        """A method whose set-up calls ``build()`` for a fresh drafter (reading Medusa / EAGLE weights from disk), so
        that the timed call that follows decodes only. transformers builds its candidate generator inside
        ``generate``, so the HF rows' set-up (cheap next to a prompt's decoding) stays on the clock."""
        def prepare():
            drafter = build()
            return lambda ids: _lab_run(ids, drafter)
        return prepare

    def _lab_run(ids, drafter):
        gen = generate(target, ids, drafter=drafter, max_new_tokens=max_new_tokens, eos_token_id=eos)
        return {"tokens": gen.tokens, "stats": gen.stats}

    # name -> set-up, which returns the run to time on one prompt's ids; the set-up is never timed.
    lookup_tokens = PromptLookupDrafter().n_draft  # transformers' prompt lookup drafts as many as ours
    methods = {
        "lab autoregressive": ours(lambda: None),
        "lab speculative": ours(lambda: DraftModelDrafter(draft, n_draft)),
        "HF generate": lambda: hf,
        "HF assisted": lambda: lambda ids: hf(ids, assistant=draft),
        "lab prompt lookup": ours(PromptLookupDrafter),
        "HF prompt lookup": lambda: lambda ids: hf(ids, lookup=lookup_tokens),
        "lab lookahead": ours(LookaheadDrafter),
        "lab Medusa": ours(lambda: make_drafter("medusa", pair, n_draft)),
        "lab EAGLE": ours(lambda: make_drafter("eagle", pair, n_draft)),
        "lab early exit": ours(lambda: make_drafter("early-exit", pair, n_draft)),
    }
    methods = {name: fn for name, fn in methods.items() if name in BASE_METHODS or name in extra}
    results, outputs = {}, {}
    for name, prepare in methods.items():
        prepare()(encoded[0][:16])  # warm-up: first-call allocations, lazy imports
        total_tokens, seconds, accepted, drafted, calls = 0, 0.0, 0, 0, 0
        outputs[name] = []
        for ids in encoded:
            run = prepare()  # a fresh drafter per prompt, built before the clock starts
            synchronize(pair.device)
            t0 = time.perf_counter()
            out = run(ids)
            synchronize(pair.device)
            seconds += time.perf_counter() - t0
            total_tokens += len(out["tokens"])
            outputs[name].append(out["tokens"])
            if "stats" in out:
                accepted += out["stats"]["accepted_tokens"]
                drafted += out["stats"]["drafted_tokens"]
                calls += out["stats"]["target_calls"]
        row = {"method": name, "tokens": total_tokens, "seconds": round(seconds, 3),
               "tokens_per_second": round(total_tokens / seconds, 1)}
        if calls and name != "lab autoregressive":
            if drafted:
                row["acceptance_rate"] = round(accepted / drafted, 3)
            row["tokens_per_target_call"] = round(total_tokens / calls, 3)
        results[name] = row
    base = results["lab autoregressive"]["tokens_per_second"]
    for row in results.values():
        row["vs_lab_autoregressive"] = round(row["tokens_per_second"] / base, 2)
    results["lab autoregressive"]["vs_hf_counterpart"] = round(
        base / results["HF generate"]["tokens_per_second"], 2)
    results["lab speculative"]["vs_hf_counterpart"] = round(
        results["lab speculative"]["tokens_per_second"] / results["HF assisted"]["tokens_per_second"], 2)
    if "lab prompt lookup" in results and "HF prompt lookup" in results:
        results["lab prompt lookup"]["vs_hf_counterpart"] = round(
            results["lab prompt lookup"]["tokens_per_second"] / results["HF prompt lookup"]["tokens_per_second"], 2)
    reference = outputs["lab autoregressive"]
    identical = all(outs == reference for outs in outputs.values())
    mismatched = [name for name, outs in outputs.items() if outs != reference]
    settings = {"pair": pair.name, "device": str(pair.device), "dtype": str(pair.dtype).replace("torch.", ""),
                "prompts": len(prompts), "max_new_tokens": max_new_tokens, "n_draft": n_draft, "greedy": True,
                "threads": torch.get_num_threads()}
    if extra:
        lookup, lookahead = PromptLookupDrafter(), LookaheadDrafter()
        settings["extra"] = (f"prompt lookup: n-grams <= {lookup.max_ngram} tokens, {lookup.n_draft} drafted; "
                             f"lookahead: W = {lookahead.window}, n-gram {lookahead.ngram}, pool {lookahead.pool_size}")
        if "lab Medusa" in extra:
            from lab.drafters.medusa import DEFAULT_TREE

            settings["extra"] += f"; Medusa: {len(DEFAULT_TREE)}-node tree"
        if "lab EAGLE" in extra:
            settings["extra"] += f"; EAGLE: chain of N = {n_draft}"
        if "lab early exit" in extra:
            layers = target.config.num_hidden_layers
            settings["extra"] += f"; early exit: {max(1, layers // 2)} of {layers} layers, N = {n_draft}"
    return {"rows": list(results.values()), "identical": identical, "mismatched": mismatched, "settings": settings}


def format_table(result: dict, label: str = "held-out") -> str:
    """The bench result as a Markdown table plus a settings line (``label`` names the prompt set)."""
    s = result["settings"]
    lines = [f"pair {s['pair']} on {s['device']} ({s['dtype']}, {threads_label(s['threads'])}), {s['prompts']} {label} "
             f"prompt{'' if s['prompts'] == 1 else 's'} × {s['max_new_tokens']} new tokens, greedy, "
             f"draft model N = {s['n_draft']}"
             + (f"; {s['extra']}" if s.get("extra") else ""), "",
             "| method | tokens/s | × lab AR | × HF counterpart | acceptance rate | tokens per target call |",
             "|---|---|---|---|---|---|"]
    for row in result["rows"]:
        lines.append(f"| {row['method']} | {row['tokens_per_second']} | {row['vs_lab_autoregressive']} | "
                     f"{row.get('vs_hf_counterpart', '')} | {row.get('acceptance_rate', '')} | "
                     f"{row.get('tokens_per_target_call', '')} |")
    same = "yes" if result["identical"] else f"NO (differ: {', '.join(result['mismatched'])})"
    count = {4: "four", 5: "five", 6: "six", 7: "seven", 8: "eight", 9: "nine", 10: "ten"}.get(
        len(result["rows"]), str(len(result["rows"])))
    lines += ["", f"all {count} produced identical tokens: {same}"]
    if s.get("skipped"):  # python -m lab bench on a hub pair
        lines.append(f"not run with pair {s['pair']}: "
                     + "; ".join(f"{method} ({why})" for method, why in s["skipped"].items()))
    return "\n".join(lines)
