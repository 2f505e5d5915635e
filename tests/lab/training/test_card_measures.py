"""lab.training.card_measures: what a draft's card adds to time_methods' rows (c, per-position acceptance, outputs
equal to autoregressive decoding), on the Shakespeare pair in float32."""
import pytest

from lab.prompts import held_out_prompts


def test_drafter_details_divide_by_the_decode_step_and_count_equal_outputs(pair):
    """add_drafter_details: c against the autoregressive ms per decode step (its prefill left out: the prefill's call
    is not one of target_calls), acceptance per position from the steps, outputs equal to autoregressive (float32)."""
    from lab.bench import time_methods
    from lab.training.card_measures import add_drafter_details
    from lab.drafters import DraftModelDrafter, PromptLookupDrafter
    from lab.metrics import conditional_acceptance, cost_ratio_from_steps, summarize_steps

    result = add_drafter_details(time_methods(pair, held_out_prompts()[:2], {
        "ar": None, "model": lambda: DraftModelDrafter(pair.draft, 2), "lookup": PromptLookupDrafter},
        max_new_tokens=10))
    gens = result["generations"]
    ar_ms = (sum(g.stats["wall_ms"] - g.stats["prefill_ms"] for g in gens["ar"])
             / sum(g.stats["target_calls"] for g in gens["ar"]))
    steps = [s for g in gens["model"] for s in g.steps]
    model, lookup = result["rows"][1:]
    assert model["cost_ratio"] == round(cost_ratio_from_steps(steps, ar_ms), 3)
    assert model["conditional_acceptance"] == [round(a, 3) for a in conditional_acceptance(steps)]
    assert model["per_position_acceptance"] == [round(a, 3) for a in
                                                summarize_steps(steps, 0, 0)["per_position_acceptance"]]
    assert model["identical_outputs"] == lookup["identical_outputs"] == 2
    assert lookup["cost_ratio"] is None  # no draft forward to time
    with pytest.raises(ValueError, match="must be autoregressive"):
        add_drafter_details({"rows": result["rows"][1:], "generations": gens})
