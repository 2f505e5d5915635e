"""Exercise checkers for lesson 12 (the drafter arena: cost ratio, Leviathan's alpha, efficiency,
adaptive N).

Each checker keeps the contract of :mod:`lab.exercises.harness`.
"""
from __future__ import annotations

import math
from dataclasses import replace
from fractions import Fraction
from numbers import Integral

from lab.drafters.draft_model import next_n_draft as _ref_next_n_draft
from lab.exercises.harness import (checker, compare, Fail, fresh_args, run_case, same_float, same_int,
                                   show_value)
from lab.metrics import alpha_from_steps as reference_alpha_from_steps  # the lab references
from lab.metrics import cost_ratio_from_steps as reference_cost_ratio
from lab.metrics import predicted_speedup
from lab.trace import StepRecord

__all__ = ["cost_ratio", "alpha_from_steps", "efficiency", "next_n_draft", "reference_cost_ratio",
           "reference_alpha_from_steps", "reference_efficiency"]


def _step(drafted: int, accepted: int, draft_ms: float, verify_ms: float, calls: int | None = None) -> StepRecord:
    """A chain step that drafted ``drafted`` tokens (ids 1..), of which the first ``accepted`` were accepted; its
    ``index`` is set by :func:`_run`."""
    tokens = list(range(1, drafted + 1))
    kind = "bonus" if accepted == drafted else "resampled"
    return StepRecord(index=1, position=0, drafted=tokens, num_accepted=accepted, emitted=tokens[:accepted] + [99],
                      last_kind=kind, draft_ms=draft_ms, verify_ms=verify_ms,
                      draft_calls=drafted if calls is None else calls)


def _run(*steps: StepRecord, prefill: bool = True) -> list:
    """``steps`` as a generation's records: the prefill first (step 0, drafted nothing, its time in the run's stats,
    not in its fields), then the decode steps numbered 1, 2, ... (``prefill=False``: the decode steps alone, as
    ``Generation.decode_steps`` gives them), so a function that skips ``s.prefill`` or ``s.index == 0`` is right."""
    head = [StepRecord(index=0, position=0, drafted=[], num_accepted=0, emitted=[98], last_kind="bonus",
                       prefill=True, target_tokens=12)] if prefill else []
    records, committed = head, len(head)  # the prefill commits one token
    for i, step in enumerate(steps, start=1):
        records.append(replace(step, index=i, position=committed))
        committed += len(step.emitted)
    return records


def _show_steps(steps) -> str:
    return "[" + ", ".join("prefill(index=0)" if s.prefill else
                           f"step(index={s.index}, drafted={len(s.drafted)}, accepted={s.num_accepted}, "
                           f"draft_ms={s.draft_ms:g}, draft_calls={s.draft_calls}, verify_ms={s.verify_ms:g})"
                           for s in steps) + "]"


# Step lists: a draft model's steps (calls = drafted), an EAGLE-like drafter that spends one more forward per step
# than it drafts, a last step that drafted nothing (no forward), very uneven steps (a mean of per-step ratios is
# wrong there), and decode steps alone, without the prefill's record: steps whose drafts were all accepted, and two
# unlike steps (a function that drops the first record, taking it for the prefill, loses a real step there).
_STEP_LISTS = [
    _run(_step(4, 4, 2.0, 6.0), _step(4, 1, 2.0, 6.5), _step(4, 0, 2.4, 6.1), _step(4, 2, 1.6, 5.9)),
    _run(_step(4, 3, 3.0, 6.0, calls=5), _step(4, 4, 2.5, 6.0, calls=5), _step(4, 0, 3.5, 6.0, calls=5)),
    _run(_step(3, 3, 1.5, 5.0), _step(3, 3, 1.5, 5.0), _step(2, 1, 1.0, 5.0), _step(0, 0, 0.0, 4.6, calls=0)),
    _run(_step(1, 1, 9.0, 5.0), _step(8, 2, 4.0, 9.0), _step(8, 8, 4.0, 9.0)),
    _run(_step(5, 5, 1.0, 7.0), _step(5, 5, 1.0, 7.0), prefill=False),
    _run(_step(5, 2, 1.0, 7.0), _step(3, 3, 2.0, 6.0), prefill=False),
]

