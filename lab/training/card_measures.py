"""What a draft's model card reports beside the timing of :func:`lab.bench.time_methods`, from the same runs: the cost
ratio c, the acceptance of each draft position (of all steps that drafted it, and given the earlier ones accepted)
and how many answers equal autoregressive decoding's. The EAGLE-3 draft's and the MTP heads' cards use it
(:mod:`lab.training.chat_eagle3`, :mod:`lab.training.chat_mtp`).
"""
from __future__ import annotations

__all__ = ["add_drafter_details"]


def add_drafter_details(result: dict) -> dict:
    """Add to each drafter row of a :func:`lab.bench.time_methods` result (its first method autoregressive decoding)
    what a drafter's card reports beside the timing, from the same runs: ``cost_ratio`` (:func:`lab.metrics
    .cost_ratio_from_steps` against the first method's mean ms per decode step, its prefill left out; to 0.001; None
    when the drafter made no draft forward, as prompt lookup makes none), ``conditional_acceptance`` (per chain
    position, the share accepted among steps with every earlier draft accepted, :func:`lab.metrics
    .conditional_acceptance`; to 0.001, None where no step reached it), ``per_position_acceptance`` (per position,
    the share of the steps that drafted that far which accepted it, :func:`lab.metrics.summarize_steps`; to 0.001)
    and ``identical_outputs`` (how many prompts it answered token for token as the first method did: all in float32,
    in bfloat16 a near-tie can round the other way when the target scores a block). Returns ``result``, changed in
    place. Raises ``ValueError`` when the first method is not autoregressive (None) or made no decode step."""
    from lab.metrics import conditional_acceptance, cost_ratio_from_steps, summarize_steps

    first = result["rows"][0]["method"]
    if "alpha" in result["rows"][0]:
        raise ValueError(f"result: its first method, {first!r}, must be autoregressive decoding (None) to compare with")
    base = result["generations"][first]
    calls = sum(g.stats["target_calls"] for g in base)  # decode steps: the prefill's call is not counted
    if not calls:
        raise ValueError(f"result: the first method, {first!r}, made no decode step")
    ar_ms = sum(g.stats["wall_ms"] - g.stats["prefill_ms"] for g in base) / calls
    for row in result["rows"][1:]:
        gens = result["generations"][row["method"]]
        steps = [s for g in gens for s in g.steps]
        drafted = sum(s.draft_calls for s in steps)
        row["cost_ratio"] = round(cost_ratio_from_steps(steps, ar_ms), 3) if drafted else None
        row["conditional_acceptance"] = [None if a is None else round(a, 3) for a in conditional_acceptance(steps)]
        row["per_position_acceptance"] = [round(a, 3) for a in summarize_steps(steps, 0, 0)["per_position_acceptance"]]
        row["identical_outputs"] = sum(g.tokens == b.tokens for g, b in zip(gens, base))
    return result
