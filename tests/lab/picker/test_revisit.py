"""lab.picker.revisit: the thresholds are stated for α, and a "none" is revisited only for what ruled speculation
out."""
from lab import picker
from lab.picker import recommend


def test_thresholds_are_stated_for_alpha_not_the_acceptance_rate():
    rec = recommend("chat", 0.0, True, False)
    first = rec.revisit[0]
    assert first.startswith("α, the per-token acceptance probability, falls below 0.7")
    assert "per_position_acceptance[0]" in first and "alpha_from_steps" in first
    assert 'num_accepted_tokens_per_pos_total{position="0"}' in first
    assert "do not compare the acceptance rate with 0.7" in first
    # Seed lesson 002 states its 70 % for accepted ÷ drafted: the text says so, and that the course applies it to α.
    assert "seed lesson 002" in first and "states for the acceptance rate accepted ÷ drafted" in first
    # The 0.7 is where lesson 06's formula puts the chat row's 2× (N = 4, c = 0.1): α ≈ 0.71.
    from lab.metrics import predicted_speedup

    assert predicted_speedup(0.70, 4, 0.1) < 2.0 < predicted_speedup(0.71, 4, 0.1)
    # The text's conversions at N = 4 (lesson 12: acceptance rate = (α + … + α^N) / N): α 0.7 → 0.44; 70 % → α ≈ 0.86.
    def rate(alpha, n=4):
        return sum(alpha ** i for i in range(1, n + 1)) / n

    assert round(rate(0.7), 2) == 0.44 and rate(0.855) < 0.7 < rate(0.865)
    assert "about 0.44" in picker.__doc__ and "α ≈ 0.86" in picker.__doc__ and "α ≈ 0.86" in first
    eagle = recommend("chat", 0.0, True, True)
    assert any("α (per-token acceptance) at 0.85+" in r for r in eagle.reasons)


def test_a_none_verdict_is_revisited_for_what_ruled_speculation_out():
    """A "none" must not list the speculating methods' items (α below 0.7, very short outputs): nothing is drafted."""
    hot = recommend("chat", 1.5, has_small_same_family_model=True, can_finetune=False)
    assert hot.method == "none" and len(hot.revisit) == 1
    assert hot.revisit[0].startswith("the serving temperature comes down to 1 or below")
    busy = recommend("chat", 0.2, has_small_same_family_model=True, can_finetune=False, latency_bound=False)
    assert busy.method == "none" and busy.revisit[0].startswith("traffic drops to small batches")
    assert any("an EAGLE head at N = 1" in r for r in busy.revisit)
    stuck = recommend("chat", 0.2, has_small_same_family_model=False, can_finetune=False,
                      exclude=("lookahead", "ngram", "eagle"))
    assert stuck.method == "none"
    assert any(r.startswith("a small model of the target's family") for r in stuck.revisit)
    assert any("(eagle, lookahead, ngram)" in r for r in stuck.revisit)
    assert not any("memory" in r for r in stuck.revisit)  # no memory figure given
    # a constraint is listed only when lifting it alone makes a method feasible: here only the exclusions do
    tight = recommend("chat", 0.2, has_small_same_family_model=False, can_finetune=False, memory_headroom_gb=0.1,
                      exclude=("lookahead", "ngram"))
    assert tight.method == "none" and tight.revisit == ["a method you excluded (lookahead, ngram) becomes an option "
                                                        "again"]
    roomy = recommend("chat", 0.2, has_small_same_family_model=True, can_finetune=False, memory_headroom_gb=0.1,
                      exclude=("lookahead", "ngram"))
    assert roomy.method == "none" and any(r.startswith("more accelerator memory") for r in roomy.revisit)
    for rec in (hot, busy, stuck):
        assert not any("0.7" in r or "15 new tokens" in r for r in rec.revisit), rec.revisit
    speculating = recommend("chat", 0.2, has_small_same_family_model=True, can_finetune=False)
    assert speculating.method != "none" and speculating.revisit[0].startswith("α, the per-token acceptance")
