"""``KVCacheViewer``: the KV caches of a speculative run as rows of slots, step by step (lesson 07).

Pass the widget as ``on_step`` to :func:`lab.decode.generate`. Each :class:`lab.trace.StepRecord` adds two frames:

1. *verify*: the entries the step wrote after the committed ones — for the target, the last committed token, the
   drafts and (Lookahead) the Jacobi window, all in **scratch** while the target checks them; for a draft model
   with its own cache, what ``propose`` fed it;
2. *commit*: after verification, the kept entries join the **committed** ones and the others are **discarded**
   (rolled back).

A run's first record is its prefill (``record.prefill``): the target writes the whole prompt, keeps every entry, and
its last position gives the first new token, which the next step feeds.

A slider replays the frames; while a run is live the view follows the newest frame. Everything shown is kept on the
kernel side (``frames``, ``frame``, ``rows``, ``html``, ``summary``) so tests and notebook cells can assert on it.
Token text is escaped with :func:`html.escape`; the page never receives it as markup.
"""
from __future__ import annotations

import html
from collections.abc import Sequence

import ipywidgets

from lab.detok import Detokenizer
from lab.trace import StepRecord, check_step_record, step_records
from lab.validation import check_int
from lab.words import plural
from widgets.style import ACCEPTED_COLOR, MUTED_CSS, PROMPT_COLOR, REJECTED_COLOR, slider_position, tint
from widgets.token_text import (check_tokenizer, prompt_token_ids, run_prompt, run_prompt_length, token_label_text,
                                token_labels)

__all__ = ["KVCacheViewer", "SLOT_KINDS", "SCRATCH_COLOR"]

SCRATCH_COLOR = "#E69F00"  # Okabe & Ito orange: written, not yet verified
SLOT_KINDS = ("committed", "scratch", "kept", "discarded")
_SLOT_LABELS = {"committed": "committed", "scratch": "scratch (being verified)", "kept": "kept → committed",
                "discarded": "discarded (rolled back)"}
_SLOT_CSS = {
    "committed": f"background: {tint(PROMPT_COLOR, 0.18)}; border: 1px solid {PROMPT_COLOR};",
    "scratch": f"background: {tint(SCRATCH_COLOR, 0.3)}; border: 1px dashed {SCRATCH_COLOR};",
    "kept": f"background: {tint(ACCEPTED_COLOR, 0.3)}; border: 1px solid {ACCEPTED_COLOR};",
    "discarded": (f"color: {REJECTED_COLOR}; border: 1px dashed {REJECTED_COLOR}; text-decoration: line-through;"),
}
_CELL_CSS = ("display: inline-block; min-width: 1.6em; padding: 1px 3px; margin: 1px; border-radius: 3px; "
             "font-family: monospace; font-size: 12px; text-align: center; white-space: pre;")


