"""GoodputChart (widgets/goodput.py): the traces hold the result's goodput per N over the batch sizes, the ratio view
divides by N = 0 at the same batch size, the crossover is marked, the readout carries vLLM's schedule, and bad
input is named. A made-up result: the widget only draws numbers."""
from __future__ import annotations

import json

import pytest

from lab.goodput import batch_schedule, best_n_per_batch, crossover_batch
from widgets.goodput import GoodputChart

GOODPUT = {(1, 0): 10.0, (1, 2): 16.0, (1, 4): 18.0, (2, 0): 19.0, (2, 2): 24.0, (2, 4): 21.0,
           (4, 0): 36.0, (4, 2): 33.0, (4, 4): 28.0}


def result():
    rows = [{"batch": b, "n_draft": n, "goodput": g, "vs_autoregressive": g / GOODPUT[(b, 0)]}
            for (b, n), g in GOODPUT.items()]
    best = best_n_per_batch(rows)
    return {"rows": rows, "best": best, "crossover": crossover_batch(best), "schedule": batch_schedule(best),
            "settings": {"pair": "fake", "dtype": "float32", "drafter": "model"}}


def test_traces_hold_goodput_per_n_and_the_crossover_is_marked():
    chart = GoodputChart(result())
    assert chart.batches == [1, 2, 4] and chart.n_values == [0, 2, 4]
    assert [t.name for t in chart.figure.data] == ["N = 0 (autoregressive)", "N = 2", "N = 4", "crossover"]
    for trace, n in zip(chart.figure.data, [0, 2, 4]):
        assert list(trace.x) == [1, 2, 4]
        assert list(trace.y) == [GOODPUT[(b, n)] for b in (1, 2, 4)]
    assert chart.figure.data[0].line.dash == "dash"
    crossover = chart.figure.data[3]
    assert list(crossover.x) == [4, 4] and crossover.y[1] > 36  # N = 0 wins from batch 4 on
    assert "stops paying at batch size 4" in chart.readout.value
    setting = chart.readout.value.split("<code>")[1].split("</code>")[0]
    assert json.loads(setting) == {"num_speculative_tokens_per_batch_size": [[1, 1, 4], [2, 3, 2], [4, 4, 0]]}


def test_ratio_view_divides_by_autoregressive_at_the_same_batch():
    chart = GoodputChart(result(), view="× N = 0")
    assert list(chart.figure.data[0].y) == [1.0, 1.0, 1.0]
    assert list(chart.figure.data[1].y) == pytest.approx([1.6, 24 / 19, 33 / 36])
    assert chart.figure.data[3].y[1] == pytest.approx(1.8 * 1.05)  # N = 4 at batch 1, the highest ratio
    chart.toggle.value = "tokens/s"
    assert list(chart.figure.data[1].y) == [16.0, 24.0, 33.0]
    assert chart.series()[4] == [18.0, 21.0, 28.0]


def test_no_crossover_and_bad_input():
    data = result()
    data["rows"] = [r for r in data["rows"] if r["batch"] < 4]
    data["crossover"] = crossover_batch(best_n_per_batch(data["rows"]))
    assert data["crossover"] is None
    chart = GoodputChart(data)
    assert "still paid at batch size 2" in chart.readout.value
    assert list(chart.figure.data[-1].x) == []
    with pytest.raises(ValueError, match="measure_goodput's dict"):
        GoodputChart({"rows": []})
    with pytest.raises(ValueError, match="view must be one of"):
        chart.set_view("speedup")
    no_base = {"rows": [r for r in data["rows"] if r["n_draft"] > 0]}
    with pytest.raises(ValueError, match="needs N = 0"):
        GoodputChart(no_base, view="× N = 0")


def test_the_readout_claims_only_what_the_rows_compare():
    """The crossover comes from the rows, not the result's own key: a NaN N = 0 does not lose to N = 2, a batch size
    with no N = 0 row is not a win for speculation, and a row with a non-integer batch is named."""
    data = result()
    data["crossover"] = None  # a stale or hand-made key is not trusted
    assert "stops paying at batch size 4" in GoodputChart(data).readout.value
    nan = result()
    for r in nan["rows"]:
        if r["batch"] == 4 and r["n_draft"] == 0:
            r["goodput"] = float("nan")
    assert "still paid at batch size 2, the largest compared with N = 0" in GoodputChart(nan).readout.value
    speculative_only = {"rows": [r for r in result()["rows"] if r["n_draft"] > 0]}
    assert "nothing to compare" in GoodputChart(speculative_only).readout.value
    with pytest.raises(ValueError, match="integer batch >= 1 and an integer n_draft >= 0"):
        GoodputChart({"rows": [{"batch": "x", "n_draft": 0, "goodput": 1.0}]})


@pytest.mark.parametrize("row, message", [
    ({"batch": 0, "n_draft": 0, "goodput": 1.0}, "integer batch >= 1"),  # a log axis has no 0
    ({"batch": -1, "n_draft": 0, "goodput": 1.0}, "integer batch >= 1"),
    ({"batch": 1, "n_draft": -2, "goodput": 1.0}, "integer n_draft >= 0"),
    ({"batch": 1, "n_draft": 0, "goodput": "x"}, "goodput that is a finite number >= 0"),
    ({"batch": 1, "n_draft": 0, "goodput": None}, "goodput that is a finite number >= 0"),
    ({"batch": 1, "n_draft": 0, "goodput": -3.0}, "goodput that is a finite number >= 0"),
    ({"batch": 1, "n_draft": 0, "goodput": float("inf")}, "goodput that is a finite number >= 0"),
    ({"batch": 1, "n_draft": 0, "goodput": True}, "goodput that is a finite number >= 0"),
])
def test_a_row_it_cannot_draw_is_named(row, message):
    with pytest.raises(ValueError, match=message):
        GoodputChart({"rows": [row]})


def test_a_nan_cell_leaves_a_gap_and_the_crossover_line_its_height():
    """max() over the drawn values kept a NaN that came first, and the crossover line was drawn to NaN."""
    import math

    data = {"rows": [{"batch": 1, "n_draft": 0, "goodput": float("nan")}, {"batch": 1, "n_draft": 2, "goodput": 5.0},
                     {"batch": 2, "n_draft": 0, "goodput": 100.0}, {"batch": 2, "n_draft": 2, "goodput": 50.0}]}
    chart = GoodputChart(data)
    assert chart.crossover == 2 and math.isnan(chart.series()[0][0])
    assert tuple(chart.figure.data[-1].y) == (0, 105.0)


def test_a_zero_autoregressive_goodput_gives_no_ratio():
    """The ratio view divides by N = 0's goodput: where that is 0 the cell is not drawn (it raised
    ZeroDivisionError)."""
    data = {"rows": [{"batch": 1, "n_draft": 0, "goodput": 0.0}, {"batch": 1, "n_draft": 2, "goodput": 5.0},
                     {"batch": 2, "n_draft": 0, "goodput": 4.0}, {"batch": 2, "n_draft": 2, "goodput": 6.0}]}
    chart = GoodputChart(data, view="× N = 0")
    assert chart.series() == {0: [None, 1.0], 2: [None, 1.5]}
