"""Edge cases of the drafters', picker's and widgets' arguments found by an adversarial review: NumPy scalars
accepted where Python numbers are (bool never counts as a number), clear errors naming the argument, and token
labels that reach plotly escaped and distinct."""
import json
import math

import numpy as np
import pytest
import torch

from lab import picker
from lab.drafters import (
    DraftModelDrafter,
    EagleDrafter,
    EarlyExitDrafter,
    LookaheadDrafter,
    MedusaDrafter,
)
from lab.drafters.lookahead import jacobi_decode
from widgets._style import chart_labels
from widgets.arena import arena_figure, efficiency_waterfall
from widgets.picker import StrategyPicker
from widgets.residual import ResidualExplorer
from widgets.speedup import SpeedupExplorer
from widgets.token_stream import TokenStream


@pytest.fixture(scope="module")
def pair():
    from lab.models import load_pair

    return load_pair("shakespeare", device="cpu")


# --- drafters ----------------------------------------------------------------------------------------------------

def test_lookahead_seed_takes_numpy_integers_and_rejects_other_types():
    prompt = [3, 9, 4, 17, 25, 8]
    a, b = LookaheadDrafter(seed=np.int64(3)), LookaheadDrafter(seed=3)
    a.reset(prompt)
    b.reset(prompt)
    assert a.seed == 3 and type(a.seed) is int
    assert a.window_tokens == b.window_tokens  # the same random fill as the Python int
    for bad in (1.5, True, [1], "3", -1):
        with pytest.raises(ValueError, match="seed"):
            LookaheadDrafter(seed=bad)


def test_jacobi_decode_seed_takes_numpy_integers(target):
    prompt = [5, 11, 2, 40, 7]
    run = jacobi_decode(target, prompt, window=3, seed=np.int64(3))
    assert run.iterations[0] == jacobi_decode(target, prompt, window=3, seed=3).iterations[0]
    with pytest.raises(ValueError, match="seed"):
        jacobi_decode(target, prompt, window=3, seed=1.5)


def test_draft_model_adaptive_must_be_a_bool(draft):
    with pytest.raises(TypeError, match="adaptive"):
        DraftModelDrafter(draft, adaptive="no")
    with pytest.raises(TypeError, match="adaptive"):
        DraftModelDrafter(draft, adaptive=1)
    drafter = DraftModelDrafter(draft, 2, adaptive=np.bool_(True), max_n_draft=np.int64(5))
    assert drafter.adaptive is True and drafter.max_n_draft == 5
    assert DraftModelDrafter(draft, adaptive=np.bool_(False)).adaptive is False


def test_from_pretrained_wants_a_pair(target):
    with pytest.raises(TypeError, match=r"ModelPair .*got str 'shakespeare'"):
        MedusaDrafter.from_pretrained("shakespeare")
    with pytest.raises(TypeError, match=r"not pair\.target"):
        EagleDrafter.from_pretrained(target)
    with pytest.raises(TypeError, match="ModelPair"):
        EagleDrafter.from_pretrained(None)


def test_early_exit_on_a_one_layer_model_says_why(draft, target):
    assert len(draft.model.layers) == 1
    with pytest.raises(ValueError, match=r"needs a target with at least 2 layers .* this model has 1 layer ") as error:
        EarlyExitDrafter(draft, 1)
    assert "[1, 0]" not in str(error.value)  # an empty range would read as a typo
    with pytest.raises(ValueError, match=r"\[1, 1\]"):  # the 2-layer target keeps the usual message
        EarlyExitDrafter(target, 2)


# --- lab.picker and its widget -----------------------------------------------------------------------------------

def test_recommend_takes_numpy_bools_and_returns_plain_values():
    plain = picker.recommend("chat", 0.0, True, False, True, 0.5)
    numpy_args = picker.recommend("chat", np.float32(0.0), np.bool_(True), np.bool_(False), np.bool_(True),
                                  np.float64(0.5))
    assert numpy_args.to_dict() == plain.to_dict()
    flags = [numpy_args.workload[k] for k in ("has_small_same_family_model", "can_finetune", "latency_bound")]
    assert [type(f) for f in flags] == [bool, bool, bool]
    json.dumps(numpy_args.to_dict())  # numpy.bool_ would not serialise
    for name, position in (("has_small_same_family_model", 2), ("can_finetune", 3), ("latency_bound", 4)):
        for bad in (1, "yes", None, np.int64(1)):
            args = ["chat", 0.0, True, False, True]
            args[position] = bad
            with pytest.raises(ValueError, match=name):
                picker.recommend(*args)


