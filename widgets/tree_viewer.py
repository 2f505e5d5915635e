"""``TreeViewer``: the draft token tree of one speculative step, its accepted path, and its tree attention mask.

Lesson 10 ("Medusa heads and tree attention"). A tree drafter (Medusa, Cai et al. 2024, §2.1.2; SpecInfer, Miao
et al. 2024) proposes several continuations at once as a token tree, and the target checks every node in one
forward pass with a *tree attention mask*: each node sees the committed prefix, its ancestors and itself, never
its siblings or cousins (:mod:`lab.trees`). Verification then walks down the tree and keeps one path.

Pass ``viewer.on_step`` (or the viewer itself) as ``on_step`` to :func:`lab.decode.generate`. Each
:class:`lab.trace.StepRecord` is stored and the newest is drawn as it arrives:

- left, a plotly tree: the root is the last committed token, ``x`` counts tokens after it, so a node of depth d
  (d draft tokens on its path, the course's convention, :mod:`lab.trees`) sits at ``x = d`` and its hover label
  says "depth d"; siblings spread vertically; nodes on the accepted path
  are green, the others grey, and the target's own token (bonus or resampled; after a step that drafted nothing,
  such as the prefill, just the target's token, in ink) hangs after the end of the path;
- right, the tree attention mask over ``[last] + nodes``, with the accepted path's rows in the accepted colour;
- above them, a one-line summary and a slider over the stored steps.

A chain (``record.parents is None``) is drawn as the degenerate tree (:func:`lab.trees.chain_parents`): a straight
line whose mask is the ordinary causal mask. A run's first record, the prefill (``record.prefill``: the target's
forward over the whole prompt), drafted nothing: it is drawn as the prompt's last token (the root) and the first new
token, the target's own, after it. Token text is escaped with :func:`html.escape` before plotly sees it
(plotly renders some HTML tags in text and hover labels). Each node shows the text it adds after the generated
tokens before the step and its ancestors (:func:`widgets.token_text.token_labels`), so a character split over
tokens shows on the node that completes it.
"""
from __future__ import annotations

import html

import ipywidgets
import plotly.graph_objects as go
import torch

from lab.detok import Detokenizer
from lab.trace import StepRecord, check_step_record, own_token_kind, step_records
from lab.trees import chain_parents, check_parents, depths, tree_attention_mask
from lab.validation import check_int
from widgets.style import (ACCEPTED_COLOR, BONUS_COLOR, KIND_LABELS, MUTED_CSS, PLAIN_COLOR, PROMPT_COLOR,
                           REJECTED_COLOR, RESAMPLED_COLOR, slider_position, tint)
from widgets.token_text import (check_tokenizer, prompt_token_ids, run_prompt, run_prompt_length, token_label_text,
                                token_labels)

__all__ = ["TreeViewer", "NODE_STATUSES"]

NODE_STATUSES = ("root", "accepted", "rejected", "bonus", "resampled", "target")
_STATUS_COLORS = {"root": PROMPT_COLOR, "accepted": ACCEPTED_COLOR, "rejected": REJECTED_COLOR,
                  "bonus": BONUS_COLOR, "resampled": RESAMPLED_COLOR, "target": PLAIN_COLOR}
_STATUS_LABELS = {"root": "last committed token", **{k: KIND_LABELS[k] for k in NODE_STATUSES[1:]}}
# Mask cell values: 0 = masked, 1 = may attend (a row off the accepted path), 2 = may attend (a kept row).
_MASK_COLORSCALE = [[0.0, "#FFFFFF"], [0.33, "#FFFFFF"], [0.33, tint(REJECTED_COLOR, 0.55)],
                    [0.67, tint(REJECTED_COLOR, 0.55)], [0.67, ACCEPTED_COLOR], [1.0, ACCEPTED_COLOR]]
# The static mask table: cells styled by the table (gaps, size), each only by its fill.
_MASK_TABLE_CSS = "border-collapse: separate; border-spacing: 1px; font-size: 11px; text-align: center;"
_SUMMARY_WORDS = {"bonus": "bonus", "resampled": "resampled", "target": "own"}  # "then the target's ... token"
_EMPTY_SUMMARY = "waiting for the first step: pass on_step=viewer.on_step to lab.decode.generate"


