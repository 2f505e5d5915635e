"""``StrategyPicker``: the seed lessons' strategy and workload tables as controls for :mod:`lab.picker` (lesson 14).

The workload table (seed lesson 002's production settings, plus our copy/edit row) and the strategy table (seed
lesson 000's "Picking a draft") are rows of buttons: a workload row selects the task; a strategy row sets up the
situation its "when to pick" column describes. Dropdowns and toggles change the rest of the workload (temperature,
small same-family model, permission to train heads, MTP modules in the target's checkpoint, a parallel (PARD)
draft of the target's family, latency- vs
throughput-bound, memory headroom, methods ruled out, the target's tensor-parallel size). Every change reruns
:func:`lab.picker.recommend` and shows the method, N, draft temperature, expected speedup with its source, the
reasons, the vLLM ``--speculative-config`` JSON and command line, and the transformers ``generate`` arguments.

Kernel-side state for tests and notebook cells: ``recommendation`` (the :class:`lab.picker.Recommendation`),
``workload`` (the inputs, a dict), ``vllm_config``, ``vllm_json``, ``vllm_command``, ``hf_kwargs``,
``hf_assistant_config``, ``highlighted_workload`` (task of the highlighted workload row), ``highlighted_strategy``
(method of the highlighted strategy row, None when the pick is not in that table) and ``html``. Everything shown
as HTML is escaped with :func:`html.escape`.
"""
from __future__ import annotations

import html
import json
from numbers import Integral

import ipywidgets as w

from lab.picker import (MAX_TEMPERATURE, METHOD_LABELS, METHODS, SAMPLING_WARN_TEMPERATURE, STRATEGY_TABLE, TASK_LABELS,
                        TASKS, WORKLOAD_TABLE, recommend)
from lab.picker.substitutes import check_model_name
from lab.picker.tables import MAX_API_TEMPERATURE
from lab.picker.workload import check_workload
from widgets.style import ACCEPTED_COLOR, tint

__all__ = ["StrategyPicker", "STRATEGY_SCENARIOS"]

MEMORY_CHOICES = (None, 0.0, 0.5, 2.0, 4.0, 8.0, 40.0)
TP_CHOICES = (1, 2, 4, 8)

STRATEGY_SCENARIOS = {
    # The situation each row of seed lesson 000's strategy table describes, as workload inputs (chat: a workload
    # with no copying to exploit, so n-gram lookup does not compete).
    "draft_model": {"task": "chat", "has_small_same_family_model": True, "can_finetune": False},
    "medusa": {"task": "chat", "has_small_same_family_model": False, "can_finetune": True, "exclude": ("eagle",)},
    "eagle": {"task": "chat", "has_small_same_family_model": False, "can_finetune": True},
    # Lookahead's row also describes prompt lookup, which the picker prefers when both are open: exclude it
    "lookahead": {"task": "chat", "has_small_same_family_model": False, "can_finetune": False, "exclude": ("ngram",)},
    # answers that repeat earlier answers: the agent task
    "suffix": {"task": "agent", "has_small_same_family_model": False, "can_finetune": False},
    # a target that ships MTP modules, with nothing else to draft with on chat
    "mtp": {"task": "chat", "has_small_same_family_model": False, "can_finetune": False, "target_has_mtp": True},
    # a PARD draft of the family (it is a small model of the family), no heads: chat, where a draft model would serve
    "parallel": {"task": "chat", "has_small_same_family_model": True, "can_finetune": False,
                 "has_parallel_draft": True},
}
"""Workload inputs that make each strategy row's "when to pick" true. Rows also reset latency-bound, memory (not
given), ``exclude``, the target's MTP modules and a PARD draft (both absent) unless they name them."""

_MUTED = "color: #666; font-size: 12px;"


def _memory_options(choices, extra) -> list:
    """The memory dropdown's (label, value) options: "not given", then ``choices`` and ``extra`` (None or a float)
    in increasing order."""
    known = sorted({float(m) for m in list(choices) + [extra] if m is not None})
    return [("not given", None)] + [(f"{m:g} GB", m) for m in known]


