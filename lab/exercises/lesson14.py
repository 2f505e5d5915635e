"""Exercise checker for lesson 14 (choosing a strategy, serving it with vLLM).

The checker keeps the contract of :mod:`lab.exercises.harness`.

The exercise: turn vLLM's speculative-decoding counters (``vllm:spec_decode_num_drafts``,
``…_num_draft_tokens``, ``…_num_accepted_tokens``, ``…_num_accepted_tokens_per_pos``) into this course's
``stats`` keys. The expected answers are :func:`lab.metrics.summarize_steps` on step records that produce those
counters, so a correct answer agrees with what our own decode loop reports. One case drafts a different number of
tokens at each step (as prompt lookup does), so that answers which assume a constant N (for example dividing by
num_drafts × the number of positions instead of by num_draft_tokens) fail; there ``per_position_acceptance`` is
vLLM's unconditional share, accepted at position i / drafts, which is what the counters can give.
"""
from __future__ import annotations

import collections.abc
import inspect
import math
import random
from numbers import Integral

from lab.exercises.harness import Fail, checker
from lab.metrics import summarize_steps
from lab.trace import StepRecord
from lab.validation import check_int
from lab.words import in_words

__all__ = ["stats_from_vllm_counters", "counters_from_steps", "make_steps"]

KEYS = ("acceptance_rate", "tokens_per_target_call", "per_position_acceptance")


# --- building cases ------------------------------------------------------------------------------------------------
def make_steps(accepted: list, n_draft) -> list:
    """Step records of a run that accepts ``accepted[i]`` drafted tokens in step i (each step emits the accepted
    drafts plus one target token).

    ``n_draft``: the tokens drafted per step, an int >= 1 for every step, or a list with one length >= 1 per step
    (a run whose draft length varies, as prompt lookup's does). Raises ``ValueError`` for a length that is not an
    integer >= 1, a list whose length differs from ``accepted``'s, or an accepted count outside 0..(that step's
    length)."""
    lengths = [n_draft] * len(accepted) if isinstance(n_draft, Integral) else list(n_draft)
    if len(lengths) != len(accepted):
        raise ValueError(f"n_draft must be an int or one length per step ({len(accepted)}), got {len(lengths)}")
    steps = []
    for i, (a, n) in enumerate(zip(accepted, lengths)):
        n = check_int(f"n_draft at step {i}", n, 1)
        if not 0 <= a <= n:
            raise ValueError(f"accepted counts must be in 0..{n} at step {i}, got {a}")
        steps.append(StepRecord(index=i, position=0, drafted=[0] * n, num_accepted=a, emitted=[0] * (a + 1),
                                last_kind="bonus" if a == n else "resampled", draft_calls=n))
    return steps


def counters_from_steps(steps: list) -> dict:
    """The four counters vLLM would export for these steps (``vllm/v1/spec_decode/metrics.py``: one draft per
    step that drafted at least one token, its drafted and accepted token counts, and one count per accepted
    position; a list as long as the longest draft)."""
    drafting = [s for s in steps if s.drafted]
    longest = max((len(s.drafted) for s in drafting), default=0)
    per_position = [0] * longest
    for s in drafting:
        for i in range(s.num_accepted):
            per_position[i] += 1
    return {"num_drafts": len(drafting), "num_draft_tokens": sum(len(s.drafted) for s in drafting),
            "num_accepted_tokens": sum(s.num_accepted for s in drafting), "accepted_per_position": per_position}


def _expected(steps: list) -> dict:
    """The answers for ``steps`` (every step drafts >= 1 token): our decode loop's stats; where the draft length
    varies, ``per_position_acceptance`` is the unconditional share vLLM's counters give (ours conditions position i
    on the steps that drafted that far, which the counters cannot tell apart)."""
    if not steps:
        return {"acceptance_rate": None, "tokens_per_target_call": None, "per_position_acceptance": []}
    stats = summarize_steps(steps, new_tokens=sum(len(s.emitted) for s in steps), wall_ms=1.0)
    expected = {key: stats[key] for key in KEYS}
    if len({len(s.drafted) for s in steps}) > 1:
        longest = max(len(s.drafted) for s in steps)
        expected["per_position_acceptance"] = [sum(s.num_accepted > i for s in steps) / len(steps)
                                               for i in range(longest)]
    return expected