def test_strategy_picker_takes_numpy_scalars():
    widget = StrategyPicker(temperature=np.float32(0.5), has_small_same_family_model=np.bool_(False),
                            can_finetune=np.bool_(True), latency_bound=np.bool_(True),
                            tensor_parallel_size=np.int64(2))
    assert widget.small_model_box.value is False and widget.finetune_box.value is True
    assert widget.tensor_parallel_size == 2 and math.isclose(widget.temperature_slider.value, 0.5)
    assert widget.workload["has_small_same_family_model"] is False
    with pytest.raises(ValueError, match="tensor_parallel_size"):
        StrategyPicker(tensor_parallel_size=True)  # True == 1, but it is not a GPU count


# --- RaceDashboard -----------------------------------------------------------------------------------------------

def test_race_dashboard_takes_numpy_scalars(pair):
    from widgets.race import RaceDashboard

    dashboard = RaceDashboard(pair, prompts=["ROMEO."], n_draft=np.int64(3), max_new_tokens=np.int64(5),
                              temperature=np.float32(0.5), seed=np.int64(1), record_probs=np.bool_(True))
    assert dashboard.n_draft.value == 3 and dashboard.new_tokens.value == 5
    assert math.isclose(dashboard.temperature.value, 0.5) and dashboard.seed == 1 and type(dashboard.seed) is int
    assert dashboard.record_probs is True
    for kwargs, word in (({"temperature": True}, "temperature"), ({"temperature": float("inf")}, "temperature"),
                         ({"temperature": -0.5}, "temperature"), ({"seed": 1.5}, "seed"),
                         ({"max_new_tokens": None}, "max_new_tokens"), ({"n_draft": 0}, "n_draft")):
        with pytest.raises(ValueError, match=word):
            RaceDashboard(pair, prompts=["ROMEO."], **kwargs)
    with pytest.raises(TypeError, match="record_probs"):
        RaceDashboard(pair, prompts=["ROMEO."], record_probs="no")


# --- ResidualExplorer --------------------------------------------------------------------------------------------

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
    assert [s.description for s in ex.target_sliders] == tokens  # slider text is not HTML
    ints = ResidualExplorer([0.5, 0.5], [0.5, 0.5], tokens=[1, 2])
    assert ints.tokens == ["1", "2"] and list(ints.figure.data[0].x) == ["1", "2"]
    with pytest.raises(TypeError, match="tokens"):
        ResidualExplorer([0.5, 0.5], [0.5, 0.5], tokens="ab")


def test_chart_labels():
    assert chart_labels(["a", "<i>", "a"]) == ["a #0", "&lt;i&gt;", "a #2"]
    assert chart_labels(["x", "x"], ["#7", "#9"]) == ["x #7", "x #9"]
    assert chart_labels(["a", "a", "a #1"], escape=False) == ["a #0", "a #1 @1", "a #1 @2"]  # still distinct
    assert chart_labels([1, "<"], escape=False) == ["1", "<"]


# --- arena figures, TokenStream, SpeedupExplorer -----------------------------------------------------------------

def _arena_row(label, n_draft, measured):
    return {"drafter": "model", "task": "<prose>", "temperature": 0.0, "label": label, "n_draft": n_draft,
            "measured_speedup": measured, "predicted_speedup": 1.5, "efficiency": 0.9,
            "tokens_per_target_call": 2.0}


def test_arena_figure_escapes_and_separates_labels():
    rows = [_arena_row("draft model", 1, 1.1), _arena_row("draft model", 3, 1.3), _arena_row("<b>x</b>", None, 1.2)]
    fig = arena_figure({"rows": rows})
    assert list(fig.data[0].x) == ["draft model (N=1)", "draft model (N=3)", "&lt;b&gt;x&lt;/b&gt;"]
    assert list(fig.data[0].y) == [1.1, 1.3, 1.2]
    assert fig.layout.annotations[0].text == "&lt;prose&gt;, T = 0"
    row = {**rows[2], "efficiency_factors": {name: 1.0 for name in
                                             ("acceptance", "drafting", "target_call", "verification", "loop",
                                              "prefill")}}
    assert efficiency_waterfall(row).layout.title.text.startswith("&lt;b&gt;x&lt;/b&gt; (&lt;prose&gt;")


def test_token_stream_chart_height():
    assert TokenStream(chart_height=np.int64(300)).chart.layout.height == 300
    for bad in ("big", -5, 5, True, 300.5):
        with pytest.raises(ValueError, match="chart_height"):
            TokenStream(chart_height=bad)


def test_speedup_explorer_horizon_rejects_bool():
    with pytest.raises(ValueError, match="horizon"):
        SpeedupExplorer(horizon=True)
    assert SpeedupExplorer(horizon=np.float32(6)).horizon == 6.0
    for bad in (1000.5, 1e5, float("inf"), float("nan"), 0, -3):  # above the cap, a timeline of 10^5 bars took 7 s
        with pytest.raises(ValueError, match=r"horizon must be a number in \(0, 1000\]"):
            SpeedupExplorer(horizon=bad)
    assert SpeedupExplorer(horizon=1000).horizon == 1000.0
