"""ResidualExplorer (widgets/residual.py, lesson 03): move sliders from Python, assert the state and the figure's
data against lab.sampling; bad input (non-distributions, non-numbers) and labels that reach plotly escaped and
distinct. Widget cells pass vacuously under nbval, so these tests are what checks the widget."""
from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from lab import sampling
from widgets.residual import ResidualExplorer


def close(a, b, tol=1e-9):
    return torch.allclose(torch.as_tensor(a, dtype=torch.float64), torch.as_tensor(b, dtype=torch.float64), atol=tol)


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


def test_residual_explorer_axes_are_categories():
    explorer = ResidualExplorer(target_probs=[0.5, 0.3, 0.2], draft_probs=[0.2, 0.3, 0.5], tokens=["1", "10", "2"])
    axes = [explorer.figure.layout[name] for name in ("xaxis", "xaxis2", "xaxis3")]
    assert [axis.type for axis in axes] == ["category"] * 3
    assert list(explorer.figure.data[0].x) == ["1", "10", "2"]


@pytest.mark.parametrize("target", [[float("inf"), 1.0], [float("nan"), 1.0], [-0.1, 1.1], [0.0, 0.0]])
def test_residual_explorer_rejects_non_distributions(target):
    with pytest.raises(ValueError, match="target_probs"):
        ResidualExplorer(target, [0.5, 0.5])
    ex = ResidualExplorer([0.5, 0.5], [0.5, 0.5])
    with pytest.raises(ValueError, match="draft_probs"):
        ex.set_draft(target)
    assert ex.draft_probs.tolist() == [0.5, 0.5]  # unchanged


@pytest.mark.parametrize("probs", ["ab", [True, False], [None, 1.0], 3])
def test_residual_explorer_rejects_non_numbers(probs):
    with pytest.raises(TypeError, match="target_probs"):
        ResidualExplorer(probs, [0.5, 0.5])


def test_residual_explorer_takes_numpy_and_tensor_input():
    ex = ResidualExplorer(np.array([0.5, 0.5], dtype=np.float32), torch.tensor([0.1, 0.9]))
    assert math.isclose(ex.accept_probability, 0.6, rel_tol=1e-6)
    ex = ResidualExplorer([np.float64(3), np.int64(1)], [1, 1])  # weights, normalised
    assert ex.target_probs.tolist() == [0.75, 0.25]


def test_residual_explorer_labels_are_escaped_and_distinct():
    tokens = ["<b>x</b>", "a", "a", " c", "&amp;"]
    ex = ResidualExplorer([0.2] * 5, [0.1, 0.1, 0.1, 0.35, 0.35], tokens=tokens)
    expected = ["&lt;b&gt;x&lt;/b&gt;", "a #1", "a #2", "\u2423c", "&amp;amp;"]
    assert ex.tokens == tokens and ex.labels == expected
    for trace in ex.figure.data:
        assert list(trace.x) == expected
    assert "<b>x" not in ex.summary.value  # the residual's support, escaped and told apart:
    assert ex.summary.value.endswith("mass on &lt;b&gt;x&lt;/b&gt;, a #1, a #2.")
    # slider text is not HTML: the chart's labels unescaped
    assert [s.description for s in ex.target_sliders] == ["<b>x</b>", "a #1", "a #2", "\u2423c", "&amp;"]
    ints = ResidualExplorer([0.5, 0.5], [0.5, 0.5], tokens=[1, 2])
    assert ints.tokens == ["1", "2"] and list(ints.figure.data[0].x) == ["1", "2"]
    with pytest.raises(TypeError, match="tokens"):
        ResidualExplorer([0.5, 0.5], [0.5, 0.5], tokens="ab")


def test_huge_finite_weights_normalise_instead_of_overflowing():
    """Weights near the float maximum summed to inf and normalised to zeros: "P(accept) = 0.000 = 1 - TV = 1 - 0.500"
    contradicted itself. They are scaled by the largest first."""
    explorer = ResidualExplorer((1e308, 1e308), (1.0, 1.0))
    assert explorer.accept_probability == pytest.approx(1.0)
    assert ResidualExplorer((1e308, 3e307), (1.0, 1.0)).accept_probability == \
        pytest.approx(ResidualExplorer((10.0, 3.0), (1.0, 1.0)).accept_probability)