class KVCacheViewer(ipywidgets.VBox):
    """Live rows of KV-cache slots per model: committed / scratch (being verified) / kept / discarded.

    ``KVCacheViewer(tokenizer=None, prompt_ids=None, *, max_slots=40)``: ``tokenizer`` labels each slot with the
    text its token adds after the tokens before it (:func:`widgets.token_text.token_labels`; None shows ids);
    ``prompt_ids`` is the prompt the run starts from (needed to name the committed tokens; list of ints or an
    integer tensor ``[n]`` / ``[1, n]``, checked as ``TokenStream`` checks it); ``max_slots``: how many slots per
    row are drawn (the oldest committed ones are summarised as "… n earlier"). Feed it records with
    ``viewer(record)`` / ``on_step(record)`` or ``extend(records)``; a record with ``index == 0`` starts a new run.

    A run's first record from :func:`lab.decode.generate` is the prefill (``record.prefill``, ``cache_before`` 0):
    its frames show the prompt's ``target_tokens`` entries written, then all kept; its token (the first new one) is
    committed and fed by the next step. Slot positions follow each record's ``cache_before`` (the target's cache
    length before the step): committed slots the viewer cannot name (no ``prompt_ids``, or a run that started
    before the first record it saw) are drawn as unknown (``token_id`` None, text ``"?"``). A run whose first
    record shows another prompt length than ``prompt_ids`` (:func:`widgets.token_text.run_prompt_length`: a
    prefill's ``target_tokens``; the viewer reused for a run on another prompt) is drawn without the stored
    prompt, as ``TreeViewer`` does; the prompt is used again for a later run that matches it. A prefill record
    that carries its run's prompt (``record.prompt``, from :func:`lab.decode.generate`) names the committed
    slots with that prompt, whichever it is (two prompts of one length are told apart). A decode step's
    target keeps the last committed token and the accepted path's entries (``{0} ∪ {1 + i for i in record.path}``
    of those the step wrote, so a token tree's kept nodes need not be the first ones). A drafter without a KV cache
    of its own
    (``draft_cache`` all zeros, as Medusa's heads) gets no draft row, and neither does one whose cache does not
    hold one slot per committed token (no ``draft_cache``: EAGLE's slots hold (feature, next token) pairs, and it
    rolls its drafts back inside ``propose``).

    Kernel-side state: ``frames`` (list of dicts ``step``, ``phase`` in ``verify | commit``, ``rows``: model name →
    list of slots ``{"position", "token_id", "text", "kind"}``; built when read: a frame stores only what its step
    changed), ``frame`` (the index shown; ``show(i)`` moves it), ``rows`` (the shown frame's rows), ``summary``
    (one sentence on the shown frame) and ``html``. Raises ``ValueError`` for ``max_slots`` < 4, prompt ids outside
    the tokenizer's vocabulary or a tensor that is not one sequence, or a record without ``cache_before`` (a record
    that did not come from :func:`lab.decode.generate`); ``TypeError`` for a tokenizer without a callable
    ``decode`` or prompt ids that are not integers.
    """

    def __init__(self, tokenizer=None, prompt_ids=None, *, max_slots: int = 40, **kwargs):
        max_slots = check_int("max_slots", max_slots, 4)
        self._tokenizer = check_tokenizer(tokenizer)
        self.max_slots = max_slots
        self._prompt = prompt_token_ids(tokenizer, prompt_ids)
        self._frames: list = []
        self._start_committed(self._prompt)
        self._slider = ipywidgets.IntSlider(value=0, min=0, max=0, description="frame", continuous_update=True,
                                            layout=ipywidgets.Layout(width="420px"))
        self._view = ipywidgets.HTML()
        self._caption = ipywidgets.HTML()
        legend = " ".join(f'<span style="{_CELL_CSS} {_SLOT_CSS[k]}">{html.escape(_SLOT_LABELS[k])}</span>'
                          for k in SLOT_KINDS)
        self._slider.observe(lambda change: self._render(), names="value")
        super().__init__(children=[ipywidgets.HTML(f'<div style="{MUTED_CSS}">{legend}</div>'), self._slider,
                                   self._caption, self._view], **kwargs)
        self._render()

    # --- feeding ---------------------------------------------------------------------------------------------
    def __call__(self, record: StepRecord) -> None:
        self.on_step(record)

    def on_step(self, record: StepRecord) -> None:
        """Add the *verify* and *commit* frames of one step and show the newest. Raises ``ValueError`` for a
        record without cache lengths (one not made by ``lab.decode.generate``)."""
        check_step_record(record, "KVCacheViewer.on_step")
        if record.cache_before is None:
            raise ValueError(f"step {record.index} carries no cache_before: feed records from lab.decode.generate")
        base = int(record.cache_before)
        if record.index == 0:
            self._frames = []
            # A prefill record names its run's prompt: slots are labelled with it, the stored one or another. A
            # record without it from a run on another prompt (another length) is drawn without the stored one.
            ids = run_prompt(record)
            if ids is not None:
                self._start_committed(ids)
            else:
                fits = run_prompt_length(record) == len(self._prompt)
                self._start_committed(self._prompt if fits else [])
        # Committed tokens the step feeds from position `base`: the prefill the whole prompt, a decode step the last
        # committed token (for the first decode step, the prefill's token). Slots the viewer never saw are unknown.
        feeds = int(record.target_tokens or 0) if record.prefill else 1
        missing = base + feeds - len(self._committed)
        if missing > 0:  # steps of this run the viewer did not see: their tokens follow the known prefix
            self._committed += [None] * missing
            self._labels += ["?"] * missing
        elif missing < 0:  # another run, without its index-0 record: nothing the viewer holds is known to be in it
            self._start_committed([])
            self._committed += [None] * (base + feeds)
            self._labels += ["?"] * (base + feeds)
        committed, labels = self._committed, self._labels  # only appended to: frames keep prefix lengths
        known = len(committed)  # base + feeds
        drafted = [int(t) for t in record.drafted]
        # Drafts are labelled after the committed tokens they continue (a tree's after their ancestors).
        drafted_labels = token_labels(self._tokenizer, drafted, self._context, record.parents)
        # The rollback keeps the fed committed tokens and the accepted path (a tree's nodes need not be first).
        kept = set(range(feeds)) | {feeds + int(i) for i in record.path}
        extra = max(0, int(record.target_tokens or (feeds + len(drafted))) - feeds - len(drafted))
        # Target: committed tokens 0..base-1 stay; the step wrote the fed ones + drafts + extra window tokens.
        written = committed[base:base + feeds] + drafted + [None] * extra
        written_labels = labels[base:base + feeds] + drafted_labels + ["?"] * extra
        target = (committed, labels, base, [], [], written, written_labels)
        rows_verify, rows_commit = {"target": _Row(*target, None)}, {"target": _Row(*target, kept)}
        # Medusa's heads report a cache of length 0 throughout: no draft row to draw.
        if record.draft_cache is not None and any(int(x) for x in record.draft_cache):
            before, after_propose, after_update = (int(x) for x in record.draft_cache)
            # The draft's cache positions hold the committed tokens, then the drafts, in order.
            total = known + len(drafted)
            in_prefix = max(0, min(before, total) - known)  # drafts the draft's cache already held before the step
            fed = [committed[i] if i < known else drafted[i - known] if i < total else None
                   for i in range(before, after_propose)]
            fed_labels = [labels[i] if i < known else drafted_labels[i - known] if i < total else "?"
                          for i in range(before, after_propose)]
            draft = (committed, labels, min(before, known), drafted[:in_prefix], drafted_labels[:in_prefix], fed,
                     fed_labels)
            rows_verify["draft"] = _Row(*draft, None)
            rows_commit["draft"] = _Row(*draft, set(range(max(0, after_update - before))))
        step = len(self._frames) // 2
        self._frames.append({"step": step, "phase": "verify", "rows": rows_verify, "record": record})
        self._frames.append({"step": step, "phase": "commit", "rows": rows_commit, "record": record})
        self._commit([int(t) for t in record.emitted])
        self._slider.max = len(self._frames) - 1
        if self._slider.value == len(self._frames) - 1:
            self._render()
        else:
            self._slider.value = len(self._frames) - 1  # follow the live run (renders through the observer)

    def extend(self, records) -> "KVCacheViewer":
        """Feed several step records in order: an iterable of :class:`~lab.trace.StepRecord` or a finished
        :class:`~lab.trace.Generation` (its ``steps``); returns ``self``. Raises ``TypeError`` for anything else
        (:func:`lab.trace.step_records`), before any record is shown."""
        for record in step_records(records, "KVCacheViewer.extend"):
            self.on_step(record)
        return self

    def show(self, frame: int) -> None:
        """Show frame ``frame``: an integer in ``[-len(frames), len(frames) - 1]``, negative counting from the end
        (two frames per step: ``2 * k`` is step k's verify frame, ``2 * k + 1`` its commit frame).

        Raises ``ValueError`` naming ``frame`` and the allowed range for a non-integer (bools and floats included),
        an index outside the frames, or a viewer that has no frames yet."""
        self._slider.value = slider_position("frame", frame, len(self._frames), "frames", ", two per step")

    # --- readable state ------------------------------------------------------------------------------------
    @property
    def frames(self) -> Sequence:
        """The recorded frames, two per step (``phase`` "verify" then "commit"), each a dict with its ``step`` and
        cache ``rows`` (model name → list of slot dicts); the step record itself left out. A read-only sequence of
        the frames recorded so far that builds a frame's slot dicts when that frame is read (the viewer stores per
        frame only what the step changed), so ``viewer.frames[k]`` in a loop costs one frame, not all of them;
        ``list(viewer.frames)`` builds every one. Compares equal to a list of the same frames."""
        return _Frames(list(self._frames))

    @property
    def frame(self) -> int:
        """The index of the frame the slider shows."""
        return self._slider.value

    @property
    def rows(self) -> dict:
        """The shown frame's rows: model name → list of slot dicts (empty before the first step)."""
        if not self._frames:
            return {}
        return {name: row.slots() for name, row in self._frames[self.frame]["rows"].items()}

    @property
    def summary(self) -> str:
        """One sentence on the shown frame, e.g. ``"step 3, verify: the target wrote 5 entries to scratch after
        12 committed ones"``; a prefill's reads ``"step 0 (prefill), ..."``."""
        if not self._frames:
            return "waiting for the first step"
        current = self._frames[self.frame]
        record, step = current["record"], current["step"]
        parts = []
        for name, row in current["rows"].items():
            count = row.counts()
            if current["phase"] == "verify":
                parts.append(f"the {name} wrote {plural(count['scratch'], 'entry', 'entries')} to scratch after "
                             f"{plural(count['committed'], 'committed one')}")
            else:
                parts.append(f"the {name} kept {count['kept']} and discarded {count['discarded']}")
        head = f"step {step}{' (prefill)' if record.prefill else ''}, {current['phase']}: "
        tail = ""
        if current["phase"] == "commit":
            tail = (" (the prompt; its last position gave the first new token)" if record.prefill
                    else f" ({record.num_accepted} of {plural(len(record.drafted), 'draft')} accepted)")
        return head + "; ".join(parts) + tail

    @property
    def html(self) -> str:
        """The shown frame as escaped HTML (one row of slots per model), with the summary line."""
        rows = []
        for name, row in (self._frames[self.frame]["rows"] if self._frames else {}).items():
            hidden = max(0, len(row) - self.max_slots)
            shown = row.slots(hidden)  # only the drawn slots are built
            cells = [f'<span style="{MUTED_CSS}">… {hidden} earlier</span>'] if hidden else []
            for slot in shown:
                title = f"position {slot['position']} · {_SLOT_LABELS[slot['kind']]}"
                if slot["token_id"] is not None:
                    title += f" · id {slot['token_id']}"
                cells.append(f'<span title="{html.escape(title)}" style="{_CELL_CSS} {_SLOT_CSS[slot["kind"]]}">'
                             f'{html.escape(slot["text"])}</span>')
            rows.append(f'<div style="margin: 4px 0;"><b style="display: inline-block; width: 4em;">'
                        f'{html.escape(name)}</b>{"".join(cells)}</div>')
        return (f'<div class="sdl-kv-viewer"><div style="{MUTED_CSS}">{html.escape(self.summary)}</div>'
                + "".join(rows) + "</div>")

    def _repr_html_(self) -> str:
        return self.html

    # --- internals ------------------------------------------------------------------------------------------
    def _start_committed(self, prompt: list) -> None:
        """Committed tokens back to ``prompt`` alone."""
        self._committed, self._labels = [], []  # token ids (None: unknown) and their slot labels, in cache order
        self._context = None if self._tokenizer is None else Detokenizer(self._tokenizer)  # after the known ids
        self._commit(prompt)

    def _commit(self, ids) -> None:
        for token in ids:
            self._committed.append(token)
            self._labels.append(str(token) if self._context is None else token_label_text(self._context.push(token)))

    def _render(self) -> None:
        count = len(self._frames)
        self._caption.value = (f'<div style="{MUTED_CSS}">frame {self.frame + 1 if count else 0} of {count} '
                               "(two per step: verify, then commit)</div>")
        self._view.value = self.html


