"""Side-by-side timing: lab autoregressive, lab speculative, transformers ``generate`` and transformers assisted
generation (``generate(assistant_model=…)``), on the same pair, prompts and settings, in one run; optionally also
lab prompt lookup (vs transformers' ``prompt_lookup_num_tokens``) and lab Lookahead decoding (lessons 08–09).

Greedy decoding, so every method must produce identical tokens; the table says whether they did. Each method runs
once on a short warm-up, then once per prompt; tokens/s = new tokens / total wall time (prefill included). For a
fair comparison transformers' assistant drafts the same fixed N per step as ours (``num_assistant_tokens_schedule =
"constant"``) instead of its adaptive default. ``python -m lab bench`` prints two tables: held-out prose prompts,
and copy-heavy prompts (:func:`copy_heavy_prompts`), where prompt lookup is meant to reach 2× autoregressive.
Speed goals live here, never in timed tests.
"""
from __future__ import annotations

import json
import time

import torch

__all__ = ["run_bench", "format_table", "main", "copy_heavy_prompts", "edit_prompts", "record_prompts",
           "BASE_METHODS", "EXTRA_METHODS"]

BASE_METHODS = ("lab autoregressive", "lab speculative", "HF generate", "HF assisted")
EXTRA_METHODS = ("lab prompt lookup", "HF prompt lookup", "lab lookahead")


def _sync(device) -> None:
    if torch.device(device).type == "cuda":
        torch.cuda.synchronize()


def run_bench(pair, prompts: list[str], max_new_tokens: int = 128, n_draft: int = 4, extra=()) -> dict:
    """Time the four base methods (plus any of :data:`EXTRA_METHODS` named in ``extra``) on ``prompts``.

    Returns {"rows": [...], "identical": bool, "mismatched": [...], "settings": {...}}. Each row: method, tokens
    (total new), seconds, tokens_per_second, and for lab drafters the acceptance rate and tokens per target call.
    Ratios are against lab autoregressive and against the transformers counterpart (HF assisted for lab
    speculative, HF prompt lookup for lab prompt lookup). ``n_draft`` is the draft model's N; prompt lookup and
    Lookahead use their drafters' defaults (``PromptLookupDrafter()``: n-grams of up to 3 tokens, 5 drafted tokens,
    and transformers' ``prompt_lookup_num_tokens=5``; ``LookaheadDrafter()``). Raises ``ValueError`` for an unknown
    method.
    """
    from lab.decode import generate
    from lab.drafters import DraftModelDrafter, LookaheadDrafter, PromptLookupDrafter

    unknown = [name for name in extra if name not in EXTRA_METHODS]
    if unknown:
        raise ValueError(f"extra must name methods from {EXTRA_METHODS}, got {unknown}")

    target, draft, eos = pair.target, pair.draft, pair.eos_token_id
    assistant_config = draft.generation_config
    assistant_config.num_assistant_tokens = n_draft
    assistant_config.num_assistant_tokens_schedule = "constant"
    assistant_config.assistant_confidence_threshold = 0.0

    def hf(ids, assistant=None, lookup=None):
        x = torch.tensor([ids], device=pair.device)
        more = {"prompt_lookup_num_tokens": lookup} if lookup else {}
        out = target.generate(x, attention_mask=torch.ones_like(x), max_new_tokens=max_new_tokens, do_sample=False,
                              eos_token_id=eos, pad_token_id=eos, assistant_model=assistant, **more)
        return {"tokens": out[0, len(ids):].tolist()}

    def lab_run(ids, make_drafter):
        gen = generate(target, ids, drafter=make_drafter(), max_new_tokens=max_new_tokens, eos_token_id=eos)
        return {"tokens": gen.tokens, "stats": gen.stats}

    methods = {
        "lab autoregressive": lambda ids: lab_run(ids, lambda: None),
        "lab speculative": lambda ids: lab_run(ids, lambda: DraftModelDrafter(draft, n_draft)),
        "HF generate": lambda ids: hf(ids),
        "HF assisted": lambda ids: hf(ids, assistant=draft),
        "lab prompt lookup": lambda ids: lab_run(ids, PromptLookupDrafter),
        "HF prompt lookup": lambda ids: hf(ids, lookup=PromptLookupDrafter().n_draft),
        "lab lookahead": lambda ids: lab_run(ids, LookaheadDrafter),
    }
    methods = {name: fn for name, fn in methods.items() if name in BASE_METHODS or name in extra}
    encoded = [pair.encode(p) for p in prompts]
    results, outputs = {}, {}
    for name, fn in methods.items():
        fn(encoded[0][:16])  # warm-up: first-call allocations, lazy imports
        total_tokens, seconds, accepted, drafted, calls = 0, 0.0, 0, 0, 0
        outputs[name] = []
        for ids in encoded:
            _sync(pair.device)
            t0 = time.perf_counter()
            out = fn(ids)
            _sync(pair.device)
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
    return {"rows": list(results.values()), "identical": identical, "mismatched": mismatched, "settings": settings}


