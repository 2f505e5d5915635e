"""ResidualExplorer: edit a target and a draft distribution and watch acceptance and the residual change.

Used in lesson 03. Everything the figure shows is also kernel-side state (``target_probs``, ``draft_probs``,
``accepted_mass``, ``residual``, ``accept_probability``, ``emit_probs`` and the FigureWidget's traces), so
tests and notebook cells can assert on it without a browser.
"""
from __future__ import annotations

import html
import math
from collections.abc import Iterable
from numbers import Real
from typing import Sequence

import ipywidgets as w
import plotly.graph_objects as go
import torch
from plotly.subplots import make_subplots

from widgets.style import chart_labels
from widgets.token_text import token_label_text

__all__ = ["ResidualExplorer"]

_TARGET_COLOR = "#1f77b4"
_DRAFT_COLOR = "#ff7f0e"
_ACCEPT_COLOR = "#2ca02c"
_RESAMPLE_COLOR = "#d62728"


def _normalised(values: Sequence[float], name: str) -> list:
    """``values`` (V finite numbers >= 0 with a positive sum: a list, NumPy array or 1-D tensor) divided by
    their sum. Raises ``TypeError``/``ValueError`` naming ``name``."""
    if isinstance(values, torch.Tensor):
        if values.dim() != 1:
            raise ValueError(f"{name} must be one distribution [V], got a tensor of shape {tuple(values.shape)}")
        values = values.tolist()
    if isinstance(values, (str, bytes)) or not isinstance(values, Iterable):
        raise TypeError(f"{name} must be a sequence of V numbers, got {type(values).__name__} {values!r}")
    vals = list(values)
    bad = [v for v in vals if isinstance(v, bool) or not isinstance(v, Real)]
    if bad:
        bad = bad[0]
        raise TypeError(f"{name} must hold numbers (not bool), got {type(bad).__name__} {bad!r} in {vals!r}")
    vals = [float(v) for v in vals]
    if not all(math.isfinite(v) and v >= 0 for v in vals):  # an inf would normalise to NaN
        raise ValueError(f"{name} must be finite numbers >= 0, got {vals}")
    if max(vals, default=0.0) <= 0:
        raise ValueError(f"{name} must have positive total mass, got {vals}")
    top = max(vals)  # scaled by the largest first: finite numbers near 1e308 would sum to inf
    total = sum(v / top for v in vals)
    return [v / top / total for v in vals]


