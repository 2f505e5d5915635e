"""lab.bench by hand: pooling, one arena row, its efficiency factors and the two tables, on synthetic step records
with round numbers, so every value is worked out in the comments; and compare_adaptive's best fixed N."""
import math

import pytest

from lab.bench import (
    EFFICIENCY_FACTORS,
    _baseline_row,
    _cell_row,
    _pool,
    format_arena,
    format_reconciliation,
)
from lab.metrics import expected_tokens_per_call
from lab.trace import Generation, StepRecord


def _ar_generation():
    """8 autoregressive steps: verify 10 ms (target forward 8 ms) each; wall 100 ms of which prefill 10 ms."""
    steps = [StepRecord(index=i, position=i, drafted=[], num_accepted=0, emitted=[1], last_kind="bonus",
                        verify_ms=10.0, target_ms=8.0) for i in range(8)]
    return Generation(tokens=[1] * 8, steps=steps, stats={"wall_ms": 100.0, "prefill_ms": 10.0})


def _spec_generation():
    """2 steps of N = 4 (4 then 2 accepted; 5 + 3 tokens), each draft 4 ms over 4 calls, verify 12 ms of which the
    target's forward 10 ms; wall 40 ms of which prefill 10 ms."""
    steps = [StepRecord(index=0, position=0, drafted=[5, 6, 7, 8], num_accepted=4, emitted=[5, 6, 7, 8, 9],
                        last_kind="bonus", draft_ms=4.0, verify_ms=12.0, draft_calls=4, target_ms=10.0),
             StepRecord(index=1, position=5, drafted=[5, 6, 7, 8], num_accepted=2, emitted=[5, 6, 3],
                        last_kind="resampled", draft_ms=4.0, verify_ms=12.0, draft_calls=4, target_ms=10.0)]
    return Generation(tokens=[0] * 8, steps=steps, stats={"wall_ms": 40.0, "prefill_ms": 10.0})


@pytest.fixture()
def rows():
    base = _pool([(_ar_generation(), None), (_ar_generation(), None)])
    pooled = _pool([(_spec_generation(), None), (_spec_generation(), None)])
    return base, pooled, _cell_row("model", pooled, base, 4, 0.0, True)


def test_pool_sums_then_divides(rows):
    base, pooled, _ = rows
    assert base["decode_ms"] == 180.0 and pooled["decode_ms"] == 60.0      # wall - prefill, summed over prompts
    assert pooled["prefill_ms"] == 20.0 and pooled["steps"] == 4
    assert pooled["acceptance_rate"] == 12 / 16
    assert pooled["alpha"] == 12 / 14      # 12 accepted + 2 steps that stopped at a rejection; not 12 / 16


def test_cell_row_values(rows):
    _, _, row = rows
    alpha = 12 / 14
    e = expected_tokens_per_call(alpha, 4)
    assert row["ar_ms_per_step"] == 10.0
    assert row["cost_ratio"] == pytest.approx(0.1)                    # 1 ms per draft call / 10 ms AR step
    assert row["step_draft_cost"] == pytest.approx(0.4) and row["verify_cost"] == pytest.approx(1.2)
    assert row["measured_speedup"] == pytest.approx(2.5)              # 200 tokens/s over 80 tokens/s
    assert row["decode_speedup"] == pytest.approx(3.0)                # (16 / 60 ms) / (16 / 180 ms): prefill out
    assert row["predicted_speedup"] == pytest.approx(e / 1.4)         # 1 + N c = 1.4
    assert row["predicted_with_verify_cost"] == pytest.approx(e / 1.6)  # N c + v = 0.4 + 1.2
    assert row["target_call_cost"] == pytest.approx(1.25)             # 10 ms vs 8 ms per target forward


def test_efficiency_factors_values(rows):
    _, _, row = rows
    e = expected_tokens_per_call(12 / 14, 4)
    f = row["efficiency_factors"]
    expected = {"acceptance": 4 / e, "drafting": 1.0,
                "target_call": 1.4 / 1.6,      # (1 + d) / (1 + d + Δ), Δ = 10/10 - 8/10 = 0.2 AR steps
                "verification": 1.0,           # (1 + d + Δ) / (d + v) = 1.6 / 1.6
                "loop": (64 / 60) / (160 / 180),
                "prefill": 2.5 / 3.0}
    assert list(f) == list(EFFICIENCY_FACTORS)
    for key, value in expected.items():
        assert f[key] == pytest.approx(value), key
    assert math.prod(f.values()) == pytest.approx(row["efficiency"])


def _arena(rows, threads: int = 2, prompts: int = 2) -> dict:
    """One prose cell (the baseline and the speculative row) as run_arena returns it."""
    base, _, row = rows
    cell = [{"task": "prose", "temperature": 0.0, **_baseline_row(base, 0.0)},
            {"task": "prose", "temperature": 0.0, **row}]
    settings = {"pair": "p", "device": "cpu", "dtype": "float32", "threads": threads, "prompts_per_task": prompts,
                "max_new_tokens": 8, "n_draft": 4, "seed": 0, "repeats": 1, "geometry": "", "load_average": [0, 0]}
    return {"rows": cell, "settings": settings}


def test_format_tables_put_each_number_in_its_column(rows):
    arena = _arena(rows)
    cell = arena["rows"]
    table = format_arena(arena)
    # N | acceptance rate | α | tokens per target call | c
    assert f"| prose | 0 | draft model | 4 | 0.75 | {12 / 14:.2f} | 4.00 | 0.100 |" in table, table
    recon = format_reconciliation({"rows": cell})
    line = next(x for x in recon.splitlines() if x.startswith("| prose"))
    # × acceptance | × drafting | × target call | × verification | × loop | × prefill, then measured ×
    e = expected_tokens_per_call(12 / 14, 4)
    assert f"| {4 / e:.2f} | 1.00 | 0.88 | 1.00 | 1.20 | 0.83 | 2.50 |" in line, line


def test_compare_adaptive_best_fixed_n_is_the_fastest():
    from lab.bench import compare_adaptive
    from lab.models import load_pair

    result = compare_adaptive(load_pair(), n_values=[1, 3], max_new_tokens=12, prompts=1, progress=False)
    fixed = {r["n_draft"]: r["measured_speedup"] for r in result["rows"] if r["drafter"] == "model"}
    assert len(fixed) == 2 and fixed[1] != fixed[3]
    assert result["best_fixed_n"] == max(fixed, key=fixed.get)


def test_table_headings_count_one_prompt_and_one_thread(rows):
    heading = format_arena(_arena(rows, threads=1, prompts=1)).splitlines()[0]
    assert "(float32, 1 thread), 1 prompt per task ×" in heading, heading
    from lab.bench import format_table

    bench = {"rows": [], "identical": True, "mismatched": [],
             "settings": {"pair": "p", "device": "cpu", "dtype": "float32", "threads": 1, "prompts": 1,
                          "max_new_tokens": 8, "n_draft": 4}}
    assert "(float32, 1 thread), 1 copy-heavy prompt ×" in format_table(bench, "copy-heavy").splitlines()[0]
