"""SpeedupExplorer (widgets/speedup.py, lesson 06): move sliders from Python, assert the state and the figures' data
against lab.metrics (curve, best-N marker, timeline), and the argument checks shared by the constructor and set()."""
from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from lab import metrics
from widgets.speedup import SpeedupExplorer


def close(a, b, tol=1e-9):
    return torch.allclose(torch.as_tensor(a, dtype=torch.float64), torch.as_tensor(b, dtype=torch.float64), atol=tol)


def test_speedup_explorer_defaults_match_lab_metrics():
    ex = SpeedupExplorer(alpha=0.75, n_draft=5, cost_ratio=0.1)
    assert math.isclose(ex.expected_tokens, (1 - 0.75 ** 6) / 0.25)
    assert math.isclose(ex.speedup, (1 - 0.75 ** 6) / 0.25 / 1.5)
    assert ex.best_n == 5
    curve = ex.curve
    assert list(curve.data[0].x) == list(range(1, 17))
    assert close(curve.data[0].y, [metrics.predicted_speedup(0.75, n, 0.1) for n in range(1, 17)])
    assert close(curve.data[1].y, [metrics.expected_tokens_per_call(0.75, n) for n in range(1, 17)])
    assert list(curve.data[2].x) == [5] and list(curve.data[3].x) == [5]
    assert "2.19×" in ex.readout.value and "3.29" in ex.readout.value


def test_moving_sliders_updates_curve_best_n_and_readout():
    ex = SpeedupExplorer(alpha=0.75, n_draft=5, cost_ratio=0.1)
    ex.alpha_slider.value = 0.9
    ex.cost_slider.value = 0.02
    best = metrics.optimal_n_draft(0.9, 0.02)
    assert best == 16 or best > 5
    assert ex.best_n == best
    assert list(ex.curve.data[3].x) == [best]
    assert math.isclose(ex.curve.data[3].y[0], metrics.predicted_speedup(0.9, best, 0.02))
    ex.n_slider.value = 3
    assert list(ex.curve.data[2].x) == [3]
    assert math.isclose(ex.curve.data[2].y[0], metrics.predicted_speedup(0.9, 3, 0.02))
    assert f"{metrics.predicted_speedup(0.9, 3, 0.02):.2f}×" in ex.readout.value
    ex.set(alpha=0.5, cost_ratio=0.5)
    assert ex.best_n == 1 and list(ex.curve.data[3].x) == [1]


def test_timeline_bars_add_up():
    ex = SpeedupExplorer(alpha=0.8, n_draft=4, cost_ratio=0.25, horizon=12)
    target, draft = ex.timeline.data[0], ex.timeline.data[1]
    ar = [x for x, y in zip(target.x, target.y) if y == "autoregressive"]
    spec_target = [b for b, y in zip(target.base, target.y) if y == "speculative"]
    assert len(ar) == 12 and sum(ar) == 12
    # A step is 4 draft passes of 0.25 then one target pass: steps start every 2.0 target passes.
    assert close(spec_target, [1.0, 3.0, 5.0, 7.0, 9.0, 11.0])
    assert len(draft.x) == 24 and close(draft.x, [0.25] * 24)
    assert math.isclose(ex.timeline_tokens()["speculative"], 12 / 2.0 * metrics.expected_tokens_per_call(0.8, 4))
    ex.cost_slider.value = 0.0
    assert len(ex.timeline.data[1].x) == 0  # a free draft takes no time
    assert len([y for y in ex.timeline.data[0].y if y == "speculative"]) == 12


@pytest.mark.parametrize("kwargs", [dict(alpha=1.5), dict(alpha=-0.1), dict(n_draft=0), dict(n_draft=20),
                                    dict(cost_ratio=-0.1), dict(horizon=0)])
def test_speedup_explorer_rejects_bad_input(kwargs):
    with pytest.raises(ValueError):
        SpeedupExplorer(**kwargs)


@pytest.mark.parametrize("kwargs,word", [
    (dict(alpha=1.5), "alpha"), (dict(alpha=-0.1), "alpha"), (dict(alpha=float("nan")), "alpha"),
    (dict(alpha=True), "alpha"), (dict(n_draft=0), "n_draft"), (dict(n_draft=17), "n_draft"),
    (dict(n_draft=2.0), "n_draft"), (dict(cost_ratio=7), "cost_ratio"), (dict(cost_ratio=-0.1), "cost_ratio"),
    (dict(cost_ratio=float("inf")), "cost_ratio"), (dict(alpha=0.9, n_draft=0), "n_draft"),
])
def test_speedup_explorer_set_checks_like_the_constructor_and_changes_nothing(kwargs, word):
    with pytest.raises(ValueError, match=word):
        SpeedupExplorer(**{**dict(alpha=0.75, n_draft=5, cost_ratio=0.1), **kwargs})
    ex = SpeedupExplorer(alpha=0.75, n_draft=5, cost_ratio=0.1)
    readout = ex.readout.value
    with pytest.raises(ValueError, match=word):
        ex.set(**kwargs)
    # nothing was clamped or half-applied: sliders, derived state and the figures are as before
    assert (ex.alpha, ex.n_draft, ex.cost_ratio) == (0.75, 5, 0.1)
    assert ex.readout.value == readout and list(ex.curve.data[2].x) == [5]


