"""The arena figures (widgets/arena.py, lesson 12): labels reach plotly escaped and told apart."""
import re

import pytest

from widgets.arena import arena_figure, efficiency_waterfall


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


def test_arena_figure_names_what_it_takes():
    with pytest.raises(TypeError, match=r"result must be lab.arena.run_arena\(...\)'s return value \(a dict\), got "
                                        "NoneType"):
        arena_figure(None)
    with pytest.raises(ValueError, match="a row lacks temperature, label, measured_speedup"):
        arena_figure({"rows": [{"drafter": "x", "task": "chat"}]})
    with pytest.raises(TypeError, match="its rows a list of dicts"):
        arena_figure({"rows": [None]})
    for bad in (-1, 0, 2.5, None):  # a negative height drew an empty figure
        with pytest.raises(ValueError, match=r"height_per_row must be an integer in \[1, 10000\]"):
            arena_figure({"rows": [_arena_row("draft model", 4, 1.4)]}, height_per_row=bad)
    for bad in (None, -1.0, float("nan"), "0"):  # None failed inside a format of the panel titles
        with pytest.raises(ValueError, match=rf"temperature must be a finite number >= 0, got {re.escape(repr(bad))}"):
            arena_figure({"rows": [{**_arena_row("draft model", 4, 1.4), "temperature": bad}]})


def test_arena_figure_refuses_rows_without_the_numbers_it_draws():
    """The hover text reads tokens_per_target_call, which the check did not list (a bare KeyError), and a None
    speedup was drawn as a missing bar."""
    row = _arena_row("draft model", 4, 1.4)
    del row["tokens_per_target_call"]
    with pytest.raises(ValueError, match="a row lacks tokens_per_target_call"):
        arena_figure({"rows": [row]})
    for key, bad in (("measured_speedup", None), ("predicted_speedup", float("nan")), ("efficiency", -0.5),
                     ("tokens_per_target_call", True), ("measured_speedup", "1.4")):
        with pytest.raises(ValueError, match=rf"{key} must be a finite number >= 0, got {re.escape(repr(bad))} in "
                                             r"the row of 'draft model' \(<prose>, T = 0.0\)"):
            arena_figure({"rows": [{**_arena_row("draft model", 4, 1.4), key: bad}]})
    fig = arena_figure({"rows": [_arena_row("draft model", 4, 1.4)]})
    assert fig.data[0].hovertext == ("efficiency 0.90<br>tokens per target call 2.00",)
