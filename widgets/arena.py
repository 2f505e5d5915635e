"""The drafter arena as a figure: measured vs predicted speedup of every drafter, per task and temperature.

Used in lesson 12 with :func:`lab.bench.run_arena`'s result; plain plotly (a static ``go.Figure``, no widget state),
so it renders in any notebook viewer and in exported HTML.
"""
from __future__ import annotations

import plotly.graph_objects as go
from plotly.subplots import make_subplots

__all__ = ["arena_figure"]

MEASURED_COLOR = "#1f77b4"
PREDICTED_COLOR = "#ff7f0e"


def arena_figure(result: dict, height_per_row: int = 240) -> go.Figure:
    """Grouped bars of measured and predicted speedup (× autoregressive) per drafter, one panel per task
    (rows) and temperature (columns), with the autoregressive level 1× as a dashed line.

    ``result`` is :func:`lab.bench.run_arena`'s return value (``rows`` with ``task``, ``temperature``, ``label``,
    ``measured_speedup``, ``predicted_speedup``, ``efficiency``); the autoregressive rows are left out (always 1).
    Hovering a bar shows the drafter's efficiency and tokens per target call. Raises ``ValueError`` if ``result``
    has no drafter rows.
    """
    rows = [r for r in result.get("rows", []) if r.get("drafter") != "autoregressive"]
    if not rows:
        raise ValueError("result holds no drafter rows: pass lab.bench.run_arena(...)'s return value")
    tasks = list(dict.fromkeys(r["task"] for r in rows))
    temps = list(dict.fromkeys(r["temperature"] for r in rows))
    fig = make_subplots(rows=len(tasks), cols=len(temps), shared_yaxes=True, vertical_spacing=0.12,
                        horizontal_spacing=0.04,
                        subplot_titles=[f"{task}, T = {t:g}" for task in tasks for t in temps])
    for i, task in enumerate(tasks, start=1):
        for j, temperature in enumerate(temps, start=1):
            cell = [r for r in rows if r["task"] == task and r["temperature"] == temperature]
            labels = [r["label"] for r in cell]
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