_FIRST_RECORD_HINT = ("skip the prefill by its flag (step.prefill), not by position: the decode steps alone "
                      "(gen.decode_steps) have no prefill record, and dropping the first one loses a real step.")


@checker
def cost_ratio(fn):
    """Check ``fn(steps, ar_ms_per_step) -> float``: the measured cost ratio c = (total draft_ms / total draft
    forward passes) / ``ar_ms_per_step`` (the time of one autoregressive step, ms), pooled over ``steps``
    (:class:`~lab.trace.StepRecord` list), as :func:`lab.arena.run_arena` defines it. Returns True/False."""
    cases = [(steps, ar) for steps, ar in zip(_STEP_LISTS, (4.6, 5.0, 4.6, 4.0, 6.0, 5.5))]

    def per_step(steps, ar):
        return sum(s.draft_ms for s in steps) / len(steps) / ar

    def per_decode_step(steps, ar):  # the same mistake with the prefill's record left out
        decode = [s for s in steps if not getattr(s, "prefill", False)]
        return sum(s.draft_ms for s in decode) / len(decode) / ar

    def per_token(steps, ar):
        return sum(s.draft_ms for s in steps) / sum(len(s.drafted) for s in steps) / ar

    def mean_of_ratios(steps, ar):
        ratios = [s.draft_ms / s.draft_calls for s in steps if s.draft_calls]
        return sum(ratios) / len(ratios) / ar

    def spec_verify(steps, ar):
        return (sum(s.draft_ms for s in steps) / sum(s.draft_calls for s in steps)) / (
            sum(s.verify_ms for s in steps) / len(steps))

    def inverted(steps, ar):
        return ar / (sum(s.draft_ms for s in steps) / sum(s.draft_calls for s in steps))

    def first_dropped(steps, ar):
        return reference_cost_ratio(steps[1:], ar)

    faults = [
        (first_dropped, _FIRST_RECORD_HINT),
        (per_step, "c compares ONE draft forward with one target step: divide the draft time by the number of "
                   "draft forward passes (draft_calls), not by the number of steps (that gives N·c)."),
        (per_decode_step, "c compares ONE draft forward with one target step: divide the draft time by the "
                          "number of draft forward passes (draft_calls), not by the number of steps, with or "
                          "without the prefill's record (that gives N·c)."),
        (per_token, "count draft forward passes (step.draft_calls), not drafted tokens: some drafters spend an "
                    "extra forward per step (EAGLE's catch-up) and a step that drafts nothing costs none."),
        (mean_of_ratios, "pool first: total draft_ms over total draft_calls. A mean of per-step ratios gives a "
                         "one-token step as much weight as an eight-token one."),
        (spec_verify, "divide by the AUTOREGRESSIVE step time (ar_ms_per_step), not by the speculative run's "
                      "verify_ms: that call processes N + 1 tokens; c is measured against one autoregressive step."),
        (inverted, "c is draft time / target time (a small number for a cheap draft), not the other way round."),
    ]
    n = compare("cost_ratio", fn, cases, reference_cost_ratio, faults, same_float,
                "re-read the exercise's two sides: the draft side is pooled over the whole run, the target side is "
                "one autoregressive step, ar_ms_per_step; then check the case above by hand.",
                show_args=lambda args: f"{_show_steps(args[0])}, {args[1]:g}")
    return f"correct on all {n} step lists (pooled draft ms per draft forward, over one autoregressive step)."


def _alpha_acceptance_rate(steps):
    drafted = sum(len(s.drafted) for s in steps)
    return sum(s.num_accepted for s in steps) / drafted if drafted else None


def _alpha_every_step_rejects(steps):
    accepted = sum(s.num_accepted for s in steps)
    trials = accepted + sum(1 for s in steps if s.drafted)
    return accepted / trials if trials else None


def _alpha_empty_rejects(steps):
    accepted = sum(s.num_accepted for s in steps)
    trials = accepted + sum(1 for s in steps if s.num_accepted < len(s.drafted) or not s.drafted)
    return accepted / trials if trials else None


