"""``RaceDashboard``: autoregressive vs speculative decoding, side by side and live — the instructor demo.

``demo/app.ipynb`` shows one under Voila (``make demo-app``); it works in any notebook too::

    from widgets.race import RaceDashboard
    RaceDashboard()          # the real pair, smollm2-135m; or RaceDashboard(load_pair("shakespeare"))

Tab "Race": pick a prompt (held-out requests of each task kind for a chat pair, held-out passages for the Shakespeare
pair, or free text), a drafter (``python -m lab demo``'s choices), the draft length N, the number of new tokens and
the temperature, then press **Race**. A chat pair gets each prompt as a user turn (its chat template) and stops at
the end of the answer (``pair.eos_token_id``). Both generations fill their own
:class:`~widgets.token_stream.TokenStream` at the same time, and at the end the dashboard shows each side's tokens/s
and the speedup. Tab "Explore": :class:`~widgets.residual.ResidualExplorer` and
:class:`~widgets.speedup.SpeedupExplorer` (starting from the Shakespeare pair's measured α and cost ratio, or for the
real pair the committed arena run's α and c of its draft model on chat requests, else from the explorer's example
values, its heading saying which), built when the tab is first opened (or by
:meth:`RaceDashboard.build_explorers`).

How the two run "at the same time" without slowing each other down: each generation runs in its own thread, but
only one of them computes at any moment. The kernel's main thread hands the turn, one target call at a time, to
the side that has used the *least compute time so far*, and feeds the widgets while both wait. So the two streams
advance as they would on two identical machines started together, each side's time counts only its own work
(no waiting, no widget updates, no contention for the two CPU cores of a laptop), and every widget update happens on
the main thread. Before the race each side does a short untimed warm-up on the prompt's last tokens
(:func:`lab.cli.options.warm_up_ids`; suffix decoding's with a fresh drafter, so the race's drafter caches the
outputs of races only).

Kernel-side state for tests and notebook checks: ``results`` (per side: tokens, text (a chat answer without its
closing ``<|im_end|>``), seconds, tokens_per_second, target_calls (the decode loop's, as ``Generation.stats``
counts them: the prefill, which gives each side its first token, is left out), steps (every step record, the
prefill's included), tree (whether the drafter drafted token trees; the summary's acceptance rate then counts tree
nodes, of which a step keeps one path), ...), ``speedup``, ``identical``, ``error``,
``settings``, ``drafter``, ``turns``, ``load`` (the :class:`lab.load_meter.LoadMeter` of the race: how busy other
programs kept the machine), ``threads_note`` (each race first fits torch's threads to the machine's load,
:func:`lab.models.fit_threads`; its sentence when that changed the count, which the summary shows, else None) and
the two streams ``autoregressive_stream`` / ``speculative_stream``. The summary warns when the machine was busy,
and when the measured speedup exceeds what the two sides' target calls allow (each speculative call verifies at
least one token, so it costs no less than an autoregressive one): other programs then slowed the two sides
unevenly.
"""
from __future__ import annotations

import html
import json
import math
import queue
import threading
import time
from numbers import Real

import ipywidgets as w
import numpy as np
import torch

from lab.cli.options import demo_temperature, warm_up_ids
from lab.decode import generate
from lab.detok import show_controls
from lab.load_meter import LoadMeter
from lab.models import context_limit
from lab.prompts import check_prompts
from lab.drafters.base import check_pair
from lab.registry import DRAFTER_SPECS, DRAFTERS, OWN_DRAFT, make_drafter, own_draft_reason, pair_has, untrained_reason
from lab.validation import check_int, check_seed
from lab.words import acceptance_phrase
from widgets.residual import ResidualExplorer
from widgets.speedup import SpeedupExplorer
from widgets.style import MUTED_CSS
from widgets.token_stream import TokenStream

__all__ = ["FREE_TEXT", "CHAT_PROMPTS_PER_TASK", "RACE_AGAIN", "RaceDashboard", "default_prompts"]

FREE_TEXT = -1  # the prompt dropdown's value for "type your own prompt"
_SIDES = ("autoregressive", "speculative")
_MAX_N = 16
_MAX_TOKENS = 400
_MAX_TEMPERATURE = 2.0
_DONE = object()  # a side's thread puts this on its queue when its generation ended (or failed)
# While a race runs the kernel handles no click, so a Stop button could not be heard: the kernel's interrupt stops it.
_TO_STOP = "<small>(to stop: interrupt the kernel, \u25a0 or I, I; under Voila, reload the page)</small>"
_STOPPED = "stopped (interrupted); press Race to run again"
CHAT_PROMPTS_PER_TASK = 2
"""How many held-out requests of each task kind a chat pair's dashboard offers (:func:`default_prompts`)."""
# Code first: the draft model's best task on the real pair (1.5x in its card), so the first race shows a speedup.
_CHAT_TASK_ORDER = ("code", "structured", "copy_edit", "chat")