class _Frames(Sequence):
    """:attr:`KVCacheViewer.frames`: the stored frames, each turned into its dict of slot lists when read."""

    def __init__(self, stored: list):
        self._stored = stored

    def __len__(self) -> int:
        return len(self._stored)

    def __getitem__(self, index):
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self._stored)))]
        frame = self._stored[index]
        return {"step": frame["step"], "phase": frame["phase"],
                "rows": {name: row.slots() for name, row in frame["rows"].items()}}

    def __eq__(self, other) -> bool:
        return isinstance(other, (Sequence, _Frames)) and not isinstance(other, str) and list(self) == list(other)

    __hash__ = None  # mutable content, compared by value

    def __repr__(self) -> str:
        return f"<{len(self)} KV-cache frames>"


class _Row:
    """One model's cache row in one frame, stored compactly: the first ``shared`` entries of the viewer's committed
    ids and labels (lists that are only ever appended to, shared by every frame of a run), then committed entries of
    its own (``tail``: drafts a draft model's cache already held), then the entries the step wrote, as scratch
    (``kept`` None) or, by whether their offset is in the set ``kept``, kept/discarded (a Lookahead window token,
    not recorded, is None, labelled "?"). Slot dicts are built only when asked for."""

    __slots__ = ("ids", "labels", "shared", "tail", "tail_labels", "written", "written_labels", "kept")

    def __init__(self, ids, labels, shared, tail, tail_labels, written, written_labels, kept):
        self.ids, self.labels, self.shared = ids, labels, shared
        self.tail, self.tail_labels = tail, tail_labels
        self.written, self.written_labels, self.kept = written, written_labels, kept

    def __len__(self) -> int:
        return self.shared + len(self.tail) + len(self.written)

    def _kind(self, offset: int) -> str:
        return "scratch" if self.kept is None else ("kept" if offset in self.kept else "discarded")

    def counts(self) -> dict:
        """Slot kind → how many slots of that kind the row has."""
        count = dict.fromkeys(SLOT_KINDS, 0)
        count["committed"] = self.shared + len(self.tail)
        for offset in range(len(self.written)):
            count[self._kind(offset)] += 1
        return count

    def slots(self, start: int = 0) -> list:
        """The slot dicts ``{"position", "token_id", "text", "kind"}`` from position ``start`` on."""
        out = [{"position": i, "token_id": self.ids[i], "text": self.labels[i], "kind": "committed"}
               for i in range(start, self.shared)]
        committed = self.shared + len(self.tail)
        for i in range(max(start, self.shared), committed):
            out.append({"position": i, "token_id": self.tail[i - self.shared],
                        "text": self.tail_labels[i - self.shared], "kind": "committed"})
        for j in range(max(0, start - committed), len(self.written)):
            out.append({"position": committed + j, "token_id": self.written[j], "text": self.written_labels[j],
                        "kind": self._kind(j)})
        return out
