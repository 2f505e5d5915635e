"""The drafter arena as figures: measured vs predicted speedup of every drafter, per task and temperature, and
one drafter's predicted speedup walked down to its measured one, factor by factor.

Used in lesson 12 with :func:`lab.arena.run_arena`'s result; plain plotly (a static ``go.Figure``, no widget state),
so it renders in any notebook viewer and in exported HTML.
"""
from __future__ import annotations

import html
import math
from numbers import Real

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from lab.validation import check_int
from widgets.style import chart_labels

__all__ = ["arena_figure", "efficiency_waterfall"]

MEASURED_COLOR = "#1f77b4"
PREDICTED_COLOR = "#ff7f0e"


def arena_figure(result: dict, height_per_row: int = 240) -> go.Figure:
    """Grouped bars of measured and predicted speedup (× autoregressive) per drafter, one panel per task
    (rows) and temperature (columns), with the autoregressive level 1× as a dashed line.

    ``result`` is :func:`lab.arena.run_arena`'s return value (``rows`` with ``task``, ``temperature``, ``label``,
    ``measured_speedup``, ``predicted_speedup``, ``efficiency``, ``tokens_per_target_call``); the autoregressive
    rows are left out (always 1). Hovering a bar shows the drafter's efficiency and tokens per target call. Labels
    and titles are HTML-escaped (plotly renders some tags); two rows of a panel with the same label get their N
    appended. Raises ``ValueError`` if ``result`` has no drafter rows, a row lacks one of those keys or one of its
    four numbers or its temperature is not a finite number >= 0 (None, say), and for a ``height_per_row`` (pixels)
    that is not an integer in [1, 10000]; ``TypeError`` if ``result`` is not a dict whose rows are a list of dicts.
    """
    if not isinstance(result, dict):
        raise TypeError(f"result must be lab.arena.run_arena(...)'s return value (a dict), got {type(result).__name__}")
    height_per_row = check_int("height_per_row", height_per_row, 1, 10_000)
    if not isinstance(result.get("rows", []), list) or not all(isinstance(r, dict) for r in result.get("rows", [])):
        raise TypeError("result must be lab.arena.run_arena(...)'s return value: its rows a list of dicts")
    rows = [r for r in result.get("rows", []) if r.get("drafter") != "autoregressive"]
    numbers = ("measured_speedup", "predicted_speedup", "efficiency", "tokens_per_target_call")
    needed = ("task", "temperature", "label") + numbers
    for row in rows:
        missing = [key for key in needed if key not in row]
        if missing:
            raise ValueError(f"result's rows must be run_arena's: a row lacks {', '.join(missing)}")
        temperature = row["temperature"]  # formatted in the panel titles
        if isinstance(temperature, bool) or not isinstance(temperature, Real) or not 0 <= temperature < math.inf:
            raise ValueError(f"result's rows must be run_arena's: temperature must be a finite number >= 0, got "
                             f"{temperature!r} in the row of {row['label']!r} ({row['task']})")
        for key in numbers:  # drawn as bars or formatted in the hover text
            value = row[key]
            if isinstance(value, bool) or not isinstance(value, Real) or not 0 <= value < math.inf:
                raise ValueError(f"result's rows must be run_arena's: {key} must be a finite number >= 0, got "
                                 f"{value!r} in the row of {row['label']!r} ({row['task']}, T = {row['temperature']})")
    if not rows:
        raise ValueError("result holds no drafter rows: pass lab.arena.run_arena(...)'s return value")
    tasks = list(dict.fromkeys(r["task"] for r in rows))
    temps = list(dict.fromkeys(r["temperature"] for r in rows))
    fig = make_subplots(rows=len(tasks), cols=len(temps), shared_yaxes=True, vertical_spacing=0.12,
                        horizontal_spacing=0.04,
                        subplot_titles=[html.escape(f"{task}, T = {t:g}", quote=False)
                                        for task in tasks for t in temps])
    for i, task in enumerate(tasks, start=1):
        for j, temperature in enumerate(temps, start=1):
            cell = [r for r in rows if r["task"] == task and r["temperature"] == temperature]
            # escaped, and told apart where two rows share a label (compare_adaptive's "draft model" at two N)
            suffixes = [f"(N={r['n_draft']})" if r.get("n_draft") else f"#{k}" for k, r in enumerate(cell)]
            labels = chart_labels([r["label"] for r in cell], suffixes)
            hover = [f"efficiency {r['efficiency']:.2f}<br>tokens per target call {r['tokens_per_target_call']:.2f}"
                     for r in cell]
            first = i == 1 and j == 1
            fig.add_bar(x=labels, y=[r["measured_speedup"] for r in cell], name="measured", legendgroup="measured",
                        marker_color=MEASURED_COLOR, showlegend=first, hovertext=hover, row=i, col=j)
            fig.add_bar(x=labels, y=[r["predicted_speedup"] for r in cell], name="predicted",
                        legendgroup="predicted", marker_color=PREDICTED_COLOR, showlegend=first, hovertext=hover,
                        row=i, col=j)
            fig.add_hline(y=1.0, line_dash="dash", line_color="grey", row=i, col=j)
        fig.update_yaxes(title_text="× autoregressive", row=i, col=1)
    fig.update_layout(barmode="group", height=max(300, height_per_row * len(tasks) + 80),
                      margin=dict(t=60, b=20, l=60, r=20), legend=dict(orientation="h", y=1.06, x=0),
                      title=dict(text="speedup over autoregressive decoding: measured vs predicted", y=0.995))
    return fig


