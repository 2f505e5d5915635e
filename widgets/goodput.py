"""GoodputChart: goodput (committed tokens/s over the batch) against batch size, one line per draft length N.

For lesson 13's batching section. It draws a :func:`lab.goodput.measure_goodput` result (a learner's run, or the
real pair's committed one, :func:`lab.goodput.committed_goodput`): a line per N over the batch sizes, on a log
axis, autoregressive decoding (N = 0) dashed; a toggle shows each N's goodput ÷ N = 0's instead, where N = 0's
line at 1 is the one speculation must stay above; the crossover batch size (the first where no N > 0 beats N = 0)
is marked, and the readout gives the best N per batch size as vLLM's ``num_speculative_tokens_per_batch_size``.
Everything shown is kernel-side state (``series``, the figure's traces). It only reads numbers; nothing is timed here.
"""
from __future__ import annotations

import json
import math
from numbers import Real

import ipywidgets as w
import plotly.graph_objects as go

from lab.goodput import best_n_per_batch, crossover_batch
from lab.validation import is_integer

__all__ = ["GoodputChart"]

_VIEWS = ("tokens/s", "× N = 0")


class GoodputChart(w.VBox):
    """Goodput per N against batch size from ``result`` (the dict :func:`lab.goodput.measure_goodput` returns:
    ``rows`` with ``batch``, ``n_draft``, ``goodput``, ``vs_autoregressive``; ``crossover``; ``schedule``;
    ``settings``). ``view``: ``"tokens/s"`` (default) or ``"× N = 0"`` (needs N = 0 among the rows).

    The crossover and the readout come from the rows (:func:`lab.goodput.best_n_per_batch`), not from
    ``result["crossover"]``: only batch sizes where a finite N = 0 goodput ran beside an N > 0 are compared.

    Raises ``ValueError`` for a result without rows, with rows missing those keys, with a batch that is not an
    integer >= 1, an N that is not an integer >= 0 or a goodput that is neither a finite number >= 0 nor NaN (a
    cell not measured, drawn as a gap and never compared), and for an unknown view or a ratio view without an
    N = 0 row."""

    def __init__(self, result: dict, view: str = "tokens/s"):
        rows = result.get("rows") if isinstance(result, dict) else None
        needed = {"batch", "n_draft", "goodput"}
        if not rows or not all(isinstance(r, dict) and needed <= set(r) for r in rows):
            raise ValueError("result must be lab.goodput.measure_goodput's dict, with rows holding batch, n_draft and "
                             "goodput")
        bad = next((r for r in rows if not (is_integer(r["batch"]) and r["batch"] >= 1 and is_integer(r["n_draft"])
                                            and r["n_draft"] >= 0)), None)
        if bad is not None:
            raise ValueError(f"result's rows must hold an integer batch >= 1 and an integer n_draft >= 0, got {bad!r}")
        bad = next((r for r in rows if isinstance(r["goodput"], bool) or not isinstance(r["goodput"], Real)
                    or not (0 <= r["goodput"] < math.inf or math.isnan(r["goodput"]))), None)  # NaN: a gap
        if bad is not None:
            raise ValueError(f"result's rows must hold a goodput that is a finite number >= 0 (tokens/s) or NaN (not "
                             f"measured), got {bad!r}")
        self.result = result
        # the crossover is read from the rows themselves: only where N = 0 ran beside an N > 0, finite values only
        self.best = best_n_per_batch(rows)
        self.crossover = crossover_batch(self.best)
        self.batches = sorted({int(r["batch"]) for r in rows})
        self.n_values = sorted({int(r["n_draft"]) for r in rows})
        self._cells = {(int(r["batch"]), int(r["n_draft"])): r for r in rows}
        self.toggle = w.ToggleButtons(options=list(_VIEWS), value=_VIEWS[0], description="show")
        self.figure = go.FigureWidget()
        for n in self.n_values:
            self.figure.add_scatter(x=[], y=[], mode="lines+markers", name="N = 0 (autoregressive)" if n == 0
                                    else f"N = {n}", line=dict(dash="dash" if n == 0 else "solid"))
        self.figure.add_scatter(x=[], y=[], mode="lines", name="crossover", line=dict(dash="dot", color="grey"))
        self.figure.update_layout(height=360, margin=dict(t=40, b=50, l=60, r=20), xaxis_title="batch size",
                                  xaxis=dict(type="log", tickvals=self.batches, ticktext=[str(b) for b in
                                                                                            self.batches]),
                                  legend=dict(orientation="h", y=-0.25))
        self.readout = w.HTML()
        self.toggle.observe(lambda change: self._refresh(), names="value")
        super().__init__([self.toggle, self.figure, self.readout])
        self.set_view(view)

    @property
    def view(self) -> str:
        """The current view: ``"tokens/s"`` or ``"× N = 0"``."""
        return self.toggle.value

    def set_view(self, view: str) -> None:
        """Switch the view. Raises ``ValueError`` for an unknown view, or the ratio view without N = 0 rows."""
        if view not in _VIEWS:
            raise ValueError(f"view must be one of {_VIEWS}, got {view!r}")
        if view == _VIEWS[1] and 0 not in self.n_values:
            raise ValueError("the × N = 0 view needs N = 0 (autoregressive) among the result's rows")
        if self.toggle.value == view:
            self._refresh()
        else:
            self.toggle.value = view  # observed: refreshes

    def series(self) -> dict:
        """``{N: [value per batch size]}`` as drawn now (goodput in tokens/s, or ÷ N = 0's goodput at the same
        batch size); None where a (batch, N) cell is missing from the rows (or, in the ratio view, N = 0's goodput is
        0), NaN where a row holds NaN (not measured) or divides by one: both are drawn as gaps."""
        ratio = self.view == _VIEWS[1]
        out = {}
        for n in self.n_values:
            values = []
            for b in self.batches:
                cell, base = self._cells.get((b, n)), self._cells.get((b, 0))
                if cell is None or (ratio and (base is None or base["goodput"] == 0)):  # nothing to divide by
                    values.append(None)
                else:
                    values.append(cell["goodput"] / base["goodput"] if ratio else cell["goodput"])
            out[n] = values
        return out

    def _refresh(self) -> None:
        series = self.series()
        ratio = self.view == _VIEWS[1]
        crossover = self.crossover
        with self.figure.batch_update():
            for trace, n in zip(self.figure.data, self.n_values):
                trace.x, trace.y = self.batches, series[n]
            self.figure.layout.yaxis.title = ("goodput ÷ N = 0's" if ratio else
                                              "goodput (committed tokens/s, whole batch)")
            marker = self.figure.data[-1]  # the crossover: a vertical line over the drawn values
            drawn = [v for values in series.values() for v in values if v is not None and not math.isnan(v)]
            if crossover is None or not drawn:
                marker.x, marker.y = [], []
            else:
                marker.x, marker.y = [crossover, crossover], [0, max(drawn) * 1.05]
        s = self.result.get("settings", {})
        if crossover is not None:
            where = f"speculation stops paying at batch size {crossover}"
        elif self.best:
            where = f"speculation still paid at batch size {max(self.best)}, the largest compared with N = 0"
        else:
            where = "no batch size has a finite N = 0 goodput beside an N > 0: nothing to compare"
        schedule = self.result.get("schedule")
        setting = "" if schedule is None else ("<br>best N per batch size, as vLLM's setting: <code>"
                                               + json.dumps({"num_speculative_tokens_per_batch_size": schedule})
                                               + "</code>")
        what = f"{s.get('pair', '?')}, {s.get('dtype', '?')}, drafter {s.get('drafter', '?')}" if s else ""
        self.readout.value = f"{where}{' (' + what + ')' if what else ''}{setting}"
