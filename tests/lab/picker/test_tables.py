"""lab.picker.tables: the seed tables hold the seed lessons' numbers; the arena numbers come from the committed
run."""
import pytest

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


def test_the_arena_numbers_come_from_the_committed_file_and_a_missing_cell_is_named(tmp_path, monkeypatch):
    """lab.picker.tables reads the committed arena at import; a file without a cell the picker quotes is refused
    with the file and the cell named (not a bare KeyError)."""
    import json

    import lab.picker.tables as tables

    run = json.loads(tables.ARENA_FILE.read_text())
    rows = {(r["task"], r["temperature"], r["drafter"]): r for r in run["arena"]["rows"]}
    assert tables.ARENA_CHAT_SPEEDUPS[("ngram", 1)] == round(rows[("chat", 1.0, "ngram")]["measured_speedup"], 2)
    suffix_agent = rows[("agent", 0.0, "suffix")]["tokens_per_target_call"]
    assert tables.ARENA_SUFFIX_PER_CALL["agent"][0] == round(suffix_agent, 2)
    run["arena"]["rows"] = [r for r in run["arena"]["rows"] if (r["task"], r["drafter"]) != ("chat", "lookahead")]
    broken = tmp_path / "arena.json"
    broken.write_text(json.dumps(run))
    monkeypatch.setattr(tables, "ARENA_FILE", broken)
    with pytest.raises(ValueError, match=r"arena.json: the picker quotes .*\('chat', 0, 'lookahead'\)"):
        tables._arena_rows()
