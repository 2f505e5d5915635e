"""``TokenStream``: a live view of speculative decoding, one coloured token at a time.

Pass the widget as ``on_step`` to :func:`lab.decode.generate`; every :class:`lab.trace.StepRecord` (one per target
call) appends the step's tokens: accepted drafts, rejected drafts struck through where they were proposed, and the
target's own token (resampled after a rejection, the bonus token after a full acceptance, or, when the step drafted
nothing, plainly the target's token, kind ``"target"``). The first record, the prefill over the prompt, adds the first
new token as the target's own (``"target"``). A stats line keeps the running
acceptance rate, tokens per target call and tokens/s. Selecting a generated token (click it, or call
``select(position)``) plots the target, draft and residual distributions at that position.

Everything the view shows is also kept on the kernel side (``tokens``, ``stats``, ``stats_text``, ``html``,
``selected``, ``selection``, ``chart``), so tests and notebook checks can assert on it without a browser.
Token text is only ever put in the page as text: the browser view sets ``textContent``, and the static HTML and the
chart labels are escaped with :func:`html.escape`. Each token shows the text it adds to the decoded sequence
(:class:`lab.detok.Detokenizer`), so a character whose bytes span several tokens shows once, on the token that
completes it, instead of as U+FFFD on each.

The pieces live apart: token text and labels in :mod:`widgets.token_text`, token-tree steps drawn as chains in
:mod:`widgets.tree_steps`, what selecting a token shows in :mod:`widgets.token_details`, and the browser view's
JavaScript and CSS in ``widgets/static/token_stream.js`` / ``.css`` (read here at import time). The helpers that
lived in this module stay importable from it.
"""
from __future__ import annotations

import html

import anywidget
import ipywidgets
import plotly.graph_objects as go
import traitlets

from lab.detok import Detokenizer
from lab.trace import Generation, StepRecord, check_step_record, own_token_kind, step_records
from lab.validation import check_int, is_integer
from lab.words import acceptance_phrase
from widgets.style import (DRAFT_COLOR, GENERATED_KINDS, KIND_COLORS, KIND_LABELS, MUTED_CSS, RESIDUAL_COLOR,
                           TARGET_COLOR, chart_labels, css_rules, static_text, tint)
from widgets.token_details import describe, step_details
from widgets.token_text import (check_tokenizer, has_special_token, prompt_token_ids, run_prompt, run_prompt_length,
                                 token_display_text, token_label_text, token_texts)
from widgets.tree_steps import chain_view, tree_residual

__all__ = ["TokenStream", "VIEW_CSS", "VIEW_ESM", "TAIL_TOKENS"]

# --- how each kind of token looks: one stylesheet (widgets/static/token_stream.css), used by the browser view and,
# as inline styles, by the static HTML; its var(--sdl-<kind>) colours come from the shared palette.
_PALETTE = {name: value for kind, color in KIND_COLORS.items()
            for name, value in ((kind, color), (f"{kind}-tint", tint(color)))}
VIEW_CSS, _RULES = css_rules(static_text("token_stream.css"), _PALETTE)
_STREAM_CSS = _RULES[".sdl-stream"]
_BASE_CSS = _RULES[".sdl-tok:not(.sdl-prompt)"]  # every token but the prompt's, which reads as plain text
_SELECTED_CSS = _RULES[".sdl-selected"]
_KIND_CSS = {kind: _RULES[f".sdl-{kind}"] for kind in KIND_COLORS}
_SPECIAL_CSS = _RULES[".sdl-special"]  # a special token's badge (<|im_end|> shown as ⟨end⟩)
VIEW_ESM = static_text("token_stream.js")


class _TokenView(anywidget.AnyWidget):
    """Browser half of :class:`TokenStream` (``widgets/static/token_stream.js``): renders ``tokens`` then ``tail``
    and reports a click as ``selected``.

    ``tokens`` and ``tail`` hold compact dicts: ``s`` display text, ``k`` kind, ``p`` the generated position a click
    selects (-1: not selectable), ``i`` token id, ``n`` step (-1 for the prompt), ``t`` the tooltip, ``x`` True for
    a special token (drawn as a badge). A live step sets ``tail`` only (at most :data:`TAIL_TOKENS` tokens and the
    newest step's), so it costs the same late in a long run as early; ``tokens`` is sent again when the tail
    grows past that, or for a new run. ``selected`` is a generated position, -1 for none.
    """

    _esm = VIEW_ESM
    _css = VIEW_CSS
    tokens = traitlets.List().tag(sync=True)
    tail = traitlets.List().tag(sync=True)
    selected = traitlets.Int(-1).tag(sync=True)


