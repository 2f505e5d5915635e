"""SpeedupExplorer: sliders for the per-token acceptance α, draft length N and cost ratio c, and what they predict.

Used in lesson 06. Two linked figures: a timeline of draft and target work for autoregressive and speculative
decoding over the same time budget, and the predicted speedup against N with the current and the best N marked.
Everything shown is kernel-side state (``expected_tokens``, ``speedup``, ``best_n``, the figures' traces).
Formulas: :mod:`lab.metrics` (Leviathan et al. 2023, equation 1 and Theorem 3.8).
"""
from __future__ import annotations

from numbers import Real

import ipywidgets as w
import plotly.graph_objects as go

from lab.metrics import expected_tokens_per_call, optimal_n_draft, predicted_speedup
from lab.validation import check_int

__all__ = ["SpeedupExplorer"]

_DRAFT_COLOR = "#ff7f0e"
_TARGET_COLOR = "#1f77b4"
_ROWS = ("autoregressive", "speculative")
_MAX_HORIZON = 1000  # target passes


class SpeedupExplorer(w.VBox):
    """Explore the speedup formula: ``speedup = (1 − α^(N+1)) / (1 − α) / (1 + N c)``.

    Args:
        alpha: Leviathan's per-token acceptance α in [0, 1] (each drafted token accepted independently with
            probability α). Measure it from a run with :func:`lab.metrics.alpha_from_steps` (accepted drafts /
            drafts the target examined), not with ``stats["acceptance_rate"]`` (accepted / all drafted, which
            also counts the drafts after a rejection that were never examined, so it is lower).
        n_draft: draft length N, 1..``max_n``; None (the default) means ``min(5, max_n)``.
        cost_ratio: c = time of one draft forward / time of one target forward, in [0, 1].
        max_n: largest N shown and searched for the optimum, 1..64.
        horizon: time budget of the timeline, in target forward passes, in (0, 1000].
    Raises ``ValueError`` for values outside those ranges (the constructor and :meth:`set` run the same checks).
    """

    def __init__(self, alpha: float = 0.75, n_draft: int | None = None, cost_ratio: float = 0.1, max_n: int = 16,
                 horizon: float = 12.0):
        max_n = check_int("max_n", max_n, 1, 64)  # 10**8 hung: every N is drawn and searched
        if n_draft is None:  # a default that fits any max_n, so max_n=3 alone works
            n_draft = min(5, max_n)
        if isinstance(horizon, bool) or not isinstance(horizon, Real) or not 0 < horizon <= _MAX_HORIZON:
            # the cap keeps the timeline drawable: each pass is a bar, resent on every slider move
            raise ValueError(f"horizon must be a number in (0, {_MAX_HORIZON}] target passes, got {horizon!r}")
        self.max_n = max_n
        self._check(alpha, n_draft, cost_ratio)
        self.horizon = float(horizon)
        style = {"description_width": "170px"}
        layout = w.Layout(width="480px")
        # Leviathan's α, not the acceptance rate (accepted / drafted): the formula assumes independent trials.
        self.alpha_slider = w.FloatSlider(value=alpha, min=0.0, max=1.0, step=0.01,
                                          description="per-token acceptance α", readout_format=".2f", style=style,
                                          layout=layout)
        self.n_slider = w.IntSlider(value=n_draft, min=1, max=self.max_n, description="draft length N",
                                    style=style, layout=layout)
        self.cost_slider = w.FloatSlider(value=cost_ratio, min=0.0, max=1.0, step=0.01,
                                         description="cost ratio c", readout_format=".2f", style=style,
                                         layout=layout)
        self.readout = w.HTML()

        self.timeline = go.FigureWidget()
        self.timeline.add_bar(orientation="h", y=[], x=[], base=[], name="target forward pass",
                              marker_color=_TARGET_COLOR, marker_line=dict(color="white", width=1))
        self.timeline.add_bar(orientation="h", y=[], x=[], base=[], name="draft forward pass",
                              marker_color=_DRAFT_COLOR, marker_line=dict(color="white", width=1))
        self.timeline.update_layout(barmode="overlay", height=230, margin=dict(t=50, b=40, l=110, r=20),
                                    xaxis_title="time (target forward passes)",
                                    yaxis=dict(categoryorder="array", categoryarray=list(_ROWS)[::-1]),
                                    legend=dict(orientation="h", y=-0.35))

        ns = list(range(1, self.max_n + 1))
        self.curve = go.FigureWidget()
        self.curve.add_scatter(x=ns, y=[0.0] * len(ns), mode="lines+markers", name="predicted speedup")
        self.curve.add_scatter(x=ns, y=[0.0] * len(ns), mode="lines", name="tokens per target call",
                               line=dict(dash="dash"))
        self.curve.add_scatter(x=[n_draft], y=[0.0], mode="markers", name="current N",
                               marker=dict(size=14, color="black", symbol="circle-open", line_width=2))
        self.curve.add_scatter(x=[n_draft], y=[0.0], mode="markers+text", name="best N", text=["best"],
                               textposition="top center", marker=dict(size=16, color="#2ca02c", symbol="star"))
        self.curve.add_hline(y=1.0, line_dash="dot", line_color="grey")
        self.curve.update_layout(height=300, margin=dict(t=40, b=40, l=50, r=20), xaxis_title="draft length N",
                                 yaxis_title="× autoregressive", legend=dict(orientation="h", y=-0.3))

        for s in (self.alpha_slider, self.n_slider, self.cost_slider):
            s.observe(lambda change: self._refresh(), names="value")
        super().__init__([w.VBox([self.alpha_slider, self.n_slider, self.cost_slider]), self.readout,
                          self.timeline, self.curve])
        self._refresh()

    # --- state -------------------------------------------------------------------------------------------
    @property
    def alpha(self) -> float:
        """The per-token acceptance α the slider is set to, in [0, 1] (see :func:`lab.metrics.alpha_from_steps`)."""
        return float(self.alpha_slider.value)

    @property
    def n_draft(self) -> int:
        """The draft length N the slider is set to."""
        return int(self.n_slider.value)

    @property
    def cost_ratio(self) -> float:
        """The cost ratio c = draft forward / target forward the slider is set to."""
        return float(self.cost_slider.value)

    @property
    def expected_tokens(self) -> float:
        """Expected tokens emitted per target call at the current α and N."""
        return expected_tokens_per_call(self.alpha, self.n_draft)

    @property
    def step_cost(self) -> float:
        """Time of one speculative step in target passes: 1 + N c."""
        return 1 + self.n_draft * self.cost_ratio

    @property
    def speedup(self) -> float:
        """Predicted speedup at the current α, N, c."""
        return predicted_speedup(self.alpha, self.n_draft, self.cost_ratio)

    @property
    def best_n(self) -> int:
        """The N in 1..max_n with the largest predicted speedup at the current α and c."""
        return optimal_n_draft(self.alpha, self.cost_ratio, self.max_n)

    def timeline_tokens(self) -> dict:
        """Expected tokens each row emits within the timeline's horizon (autoregressive: one per pass)."""
        return {"autoregressive": self.horizon, "speculative": self.horizon / self.step_cost * self.expected_tokens}

    def set(self, alpha: float | None = None, n_draft: int | None = None, cost_ratio: float | None = None) -> None:
        """Move sliders from Python (the same as dragging them); ``None`` leaves a slider where it is.

        The values are checked as the constructor checks them *before* any slider moves, so a bad value raises
        ``ValueError`` (naming the argument and its range) and leaves the explorer unchanged; nothing is clamped."""
        self._check(self.alpha if alpha is None else alpha, self.n_draft if n_draft is None else n_draft,
                    self.cost_ratio if cost_ratio is None else cost_ratio)
        if alpha is not None:
            self.alpha_slider.value = alpha
        if n_draft is not None:
            self.n_slider.value = n_draft
        if cost_ratio is not None:
            self.cost_slider.value = cost_ratio

    # --- internals ---------------------------------------------------------------------------------------
    def _check(self, alpha, n_draft, cost_ratio) -> None:
        """Raise ``ValueError`` unless α is in [0, 1], N an integer in 1..max_n and c a number in [0, 1] (the
        sliders' ranges; NaN and bools are rejected)."""
        for name, value in (("alpha", alpha), ("cost_ratio", cost_ratio)):
            if isinstance(value, bool):
                raise ValueError(f"{name} must be a number, got {value!r}")
        expected_tokens_per_call(alpha, n_draft)  # alpha in [0, 1] (not NaN), N an integer >= 1
        predicted_speedup(alpha, n_draft, cost_ratio)  # c a finite number >= 0
        if not 1 <= n_draft <= self.max_n:
            raise ValueError(f"n_draft must be an integer in 1..max_n={self.max_n}, got {n_draft!r}")
        if not 0 <= cost_ratio <= 1:
            raise ValueError(f"cost_ratio must be in [0, 1] here (the slider's range), got {cost_ratio!r}")

    def _timeline_bars(self):
        """(target bars, draft bars), each a list of (row, start, duration) within the horizon."""
        target, draft = [], []
        t = 0.0
        while t < self.horizon - 1e-9:
            target.append((_ROWS[0], t, min(1.0, self.horizon - t)))
            t += 1.0
        t = 0.0
        c = self.cost_ratio
        while t < self.horizon - 1e-9:
            for _ in range(self.n_draft):
                if c > 0 and t < self.horizon - 1e-9:
                    draft.append((_ROWS[1], t, min(c, self.horizon - t)))
                t += c
            if t < self.horizon - 1e-9:
                target.append((_ROWS[1], t, min(1.0, self.horizon - t)))
            t += 1.0
        return target, draft

    def _refresh(self):
        alpha, n, c = self.alpha, self.n_draft, self.cost_ratio
        ns = list(range(1, self.max_n + 1))
        speedups = [predicted_speedup(alpha, k, c) for k in ns]
        tokens = [expected_tokens_per_call(alpha, k) for k in ns]
        best = self.best_n
        target_bars, draft_bars = self._timeline_bars()
        emitted = self.timeline_tokens()
        with self.timeline.batch_update():
            for trace, bars in ((self.timeline.data[0], target_bars), (self.timeline.data[1], draft_bars)):
                trace.y = [b[0] for b in bars]
                trace.base = [b[1] for b in bars]
                trace.x = [b[2] for b in bars]
            self.timeline.layout.title = (f"in {self.horizon:g} target passes: autoregressive emits "
                                          f"{emitted['autoregressive']:.0f} tokens, speculative about "
                                          f"{emitted['speculative']:.1f}")
        with self.curve.batch_update():
            self.curve.data[0].y = speedups
            self.curve.data[1].y = tokens
            self.curve.data[2].x = [n]
            self.curve.data[2].y = [speedups[n - 1]]
            self.curve.data[3].x = [best]
            self.curve.data[3].y = [speedups[best - 1]]
            self.curve.layout.title = (f"α = {alpha:.2f}, c = {c:.2f}: best N = {best} ({speedups[best - 1]:.2f}×)"
                                       if speedups[best - 1] > 1 else
                                       f"α = {alpha:.2f}, c = {c:.2f}: no N beats autoregressive decoding")
        best_text = (f"best N = <b>{best}</b> ({speedups[best - 1]:.2f}×)" if speedups[best - 1] > 1 else
                     f"no N beats autoregressive decoding (the least slow: N = {best}, {speedups[best - 1]:.2f}×)")
        self.readout.value = (f"expected tokens per target call <b>{self.expected_tokens:.2f}</b> · "
                              f"step cost 1 + N·c = <b>{self.step_cost:.2f}</b> target passes · "
                              f"predicted speedup <b>{self.speedup:.2f}×</b> · {best_text}")
