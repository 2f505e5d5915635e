"""lab.goodput: the best N per batch size, the crossover and vLLM's schedule from a table of goodputs, the prompts of
a batch, the argument checks, and the real pair's committed run (consistent with itself)."""
from __future__ import annotations

import pytest

from lab.goodput import (batch_chunks, batch_prompts, batch_schedule, best_n_per_batch, committed_goodput,
                         crossover_batch, measure_goodput)


def test_schedule_and_crossover_from_a_table():
    rows = [{"batch": b, "n_draft": n, "goodput": g} for b, n, g in
            [(1, 0, 10), (1, 2, 15), (1, 4, 16), (2, 0, 19), (2, 2, 25), (2, 4, 22), (4, 0, 30), (4, 2, 30),
             (8, 0, 50), (8, 2, 40)]]
    best = best_n_per_batch(rows)
    assert best == {1: 4, 2: 2, 4: 0, 8: 0}  # a tie goes to the smaller N
    assert crossover_batch(best) == 4
    assert batch_schedule(best) == [[1, 1, 4], [2, 3, 2], [4, 8, 0]]
    assert batch_schedule(best, max_batch=64) == [[1, 1, 4], [2, 3, 2], [4, 64, 0]]
    assert crossover_batch({1: 2, 2: 2}) is None


def test_batch_prompts_cycle_and_checks(pair):
    assert batch_prompts([[1], [2, 3]], 5) == [[1], [2, 3], [1], [2, 3], [1]]
    with pytest.raises(ValueError, match="batch"):
        batch_prompts([[1]], 0)
    # every batch size decodes the same requests: B = 3 over 4 requests is a batch of 3 and a batch of 1
    assert batch_chunks([[1], [2, 3]], 3, 4) == [[[1], [2, 3], [1]], [[2, 3]]]
    assert batch_chunks([[1], [2, 3]], 1, 2) == [[[1]], [[2, 3]]]
    for b in (1, 2, 3, 4, 5):
        assert sum(batch_chunks([[1], [2], [3]], b, 4), []) == batch_prompts([[1], [2], [3]], 4)
    with pytest.raises(ValueError, match="requests"):
        batch_chunks([[1]], 2, 0)
    with pytest.raises(ValueError, match="drafter must be one of"):
        measure_goodput(pair, [[1, 2]], drafter="oracle")
    with pytest.raises(ValueError, match="n_values"):
        measure_goodput(pair, [[1, 2]], n_values=[-1])
    with pytest.raises(ValueError, match="max_new_tokens"):
        measure_goodput(pair, [[1, 2]], max_new_tokens=10 ** 6)


def test_the_real_pairs_committed_run_is_consistent_with_itself():
    """lab/assets/smollm2-135m/goodput.json (python -m lab bench --batch --json): every batch size x N timed, the
    crossover and the schedule derived from its own rows, the machine named."""
    run = committed_goodput("smollm2-135m")
    if run is None:
        pytest.skip("no committed goodput run for the real pair")
    result = run["goodput"]
    s = result["settings"]
    assert {(r["batch"], r["n_draft"]) for r in result["rows"]} == {(b, n) for b in s["batch_sizes"]
                                                                     for n in s["n_values"]}
    best = best_n_per_batch(result["rows"])
    assert {int(b): n for b, n in result["best"].items()} == best
    assert result["crossover"] == crossover_batch(best)
    assert result["schedule"] == batch_schedule(best)
    assert s["processor"] and s["dtype"] and s["threads"] >= 1 and "busy" in result["load"]
    assert run["command"].startswith("python -m lab bench --batch")
    assert committed_goodput("shakespeare") is None