TAIL_TOKENS = 256
"""How many of the newest shown tokens a live step resends to the browser before they move into the view's
``tokens`` (sent whole then, once every ~256 tokens). Before, every step resent every token: at 1,000 steps the
kernel spent about 11 ms a step building the list (measured without a browser; 1 ms now) and sent about 500 kB."""


def _legend_html() -> str:
    items = []
    for kind in ("accepted", "rejected", "resampled", "bonus", "target", "prompt"):
        items.append(f'<span style="{_BASE_CSS} {_KIND_CSS[kind]}">{html.escape(KIND_LABELS[kind])}</span>')
    return f'<div style="{MUTED_CSS} line-height: 2;">' + " ".join(items) + "</div>"


class TokenStream(ipywidgets.VBox):
    """Live view of a speculative decoding run; pass it as ``on_step`` to :func:`lab.decode.generate`.

    ``TokenStream(tokenizer, prompt_ids=ids, *, top_k=6, chart_height=320, show_speed=True)``:

    - ``tokenizer``: anything with ``decode(list[int]) -> str`` (a transformers tokenizer); each token shows the
      text it adds to the decoded prompt + accepted tokens (:class:`lab.detok.Detokenizer`), so the shown text is
      ``tokenizer.decode`` of them. A token holding only part of a character shows nothing; the token completing it
      shows the character; while the generated text ends inside a character, its last token shows what
      ``tokenizer.decode`` shows there (U+FFFD), so a run cut inside a character still shows it. A rejected draft
      shows what it would have added after the accepted tokens before it. A special token (a chat template's
      ``<|im_start|>``, the answer's closing ``<|im_end|>``) shows as a small badge, ``⟨start⟩`` / ``⟨end⟩``
      (:func:`widgets.token_text.special_token_text`), its literal text in the tooltip. ``None`` shows ids as
      ``⟨17⟩``.
    - ``prompt_ids``: the prompt, or its last tokens, shown muted before the generated tokens (list of ints, or an
      integer tensor ``[n]`` / ``[1, n]``; ids below ``len(tokenizer)`` when it has a length); may be omitted.
    - ``top_k``: how many most likely tokens of each distribution the chart shows (their union is plotted).
    - ``chart_height``: height of the probability chart in pixels (an integer >= 10, plotly's minimum).
    - ``show_speed``: whether the stats line ends with tokens/s over draft + verify time (``stats`` always has it);
      the race turns it off, as its header shows each side's tokens/s over its own compute clock.

    Calling the widget with a :class:`~lab.trace.StepRecord` (or ``on_step(record)``) appends that step and updates
    the browser at once; ``extend`` takes a list of records or a finished :class:`~lab.trace.Generation`. A token
    tree step (Medusa, EAGLE with ``tree=``) is drawn as its accepted path (:func:`chain_view`) while ``steps`` and
    ``stats`` keep the whole tree. A run's first record from :func:`lab.decode.generate` is its prefill
    (``record.prefill``): the target's forward over the whole prompt, whose token, the first new one, shows as the
    target's own (``target``) token of step 0. A record with ``index == 0`` starts a new run: earlier generated
    tokens are cleared and the prompt is kept (so re-running a notebook cell with the same widget works). The
    stored prompt belongs to the first run after it was set: a run is shown without it, rather than decoded after
    the wrong text, when the prompt length its first record shows (:func:`widgets.token_text.run_prompt_length`:
    a prefill's ``target_tokens``) is shorter than the stored prompt, or differs from that first run's (the widget
    reused for a run on another prompt); a longer one is fine, as the stored prompt may be the run's last tokens.
    The prompt returns for a later run on its own; ``reset(prompt_ids)`` replaces it. A first record that carries its
    run's prompt (``record.prompt``: the prefill record of :func:`lab.decode.generate`;
    :func:`widgets.token_text.run_prompt`) is checked by its tokens instead: the stored prompt is shown when it is
    the end of the run's prompt, and otherwise the run's own prompt is, also one of the same length.

    Raises ``TypeError`` for a ``tokenizer`` without a callable ``decode``, ``prompt_ids`` that are not integer
    token ids (text, floats, bools) and a ``show_speed`` that is not a bool; ``ValueError`` for
    prompt ids outside ``[0, len(tokenizer))`` or a tensor that is not one sequence, ``top_k`` < 1,
    ``chart_height`` < 10, and a record that contradicts itself (see :meth:`on_step`).

    Kernel-side state (what the view shows): ``tokens`` (list of dicts with ``text``, ``token_id``, ``kind`` in
    ``prompt | accepted | rejected | resampled | bonus | target`` (``target``: a step that drafted nothing),
    ``step`` and ``position``; ``text`` is ``""`` for a token
    holding only part of a character), ``generated_ids``, ``steps``,
    ``stats`` / ``stats_text``, ``html`` (the escaped static rendering, also ``_repr_html_``), ``selected``
    (a generated position or None), ``selection`` (what the chart shows), ``detail_text`` and ``chart`` (a plotly
    ``FigureWidget`` with bar traces ``target``, ``draft``, ``residual``, built on first use).
    """

    def __init__(self, tokenizer=None, prompt_ids=None, *, top_k: int = 6, chart_height: int = 320,
                 show_speed: bool = True, **kwargs):
        top_k = check_int("top_k", top_k, 1)
        chart_height = check_int("chart_height", chart_height, 10)  # plotly's smallest figure height
        if not isinstance(show_speed, bool):
            raise TypeError(f"show_speed must be True or False, got {type(show_speed).__name__} {show_speed!r}")
        self._tokenizer = check_tokenizer(tokenizer)
        prompt_ids = prompt_token_ids(tokenizer, prompt_ids)  # checked before any widget exists
        self._show_speed = show_speed
        self._top_k = top_k
        self._prompt_ids: list = []      # the prompt given (constructor or reset)
        self._shown_prompt: list = []    # the prompt the current run follows: _prompt_ids, or [] (see on_step)
        self._prompt_length = None       # prompt length of the first run shown with _prompt_ids (None: none yet)
        self._prompt_text = None         # Detokenizer after the prompt (None without a tokenizer)
        self._text = None                # Detokenizer after the prompt and the generated tokens
        self._contexts: list = []        # per generated position: the Detokenizer before it (for labels there)
        self._prompt_tokens: list = []
        self._generated: list = []       # token dicts after the prompt, in display order
        self._generated_ids: list = []
        self._details: list = []         # one dict per generated position: what selecting it shows
        self._steps: list = []
        self._selection = None
        self._detail_plain = ""

        self._view = _TokenView()
        self._frozen: list = []          # the display token dicts already in the view's `tokens` (_send_tokens)
        self._legend = ipywidgets.HTML(_legend_html())
        self._stats_widget = ipywidgets.HTML()
        self._detail_widget = ipywidgets.HTML()
        self._chart_height = chart_height
        self._chart = None  # built on first use (see the chart property)
        self._view.observe(self._on_view_selected, names="selected")
        super().__init__(children=[self._legend, self._stats_widget, self._view, self._detail_widget], **kwargs)
        self._set_prompt(prompt_ids)
        self._refresh()

    # --- feeding --------------------------------------------------------------------------------------------------
    def __call__(self, record: StepRecord) -> None:
        """Same as :meth:`on_step`, so the widget itself can be passed as ``on_step=``."""
        self.on_step(record)

    def on_step(self, record: StepRecord) -> None:
        """Append one target call's tokens and update the view and stats.

        Shown in order: ``emitted[:num_accepted]`` as accepted drafts; then, unless EOS / ``max_new_tokens`` cut
        the step inside its accepted drafts, the rejected drafts ``drafted[num_accepted:]`` struck through, and the
        target's token ``emitted[num_accepted]`` (if it was not cut) as ``record.last_kind``. A token tree
        (``record.parents`` set) is shown as :func:`chain_view` draws it: its accepted path, then the first
        rejected child of the path's end; the resampled token's residual is the one sampled tree verification
        draws from after every child there was rejected (:func:`tree_residual`; greedy verification takes the
        argmax and Medusa's typical acceptance the target's row instead). ``steps`` keeps the record itself. When
        the record has ``target_probs`` (``generate(record_probs=True)``) the distributions at each emitted position
        are summarised now (top tokens only), so the widget does not keep full-vocabulary tensors.

        Raises ``TypeError`` for a :class:`~lab.trace.Generation` (use :meth:`extend`) or a list of records;
        ``ValueError`` for a record whose ``index`` neither is 0 nor follows the last one shown, and what
        :func:`lab.trace.check_step_record` raises for a record whose fields contradict each other (changed after it
        was built: ``num_accepted`` beyond the drafts, ``emitted`` longer than ``num_accepted + 1`` or not starting
        with the accepted drafts, a ``last_kind`` other than "resampled" / "bonus" or one that disagrees with them).
        """
        if isinstance(record, (Generation, list, tuple)):
            raise TypeError(f"on_step takes one StepRecord, got a {type(record).__name__}; for a finished run or a "
                            "list of records use stream.extend(generation) or stream.extend(generation.steps)")
        check_step_record(record, "TokenStream.on_step")
        if record.index != 0 and self._steps and record.index != self._steps[-1].index + 1:
            # a gap or a repeat would show text the run never wrote (the same tokens twice, or some missing)
            raise ValueError(f"step {record.index} does not follow the last step shown ({self._steps[-1].index}): "
                             "feed a run's records in order; a record with index 0 starts a new run, and reset() "
                             "clears the stream")
        shown = chain_view(record)  # what is drawn; the record itself goes to `steps` and the stats
        drafted = [int(token) for token in shown.drafted]
        emitted = [int(token) for token in shown.emitted]
        num_accepted = int(shown.num_accepted)
        if record.index == 0:
            if self._steps:
                self._clear_generated()
            # The stored prompt may be the tail of the run's prompt (a lesson shows the last 60 tokens). A prefill
            # record names the run's prompt: any other is shown as the run's own. Without it only a run prompt too
            # short for the stored one, or another length than the first run it was shown with, tells.
            ids, length = run_prompt(record), run_prompt_length(record)
            stored = self._prompt_ids
            if ids is not None:
                fits = ids[len(ids) - len(stored):] == stored
            else:
                fits = length is None or (len(stored) <= length and self._prompt_length in (None, length))
            if fits and self._prompt_length is None:
                self._prompt_length = length
            prompt = stored if fits else (ids or [])
            if prompt != self._shown_prompt:
                self._show_prompt(prompt)

        start = len(self._generated_ids)
        step = len(self._steps)
        shown_accepted = min(num_accepted, len(emitted))
        contexts, texts = [], []
        for token in emitted:
            contexts.append(self._text.fork() if self._text is not None else None)
            texts.append(self._push(token))
        new_tokens = [self._token(token, "accepted", step, start + j, text=texts[j]) for j, token in
                      enumerate(emitted[:shown_accepted])]
        if len(emitted) >= num_accepted:
            # The rejected drafts were proposed at the positions right after the accepted ones; the first of them
            # sits where the target's own token now goes, which is what clicking one selects. They are decoded
            # after the accepted tokens, as they were proposed, without becoming part of the text.
            lost = start + num_accepted if len(emitted) > num_accepted else -1
            after = contexts[num_accepted] if len(emitted) > num_accepted else self._text
            rejected = token_texts(self._tokenizer, drafted[num_accepted:], after)
            for k, token in enumerate(drafted[num_accepted:]):
                new_tokens.append(self._token(token, "rejected", step, start + num_accepted + k, select=lost,
                                              text=rejected[k]))
            if len(emitted) > num_accepted:
                # resampled, bonus, or, when nothing was drafted (the prefill, a lookup miss), just the target's
                kind = own_token_kind(record)
                new_tokens.append(self._token(emitted[num_accepted], kind, step, start + num_accepted,
                                              text=texts[num_accepted], prefill=record.prefill))

        self._contexts.extend(contexts)
        tree_nodes = None if record.parents is None else len(record.drafted)
        self._details.extend(step_details(shown, step, start, drafted, emitted, num_accepted, texts, self._top_k,
                                          tree_residual(record), tree_nodes))
        self._steps.append(record)
        self._generated.extend(new_tokens)
        self._generated_ids.extend(emitted)
        self._refresh()

    def extend(self, records) -> "TokenStream":
        """Feed several step records in order: an iterable of :class:`~lab.trace.StepRecord` or a finished
        :class:`~lab.trace.Generation` (its ``steps``); returns ``self``. Raises ``TypeError`` naming
        ``TokenStream.extend`` for something that is not an iterable of step records (None, a number, a list of token
        ids), before any record is shown (:func:`lab.trace.step_records`), and ``ValueError`` as :meth:`on_step` does
        (records before the bad one are already shown)."""
        for record in step_records(records, "TokenStream.extend"):
            self.on_step(record)
        return self

    def reset(self, prompt_ids=None) -> None:
        """Clear the generated tokens, stats, selection and chart. ``prompt_ids``, if given, replaces the prompt
        (pass ``[]`` to remove it; checked as the constructor checks it, before anything is cleared); otherwise the
        stored prompt stays and is shown again."""
        prompt = self._prompt_ids if prompt_ids is None else prompt_token_ids(self._tokenizer, prompt_ids)
        self._clear_generated()
        self._set_prompt(prompt)
        self._refresh()

    # --- selection ------------------------------------------------------------------------------------------------
    def select(self, position) -> None:
        """Show the distributions at generated position ``position`` (0 = first new token); ``None`` clears.

        Negative positions count from the end, as in a list. The chart's traces become ``target``, ``draft`` and
        ``residual`` over the union of each one's top-``top_k`` tokens (plus the emitted and drafted tokens);
        ``draft`` and ``residual`` are empty for a bonus token (the draft proposed nothing there). Raises
        ``TypeError`` for a position that is not an integer (:func:`lab.validation.is_integer`: bools are not) or
        None, ``IndexError`` for a position that has not been generated.
        """
        if position is None:
            self._view.selected = -1
            return
        count = len(self._details)
        if not is_integer(position):
            raise TypeError(f"position must be an int (a generated position, 0 = the first new token) or None to "
                            f"clear, got {type(position).__name__} {position!r}")
        position = int(position)
        if not count:
            raise IndexError(f"position {position}: no token has been generated yet, so there is nothing to select")
        if not -count <= position < count:
            raise IndexError(f"position must be in [{-count}, {count}) ({count} token{'s' if count > 1 else ''} "
                             f"generated; negative counts from the end) or None to clear, got {position}")
        self._view.selected = position % count

    @property
    def selected(self):
        """The selected generated position, or None."""
        return None if self._view.selected < 0 else self._view.selected

    @property
    def chart(self):
        """The probability chart: a plotly ``FigureWidget`` with bar traces ``target``, ``draft``, ``residual``,
        built and shown under the stream on first use (the first selection, or reading this attribute).

        Built late because each FigureWidget ships plotly.js (~4.6 MB) to the browser and anywidget gives a new
        model 2 s to start before it stops taking updates; two charts starting with the rest of a page on a slow
        machine missed that (the Voila race's chart then never left its first title)."""
        if self._chart is None:
            self._build_chart()
        return self._chart

    def _build_chart(self) -> None:
        figure = go.Figure(
            data=[go.Bar(name=name, x=[], y=[], marker_color=color, visible=False)
                  for name, color in (("target", TARGET_COLOR), ("draft", DRAFT_COLOR),
                                      ("residual", RESIDUAL_COLOR))],
            layout=go.Layout(barmode="group", height=self._chart_height, margin=dict(l=50, r=10, t=40, b=60),
                             yaxis=dict(title=dict(text="probability"), rangemode="tozero"),
                             xaxis=dict(type="category"),
                             legend=dict(orientation="h", yanchor="bottom", y=1.0, x=1.0, xanchor="right"),
                             title=dict(text="select a generated token", font=dict(size=13))),
        )
        # Drawn before it becomes a widget, so the widget's first state already shows the selection: a chart whose
        # model starts late in the browser still shows the click that created it.
        self._draw_into(figure)
        self._chart = go.FigureWidget(figure)
        self.children = (*self.children, self._chart)

    @property
    def selection(self):
        """What the chart shows for the selected position, or None.

        A dict with ``position``, ``step``, ``kind``, ``token_id``, ``text``, ``drafted_id`` (the draft's token at
        this position, None for a bonus token), ``num_drafted`` (drafts in that step as drawn: a chain's drafts;
        for a token tree the accepted path plus the first rejected child, :func:`chain_view`), ``truncated``,
        ``probs`` (None when the step was recorded without probabilities, else a dict of ``token_ids`` and lists
        ``target``, ``draft``, ``residual`` aligned with them, the last two None where there was no draft,
        ``residual`` None too under typical acceptance, which draws a replacement from the target's row; for a
        token tree's resampled token ``residual`` is the one drawn from after every child of the path's end was
        rejected),
        ``rejected_here`` (drafts the target rejected at this position: 1 for a chain's resampled token, the number
        of children there for a tree's, 0 otherwise) and ``note`` (why something is missing, or "").
        """
        return None if self._selection is None else {k: v for k, v in self._selection.items() if k[0] != "_"}

    @property
    def detail_text(self) -> str:
        """The sentence under the stream that explains the selected token (plain text)."""
        return self._detail_plain

    # --- readable state -------------------------------------------------------------------------------------------
    @property
    def tokens(self) -> list:
        """Every shown token in display order (prompt first): dicts ``text``, ``token_id``, ``kind``, ``step``
        (None for the prompt), ``position`` (generated position; for a rejected draft, where it was proposed;
        None for the prompt)."""
        return [{key: value for key, value in token.items() if key[0] != "_"} for token in self._display_tokens()]

    @property
    def generated_ids(self) -> list:
        """The generated token ids so far (what ``Generation.tokens`` will be)."""
        return list(self._generated_ids)

    @property
    def steps(self) -> list:
        """The step records received since the last reset."""
        return list(self._steps)

    @property
    def stats(self) -> dict:
        """Running totals and rates.

        Keys: ``steps`` (= ``target_calls``: the decode steps, the prefill not counted, as in
        :func:`lab.metrics.summarize_steps` and ``Generation.stats``), ``draft_calls``, ``drafted``, ``accepted``,
        ``rejected``, ``emitted`` (every generated token, the prefill's included), ``acceptance_rate`` (accepted
        drafts / drafted tokens, every node of a token tree counted, as in :func:`lab.metrics.summarize_steps`; None
        before any draft), ``tokens_per_target_call`` (tokens the decode steps emitted / decode steps, as
        ``Generation.stats`` has it; None before the first decode step), ``draft_ms``, ``verify_ms`` (summed over
        the decode steps: the prefill's record carries no time, its time being the generation's ``prefill_ms``),
        ``tokens_per_second`` (the decode steps' tokens / the summed ``draft_ms + verify_ms``, i.e. model time,
        excluding this widget's own drawing; None while that is 0).
        """
        decode = [record for record in self._steps if not record.prefill]  # the prefill is no decode step
        steps = len(decode)
        drafted = sum(len(record.drafted) for record in decode)
        accepted = sum(int(record.num_accepted) for record in decode)
        emitted = len(self._generated_ids)
        decoded = sum(len(record.emitted) for record in decode)
        draft_ms = float(sum(record.draft_ms for record in decode))
        verify_ms = float(sum(record.verify_ms for record in decode))
        model_s = (draft_ms + verify_ms) / 1000
        return {
            "steps": steps,
            "target_calls": steps,
            "draft_calls": int(sum(record.draft_calls for record in decode)),
            "drafted": drafted,
            "accepted": accepted,
            "rejected": drafted - accepted,
            "emitted": emitted,
            "acceptance_rate": accepted / drafted if drafted else None,
            "tokens_per_target_call": decoded / steps if steps else None,
            "draft_ms": draft_ms,
            "verify_ms": verify_ms,
            "tokens_per_second": decoded / model_s if model_s > 0 else None,
        }

    @property
    def stats_text(self) -> str:
        """The stats line as shown, e.g. ``"4 steps · acceptance rate 0.62 (5 of 8 drafts accepted) · 2.00 tokens per
        target call · 400 tokens/s (draft + verify time)"`` (the rate's words: :func:`lab.words.acceptance_phrase`;
        without the tokens/s part when ``show_speed`` is False); a run
        with its prefill reads ``"prefill + 4 steps · ..."`` (``"prefill · ..."`` before its first decode step, with
        ``–`` tokens per target call). A run with token trees counts ``tree nodes`` instead of drafts and says that
        at most one path per step can be accepted (why the rate reads low); drafts the target accepted after the
        output's end (a step cut at EOS or ``max_new_tokens``) count in the rate and are named as not shown."""
        stats = self.stats
        if not self._steps:
            return "waiting for the first step"
        decode = [record for record in self._steps if not record.prefill]
        # one wording with python -m lab demo and the race's summary; every node of a tree counts as drafted, yet at
        # most one root-to-leaf path per step can be accepted
        rate = acceptance_phrase(stats["acceptance_rate"], stats["accepted"], stats["drafted"],
                                 any(record.parents is not None for record in decode))
        # drafts accepted after the end of the output (EOS or max_new_tokens cut the step) count, but are not shown
        hidden = sum(max(0, int(record.num_accepted) - len(record.emitted)) for record in decode if record.truncated)
        if hidden and stats["acceptance_rate"] is not None:
            rate = rate[:-1] + f", {hidden} accepted after the output's end, not shown)"
        count = f"{stats['steps']} {'step' if stats['steps'] == 1 else 'steps'}"
        if any(record.prefill for record in self._steps):  # its token is shown but counts in no decode step
            count = "prefill" + (f" + {count}" if stats["steps"] else "")
        per_call = stats["tokens_per_target_call"]
        per_call = "\u2013" if per_call is None else f"{per_call:.2f}"
        text = f"{count} \u00b7 {rate} \u00b7 {per_call} tokens per target call"
        if not self._show_speed:
            return text
        speed = "\u2013" if stats["tokens_per_second"] is None else f"{stats['tokens_per_second']:.0f}"
        return text + f" \u00b7 {speed} tokens/s (draft + verify time)"

    @property
    def html(self) -> str:
        """A self-contained, escaped HTML rendering of the legend, the tokens and the stats line (inline styles, no
        script), for static exports; the live view shows the same tokens."""
        selected = self.selected
        spans = []
        for token in self._display_tokens():
            css = _KIND_CSS[token["kind"]]
            if token["kind"] != "prompt":  # the prompt reads as plain text, without per-token padding
                css = _BASE_CSS + " " + css
            if selected is not None and token["position"] == selected and token["kind"] in GENERATED_KINDS:
                css += " " + _SELECTED_CSS
            classes = f"sdl-{token['kind']}"
            if has_special_token(token["_text"]):
                css += " " + _SPECIAL_CSS
                classes += " sdl-special"
            title = self._title(token)
            spans.append(f'<span class="{classes}" title="{html.escape(title)}" style="{css}">'
                         f'{html.escape(token_display_text(token["_text"], token["kind"]))}</span>')
        return (f'<div class="sdl-token-stream">{_legend_html()}'
                f'<div style="{_STREAM_CSS}">{"".join(spans)}</div>'
                f'<div style="{MUTED_CSS}">{html.escape(self.stats_text)}</div></div>')

    def _repr_html_(self) -> str:
        # Static fallback for exporters that cannot run widgets (it is the state at display time).
        return self.html

    # --- internals ------------------------------------------------------------------------------------------------
    def _push(self, token_id: int):
        """Add ``token_id`` to the shown text; returns its text (None: part of a character)."""
        if self._text is None:
            return f"\u27e8{token_id}\u27e9"
        return self._text.push(token_id)

    def _token(self, token_id: int, kind: str, step, position, select=None, text=None, prefill=False) -> dict:
        # "_select" is the generated position a click on this token selects (-1: none); "_text" the text as
        # token_texts gives it (None: part of a character); "_prefill" marks the prefill's token. Keys starting
        # with "_" stay out of `tokens`.
        if select is None:
            select = -1 if position is None else position
        return {"text": text or "", "token_id": token_id, "kind": kind, "step": step, "position": position,
                "_select": select, "_text": text, "_prefill": bool(prefill)}

    @staticmethod
    def _title(token: dict) -> str:
        title = f"{KIND_LABELS[token['kind']]} \u00b7 id {token['token_id']}"
        if token["step"] is not None:
            title += f" \u00b7 step {token['step']}" + (" (prefill)" if token["_prefill"] else "")
        if has_special_token(token["_text"]):  # the badge shows a short name; the tooltip the token itself
            title += f" \u00b7 {token['_text']}"
        return title

    def _set_prompt(self, prompt_ids: list) -> None:
        """Store ``prompt_ids`` (checked ids) as the prompt for the next run and show it."""
        self._prompt_ids = list(prompt_ids)
        self._prompt_length = None
        self._show_prompt(self._prompt_ids)

    def _show_prompt(self, ids: list) -> None:
        """Show ``ids`` as the prompt the generated tokens follow (the stored prompt, or [] for a run on another);
        only before the run's first generated token."""
        self._shown_prompt = list(ids)
        if self._tokenizer is None:
            self._prompt_text = None
            texts = token_texts(None, ids)
        else:
            self._prompt_text = Detokenizer(self._tokenizer)
            texts = [self._prompt_text.push(token) for token in ids]
        self._prompt_tokens = [self._token(token, "prompt", None, None, text=text) for token, text in zip(ids, texts)]
        self._text = None if self._prompt_text is None else self._prompt_text.fork()

    def _pending(self):
        """(index into ``_generated``, text) for a generated text that ends inside a character: the last token not
        rejected and what ``tokenizer.decode`` shows for the incomplete end (U+FFFD); None otherwise. Computed on a
        fork, so a later token that completes the character still gets it."""
        if self._text is None or not self._generated:
            return None
        rest = self._text.fork().flush()
        if not rest:
            return None
        last = max((i for i, token in enumerate(self._generated) if token["kind"] != "rejected"), default=None)
        return None if last is None else (last, rest)

    def _display_tokens(self) -> list:
        """Prompt and generated token dicts as shown: ``tokens``, ``html`` and the browser payload all read this."""
        return self._display_with(self._pending())

    def _display_with(self, pending) -> list:
        """:meth:`_display_tokens` given :meth:`_pending`'s answer (computed once per step by the caller)."""
        generated = self._generated
        if pending is not None:
            last, rest = pending
            generated = list(generated)
            shown = (generated[last]["_text"] or "") + rest  # the token's complete characters, then the rest
            generated[last] = {**generated[last], "text": shown, "_text": shown}
        return self._prompt_tokens + generated

    def _clear_generated(self) -> None:
        self._generated, self._generated_ids, self._details, self._steps = [], [], [], []
        self._contexts = []
        self._text = None if self._prompt_text is None else self._prompt_text.fork()
        self._view.selected = -1
        self._show(None)  # also when nothing was selected: the chart must not keep an old run's bars

    def _wire(self, tokens: list) -> list:
        """The browser's compact dicts (see :class:`_TokenView`) for these display token dicts."""
        return [{"s": token_display_text(token["_text"], token["kind"]), "k": token["kind"], "p": token["_select"],
                 "i": token["token_id"], "n": -1 if token["step"] is None else token["step"],
                 "t": self._title(token), "x": has_special_token(token["_text"])}
                for token in tokens]

    def _send_tokens(self) -> None:
        """Bring the browser's ``tokens`` + ``tail`` up to :meth:`_display_tokens`. Shown tokens only ever follow
        the ones before them, except the token whose character is still incomplete (:meth:`_pending`; its text
        grows) and a new run or prompt (all of them change). So the tokens already in the view's ``tokens`` stay
        while they are still the first ones shown (the same dicts), and each step resends the tail after them."""
        pending = self._pending()
        shown = self._display_with(pending)
        frozen = self._frozen
        settled = len(shown) if pending is None else len(self._prompt_tokens) + pending[0]  # never change again
        with self._view.hold_sync():  # one message: the browser never draws a new `tokens` beside an old tail
            if len(frozen) > len(shown) or any(a is not b for a, b in zip(frozen, shown)):  # a new run or prompt
                frozen = shown[:settled]
                self._view.tokens = self._wire(frozen)
            elif len(shown) - len(frozen) > TAIL_TOKENS and settled > len(frozen):
                self._view.tokens = self._view.tokens + self._wire(shown[len(frozen):settled])
                frozen = shown[:settled]
            self._view.tail = self._wire(shown[len(frozen):])
        self._frozen = frozen

    def _refresh(self) -> None:
        self._send_tokens()
        self._stats_widget.value = f'<div style="{MUTED_CSS}">{html.escape(self.stats_text)}</div>'
        if self.selected is not None:  # a new token can complete the selected one's character
            self._show(self.selected)

    def _on_view_selected(self, change) -> None:
        position = change["new"]
        self._show(position if 0 <= position < len(self._details) else None)

    def _show(self, position) -> None:
        """Point the detail line and the chart at ``position`` (None: empty them)."""
        if position is None:
            self._selection = None
            self._detail_plain = ""
            self._detail_widget.value = ""
            if self._chart is not None:
                self._draw_chart()
            return
        detail = dict(self._details[position])
        pending = self._pending()
        if pending is not None and self._generated[pending[0]]["position"] == position:
            # as the stream shows it (see _display_tokens)
            detail["text"] = detail["_text"] = (detail["_text"] or "") + pending[1]
        self._selection = detail
        self._detail_plain = describe(detail, self._candidate_text)
        self._detail_widget.value = f'<div style="font-size: 13px;">{html.escape(self._detail_plain)}</div>'
        self._draw_chart()

    def _draw_chart(self) -> None:
        """Show the current selection (or nothing) in the chart, building it on the first selection."""
        if self._chart is None:
            self._build_chart()  # drawn as it is built
        else:
            self._draw_into(self._chart)

    def _draw_into(self, chart) -> None:
        """Draw the current selection (or nothing) into ``chart`` (the chart or the figure it is built from)."""
        target_bar, draft_bar, residual_bar = chart.data
        detail = self._selection
        with chart.batch_update():
            if detail is None:
                for bar in (target_bar, draft_bar, residual_bar):
                    bar.x, bar.y, bar.visible = [], [], False
                chart.layout.title.text = "select a generated token"
                return
            position = detail["position"]
            label = html.escape(token_label_text(detail["_text"]), quote=False)  # plotly shows &quot; literally
            chart.layout.title.text = f"position {position}: {label} ({detail['kind']})"
            probs = detail["probs"]
            if probs is None:
                for bar in (target_bar, draft_bar, residual_bar):
                    bar.x, bar.y, bar.visible = [], [], False
                return
            labels = self._unique_labels(probs["token_ids"], position)
            for bar, values in ((target_bar, probs["target"]), (draft_bar, probs["draft"]),
                                (residual_bar, probs["residual"])):
                if values is None:
                    bar.x, bar.y, bar.visible = [], [], False
                else:
                    bar.x, bar.y, bar.visible = labels, values, True
                    bar.customdata = probs["token_ids"]
                    bar.hovertemplate = "%{x} (id %{customdata})<br>%{y:.3f}"

    def _candidate_text(self, token_id: int, position: int):
        """What ``token_id`` would add at generated ``position``, after the tokens before it (None: part of a
        character)."""
        return token_texts(self._tokenizer, [token_id], self._contexts[position])[0]

    def _unique_labels(self, token_ids, position: int) -> list:
        """Escaped chart labels of the candidates at ``position``; two tokens that show alike get their ids
        appended so their bars stay apart."""
        return chart_labels([token_label_text(self._candidate_text(token, position)) for token in token_ids],
                            [f"#{token}" for token in token_ids])
