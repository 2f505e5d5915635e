"""Benchmark goals judged against their thresholds on unrounded values (issue 21's goal lines, ``python -m lab
bench``): :func:`goal_record` keeps one goal as the bench's JSON does, :func:`goal_lines` prints them met, missed or
not measured, each number with as many digits as its verdict needs.

A goal stated as a number is measured by a benchmark, never by a timed test; this module only judges and prints
what the benchmark measured. No torch: :mod:`lab.bench` and its command line re-export these names.
"""
from __future__ import annotations

from numbers import Real

__all__ = ["goal_met", "goal_record", "goal_lines", "not_judged", "NOT_MEASURED"]


def goal_met(measured, threshold: float, at_most: bool = False) -> bool | None:
    """Whether ``measured`` meets a goal: ``>= threshold``, or ``<= threshold`` for an upper bound (``at_most``, a
    cost); None when it was not measured (None). Judge the unrounded value: rounding first can turn 1.995 into a
    met 2.0. Raises ``TypeError`` naming ``measured`` or ``threshold`` when it is not a real number (a bool, a str;
    NaN is a number and meets no goal)."""
    for name, value in (("measured", measured), ("threshold", threshold)):
        if (isinstance(value, bool) or not isinstance(value, Real)) and not (name == "measured" and value is None):
            # 'a' >= 1.0 raised a bare comparison error
            raise TypeError(f"{name} must be a real number{' or None' if name == 'measured' else ''}, got "
                            f"{type(value).__name__} {value!r}")
    if measured is None:
        return None
    return measured <= threshold if at_most else measured >= threshold


NOT_MEASURED = "not measured in this run"
"""A goal's status when its method did not run (:func:`goal_record`)."""


def goal_record(text: str, measured, threshold: float, at_most: bool = False, missing: str = NOT_MEASURED) -> dict:
    """One goal as the bench's JSON keeps it: ``{"goal", "measured", "threshold", "at_most", "met", "status"}``.
    ``measured`` is the unrounded value, or None; ``met`` is :func:`goal_met`'s True / False, None when nothing was
    measured; ``status`` is ``"met"``, ``"not met"``, or ``missing`` when ``measured`` is None (why there is no
    number: :data:`NOT_MEASURED` when the method did not run, another reason when it ran but gave none, e.g. no
    draft was examined)."""
    met = goal_met(measured, threshold, at_most)
    status = missing if met is None else "met" if met else "not met"
    return {"goal": text, "measured": measured, "threshold": threshold, "at_most": at_most, "met": met,
            "status": status}


def not_judged(goals, reason: str) -> list:
    """Copies of :func:`goal_record` dicts that keep their measured numbers but no verdict (``met`` None, ``status``
    ``"not judged: <reason>"``; a goal with no number keeps its own status), for a run the goals cannot be judged
    on: one smaller than the benchmark they are stated for, or timed while other programs kept the machine busy.
    ``reason`` must not be empty (``ValueError``); ``goals`` must be a list of such dicts (``TypeError``)."""
    if not isinstance(reason, str) or not reason:
        raise ValueError(f"reason must be a non-empty str saying why the goals are not judged, got {reason!r}")
    _check_goals(goals, records_only=True)
    return [goal if goal["met"] is None else {**goal, "met": None, "status": f"not judged: {reason}"}
            for goal in goals]


def _check_goals(goals, records_only: bool = False) -> None:
    """``TypeError`` unless ``goals`` is a list or tuple of :func:`goal_record` dicts (or, unless ``records_only``,
    of 3- or 4-item tuples): None or a short tuple raised an unpacking error naming nothing."""
    keys = {"goal", "measured", "threshold", "at_most", "met", "status"}
    ok = isinstance(goals, (list, tuple)) and all(
        (isinstance(g, dict) and keys <= g.keys())
        or (not records_only and isinstance(g, (tuple, list)) and len(g) in (3, 4)) for g in goals)
    if not ok:
        shown = (type(goals).__name__ if not isinstance(goals, (list, tuple)) else
                 next(str(g)[:60] for g in goals if not (isinstance(g, dict) and keys <= g.keys())))
        allowed = "goal_record(...) dicts" + ("" if records_only else " or (text, measured, threshold[, '<=']) tuples")
        raise TypeError(f"goals must be a list of {allowed}, got {shown}")


def _supporting(measured: float, threshold: float, at_most: bool) -> str:
    """``measured`` with 2 decimals, or as many more as it takes for the printed number to support the verdict: to
    meet the goal exactly when the value does, and to lie off the line when the value does (1.995 against 2.0
    prints 1.995, not 2.00; 0.0996 against 0.1 prints 0.0996, not 0.10)."""
    met = goal_met(measured, threshold, at_most)
    for digits in range(2, 16):
        text = f"{measured:.{digits}f}"
        onto_the_line = float(text) == threshold != measured
        if goal_met(float(text), threshold, at_most) == met and not onto_the_line:
            return text
    return repr(measured)


def goal_lines(goals) -> str:
    """The goals as Markdown lines: met, missed, or why not measured or not judged (:func:`not_judged`), each with
    the number measured here, printed with enough digits to support its verdict (or, not judged, the verdict it would
    have).
    ``goals``: :func:`goal_record` dicts, or tuples ``(text, measured, threshold)`` with a fourth item ``"<="`` for
    an upper bound (measured None: not measured in this run). Raises ``TypeError`` for anything else."""
    _check_goals(goals)
    lines = []
    for goal in goals:
        if not isinstance(goal, dict):
            text, measured, threshold, *bound = goal
            goal = goal_record(text, measured, threshold, bound == ["<="])
        bound = f"goal {'<=' if goal['at_most'] else '>='} {goal['threshold']}"
        if goal["met"] is None:
            # no verdict, but the digits still keep a number off the line it is not on (2.4999 is not "2.50")
            shown = ("" if goal["measured"] is None else
                     f"{_supporting(goal['measured'], goal['threshold'], goal['at_most'])} ({bound}): ")
            lines.append(f"- [ ] {goal['goal']}: {shown}{goal['status']}")
            continue
        mark, verdict = ("x", "met") if goal["met"] else (" ", "NOT met")
        shown = _supporting(goal["measured"], goal["threshold"], goal["at_most"])
        lines.append(f"- [{mark}] {goal['goal']}: {shown} ({bound}): {verdict} on this machine")
    return "\n".join(lines)