class ResidualExplorer(w.VBox):
    """Sliders for a target and a draft distribution over a few tokens, and three linked bar charts.

    - left: ``target_probs`` and ``draft_probs``;
    - middle: where the probability of emitting each token comes from: the accepted mass
      ``min(target, draft)`` plus the resampled mass ``(1 - P(accept)) * residual``; their sum is the target
      (drawn as markers);
    - right: the residual distribution ``max(0, target - draft)`` normalised (empty when the draft equals the
      target: nothing is resampled then; the :attr:`residual` property falls back to the target, as
      :func:`lab.sampling.residual_distribution` does).

    Moving one slider rescales the other sliders of the same distribution so it keeps summing to 1; the
    ``copy_button`` ("draft = target") sets the draft to the target, which the sliders rarely reach exactly.

    Args:
        target_probs, draft_probs: initial distributions (V finite numbers >= 0 each, NumPy scalars too;
            normalised here).
        tokens: V labels for the x axis (default ``"t0"``, ``"t1"``, ...; anything else is ``str()``-ed into
            ``tokens``). The chart shows ``labels``: escaped, whitespace made visible, equal labels told apart;
            the sliders' descriptions are the same labels, as plain text.
    Raises ``ValueError`` if the two distributions have different lengths, fewer than 2 tokens, negative,
    infinite or NaN entries or zero mass; ``TypeError`` for entries that are not numbers. Source of the formulas:
    Leviathan et al. 2023, Algorithm 1 and Appendix A.1.
    """

    def __init__(self, target_probs: Sequence[float] = (0.4, 0.25, 0.15, 0.12, 0.08),
                 draft_probs: Sequence[float] = (0.2, 0.35, 0.25, 0.1, 0.1),
                 tokens: Sequence[str] | None = None):
        target = _normalised(target_probs, "target_probs")
        draft = _normalised(draft_probs, "draft_probs")
        if len(target) != len(draft) or len(target) < 2:
            raise ValueError(f"target_probs and draft_probs need the same length >= 2, got {len(target)} and "
                             f"{len(draft)}")
        if tokens is not None and (isinstance(tokens, str) or not isinstance(tokens, Iterable)):
            raise TypeError(f"tokens must be a sequence of V labels, got {type(tokens).__name__} {tokens!r}")
        self.tokens = ([str(t) for t in tokens] if tokens is not None
                       else [f"t{i}" for i in range(len(target))])
        if len(self.tokens) != len(target):
            raise ValueError(f"need {len(target)} token labels, got {len(self.tokens)}")
        self._plain_labels = chart_labels([token_label_text(t) for t in self.tokens], escape=False)
        self.labels = [html.escape(label, quote=False) for label in self._plain_labels]  # plotly: &, <, > only
        self._values = {"target": target, "draft": draft}
        self._syncing = False

        # The chart's labels, unescaped (a description is text): a whitespace token must not read as a blank, and
        # two equal tokens must be told apart.
        self.target_sliders = [self._slider(label, v) for label, v in zip(self._plain_labels, target)]
        self.draft_sliders = [self._slider(label, v) for label, v in zip(self._plain_labels, draft)]
        for i, s in enumerate(self.target_sliders):
            s.observe(lambda change, i=i: self._on_slider("target", i, change["new"]), names="value")
        for i, s in enumerate(self.draft_sliders):
            s.observe(lambda change, i=i: self._on_slider("draft", i, change["new"]), names="value")

        self.figure = go.FigureWidget(make_subplots(
            rows=1, cols=3, subplot_titles=("target and draft", "P(emit) = accepted + resampled", "residual")))
        x = self.labels
        self.figure.add_bar(x=x, y=target, name="target", marker_color=_TARGET_COLOR, offsetgroup="t", row=1, col=1)
        self.figure.add_bar(x=x, y=draft, name="draft", marker_color=_DRAFT_COLOR, offsetgroup="d", row=1, col=1)
        self.figure.add_bar(x=x, y=target, name="accepted: min(target, draft)", marker_color=_ACCEPT_COLOR,
                            offsetgroup="e", row=1, col=2)
        self.figure.add_bar(x=x, y=[0.0] * len(x), base=target, name="resampled: (1 − P(accept)) · residual",
                            marker_color=_RESAMPLE_COLOR, offsetgroup="e", row=1, col=2)
        self.figure.add_scatter(x=x, y=target, mode="markers", name="target (for comparison)",
                                marker=dict(symbol="line-ew-open", size=28, color="black", line_width=2),
                                row=1, col=2)
        self.figure.add_bar(x=x, y=target, name="residual", marker_color=_RESAMPLE_COLOR, opacity=0.6,
                            offsetgroup="r", showlegend=False, row=1, col=3)
        self.figure.update_layout(barmode="group", height=360, margin=dict(t=70, b=40, l=40, r=20),
                                  legend=dict(orientation="h", y=-0.15))
        self.figure.update_yaxes(range=[0, 1])
        self.figure.update_xaxes(type="category")  # labels such as "1", "10", "2" are names, not numbers
        self.summary = w.HTML()

        def column(title, sliders):
            return w.VBox([w.HTML(f"<b>{html.escape(title)}</b>"), *sliders])

        # Dragging sliders that rescale each other rarely lands on draft == target exactly: a button gets there.
        self.copy_button = w.Button(description="draft = target", tooltip="set the draft to the target: "
                                    "P(accept) = 1, nothing to resample")
        self.copy_button.on_click(lambda _button: self.set_draft(self._values["target"]))
        controls = w.HBox([column("target", self.target_sliders),
                           w.VBox([column("draft", self.draft_sliders), self.copy_button])])
        super().__init__([controls, self.summary, self.figure])
        self._refresh()

    # --- state -------------------------------------------------------------------------------------------
    @property
    def target_probs(self) -> torch.Tensor:
        """The target distribution, float64 ``[V]``."""
        return torch.tensor(self._values["target"], dtype=torch.float64)

    @property
    def draft_probs(self) -> torch.Tensor:
        """The draft distribution, float64 ``[V]``."""
        return torch.tensor(self._values["draft"], dtype=torch.float64)

    @property
    def accepted_mass(self) -> torch.Tensor:
        """``min(target, draft)`` per token: the probability that the step drafts the token and accepts it."""
        return torch.minimum(self.target_probs, self.draft_probs)

    @property
    def accept_probability(self) -> float:
        """P(accept) = Σ min(target, draft) = 1 − TV(target, draft)."""
        return float(self.accepted_mass.sum())

    @property
    def residual(self) -> torch.Tensor:
        """``max(0, target − draft)`` normalised; the target itself when that has zero mass."""
        positive = (self.target_probs - self.draft_probs).clamp_min(0)
        mass = float(positive.sum())
        return positive / mass if mass > 1e-12 else self.target_probs

    @property
    def emit_probs(self) -> torch.Tensor:
        """P(the step emits each token) = accepted mass + (1 − P(accept)) · residual; equals the target."""
        return self.accepted_mass + (1 - self.accept_probability) * self.residual

    def set_target(self, probs: Sequence[float]) -> None:
        """Set all target probabilities at once (normalised); sliders and figure follow."""
        self._set("target", probs)

    def set_draft(self, probs: Sequence[float]) -> None:
        """Set all draft probabilities at once (normalised); sliders and figure follow."""
        self._set("draft", probs)

    # --- internals ---------------------------------------------------------------------------------------
    @staticmethod
    def _slider(label, value):
        return w.FloatSlider(value=value, min=0.0, max=1.0, step=0.01, description=str(label),
                             readout_format=".2f", continuous_update=True,
                             layout=w.Layout(width="260px"), style={"description_width": "48px"})

    def _set(self, which, probs):
        probs = _normalised(probs, f"{which}_probs")
        if len(probs) != len(self.tokens):
            raise ValueError(f"{which}_probs needs {len(self.tokens)} entries, got {len(probs)}")
        self._values[which] = probs
        self._push_sliders(which)
        self._refresh()

    def _on_slider(self, which, index, value):
        if self._syncing:
            return
        old = self._values[which]
        if not math.isfinite(float(value)):  # NaN would spread to every slider and the chart
            self._push_sliders(which)        # back to the values before
            raise ValueError(f"{which} slider {index} ({self.tokens[index]!r}) must be a finite probability in "
                             f"[0, 1], got {value!r}")
        value = min(max(float(value), 0.0), 1.0)
        rest = sum(v for j, v in enumerate(old) if j != index)
        others = len(old) - 1
        new = []
        for j, v in enumerate(old):
            if j == index:
                new.append(value)
            elif rest > 1e-12:
                new.append(v * (1 - value) / rest)  # keep the others' proportions
            else:
                new.append((1 - value) / others)
        self._values[which] = new
        self._push_sliders(which)
        self._refresh()

    def _push_sliders(self, which):
        sliders = self.target_sliders if which == "target" else self.draft_sliders
        self._syncing = True
        try:
            for s, v in zip(sliders, self._values[which]):
                s.value = v
        finally:
            self._syncing = False

    def _refresh(self):
        target, draft = self.target_probs, self.draft_probs
        accepted, residual = self.accepted_mass, self.residual
        alpha = self.accept_probability
        resampled = (1 - alpha) * residual
        tv = 0.5 * float((target - draft).abs().sum())
        # draft == target: nothing is ever resampled, so the panel shows no residual (the property still falls back
        # to the target, lab.sampling's convention, which a chart would show as a residual that is never drawn from)
        shown_residual = residual if tv >= 1e-9 else torch.zeros_like(residual)
        reject = 1 - alpha
        shown_reject = f"{reject:.3f}" if reject >= 0.0005 or reject <= 1e-12 else f"{reject:.1e}"
        with self.figure.batch_update():
            self.figure.data[0].y = target.tolist()
            self.figure.data[1].y = draft.tolist()
            self.figure.data[2].y = accepted.tolist()
            self.figure.data[3].y = resampled.tolist()
            self.figure.data[3].base = accepted.tolist()
            self.figure.data[4].y = self.emit_probs.tolist()
            self.figure.data[5].y = shown_residual.tolist()
            self.figure.layout.title = (f"P(accept) = Σ min(target, draft) = {alpha:.3f}    "
                                        f"P(reject) = {shown_reject}")
        if tv < 1e-9:  # the draft is the target: the residual (target − draft)⁺ is all zeros, nothing to resample
            self.summary.value = (f"P(accept) = <b>{alpha:.3f}</b> = 1 − TV = 1 − {tv:.3f}: the draft equals the "
                                  "target, so every drafted token is accepted; no rejection happens, and the residual "
                                  "is never drawn from.")
            return
        shown_tv = f"{tv:.3f}" if tv >= 0.0005 else f"{tv:.1e}"  # never "1 − 0.000" for a draft that differs
        rare = ("; the draft is within a hair of the target, so a rejection is rare, and when one happens the step"
                if tv < 0.0005 else "; after a rejection the step")
        self.summary.value = (f"P(accept) = <b>{alpha:.3f}</b> = 1 − TV = 1 − {shown_tv}{rare} resamples from the "
                              f"residual, which puts its mass on {html.escape(', '.join(self._residual_support()))}.")

    def _residual_support(self):
        residual = self.residual
        return [t for t, r in zip(self._plain_labels, residual.tolist()) if r > 1e-9] or ["(none)"]