def _workload_rows():
    rows = [(row.task, f"{row.workload} · {METHOD_LABELS[row.method]} · k {row.n_range[0]}–{row.n_range[1]} · "
                       f"{row.speedup[0]:g}–{row.speedup[1]:g}×") for row in WORKLOAD_TABLE]
    rows.append(("copy_edit", "Copy / edit (ours; no seed row) · n-gram prompt lookup · k as structured JSON"))
    return rows


class StrategyPicker(w.VBox):
    """Pick a speculative-decoding strategy with the seed tables and see how to serve it.

    Args (the initial workload; see :func:`lab.picker.recommend`): ``task``, ``temperature`` (0–2, the OpenAI
    API's range), ``has_small_same_family_model``, ``can_finetune``, ``target_has_mtp``, ``has_parallel_draft``,
    ``latency_bound``, ``memory_headroom_gb`` (None or one of :data:`MEMORY_CHOICES`, other values are added to the
    list), ``exclude``; ``target`` (name in the vLLM command) and ``tensor_parallel_size`` (one of 1, 2, 4, 8). NumPy
    scalars count as numbers and ``numpy.bool_`` as a bool. Raises ``ValueError`` (naming the input and what it
    allows) for inputs ``recommend`` rejects, another ``tensor_parallel_size`` (True and 2.0 included), or a
    ``target`` that is not a model name on one line (:func:`lab.picker.substitutes.check_model_name`); :meth:`set`
    checks the same way.
    """

    def __init__(self, task: str = "chat", temperature: float = 0.0, has_small_same_family_model: bool = True,
                 can_finetune: bool = False, latency_bound: bool = True, memory_headroom_gb: float | None = None,
                 exclude=(), target: str = "<target-model>", tensor_parallel_size: int = 1,
                 target_has_mtp: bool = False, has_parallel_draft: bool = False):
        checked = self._checked(task=task, temperature=temperature,  # before any widget exists
                                has_small_same_family_model=has_small_same_family_model, can_finetune=can_finetune,
                                latency_bound=latency_bound, memory_headroom_gb=memory_headroom_gb, exclude=exclude,
                                tensor_parallel_size=tensor_parallel_size, target_has_mtp=target_has_mtp,
                                has_parallel_draft=has_parallel_draft)
        task, temperature, has_small_same_family_model, can_finetune, latency_bound, memory_headroom_gb, exclude, \
            tensor_parallel_size, target_has_mtp, has_parallel_draft = checked.values()
        self.target = check_model_name("target", target)
        self._hold = True
        style = {"description_width": "190px"}
        layout = w.Layout(width="460px")
        self.task_dropdown = w.Dropdown(options=[(TASK_LABELS[t], t) for t in TASKS], value=task,
                                        description="task", style=style, layout=layout)
        self.temperature_slider = w.FloatSlider(value=temperature, min=0.0, max=MAX_API_TEMPERATURE, step=0.05,
                                                description="temperature", readout_format=".2f", style=style,
                                                layout=layout)
        self.small_model_box = w.Checkbox(value=has_small_same_family_model,
                                          description="a small same-family model exists", style=style)
        self.finetune_box = w.Checkbox(value=can_finetune, description="may train heads / fine-tune", style=style)
        self.mtp_box = w.Checkbox(value=target_has_mtp, description="the target's checkpoint ships MTP modules",
                                  style=style)
        self.parallel_box = w.Checkbox(value=has_parallel_draft, description="a PARD draft of the family exists",
                                       style=style)
        self.regime_buttons = w.ToggleButtons(options=[("latency-bound", True), ("throughput / high batch", False)],
                                              value=latency_bound, description="serving", style=style)
        self.memory_dropdown = w.Dropdown(options=_memory_options(MEMORY_CHOICES, memory_headroom_gb),
                                          value=memory_headroom_gb, description="memory headroom", style=style,
                                          layout=layout)
        self.exclude_select = w.SelectMultiple(options=[(METHOD_LABELS[m], m) for m in METHODS if m != "none"],
                                               value=exclude, rows=5, description="ruled out", style=style,
                                               layout=layout)
        self.tp_dropdown = w.Dropdown(options=list(TP_CHOICES), value=tensor_parallel_size,
                                      description="target GPUs (tensor parallel)", style=style, layout=layout)

        self.workload_buttons = {}
        for key, text in _workload_rows():
            button = w.Button(description=text, tooltip=TASK_LABELS[key], layout=w.Layout(width="640px"))
            button.on_click(lambda _b, key=key: self.select_workload(key))
            self.workload_buttons[key] = button
        self.strategy_buttons = {}
        for row in STRATEGY_TABLE:
            low, high = row.speedup
            text = f"{row.strategy} · {row.when} · " + (f"{low:g}×" if low == high else f"{low:g}–{high:g}×")
            button = w.Button(description=text, tooltip=METHOD_LABELS[row.method], layout=w.Layout(width="640px"))
            button.on_click(lambda _b, method=row.method: self.select_strategy(method))
            self.strategy_buttons[row.method] = button
        self.card = w.HTML()

        for control in (self.task_dropdown, self.temperature_slider, self.small_model_box, self.finetune_box,
                        self.mtp_box, self.parallel_box, self.regime_buttons, self.memory_dropdown, self.exclude_select,
                        self.tp_dropdown):
            control.observe(lambda change: self._refresh(), names="value")
        heading = lambda text: w.HTML(f'<b>{html.escape(text)}</b>')  # noqa: E731
        super().__init__([
            heading("Workloads — seed lesson 002's production settings (click a row)"),
            w.VBox(list(self.workload_buttons.values())),
            heading("Strategies — seed lesson 000's \"Picking a draft\" (click a row to set up its situation)"),
            w.VBox(list(self.strategy_buttons.values())),
            heading("Your workload"),
            w.VBox([self.task_dropdown, self.temperature_slider, self.small_model_box, self.finetune_box,
                    self.mtp_box, self.parallel_box, self.regime_buttons, self.memory_dropdown, self.exclude_select,
                    self.tp_dropdown]),
            self.card,
        ])
        self._hold = False
        self._refresh()

    # --- state -------------------------------------------------------------------------------------------------
    @property
    def workload(self) -> dict:
        """The current inputs of :func:`lab.picker.recommend`."""
        return {"task": self.task_dropdown.value, "temperature": round(float(self.temperature_slider.value), 4),
                "has_small_same_family_model": bool(self.small_model_box.value),
                "can_finetune": bool(self.finetune_box.value), "latency_bound": bool(self.regime_buttons.value),
                "memory_headroom_gb": self.memory_dropdown.value, "exclude": tuple(self.exclude_select.value),
                "target_has_mtp": bool(self.mtp_box.value), "has_parallel_draft": bool(self.parallel_box.value)}

    @property
    def tensor_parallel_size(self) -> int:
        """The target's tensor-parallel size chosen in the dropdown (GPUs it is split over)."""
        return int(self.tp_dropdown.value)

    @property
    def vllm_config(self) -> dict:
        """The current recommendation's vLLM ``speculative_config`` (see ``Recommendation.vllm_config``)."""
        return self.recommendation.vllm_config()

    @property
    def vllm_json(self) -> str:
        """The same settings as the JSON string ``--speculative-config`` takes."""
        return self.recommendation.vllm_json()

    @property
    def vllm_command(self) -> str:
        """A ``vllm serve`` command line for the target with these settings."""
        return self.recommendation.vllm_command(self.target, self.tensor_parallel_size)

    @property
    def hf_kwargs(self) -> dict:
        """The transformers ``generate`` keyword arguments for the recommendation."""
        return self.recommendation.hf_kwargs()

    @property
    def hf_assistant_config(self) -> dict:
        """The settings to put on the assistant model's ``generation_config`` (transformers)."""
        return self.recommendation.hf_assistant_config()

    @property
    def html(self) -> str:
        """The recommendation card as shown (HTML)."""
        return self.card.value

    # --- driving it from Python (the same as clicking) -----------------------------------------------------------
    def set(self, **inputs) -> None:
        """Change workload inputs by name (``task``, ``temperature``, ``has_small_same_family_model``,
        ``can_finetune``, ``target_has_mtp``, ``has_parallel_draft``, ``latency_bound``, ``memory_headroom_gb``,
        ``exclude``,
        ``tensor_parallel_size``) and refresh once. Every value is checked first, with the constructor's rules, so a
        bad one changes nothing; a memory headroom that is not in the dropdown is added to it, as the constructor
        does. Raises ``ValueError`` for an unknown name or a value the constructor would reject (naming the input and
        what it allows)."""
        controls = {"task": self.task_dropdown, "temperature": self.temperature_slider,
                    "has_small_same_family_model": self.small_model_box, "can_finetune": self.finetune_box,
                    "latency_bound": self.regime_buttons, "memory_headroom_gb": self.memory_dropdown,
                    "exclude": self.exclude_select, "tensor_parallel_size": self.tp_dropdown,
                    "target_has_mtp": self.mtp_box, "has_parallel_draft": self.parallel_box}
        unknown = sorted(set(inputs) - set(controls))
        if unknown:
            raise ValueError(f"unknown workload inputs {unknown}; choose from {sorted(controls)}")
        current = {name: control.value for name, control in controls.items()}
        checked = self._checked(**{**current, **inputs})  # the whole workload, as the constructor checks it
        self._hold = True
        try:
            if "memory_headroom_gb" in inputs:
                memory = checked["memory_headroom_gb"]
                self.memory_dropdown.options = _memory_options(
                    [value for _, value in self.memory_dropdown.options], memory)
            for name in inputs:
                controls[name].value = checked[name]
        finally:
            self._hold = False
        self._refresh()

    def select_workload(self, task: str) -> None:
        """What clicking a workload row does: select that task. Raises ``ValueError`` for an unknown task."""
        if task not in TASKS:
            raise ValueError(f"task must be one of {', '.join(TASKS)}; got {task!r}")
        self.set(task=task)

    def select_strategy(self, method: str) -> None:
        """What clicking a strategy row does: set up the situation its "when to pick" describes
        (:data:`STRATEGY_SCENARIOS`), keeping the temperature unless it is above the picker's limit. Raises
        ``ValueError`` for an unknown method."""
        if not isinstance(method, str) or method not in STRATEGY_SCENARIOS:  # a list is unhashable
            raise ValueError(f"method must be one of {', '.join(STRATEGY_SCENARIOS)}; got {method!r}")
        scenario = {"latency_bound": True, "memory_headroom_gb": None, "exclude": (), "target_has_mtp": False,
                    "has_parallel_draft": False, **STRATEGY_SCENARIOS[method]}
        if self.temperature_slider.value > MAX_TEMPERATURE:
            scenario["temperature"] = SAMPLING_WARN_TEMPERATURE
        self.set(**scenario)

    @staticmethod
    def _checked(*, task, temperature, has_small_same_family_model, can_finetune, latency_bound, memory_headroom_gb,
                 exclude, tensor_parallel_size, target_has_mtp, has_parallel_draft=False) -> dict:
        """The workload as plain Python values (the widgets' traits reject NumPy scalars, numpy.bool_ above all),
        in the constructor's argument order, after :func:`lab.picker.recommend`'s checks (``check_workload``; the
        temperature slider spans the same range, 0 to :data:`lab.picker.tables.MAX_API_TEMPERATURE`) and the
        picker's own (tensor_parallel_size in :data:`TP_CHOICES`). Raises ``ValueError``."""
        if isinstance(exclude, str):
            exclude = (exclude,)
        try:
            exclude = tuple(exclude)  # once, so an iterator is not used up by the check
        except TypeError:
            pass  # recommend names the problem
        check_workload(task, temperature, has_small_same_family_model, can_finetune, latency_bound,
                       memory_headroom_gb, exclude, target_has_mtp, has_parallel_draft)
        if (isinstance(tensor_parallel_size, bool) or not isinstance(tensor_parallel_size, Integral)  # True == 1
                or tensor_parallel_size not in TP_CHOICES):  # 2.0 == 2, but a GPU count is whole
            raise ValueError(f"tensor_parallel_size must be one of {TP_CHOICES}, got {tensor_parallel_size!r}")
        return {"task": task, "temperature": float(temperature),
                "has_small_same_family_model": bool(has_small_same_family_model), "can_finetune": bool(can_finetune),
                "latency_bound": bool(latency_bound),
                "memory_headroom_gb": None if memory_headroom_gb is None else float(memory_headroom_gb),
                "exclude": exclude, "tensor_parallel_size": int(tensor_parallel_size),
                "target_has_mtp": bool(target_has_mtp), "has_parallel_draft": bool(has_parallel_draft)}

    # --- rendering ---------------------------------------------------------------------------------------------
    def _refresh(self) -> None:
        if self._hold:
            return
        workload = self.workload
        self.recommendation = recommend(**{k: v for k, v in workload.items() if k != "exclude"},
                                        exclude=workload["exclude"])
        rec = self.recommendation
        self.highlighted_workload = workload["task"]
        self.highlighted_strategy = rec.method if rec.method in self.strategy_buttons else None
        for key, button in self.workload_buttons.items():
            button.style.button_color = tint(ACCEPTED_COLOR, 0.35) if key == self.highlighted_workload else None
            button.style.font_weight = "bold" if key == self.highlighted_workload else ""
        for key, button in self.strategy_buttons.items():
            button.style.button_color = tint(ACCEPTED_COLOR, 0.35) if key == self.highlighted_strategy else None
            button.style.font_weight = "bold" if key == self.highlighted_strategy else ""
        self.card.value = self._card(rec)

    def _card(self, rec) -> str:
        esc = html.escape
        head = (f'<div style="font-size: 15px;"><b>{esc(rec.label)}</b> (<code>{esc(rec.method)}</code>)'
                + (f" · N = <b>{rec.n_draft}</b> · draft temperature {esc(rec.draft_temperature_text())}"
                   if rec.speculates else "")
                + f" · expected <b>{esc(rec.speedup_text())}</b>{esc(rec.speedup_where())}</div>"
                f'<div style="{_MUTED}">source: {esc(rec.source)}</div>')
        served = rec.served_text()  # what the engines run instead, when it is not the method above
        if served:
            head += f"<div>As served: {esc(served)}</div>"
        reasons = "".join(f"<li>{esc(r)}</li>" for r in rec.reasons)
        parts = [head, f"<ul>{reasons}</ul>", "<b>vLLM</b>"]
        config = rec.vllm_config()
        if config:  # {} where vLLM serves the target alone
            parts.append(f"<pre>{esc(json.dumps(config, indent=2))}</pre>")
        parts.append(f"<pre>{esc(self.vllm_command)}</pre>")
        kwargs = ", ".join(f"{k}={v!r}" for k, v in rec.hf_kwargs().items())
        parts.append(f"<b>transformers</b><pre>model.generate(**inputs, {esc(kwargs)})</pre>")
        if rec.hf_assistant_config():
            assistant = "\n".join(f"assistant.generation_config.{k} = {v!r}"
                                  for k, v in rec.hf_assistant_config().items())
            parts.append(f"<pre>{esc(assistant)}</pre>")
        # the notes on what the card shows (vLLM and transformers); SGLang's and the others' refer to their own flags
        notes = [*rec.notes, *rec.vllm_notes(), *rec.hf_notes()]
        if notes:
            parts.append(f'<div style="{_MUTED}">' + "<br>".join(esc(n) for n in notes) + "</div>")
        return "".join(parts)
