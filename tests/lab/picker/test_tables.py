"""lab.picker.tables: the seed tables hold the seed lessons' numbers."""
from lab import picker


def test_the_seed_tables_hold_the_seed_numbers():
    strategy = {r.method: r.speedup for r in picker.STRATEGY_TABLE}
    assert strategy == {"draft_model": (1.8, 2.3), "medusa": (2.0, 3.0), "eagle": (3.0, 4.0),
                        "lookahead": (1.3, 1.6)}
    workload = {r.task: (r.method, r.n_range, r.speedup) for r in picker.WORKLOAD_TABLE}
    assert workload == {"chat": ("draft_model", (4, 5), (2.0, 2.5)), "code": ("ngram", (3, 5), (1.5, 2.0)),
                        "structured": ("ngram", (5, 7), (2.0, 3.0)),
                        "long_text": ("draft_model", (3, 4), (1.8, 2.2))}