def _alpha_run_n_rejects(steps):
    """A learner's: a rejection wherever a step accepted fewer than the run's largest N."""
    accepted = sum(s.num_accepted for s in steps)
    most = max((len(s.drafted) for s in steps), default=0)
    trials = accepted + sum(1 for s in steps if s.num_accepted < most)
    return accepted / trials if trials else None


def _alpha_bonus_counted(steps):
    """A learner's: the bonus token of a step whose drafts were all accepted counted as one more accepted draft."""
    accepted = sum(s.num_accepted + (bool(s.drafted) and s.num_accepted == len(s.drafted)) for s in steps)
    trials = accepted + sum(1 for s in steps if s.num_accepted < len(s.drafted))
    return accepted / trials if trials else None


def _alpha_mean_of_steps(steps):
    """A learner's: each step's accepted / examined, averaged over the steps that drafted."""
    ratios = [s.num_accepted / (s.num_accepted + (s.num_accepted < len(s.drafted))) for s in steps if s.drafted]
    return sum(ratios) / len(ratios) if ratios else None


def _alpha_first_position(steps):
    drafted = [s for s in steps if s.drafted]
    return sum(s.num_accepted > 0 for s in drafted) / len(drafted) if drafted else None


_ALPHA_FAULTS = [  # planted mistakes and their hints (also used by the tests)
    (_alpha_acceptance_rate, "that is the acceptance rate (accepted / drafted). Drafts after the first rejection are "
                      "never examined, so they are not failed trials: count one rejection per step that "
                      "stopped early."),
    (_alpha_every_step_rejects, "a step whose drafts were ALL accepted had no rejection (its extra token is the "
                         "bonus): count a rejection only when num_accepted < len(drafted)."),
    (_alpha_run_n_rejects, "compare each step's num_accepted with that step's own len(drafted), not with the run's "
                           "largest N: a step that drafted fewer tokens and had every one accepted ended without a "
                           "rejection (a confidence stop or the end of the answer can shorten a draft)."),
    (_alpha_empty_rejects, "a step that drafted nothing examined nothing: it is neither an acceptance nor a "
                    "rejection."),
    (_alpha_bonus_counted, "the token after a step whose drafts were all accepted is the bonus token, the "
                           "target's own: it is not an accepted draft, so it adds nothing to either count."),
    (_alpha_mean_of_steps, "pool the counts over the run: total accepted / total examined. A mean of per-step ratios "
                           "gives a step that examined one draft as much weight as one that examined eight."),
    (_alpha_first_position, "that is the first position's acceptance only; use every examined draft: accepted / "
                     "(accepted + rejections)."),
    (lambda steps: reference_alpha_from_steps(steps[1:]), _FIRST_RECORD_HINT),
    (lambda steps: reference_alpha_from_steps(steps) if reference_alpha_from_steps(steps) is not None else 0.0,
     "when no draft was examined there is no estimate: return None, not 0 (0 would claim every draft fails)."),
    (lambda steps: None if reference_alpha_from_steps(steps) == 0 else reference_alpha_from_steps(steps),
     "when drafts were examined and none was accepted, alpha is 0.0, an estimate like any other (every examined "
     "draft failed); None is only for a run in which no draft was examined at all."),
    (lambda steps: float("nan") if reference_alpha_from_steps(steps) is None else reference_alpha_from_steps(steps),
     "when no draft was examined, return None (no estimate), not NaN: NaN passes silently into later sums and "
     "formulas, and a check `is None` cannot see it."),
]