def format_table(result: dict, label: str = "held-out") -> str:
    """The bench result as a Markdown table plus a settings line (``label`` names the prompt set)."""
    s = result["settings"]
    lines = [f"pair {s['pair']} on {s['device']} ({s['dtype']}, {s['threads']} threads), {s['prompts']} {label} "
             f"prompts × {s['max_new_tokens']} new tokens, greedy, draft model N = {s['n_draft']}"
             + (f"; {s['extra']}" if s.get("extra") else ""), "",
             "| method | tokens/s | × lab AR | × HF counterpart | acceptance rate | tokens per target call |",
             "|---|---|---|---|---|---|"]
    for row in result["rows"]:
        lines.append(f"| {row['method']} | {row['tokens_per_second']} | {row['vs_lab_autoregressive']} | "
                     f"{row.get('vs_hf_counterpart', '')} | {row.get('acceptance_rate', '')} | "
                     f"{row.get('tokens_per_target_call', '')} |")
    same = "yes" if result["identical"] else f"NO (differ: {', '.join(result['mismatched'])})"
    count = {4: "four", 5: "five", 6: "six", 7: "seven"}.get(len(result["rows"]), str(len(result["rows"])))
    lines += ["", f"all {count} produced identical tokens: {same}"]
    return "\n".join(lines)


def _passage(pair, text: str, max_tokens: int = 48) -> str:
    """The first ``max_tokens`` tokens of ``text``, cut back to a whole line when one fits (as text)."""
    head = pair.decode(pair.encode(text)[:max_tokens])
    return head[: head.rindex("\n") + 1] if "\n" in head[:-1] else head


def copy_heavy_prompts(pair, texts=None, repeats: int = 3, lead_tokens: int = 4) -> list[str]:
    """Prompts whose continuation is a copy: a passage shown ``repeats`` times, then its first ``lead_tokens``.

    ``texts`` default to the held-out prompts; each passage is their first ≤ 48 tokens cut to whole lines, the
    format the target saw in its copy training (see the model card). Greedy decoding continues the passage, so
    prompt lookup can propose long runs that the target accepts (lesson 08)."""
    from lab.models import held_out_prompts

    prompts = []
    for text in texts if texts is not None else held_out_prompts():
        passage = _passage(pair, text)
        lead = pair.decode(pair.encode(passage)[:lead_tokens])
        prompts.append((passage + "\n\n") * repeats + lead)
    return prompts


EDITS = (("my lord", "my liege"), (" you", " thee"), (" your", " thy"), (" the ", " this "), ("sir", "madam"),
         (" and ", " & "))


def edit_prompts(pair, texts=None) -> list[str]:
    """Edit tasks: a passage, then the same passage with small word changes (``EDITS``), then the edited version
    once more from its start — the output should repeat the edited text, which the prompt already holds."""
    from lab.models import held_out_prompts

    prompts = []
    for text in texts if texts is not None else held_out_prompts():
        passage = _passage(pair, text)
        edited = passage
        for old, new in EDITS:
            if old in edited:
                edited = edited.replace(old, new, 1)
        lead = pair.decode(pair.encode(edited)[:4])
        prompts.append(passage + "\n\n" + edited + "\n\n" + edited + "\n\n" + lead)
    return prompts


def record_prompts(pair, texts=None, records: int = 4) -> list[str]:
    """Structured records, one JSON-like line per speech: ``{"speaker": "KING", "words": 5, "line": "…"}``.

    Built from the held-out passages (speaker lines in capitals followed by a speech); each prompt holds up to
    ``records`` records and the opening of the next one, so the continuation is more of the same structure."""
    import json as _json

    from lab.models import held_out_prompts

    texts = texts if texts is not None else held_out_prompts()
    speeches = []
    for text in texts:
        lines = [line.strip() for line in text.split("\n")]
        for i, line in enumerate(lines[:-1]):
            if line and line.rstrip(".").isupper() and lines[i + 1] and not lines[i + 1].rstrip(".").isupper():
                speech = lines[i + 1]
                speeches.append({"speaker": line.rstrip("."), "words": len(speech.split()), "line": speech})
    prompts = []
    for start in range(0, max(1, len(speeches) - records), records):
        chunk = speeches[start:start + records + 1]
        if len(chunk) < 3:
            break
        body = "".join(_json.dumps(record) + "\n" for record in chunk[:-1])
        prompts.append(body + '{"speaker": "' + chunk[-1]["speaker"] + '", "words": ')
    return prompts


def main(args) -> int:
    from lab.models import held_out_prompts, load_pair

    pair = load_pair(args.pair)
    prompts = held_out_prompts()
    if args.prompts > len(prompts):
        raise SystemExit(f"--prompts must be at most {len(prompts)} (the held-out prompts bundled)")
    chosen = prompts[: args.prompts]
    results = {
        "held-out": run_bench(pair, chosen, args.max_new_tokens, args.n_draft, extra=EXTRA_METHODS),
        "copy-heavy": run_bench(pair, copy_heavy_prompts(pair, chosen), args.max_new_tokens, args.n_draft,
                                extra=EXTRA_METHODS),
    }
    if args.json:
        print(json.dumps(results, indent=1))
    else:
        print("\n\n".join(format_table(result, label) for label, result in results.items()))
    return 0 if all(result["identical"] for result in results.values()) else 1