class _Abort(Exception):
    """Raised inside a side's ``on_step`` to stop its generation when the race is called off."""


def _prompt_label(text: str, width: int = 60) -> str:
    flat = show_controls(" ".join(text.split()))  # a right-to-left override must not reverse the dropdown's label
    return flat if len(flat) <= width else flat[: width - 1] + "\u2026"


def default_prompts(pair) -> list:
    """The dashboard's prompt choices for ``pair`` (a :class:`lab.models.ModelPair`), as ``(label, text)`` pairs.

    A pair with a chat template gets :data:`CHAT_PROMPTS_PER_TASK` held-out requests of each task kind
    (:func:`lab.prompts.arena_prompts`), code requests first, labelled ``"code · Write a Python function…"``; a
    plain-text pair (Shakespeare) gets the held-out passages (:func:`lab.prompts.held_out_prompts`), labelled by
    their opening words."""
    from lab.prompts import arena_prompts, held_out_prompts, pair_tasks

    if not pair.has_chat_template:
        return [(_prompt_label(text), text) for text in held_out_prompts()]
    tasks = pair_tasks(pair)
    ordered = [task for task in _CHAT_TASK_ORDER if task in tasks] + [t for t in tasks if t not in _CHAT_TASK_ORDER]
    choices = []
    for task in ordered:
        label = task.replace("_", "/")  # "copy_edit" reads "copy/edit", as in the pair's card
        for text in arena_prompts(pair, task)[:CHAT_PROMPTS_PER_TASK]:
            choices.append((f"{label} \u00b7 {_prompt_label(text, 52)}", text))
    return choices


class _Side:
    """One generation of the race: its thread, its compute clock, and the hand-over between it and the main thread."""

    def __init__(self, name, run_generation):
        self.name = name
        self.clock = 0.0                 # seconds of its own compute so far
        self.done = False
        self.abort = False
        self.generation = None
        self.error = None
        self.go = threading.Event()      # main thread -> side: compute until your next step record
        self.out = queue.Queue()         # side -> main thread: a StepRecord, or _DONE
        self._run_generation = run_generation
        self._resumed = 0.0
        self.thread = threading.Thread(target=self._main, name=f"race-{name}", daemon=True)

    def _wait_for_turn(self):
        self.go.wait()
        self.go.clear()
        if self.abort:
            raise _Abort
        self._resumed = time.perf_counter()

    def _on_step(self, record):
        self.clock += time.perf_counter() - self._resumed  # stop the clock before handing over
        self.out.put(record)
        self._wait_for_turn()

    def _main(self):
        try:
            self._wait_for_turn()
            self.generation = self._run_generation(self._on_step)
            self.clock += time.perf_counter() - self._resumed
        except _Abort:
            pass
        except BaseException as error:  # noqa: BLE001 - handed to the main thread, which re-raises it
            self.error = error
        finally:
            self.out.put(_DONE)


RACE_AGAIN = "each race fits torch's threads again: race again once the machine is quiet"
"""What the race advises where a lesson says "run it again" (:data:`lab.models.FIT_AGAIN`, and in the busy warning
:meth:`lab.load_meter.LoadMeter.note`'s ``advice``): under Voila there is no Python cell to run, and a thread count
set by hand would not survive the next race."""