@checker
def alpha_from_steps(fn):
    """Check ``fn(steps) -> float | None``: Leviathan's per-token acceptance alpha estimated from chain steps =
    accepted drafts / drafts the target examined (the accepted ones plus one per step that ended at a rejection),
    None when no draft was examined. Returns True/False."""
    cases = [(steps,) for steps in _STEP_LISTS] + [(_run(_step(0, 0, 0.0, 5.0, calls=0)),),
                                                    (_run(_step(3, 0, 1.0, 5.0)),)]

    def same(a, b):
        nan = isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b)  # a planted NaN
        return (a is None and b is None) or nan or same_float(a, b)

    outcome = run_case(fn, fresh_args(cases[0]))  # on copies: a function that changes its steps is compare's to name
    first = outcome[1] if outcome[0] == "ok" else None
    if isinstance(first, Fraction):  # exact, but lesson 12 formats alpha with :.2f, which a Fraction refuses here
        raise Fail(f"alpha_from_steps returned the Fraction {first}; return a float (accepted / examined with /, "
                   "not Fraction(...)): the lesson prints it with f\"{alpha:.2f}\", which a Fraction does not take "
                   "before Python 3.12.")
    n = compare("alpha_from_steps", fn, cases, reference_alpha_from_steps, _ALPHA_FAULTS, same,
                "count trials as the text above the exercise does (which drafts did the target examine, and how "
                "many of them failed in each step?), and check the case above by hand; None only when no draft was "
                "examined at all.",
                show_args=lambda args: _show_steps(args[0]))
    return f"correct on all {n} step lists: alpha counts only the drafts the target examined."


def reference_efficiency(measured_tokens_per_s, baseline_tokens_per_s, alpha, n_draft, cost_ratio):
    """The answer to the efficiency exercise: measured speedup over the predicted one,
    :func:`lab.metrics.predicted_speedup`. The lesson uses it while the exercise is unsolved."""
    return (measured_tokens_per_s / baseline_tokens_per_s) / predicted_speedup(alpha, n_draft, cost_ratio)


_EFFICIENCY_CASES = [(300.0, 200.0, 0.75, 4, 0.1), (282.0, 190.0, 0.75, 4, 0.113), (150.0, 200.0, 0.3, 4, 0.6),
                     (420.0, 200.0, 0.9, 8, 0.05), (210.0, 200.0, 0.5, 1, 0.2), (330.0, 200.0, 1.0, 3, 0.1),
                     (250.0, 180.0, 0.0, 2, 0.1)]


@checker
def efficiency(fn):
    """Check ``fn(measured_tokens_per_s, baseline_tokens_per_s, alpha, n_draft, cost_ratio) -> float``: measured
    speedup (tokens/s over the autoregressive tokens/s) divided by the predicted one,
    ``(1 - alpha**(N+1)) / (1 - alpha) / (1 + N c)`` (:func:`lab.metrics.predicted_speedup`). Returns True/False."""
    def expected(a, n):
        return n + 1 if a == 1 else (1 - a ** (n + 1)) / (1 - a)

    faults = [
        (lambda m, b, a, n, c: (m / b) / expected(a, n),
         "the draft is not free: divide the expected tokens per call by the cost of a step, 1 + N·c."),
        (lambda m, b, a, n, c: (m / b) / (expected(a, n) / (1 + c)),
         "the draft runs N times per step: a step costs 1 + N·c target steps, not 1 + c."),
        (lambda m, b, a, n, c: (b / m) / predicted_speedup(a, n, c),
         "the measured speedup is the speculative tokens/s over the autoregressive tokens/s (above 1 when "
         "speculation helps)."),
        (lambda m, b, a, n, c: predicted_speedup(a, n, c) / (m / b),
         "efficiency is measured / predicted (1 means the formula's promise was kept), not predicted / measured."),
        (lambda m, b, a, n, c: (m / b) / ((n + 1 if a == 1 else (1 - a ** n) / (1 - a)) / (1 + n * c)),
         "a step emits up to N + 1 tokens (the bonus token): expected tokens per call is "
         "(1 - alpha**(N+1)) / (1 - alpha)."),
        (lambda m, b, a, n, c: (m / b) / (expected(a, n) / (1 + (n + 1) * c)),
         "a step costs N draft forwards and ONE target forward (which verifies the N drafts and adds its own token "
         "in the same call): 1 + N·c target steps, not 1 + (N + 1)·c."),
        (lambda m, b, a, n, c: (m / b) / (sum(a ** i for i in range(1, n + 1)) / (1 + n * c)),
         "expected tokens per call counts the target's own token too (the bonus or the resampled one): the sum of "
         "alpha**i runs from i = 0 to N, (1 - alpha**(N+1)) / (1 - alpha), which is 1 at alpha = 0 (a call always "
         "yields a token)."),
        (lambda m, b, a, n, c: round(reference_efficiency(m, b, a, n, c), 2),
         "return the value unrounded: round only where you print it."),
        (lambda m, b, a, n, c: 100 * reference_efficiency(m, b, a, n, c),
         "return a ratio (1 means the formula's promise was kept), not a percentage."),
        (lambda m, b, a, n, c: (m / b) / ((1 - a ** (n + 1)) / (1 - a) / (1 + n * c)),
         "at alpha = 1 the formula (1 - alpha**(N+1)) / (1 - alpha) is 0 / 0: every draft is accepted, so a call "
         "yields N + 1 tokens. Handle alpha == 1 on its own (or use predicted_speedup)."),
    ]
    n = compare("efficiency", fn, _EFFICIENCY_CASES, reference_efficiency, faults, same_float,
                "efficiency compares two speedups over autoregressive decoding, the measured one and lesson 06's "
                "prediction; work the case above by hand.")
    return f"correct on all {n} cases."