def _cases() -> list:
    rng = random.Random(14)
    cases = [("a run of 6 steps at N = 4", make_steps([4, 2, 0, 4, 1, 3], 4)),
             ("a run where every draft is accepted (N = 3)", make_steps([3, 3, 3], 3)),
             ("a run where every draft is rejected (N = 5)", make_steps([0, 0, 0, 0], 5)),
             ("a long run at N = 7", make_steps([rng.randint(0, 7) for _ in range(200)], 7)),
             ("a run whose draft length varies from 1 to 5 tokens (as prompt lookup's does)",
              make_steps([3, 2, 0, 4, 1, 5, 1, 0], [5, 2, 1, 4, 3, 5, 1, 2])),
             ("no speculative steps at all", [])]
    return [(label, counters_from_steps(steps), _expected(steps)) for label, steps in cases]


# --- planted mistakes ------------------------------------------------------------------------------------------------
def _safe(fn):
    def run(num_drafts, num_draft_tokens, num_accepted_tokens, accepted_per_position):
        if num_drafts == 0:
            return {"acceptance_rate": None, "tokens_per_target_call": None, "per_position_acceptance": []}
        return fn(num_drafts, num_draft_tokens, num_accepted_tokens, list(accepted_per_position))
    return run


def _unguarded(num_drafts, num_draft_tokens, num_accepted_tokens, accepted_per_position):
    """The right formulas without the zero-drafts guard (named as the lesson names its parameters)."""
    return {"acceptance_rate": num_accepted_tokens / num_draft_tokens,
            "tokens_per_target_call": 1 + num_accepted_tokens / num_drafts,
            "per_position_acceptance": [x / num_drafts for x in accepted_per_position]}


