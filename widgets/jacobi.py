"""``JacobiViewer``: a Jacobi iteration run as a grid, one row per iteration, one column per window position.

Each cell is the window's guess at that position after that many updates (:func:`lab.drafters.lookahead.
jacobi_decode`). Cells in the **converged** prefix (equal to the fixed point, with every position before them equal
too, so they can no longer change) are highlighted; cells that already hold their final token but could still
change are outlined; cells that changed in this iteration are bold. A slider steps through the iterations, and a
line compares the number of iterations with the window size W (Jacobi needs at most W updates, plus one to see
that nothing changes). State is kept on the kernel side (``grid``, ``converged_counts``, ``iteration``,
``summary``, ``html``); token text is escaped.
"""
from __future__ import annotations

import html

import ipywidgets

from lab.drafters.lookahead import JacobiRun, converged_prefix
from widgets.style import ACCEPTED_COLOR, BONUS_COLOR, MUTED_CSS, PROMPT_COLOR, slider_position, tint
from widgets.token_text import check_tokenizer, token_labels

__all__ = ["JacobiViewer", "CELL_STATES"]

CELL_STATES = ("converged", "correct", "guess")
_STATE_LABELS = {"converged": "converged (fixed from now on)", "correct": "already right, may still change",
                 "guess": "guess"}
_STATE_CSS = {
    "converged": f"background: {tint(ACCEPTED_COLOR, 0.35)}; border: 1px solid {ACCEPTED_COLOR};",
    "correct": f"border: 1px dashed {ACCEPTED_COLOR};",
    "guess": f"border: 1px solid {tint(PROMPT_COLOR, 0.5)};",
}
_CELL_CSS = ("display: inline-block; min-width: 3.2em; padding: 1px 3px; margin: 1px; border-radius: 3px; "
             "font-family: monospace; font-size: 12px; text-align: center; white-space: pre;")


