"""α of the real pair's draft model, EAGLE and EAGLE-3 chains on every request of every arena kind.

    python tools/alpha_by_kind.py                       # all requests, 48 tokens, N = 4, T = 0 and 1, float32
    python tools/alpha_by_kind.py --temperatures 0 --max-new-tokens 96

The arena (lesson 12, the pair card) times 2 requests of 48 tokens per kind, about 60 examined drafts per cell: too
few to judge a difference of 0.05 in α, the size of issue 23's goal (EAGLE-3 α at least EAGLE's + 0.05) and of half
issue 21's (EAGLE α at least the draft model's + 0.10). This counts α = accepted ÷ examined
(:func:`lab.metrics.alpha_from_steps`, pooled over a kind's requests) on every request of each kind
(:func:`lab.prompts.arena_prompts`: 8 one-turn requests per kind, 12 conversation requests), chains of N = 4 as the
arena drafts them, greedy and sampled (seed ``seed + i`` for request i, as the arena), in float32, and checks that
every greedy run wrote the autoregressive tokens. Token counts only: no clock, so a busy machine does not change the
result. Each α comes with a 95 % interval from a bootstrap over the kind's requests (requests, not drafts, are the
independent units: drafts of one answer share its text). The EAGLE-3 card quotes it.
"""
from __future__ import annotations

import argparse
import random

from lab.cli.options import positive_int
from lab.decode import generate
from lab.metrics import alpha_from_steps
from lab.models import load_pair
from lab.prompts import CHAT_TASKS, CONVERSATION_TASKS, arena_prompts, encode_prompts
from lab.registry import make_drafter

KINDS = CHAT_TASKS + CONVERSATION_TASKS  # the real pair's arena kinds
DRAFTERS = {"draft model": "model", "EAGLE": "eagle", "EAGLE-3": "eagle3"}
DIFFERENCES = (("EAGLE-3", "EAGLE", 0.05), ("EAGLE", "draft model", 0.10))  # (drafter, against, the margin)


def temperatures_option(text: str) -> tuple:
    """argparse type: comma-separated temperatures >= 0."""
    try:
        values = tuple(float(t) for t in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"temperatures must be comma-separated numbers, got {text!r}") from None
    if any(not t >= 0 or t == float("inf") for t in values):
        raise argparse.ArgumentTypeError(f"temperatures must be finite and >= 0, got {text!r}")
    return values


def kinds_option(text: str) -> tuple:
    """argparse type: comma-separated kinds of :data:`KINDS`."""
    kinds = tuple(k.strip() for k in text.split(","))
    unknown = [k for k in kinds if k not in KINDS]
    if unknown:
        raise argparse.ArgumentTypeError(f"unknown kind {unknown[0]!r}; choose from {', '.join(KINDS)}")
    return kinds


def pooled_alpha(counts) -> float | None:
    """α from per-request (accepted, failed trials) pairs, pooled: sum accepted / sum examined; None if none."""
    accepted = sum(a for a, _ in counts)
    examined = accepted + sum(f for _, f in counts)
    return accepted / examined if examined else None


def bootstrap_interval(counts_a, counts_b=None, draws: int = 2000, seed: int = 0) -> tuple:
    """2.5 and 97.5 percentiles of pooled α (or of α_a − α_b on the same resampled requests) over ``draws``
    resamples of the requests with replacement."""
    rng, values = random.Random(seed), []
    for _ in range(draws):
        picks = [rng.randrange(len(counts_a)) for _ in counts_a]
        a = pooled_alpha([counts_a[i] for i in picks])
        b = 0.0 if counts_b is None else pooled_alpha([counts_b[i] for i in picks])
        if a is not None and b is not None:
            values.append(a - b)
    values.sort()
    return values[int(0.025 * len(values))], values[min(len(values) - 1, int(0.975 * len(values)))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--max-new-tokens", type=positive_int, default=48,
                        help="new tokens per request, >= 1 (default: 48, as the arena)")
    parser.add_argument("--n-draft", type=positive_int, default=4, help="chain length N, >= 1 (default: 4)")
    parser.add_argument("--temperatures", type=temperatures_option, default=(0.0, 1.0),
                        help="comma-separated temperatures >= 0 (default: 0,1, as the arena)")
    parser.add_argument("--seed", type=int, default=0, help="request i samples with seed + i (default: 0)")
    parser.add_argument("--kinds", type=kinds_option, default=KINDS,
                        help=f"comma-separated kinds of request ({', '.join(KINDS)}; default: all)")
    args = parser.parse_args()
    pair = load_pair("smollm2-135m", dtype="float32")
    new, eos = args.max_new_tokens, pair.eos_token_id
    print(f"float32, chains of N = {args.n_draft}, {new} new tokens per request; α = accepted ÷ examined, pooled "
          "over a kind's requests [95 % bootstrap interval over requests]\n")
    print("| kind | T | " + " | ".join(DRAFTERS) + " | "
          + " | ".join(f"{a} − {b} (goal ≥ +{m:.2f})" for a, b, m in DIFFERENCES) + " |")
    print("|---" * (2 + len(DRAFTERS) + len(DIFFERENCES)) + "|")
    # one drafter per method, reset by every generate (these keep no state across requests): loading checks the
    # target's weights each time, which is slow
    drafters = {name: make_drafter(kind_name, pair, args.n_draft) for name, kind_name in DRAFTERS.items()}
    for kind in args.kinds:
        encoded = encode_prompts(pair, arena_prompts(pair, kind))
        reference = [generate(pair.target, ids, max_new_tokens=new, eos_token_id=eos).tokens for ids in encoded]
        for temperature in args.temperatures:
            counts = {}
            for name, drafter in drafters.items():
                counts[name] = []
                for i, (ids, expected) in enumerate(zip(encoded, reference)):
                    gen = generate(pair.target, ids, drafter=drafter,
                                   max_new_tokens=new, eos_token_id=eos, temperature=temperature,
                                   seed=args.seed + i)
                    if temperature == 0 and gen.tokens != expected:
                        raise SystemExit(f"{name} wrote other tokens than autoregressive decoding on {kind} "
                                         f"request {i}")
                    steps = [s for s in gen.steps if not s.prefill]
                    alpha = alpha_from_steps(steps)
                    accepted = sum(s.num_accepted for s in steps)
                    failed = sum(1 for s in steps if s.drafted and s.last_kind == "resampled")
                    assert alpha is None or abs(alpha - accepted / (accepted + failed)) < 1e-12
                    counts[name].append((accepted, failed))
            cells = []
            for name in DRAFTERS:
                low, high = bootstrap_interval(counts[name])
                cells.append(f"{pooled_alpha(counts[name]):.3f} [{low:.2f}, {high:.2f}]")
            for a, b, margin in DIFFERENCES:
                diff = pooled_alpha(counts[a]) - pooled_alpha(counts[b])
                low, high = bootstrap_interval(counts[a], counts[b])
                verdict = "met" if diff >= margin else "not met"
                cells.append(f"{diff:+.3f} [{low:+.2f}, {high:+.2f}] {verdict}")
            print(f"| {kind} ({len(encoded)} requests) | {temperature:g} | " + " | ".join(cells) + " |", flush=True)
    if 0 in args.temperatures:  # sampled runs have no autoregressive reference to equal
        print("\nevery greedy run wrote the autoregressive tokens")


if __name__ == "__main__":
    main()
