"""Which earlier occurrence should prompt lookup continue? Count target calls for both rules, and transformers'.

    python tools/lookup_match_rule.py                  # the bench's copy/edit requests: 3 x 128 tokens, float32
    python tools/lookup_match_rule.py --kinds all --prompts 8 --max-new-tokens 48 --dtype bfloat16   # arena kinds

The course's :func:`lab.drafters.prompt_lookup.ngram_lookup` continues the most recent earlier occurrence of the
matched n-gram; transformers' ``PromptLookupCandidateGenerator`` and vLLM's ``ngram_proposer.py`` the earliest
(``match="earliest"``). This
prints, per kind of request, the tokens per target call of lab prompt lookup with each rule (``max_ngram`` 3, the
bench's 5 drafted tokens) and of transformers' ``generate(prompt_lookup_num_tokens=5)`` (its own n-grams <= 2; target
forwards counted with a hook; its prefill writes the first token, as the lab's first call does), and whether each
run wrote the autoregressive tokens. Token counts only: no clock, so a busy machine does not change the result. The
README's "Measured speed" quotes it ("What the run shows").
"""
from __future__ import annotations

import argparse

import torch

from lab.decode import generate
from lab.drafters import PromptLookupDrafter
from lab.models import load_pair
from lab.cli.options import positive_int
from lab.prompts import CHAT_TASKS, CONVERSATION_TASKS, arena_prompts, encode_prompts


KINDS = CHAT_TASKS + CONVERSATION_TASKS   # the real pair's arena kinds


def kinds_option(text: str) -> tuple:
    """argparse type: comma-separated kinds of :data:`KINDS`, or ``all``."""
    if text == "all":
        return KINDS
    kinds = tuple(k.strip() for k in text.split(","))
    unknown = [k for k in kinds if k not in KINDS]
    if unknown:
        raise argparse.ArgumentTypeError(f"unknown kind {unknown[0]!r}; choose from {', '.join(KINDS)} or 'all'")
    return kinds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kinds", type=kinds_option, default=("copy_edit",),
                        help=f"comma-separated kinds of request ({', '.join(KINDS)}) or 'all' (default: copy_edit)")
    parser.add_argument("--prompts", type=positive_int, default=3,
                        help="requests per kind, >= 1 (default: 3, as the bench)")
    parser.add_argument("--max-new-tokens", type=positive_int, default=128,
                        help="new tokens per request, >= 1 (default: 128, as the bench)")
    parser.add_argument("--dtype", choices=("float32", "bfloat16"), default="float32",
                        help="float32 (default: greedy runs agree with autoregressive decoding exactly) or bfloat16")
    parser.add_argument("--no-transformers", action="store_true", help="skip transformers' prompt lookup")
    args = parser.parse_args()
    pair = load_pair("smollm2-135m", dtype=args.dtype)
    kinds = args.kinds
    target, eos, new = pair.target, pair.eos_token_id, args.max_new_tokens
    forwards = [0]
    target.register_forward_hook(lambda module, inputs, output: forwards.__setitem__(0, forwards[0] + 1))

    def lab_run(ids, drafter):
        run = generate(target, ids, drafter=drafter, max_new_tokens=new, eos_token_id=eos)
        return run.tokens, len(run.steps)

    def hf_run(ids):
        x = torch.tensor([ids], device=pair.device)
        forwards[0] = 0
        out = target.generate(x, attention_mask=torch.ones_like(x), max_new_tokens=new, do_sample=False,
                              eos_token_id=eos, pad_token_id=eos, prompt_lookup_num_tokens=5)
        return out[0, len(ids):].tolist(), forwards[0]   # the prefill writes the first token, as lab's first step

    methods = {"most recent (lab)": lambda ids: lab_run(ids, PromptLookupDrafter(3, 5)),
               "earliest": lambda ids: lab_run(ids, PromptLookupDrafter(3, 5, match="earliest"))}
    if not args.no_transformers:
        methods["transformers"] = hf_run
    plural = "" if args.prompts == 1 else "s"
    print(f"{pair.name}, {args.dtype}, {args.prompts} request{plural} x {new} tokens per kind; tokens per target call")
    for kind in kinds:
        encoded = encode_prompts(pair, arena_prompts(pair, kind))[:args.prompts]
        reference = [lab_run(ids, None)[0] for ids in encoded]
        cells = []
        for name, run in methods.items():
            tokens = calls = 0
            same = True
            for ids, want in zip(encoded, reference):
                out, n = run(ids)
                tokens, calls, same = tokens + len(out), calls + n, same and out == want
            cells.append(f"{name} {tokens / calls:.2f}{'' if same else ' (differs from autoregressive)'}")
        print(f"{kind:11s} " + ", ".join(cells), flush=True)


if __name__ == "__main__":
    main()
