"""Side-by-side timing: lab autoregressive, lab speculative, transformers ``generate`` and transformers assisted
generation (``generate(assistant_model=…)``), on the same pair, prompts and settings, in one run.

Greedy decoding, so all four must produce identical tokens; the table says whether they did. Each method runs once
on a short warm-up, then once per prompt; tokens/s = new tokens / total wall time (prefill included). For a fair
comparison transformers' assistant drafts the same fixed N per step as ours (``num_assistant_tokens_schedule =
"constant"``) instead of its adaptive default. Speed goals live here, never in timed tests.
"""
from __future__ import annotations

import json
import time

import torch

__all__ = ["run_bench", "format_table", "main"]


def _sync(device) -> None:
    if torch.device(device).type == "cuda":
        torch.cuda.synchronize()


def run_bench(pair, prompts: list[str], max_new_tokens: int = 128, n_draft: int = 4) -> dict:
    """Time the four methods on ``prompts``; returns {"rows": [...], "identical": bool, "settings": {...}}.

    Each row: method, tokens (total new), seconds, tokens_per_second, and for lab speculative the acceptance rate
    and tokens per target call. Ratios are against lab autoregressive and against the transformers counterpart.
    """
    from lab.decode import generate
    from lab.drafters import DraftModelDrafter

    target, draft, eos = pair.target, pair.draft, pair.eos_token_id
    assistant_config = draft.generation_config
    assistant_config.num_assistant_tokens = n_draft
    assistant_config.num_assistant_tokens_schedule = "constant"
    assistant_config.assistant_confidence_threshold = 0.0

    def hf(ids, assistant=None):
        x = torch.tensor([ids], device=pair.device)
        out = target.generate(x, attention_mask=torch.ones_like(x), max_new_tokens=max_new_tokens, do_sample=False,
                              eos_token_id=eos, pad_token_id=eos, assistant_model=assistant)
        return {"tokens": out[0, len(ids):].tolist()}

    def lab_run(ids, spec):
        gen = generate(target, ids, drafter=DraftModelDrafter(draft, n_draft) if spec else None,
                       max_new_tokens=max_new_tokens, eos_token_id=eos)
        return {"tokens": gen.tokens, "stats": gen.stats}

    methods = {
        "lab autoregressive": lambda ids: lab_run(ids, False),
        "lab speculative": lambda ids: lab_run(ids, True),
        "HF generate": lambda ids: hf(ids),
        "HF assisted": lambda ids: hf(ids, assistant=draft),
    }
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
    reference = outputs["lab autoregressive"]
    identical = all(outs == reference for outs in outputs.values())
    mismatched = [name for name, outs in outputs.items() if outs != reference]
    settings = {"pair": pair.name, "device": str(pair.device), "dtype": str(pair.dtype).replace("torch.", ""),
                "prompts": len(prompts), "max_new_tokens": max_new_tokens, "n_draft": n_draft, "greedy": True,
                "threads": torch.get_num_threads()}
    return {"rows": list(results.values()), "identical": identical, "mismatched": mismatched, "settings": settings}


def format_table(result: dict) -> str:
    """The bench result as a Markdown table plus a settings line."""
    s = result["settings"]
    lines = [f"pair {s['pair']} on {s['device']} ({s['dtype']}, {s['threads']} threads), {s['prompts']} held-out "
             f"prompts × {s['max_new_tokens']} new tokens, greedy, N = {s['n_draft']}", "",
             "| method | tokens/s | × lab AR | × HF counterpart | acceptance rate | tokens per target call |",
             "|---|---|---|---|---|---|"]
    for row in result["rows"]:
        lines.append(f"| {row['method']} | {row['tokens_per_second']} | {row['vs_lab_autoregressive']} | "
                     f"{row.get('vs_hf_counterpart', '')} | {row.get('acceptance_rate', '')} | "
                     f"{row.get('tokens_per_target_call', '')} |")
    same = "yes" if result["identical"] else f"NO (differ: {', '.join(result['mismatched'])})"
    lines += ["", f"all four produced identical tokens: {same}"]
    return "\n".join(lines)


def main(args) -> int:
    from lab.models import held_out_prompts, load_pair

    pair = load_pair(args.pair)
    prompts = held_out_prompts()
    if args.prompts > len(prompts):
        raise SystemExit(f"--prompts must be at most {len(prompts)} (the held-out prompts bundled)")
    result = run_bench(pair, prompts[: args.prompts], args.max_new_tokens, args.n_draft)
    print(json.dumps(result, indent=1) if args.json else format_table(result))
    return 0 if result["identical"] else 1