_NEXT_N_CASES = [(4, 4, 4), (4, 3, 4), (4, 0, 4), (1, 0, 1), (1, 1, 1), (6, 2, 2), (6, 1, 2), (2, 0, 2), (9, 9, 9),
                 (3, 1, 3), (7, 6, 7), (15, 15, 15), (30, 30, 30)]


@checker
def next_n_draft(fn):
    """Check ``fn(n, num_accepted, n_drafted) -> int``: transformers' "heuristic" schedule — N + 2 after a step
    whose ``n_drafted`` drafts were all accepted, otherwise max(1, N - 1)
    (:func:`lab.drafters.draft_model.next_n_draft`). Returns True/False."""
    faults = [
        (lambda n, a, d: n + 2 if a == n else max(1, n - 1),
         "compare with the drafts actually made (n_drafted): near max_new_tokens a step drafts fewer than N, and "
         "if all of those were accepted N should still grow."),
        (lambda n, a, d: n + 2 if a == d else n - 1,
         "N must never drop below 1: use max(1, N - 1)."),
        (lambda n, a, d: n + 1 if a == d else max(1, n - 1),
         "after a fully accepted step transformers grows N by 2, not 1 (it shrinks by 1)."),
        (lambda n, a, d: n + 2 if a > 0 else max(1, n - 1),
         "N grows only when EVERY draft was accepted; one rejection anywhere shrinks it."),
        (lambda n, a, d: n + 2 if a == d else max(1, n - 2),
         "the rule is asymmetric: +2 after a fully accepted step, but only -1 after a rejection."),
        (lambda n, a, d: n + 2 if a == d else 1,
         "after a rejection N shrinks by one, it is not reset to 1."),
        (lambda n, a, d: n + 2 if a == d else max(1, d - 1),
         "after a rejection shrink the current N by one, max(1, N - 1), not the number of drafts this step made "
         "(n_drafted is smaller than N when max_new_tokens cut the step)."),
    ] + [
        (lambda n, a, d, cap=cap: min(cap, n + 2) if a == d else max(1, n - 1),
         "transformers' heuristic schedule puts no cap on N: after a fully accepted step it is N + 2, however large "
         "(a cap is the drafter's own max_n_draft, not part of this rule).") for cap in (16, 10)
    ]
    for args in _NEXT_N_CASES:
        try:
            value = fn(*args)
        except NotImplementedError:
            raise
        except Exception:  # noqa: BLE001 — compare reports it with the case
            break
        if isinstance(value, float) and value.is_integer():
            continue
        if value is None:
            raise Fail(f"next_n_draft{args} returned None: did you forget a `return` statement? Return an int, "
                       "the next draft length.")
        if not isinstance(value, Integral) or isinstance(value, bool):
            raise Fail(f"next_n_draft{args} returned {show_value(value)} ({type(value).__name__}); return an int, "
                       "the next draft length.")
    n = compare("next_n_draft", fn, _NEXT_N_CASES, lambda n, a, d: _ref_next_n_draft(n, a, d), faults, same_int,
                "re-read the rule above the exercise: what happens after a step whose drafts were all accepted, "
                "and what after any rejection.")
    return f"correct on all {n} cases, including truncated steps and N = 1."
