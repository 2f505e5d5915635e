"""Draft-tree shapes for the real pair's EAGLE-3 draft: chain, static tree, EAGLE-2 dynamic trees, against Medusa.

    python tools/tree_shapes.py                      # 4 held-out requests per kind, 64 tokens, the fast dtype
    python tools/tree_shapes.py --json out.json

Times greedy decoding on the real pair (``load_pair("smollm2-135m", dtype="auto")``: bfloat16 on a CPU with native
bf16 matmul) with the committed EAGLE-3 draft drafting a chain of 4 (the arena's), the static 6-node tree of
:data:`lab.drafters.eagle.DEFAULT_TREE`, and :class:`lab.drafters.DynamicTree` shapes (EAGLE-2, SGLang's
``num_steps, topk, num_draft_tokens``: one with the static tree's budget, one of 3 levels of top-3, and SGLang's
default for a Llama target, 5, 4, 8), beside the Medusa heads' 14-node tree and autoregressive decoding, interleaved
request by request (:func:`lab.bench.time_methods`, the machine's load measured), and counts the answers equal to
autoregressive decoding's (in bfloat16 a near-tie can round the other way when the target scores a block; exactness
is tested in float32). The pair card quotes it; run it with nothing else on the machine.
"""
from __future__ import annotations

import argparse
import json
from datetime import datetime, timezone

import torch

from lab.bench import agreement_with, time_methods
from lab.cli.options import positive_int
from lab.drafters import DynamicTree, Eagle3Drafter, MedusaDrafter
from lab.drafters.eagle import DEFAULT_TREE
from lab.models import load_pair, processor_name
from lab.prompts import CHAT_TASKS, chat_prompts

SHAPES = {
    "EAGLE-3, chain N=4": {"n_draft": 4},
    f"EAGLE-3, static tree ({len(DEFAULT_TREE)} nodes)": {"tree": DEFAULT_TREE},
    "EAGLE-3, dynamic 3, 2, 7": {"tree": DynamicTree(3, 2, 7)},
    "EAGLE-3, dynamic 3, 3, 8": {"tree": DynamicTree(3, 3, 8)},
    "EAGLE-3, dynamic 5, 4, 8 (SGLang's)": {"tree": DynamicTree()},
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--prompts", type=positive_int, default=4, help="held-out requests per kind (default 4)")
    parser.add_argument("--max-new-tokens", type=positive_int, default=64, help="new tokens per request (default 64)")
    parser.add_argument("--json", default=None, metavar="PATH", help="also write the results as JSON here")
    args = parser.parse_args()
    pair = load_pair("smollm2-135m", dtype="auto")
    methods = {"autoregressive": None}
    methods.update({name: (lambda kw=kw: Eagle3Drafter.from_pretrained(pair, **kw)) for name, kw in SHAPES.items()})
    methods["Medusa (14-node tree)"] = lambda: MedusaDrafter.from_pretrained(pair)
    processor = processor_name(pair.device)
    results = {"date": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"), "processor": processor,
               "dtype": str(pair.dtype),
               "threads": torch.get_num_threads(), "prompts": args.prompts, "max_new_tokens": args.max_new_tokens,
               "kinds": {}}
    print(f"{pair.name}, {processor}, {pair.dtype}, {torch.get_num_threads()} threads, greedy, {args.prompts} "
          f"requests per kind x {args.max_new_tokens} tokens\n")
    for kind in CHAT_TASKS:
        run = time_methods(pair, chat_prompts(kind)[:args.prompts], methods, max_new_tokens=args.max_new_tokens)
        reference = [g.tokens for g in run["generations"]["autoregressive"]]
        # bf16: a near-tie may round the other way in a block, so count the answers equal to AR's
        same = {name: agreement_with(reference, [g.tokens for g in gens])["same"]
                for name, gens in run["generations"].items()}
        rows = [dict(row, identical_outputs=same[row["method"]]) for row in run["rows"]]
        results["kinds"][kind] = {"rows": rows, "note": run["note"]}
        print(f"{kind} ({run['note']})")
        print(f"  {'method':38} {'tokens/s':>8} {'speedup':>8} {'tokens/call':>11}  answers equal to AR's")
        for row in rows:
            print(f"  {row['method']:38} {row['tokens_per_second']:8.2f} {row['speedup']:7.2f}x "
                  f"{row.get('tokens_per_target_call') or 1.0:11.2f}  {row['identical_outputs']} of {args.prompts}")
        print()
    if args.json:
        with open(args.json, "w", encoding="utf-8") as out:
            json.dump(results, out, indent=1)
            out.write("\n")


if __name__ == "__main__":
    main()
