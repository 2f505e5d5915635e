"""The :class:`Recommendation`: a method, N, the draft temperature, the reasons, the expected speedup with its source,
and its renderings: the engine settings (inherited from :class:`lab.picker.engines.EngineSettings`) and the
plain-text summary, JSON-ready dict and Markdown decision guide defined here.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field

from lab.picker.counters import VLLM_METRICS
from lab.picker.engines import ENGINE_LABELS, EngineSettings
from lab.picker.reasons import basis_source
from lab.picker.tables import METHOD_LABELS, TASK_EXAMPLES, TASK_LABELS, served_speedup_for
from lab.words import in_words

__all__ = ["Recommendation"]


@dataclass
class Recommendation(EngineSettings):
    """A speculative-decoding choice for one workload, and how to run it.

    Attributes:
        method: one of :data:`METHODS` (``"draft_model" | "parallel" | "medusa" | "eagle" | "mtp" | "lookahead" |
            "ngram" | "suffix" | "none"``).
        n_draft: draft tokens per step N (int; 0 for ``"none"``).
        draft_temperature: temperature the draft samples at (float), 0.0 for a deterministic or greedy draft
            (verified as one-hot), None for ``"none"``.
        temperature: the target's sampling temperature (0 = greedy), as given.
        reasons: why, one sentence each (list[str]).
        expected_speedup: (low, high) wall-clock speedup over autoregressive decoding (for throughput-bound
            serving, the gain in throughput); (1.0, 1.0) for ``"none"``.
        source: where ``expected_speedup`` comes from (a seed table row, or the arithmetic on a cited result).
        notes: how the engines express the choice, where they cannot express it exactly (list[str]).
        revisit: conditions under which to run the picker again (list[str]).
        workload: the inputs, as a dict.
        settings: method-specific settings (prompt-lookup window sizes, Lookahead window and n-gram size; under
            load, vLLM's ``num_speculative_tokens_per_batch_size`` schedule, which :meth:`vllm_config` passes on).
    """

    method: str
    n_draft: int
    draft_temperature: float | None
    temperature: float
    reasons: list = field(default_factory=list)
    expected_speedup: tuple = (1.0, 1.0)
    source: str = ""
    notes: list = field(default_factory=list)
    revisit: list = field(default_factory=list)
    workload: dict = field(default_factory=dict)
    settings: dict = field(default_factory=dict)

    @property
    def label(self) -> str:
        """Human name of the method, e.g. "EAGLE draft head"."""
        return METHOD_LABELS[self.method]

    @property
    def speculates(self) -> bool:
        """False when the recommendation is plain decoding (method \"none\")."""
        return self.method != "none"

    # --- rendering -----------------------------------------------------------------------------------------
    def speedup_text(self) -> str:
        """The expected speedup range for display, e.g. \"1.5–2×\" (\"1×\" without speculation; one number when the
        range is one published value, as MTP's \"1.8×\")."""
        if not self.speculates:
            return "1×"
        return _range_text(*self.expected_speedup)

    def served_speedups(self) -> dict:
        """What each engine serves when it is not the recommended method, with the speedup to expect from it: engine
        key -> (course method, (low, high) or None, source). The range is the one the rules would quote for that
        method on this task (:func:`lab.picker.tables.served_speedup_for`; (1.0, 1.0) for ``"none"``), None under load,
        where the tables rate no substitute. Empty when every engine serves ``method`` itself."""
        out = {}
        task, loaded = self.workload.get("task"), not self.workload.get("latency_bound", True)
        for engine, runs in self.served().items():
            if runs == self.method:
                continue
            if runs == "none":
                out[engine] = (runs, (1.0, 1.0), "no speculation")
            elif loaded or task is None:
                out[engine] = (runs, None, "not rated under load")
            else:
                speedup, basis = served_speedup_for(runs, task)
                out[engine] = (runs, speedup, basis_source(runs, task, basis))
        return out

    def served_text(self) -> str:
        """Where the expected speedup holds and what the other engines serve, as one line for the summary ("" when
        every engine serves ``method``), e.g. "vLLM, SGLang, TensorRT-LLM, llama.cpp and transformers serve n-gram
        prompt lookup instead: 1.03–1.08× (source: ...)"."""
        others = self.served_speedups()
        if not others or not self.speculates:
            return ""
        groups = {}
        for engine, (runs, speedup, source) in others.items():
            groups.setdefault((runs, speedup, source), []).append(ENGINE_LABELS[engine])
        parts = []
        for (runs, speedup, source), engines in groups.items():
            if runs == "none":
                parts.append(f"{in_words(engines)} {_serve(engines)} the target alone (every substitute is ruled "
                             "out: see the engine notes), 1×")
                continue
            what = ("the PARD draft as a vanilla draft model (one forward per drafted token)"
                    if self.method == "parallel" and runs == "draft_model" else f"{METHOD_LABELS[runs]} instead")
            figure = source if speedup is None else f"{_range_text(*speedup)} (source: {source})"
            parts.append(f"{in_words(engines)} {_serve(engines)} {what}: {figure}")
        return "; ".join(parts)

    def speedup_where(self) -> str:
        """Where :meth:`speedup_text` holds: "" when every engine serves ``method``, else e.g. " (TensorRT-LLM and
        this course's loop)" or " (this course's loop only)"."""
        if not self.speculates or not self.served_speedups():
            return ""
        same = [ENGINE_LABELS[e] for e, runs in self.served().items() if runs == self.method]
        return " (" + in_words([*same, "this course's loop"]) + ")" if same else " (this course's loop only)"

    def draft_temperature_text(self) -> str:
        """The draft temperature for display, with what it means."""
        if self.draft_temperature is None:
            return "n/a"
        if self.draft_temperature == 0:
            return "0 (deterministic or greedy draft, verified as one-hot)"
        return f"{self.draft_temperature:g} (the draft samples at the target's temperature)"

    def workload_text(self) -> str:
        """The workload this recommendation answers, as one line."""
        w = self.workload
        memory = w.get("memory_headroom_gb")
        parts = [f"task {w.get('task')}", f"temperature {w.get('temperature'):g}",
                 "latency-bound" if w.get("latency_bound") else "throughput-bound (high batch)",
                 f"same-family small model: {'yes' if w.get('has_small_same_family_model') else 'no'}",
                 f"may train heads / fine-tune: {'yes' if w.get('can_finetune') else 'no'}",
                 f"target ships MTP modules: {'yes' if w.get('target_has_mtp') else 'no'}",
                 f"memory headroom: {'not given' if memory is None else f'{memory:g} GB'}"]
        if w.get("has_parallel_draft"):  # named only when there is one, so that other workloads read as before
            parts.insert(6, "parallel (PARD) draft of the family: yes")
        if w.get("exclude"):
            parts.append("ruled out: " + ", ".join(w["exclude"]))
        return " · ".join(parts)

    def to_dict(self) -> dict:
        """Everything as JSON-ready data (the five engines' settings with placeholders; ``engine_notes`` gathers
        every engine's substitutions, ``notes`` only the rules' own; ``served``: what each engine runs, and
        ``served_speedup`` the range to expect where that is not ``method``, :meth:`served_speedups`).
        TensorRT-LLM's ``draft_len_schedule`` keeps its int keys, which ``json.dumps`` writes as strings."""
        return {"method": self.method, "label": self.label, "n_draft": self.n_draft,
                "draft_temperature": self.draft_temperature, "temperature": self.temperature,
                "expected_speedup": list(self.expected_speedup), "source": self.source,
                "reasons": list(self.reasons), "notes": list(self.notes), "revisit": list(self.revisit),
                "workload": dict(self.workload), "settings": dict(self.settings),
                "vllm_config": self.vllm_config(), "sglang_args": self.sglang_args(),
                "trtllm_config": self.trtllm_config(), "llamacpp_args": self.llamacpp_args(),
                "hf_kwargs": self.hf_kwargs(), "hf_assistant_config": self.hf_assistant_config(),
                "lab_drafter": self.lab_drafter(), "engine_notes": self.engine_notes(), "served": self.served(),
                "served_speedup": {engine: {"method": runs, "expected_speedup": None if speedup is None else
                                            list(speedup), "source": source}
                                   for engine, (runs, speedup, source) in self.served_speedups().items()}}

    def summary(self, target: str = "<target-model>", tensor_parallel_size: int = 1, *,
                max_running_requests: int | None = None) -> str:
        """Plain-text rendering (what ``python -m lab pick`` prints). ``max_running_requests`` goes to
        :meth:`sglang_command`. Raises ``ValueError`` (naming the argument) for a ``tensor_parallel_size`` or
        ``max_running_requests`` out of range, as :meth:`vllm_command` and :meth:`sglang_command` do."""
        lines = [f"Workload: {self.workload_text()}",
                 f"Method: {self.label} ({self.method})"]
        if self.speculates:
            lines.append(f"Draft tokens per step N: {self.n_draft} · draft temperature: "
                         f"{self.draft_temperature_text()}")
        lines.append(f"Expected speedup: {self.speedup_text()}{self.speedup_where()} — source: {self.source}")
        if self.served_text():
            lines.append(f"As served: {self.served_text()}")
        lines.append("Why:")
        lines += [f"  - {r}" for r in self.reasons]
        lines.append("vLLM:")
        lines.append("  " + self.vllm_command(target, tensor_parallel_size))
        lines.append("SGLang:")
        lines.append("  " + self.sglang_command(target, tensor_parallel_size,
                                                max_running_requests=max_running_requests))
        lines.append("TensorRT-LLM (LLM API options YAML):")
        lines += ["  " + line for line in (self.trtllm_yaml() or "(no speculative_config)").splitlines()]
        lines.append("llama.cpp:")
        lines.append("  " + self.llamacpp_command())
        lines.append("transformers generate kwargs: " + _kwargs_text(self.hf_kwargs()))
        if self.hf_assistant_config():
            lines.append("  on assistant_model.generation_config: " + _kwargs_text(self.hf_assistant_config()))
        notes = self.engine_notes()
        if notes:
            lines.append("Engine notes:")
            lines += [f"  - {n}" for n in notes]
        lines.append("Revisit when:")
        lines += [f"  - {r}" for r in self.revisit]
        if any("seed lesson" in line.lower() for line in lines):
            lines.append(_SEED_LESSONS_NOTE)
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.summary()

    def _course_snippet(self) -> list:
        """The decision guide's "Try it in this course" code, line by line: the recommended drafter on the course's
        real pair, on a request of the workload's task (an agent loop's last request, quoting its earlier answers,
        for the agent task; suffix decoding then caches those answers, as a server would have)."""
        task = self.workload["task"]
        agent = task == "agent"
        cached = agent and self.method == "suffix"  # the earlier answers a server would cache
        drafter = ("SuffixDecodingDrafter(prompt_outputs=lambda ids: assistant_turns(pair, ids))" if cached
                   else self.lab_drafter())
        lines = ["from lab.decode import generate",
                 "from lab.models import load_pair",
                 f"from lab.drafters import {drafter.split('(')[0].split('.')[0]}"]
        if agent:
            lines.append("from lab.prompts import " + ("assistant_turns, " if cached else "") + "conversation_requests")
        lines.append("pair = load_pair()  # the course's real pair, SmolLM2-135M-Instruct, offline")
        if agent:
            lines.append('prompt_ids = pair.encode_chat(conversation_requests("agent")[-1])  # a committed agent '
                         "loop's last request, quoting its earlier answers")
        else:
            lines.append(f"prompt_ids = pair.encode_chat({TASK_EXAMPLES[task]!r})")
        return lines + [f"drafter = {drafter}",
                        "run = generate(pair.target, prompt_ids, drafter=drafter, max_new_tokens=128, "
                        f"temperature={self.temperature:g}, eos_token_id=pair.eos_token_id)",
                        "print(pair.decode([t for t in run.tokens if t != pair.eos_token_id]))",
                        "print(run.stats['acceptance_rate'], run.stats['tokens_per_target_call'])"]

    def to_markdown(self, target: str = "<target-model>", tensor_parallel_size: int = 1, *,
                    max_running_requests: int | None = None) -> str:
        """A one-page decision guide for the workload, as Markdown. Raises ``ValueError`` (naming the argument) as
        :meth:`summary` does."""
        w = self.workload
        task = TASK_LABELS.get(w.get("task"), w.get("task"))
        title = f"# Speculative decoding for {task} at T = {self.temperature:g}"
        out = [title, "", f"**Workload.** {self.workload_text()}.", "",
               f"## Decision: {self.label} (`{self.method}`)", "",
               "| setting | value |", "|---|---|",
               f"| method | {self.label} (`{self.method}`) |",
               f"| draft tokens per step N | {self.n_draft if self.speculates else 'n/a'} |",
               f"| draft temperature | {self.draft_temperature_text()} |",
               f"| target temperature | {self.temperature:g} |",
               f"| expected speedup | {self.speedup_text()}{self.speedup_where()} |",
               f"| source of that range | {self.source} |"]
        if self.served_text():
            out.append(f"| as served | {self.served_text()} |")
        for key, value in self.settings.items():
            out.append(f"| {key} | {value} |")
        out += ["", "## Why", ""] + [f"- {r}" for r in self.reasons]
        out += ["", "## Serve it with vLLM", ""]
        if self.vllm_config():  # {} without speculation, and where every substitute is ruled out
            out += ["```bash", self.vllm_command(target, tensor_parallel_size), "```", "",
                    "The same object goes to Python as `LLM(model=..., speculative_config=...)`:", "",
                    "```json", json.dumps(self.vllm_config(), indent=2), "```"]
        else:
            out += ["```bash", self.vllm_command(target, tensor_parallel_size), "```", "",
                    "No `--speculative-config`: serve the target alone."]
        if self.speculates:
            out += ["", "## Serve it with SGLang", "", "```bash",
                    self.sglang_command(target, tensor_parallel_size, max_running_requests=max_running_requests),
                    "```", "", "## Serve it with TensorRT-LLM", "",
                    "The `speculative_config` section of the LLM API options (YAML):", "",
                    "```yaml", self.trtllm_yaml() or "# no speculative_config: see the engine notes", "```", "",
                    "## Serve it with llama.cpp", "",
                    "```bash", self.llamacpp_command(), "```"]
        out += ["", "## Run it with transformers", "", "```python", self.hf_snippet(target), "```"]
        if self.lab_drafter():
            out += ["", "## Try it in this course", "", "```python"] + self._course_snippet() + ["```"]
        notes = self.engine_notes()
        if notes:
            out += ["", "## Engine notes", ""] + [f"- {n}" for n in notes]
        out += ["", "## Check it in production", "",
                "vLLM exports these counters while it speculates; our `stats` keys are ratios of them:", "",
                "| our stats key | PromQL over vLLM's counters |", "|---|---|"]
        out += [f"| `{key}` | `{expr}` |" for key, expr in VLLM_METRICS.items()]
        out += ["", "## When to revisit", ""] + [f"- {r}" for r in self.revisit]
        if any("seed lesson" in line.lower() for line in out):
            out += ["", _SEED_LESSONS_NOTE]
        return "\n".join(out) + "\n"


_SEED_LESSONS_NOTE = ("(\"Seed lesson 000\" and \"seed lesson 002\" are the two practitioner lessons this course grew "
                     "from, not lessons 00 and 02 of the course: README, Sources.)")
"""The line :meth:`Recommendation.summary` and :meth:`~Recommendation.to_markdown` end with when they cite a seed lesson
(not one of the course's lessons 00-14)."""


def _kwargs_text(kwargs: dict) -> str:
    """``generate`` keyword arguments as ``k=v, ...`` for the summary ("(none)" when empty)."""
    return ", ".join(f"{k}={v!r}" for k, v in kwargs.items()) if kwargs else "(none)"


def _range_text(low: float, high: float) -> str:
    """A speedup range for display: "1.5–2×", or one number when low == high ("1.8×")."""
    return f"{low:g}×" if low == high else f"{low:g}–{high:g}×"


def _serve(engines: list) -> str:
    """The verb for a list of engine names: "serves" for one, "serve" for more."""
    return "serves" if len(engines) == 1 else "serve"
