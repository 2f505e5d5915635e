"""lab.picker.tables: the seed tables hold the seed lessons' numbers."""
from lab import picker


def test_the_seed_tables_hold_the_seed_numbers():
    strategy = {r.method: r.speedup for r in picker.STRATEGY_TABLE if r.source.startswith("seed lesson 000")}
    assert strategy == {"draft_model": (1.8, 2.3), "medusa": (2.0, 3.0), "eagle": (3.0, 4.0),
                        "lookahead": (1.3, 1.6)}
    workload = {r.task: (r.method, r.n_range, r.speedup) for r in picker.WORKLOAD_TABLE}
    assert workload == {"chat": ("draft_model", (4, 5), (2.0, 2.5)), "code": ("ngram", (3, 5), (1.5, 2.0)),
                        "structured": ("ngram", (5, 7), (2.0, 3.0)),
                        "long_text": ("draft_model", (3, 4), (1.8, 2.2))}


def test_suffix_decoding_s_row_is_the_course_s_measurement():
    """Suffix decoding is not in the seed tables: its row's range is the committed arena's conversation rows (held to
    lab/assets/smollm2-135m/arena.json by tests/notebooks/test_lesson_claims.py), and it says so."""
    from lab.picker.tables import ARENA_SUFFIX_SPEEDUPS, NEAREST_ROW, STRATEGY_BY_METHOD, TASK_LABELS

    row = STRATEGY_BY_METHOD["suffix"]
    assert row.speedup == (min(ARENA_SUFFIX_SPEEDUPS.values()), max(ARENA_SUFFIX_SPEEDUPS.values()))
    assert row.source.startswith("lesson 12's committed arena") and "multi-turn and agent-loop" in row.source
    assert set(ARENA_SUFFIX_SPEEDUPS) == {(kind, t) for kind in ("multi_turn", "agent") for t in (0, 1)}
    assert "suffix" in picker.METHODS and picker.METHOD_LABELS["suffix"] == "suffix decoding"
    assert "agent" in picker.TASKS and NEAREST_ROW["agent"] == "structured"
    assert "earlier outputs" in TASK_LABELS["agent"]