FACTOR_LABELS = {"acceptance": "tokens per call", "drafting": "drafting time", "target_call": "target call",
                 "verification": "verification", "loop": "between steps", "prefill": "prefill"}


def efficiency_waterfall(row: dict, height: int = 340) -> go.Figure:
    """A waterfall from one arena row's predicted speedup to its measured one: each bar is what one factor of
    ``row["efficiency_factors"]`` (see :func:`lab.arena.run_arena`) adds or takes away, in × autoregressive, in the
    order the factors replace the prediction's assumptions by measurements; the last bar is the measured speedup.

    ``row`` is one drafter row of :func:`lab.arena.run_arena` or :func:`lab.arena.compare_adaptive`. Raises
    ``ValueError`` for a row without ``efficiency_factors`` or ``predicted_speedup``.
    """
    factors = row.get("efficiency_factors") if isinstance(row, dict) else None
    if not factors or row.get("predicted_speedup") is None:
        raise ValueError("row must be one drafter row of lab.arena.run_arena(...) (with efficiency_factors)")
    from lab.arena import EFFICIENCY_FACTORS

    level = row["predicted_speedup"]
    x, y, text = ["predicted"], [level], [f"{level:.2f}×"]
    for name in EFFICIENCY_FACTORS:
        new_level = level * factors[name]
        x.append(FACTOR_LABELS[name])
        y.append(new_level - level)
        text.append(f"× {factors[name]:.2f}")
        level = new_level
    x.append("measured")
    y.append(0.0)
    text.append(f"{level:.2f}×")
    fig = go.Figure(go.Waterfall(x=x, y=y, measure=["absolute"] + ["relative"] * len(EFFICIENCY_FACTORS) + ["total"],
                                 text=text, textposition="outside", connector=dict(line=dict(color="#999999")),
                                 decreasing=dict(marker_color="#d62728"), increasing=dict(marker_color="#2ca02c"),
                                 totals=dict(marker_color=MEASURED_COLOR)))
    fig.add_hline(y=1.0, line_dash="dash", line_color="grey")
    n = f", N = {row['n_draft']}" if row.get("n_draft") else ""
    where = f"{row['task']}, T = {row['temperature']:g}, " if "task" in row else ""
    fig.update_layout(height=height, margin=dict(t=50, b=20, l=60, r=20), yaxis_title="× autoregressive",
                      title=dict(text=html.escape(f"{row.get('label', row.get('drafter', ''))} ({where}efficiency "
                                                  f"{row['efficiency']:.2f}{n}): where the predicted speedup went",
                                                  quote=False)),
                      showlegend=False)
    return fig