class TreeViewer(ipywidgets.VBox):
    """The token tree of one speculative step (accepted path highlighted) beside its tree attention mask, live.

    ``TreeViewer(tokenizer=None, max_steps=500, *, prompt_ids=None)``:

    - ``tokenizer``: anything with ``decode(list[int]) -> str``; each node shows the text its token adds after the
      tokens generated before the step (from the records since ``index == 0``) and the node's ancestors, with
      whitespace made visible (``␣``, ``↵``); a node holding part of a character shows ``◌``. None shows token ids.
    - ``max_steps``: how many step records are kept (the oldest are dropped), which bounds memory on long runs.
    - ``prompt_ids``: the prompt of the run (list of ints or a tensor ``[n]`` / ``[1, n]``; None: not known). With
      it, the first record's root (the prefill's, or a hand-built first decode step's) is the prompt's last token
      and its tokens are decoded after the prompt, as later steps' nodes are decoded after the text before them (a
      character split over the prompt's end shows whole). A run whose first record shows another prompt length
      (:func:`widgets.token_text.run_prompt_length`: a prefill's ``target_tokens``) is decoded without it;
      ``clear(prompt_ids)`` sets the prompt for the next run. A prefill record that carries its run's prompt
      (``record.prompt``, from :func:`lab.decode.generate`) is decoded after that prompt, whichever it is.

    Feed it with ``viewer.on_step(record)`` / ``viewer(record)`` (e.g. ``generate(..., on_step=viewer.on_step)``)
    or ``extend(records)``; the newest step is shown as it arrives. A record with ``index == 0`` after earlier steps
    starts a new run (the stored steps are cleared, so re-running a cell works). ``show(i)`` or the slider shows
    stored step ``i`` (a position in ``records``; negative counts from the end); ``clear()`` forgets everything.

    Kernel-side state (what is drawn), for tests and notebook checks:

    - ``records``: the stored :class:`~lab.trace.StepRecord` objects (at most ``max_steps``);
    - ``index``: the position in ``records`` of the shown step (None when empty);
    - ``node_labels``: escaped label of every drawn node — the root (the last committed token's text when the
      previous step is known or, for a run's first step, the prompt was given; else ``"last"``), then the drafted
      nodes in listed order, then the target's own token when it was emitted;
    - ``node_status``: the matching statuses, ``"root"``, ``"accepted"``, ``"rejected"``, then ``"bonus"``,
      ``"resampled"`` or, when the step drafted nothing, ``"target"``; ``node_ids``: the matching token ids (None
      for an unknown root);
    - ``parents``: the shown parents array over the drafted nodes (a chain's is ``chain_parents(n)``);
    - ``mask``: the BoolTensor ``[1 + n, 1 + n]`` drawn on the right, the tree attention mask over
      ``[last] + nodes`` — ``lab.trees.tree_attention_mask([-1] + [p + 1 for p in parents], 0)``, as the decode
      loop builds it (None when empty);
    - ``summary``: the one-line plain-text summary (step index, nodes drafted, depth, accepted length, kind),
      shown escaped in ``summary_widget``;
    - ``tree_figure`` and ``mask_figure``: the two plotly ``FigureWidget`` objects;
    - ``html``: the shown step as static HTML (nested lists and a mask table), which ``_repr_html_`` gives to views
      that cannot run widgets.

    Raises ``ValueError`` for ``max_steps`` < 1 and for a record whose parents array or path is malformed;
    ``TypeError`` for a ``tokenizer`` without ``decode`` (token ids passed first, say) and ``TypeError`` /
    ``ValueError`` for ``prompt_ids`` that are not token ids of the tokenizer's vocabulary
    (:func:`widgets.token_text.prompt_token_ids`).
    """

    def __init__(self, tokenizer=None, max_steps: int = 500, *, prompt_ids=None, **kwargs):
        max_steps = check_int("max_steps", max_steps, 1)
        self._tokenizer = check_tokenizer(tokenizer)
        self._prompt = prompt_token_ids(tokenizer, prompt_ids)
        self.max_steps = max_steps
        self._records: list = []
        self._roots: list = []  # the last committed token id before each stored step (None when unknown)
        self._root_labels: list = []  # ... and its label
        self._contexts: list = []  # the Detokenizer of the generated text before each stored step (or None)
        self._context = None  # the Detokenizer after the newest step's emitted tokens
        self._last_label = None  # the label of the newest step's last emitted token
        self._view: dict | None = None

        self._slider = ipywidgets.IntSlider(value=0, min=0, max=0, description="step", disabled=True,
                                            layout=ipywidgets.Layout(width="420px"))
        self.summary_widget = ipywidgets.HTML()
        self.tree_figure = go.FigureWidget(
            data=[go.Scatter(name="edge", mode="lines", x=[], y=[], hoverinfo="skip", showlegend=False,
                             line=dict(color=REJECTED_COLOR, width=1.5)),
                  go.Scatter(name="accepted path", mode="lines", x=[], y=[], hoverinfo="skip", showlegend=False,
                             line=dict(color=ACCEPTED_COLOR, width=4)),
                  go.Scatter(name="target's token", mode="lines", x=[], y=[], hoverinfo="skip", showlegend=False,
                             line=dict(color=BONUS_COLOR, width=2, dash="dot"))]
            + [go.Scatter(name=_STATUS_LABELS[status], mode="markers+text", x=[], y=[], text=[],
                          textposition="top center", hoverinfo="text", cliponaxis=False,
                          marker=dict(size=14, color=_STATUS_COLORS[status], line=dict(color="#333", width=1)))
               for status in NODE_STATUSES],
            layout=go.Layout(width=640, height=380, margin=dict(l=30, r=10, t=40, b=50),
                             title=dict(text="draft tree", font=dict(size=13)),
                             xaxis=dict(title=dict(text="tokens after the last committed one"), dtick=1,
                                        zeroline=False),
                             yaxis=dict(visible=False, autorange="reversed"),
                             legend=dict(yanchor="top", y=1.0, x=1.02), plot_bgcolor="#FAFAFA"),
        )
        self.mask_figure = go.FigureWidget(
            data=[go.Heatmap(z=[], zmin=0, zmax=2, colorscale=_MASK_COLORSCALE, showscale=False, xgap=1, ygap=1,
                             hoverinfo="text")],
            layout=go.Layout(width=440, height=420, margin=dict(l=70, r=10, t=40, b=70),
                             title=dict(text="tree attention mask (row attends to column)", font=dict(size=13)),
                             xaxis=dict(side="bottom", tickangle=-60), yaxis=dict(autorange="reversed"),
                             plot_bgcolor="#FFFFFF"),
        )
        self._slider.observe(lambda change: self._render(), names="value")
        super().__init__(children=[self._slider, self.summary_widget,
                                   ipywidgets.HBox([self.tree_figure, self.mask_figure])], **kwargs)
        self._render()

    # --- feeding ---------------------------------------------------------------------------------------------
    def __call__(self, record: StepRecord) -> None:
        self.on_step(record)

    def on_step(self, record: StepRecord) -> None:
        """Store one step record and show it (the live view follows the newest step)."""
        check_step_record(record, "TreeViewer.on_step")
        self._layout_of(record)  # validate before storing, so a bad record leaves the viewer as it was
        if record.index == 0 and self._records:
            self.clear()
        previous = self._records[-1] if self._records else None
        # The root is the previous step's last token, when that step is the one just before this one; otherwise
        # the text before this step is unknown and its nodes are decoded from scratch.
        follows = previous is not None and previous.index == record.index - 1
        root = int(previous.emitted[-1]) if follows and previous.emitted else None
        if not follows:
            self._context = None if self._tokenizer is None else Detokenizer(self._tokenizer)
            # A run's first record follows the prompt it names (a prefill record's record.prompt), else the stored
            # one, unless the record says the prompt had another length.
            ids = run_prompt(record) if record.index == 0 else None
            if ids is None and record.index == 0 and run_prompt_length(record) in (None, len(self._prompt)):
                ids = self._prompt
            if ids:
                root = ids[-1]
                if self._context is not None:
                    for token in ids[:-1]:
                        self._context.push(token)
                    self._last_label = token_label_text(self._context.push(root))
                else:
                    self._last_label = str(root)
        self._records.append(record)
        self._roots.append(root)
        self._root_labels.append(None if root is None else self._last_label)
        self._contexts.append(None if self._context is None else self._context.fork())
        emitted = [int(t) for t in record.emitted]
        for token in emitted:
            self._last_label = str(token) if self._context is None else token_label_text(self._context.push(token))
        if len(self._records) > self.max_steps:
            del self._records[0], self._roots[0], self._root_labels[0], self._contexts[0]
        last = len(self._records) - 1
        self._slider.disabled = False
        self._slider.max = last
        if self._slider.value == last:
            self._render()
        else:
            self._slider.value = last  # renders through the observer

    def extend(self, records) -> "TreeViewer":
        """Feed several step records in order: an iterable of :class:`~lab.trace.StepRecord` or a finished
        :class:`~lab.trace.Generation` (its ``steps``); returns ``self``. Raises ``TypeError`` for anything else
        (:func:`lab.trace.step_records`), before any record is shown."""
        for record in step_records(records, "TreeViewer.extend"):
            self.on_step(record)
        return self

    def show(self, index: int) -> None:
        """Show stored step ``index``: a position in ``records``, an integer in ``[-len(records), len(records) - 1]``
        (negative counts from the end).

        Raises ``ValueError`` naming ``index`` and the allowed range for a non-integer (bools and floats included),
        a position outside the stored steps, or a viewer with no steps yet."""
        self._slider.value = slider_position("index", index, len(self._records), "steps", " stored")

    def clear(self, prompt_ids=None) -> None:
        """Forget every stored step and empty the figures; ``prompt_ids``, if given, replaces the prompt (``[]``
        removes it) for the next run."""
        if prompt_ids is not None:
            self._prompt = prompt_token_ids(self._tokenizer, prompt_ids)
        self._records, self._roots, self._root_labels, self._contexts = [], [], [], []
        self._context = self._last_label = None
        self._slider.value = 0
        self._slider.max = 0
        self._slider.disabled = True
        self._render()

    # --- readable state ------------------------------------------------------------------------------------
    @property
    def records(self) -> list:
        """The step records shown so far (a copy)."""
        return list(self._records)

    @property
    def index(self):
        """The index of the step the slider shows, or None before the first record."""
        return self._slider.value if self._records else None

    @property
    def node_labels(self) -> list:
        """Drawn node labels (escaped): root, each draft node, then the target's token if any."""
        return list(self._view["labels"]) if self._view else []

    @property
    def node_status(self) -> list:
        """Each drawn node's status: "root", "accepted", "rejected", then "bonus", "resampled" or "target" (nothing
        drafted)."""
        return list(self._view["status"]) if self._view else []

    @property
    def node_ids(self) -> list:
        """Each drawn node's token id (None for an unknown root)."""
        return list(self._view["ids"]) if self._view else []

    @property
    def parents(self):
        """The shown step's tree parents (-1 = the last committed token), or None before the first record."""
        return list(self._view["parents"]) if self._view else None

    @property
    def mask(self):
        """The shown step's tree attention mask, bool ``[n + 1, n + 1]`` (root first; True = may attend), or None."""
        return self._view["mask"].clone() if self._view else None

    @property
    def summary(self) -> str:
        """One sentence on the shown step: what was drafted, the accepted path and the next token."""
        return self._view["summary"] if self._view else _EMPTY_SUMMARY

    @property
    def html(self) -> str:
        """A self-contained HTML rendering of the shown step, for views that cannot run widgets (nbconvert, GitHub,
        a reopened notebook; also ``_repr_html_``): the summary, the tree as nested lists (root first, children in
        listed order, each node in its status's colour and named by it) and the tree attention mask as a table of
        cells (■: may attend; the accepted path's rows in the accepted colour). Token text is escaped; inline
        styles only, no script."""
        view = self._view
        if view is None:
            return f'<div class="sdl-tree-viewer" style="{MUTED_CSS}">{html.escape(_EMPTY_SUMMARY)}</div>'
        kids = view["kids"]

        def item(node) -> str:
            status = view["status"][node]
            color = _STATUS_COLORS[status]
            strike = " text-decoration: line-through;" if status == "rejected" else ""
            text = (f'<span style="background: {tint(color)}; border-bottom: 2px solid {color};{strike}">'
                    f'{view["labels"][node]}</span> <span style="{MUTED_CSS}">{html.escape(_STATUS_LABELS[status])}'
                    "</span>")
            below = "".join(item(child) for child in kids[node])
            return f"<li>{text}{f'<ul>{below}</ul>' if below else ''}</li>"

        names = view["labels"][: len(view["z"])]
        header = "".join(f"<th>{k}</th>" for k in range(len(names)))
        rows = []
        for r, name in enumerate(names):
            cells = []
            for value in view["z"][r]:  # the heatmap's own cells: 2 on a kept row (root, path), 1 on another, 0 masked
                fill = {2: ACCEPTED_COLOR, 1: tint(REJECTED_COLOR, 0.55)}.get(value, "#FFFFFF")
                cells.append(f'<td style="background: {fill};">{"■" if value else "·"}</td>')
            rows.append(f'<tr><th style="text-align: right;">{r} {name}</th>{"".join(cells)}</tr>')
        return (f'<div class="sdl-tree-viewer"><div style="font-size: 13px;">{html.escape(view["summary"])}</div>'
                f'<div style="{MUTED_CSS}">draft tree (root: the last committed token)</div>'
                f'<ul style="margin: 2px 0;">{item(0)}</ul>'
                f'<div style="{MUTED_CSS}">tree attention mask (row attends to column; ■ may attend)</div>'
                f'<table style="{_MASK_TABLE_CSS}"><tr><th></th>{header}</tr>{"".join(rows)}</table></div>')

    def _repr_html_(self) -> str:
        # Static fallback for exporters that cannot run widgets (the step shown at display time).
        return self.html

    # --- internals ------------------------------------------------------------------------------------------
    @staticmethod
    def _layout_of(record):
        """(parents, path, next token or None) of a record; raises ``ValueError`` if they do not fit together."""
        drafted = list(record.drafted)
        parents = chain_parents(len(drafted)) if record.parents is None else check_parents(record.parents)
        if len(parents) != len(drafted):
            raise ValueError(f"step {record.index}: parents has {len(parents)} entries for {len(drafted)} drafts")
        path = [int(i) for i in record.path]
        expected = -1
        for node in path:  # each accepted node must hang under the previous one
            if not 0 <= node < len(parents) or parents[node] != expected:
                raise ValueError(f"step {record.index}: path {path} is not a path down the tree {parents}")
            expected = node
        # The target's own token is the one after the accepted ones, unless EOS / max_new_tokens cut it off.
        emitted = list(record.emitted)
        next_token = int(emitted[-1]) if len(emitted) > int(record.num_accepted) else None
        return parents, path, next_token

    def _build(self, position: int) -> dict:
        """Everything drawn for stored step ``position``."""
        record, root, context = self._records[position], self._roots[position], self._contexts[position]
        parents, path, next_token = self._layout_of(record)
        drafted = [int(t) for t in record.drafted]
        n = len(drafted)
        on_path = set(path)
        node_depth = depths(parents).tolist()

        # Drawn nodes: 0 = root, 1..n = drafts, n + 1 = the target's token; parent indices in that numbering.
        # Node labels are whitespace made visible, not yet escaped.
        ids = [root] + drafted
        raw = ["last" if root is None else self._root_labels[position]]
        raw += token_labels(self._tokenizer, drafted, context, parents)
        status = ["root"] + ["accepted" if i in on_path else "rejected" for i in range(n)]
        up = [None] + [p + 1 for p in parents]
        x = [0] + [d + 1 for d in node_depth]
        hover_depth = ["0 (root)"] + [str(d + 1) for d in node_depth]  # depth = tokens on the path (lab.trees)
        if next_token is not None:
            ids.append(next_token)
            # The target's token follows the accepted path.
            raw.append(token_labels(self._tokenizer, [drafted[i] for i in path] + [next_token], context)[-1])
            kind = own_token_kind(record)  # "target" after a step that drafted nothing (the prefill, a lookup miss)
            status.append(kind if kind in ("bonus", "resampled", "target") else "bonus")
            up.append(path[-1] + 1 if path else 0)
            x.append(len(path) + 1)
            hover_depth.append(str(len(path) + 1))

        # Leaves take consecutive rows in depth-first, listed order; a parent sits level with its first child, so
        # the first-listed (most likely) continuation reads as a straight line and a chain stays straight.
        kids = [[] for _ in ids]
        for node, parent in enumerate(up):
            if parent is not None:
                kids[parent].append(node)
        y = [0.0] * len(ids)
        row, stack = 0, [0]
        while stack:
            node = stack.pop()
            if kids[node]:
                stack.extend(reversed(kids[node]))
            else:
                y[node] = float(row)
                row += 1
        for node in range(len(ids) - 1, -1, -1):  # parents come before children, so walk backwards
            if kids[node]:
                y[node] = y[kids[node][0]]

        labels = [html.escape(text, quote=False) for text in raw]  # plotly text: &, <, > only
        hover = []
        for k, (token, s) in enumerate(zip(ids, status)):
            token_id = "unknown" if token is None else str(token)
            hover.append(f"{labels[k]}<br>id {token_id} · depth {hover_depth[k]} · position +{x[k]} after the "
                         f"last committed token<br>{html.escape(_STATUS_LABELS[s])}")

        mask = tree_attention_mask([-1] + [p + 1 for p in parents], 0)
        kept_rows = [0] + [i + 1 for i in path]
        z = mask.to(torch.int64)
        z[kept_rows] *= 2
        mask_labels = labels[: n + 1]
        mask_hover = [[f"{mask_labels[r]} → {mask_labels[c]}: {'may attend' if mask[r, c] else 'masked'}"
                       for c in range(n + 1)] for r in range(n + 1)]

        summary = self._summary(record, n, path, next_token, raw[-1] if next_token is not None else None, status)
        return {"record": record, "ids": ids, "labels": labels, "status": status, "parents": parents, "x": x,
                "y": y, "up": up, "kids": kids, "hover": hover, "mask": mask, "z": z.tolist(), "mask_hover": mask_hover,
                "summary": summary, "leaves": max(row, 1)}

    @staticmethod
    def _summary(record, n, path, next_token, next_text, status) -> str:
        shape = "chain" if record.parents is None else "tree"
        drafted = (f"{n} node{'s' if n != 1 else ''} drafted ({shape}), depth {record.depth}" if n
                   else "nothing drafted")
        if record.prefill:  # no draft can come before the first new token
            text = (f"step {record.index}: the prefill, the target's forward over the {record.target_tokens}-token "
                    "prompt")
        else:
            text = f"step {record.index}: {drafted}; {len(path)} accepted"
        if next_token is not None:
            text += f", then the target's {_SUMMARY_WORDS[status[-1]]} token {next_text!r}"
        if record.truncated:
            text += "; cut short by EOS or max_new_tokens"
        return text

    def _render(self) -> None:
        self._view = self._build(self._slider.value) if self._records else None
        view = self._view
        muted = f'<div style="{MUTED_CSS}">'
        if view is None:
            self.summary_widget.value = muted + html.escape(_EMPTY_SUMMARY) + "</div>"
        else:
            where = f"stored step {self._slider.value + 1} of {len(self._records)}"
            self.summary_widget.value = (f'<div style="font-size: 13px;">{html.escape(view["summary"])}</div>'
                                         f"{muted}{html.escape(where)}</div>")
        edges, path_edges, next_edge, *node_traces = self.tree_figure.data
        with self.tree_figure.batch_update():  # one message to the browser per redraw, however many traces change
            if view is None:
                for trace in self.tree_figure.data:
                    trace.x, trace.y = [], []
                for trace in node_traces:
                    trace.text, trace.hovertext, trace.showlegend = [], [], False
            else:
                segments = {"edge": ([], []), "path": ([], []), "next": ([], [])}
                for node, parent in enumerate(view["up"]):
                    if parent is None:
                        continue
                    s = view["status"][node]
                    key = ("path" if s == "accepted" else
                           "next" if s in ("bonus", "resampled", "target") else "edge")
                    xs, ys = segments[key]
                    xs += [view["x"][parent], view["x"][node], None]
                    ys += [view["y"][parent], view["y"][node], None]
                for trace, key in ((edges, "edge"), (path_edges, "path"), (next_edge, "next")):
                    trace.x, trace.y = segments[key]
                next_edge.line.color = _STATUS_COLORS[view["status"][-1]] if segments["next"][0] else BONUS_COLOR
                for trace, status in zip(node_traces, NODE_STATUSES):
                    chosen = [k for k, s in enumerate(view["status"]) if s == status]
                    trace.x = [view["x"][k] for k in chosen]
                    trace.y = [view["y"][k] for k in chosen]
                    trace.text = [view["labels"][k] for k in chosen]
                    trace.hovertext = [view["hover"][k] for k in chosen]
                    trace.showlegend = bool(chosen)
                self.tree_figure.layout.height = max(300, 28 * view["leaves"] + 120)
                prefill = " (the prefill: nothing drafted)" if view["record"].prefill else ""
                self.tree_figure.layout.title.text = html.escape(f"draft tree, step {view['record'].index}{prefill}")
        (heatmap,) = self.mask_figure.data
        with self.mask_figure.batch_update():
            if view is None:
                heatmap.z, heatmap.text = [], []
                self.mask_figure.layout.xaxis.tickvals = self.mask_figure.layout.yaxis.tickvals = []
            else:
                ticks = list(range(len(view["z"])))
                heatmap.z, heatmap.text = view["z"], view["mask_hover"]
                # Numeric axes with tick text: two nodes with the same token must keep separate rows.
                for axis in (self.mask_figure.layout.xaxis, self.mask_figure.layout.yaxis):
                    axis.tickvals = ticks
                    axis.ticktext = view["labels"][: len(ticks)]