class RaceDashboard(w.VBox):
    """Autoregressive vs speculative decoding on one prompt, two live token streams, tokens/s and the speedup.

    ``RaceDashboard(pair=None, *, prompts=None, drafter="model", n_draft=None, max_new_tokens=60, temperature=None,
    seed=0, record_probs=True)``

    - ``pair``: a :class:`lab.models.ModelPair`; None loads the real pair in its fast dtype
      (``load_pair("smollm2-135m", dtype="auto")``, a few seconds once converted). The Shakespeare pair works too.
    - ``prompts``: the prompt choices, a list of str (default :func:`default_prompts`: two held-out requests of each
      task kind for a chat pair, the held-out passages for a plain-text pair); "free text" is always offered. With
      a chat template (``pair.has_chat_template``) every prompt, free text included, is sent as one user turn
      (:func:`lab.prompts.encode_prompts`) and both sides stop at the end of the answer (``pair.eos_token_id``).
    - ``drafter``: one of :data:`lab.registry.DRAFTERS` (``model``, ``ngram``, ``lookahead``, ``medusa``, ``eagle``,
      ``early-exit``, ``suffix``, ``mtp``, ``parallel``, ``eagle3``); ``n_draft``: the draft length N (1..16; None =
      4). Lookahead, Medusa, suffix decoding and the MTP heads set their own draft (:data:`lab.registry.OWN_DRAFT`):
      for them ``n_draft`` must be left out (None) and the N slider is disabled. The dashboard keeps one drafter per
      kind, like a server: suffix decoding's cache of earlier outputs carries over from one race to the next (race a
      request twice to see it).
    - ``max_new_tokens`` (1..400), ``temperature`` (0 = greedy, up to 2; None =
      :func:`lab.cli.options.demo_temperature`: 0.8 for a pair with a chat template, whose greedy answers loop on
      open requests, 0 for a plain-text pair), ``seed``
      (both sides sample with it).
    - ``record_probs``: keep each step's distributions so clicking a token charts them (both sides pay the same
      small cost).

    :meth:`race` runs one race from Python (what the button does); the controls can be set from Python too. Each
    race first sets torch's thread count for the process (:func:`lab.models.fit_threads`), and the count stays
    after it: a count set with ``torch.set_num_threads`` beforehand does not survive a race.
    Numbers may be NumPy scalars (not bool). Raises ``ValueError`` for settings out of range (``seed`` must be a whole
    number from -2**63 to 2**64 - 1, what ``lab.decode.generate`` and ``python -m lab demo --seed`` take) and for an
    ``n_draft`` given with a drafter of :data:`lab.registry.OWN_DRAFT` (Lookahead, Medusa, suffix decoding, the MTP
    heads), here and in :meth:`race`, and ``TypeError`` for a ``seed`` that is not an integer, a ``record_probs``
    that is not a bool, a ``pair`` that is not a ``ModelPair`` (a name, say: ``load_pair(name)`` gives the pair) and
    ``prompts`` that are not strings; the button shows such errors instead.
    """

    def __init__(self, pair=None, *, prompts=None, drafter: str = "model", n_draft: int | None = None,
                 max_new_tokens: int = 60, temperature: float | None = None, seed: int = 0,
                 record_probs: bool = True):
        if n_draft is not None and drafter in DRAFTERS and own_draft_reason(drafter):
            raise ValueError(f"n_draft does not apply to drafter {drafter!r}: {own_draft_reason(drafter)}; "
                             "leave n_draft out")
        settings = {"drafter": drafter, "n_draft": 4 if n_draft is None else n_draft,
                    "max_new_tokens": max_new_tokens}
        missing = [name for name, value in settings.items() if value is None]
        if missing:  # _check skips None (race() uses that for "keep the control's value")
            raise ValueError(f"{', '.join(missing)} must not be None")
        checked = self._check(**settings, temperature=temperature)  # all checked before a pair loads
        n_draft, max_new_tokens = checked["n_draft"], checked["max_new_tokens"]
        seed = check_seed("seed", seed)  # generate's rule, and python -m lab demo --seed's: negative ones too
        if prompts is not None:  # an empty list leaves only the free-text choice
            prompts = [] if isinstance(prompts, (list, tuple)) and not prompts else check_prompts(prompts)
        if not isinstance(record_probs, (bool, np.bool_)):
            raise TypeError(f"record_probs must be True or False, got {type(record_probs).__name__} {record_probs!r}")
        if pair is None:
            from lab.models import load_pair

            pair = load_pair("smollm2-135m", dtype="auto")
        check_pair(pair, "RaceDashboard")  # a name given for the pair, say
        if untrained_reason(drafter, pair.name):  # a trained draft on a hub pair, say
            raise ValueError(f"drafter {drafter!r} is not available here: {untrained_reason(drafter, pair.name)}")
        temperature = demo_temperature(None if temperature is None else checked["temperature"],
                                       pair.has_chat_template)
        if prompts is None:
            choices = default_prompts(pair)
        else:  # an empty list leaves free text alone
            choices = [(_prompt_label(str(text)), str(text)) for text in prompts]
        self.pair = pair
        self.prompts = [text for _label, text in choices]
        self.seed = seed
        self.record_probs = bool(record_probs)
        self.results: dict = {}
        self.speedup = None
        self.identical = None
        self.error = None
        self.settings: dict = {}
        self.drafter = None  # the drafter object of the last race
        self.turns: list = []  # which side each drawn step record came from, in order (shows the interleaving)
        self.threads_note = None  # fit_threads' sentence when the last race changed torch's thread count
        self._drafters: dict = {}  # (kind, N) -> drafter, so Medusa/EAGLE weights load once

        # --- controls --------------------------------------------------------------------------------------------
        wide = {"description_width": "110px"}
        self.prompt_choice = w.Dropdown(
            options=[(label, i) for i, (label, _text) in enumerate(choices)] + [("free text\u2026", FREE_TEXT)],
            value=0 if self.prompts else FREE_TEXT, description="prompt", style=wide, layout=w.Layout(width="560px"))
        example = "Name three rivers in Africa." if pair.has_chat_template else "ROMEO.\\n"
        self.free_text = w.Textarea(placeholder=f"type a prompt, e.g. {example}", description="free text",
                                    style=wide, layout=w.Layout(width="560px", height="70px"))
        # only the drafters this pair has (lab.registry.pair_has: no weights trained for it, no entry)
        self.drafter_choice = w.Dropdown(options=[k for k in DRAFTERS if pair_has(k, pair.name)], value=drafter,
                                         description="drafter", style=wide)
        self.n_draft = w.IntSlider(value=n_draft, min=1, max=_MAX_N, description="draft length N", style=wide)
        self.new_tokens = w.BoundedIntText(value=max_new_tokens, min=1, max=_MAX_TOKENS, description="new tokens",
                                           style=wide, layout=w.Layout(width="220px"))
        self.temperature = w.FloatSlider(value=temperature, min=0.0, max=_MAX_TEMPERATURE, step=0.05,
                                         description="temperature", style=wide, readout_format=".2f")
        self.race_button = w.Button(description="Race", button_style="success", icon="flag-checkered",
                                    tooltip="run autoregressive and speculative decoding side by side")
        self.status = w.HTML()
        # CSS classes give the browser tests (and anyone styling the app) stable handles.
        self.new_tokens.add_class("sdl-race-tokens")
        self.race_button.add_class("sdl-race-button")
        self.status.add_class("sdl-race-status")
        self.prompt_choice.observe(self._show_free_text, names="value")
        self.drafter_choice.observe(self._show_n_draft, names="value")
        self.race_button.on_click(self._on_click)

        # --- the two streams -------------------------------------------------------------------------------------
        # Each side's header shows tokens/s over its own compute clock; the streams' draft + verify figure would
        # be a second, different number.
        self.autoregressive_stream = TokenStream(pair.tokenizer, top_k=6, chart_height=260, show_speed=False)
        self.speculative_stream = TokenStream(pair.tokenizer, top_k=6, chart_height=260, show_speed=False)
        self._streams = {"autoregressive": self.autoregressive_stream, "speculative": self.speculative_stream}
        self._headers = {side: w.HTML() for side in _SIDES}
        columns = []
        for side in _SIDES:
            self._streams[side].add_class(f"sdl-race-{side}")
            column = w.VBox([self._headers[side], self._streams[side]], layout=w.Layout(width="50%", padding="0 8px"))
            columns.append(column)
        self.summary = w.HTML()
        self.summary.add_class("sdl-race-summary")

        controls = w.VBox([self.prompt_choice, self.free_text,
                           w.HBox([self.drafter_choice, self.new_tokens]),
                           w.HBox([self.n_draft, self.temperature]),
                           w.HBox([self.race_button, self.status])])
        race_tab = w.VBox([controls, self.summary, w.HBox(columns, layout=w.Layout(width="100%"))])
        # The explorers are built when their tab is first opened. Each plotly FigureWidget ships plotly.js (~4.6 MB)
        # to the browser, and anywidget gives every new model 2 s to start before it stops taking updates
        # ("[anywidget] Failed to initialize model."); fewer figures at page load keep a slow machine within that.
        # For the same reason each stream builds its chart on the first click (TokenStream.chart): the page loads
        # with no figure at all.
        self.residual_explorer = self.speedup_explorer = None
        self._explore_tab = w.VBox([w.HTML("building the explorers\u2026")])
        self.tabs = w.Tab(children=[race_tab, self._explore_tab])
        self.tabs.set_title(0, "Race")
        self.tabs.set_title(1, "Explore")
        self.tabs.observe(self._on_tab, names="selected_index")
        super().__init__([self.tabs])
        self._show_free_text()
        self._show_n_draft()
        self._set_headers()

    # --- running ------------------------------------------------------------------------------------------------------
    def race(self, *, prompt: str | None = None, drafter: str | None = None, n_draft: int | None = None,
             max_new_tokens: int | None = None, temperature: float | None = None) -> dict:
        """Run one race with the controls' settings (arguments given here set the controls first; ``prompt`` is
        free text). Returns ``results``. Raises ``TypeError`` for a ``prompt`` that is not a str and ``ValueError``
        for bad settings (nothing runs then, and the controls stay as they were), including an
        ``n_draft`` given for a drafter that sets its own draft (:data:`lab.registry.OWN_DRAFT`: Lookahead's window,
        Medusa's tree, suffix decoding's match, the MTP heads' modules; the N slider is disabled for them and
        ``settings["n_draft"]`` is None), and re-raises an error from either generation."""
        if prompt is not None and not isinstance(prompt, str):  # the text box's trait raised, after the switch
            raise TypeError(f"prompt must be the prompt's text (a str), got {type(prompt).__name__} {prompt!r:.40}")
        checked = self._check(drafter=drafter, n_draft=n_draft, max_new_tokens=max_new_tokens,
                              temperature=temperature)
        drafter, n_draft, max_new_tokens, temperature = (checked.get(k) for k in (
            "drafter", "n_draft", "max_new_tokens", "temperature"))
        kind = drafter if drafter is not None else self.drafter_choice.value
        if n_draft is not None and own_draft_reason(kind):
            raise ValueError(f"n_draft does not apply to drafter {kind!r}: {own_draft_reason(kind)}; leave n_draft out")
        if prompt is not None:
            self.prompt_choice.value = FREE_TEXT
            self.free_text.value = prompt
        for control, value in ((self.drafter_choice, drafter), (self.n_draft, n_draft),
                               (self.new_tokens, max_new_tokens), (self.temperature, temperature)):
            if value is not None:
                control.value = value
        settings = self._read_settings()
        self.results, self.speedup, self.identical, self.error, self.turns = {}, None, None, None, []
        self.load = self.threads_note = None
        self.settings = settings
        self.race_button.disabled = True
        try:
            self._race(settings)
        except KeyboardInterrupt:
            # The kernel's interrupt is the only way to stop a race (the kernel handles no click while it runs one):
            # say so instead of leaving "racing…" on the screen.
            self.status.value = _STOPPED
            raise
        except Exception as error:
            self._show_error(error)
            raise
        finally:
            self.race_button.disabled = False
        return self.results

    def _show_error(self, error) -> None:
        self.error = f"{type(error).__name__}: {error}"
        self.status.value = f'<span style="color: #D55E00;">{html.escape(self.error)}</span>'

    def _on_click(self, _button) -> None:
        # The button must never raise into the front end: show the problem where the instructor is looking.
        try:
            self.race()
        except Exception as error:  # noqa: BLE001 - shown to the user, kept in .error
            self._show_error(error)

    def _fit_threads(self) -> None:
        """Fit torch's threads to how busy the machine is now (:func:`lab.models.fit_threads`), before each race: a
        fit made once at page load kept one thread through quiet races, or two through busy ones. ``threads_note``
        is its sentence when the count changed (the summary shows it), else None."""
        from lab import models

        self.status.value = "measuring how busy the machine is\u2026"
        threads = torch.get_num_threads()
        note = models.fit_threads()
        changed = torch.get_num_threads() != threads
        # under Voila there is no cell to run again: the next race fits the threads anew
        self.threads_note = note.replace(models.FIT_AGAIN, RACE_AGAIN) if changed else None

    def _race(self, settings) -> None:
        pair = self.pair
        prompt_ids = settings["prompt_ids"]
        self._fit_threads()
        self.status.value = "loading the drafter\u2026"
        drafter = self.drafter = self._drafter(settings["drafter"], settings["n_draft"])
        options = {"max_new_tokens": settings["max_new_tokens"], "temperature": settings["temperature"],
                   "eos_token_id": pair.eos_token_id, "seed": self.seed, "record_probs": self.record_probs}
        self.status.value = "warming up\u2026 " + _TO_STOP
        warm_tokens = min(4, settings["max_new_tokens"])  # never more than the race itself may add to the context
        # A drafter that keeps earlier outputs (suffix decoding's cache) must not see the warm-up's: it would start
        # the race with the answer's first tokens cached. A fresh one of the same kind warms the same code.
        warm_drafter = (self._new_drafter(settings["drafter"], settings["n_draft"])
                        if DRAFTER_SPECS[settings["drafter"]].keeps_outputs else drafter)
        for warm in (None, warm_drafter):  # first calls pay one-off costs (allocations, kernels): off the clock
            # on the prompt's tail: a long prompt is not prefilled twice more before the race prefills it twice
            generate(pair.target, warm_up_ids(prompt_ids), drafter=warm,
                     **{**options, "max_new_tokens": warm_tokens, "record_probs": False})
        for stream in self._streams.values():
            stream.reset(prompt_ids)
        self._set_headers()
        self.summary.value = ""
        self.status.value = "racing\u2026 " + _TO_STOP

        def runner(side_drafter):
            return lambda on_step: generate(pair.target, prompt_ids, drafter=side_drafter, on_step=on_step, **options)

        sides = {"autoregressive": _Side("autoregressive", runner(None)),
                 "speculative": _Side("speculative", runner(drafter))}
        self.load = LoadMeter()  # how busy other programs kept the machine while the two sides ran
        with self.load:
            for side in sides.values():
                side.thread.start()
            try:
                self._referee(sides)
            finally:
                for side in sides.values():  # on any error: release the threads that still wait for a turn
                    if not side.done:
                        side.abort = True
                        side.go.set()
                for side in sides.values():
                    side.thread.join()
        for side in sides.values():
            if side.error is not None:
                raise side.error
        self._finish(sides, settings)

    def _referee(self, sides) -> None:
        """Give the turn to the side with the least compute time until both are done; draw each step record."""
        while True:
            waiting = [side for side in sides.values() if not side.done]
            if not waiting:
                return
            side = min(waiting, key=lambda s: s.clock)  # a tie goes to the autoregressive side (dict order)
            side.go.set()
            item = side.out.get()
            if item is _DONE:
                side.done = True
                if side.error is not None:
                    return  # the other side is released and the error re-raised by _race
                continue
            self._streams[side.name].on_step(item)  # a token tree is drawn as its path (TokenStream)
            self.turns.append(side.name)
            self._set_headers(sides)

    def _finish(self, sides, settings) -> None:
        results = {}
        for name, side in sides.items():
            gen = side.generation
            seconds = side.clock
            stats = gen.stats
            results[name] = {
                "tokens": list(gen.tokens), "text": self._answer_text(gen.tokens), "seconds": seconds,
                "tokens_per_second": len(gen.tokens) / seconds if seconds > 0 else math.inf,
                "target_calls": stats["target_calls"], "acceptance_rate": stats.get("acceptance_rate"),
                "tokens_per_target_call": stats["tokens_per_target_call"], "steps": len(gen.steps),
                "accepted_tokens": stats.get("accepted_tokens"), "drafted_tokens": stats.get("drafted_tokens"),
                "tree": any(step.parents is not None for step in gen.steps),
            }
        self.results = results
        ar, spec = results["autoregressive"], results["speculative"]
        self.speedup = spec["tokens_per_second"] / ar["tokens_per_second"]
        self.identical = ar["tokens"] == spec["tokens"]
        self._set_headers(sides)
        self.summary.value = self._summary_html(settings)
        self.status.value = "done"

    def _answer_text(self, tokens) -> str:
        """The text of ``tokens``; a chat pair's answer without the ``<|im_end|>`` that ends it (its end of turn,
        not text)."""
        if self.pair.has_chat_template and tokens[-1:] == [self.pair.eos_token_id]:
            tokens = tokens[:-1]
        return self.pair.decode(tokens)

    # --- settings -----------------------------------------------------------------------------------------------------
    @staticmethod
    def _check(*, drafter=None, n_draft=None, max_new_tokens=None, temperature=None) -> dict:
        """The given settings as plain ``int``/``float`` (the ipywidgets traits reject NumPy scalars), after
        checking them; ``None`` ones are left out."""
        checked = {}
        if drafter is not None:
            if drafter not in DRAFTERS:
                raise ValueError(f"unknown drafter {drafter!r}; choose from {', '.join(DRAFTERS)}")
            checked["drafter"] = drafter
        for name, value, high in (("n_draft", n_draft, _MAX_N), ("max_new_tokens", max_new_tokens, _MAX_TOKENS)):
            if value is None:
                continue
            checked[name] = check_int(name, value, 1, high)
        if temperature is not None:
            if isinstance(temperature, bool) or not isinstance(temperature, Real) \
                    or not 0 <= temperature <= _MAX_TEMPERATURE:  # also rejects NaN
                raise ValueError(f"temperature must be a number in [0, {_MAX_TEMPERATURE}] (0 = greedy), "
                                 f"got {temperature!r}")
            checked["temperature"] = float(temperature)
        return checked

    def _read_settings(self) -> dict:
        if self.prompt_choice.value == FREE_TEXT:
            prompt = self.free_text.value
            if not prompt.strip():
                raise ValueError("the free-text prompt is empty or only whitespace: type a prompt or choose one "
                                 "from the list")  # as python -m lab demo refuses such a --prompt
        else:
            prompt = self.prompts[self.prompt_choice.value]
        # A chat pair answers the prompt as a user turn (its chat template); a plain-text pair continues it.
        encode = self.pair.encode_chat if self.pair.has_chat_template else self.pair.encode
        prompt_ids = list(encode(prompt))
        if not prompt_ids:
            raise ValueError("the prompt encodes to no tokens")
        drafter = self.drafter_choice.value
        settings = {"prompt": prompt, "prompt_ids": prompt_ids, "drafter": drafter,
                    "n_draft": None if drafter in OWN_DRAFT else int(self.n_draft.value),
                    "max_new_tokens": int(self.new_tokens.value), "temperature": float(self.temperature.value)}
        self._check(**{k: settings[k] for k in ("drafter", "n_draft", "max_new_tokens", "temperature")})
        limit = context_limit(self.pair.target)
        if limit is not None and len(prompt_ids) >= limit:  # no number of new tokens would fit: say so
            raise ValueError(f"the prompt has {len(prompt_ids)} tokens; the target's context holds {limit} positions, "
                             f"so a prompt may have at most {limit - 1} (one position is left for a new token)")
        if limit is not None and len(prompt_ids) + settings["max_new_tokens"] > limit:
            raise ValueError(f"prompt ({len(prompt_ids)} tokens) + new tokens ({settings['max_new_tokens']}) exceed "
                             f"the target's context of {limit}: at most {limit - len(prompt_ids)} new tokens with "
                             "this prompt, or shorten it")
        return settings

    def _drafter(self, kind: str, n_draft: int | None):
        key = (kind, n_draft)  # n_draft is None for OWN_DRAFT kinds: one drafter (one copy of the heads, one cache)
        if key not in self._drafters:
            self._drafters[key] = self._new_drafter(kind, n_draft)
        return self._drafters[key]

    def _new_drafter(self, kind: str, n_draft: int | None):
        return make_drafter(kind, self.pair, 4 if n_draft is None else n_draft)

    def _measured_alpha_and_c(self) -> tuple[dict, str]:
        """``(settings, source)`` for the speedup explorer: the Shakespeare pair's model-card α and c; for a pair
        with a committed arena run (smollm2-135m), that run's α and cost ratio c of the draft model (N = 4) on
        chat requests at T = 0; else the explorer's example values. ``source`` says which, for the heading."""
        if self.pair.name == "shakespeare":
            try:
                from lab.assets import PAIR_DIR

                card = json.loads((PAIR_DIR / "measurements.json").read_text())
                return ({"alpha": float(card["alpha_greedy"]), "cost_ratio": float(card["cost_ratio_c"])},
                        "the Shakespeare pair's measured \u03b1 and c")
            except (OSError, KeyError, ValueError):
                pass
        else:
            from lab.arena import committed_arena

            try:
                run = committed_arena(self.pair.name)
            except ValueError:
                run = None
            rows = [] if run is None else [r for r in run["arena"]["rows"] if r.get("drafter") == "model"
                                           and r.get("task") == "chat" and r.get("temperature") == 0.0
                                           and r.get("alpha") is not None and r.get("cost_ratio") is not None]
            if rows:
                row, date = rows[0], str(run.get("date", ""))[:10]
                return ({"alpha": round(float(row["alpha"]), 2), "cost_ratio": round(float(row["cost_ratio"]), 2)},
                        "the draft model's \u03b1 and c on chat requests in the committed arena run"
                        + (f" of {date}" if date else ""))
        return {}, "example values: no measured \u03b1 and c for this pair"

    # --- display ------------------------------------------------------------------------------------------------------
    def build_explorers(self) -> None:
        """Create the Explore tab's ResidualExplorer and SpeedupExplorer (done when the tab is first opened)."""
        if self.residual_explorer is not None:
            return
        self.residual_explorer = ResidualExplorer()
        measured, source = self._measured_alpha_and_c()
        self.speedup_explorer = SpeedupExplorer(**measured, n_draft=int(self.n_draft.value))
        self._explore_tab.children = [
            w.HTML("<h4>Acceptance and the residual</h4>"), self.residual_explorer,
            w.HTML(f"<h4>Predicted speedup (starts from {html.escape(source, quote=False)})</h4>"),
            self.speedup_explorer]

    def _on_tab(self, change) -> None:
        if change["new"] == 1:
            self.build_explorers()

    def _show_n_draft(self, _change=None) -> None:
        own = self.drafter_choice.value in OWN_DRAFT
        self.n_draft.disabled = own
        kind = self.drafter_choice.value
        self.n_draft.tooltip = f"N does not apply: {own_draft_reason(kind)}" if own else "draft tokens per step"

    def _show_free_text(self, _change=None) -> None:
        self.free_text.layout.display = None if self.prompt_choice.value == FREE_TEXT else "none"

    def _set_headers(self, sides=None) -> None:
        drafter = self.settings.get("drafter", self.drafter_choice.value)
        titles = {"autoregressive": "autoregressive (target alone)", "speculative": f"speculative ({drafter})"}
        for name in _SIDES:
            line = ""
            if sides is not None:
                side = sides[name]
                tokens = len(self._streams[name].generated_ids)
                speed = f" \u00b7 {tokens / side.clock:.0f} tokens/s" if side.clock > 0 else ""
                line = f"{tokens} token{'' if tokens == 1 else 's'} in {side.clock * 1000:.0f} ms of compute{speed}"
            self._headers[name].value = (f"<b>{html.escape(titles[name])}</b><br>"
                                         f'<span style="color: #777; font-size: 12px;">{html.escape(line)}</span>')

    def _summary_html(self, settings) -> str:
        ar, spec = self.results["autoregressive"], self.results["speculative"]
        parted = False
        if settings["temperature"] == 0:
            if self.identical:
                same = "identical token for token (greedy)"
            elif torch.finfo(self.pair.dtype).bits >= 32:  # exact enough that greedy outputs must match
                same = "NOT identical — greedy outputs should match; please report this"
            else:
                from lab.bench import agreement_with

                part = agreement_with([ar["tokens"]], [spec["tokens"]])["first_divergence"]
                dtype = str(self.pair.dtype).removeprefix("torch.")
                same = (f"greedy in {dtype}: the outputs agree on the first {part} new tokens and differ from "
                        f"token {part + 1} on, because in {dtype} the verification, a matmul of another shape than "
                        "one autoregressive step, can round a near-tie the other way (in float32, where the course "
                        "checks exactness, greedy outputs match token for token: in a notebook, "
                        f"RaceDashboard(load_pair({self.pair.name!r})) races in float32)")
                parted = True  # shown in full size: it answers what the two texts on screen seem to contradict
        else:
            same = ("sampled: both sides drew the same tokens this time; each follows the target's distribution "
                    "exactly" if self.identical else
                    "sampled: the texts differ, but both follow the target's distribution exactly")
        rate = spec["acceptance_rate"]  # with its counts; a tree's nodes, one path at most kept per step
        rate_text = ("" if rate is None else
                     acceptance_phrase(rate, spec["accepted_tokens"], spec["drafted_tokens"], spec["tree"]) + ", ")
        per_call = spec["tokens_per_target_call"]  # None when no decode step ran
        per_call_text = f"{per_call:.2f}" if per_call is not None else "\u2013"
        prefill_only = ""
        if spec["target_calls"] == 0 and ar["target_calls"] == 0:
            prefill_only = (" The run ended at the prefill's token (no decode step on either side), so these times "
                            "cover the prefill (and the speculative side's drafter reset), not speculative decoding.")
        # with no decode step the ratio times two prefills: nothing of speculative decoding to show
        shown = "\u2013 (no decode step)" if prefill_only else f"{self.speedup:.2f}\u00d7"
        ending = self._ending_text(settings)
        warnings = []
        # prefill included on both sides: a speculative call costs at least an autoregressive one, so the speedup in
        # tokens/s is at most the ratio of tokens per call (sampled answers may end at different lengths)
        calls = {side: run["target_calls"] + 1 for side, run in (("ar", ar), ("spec", spec))}
        tokens = {side: len(run["tokens"]) for side, run in (("ar", ar), ("spec", spec))}
        cap = (tokens["spec"] / calls["spec"]) / (tokens["ar"] / calls["ar"]) if tokens["ar"] else math.inf
        if not prefill_only and self.speedup > 1.05 * cap:
            warnings.append(f"The speedup is above the {cap:.2f}\u00d7 that {tokens['spec']} tokens in "
                            f"{calls['spec']} target calls against {tokens['ar']} in {calls['ar']} (the prefills "
                            "included) allow: other programs slowed the two sides by different amounts. Race again, "
                            "on a quieter machine if you can.")
        if self.load is not None and self.load.busy:
            # the meter's warning, with advice for the page: the next race fits the threads again
            warnings.append(self.load.note(advice=f" ({RACE_AGAIN})"))
        threads = ("" if self.threads_note is None else
                   f'<br><span class="sdl-race-threads" style="{MUTED_CSS}">{html.escape(self.threads_note)}</span>')
        warning_html = "".join(f'<br><span class="sdl-race-warning" style="color: #D55E00; font-size: 12px;">'
                               f"{html.escape(text)}</span>" for text in warnings)
        return (f'<div style="font-size: 15px;">speedup <b class="sdl-race-speedup">{shown}</b>'
                f" &nbsp; ({spec['tokens_per_second']:.0f} vs {ar['tokens_per_second']:.0f} tokens/s; "
                f"{spec['target_calls']} vs {ar['target_calls']} target calls after the prefill; {rate_text}"
                f"{per_call_text} tokens per target call)<br>"
                + (f'<span class="sdl-race-parity" style="font-size: 14px;">{html.escape(same)}.</span><br>'
                   if parted else "")
                + f'<span style="color: #777; font-size: 12px;">{"" if parted else html.escape(same) + ". "}'
                f"{html.escape(ending)}Times count each side's own compute only: the two take turns, one target "
                f"call at a time.{html.escape(prefill_only)}</span>{threads}{warning_html}</div>")

    def _ending_text(self, settings) -> str:
        """A sentence saying which answers ended at the end-of-text token and which ran to the token limit ("" when
        neither ended), so that a difference in target calls is not read as the drafter's doing."""
        eos, limit = self.pair.eos_token_id, settings["max_new_tokens"]
        ends = {side: self.results[side]["tokens"] for side in ("autoregressive", "speculative")}
        ended = {side: eos is not None and tokens[-1:] == [eos] for side, tokens in ends.items()}
        if not any(ended.values()):
            return ""
        if all(ended.values()) and len(ends["autoregressive"]) == len(ends["speculative"]):
            return f"Both answers ended (\u27e8end\u27e9) after {len(ends['speculative'])} tokens. "
        words = [f"the {side} answer ended (\u27e8end\u27e9) after {len(tokens)} tokens" if ended[side] else
                 f"the {side} answer ran to the {limit}-token limit" for side, tokens in ends.items()]
        return f"{words[0][0].upper()}{words[0][1:]}; {words[1]}. "