_FAULTS = [
    (_safe(lambda d, t, a, p: {"acceptance_rate": a / t, "tokens_per_target_call": a / d,
                               "per_position_acceptance": [x / d for x in p]}),
     "tokens_per_target_call is one too small: each step also emits one token of the target's own (resampled "
     "after a rejection, or the bonus token), so it is 1 + accepted / drafts — vLLM's \"mean acceptance length\" "
     "counts it too."),
    (_safe(lambda d, t, a, p: {"acceptance_rate": a / d, "tokens_per_target_call": 1 + a / d,
                               "per_position_acceptance": [x / d for x in p]}),
     "acceptance_rate divides by the wrong count: it is accepted draft tokens / drafted tokens "
     "(num_draft_tokens), not per step (num_drafts)."),
    (_safe(lambda d, t, a, p: {"acceptance_rate": a / (d * len(p)) if p else 0.0, "tokens_per_target_call": 1 + a / d,
                               "per_position_acceptance": [x / d for x in p]}),
     "acceptance_rate assumes every step drafted as many tokens as there are positions (num_drafts × "
     "len(accepted_per_position)); drafts can be shorter (prompt lookup proposes only what it finds), so divide by "
     "the tokens actually drafted, num_draft_tokens."),
    (_safe(lambda d, t, a, p: {"acceptance_rate": a / t, "tokens_per_target_call": 1 + a / t,
                               "per_position_acceptance": [x / d for x in p]}),
     "tokens_per_target_call is per step: divide accepted tokens by the number of drafts (one per target call), "
     "not by drafted tokens, then add 1."),
    (_safe(lambda d, t, a, p: {"acceptance_rate": a / t, "tokens_per_target_call": 1 + a / d,
                               "per_position_acceptance": [x / t for x in p]}),
     "per_position_acceptance[i] is the share of steps whose draft at position i was accepted: divide each count "
     "by num_drafts, not by num_draft_tokens."),
    (_safe(lambda d, t, a, p: {"acceptance_rate": a / t, "tokens_per_target_call": 1 + a / d,
                               "per_position_acceptance": [x / a if a else 0.0 for x in p]}),
     "per_position_acceptance[i] is the share of steps whose draft at position i was accepted: divide each count "
     "by num_drafts, not by num_accepted_tokens."),
    (_safe(lambda d, t, a, p: {"acceptance_rate": a / t, "tokens_per_target_call": 1 + a / d,
                               "per_position_acceptance": [x / (p[i - 1] if i else d) if (p[i - 1] if i else d)
                                                           else 0.0 for i, x in enumerate(p)]}),
     "per_position_acceptance is unconditional here, as in vLLM (and in our stats when every step drafts N): "
     "accepted at position i / all drafts — not the chance of position i given that position i − 1 was accepted."),
    (_safe(lambda d, t, a, p: {"acceptance_rate": a / t, "tokens_per_target_call": 1 + a / d,
                               "per_position_acceptance": list(p)}),
     "per_position_acceptance holds shares of steps, not counts: divide each position's count by num_drafts (the "
     "share of steps whose draft at that position was accepted, between 0 and 1)."),
    (_safe(lambda d, t, a, p: {"acceptance_rate": 100 * a / t, "tokens_per_target_call": 1 + a / d,
                               "per_position_acceptance": [100 * x / d for x in p]}),
     "rates are fractions in [0, 1] (0.6), as our stats give them and vLLM's PromQL formulas compute them, not "
     "percentages (60; vLLM's log line prints the acceptance rate as one, 'Avg Draft acceptance rate: 60.0%'): "
     "leave out the × 100."),
    (_safe(lambda d, t, a, p: {"acceptance_rate": a // t, "tokens_per_target_call": 1 + a // d,
                               "per_position_acceptance": [x // d for x in p]}),
     "use / for the ratios: // floors to a whole number (13 // 24 = 0)."),
    (_unguarded,
     "with no drafts (num_drafts == 0) nothing can be divided: return None for acceptance_rate and "
     "tokens_per_target_call and an empty per_position_acceptance list, as our stats do."),
]


# --- comparing -------------------------------------------------------------------------------------------------------
def _outcome(fn, counters):
    """("ok", value) or ("raise", type name, message); NotImplementedError passes through."""
    try:
        return ("ok", fn(counters["num_drafts"], counters["num_draft_tokens"], counters["num_accepted_tokens"],
                         list(counters["accepted_per_position"])))
    except NotImplementedError:
        raise
    except Exception as error:  # noqa: BLE001
        return ("raise", type(error).__name__, str(error))


def _same_number(a, b) -> bool:
    if a is None or b is None:
        return a is None and b is None
    if isinstance(a, bool) or isinstance(b, bool):
        return False
    try:
        # float32 (a tensor or NumPy array of the counts) rounds at about 6e-8; real mistakes are far off
        return math.isclose(float(a), float(b), rel_tol=1e-6, abs_tol=1e-9)
    except (TypeError, ValueError):
        return False


def _same_list(a, b) -> bool:
    try:
        a, b = list(a), list(b)
    except TypeError:
        return False
    return len(a) == len(b) and all(_same_number(x, y) for x, y in zip(a, b))


def _differences(value, expected) -> list:
    """Keys whose values differ (a missing key counts)."""
    wrong = []
    for key in KEYS:
        if key not in value:
            wrong.append(key)
        elif key == "per_position_acceptance":
            if not _same_list(value[key], expected[key]):
                wrong.append(key)
        elif not _same_number(value[key], expected[key]):
            wrong.append(key)
    return wrong


def _same_key(key, a, b) -> bool:
    return _same_list(a, b) if key == "per_position_acceptance" else _same_number(a, b)


def _key_hint(key, outcomes, cases):
    """The hint of the planted mistake that gives the learner's ``key`` on every case, when no mistake explains the
    whole answer (two slips at once, or one that changes only this key): None if none does."""
    for fault, hint in _FAULTS:
        fits = True
        for got, (_, counters, _) in zip(outcomes, cases):
            planted = _outcome(fault, counters)
            if (got[0] != "ok" or not isinstance(got[1], dict) or key not in got[1] or planted[0] != "ok"
                    or not _same_key(key, got[1][key], planted[1][key])):
                fits = False
                break
        if fits:
            return hint
    return None


def _rounded_to(key, outcomes, cases):
    """The decimals d (0 to 6) such that the learner's ``key`` is the expected value rounded to d decimals on every
    case, and not the value itself on some: the right formula, rounded before returning. None if no d fits."""
    def rounded(value, want, digits) -> bool:
        if value is None or want is None:
            return value is None and want is None
        try:
            value = float(value)
        except (TypeError, ValueError):
            return False
        scaled = value * 10 ** digits
        # within half a last digit either way: a tie (0.125) may round up or down, as float storage has it
        return abs(scaled - round(scaled)) < 1e-6 and abs(value - want) <= 0.5 * 10 ** -digits + 1e-9

    for digits in range(7):
        fits, off = True, False
        for got, (_, _, expected) in zip(outcomes, cases):
            if got[0] != "ok" or not isinstance(got[1], dict) or key not in got[1]:
                return None
            value, want = got[1][key], expected[key]
            if key == "per_position_acceptance":
                try:
                    value = list(value)
                except TypeError:
                    return None
                fits = len(value) == len(want) and all(rounded(v, w, digits) for v, w in zip(value, want))
            else:
                fits = not isinstance(value, bool) and rounded(value, want, digits)
            if not fits:
                break
            off = off or not _same_key(key, value, want)
        if fits and off:
            return digits
    return None


def _rounding_hint(keys: dict) -> str:
    """The hint for the keys of ``keys`` ({key: decimals}) returned rounded."""
    digits = max(keys.values())  # the learner's own digits where they rounded every key alike
    how = "to whole numbers (round(x)?)" if digits == 0 else f"to {digits} decimals (round(x, {digits})?)"
    names = list(keys)
    return (f"{in_words(names)} {'is' if len(names) == 1 else 'are'} rounded {how}: return the values unrounded, as "
            f"our stats do, and round only where you print them (f\"{{value:.{digits or 2}f}}\"); a rounded value no "
            "longer agrees with the counters' ratio, and the lesson compares it with our decode loop's stats.")


def _same_outcome(a, b) -> bool:
    if a[0] != b[0]:
        return False
    if a[0] == "raise":
        return a[1] == b[1]
    return isinstance(a[1], dict) and isinstance(b[1], dict) and not _differences(a[1], b[1])


@checker
def stats_from_vllm_counters(fn) -> str:
    """``fn(num_drafts, num_draft_tokens, num_accepted_tokens, accepted_per_position) -> dict`` with the keys
    ``acceptance_rate``, ``tokens_per_target_call`` and ``per_position_acceptance``, equal to what
    :func:`lab.metrics.summarize_steps` reports for the same steps."""
    cases = _cases()
    _, first, _ = cases[0]
    given = list(first["accepted_per_position"])
    _check_parameter_names(fn, first)
    try:  # the lesson passes its own counters dict (to_stats(**counters)) and prints it afterwards
        fn(first["num_drafts"], first["num_draft_tokens"], first["num_accepted_tokens"], given)
    except NotImplementedError:
        raise
    except Exception:  # noqa: BLE001 - reported with its case below
        pass
    if given != list(first["accepted_per_position"]):
        raise Fail(f"your function changed accepted_per_position in place (now {_show(given)}); build a new list, "
                   "e.g. [count / num_drafts for count in accepted_per_position]: the caller's counters must stay "
                   "counts.")
    outcomes = [_outcome(fn, counters) for _, counters, _ in cases]
    for got in outcomes:  # before anything reads it: a one-shot iterator would be used up by the comparison
        per_position = (got[1].get("per_position_acceptance", []) if got[0] == "ok" and isinstance(got[1], dict)
                        else [])  # a missing key, another type, an error: reported below
        if isinstance(per_position, collections.abc.Iterator):  # None, a float, a set: the comparison's hints
            raise Fail(f"per_position_acceptance is a {type(per_position).__name__}; return a list, e.g. [count / "
                       "num_drafts for count in accepted_per_position]: a map or generator can be read only once, "
                       "and the lesson reads the list again and indexes it.")
    for (label, counters, expected), got in zip(cases, outcomes):
        if got[0] == "ok" and isinstance(got[1], dict) and not _differences(got[1], expected):
            continue
        where = f"on {label} ({_counter_text(counters)})"
        if got[0] == "ok" and isinstance(got[1], dict) and all(k in got[1] for k in KEYS):
            key = _differences(got[1], expected)[0]
            where += f" {key} should be {_show(expected[key])}, got {_show(got[1][key])}"
        for fault, hint in _FAULTS:  # a planted mistake that gives the same answers on every case
            if all(_same_outcome(o, _outcome(fault, c)) for o, (_, c, _) in zip(outcomes, cases)):
                raise Fail(f"{where}.\n  Hint: {hint}")
        zero = [lbl for (lbl, _, _), o in zip(cases, outcomes) if o[:2] == ("raise", "ZeroDivisionError")]
        for fault, hint in _FAULTS if zero else ():  # the same mistake, unguarded where a count is 0
            if all(o[:2] == ("raise", "ZeroDivisionError") or _same_outcome(o, _outcome(fault, c))
                   for o, (_, c, _) in zip(outcomes, cases)):
                raise Fail(f"{hint} (Your function also divided by zero on {zero[0]}.)")
        if counters["num_drafts"] == 0 and got[0] == "ok":  # the other cases are right: only the empty run is not
            raise Fail(f"{where}.\n  Hint: with no drafts there is no rate to report: still return the dict, with "
                       "None for acceptance_rate and tokens_per_target_call (not 0, nan or 1, which read as "
                       "measurements) and [] for per_position_acceptance, as our stats do.")
        if got[0] == "raise":
            raise Fail(f"on {label} ({_counter_text(counters)}) your function raised {got[1]}: {got[2]}")
        if not isinstance(got[1], dict):
            raise Fail(f"return a dict with the keys {', '.join(KEYS)} (got {type(got[1]).__name__}).")
        missing = [k for k in KEYS if k not in got[1]]
        if missing:
            raise Fail(f"your dict is missing {', '.join(missing)}; return all of {', '.join(KEYS)}.")
        wrong = _differences(got[1], expected)
        key = wrong[0]
        hints = [hint for k in wrong if (hint := _key_hint(k, outcomes, cases))]
        hints = list(dict.fromkeys(hints))  # two keys of one mistake (× 100 on both rates) share a hint
        # round(share, 2): the formula is right, so no planted mistake fits; one hint names every rounded key
        rounded = {k: d for k in wrong if not _key_hint(k, outcomes, cases)
                   and (d := _rounded_to(k, outcomes, cases)) is not None}
        if rounded:
            hints.append(_rounding_hint(rounded))
        per_position = got[1]["per_position_acceptance"]
        if ("per_position_acceptance" in wrong and not _key_hint("per_position_acceptance", outcomes, cases)
                and isinstance(per_position, (list, tuple)) and len(per_position) != len(expected[
                    "per_position_acceptance"])):
            hints.append(f"per_position_acceptance has {len(per_position)} entries; keep one per draft position "
                         f"({len(expected['per_position_acceptance'])} here), zeros included: the lesson reads "
                         "position i at index i, and a position whose drafts were never accepted measured 0.0.")
        exact = _show(expected[key]) == _show(got[1][key])  # 0.333 against 1/3: show every digit
        raise Fail(f"on {label} ({_counter_text(counters)}) {key} should be {_show(expected[key], exact)}, "
                   f"got {_show(got[1][key], exact)}." + "".join(f"\n  Hint: {hint}" for hint in hints))
    return (f"all three stats match our decode loop's on {len(cases)} runs, including one where every draft was "
            "accepted, one whose draft length varies and one with no drafts.")


def _check_parameter_names(fn, counters: dict) -> None:
    """``Fail`` when ``fn`` cannot be called as the lesson calls it, ``to_stats(**counters)``: parameters renamed
    (the checks call it by position, which would pass). A function taking ``*args`` is left to the checks."""
    try:
        signature = inspect.signature(fn)
    except (TypeError, ValueError):  # not a function: the checks below say so
        return
    if any(p.kind is p.VAR_POSITIONAL for p in signature.parameters.values()):
        return
    try:
        signature.bind(**counters)
    except TypeError as error:
        raise Fail(f"the lesson calls your function with the counters by name, to_stats(**counters), and that "
                   f"fails: {error}.\n  Hint: keep the parameter names {', '.join(counters)}.") from None


def _counter_text(counters: dict) -> str:
    per = counters["accepted_per_position"]
    shown = per if len(per) <= 8 else per[:8] + ["…"]
    return (f"num_drafts={counters['num_drafts']}, num_draft_tokens={counters['num_draft_tokens']}, "
            f"num_accepted_tokens={counters['num_accepted_tokens']}, accepted_per_position={shown}")


def _show(value, exact: bool = False) -> str:
    """``value`` for a message: floats to 4 decimals (3 in a list), or every digit with ``exact``."""
    if isinstance(value, float):
        return repr(value) if exact else f"{value:.4f}"
    if isinstance(value, (list, tuple)):
        items = [(repr(x) if exact else f"{x:.3f}") if isinstance(x, float) else repr(x) for x in list(value)[:8]]
        return "[" + ", ".join(items) + (", …]" if len(value) > 8 else "]")
    return repr(value)
