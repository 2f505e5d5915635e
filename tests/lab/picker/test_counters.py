"""lab.picker.counters: vLLM's counters as our stats (PromQL names, and stats_from_vllm_counters against our decode
loop's stats); the step records and counters come from lesson 14's exercise module."""
import math

import numpy as np
import pytest

from lab import picker
from lab.exercises import lesson14 as check
from lab.metrics import summarize_steps


def test_vllm_metric_names_are_the_exported_counters():
    names = {"vllm:spec_decode_num_drafts_total", "vllm:spec_decode_num_draft_tokens_total",
             "vllm:spec_decode_num_accepted_tokens_total", "vllm:spec_decode_num_accepted_tokens_per_pos_total"}
    text = " ".join(picker.VLLM_METRICS.values())
    for name in names:
        assert name in text
    assert set(picker.VLLM_METRICS) == {"acceptance_rate", "tokens_per_target_call", "per_position_acceptance"}


def test_per_position_promql_ignores_the_label_only_its_numerator_has():
    """Prometheus divides two series only when their labels match exactly; the per-position counter has a position
    label and the drafts counter none, so the ratio needs ignoring(position) (without it the result is empty)."""
    assert picker.VLLM_METRICS["per_position_acceptance"] == (
        'rate(vllm:spec_decode_num_accepted_tokens_per_pos_total{position="i"}[5m]) / '
        "ignoring(position) rate(vllm:spec_decode_num_drafts_total[5m])")
    first = picker.recommend("code", 0.0, False, False).revisit[0]
    assert ('rate(…num_accepted_tokens_per_pos_total{position="0"}[5m]) / ignoring(position) '
            "rate(…num_drafts_total[5m])") in first


def test_stats_from_vllm_counters_match_our_decode_loop_stats():
    steps = check.make_steps([4, 0, 2, 4, 1], np.int64(4))  # a NumPy integer is a length too
    counters = check.counters_from_steps(steps)
    assert counters == {"num_drafts": 5, "num_draft_tokens": 20, "num_accepted_tokens": 11,
                        "accepted_per_position": [4, 3, 2, 2]}
    ours = summarize_steps(steps, new_tokens=sum(len(s.emitted) for s in steps), wall_ms=1.0)
    theirs = picker.stats_from_vllm_counters(**counters)
    assert theirs["acceptance_rate"] == pytest.approx(ours["acceptance_rate"])
    assert theirs["tokens_per_target_call"] == pytest.approx(ours["tokens_per_target_call"])
    assert theirs["per_position_acceptance"] == pytest.approx(ours["per_position_acceptance"])
    assert picker.stats_from_vllm_counters(0, 0, 0, []) == {
        "acceptance_rate": None, "tokens_per_target_call": None, "per_position_acceptance": []}
    with pytest.raises(ValueError):
        picker.stats_from_vllm_counters(1, 2, 3, [1, 1])
    with pytest.raises(ValueError):
        picker.stats_from_vllm_counters(-1, 2, 1, [1])


def test_stats_from_vllm_counters_with_varying_draft_lengths():
    steps = check.make_steps([3, 0, 1, 2], [5, 1, 2, 2])
    counters = check.counters_from_steps(steps)
    assert counters == {"num_drafts": 4, "num_draft_tokens": 10, "num_accepted_tokens": 6,
                        "accepted_per_position": [3, 2, 1, 0, 0]}
    stats = picker.stats_from_vllm_counters(**counters)
    assert stats["acceptance_rate"] == pytest.approx(0.6)
    assert stats["tokens_per_target_call"] == pytest.approx(2.5)
    assert stats["per_position_acceptance"] == pytest.approx([0.75, 0.5, 0.25, 0.0, 0.0])
    # Prometheus reports counters as floats: whole ones are accepted.
    from_floats = picker.stats_from_vllm_counters(4.0, 10.0, 6.0, [3.0, 2, 1])
    assert from_floats["acceptance_rate"] == pytest.approx(0.6)
    assert from_floats["per_position_acceptance"] == pytest.approx([0.75, 0.5, 0.25])


@pytest.mark.parametrize("args, words", [
    ((2.5, 4, 2, [1, 1]), ["num_drafts", "whole number >= 0", "2.5"]),
    ((1, 4.5, 2, [1, 1]), ["num_draft_tokens", "whole number"]),
    ((1, 4, math.nan, [1, 1]), ["num_accepted_tokens"]),
    ((1, 4, True, [1]), ["num_accepted_tokens"]),
    ((1, 4, "2", [1, 1]), ["num_accepted_tokens"]),
    ((-1, 2, 1, [1]), ["num_drafts", ">= 0"]),
    ((1, 4, 2, [1, 0.5, 0.5]), ["accepted_per_position[1]", "whole number"]),
    ((1, 4, 2, [1, -1, 2]), ["accepted_per_position[1]"]),
    ((1, 4, 2, 7), ["accepted_per_position", "list"]),
    ((1, 4, 2, "11"), ["accepted_per_position", "list"]),
    ((1, 2, 3, [1, 1, 1]), ["num_accepted_tokens", "cannot exceed num_draft_tokens"]),
    ((3, 2, 0, []), ["num_draft_tokens", "below num_drafts"]),
    ((0, 5, 0, []), ["num_draft_tokens", "must be 0"]),
    ((1, 4, 2, [1] * 6), ["sum to num_accepted_tokens (2)", "got 6"]),  # six positions from one 4-token draft
    ((1, 4, 2, [2]), ["accepted_per_position[0]", "cannot exceed num_drafts"]),
    ((2, 8, 3, [1, 2]), ["must not increase", "[1] = 2 > [0] = 1"]),
    ((2, 8, 5, [2, 1]), ["sum to num_accepted_tokens (5)", "got 3"]),
    ((2, 8, 2, [2, 1]), ["sum to num_accepted_tokens (2)", "got 3"]),
])
def test_stats_from_vllm_counters_rejects_impossible_counters(args, words):
    with pytest.raises(ValueError) as info:
        picker.stats_from_vllm_counters(*args)
    for word in words:
        assert word in str(info.value), (word, str(info.value))