class JacobiViewer(ipywidgets.VBox):
    """The windows of a :class:`~lab.drafters.lookahead.JacobiRun`, iteration by iteration.

    ``JacobiViewer(run=None, tokenizer=None)``: ``run`` from :func:`lab.drafters.lookahead.jacobi_decode` (or set
    later with ``show_run``); ``tokenizer`` labels each cell with the text its token adds after the cells before it
    in its row (:func:`widgets.token_text.token_labels`; None shows ids).

    Kernel-side state: ``grid`` (one list per iteration of cell dicts ``token_id``, ``text``, ``state`` in
    ``converged | correct | guess``, ``changed``), ``converged_counts`` (converged prefix per iteration),
    ``newly_converged`` (how many positions converged at each update), ``iteration`` (rows shown: 0..iteration;
    ``step_to(t)`` moves it), ``summary`` and ``html``. Raises ``TypeError`` for a run that is not a
    ``JacobiRun`` and for a ``tokenizer`` without a callable ``decode`` (:func:`widgets.token_text.check_tokenizer`).
    """

    def __init__(self, run: JacobiRun | None = None, tokenizer=None, **kwargs):
        self._tokenizer = check_tokenizer(tokenizer)  # token ids passed second by mistake, say
        self._run = None
        self._grid: list = []
        self._slider = ipywidgets.IntSlider(value=0, min=0, max=0, description="iteration",
                                            layout=ipywidgets.Layout(width="420px"))
        self._view = ipywidgets.HTML()
        legend = " ".join(f'<span style="{_CELL_CSS} {_STATE_CSS[s]}">{html.escape(_STATE_LABELS[s])}</span>'
                          for s in CELL_STATES)
        self._slider.observe(lambda change: self._render(), names="value")
        super().__init__(children=[ipywidgets.HTML(f'<div style="{MUTED_CSS}">{legend}</div>'), self._slider,
                                   self._view], **kwargs)
        if run is not None:
            self.show_run(run)
        else:
            self._render()

    def show_run(self, run: JacobiRun) -> None:
        """Display ``run`` (all iterations shown). Raises ``TypeError`` unless it is a ``JacobiRun``."""
        if not isinstance(run, JacobiRun):
            raise TypeError(f"run must be a lab.drafters.lookahead.JacobiRun, got {type(run).__name__}")
        self._run = run
        final = run.fixed_point
        self._grid = []
        for t, window in enumerate(run.iterations):
            done = converged_prefix(window, final) if run.converged else 0
            previous = run.iterations[t - 1] if t else None
            labels = token_labels(self._tokenizer, window)  # a row is one guessed continuation: decode it in order
            row = []
            for i, token in enumerate(window):
                state = "converged" if i < done else ("correct" if run.converged and token == final[i] else "guess")
                row.append({"token_id": int(token), "text": labels[i], "state": state,
                            "changed": previous is not None and previous[i] != token})
            self._grid.append(row)
        self._slider.max = len(self._grid) - 1
        if self._slider.value == self._slider.max:
            self._render()
        else:
            self._slider.value = self._slider.max

    def step_to(self, iteration: int) -> None:
        """Show iterations 0..``iteration`` (negative counts from the end, as in the other viewers). Raises
        ``ValueError`` naming ``iteration`` and the allowed range for a value outside the run or not an integer
        (floats and bools included)."""
        self._slider.value = slider_position("iteration", iteration, len(self._grid), "iterations")

    # --- readable state ------------------------------------------------------------------------------------
    @property
    def grid(self) -> list:
        """The run as rows of cells, one row per iteration: dicts with ``token_id``, ``text``, ``state``
        ("converged" | "correct" | "guess") and ``changed`` (differs from the row before). A copy."""
        return [list(row) for row in self._grid]

    @property
    def iteration(self) -> int:
        """The iteration the slider shows (0 = the initial guess)."""
        return self._slider.value

    @property
    def converged_counts(self) -> list:
        """The converged prefix length of each row (list[int], one per iteration)."""
        return [sum(cell["state"] == "converged" for cell in row) for row in self._grid]

    @property
    def newly_converged(self) -> list:
        """Positions that joined the converged prefix at each update (length = number of updates)."""
        counts = self.converged_counts
        return [b - a for a, b in zip(counts, counts[1:])]

    @property
    def summary(self) -> str:
        """One sentence on the run: how many updates until every position converged, and the target calls."""
        run = self._run
        if run is None:
            return "no Jacobi run yet: call show_run(jacobi_decode(target, prompt_ids, window=W))"
        if not run.converged:
            return (f"window W = {run.window}: not converged after {run.target_calls} target calls "
                    "(raise max_iterations)")
        first_full = self.converged_counts.index(run.window)
        return (f"window W = {run.window}: every position had converged after {first_full} updates "
                f"(the greedy continuation; at most W = {run.window}), confirmed by a last one — "
                f"{run.target_calls} target calls for {run.window} tokens")

    @property
    def html(self) -> str:
        """The grid up to the shown iteration as HTML (token text escaped)."""
        rows = []
        for t, row in enumerate(self._grid[: self.iteration + 1]):
            cells = []
            for i, cell in enumerate(row):
                css = _CELL_CSS + " " + _STATE_CSS[cell["state"]] + (" font-weight: bold;" if cell["changed"] else "")
                title = f"iteration {t} · position {i} · id {cell['token_id']} · {_STATE_LABELS[cell['state']]}"
                cells.append(f'<span title="{html.escape(title)}" style="{css}">{html.escape(cell["text"])}</span>')
            count = sum(c["state"] == "converged" for c in row)
            rows.append(f'<div><span style="{MUTED_CSS} display: inline-block; width: 5.5em;">iter {t}</span>'
                        f'{"".join(cells)}<span style="{MUTED_CSS} color: {BONUS_COLOR};"> {count} converged'
                        f"</span></div>")
        return (f'<div class="sdl-jacobi"><div style="{MUTED_CSS}">{html.escape(self.summary)}</div>'
                + "".join(rows) + "</div>")

    def _repr_html_(self) -> str:
        return self.html

    def _render(self) -> None:
        self._view.value = self.html
