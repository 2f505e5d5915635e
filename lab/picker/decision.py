"""What the picker's rules decided for one workload, as data: :class:`Decision`.

:mod:`lab.picker.rules` makes a decision; :mod:`lab.picker.reasons` and :mod:`lab.picker.revisit` put it into words.
Keeping the two apart lets the rules be read (and tested) without the sentences, and the sentences be edited without
touching a rule.
"""
from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["Decision", "OBSTACLES"]

OBSTACLES = ("excluded", "no_small_model", "no_training", "no_mtp", "no_parallel_draft", "memory")
"""Why a method can be infeasible, in the order the rules test them: named in ``exclude``; a draft model with no
small same-family model; a learned head (EAGLE, Medusa) without permission to train; MTP drafting for a target whose
checkpoint ships no MTP modules; a parallel (PARD) draft when none exists for the target's family; more memory than
the headroom."""


@dataclass(frozen=True)
class Decision:
    """The outcome of the rules (the module docstring of :mod:`lab.picker` lists them) for one workload.

    Attributes:
        rule: the rule that decided: ``"temperature"`` (1: too hot to speculate), ``"load"`` (2: throughput-bound)
            or ``"latency"`` (3 and 4: latency-bound).
        method: one of :data:`lab.picker.METHODS`.
        n_draft: draft tokens per step N (0 for ``"none"``).
        draft_temperature: the draft's sampling temperature (0.0 for a deterministic or greedy draft, None for
            ``"none"``).
        speedup: (low, high) expected speedup; (1.0, 1.0) for ``"none"``.
        basis: where ``speedup`` comes from: ``"workload_row"`` (seed lesson 002's row for the task, or its nearest
            row), ``"strategy"`` (seed lesson 000's row for the method), ``"arena"`` (lesson 12's measured chat
            speedups), ``"load"`` (seed lesson 002's EAGLE-3 result under load), ``""`` for ``"none"``.
        settings: method-specific settings (prompt-lookup sizes, Lookahead window and n-gram size, the batch-size
            schedule under load).
        obstacles: drafting method -> the first of :data:`OBSTACLES` that rules it out, for every infeasible one.
        default: the latency-bound default, the workload row's method (``"ngram"`` for copy/edit); None under the
            other rules.
        candidates: the feasible methods the latency-bound rule ranked -> ((low, high), basis), after prompt lookup
            has displaced Lookahead.
        lookup_over_lookahead: both draft-free methods were feasible and prompt lookup displaced Lookahead.
    """

    rule: str
    method: str
    n_draft: int = 0
    draft_temperature: float | None = None
    speedup: tuple = (1.0, 1.0)
    basis: str = ""
    settings: dict = field(default_factory=dict)
    obstacles: dict = field(default_factory=dict)
    default: str | None = None
    candidates: dict = field(default_factory=dict)
    lookup_over_lookahead: bool = False
