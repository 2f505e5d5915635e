"""Kernel-side behaviour of the theory widgets (lessons 03 and 06): move sliders from Python, assert the state
and the figures' data. Widget cells pass vacuously under nbval, so these tests are what checks them."""
from __future__ import annotations

import math

import pytest
import torch

from lab import metrics, sampling
from widgets.residual import ResidualExplorer
from widgets.speedup import SpeedupExplorer


def close(a, b, tol=1e-9):
    return torch.allclose(torch.as_tensor(a, dtype=torch.float64), torch.as_tensor(b, dtype=torch.float64), atol=tol)


# --- ResidualExplorer -------------------------------------------------------------------------------------

def test_residual_explorer_initial_state_matches_lab():
    target, draft = [0.5, 0.3, 0.2, 0.0], [0.2, 0.5, 0.2, 0.1]
    ex = ResidualExplorer(target, draft, tokens=["a", "b", "c", "d"])
    assert close(ex.target_probs, target) and close(ex.draft_probs, draft)
    assert math.isclose(ex.accept_probability, 0.7)
    assert close(ex.residual, [1.0, 0.0, 0.0, 0.0])
    assert close(ex.residual, sampling.residual_distribution(torch.tensor(target), torch.tensor(draft)), tol=1e-6)
    assert close(ex.emit_probs, target)  # the proof of lesson 03, numerically
    fig = ex.figure
    assert close(fig.data[0].y, target) and close(fig.data[1].y, draft)
    assert close(fig.data[2].y, [0.2, 0.3, 0.2, 0.0])  # accepted mass min(target, draft)
    assert close(fig.data[3].y, [0.3, 0.0, 0.0, 0.0]) and close(fig.data[3].base, [0.2, 0.3, 0.2, 0.0])
    assert close(fig.data[5].y, [1.0, 0.0, 0.0, 0.0])
    assert "0.700" in fig.layout.title.text
    assert list(fig.data[0].x) == ["a", "b", "c", "d"]


def test_moving_a_slider_keeps_the_distribution_normalised_and_updates_figures():
    ex = ResidualExplorer([0.4, 0.3, 0.2, 0.1], [0.25, 0.25, 0.25, 0.25])
    ex.target_sliders[0].value = 0.7
    # The other three keep their proportions 3:2:1 and share the remaining 0.3.
    assert close(ex.target_probs, [0.7, 0.15, 0.1, 0.05])
    assert close([s.value for s in ex.target_sliders], [0.7, 0.15, 0.1, 0.05])
    assert close(ex.figure.data[0].y, [0.7, 0.15, 0.1, 0.05])
    assert math.isclose(ex.accept_probability, 0.25 + 0.15 + 0.1 + 0.05)
    assert close(ex.figure.data[2].y, [0.25, 0.15, 0.1, 0.05])
    assert close(ex.figure.data[5].y, [1.0, 0.0, 0.0, 0.0])  # only token 0 has target > draft
    assert close(ex.emit_probs, ex.target_probs)
    ex.draft_sliders[3].value = 0.55
    assert close(ex.draft_probs, [0.15, 0.15, 0.15, 0.55])
    assert close(ex.figure.data[1].y, [0.15, 0.15, 0.15, 0.55])
    assert close(ex.emit_probs, ex.target_probs)


def test_slider_at_one_then_back_spreads_mass_evenly():
    ex = ResidualExplorer([0.4, 0.3, 0.2, 0.1], [0.25, 0.25, 0.25, 0.25])
    ex.draft_sliders[1].value = 1.0
    assert close(ex.draft_probs, [0.0, 1.0, 0.0, 0.0])
    ex.draft_sliders[1].value = 0.4  # the others had no mass left: share 0.6 equally
    assert close(ex.draft_probs, [0.2, 0.4, 0.2, 0.2])


def test_zero_residual_mass_returns_target_and_full_acceptance():
    ex = ResidualExplorer([0.4, 0.3, 0.2, 0.1], [0.1, 0.2, 0.3, 0.4])
    ex.set_draft([0.4, 0.3, 0.2, 0.1])
    assert math.isclose(ex.accept_probability, 1.0)
    assert close(ex.residual, [0.4, 0.3, 0.2, 0.1])
    assert not any(math.isnan(v) for v in ex.figure.data[5].y)
    assert close(ex.figure.data[3].y, [0.0] * 4)  # nothing is resampled
    assert "1.000" in ex.figure.layout.title.text


def test_set_target_normalises_and_moves_sliders():
    ex = ResidualExplorer([0.5, 0.5], [0.5, 0.5])
    ex.set_target([3, 1])
    assert close(ex.target_probs, [0.75, 0.25])
    assert close([s.value for s in ex.target_sliders], [0.75, 0.25])
    assert math.isclose(ex.accept_probability, 0.75)


def test_token_labels_are_html_escaped():
    ex = ResidualExplorer([0.5, 0.5], [0.1, 0.9], tokens=["<b>", "&"])
    assert "&lt;b&gt;" in ex.summary.value and "<b>," not in ex.summary.value


@pytest.mark.parametrize("target, draft, tokens", [
    ([0.5, 0.5], [0.2, 0.3, 0.5], None),
    ([1.0], [1.0], None),
    ([0.5, -0.5, 1.0], [0.3, 0.3, 0.4], None),
    ([0.0, 0.0], [0.5, 0.5], None),
    ([0.5, 0.5], [0.5, 0.5], ["only one"]),
])
def test_residual_explorer_rejects_bad_input(target, draft, tokens):
    with pytest.raises(ValueError):
        ResidualExplorer(target, draft, tokens=tokens)


# --- SpeedupExplorer --------------------------------------------------------------------------------------

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
