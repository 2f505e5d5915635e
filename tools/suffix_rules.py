"""Suffix decoding by the paper's rule and by vLLM 0.34's: tokens per target call on the conversation requests.

    python tools/suffix_rules.py                     # the 12 multi-turn and 12 agent requests, 48 tokens, float32
    python tools/suffix_rules.py --max-new-tokens 80

Counts, per kind of request (:func:`lab.prompts.conversation_requests`), the decode tokens per target call of prompt
lookup (n-grams <= 3, N = 4: the arena's), of suffix decoding as the paper grows it (:class:`lab.drafters.
SuffixDecodingDrafter`, vLLM's former defaults: a tree of at most the match's length) and as vLLM 0.34's GPU
speculator drafts (:class:`lab.drafters.SuffixMatchDrafter`: the longest match continued for N tokens, N = 8 its
default, and 16), each given the answers a request quotes as the serving engine would hold them
(:func:`lab.prompts.assistant_turns`), and checks that every run wrote the autoregressive tokens. Token counts only:
no clock, so a busy machine does not change the result. The pair card's "Conversations" section quotes it.
"""
from __future__ import annotations

import argparse

from lab.cli.options import positive_int
from lab.decode import generate
from lab.drafters import PromptLookupDrafter, SuffixDecodingDrafter, SuffixMatchDrafter
from lab.models import load_pair
from lab.prompts import CONVERSATION_TASKS, assistant_turns, conversation_requests, encode_prompts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--max-new-tokens", type=positive_int, default=48,
                        help="new tokens per request, >= 1 (default: 48, as the arena)")
    args = parser.parse_args()
    pair = load_pair("smollm2-135m", dtype="float32")

    def quoted(ids):
        return assistant_turns(pair, ids)

    drafters = {"prompt lookup N = 4": lambda: PromptLookupDrafter(3, 4),
                "suffix, paper's rule (f = 1)": lambda: SuffixDecodingDrafter(prompt_outputs=quoted),
                "suffix, vLLM 0.34 (N = 8)": lambda: SuffixMatchDrafter(prompt_outputs=quoted),
                "suffix, vLLM 0.34 (N = 16)": lambda: SuffixMatchDrafter(16, prompt_outputs=quoted)}
    print(f"float32, greedy, {args.max_new_tokens} new tokens per request; decode tokens per target call "
          "(ratio to prompt lookup N = 4)\n")
    print("| requests | " + " | ".join(drafters) + " |\n" + "|---" * (len(drafters) + 1) + "|")
    for kind in CONVERSATION_TASKS:
        encoded = encode_prompts(pair, conversation_requests(kind))
        reference = [generate(pair.target, ids, max_new_tokens=args.max_new_tokens,
                              eos_token_id=pair.eos_token_id).tokens for ids in encoded]
        cells, base = [], None
        for name, make in drafters.items():
            decoded = calls = 0
            for ids, expected in zip(encoded, reference):
                gen = generate(pair.target, ids, drafter=make(), max_new_tokens=args.max_new_tokens,
                               eos_token_id=pair.eos_token_id)
                if gen.tokens != expected:
                    raise SystemExit(f"{name} wrote other tokens than autoregressive decoding on a {kind} request")
                decoded += sum(len(step.emitted) for step in gen.steps if not step.prefill)
                calls += gen.stats["target_calls"]
            per_call = decoded / calls
            base = base or per_call
            cells.append(f"{per_call:.2f} ({calls} calls; {per_call / base:.2f}x)")
        print(f"| {kind} ({len(encoded)} requests, {decoded} decode tokens) | " + " | ".join(cells) + " |")
    print("\nevery run wrote the autoregressive tokens")


if __name__ == "__main__":
    main()