def test_slider_descriptions_are_the_charts_visible_labels():
    """The sliders used the raw token text: a space or newline token read as a blank description and two equal
    tokens could not be told apart."""
    ex = ResidualExplorer([1, 1, 1, 1, 1], [1, 2, 3, 4, 5], tokens=[" ", "\n", "<b>x</b>", "a", "a"])
    expected = ["\u2423", "\u21b5", "<b>x</b>", "a #3", "a #4"]  # text, not markup: ipywidgets shows it as is
    assert [s.description for s in ex.target_sliders] == expected
    assert [s.description for s in ex.draft_sliders] == expected
    assert not any(s.description_allow_html for s in ex.target_sliders + ex.draft_sliders)
    assert list(ex.figure.data[0].x) == ["\u2423", "\u21b5", "&lt;b&gt;x&lt;/b&gt;", "a #3", "a #4"]


def test_a_nan_slider_is_refused_and_undone():
    """Lesson 03 invites driving the sliders from code: a NaN spread to every slider and the chart."""
    import math

    from widgets.residual import ResidualExplorer

    explorer = ResidualExplorer()
    before = [float(p) for p in explorer.target_probs]
    with pytest.raises(ValueError, match=r"target slider 0 .* must be a finite probability in \[0, 1\], got nan"):
        explorer.target_sliders[0].value = float("nan")
    assert [float(p) for p in explorer.target_probs] == before
    assert all(math.isfinite(s.value) for s in explorer.target_sliders)


def test_a_draft_equal_to_the_target_is_said_to_leave_nothing_to_resample():
    """Draft = target: P(accept) = 1 and the residual is all zeros, so the summary says no rejection happens (it
    described a resample from a residual on t0)."""
    ex = ResidualExplorer()
    ex.set_target([1, 0, 0, 0, 0])
    ex.set_draft([1, 0, 0, 0, 0])
    assert "the draft equals the target, so every drafted token is accepted" in ex.summary.value
    assert "resamples" not in ex.summary.value
    ex.set_draft([0.5, 0.5, 0, 0, 0])
    assert "after a rejection the step resamples from the residual" in ex.summary.value


def test_the_copy_button_makes_the_draft_the_target_and_a_near_match_is_not_called_equal():
    """The sliders rescale each other, so dragging them rarely reaches draft == target (a learner got within 0.01 on
    every token and read "1 − 0.000" beside a resample): the button sets it exactly; a draft a hair off shows its
    TV in scientific notation and says a rejection is rare, not "1 − 0.000"."""
    ex = ResidualExplorer(target_probs=[0.40, 0.25, 0.15, 0.12, 0.08], draft_probs=[0.2, 0.35, 0.25, 0.1, 0.1])
    ex.copy_button.click()
    assert ex.draft_probs.tolist() == pytest.approx(ex.target_probs.tolist(), abs=1e-12)
    assert [s.value for s in ex.draft_sliders] == pytest.approx([s.value for s in ex.target_sliders])
    assert ex.accept_probability == pytest.approx(1.0) and "the draft equals the target" in ex.summary.value
    ex.set_draft([0.4001, 0.2499, 0.15, 0.12, 0.08])
    assert "1 − 1.0e-04" in ex.summary.value and "1 − 0.000" not in ex.summary.value
    assert "a rejection is rare" in ex.summary.value and "puts its mass on t1" in ex.summary.value


def test_with_draft_equal_to_target_the_residual_panel_is_empty_and_p_reject_keeps_its_digits():
    """After "draft = target" the residual panel drew the target's bars beside "the residual is never drawn from";
    a draft 1e-7 away read "P(reject) = 0.000" beside "a rejection is rare". The panel is empty when nothing is ever
    resampled (the property keeps lab.sampling's fallback to the target), and a tiny P(reject) shows its size."""
    ex = ResidualExplorer(target_probs=[0.40, 0.25, 0.15, 0.12, 0.08], draft_probs=[0.2, 0.35, 0.25, 0.1, 0.1])
    ex.copy_button.click()
    assert list(ex.figure.data[5].y) == [0.0] * 5 and ex.residual.tolist() == pytest.approx(ex.target_probs.tolist())
    assert "P(reject) = 0.000" in ex.figure.layout.title.text
    ex.set_draft([0.4000001, 0.2499999, 0.15, 0.12, 0.08])
    assert "P(reject) = 1.0e-07" in ex.figure.layout.title.text and max(ex.figure.data[5].y) == pytest.approx(1.0)