def test_speedup_explorer_set_accepts_numpy_values():
    import numpy as np

    ex = SpeedupExplorer()
    ex.set(alpha=np.float64(0.6), n_draft=np.int64(3), cost_ratio=np.float32(0.25))
    assert ex.n_draft == 3 and math.isclose(ex.alpha, 0.6)
    assert math.isclose(ex.speedup, metrics.predicted_speedup(0.6, 3, float(np.float32(0.25))))


# the N slider reaches max_n (the explorer's own range), and set(n_draft=max_n) lands there.
def test_speedup_explorer_slider_covers_one_to_max_n():
    with pytest.raises(ValueError, match=r"max_n must be an integer in \[1, 64\]"):
        SpeedupExplorer(max_n=10**8)  # hung drawing and searching every N
    ex = SpeedupExplorer(max_n=12)
    assert (ex.n_slider.min, ex.n_slider.max) == (1, 12)
    ex.set(n_draft=12)
    assert ex.n_draft == 12 and ex.curve.data[2].x == (12,)


# the best-N star sits on the curve at best N, at the curve's maximum.
def test_best_n_marker_sits_on_the_curve_maximum():
    ex = SpeedupExplorer(alpha=0.75, n_draft=5, cost_ratio=0.1)
    curve = list(ex.curve.data[0].y)
    best = ex.best_n
    assert ex.curve.data[3].x == (best,)
    assert ex.curve.data[3].y == (curve[best - 1],) and curve[best - 1] == max(curve)
    assert ex.curve.data[2].y == (curve[ex.n_draft - 1],)


# no sliver of a draft bar at the horizon from float round-off (N = 6, c = 0.2: 5 full rounds + 5 drafts).
def test_timeline_has_no_zero_width_draft_bar_at_the_horizon():
    ex = SpeedupExplorer(alpha=0.75, n_draft=6, cost_ratio=0.2)
    widths = list(ex.timeline.data[1].x)
    assert len(widths) == 5 * 6 + 5
    assert min(widths) == pytest.approx(0.2)


def test_speedup_explorer_names_its_alpha_per_token_and_fits_n_draft_to_max_n():
    explorer = SpeedupExplorer()
    assert explorer.alpha_slider.description == "per-token acceptance α"
    assert "alpha_from_steps" in SpeedupExplorer.__doc__
    assert explorer.n_draft == 5
    small = SpeedupExplorer(max_n=3)
    assert small.n_draft == 3 and small.n_slider.max == 3
    with pytest.raises(ValueError, match="n_draft"):
        SpeedupExplorer(max_n=3, n_draft=5)  # one the user passed is still checked


def test_speedup_explorer_horizon_rejects_bool():
    with pytest.raises(ValueError, match="horizon"):
        SpeedupExplorer(horizon=True)
    assert SpeedupExplorer(horizon=np.float32(6)).horizon == 6.0
    for bad in (1000.5, 1e5, float("inf"), float("nan"), 0, -3):  # above the cap, a timeline of 10^5 bars took 7 s
        with pytest.raises(ValueError, match=r"horizon must be a number in \(0, 1000\]"):
            SpeedupExplorer(horizon=bad)
    assert SpeedupExplorer(horizon=1000).horizon == 1000.0


def test_when_no_n_beats_autoregressive_decoding_no_best_n_is_named():
    """α = 0.3 with a draft as dear as the target: every N predicts a slowdown, so the readout and the title say
    so instead of naming the least slow N as the best."""
    ex = SpeedupExplorer(alpha=0.3, n_draft=4, cost_ratio=1.0)
    assert "no N beats autoregressive decoding (the least slow: N = 1, 0.65×)" in ex.readout.value
    assert "best N" not in ex.readout.value
    assert ex.curve.layout.title.text == "α = 0.30, c = 1.00: no N beats autoregressive decoding"
    ex = SpeedupExplorer(alpha=0.8, n_draft=4, cost_ratio=0.05)
    assert "best N = <b>" in ex.readout.value
