"""Exercise checkers for the lessons: run the learner's function, print ✓ or a specific hint, return a bool.

Every checker takes the learner's function (plus, for some, nothing else), runs it on reference cases whose
answers come from the ``lab`` reference code, and, when an answer is wrong, compares the learner's answers with
planted wrong versions (the mistakes people actually make) to print the hint that fits. A stub that raises
``NotImplementedError`` prints "not solved yet" and returns ``False``; no checker ever raises, so a lesson runs
top to bottom whatever state its exercises are in.

Notation: ``target_probs`` is the verifier (big model) distribution, ``draft_probs`` the draft's; Leviathan et
al. (2023) write p for the target and q for the draft, while Chen et al. (2023) and seed lesson 000 write q for the
verifier and p for the draft.
"""
from __future__ import annotations

import ctypes
import dataclasses
import functools
import inspect
import math
import random
import re
import signal
import threading
import warnings
from numbers import Integral

import torch

from lab import metrics as _metrics
from lab import sampling as _sampling
from lab.trace import StepRecord

__all__ = [
    "step_latency", "arithmetic_intensity",
    "accept_probability", "accept_or_reject",
    "residual_distribution", "residual_after_rejection", "residual_without_softmax", "residual_zero_mass",
    "speculative_step", "chi_square_pvalue", "greedy_draft", "topk_draft",
    "expected_acceptance",
    "expected_tokens_per_call", "predicted_speedup", "best_n_draft", "speculation_metrics",
    "emitted_distribution",
]

# A check may be strict only where chance cannot trip a correct answer: the statistical checks below use
# fixed seeds and reject only at p < 1e-4.
P_THRESHOLD = 1e-4


class _Fail(Exception):
    """A wrong answer; the message says what went wrong and what to try."""

# Seconds one call of the learner's function may take (every call a check makes) before the check gives up on it. The slowest
# reference case (a short generation with the bundled pair) takes well under a second on a 2-core CPU; only a loop
# with no way out comes near this. check_costs uses a tighter limit for its counting exercise.
CALL_TIME_LIMIT_S = 30.0


class _NoReturn(BaseException):
    """The learner's function ran past the time limit (``args`` = (the call's arguments, the limit in s)). A BaseException, so that neither the harness's
    ``except Exception`` nor one in the learner's own code records it as an ordinary answer."""


_LIMIT = threading.local()  # .active: a time-limited call is running on this thread


def _limited(fn, args):
    """``fn(*args)`` marked as a time-limited call on this thread, so that calls nested in it run directly."""
    _LIMIT.active = True
    try:
        return fn(*args)
    finally:
        _LIMIT.active = False


def _call_in_thread(fn, args, seconds):
    # Fallback where SIGALRM is not available (Windows) or we are not on the main thread: run the call in a daemon
    # thread and, if it is still running at the limit, raise _NoReturn inside it (this stops a pure-Python loop).
    result = {}

    def run():
        try:
            result["value"] = _limited(fn, args)
        except BaseException as error:  # noqa: BLE001 — handed back to the caller below
            result["error"] = error

    worker = threading.Thread(target=run, daemon=True, name="checker time limit")
    worker.start()
    worker.join(seconds)
    if worker.is_alive():
        ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(worker.ident), ctypes.py_object(_NoReturn))
        worker.join(0.5)
        raise _NoReturn(args, seconds)
    if "error" in result:
        raise result["error"]
    return result["value"]


def _call_with_alarm(fn, args, seconds):
    def on_alarm(signum, frame):
        raise _NoReturn(args, seconds)

    previous = signal.signal(signal.SIGALRM, on_alarm)
    try:
        signal.setitimer(signal.ITIMER_REAL, seconds)
        try:
            return _limited(fn, args)
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
    finally:  # a separate block: an alarm arriving just before the timer is stopped must not skip this
        signal.signal(signal.SIGALRM, previous)


def _time_limited(fn, seconds: float):
    """``fn`` wrapped so that a call running longer than ``seconds`` raises ``_NoReturn`` instead of hanging the
    checker: SIGALRM on POSIX when called on the main thread with no other interval timer pending (a Jupyter kernel
    runs cells there), else a watched daemon thread. A function that is already wrapped is wrapped again from the
    original (the new limit replaces the old one; limits never nest), and a call made inside another limited call
    runs directly (the outer limit bounds it; no second timer or thread). The wrapper keeps ``fn``'s name and
    signature."""
    fn = getattr(fn, "_lab_unlimited", fn)

    def call(*args, **kwargs):
        target = functools.partial(fn, **kwargs) if kwargs else fn
        if getattr(_LIMIT, "active", False):
            return target(*args)
        usable = (hasattr(signal, "setitimer") and threading.current_thread() is threading.main_thread()
                  and signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0))
        return (_call_with_alarm if usable else _call_in_thread)(target, args, seconds)

    try:
        call = functools.wraps(fn)(call)
    except (AttributeError, TypeError):  # an odd callable: keep the plain wrapper
        pass
    call._lab_unlimited = fn
    return call


def _checker(summary_fn):
    """Wrap a check body: print ✓ / ✗ / "not solved yet", return True/False, never raise."""

    @functools.wraps(summary_fn)
    def run(fn, *args, **kwargs) -> bool:
        name = summary_fn.__name__
        # Messages show calls as the learner wrote them: `advance(9, 0)`, not the reference's `next_position(9, 0)`.
        own = getattr(fn, "__name__", "")
        call_name = own if own.isidentifier() else name
        if not callable(fn):
            print(f"✗ {name}: pass your function itself (got {type(fn).__name__}), e.g. check.{name}(my_function)")
            return False
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                # Every call of the learner's function is time-limited, also those a check makes itself (statistical
                # loops, type checks before _compare): an endless loop is reported, never a hung kernel.
                summary = summary_fn(_time_limited(fn, CALL_TIME_LIMIT_S), *args, **kwargs)
        except NotImplementedError:
            print(f"{name}: not solved yet — replace `raise NotImplementedError` with your code and rerun.")
            return False
        except _Fail as failure:
            message = str(failure) if call_name == name else re.sub(rf"(?<![\w.]){name}\(", f"{call_name}(", str(failure))
            print(f"✗ {name}: {message}")
            return False
        except _NoReturn as stuck:
            print(f"✗ {name}: {call_name}({', '.join(_show_brief(a) for a in stuck.args[0])}) did not return within "
                  f"{stuck.args[1]:g} s.\n  Hint: look for a loop with no way out (a `while` whose condition "
                  "never turns false, or a counter that is never advanced).")
            return False
        except Exception as error:  # a bug in the learner's code that the case list did not anticipate
            print(f"✗ {name}: your function raised {type(error).__name__}: {error}")
            return False
        print(f"✓ {name}: {summary}")
        return True

    return run


# ---------------------------------------------------------------------------------------------------------
# Comparing outcomes of the learner's function with the reference and with planted wrong versions.

def _copy_arg(value):
    # tensors cloned, lists, tuples and dicts rebuilt (recursively), step records copied; other objects (models,
    # generators) shared
    if isinstance(value, torch.Tensor):
        return value.clone()
    if isinstance(value, (list, tuple)):
        return type(value)(_copy_arg(v) for v in value) if type(value) in (list, tuple) else value
    if type(value) is dict:  # a config.json, counters
        return {k: _copy_arg(v) for k, v in value.items()}
    if isinstance(value, StepRecord):
        return dataclasses.replace(value, **{f.name: _copy_arg(getattr(value, f.name))
                                             for f in dataclasses.fields(value) if f.init})
    return value


def _fresh(args) -> tuple:
    """``args`` with every tensor cloned and every list rebuilt: a function that edits its inputs in place
    (``t.sub_(d)``, ``window[:] = ...``) must not corrupt the module-level cases, which every later call and every
    later check reuses."""
    return tuple(_copy_arg(a) for a in args)


def _same_arg(before, after) -> bool:
    """Whether an argument is as it was before the call (tensors by value, lists item by item)."""
    if isinstance(before, torch.Tensor):
        return isinstance(after, torch.Tensor) and _unchanged(before, after)
    if type(before) in (list, tuple):
        return (type(after) is type(before) and len(after) == len(before)
                and all(_same_arg(b, a) for b, a in zip(before, after)))
    if type(before) is dict:
        return (type(after) is dict and list(after) == list(before)
                and all(_same_arg(before[k], after[k]) for k in before))
    if isinstance(before, StepRecord):
        return type(after) is type(before) and all(_same_arg(getattr(before, f.name), getattr(after, f.name, None))
                                                   for f in dataclasses.fields(before))
    if isinstance(before, (int, float, str)) or before is None:  # the items of a list (token ids, numbers)
        return type(after) is type(before) and (after == before or after != after and before != before)  # NaN
    return True  # shared objects: not copied, so there is nothing to compare


def _unchanged(before: torch.Tensor, after: torch.Tensor) -> bool:
    if before.shape != after.shape or before.dtype != after.dtype:
        return False
    if before.is_floating_point():
        return bool(((before == after) | (before.isnan() & after.isnan())).all())
    return bool(torch.equal(before, after))


_IN_PLACE_HINT = ("don't modify your inputs in place (sub_, clamp_, `x -= ...`, `x[i] = ...`): the caller still "
                  "needs them, and later cells read the same tensors again. Build new tensors instead, e.g. "
                  "(target_probs - draft_probs).clamp_min(0).")
_IN_PLACE_DICT_HINT = ("don't modify a dict you were given (`config.pop(...)`, `config.setdefault(...)`, `config[key] "
                       "= ...`): the caller still needs it as it was. Read it with `config.get(key)` or "
                       "`config[key]` and keep what you compute in variables of your own.")
_IN_PLACE_RECORD_HINT = ("don't modify the step records you were given, or their list (`step.drafted = ...`, "
                         "`step.num_accepted += ...`, `steps.sort(...)`, `steps.append(...)`): they are the run's "
                         "history, and the lesson reads them again. Compute from them into variables of your own.")
_IN_PLACE_LIST_HINT = ("don't modify your inputs in place (`window[:] = ...`, `ids += ...`, `.append`, `x[i] = "
                       "...`): the caller still needs them, and later cells keep and compare them. Build a new list "
                       "instead, e.g. `ids = prefix_ids + window`.")


def _argument_name(fn, index: int) -> str:
    """The name of ``fn``'s positional parameter number ``index`` (0-based), or "its argument number i"."""
    try:
        params = [p for p in inspect.signature(fn).parameters.values()
                  if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    except (TypeError, ValueError):
        params = []
    return f"its argument `{params[index].name}`" if index < len(params) else f"its argument number {index + 1}"


def _outcome(fn, args):
    """("ok", value) or ("raise", exception type name, message) of ``fn`` on copies of ``args`` (tensors
    cloned, see :func:`_fresh`); NotImplementedError passes through."""
    return _run(fn, _fresh(args))


def _run(fn, args):
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # e.g. scipy's divide warnings inside planted faults
            return ("ok", fn(*args))
    except NotImplementedError:
        raise
    except Exception as error:  # noqa: BLE001 — recorded, compared, and shown to the learner
        return ("raise", type(error).__name__, str(error))


def _as_float(value):
    if isinstance(value, torch.Tensor):
        if value.numel() != 1:
            return None
        return float(value)
    if isinstance(value, (bool, str, bytes)):  # float("45.0") parses, but a string is not a numeric answer
        return None
    if getattr(value, "ndim", 0) > 0:  # a NumPy array [1]: float() of it is refused by NumPy >= 2 only (1.26 warns)
        return None
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


def _same_float(a, b, rel=1e-6, abs_=1e-9) -> bool:
    a, b = _as_float(a), _as_float(b)
    if a is None or b is None:
        return False
    if math.isnan(a) or math.isnan(b):
        return math.isnan(a) and math.isnan(b)
    if math.isinf(a) or math.isinf(b):
        return a == b
    return math.isclose(a, b, rel_tol=rel, abs_tol=abs_)


def _as_bool(value):
    if isinstance(value, torch.Tensor) and value.numel() == 1 and value.dtype == torch.bool:
        return bool(value)
    if type(value).__name__ in ("bool", "bool_"):  # Python or NumPy bool
        return bool(value)
    return None


def _same_bool(a, b) -> bool:
    a, b = _as_bool(a), _as_bool(b)
    return a is not None and a == b


def _same_int(a, b) -> bool:
    if isinstance(a, (bool, str, bytes)) or isinstance(b, (bool, str, bytes)):
        return False
    try:
        return int(a) == int(b) and float(a) == float(b)
    except (TypeError, ValueError, OverflowError):  # inf or NaN from a learner is a wrong answer
        return False


def _same_whole(answer, expected) -> bool:
    """:func:`_same_int` for a count, length or position the lesson formats with ``:d``, indexes with or passes to
    ``range()``: the answer must be of an integer type (int, NumPy integer or a one-element integer tensor), so
    12.0 is wrong although it equals 12."""
    whole = isinstance(answer, Integral) or (isinstance(answer, torch.Tensor) and answer.numel() == 1
                                                      and not answer.is_floating_point())
    return whole and _same_int(answer, expected)


def _same_tensor(a, b, atol=1e-5) -> bool:
    try:  # an answer on the GPU is compared with the CPU reference; to the CPU first (MPS has no float64)
        a, b = (torch.as_tensor(x.detach().cpu() if isinstance(x, torch.Tensor) else x, dtype=torch.float64)
                for x in (a, b))
    except (TypeError, ValueError, RuntimeError):
        return False
    if a.shape != b.shape:
        return False
    return bool(torch.allclose(a, b, atol=atol, rtol=0, equal_nan=True))


def _same_tensor_type(a, b, atol=1e-5) -> bool:
    """:func:`_same_tensor` that also wants a tensor wherever the reference gave one (for answers that later cells
    call tensor methods on, such as lesson 03's residual)."""
    if isinstance(b, torch.Tensor) and not isinstance(a, torch.Tensor):
        return False
    return _same_tensor(a, b, atol)


def _same_outcome(a, b, same, messages: bool = False) -> bool:
    """Do two outcomes agree? Raises agree on the exception type (and, with ``messages``, on the message too:
    used to match a learner's error to a planted fault, where the type alone says little)."""
    if a[0] != b[0]:
        return False
    if a[0] == "raise":
        return a[1] == b[1] and (not messages or a[2] == b[2])
    return same(a[1], b[1])


def _show(value, exact: bool = False) -> str:
    """A short text of ``value`` for messages: floats to 4 significant digits, or every digit with ``exact``."""
    if isinstance(value, torch.Tensor):
        if value.dim() == 0:
            return f"tensor({_show(value.item(), exact)})"
        return "tensor(" + _show(value.tolist(), exact) + ")"
    if isinstance(value, float):
        return repr(value) if exact else f"{value:.4g}"
    if isinstance(value, (list, tuple)):
        inner = ", ".join(_show(v, exact) for v in value)
        return f"[{inner}]" if isinstance(value, list) else f"({inner},)" if len(value) == 1 else f"({inner})"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k!r}: {_show(v, exact)}" for k, v in value.items()) + "}"
    return repr(value)


def _show_brief(value) -> str:
    """:func:`_show` for an argument in a one-line message: a model, a function or a generator as ``<TypeName>`` (a
    model's repr runs to dozens of lines), a long list as its first items and its length."""
    if isinstance(value, (list, tuple)) and len(value) > 8:
        inner = ", ".join(_show(v) for v in value[:6])
        return f"[{inner}, … ({len(value)} items)]" if isinstance(value, list) else f"({inner}, … ({len(value)} items))"
    if isinstance(value, torch.Tensor) and value.numel() > 8:  # its values would not fit one line anyway
        return f"<tensor {list(value.shape)} {str(value.dtype).removeprefix('torch.')}>"
    if value is None or isinstance(value, (bool, int, float, str, list, tuple, dict, torch.Tensor, torch.dtype)):
        text = _show(value)
        return text if len(text) <= 200 else text[:199] + "…"
    return f"<{type(value).__name__}>"


def _show_outcome(outcome, exact: bool = False) -> str:
    if outcome[0] == "raise":
        return f"raised {outcome[1]}: {outcome[2]}"
    return f"returned {_show(outcome[1], exact)}"


def _compare(name, fn, cases, reference, faults, same, generic_hint, show_args=None, time_limit=None) -> int:
    """Run ``fn`` on every case; on a mismatch raise ``_Fail`` with the hint of the planted fault that best
    explains the learner's answers: among the faults that reproduce more than half of the learner's wrong answers,
    the one agreeing on most cases (the hint then says how many it fits when that is not all of them);
    ``generic_hint`` when none does.
    A call of ``fn`` that runs past ``time_limit`` seconds (default ``CALL_TIME_LIMIT_S``) raises ``_NoReturn``,
    which ``_checker`` reports."""
    show_args = show_args or (lambda args: ", ".join(_show(a) for a in args))
    learner_fn, fn = fn, _time_limited(fn, time_limit or CALL_TIME_LIMIT_S)
    expected = [_outcome(reference, args) for args in cases]
    got = []
    for i, args in enumerate(cases):
        copies = _fresh(args)
        got.append(_run(fn, copies))
        changed = [k for k, (a, c) in enumerate(zip(args, copies)) if not _same_arg(a, c)]
        if changed:
            arg = args[changed[0]]
            hint = (_IN_PLACE_HINT if isinstance(arg, torch.Tensor) else _IN_PLACE_DICT_HINT if isinstance(arg, dict)
                    else _IN_PLACE_RECORD_HINT if isinstance(arg, list) and any(isinstance(a, StepRecord) for a in arg)
                    else _IN_PLACE_LIST_HINT)
            raise _Fail(f"{name}({show_args(args)}) changed {_argument_name(learner_fn, changed[0])} in place."
                        f"\n  Hint: {hint}")
    failing = [i for i in range(len(cases)) if not _same_outcome(got[i], expected[i], same)]
    if not failing:
        return len(cases)
    best_hint, best_score, best_case = None, (0, 0), failing[0]
    for fault_fn, hint in faults:
        fault = [_outcome(fault_fn, args) for args in cases]
        agree = [i for i in failing if _same_outcome(got[i], fault[i], same, messages=True)]
        # Rank by agreement on the failing cases, then on all cases (a fault that also explains the passing
        # cases is the better explanation).
        score = (len(agree), sum(_same_outcome(g, f, same, messages=True) for g, f in zip(got, fault)))
        # A fault that explains only a few of the wrong answers would point at the wrong mistake.
        if 2 * len(agree) > len(failing) and score > best_score:
            best_hint, best_score, best_case = hint, score, agree[0]
    i = best_case
    label = "Hint"
    def is_none(outcome):
        return outcome[0] == "ok" and outcome[1] is None

    # None is a missing `return` unless it is an answer the exercise allows (the reference returns it somewhere)
    # and the learner's function did return something else elsewhere.
    if is_none(got[i]) and (all(is_none(g) for g in got) or not any(is_none(e) for e in expected)):
        best_hint = "your function returned None: did you forget a `return` statement?"
    elif (got[i][0] == "ok" and isinstance(got[i][1], str) and expected[i][0] == "ok"
          and _as_float(expected[i][1]) is not None):  # a number was due
        best_hint = ("your function returned a string; return the value itself (a number, not an f-string or "
                     "str(...)): later cells compute with it.")
    elif (got[i][0] == "ok" and expected[i][0] == "ok" and isinstance(expected[i][1], torch.Tensor)
          and not isinstance(got[i][1], torch.Tensor) and _same_tensor(got[i][1], expected[i][1])):
        best_hint = ("the values are right, but return a torch.Tensor (not a list or array): the lesson's next "
                     "cells call tensor methods on the answer.")
    elif got[i][0] == "ok" and expected[i][0] == "ok" and _wrapped_scalar(got[i][1], expected[i][1], same):
        best_hint = (f"the value is right, but return a single number, not a {type(got[i][1]).__name__} holding "
                     "it: later cells compute with it (2 * [x] repeats a list instead of doubling x).")
    elif got[i][0] == "ok" and expected[i][0] == "ok" and _reshaped(got[i][1], expected[i][1]):
        got_shape, want_shape = list(torch.as_tensor(got[i][1]).shape), list(expected[i][1].shape)
        best_hint = (f"the values are right, but the shape is {got_shape}; return shape {want_shape}, "
                     + ("without the extra dimension (no unsqueeze, [None] or reshape(1, -1) at the end)."
                        if len(got_shape) > len(want_shape) else
                        "keeping every dimension (no squeeze(), and keepdim=True in sums and maxima)."))
    elif best_hint and best_score[0] < len(failing):
        # Say so when the hint leaves some wrong answers unexplained: there may be a second mistake.
        label = f"Hint (it fits {best_score[0]} of the {len(failing)} wrong answers)"
    want, shown = expected[i], _show_outcome(got[i])
    want = _show(want[1]) if want[0] == "ok" else _show_outcome(want)
    if want == shown.removeprefix("returned "):  # a near miss that 4 digits hide: show every digit
        want, shown = _show(expected[i][1], exact=True), _show_outcome(got[i], exact=True)
    message = (f"{name}({show_args(cases[i])}) {shown}; expected {want}."
               f"\n  {label}: {best_hint or generic_hint}")
    if len(failing) > 1:
        message += f"\n  ({len(failing)} of {len(cases)} cases are wrong.)"
    raise _Fail(message)


def _wrapped_scalar(got, expected, same) -> bool:
    """Is ``got`` a one-element list, tuple or array holding the number ``expected`` (a scalar answer)?"""
    if isinstance(expected, torch.Tensor) and expected.dim() > 0 or _as_float(expected) is None:
        return False
    if isinstance(got, (list, tuple)) and len(got) == 1:
        item = got[0]
    elif type(got).__name__ == "ndarray" and getattr(got, "size", 0) == 1 and got.ndim > 0:
        item = got.reshape(()).item()
    else:
        return False
    return same(item, expected)


def _reshaped(got, expected) -> bool:
    """Are ``got``'s values those of the tensor ``expected`` in another shape (an extra dimension of 1)?"""
    if not isinstance(expected, torch.Tensor) or expected.dim() == 0:
        return False
    try:
        got = torch.as_tensor(got, dtype=torch.float64)
    except (TypeError, ValueError, RuntimeError):
        return False
    return (got.shape != expected.shape and got.numel() == expected.numel()
            and [s for s in got.shape if s != 1] == [s for s in expected.shape if s != 1]
            and _same_tensor(got.reshape(expected.shape), expected))


def _pvalue(counts, probs) -> float:
    """Chi-square p-value of counts against probs; 0.0 (never NaN) when the test is undefined, 1.0 when there are
    too few counts to test."""
    counts = torch.as_tensor(counts, dtype=torch.float64)
    probs = torch.as_tensor(probs, dtype=torch.float64)
    keep = (probs > 0) | (counts > 0)  # a category nobody can emit and nobody emitted carries no information
    if int(keep.sum()) < 2:
        return 1.0 if bool((counts[keep] > 0).all()) and bool((probs[keep] > 0).all()) else 0.0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            p = float(_metrics.chi_square(counts[keep], probs[keep]).pvalue)
        except ValueError as error:
            if "too few to test" in str(error):  # no evidence against the learner's code
                return 1.0
            raise
    return 0.0 if math.isnan(p) else p


# ---------------------------------------------------------------------------------------------------------
# Lesson 01: the sequential bottleneck.

def _ref_step_latency(target_ms, draft_ms, n_draft):
    return n_draft * draft_ms + target_ms


_STEP_LATENCY_CASES = [(30.0, 3.0, 5), (30.0, 3.0, 1), (10.0, 1.0, 4), (7.6, 0.93, 4), (30.0, 0.0, 5),
                       (12.0, 2.5, 8)]


@_checker
def step_latency(fn):
    """Check ``fn(target_ms, draft_ms, n_draft) -> ms`` for one draft-then-verify step (seed lesson 000).

    Reference: ``n_draft * draft_ms + target_ms`` (one target pass verifies all drafts). Returns True/False.
    """
    faults = [
        (lambda t, d, n: (n + 1) * d + t,
         "the draft runs once per drafted token: N passes, not N + 1 (the target supplies the extra token)."),
        (lambda t, d, n: n * d + (n + 1) * t,
         "the target verifies all drafted positions in ONE forward pass, so it costs target_ms once per step."),
        (lambda t, d, n: t,
         "the draft's passes are not free: add n_draft * draft_ms."),
        (lambda t, d, n: d + t,
         "the draft is autoregressive: it runs once per drafted token, n_draft passes in all."),
        (lambda t, d, n: n * (d + t),
         "one step has N draft passes and a single target pass, not N of each."),
    ]
    n = _compare("step_latency", fn, _STEP_LATENCY_CASES, _ref_step_latency, faults, _same_float,
                 "one step = n_draft draft passes + one target pass over all drafted positions.")
    return f"correct on all {n} cases (30 ms target, 3 ms draft, N = 5 gives 45 ms)."


def _ref_intensity(k_tokens, bytes_per_param):
    return 2 * k_tokens / bytes_per_param


_INTENSITY_CASES = [(1, 2), (16, 2), (1, 4), (300, 2), (8, 1), (5, 4)]


@_checker
def arithmetic_intensity(fn):
    """Check ``fn(k_tokens, bytes_per_param) -> FLOPs per byte`` of one forward pass over ``k_tokens``.

    Reference: ``2 * k_tokens / bytes_per_param`` (each parameter does one multiply-add per token and is read
    from memory once per pass; attention and activations ignored). Returns True/False.
    """
    faults = [
        (lambda k, b: k / b, "a multiply-add is 2 FLOPs: each parameter costs 2 FLOPs per token."),
        (lambda k, b: b / (2 * k), "intensity is FLOPs divided by bytes, not bytes divided by FLOPs."),
        # also what 2 * k / (b * k) gives: bytes counted per token instead of once per pass
        (lambda k, b: 2 / b, "the weights are read once per pass (one read serves all k tokens) but used once per "
                             "token: FLOPs grow with k, bytes do not."),
        (lambda k, b: 2 * k * b, "divide by the bytes read (bytes_per_param per parameter), don't multiply."),
        (lambda k, b: 2 * k / (8 * b), "bytes_per_param is already in bytes: don't multiply it by 8 (that counts "
                                       "bits). Intensity is FLOPs per BYTE."),
        (lambda k, b: 2 * k * 8 / b, "keep everything in bytes: FLOPs per byte is 2 * k / bytes_per_param, with no "
                                     "factor of 8."),
    ]
    n = _compare("arithmetic_intensity", fn, _INTENSITY_CASES, _ref_intensity, faults, _same_float,
                 "FLOPs per pass = 2 * params * k; bytes per pass = params * bytes_per_param.")
    return f"correct on all {n} cases."


# ---------------------------------------------------------------------------------------------------------
# Lesson 02: the rejection step.

def _ref_accept_probability(target_prob, draft_prob):
    if target_prob <= 0:
        return 0.0
    if draft_prob <= 0:
        return 1.0
    return min(1.0, target_prob / draft_prob)


_ACCEPT_PROB_CASES = [(0.6, 0.8), (0.8, 0.6), (0.3, 0.3), (0.0, 0.5), (0.2, 0.0), (0.0, 0.0), (0.05, 0.9), (1.0, 0.25),
                      (0.375, 0.75)]


@_checker
def accept_probability(fn):
    """Check ``fn(target_prob, draft_prob) -> float``: the chance min(1, target/draft) of accepting a draft.

    A draft probability of 0 must not divide by zero (accept if the target gives the token mass); a target
    probability of 0 gives 0. Source: Leviathan et al. 2023, Algorithm 1. Returns True/False.
    """
    faults = [
        (lambda t, d: t / d if d > 0 else math.inf,
         "a probability can't exceed 1: cap the ratio with min(1, target/draft). When the target likes the token "
         "more than the draft does, the draft token is always accepted."),
        (lambda t, d: min(1.0, d / t),
         "the ratio is upside down: accept with target/draft, so tokens the draft over-proposes get accepted less."),
        (lambda t, d: min(1.0, t / d),
         "draft_prob can be 0 (a deterministic or top-k draft); handle it before dividing: the token is then "
         "accepted whenever target_prob > 0."),
        (lambda t, d: min(1.0, t / d) if d > 0 else 0.0,
         "when draft_prob is 0 the ratio is infinite, so the acceptance probability is 1 (if target_prob > 0)."),
        (lambda t, d: min(1.0, t / d) if d > 0 else 1.0,
         "a token the target gives probability 0 must never be accepted, even when draft_prob is 0."),
    ]
    n = _compare("accept_probability", fn, _ACCEPT_PROB_CASES, _ref_accept_probability, faults, _same_float,
                 "return min(1, target_prob / draft_prob), with the two zero cases handled first.")
    return f"correct on all {n} cases."


# u values are exact binary fractions so that u == target/draft can be tested exactly.
_ACCEPT_CASES = [
    (0.375, 0.75, 0.49), (0.375, 0.75, 0.5), (0.375, 0.75, 0.8), (0.75, 0.375, 0.99), (0.0, 0.5, 0.0),
    (0.25, 0.0, 0.3), (0.5, 0.5, 0.999), (0.1, 0.9, 0.05), (0.1, 0.9, 0.2), (0.6, 0.8, 0.7), (0.0, 0.0, 0.25),
    (1.0, 0.5, 0.0),
]


@_checker
def accept_or_reject(fn):
    """Check ``fn(target_prob, draft_prob, u) -> bool``: accept iff ``u < min(1, target_prob / draft_prob)``.

    Planted faults it tells apart: ``<=`` instead of ``<`` (accepts impossible tokens when u == 0), the ratio
    inverted, division by a zero draft probability, the comparison reversed. Reference:
    :func:`lab.sampling.accept_or_reject`. Returns True/False.
    """
    def ratio(t, d):
        return min(1.0, t / d)

    faults = [
        (lambda t, d, u: u <= ratio(t, d) if d > 0 else True,
         "use a strict `<`: with `<=`, u == 0 accepts a token whose target probability is 0, and u equal to the "
         "ratio accepts with probability slightly above min(1, target/draft)."),
        (lambda t, d, u: u < (min(1.0, d / t) if t > 0 else 1.0),
         "the ratio is upside down: it is target_prob / draft_prob."),
        (lambda t, d, u: u < ratio(t, d),
         "draft_prob can be 0; compare u * draft_prob < target_prob (no division), or treat the ratio as infinite."),
        (lambda t, d, u: u > ratio(t, d) if d > 0 else False,
         "the comparison is reversed: accept when u is BELOW the acceptance probability."),
        (lambda t, d, u: u < ratio(t, d) if d > 0 else False,
         "a zero draft probability makes the ratio infinite: accept (if the target gives the token mass)."),
        (lambda t, d, u: u < t,
         "compare u with the RATIO target_prob / draft_prob (capped at 1), not with target_prob alone: a token the "
         "draft proposes often must be thinned by its draft probability."),
        (lambda t, d, u: True if d == 0 else u < ratio(t, d),
         "a token the target gives probability 0 must never be accepted, even when draft_prob is 0 too: check "
         "target_prob first (or compare u * draft_prob < target_prob, which handles both)."),
    ]
    for args in _ACCEPT_CASES:
        out = _outcome(fn, args)
        if out[0] == "ok" and _as_bool(out[1]) is None:
            raise _Fail(f"accept_or_reject{args} returned {_show(out[1])} ({type(out[1]).__name__}); return True "
                        "or False (a comparison such as `u < ...` gives a bool).")
    n = _compare("accept_or_reject", fn, _ACCEPT_CASES, _sampling.accept_or_reject, faults, _same_bool,
                 "accept iff u < min(1, target_prob / draft_prob); handle draft_prob == 0 and target_prob == 0.")
    return f"correct on all {n} cases, including u == ratio, u == 0 and a zero draft probability."


# ---------------------------------------------------------------------------------------------------------
# Lesson 03: the residual distribution.

def _t(values):
    return torch.tensor(values, dtype=torch.float32)


_RESIDUAL_CASES = [
    (_t([0.5, 0.3, 0.2, 0.0]), _t([0.2, 0.5, 0.2, 0.1])),
    (_t([0.1, 0.2, 0.3, 0.4]), _t([0.4, 0.3, 0.2, 0.1])),
    (_t([0.25, 0.25, 0.25, 0.25]), _t([0.7, 0.1, 0.1, 0.1])),
    (_t([0.6, 0.4]), _t([1.0, 0.0])),
    (_t([0.0, 1.0, 0.0]), _t([0.5, 0.25, 0.25])),
    (_t([0.2, 0.3, 0.5]), _t([0.2, 0.3, 0.5])),
    (_t([0.125, 0.375, 0.5, 0.0, 0.0]), _t([0.125, 0.125, 0.25, 0.25, 0.25])),
]
_RESIDUAL_BATCH = (_t([[0.5, 0.3, 0.2, 0.0], [0.1, 0.2, 0.3, 0.4]]), _t([[0.2, 0.5, 0.2, 0.1], [0.4, 0.3, 0.2, 0.1]]))
# One row with target == draft next to one without: a zero-mass guard must work row by row.
_RESIDUAL_MIXED_BATCH = (_t([[0.2, 0.3, 0.5], [0.5, 0.3, 0.2]]), _t([[0.2, 0.3, 0.5], [0.2, 0.3, 0.5]]))


def _ref_residual(target_probs, draft_probs):
    return _sampling.residual_distribution(target_probs, draft_probs)


def _residual_faults():
    def pos(t, d):
        return (t - d).clamp_min(0)

    return [  # on a tie the earlier fault's hint is given: the whole-batch guard before the missing guard
        (lambda t, d: t if float(pos(t, d).sum()) == 0 else pos(t, d) / pos(t, d).sum(-1, keepdim=True),
         "guard each row, not the whole batch: a batch can hold a row where target == draft (zero residual mass) "
         "next to rows where it differs; use torch.where(mass > 0, positive / mass, target_probs) with mass = "
         "positive.sum(-1, keepdim=True)."),
        (lambda t, d: torch.softmax(pos(t, d), -1),
         "softmax is for logits: exp() gives every token, even those with zero residual mass (and zero target "
         "probability), some probability. Divide the positive part by its sum instead."),
        (lambda t, d: pos(t, d) / pos(t, d).sum(-1, keepdim=True),
         "when target == draft the positive part is all zeros and 0/0 = NaN. Return target_probs in that case "
         "(a rejection can't happen there, but batched code computes the residual anyway)."),
        (lambda t, d: (t - d) / (t - d).sum(-1, keepdim=True),
         "clamp negative differences to 0 before normalising: max(0, target - draft)."),
        (lambda t, d: torch.where(pos(t, d).sum(-1, keepdim=True) > 0,
                                  (t - d) / pos(t, d).sum(-1, keepdim=True).clamp_min(1e-30), t),
         "clamp negative differences to 0 before normalising: the numerator is max(0, target - draft) too, not "
         "target - draft (a probability can't be negative)."),
        (lambda t, d: pos(d, t) / pos(d, t).sum(-1, keepdim=True),
         "the subtraction is the wrong way round: the residual is max(0, target - draft), the mass the target "
         "has and the draft under-proposes."),
        (lambda t, d: pos(t, d),
         "normalise: divide max(0, target - draft) by its sum so the residual sums to 1."),
        (lambda t, d: torch.where(pos(t, d).sum(-1, keepdim=True) > 0, pos(t, d) / pos(t, d).sum(-1, keepdim=True)
                                  .clamp_min(1e-30), torch.zeros_like(t)),
         "with zero residual mass return target_probs, not zeros: zeros are not a distribution."),
        (lambda t, d: torch.where(pos(t, d).sum() > 0, pos(t, d) / pos(t, d).sum().clamp_min(1e-30), t),
         "normalise each row over the vocabulary (the last axis): use .sum(-1, keepdim=True), not .sum()."),
        (lambda t, d: (t + 0 * d) / t.sum(-1, keepdim=True),
         "resampling from the target itself counts the accepted mass twice: subtract the draft first."),
        (lambda t, d: torch.where(pos(t, d).sum(-1, keepdim=True) > 0,
                                  pos(t, d) / pos(t, d).sum(-1, keepdim=True).clamp_min(1e-30),
                                  torch.full_like(t, 1 / t.shape[-1])),
         "with zero residual mass return target_probs, not a uniform distribution: target == draft there, and the "
         "target's own distribution is the one to keep."),
    ]


def _residual_body(name, fn):
    faults = _residual_faults()
    hint = "residual = max(0, target - draft) / its sum over the vocabulary; target_probs where that sum is 0."
    n = _compare(name, fn, _RESIDUAL_CASES, _ref_residual, faults, _same_tensor_type, hint)
    n += _compare(name, fn, [_RESIDUAL_BATCH, _RESIDUAL_MIXED_BATCH], _ref_residual, faults, _same_tensor_type,
                  "a batch [rows, V] must give one residual per row (normalise over the last axis, and guard zero "
                  "mass row by row).")
    return f"correct on all {n} cases, including target == draft and a batch of rows."


@_checker
def residual_distribution(fn):
    """Check ``fn(target_probs [..., V], draft_probs [..., V]) -> [..., V]``: normalised max(0, target − draft).

    Where the positive part has zero mass the answer is ``target_probs``. Reference:
    :func:`lab.sampling.residual_distribution` (Leviathan et al. 2023, Algorithm 1). Returns True/False.
    """
    return _residual_body("residual_distribution", fn)


@_checker
def residual_without_softmax(fn):
    """Check the fix of the softmax bug in lesson 03 (same contract as :func:`residual_distribution`)."""
    return _residual_body("residual_without_softmax", fn)


@_checker
def residual_zero_mass(fn):
    """Check the fix of the NaN-at-zero-mass bug in lesson 03 (same contract as :func:`residual_distribution`)."""
    return _residual_body("residual_zero_mass", fn)


_AFTER_REJECTION_CASES = [
    (_t([0.5, 0.3, 0.2, 0.0]), _t([0.2, 0.5, 0.2, 0.1]), 1),
    (_t([0.1, 0.2, 0.3, 0.4]), _t([0.4, 0.3, 0.2, 0.1]), 0),
    (_t([0.6, 0.4]), _t([1.0, 0.0]), 0),
    (_t([0.25, 0.25, 0.25, 0.25]), _t([0.7, 0.1, 0.1, 0.1]), 0),
    (_t([0.125, 0.375, 0.5, 0.0, 0.0]), _t([0.125, 0.125, 0.25, 0.25, 0.25]), 3),
]


@_checker
def residual_after_rejection(fn):
    """Check ``fn(target_probs [V], draft_probs [V], rejected_token) -> [V]``, the distribution to resample from.

    The answer does not depend on which token was rejected: it is the residual over the whole vocabulary.
    The planted faults include seed lesson 002's version, which uses only the two scalar probabilities of the
    rejected token (0 / 0 = NaN, because a rejected token always has target < draft). Returns True/False.
    """
    def scalar(t, d, token):
        adjusted = (t[token] - d[token]).clamp_min(0)
        return adjusted / adjusted.sum()

    def without_token(t, d, token):
        rest = t.clone()
        rest[token] = 0
        return rest / rest.sum()

    faults = [
        (scalar, "the residual is a distribution over the whole vocabulary, not a number for the rejected token: "
                 "compute max(0, target - draft) for every token, then normalise."),
        (without_token, "removing the rejected token from the target and renormalising is not enough: every token "
                        "loses the mass min(target, draft) that acceptance already gave it."),
        (lambda t, d, token: t, "resample from the residual max(0, target - draft), not from the target."),
        (lambda t, d, token: torch.softmax((t - d).clamp_min(0), -1),
         "divide by the sum; softmax gives mass to tokens whose residual is 0."),
    ]
    n = _compare("residual_after_rejection", fn, _AFTER_REJECTION_CASES,
                 lambda t, d, token: _ref_residual(t, d), faults, _same_tensor,
                 "return the residual over the vocabulary: max(0, target - draft) / its sum.")
    return f"correct on all {n} cases: the rejected token's identity does not matter."


# ---------------------------------------------------------------------------------------------------------
# Lesson 04: one speculative step, exactness, and drafts that misreport their probabilities.

def emitted_distribution(target_probs, proposal_probs, reported_probs) -> torch.Tensor:
    """Exact distribution ``[V]`` (float64) of the first token a speculative step emits.

    ``proposal_probs`` [V] is the distribution the draft actually samples from; ``reported_probs`` [V] the one
    it hands to verification. The step accepts token x with probability min(1, target(x)/reported(x)) and
    otherwise resamples from the residual of target and reported. Equal to ``target_probs`` whenever
    reported == proposal (Leviathan et al. 2023, Appendix A.1). Raises ``ValueError`` for mismatched shapes.
    """
    target = torch.as_tensor(target_probs, dtype=torch.float64)
    proposal = torch.as_tensor(proposal_probs, dtype=torch.float64)
    reported = torch.as_tensor(reported_probs, dtype=torch.float64)
    if not target.shape == proposal.shape == reported.shape or target.dim() != 1:
        raise ValueError("target_probs, proposal_probs and reported_probs must all have shape [V]")
    positive = (target - reported).clamp_min(0)
    residual = positive / positive.sum() if positive.sum() > 0 else target
    out = torch.zeros_like(target)
    for x in range(len(target)):
        if proposal[x] <= 0:
            continue
        if target[x] <= 0:
            accept = 0.0
        elif reported[x] <= 0:
            accept = 1.0
        else:
            accept = min(1.0, float(target[x] / reported[x]))
        out[x] += proposal[x] * accept
        out += proposal[x] * (1 - accept) * residual
    return out


def _spec_candidates(target, draft):
    """Distributions of the first emitted token under common mistakes, keyed by hint."""
    t = torch.tensor(target, dtype=torch.float64)
    d = torch.tensor(draft, dtype=torch.float64)
    overlap = torch.minimum(t, d)
    reject = 1 - overlap.sum()
    positive = (t - d).clamp_min(0)
    backwards = (d - t).clamp_min(0)
    inverted_accept = torch.where(t > 0, torch.clamp(d / t.clamp_min(1e-30), max=1.0), torch.ones_like(t))
    inverted = d * inverted_accept + (1 - (d * inverted_accept).sum()) * positive / positive.sum()
    return [
        (overlap + reject * t, "after a rejection you resampled from the target; resample from the residual "
                               "max(0, target - draft) normalised."),
        (overlap + reject * d, "after a rejection you resampled from the draft; resample from the residual."),
        (overlap + reject * backwards / backwards.sum(), "the residual is max(0, target - draft), not draft - target."),
        (d, "every draft token was accepted: compare u with min(1, target/draft) of the drafted token."),
        (inverted, "the acceptance ratio is upside down: use target_prob / draft_prob."),
    ]


def _step_variant(context: str = "full", shared_u: bool = False, bonus_context: str = "full"):
    """A toy speculative step with one planted mistake, for diagnosing the statistical checks (and for tests).

    ``context="prefix"``: every draft is verified against ``target_model(prefix)``; ``shared_u=True``: one
    uniform draw decides every draft of the step; ``bonus_context`` "prefix" or "before_last": the bonus token
    is drawn from the target after the prefix, or after every draft but the last. Defaults: the correct step.
    """
    def step(prefix, target_model, draft_model, n_draft, rng):
        out = list(prefix)
        drafts, dists = [], []
        for _ in range(n_draft):
            dist = list(draft_model(out + drafts))
            drafts.append(_sampling.categorical(dist, rng))
            dists.append(dist)
        u = _sampling.uniform(rng) if shared_u else None
        for i, token in enumerate(drafts):
            target = list(target_model(out if context == "full" else list(prefix)))
            draw = u if shared_u else _sampling.uniform(rng)
            if _sampling.accept_or_reject(target[token], dists[i][token], draw):
                out.append(token)
                continue
            residual = _sampling.residual_distribution(torch.tensor(target), torch.tensor(dists[i]))
            out.append(_sampling.categorical(residual.tolist(), rng))
            return out
        bonus = {"full": out, "prefix": list(prefix), "before_last": out[:-1]}[bonus_context]
        out.append(_sampling.categorical(list(target_model(bonus)), rng))
        return out

    return step


# The bigram pair of the two-token joint check, and the context-dependent pair of the bonus check.
_JOINT_TARGET = [[0.6, 0.3, 0.1], [0.1, 0.2, 0.7], [0.3, 0.4, 0.3]]
_JOINT_DRAFT = [[0.2, 0.4, 0.4], [0.3, 0.3, 0.4], [0.1, 0.8, 0.1]]
_BONUS_TABLE = [[0.2, 0.4, 0.4], [0.7, 0.1, 0.2], [0.1, 0.2, 0.7]]
# _SECOND_ORDER[token before last][last token]: a model that reads two tokens (after [1, 2] it prefers 0; after
# a context of [2] alone, as a last-token-only step would show it, it prefers 2).
_SECOND_ORDER = [[[0.2, 0.4, 0.4], [0.3, 0.3, 0.4], [0.1, 0.1, 0.8]],
                 [[0.5, 0.3, 0.2], [0.2, 0.6, 0.2], [0.8, 0.1, 0.1]],
                 [[0.3, 0.3, 0.4], [0.4, 0.2, 0.4], [0.2, 0.7, 0.1]]]


def _joint_counts(step, runs: int, rng) -> list[int]:
    """Counts [9] of the first two generated tokens (a, b) at index 3a + b, chaining N = 3 steps on the joint pair."""
    from lab.toy import bigram_model

    target, draft = bigram_model(_JOINT_TARGET), bigram_model(_JOINT_DRAFT)
    pairs = [0] * 9
    for _ in range(runs):
        seq = [0]
        while len(seq) < 3:
            seq = step(seq, target, draft, 3, rng)
        pairs[3 * seq[1] + seq[2]] += 1
    return pairs


_JOINT_FAULTS = [
    (dict(shared_u=True),
     "draw a fresh u for every drafted token: with one u for the whole step, a later draft is accepted whenever an "
     "earlier one with a lower acceptance probability was, so the acceptances are no longer independent."),
    (dict(context="prefix"),
     "draft position i must be checked against target_model(prefix + drafts[:i]) (the context including the "
     "drafts accepted before it), not against target_model(prefix)."),
]


def _joint_candidates(runs: int, seed: int):
    """Estimated joint distributions [9] of the planted joint-check faults (with a half-count floor), with hints."""
    out = []
    for k, (kwargs, hint) in enumerate(_JOINT_FAULTS):
        counts = _joint_counts(_step_variant(**kwargs), runs, random.Random(seed + 101 + k))
        total = sum(counts) + 0.5 * len(counts)
        out.append(([(c + 0.5) / total for c in counts], hint))
    return out


def _diagnose(counts, candidates, fallback):
    best = max(candidates, key=lambda c: _pvalue(counts, c[0]))
    return best[1] if _pvalue(counts, best[0]) > P_THRESHOLD else fallback


@_checker
def speculative_step(fn, samples: int = 3000, seed: int = 0, bonus_samples: int = 600):
    """Check ``fn(prefix, target_model, draft_model, n_draft, rng) -> list[int]`` (the contract of
    :func:`lab.toy.speculative_step`) on toy models, by structure and by statistics.

    1. Identical target and draft, N = 1, 3 and 5: every draft is accepted, so exactly ``n_draft + 1`` tokens
       (bonus) follow.
    2. A draft that only proposes a token the target never emits: exactly one token follows, from the target.
    3. Identical bigram target and draft, N = 1 and 2, ``bonus_samples`` steps each: every (last draft, bonus)
       pair follows the target's row for the last draft (a bonus drawn after the prefix, or after all drafts
       but the last, fails here; so do drafts all sampled from ``draft_model(prefix)``). Then a draft unlike the
       target, N = 1, ``2 * bonus_samples`` steps: the bonus tokens follow the target, not the draft; and
       identical models that read the last two tokens: the first new token follows the target's row for them.
    4. The first emitted token, over ``samples`` steps, matches the target distribution (chi-square).
    5. Chaining steps on bigram models: the first two generated tokens match the target's joint distribution;
       a failure is diagnosed against planted faults (one u for every draft, verification after the prefix).
    ``rng`` is a ``random.Random`` seeded with ``seed``. Source: seed lesson 000, step 3. Returns True/False.
    """
    from lab.toy import bigram_model, fixed_model

    rng = random.Random(seed)
    target_probs = [0.5, 0.25, 0.15, 0.1]
    draft_probs = [0.1, 0.2, 0.3, 0.4]
    target, draft = fixed_model(target_probs), fixed_model(draft_probs)

    def call(prefix, tm, dm, n):
        given = list(prefix)
        out = fn(given, tm, dm, n, rng)
        if given != list(prefix):
            raise _Fail("your function changed the prefix list it was given; build a new list instead "
                        "(e.g. out = list(prefix)).")
        if not isinstance(out, list) or not all(isinstance(x, Integral) and not isinstance(x, bool) for x in out):
            raise _Fail(f"return a list of int token ids (prefix + new tokens); got {_show(out)}.")
        if out[:len(prefix)] != list(prefix):
            raise _Fail(f"the result must start with the prefix {prefix}; got {out}. Return prefix + new tokens.")
        return out

    prefix = [3, 1]
    for n in (1, 3, 5):  # N = 5 too: the lesson runs N = 4, so a loop capped at the checks' N must not pass
        for _ in range(20):
            out = call(prefix, target, target, n)
            new = len(out) - len(prefix)
            if new == n:
                raise _Fail(f"with draft == target every draft is accepted, so n_draft + 1 = {n + 1} tokens must "
                            f"follow; you returned {new}. After accepting all drafts, sample the bonus token from "
                            "the target's distribution at the next position.")
            if new != n + 1:
                raise _Fail(f"with draft == target every draft is accepted, so {n + 1} tokens must follow the "
                            f"prefix; you returned {new}: {out}.")

    cut_target = fixed_model([0.5, 0.5, 0.0, 0.0])
    only_three = fixed_model([0.0, 0.0, 0.0, 1.0])
    for _ in range(50):
        out = call(prefix, cut_target, only_three, 3)
        new = out[len(prefix):]
        if 3 in new:
            raise _Fail(f"token 3 has target probability 0 but you emitted it ({out}): it must be rejected.")
        if len(new) != 1:
            raise _Fail(f"the first draft is always rejected here, so exactly one token (resampled) must follow; "
                        f"you returned {len(new)}: {out}. Stop at the first rejection.")

    identical = bigram_model(_BONUS_TABLE)  # draft == target, so every draft is accepted and a bonus follows
    for n in (1, 2):
        after = [[0] * 3 for _ in range(3)]  # after[last draft][bonus token]
        for _ in range(bonus_samples):
            contexts = []  # the contexts the draft model was asked about in this step

            def drafting(context):
                contexts.append(list(context))
                return identical(context)

            out = call([0], identical, drafting, n)
            if len(out) != n + 2:
                if n > 1 and all(len(c) == 1 for c in contexts):
                    hint = ("every draft token was sampled from draft_model(prefix); the draft proposes one token "
                            "after another: draft i comes from draft_model(prefix + drafts[:i]), the context it is "
                            "then checked in.")
                else:
                    hint = ("draft position i must be checked with target_model(prefix + drafts[:i]), the context "
                            "the draft sampled it in, over the draft probability from the distribution it was "
                            "sampled from, draft_model(prefix + drafts[:i]); with identical models the ratio is "
                            "then 1.")
                raise _Fail(f"with draft == target (bigram models, N = {n}) every draft must be accepted, so {n + 1} "
                            f"tokens must follow the prefix [0]; you returned {out}.\n  Hint: {hint}")
            after[out[-2]][out[-1]] += 1
        for last in range(3):
            if sum(after[last]) and _pvalue(after[last], _BONUS_TABLE[last]) < P_THRESHOLD:
                freq = [round(c / sum(after[last]), 3) for c in after[last]]
                raise _Fail(f"with draft == target (bigram models, N = {n}), after a last draft of {last} your bonus "
                            f"tokens had frequencies {freq}, but the target's row for {last} is "
                            f"{_BONUS_TABLE[last]}.\n  Hint: the bonus token comes from the target's distribution "
                            "after the LAST draft, target_model(prefix + all drafts); not target_model(prefix), and "
                            "not the context before the last draft.")

    # Identical models that read the last TWO tokens, N = 2: a step that shows the models only the last token
    # (context[-1:]) is exact for every bigram pair above, and wrong here.
    def second_order(context):
        context = list(context)
        before = context[-2] if len(context) > 1 else 0
        return _SECOND_ORDER[before][context[-1] if context else 0]

    starts = [0] * 3
    for _ in range(bonus_samples):
        out = call([1, 2], second_order, second_order, 2)
        starts[out[2]] += 1
    if _pvalue(starts, _SECOND_ORDER[1][2]) < P_THRESHOLD:
        freq = [round(c / sum(starts), 3) for c in starts]
        raise _Fail(f"with draft == target models that read the last two tokens (N = 2, prefix [1, 2]), your first "
                    f"new tokens had frequencies {freq}, but the target's distribution after [1, 2] is "
                    f"{_SECOND_ORDER[1][2]}.\n  Hint: give both models the whole context (prefix + the drafts so "
                    "far), not only its last token: a real language model reads all of it.")

    # Draft != target, N = 1: the bonus follows whenever the draft is accepted (55 % of steps here), and it comes
    # from the target, not from the draft model that proposed the accepted token.
    bonus_counts = [0] * 4
    for _ in range(bonus_samples * 2):
        out = call(prefix, target, draft, 1)
        if len(out) == len(prefix) + 2:
            bonus_counts[out[-1]] += 1
    if sum(bonus_counts) and _pvalue(bonus_counts, target_probs) < P_THRESHOLD:
        freq = [round(c / sum(bonus_counts), 3) for c in bonus_counts]
        source = ("the draft's distribution, " if _pvalue(bonus_counts, draft_probs) > P_THRESHOLD else "")
        raise _Fail(f"with N = 1 and draft {draft_probs} != target {target_probs}, your bonus tokens (after an "
                    f"accepted draft) had frequencies {freq}: {source}not the target's.\n  Hint: the bonus token "
                    "is the target's own next token: sample it from target_model(prefix + all drafts), the "
                    "distribution the verification call computed at the position after the last draft.")

    counts = [0] * 4
    for _ in range(samples):
        out = call(prefix, target, draft, 2)
        counts[out[len(prefix)]] += 1
    if _pvalue(counts, target_probs) < P_THRESHOLD:
        hint = _diagnose(counts, _spec_candidates(target_probs, draft_probs),
                         "check the acceptance test and the residual; the first new token must follow the target.")
        freq = [round(c / samples, 3) for c in counts]
        raise _Fail(f"over {samples} steps the first new token had frequencies {freq}, target {target_probs} "
                    f"(chi-square p < {P_THRESHOLD}).\n  Hint: {hint}")

    pairs = _joint_counts(lambda seq, tm, dm, n, _rng: call(seq, tm, dm, n), samples, rng)
    joint = [_JOINT_TARGET[0][a] * _JOINT_TARGET[a][b] for a in range(3) for b in range(3)]
    if _pvalue(pairs, joint) < P_THRESHOLD:
        hint = _diagnose(pairs, _joint_candidates(4 * samples, seed),
                         "draft position i must be checked against target_model(prefix + drafts[:i]) (the context "
                         "including the accepted drafts), each with its own u, and the bonus token comes from "
                         "target_model(prefix + all drafts).")
        raise _Fail("with bigram models the first two generated tokens do not follow the target's joint "
                    f"distribution (chi-square p < {P_THRESHOLD}).\n  Hint: {hint}")
    return (f"bonus token and its context, stop at first rejection, first-token distribution over {samples} steps "
            "and the two-token joint on bigram models all match the target.")


def _ref_chi_square_pvalue(tokens, target_probs):
    from scipy.stats import chisquare

    probs = torch.as_tensor(target_probs, dtype=torch.float64)
    counts = torch.bincount(torch.as_tensor(tokens, dtype=torch.long), minlength=len(probs)).double()
    return float(chisquare(counts.tolist(), (probs * len(tokens)).tolist()).pvalue)


def _chi_square_cases():
    gen = torch.Generator().manual_seed(7)
    target = [0.4, 0.3, 0.2, 0.1]
    same = torch.multinomial(torch.tensor(target), 2000, replacement=True, generator=gen).tolist()
    shifted = torch.multinomial(torch.tensor([0.35, 0.3, 0.2, 0.15]), 2000, replacement=True, generator=gen).tolist()
    missing_last = torch.multinomial(torch.tensor([0.45, 0.35, 0.2, 0.0]), 400, replacement=True,
                                     generator=gen).tolist()
    small = torch.multinomial(torch.tensor([0.5, 0.5]), 300, replacement=True, generator=gen).tolist()
    return [(same, target), (shifted, target), (missing_last, [0.4, 0.3, 0.2, 0.1]), (small, [0.5, 0.5])]


def _rounding_mismatch(message: str) -> bool:
    """Is this scipy's "observed and expected sums must agree" error, with a difference small enough to be float32
    rounding (rather than, say, probabilities passed where counts belong)?"""
    if "sum of the observed frequencies" not in message or "differences are:" not in message:
        return False
    numbers = re.findall(r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?", message.split("differences are:")[-1])
    return bool(numbers) and max(abs(float(x)) for x in numbers) < 1e-4


@_checker
def chi_square_pvalue(fn):
    """Check ``fn(tokens: list[int], target_probs [V]) -> float``, the p-value of Pearson's chi-square test of
    the token counts against the target distribution (``scipy.stats.chisquare`` with expected counts).

    Seed lesson 000's Easy exercise. Returns True/False.
    """
    from scipy.stats import chisquare

    def counts_of(tokens, v):
        return torch.bincount(torch.as_tensor(tokens), minlength=v).tolist()

    faults = [
        (lambda tokens, probs: float(chisquare(counts_of(tokens, len(probs)), list(probs)).pvalue),
         "scipy wants expected COUNTS, which sum to the number of tokens: pass target_probs * len(tokens)."),
        (lambda tokens, probs: float(chisquare(torch.bincount(torch.as_tensor(tokens)).tolist(),
                                               [p * len(tokens) for p in probs]).pvalue),
         "count every token id, including ones that never occur: torch.bincount(..., minlength=V)."),
        (lambda tokens, probs: float(chisquare(counts_of(tokens, len(probs)),
                                               [p * len(tokens) for p in probs]).statistic),
         "return the p-value (result.pvalue), not the statistic."),
        (lambda tokens, probs: float(chisquare([c / len(tokens) for c in counts_of(tokens, len(probs))],
                                               list(probs)).pvalue),
         "compare counts with expected counts, not frequencies with probabilities: dividing both by n shrinks the "
         "statistic n-fold and hides real differences."),
        (lambda tokens, probs: float(chisquare(counts_of(tokens, len(probs))).pvalue),
         "without f_exp scipy tests against a UNIFORM distribution; pass the target's expected counts."),
        (lambda tokens, probs: chisquare(counts_of(tokens, len(probs)), [p * len(tokens) for p in probs]),
         "you returned scipy's whole result (statistic, pvalue); return just the p-value: float(result.pvalue)."),
    ]
    def show(args):
        return f"<{len(args[0])} tokens>, {_show(list(args[1]))}"

    cases = _chi_square_cases()
    for args in cases:
        out = _outcome(fn, args)
        if out[0] == "raise" and _rounding_mismatch(out[2]):
            raise _Fail(f"chi_square_pvalue({show(args)}) raised {out[1]}: {' '.join(out[2].split())}\n  Hint: scipy "
                        "insists that the expected counts add up to the observed total to about 1e-8, and float32 "
                        "rounding (torch's default dtype) misses that. Build the expected counts in float64: "
                        "torch.tensor(target_probs, dtype=torch.float64) * len(tokens), or a list of Python floats.")

    def close(a, b):  # p-values in the far tail magnify float32 rounding in the counts; real mistakes are far off
        if isinstance(a, tuple) and isinstance(b, tuple):  # scipy's whole result, (statistic, pvalue)
            return len(a) == len(b) and all(close(x, y) for x, y in zip(a, b))
        return _same_float(a, b, rel=1e-4, abs_=0.0)

    n = _compare("chi_square_pvalue", fn, cases, _ref_chi_square_pvalue, faults, close,
                 "counts = bincount(tokens, minlength=V); expected = target_probs * len(tokens); "
                 "return chisquare(counts, expected).pvalue.", show_args=show)
    return f"correct p-values on all {n} cases."


# The last case is a tie: a greedy draft proposes one of the tied tokens, and reports that one one-hot.
_GREEDY_CASES = [_t([0.8, 0.2]), _t([0.1, 0.6, 0.3]), _t([0.25, 0.15, 0.5, 0.1]), _t([0.05, 0.05, 0.1, 0.2, 0.6]),
                 _t([0.4, 0.2, 0.4])]
_GREEDY_TARGETS = [_t([0.6, 0.4]), _t([0.3, 0.3, 0.4]), _t([0.4, 0.3, 0.2, 0.1]), _t([0.2, 0.2, 0.2, 0.2, 0.2]),
                   _t([0.3, 0.3, 0.4])]


def _proposal_call(name, fn, draft, *args):
    """``fn(copy of draft, *args)`` unpacked; ``_Fail`` if the function changed the draft distribution in place."""
    given = draft.clone()
    out = fn(given, *args)
    if not _unchanged(draft, given):
        raise _Fail(f"{name}({_show(draft)}) changed its argument draft_probs in place.\n  Hint: {_IN_PLACE_HINT}")
    return _unpack_proposal(name, out)


def _unpack_proposal(name, out):
    if not (isinstance(out, tuple) and len(out) == 2):
        raise _Fail(f"{name} must return a pair (token, reported_probs); got {_show(out)}.")
    token, reported = out
    if isinstance(token, torch.Tensor):
        if token.numel() != 1:
            raise _Fail(f"the token must be one id, got {_show(token)}.")
        token = token.item()
    if isinstance(token, bool) or not isinstance(token, Integral):
        why = (" max() gives the largest probability, argmax() its index." if isinstance(token, float) else "")
        raise _Fail(f"{name} proposed {_show(token)} ({type(token).__name__}) as its token; the token must be an "
                    f"integer token id, the index into draft_probs (e.g. int(draft_probs.argmax())).{why}")
    try:
        if isinstance(reported, torch.Tensor):  # a right answer computed on the GPU: to the CPU first (MPS has
            reported = reported.detach().cpu()  # no float64)
        reported = torch.as_tensor(reported, dtype=torch.float64)
    except (TypeError, ValueError, RuntimeError):
        raise _Fail(f"reported_probs must be a tensor or list of V probabilities; got {_show(reported)}.")
    return int(token), reported


@_checker
def greedy_draft(fn):
    """Check ``fn(draft_probs [V]) -> (token, reported_probs [V])`` for a greedy draft.

    A greedy draft proposes its argmax deterministically, so the distribution it must report is one-hot on that
    token; reporting its softmax makes verification biased (target [0.6, 0.4], draft [0.8, 0.2] then emits
    [0.75, 0.25]). Returns True/False.
    """
    for draft, target in zip(_GREEDY_CASES, _GREEDY_TARGETS):
        token, reported = _proposal_call("greedy_draft", fn, draft)
        if not 0 <= token < len(draft) or draft[token] != draft.max():  # on a tie, any of the tied maxima
            raise _Fail(f"greedy_draft({_show(draft)}) proposed token {token}; a greedy draft proposes the argmax, "
                        f"{int(draft.argmax())}.")
        best = token
        if reported.shape != draft.shape:
            raise _Fail(f"reported_probs must have shape {tuple(draft.shape)}, got {tuple(reported.shape)}.")
        proposal = torch.nn.functional.one_hot(torch.tensor(best), len(draft)).double()
        emitted = emitted_distribution(target, proposal, reported)
        if not _same_tensor(reported, proposal):
            extra = ""
            if reported.min() >= 0 and abs(float(reported.sum()) - 1) < 1e-4:
                extra = (f" With target {_show(target)} verification would then emit {_show(emitted)} instead of "
                         "the target.")
            raise _Fail(f"greedy_draft({_show(draft)}) reported {_show(reported)}.{extra}\n  Hint: the draft "
                        f"samples nothing: it always proposes token {best}, so the distribution it drew from is "
                        f"one-hot on {best}; report that (torch.nn.functional.one_hot).")
        if not _same_tensor(emitted, target):  # cannot happen for a one-hot report; kept as a guard
            raise _Fail(f"verification would emit {_show(emitted)} instead of the target {_show(target)}.")
    return f"proposes the argmax and reports it one-hot on all {len(_GREEDY_CASES)} cases; verification stays exact."


def _topk_renorm(probs, k):
    kth = torch.topk(probs, k).values[-1]
    kept = torch.where(probs >= kth, probs, torch.zeros_like(probs))
    return kept / kept.sum()


_TOPK_CASES = [(_t([0.5, 0.3, 0.15, 0.05]), 2, _t([0.4, 0.3, 0.2, 0.1])),
               (_t([0.1, 0.45, 0.05, 0.25, 0.15]), 3, _t([0.2, 0.2, 0.2, 0.2, 0.2])),
               (_t([0.7, 0.2, 0.1]), 1, _t([0.5, 0.3, 0.2]))]


@_checker
def topk_draft(fn, samples: int = 2000, seed: int = 0):
    """Check ``fn(draft_probs [V], k, generator) -> (token, reported_probs [V])`` for a top-k sampling draft.

    The draft must report the distribution it really sampled from: its top-k tokens renormalised. Reporting the
    unprocessed probabilities breaks exactness (lesson 04 computes by how much). Returns True/False.
    """
    gen = torch.Generator().manual_seed(seed)
    for draft, k, target in _TOPK_CASES:
        processed = _topk_renorm(draft.double(), k)
        token, reported = _proposal_call("topk_draft", fn, draft, k, gen)
        if reported.shape != draft.shape:
            raise _Fail(f"reported_probs must have shape {tuple(draft.shape)}, got {tuple(reported.shape)}.")
        if not _same_tensor(reported, processed):
            emitted = emitted_distribution(target, processed, reported) if reported.min() >= 0 else None
            masked = torch.where(processed > 0, draft.double(), torch.zeros_like(processed))
            if _same_tensor(reported, draft):
                hint = ("you sampled from the top-k distribution but reported the unprocessed one: report the "
                        "renormalised top-k probabilities you actually sampled from.")
            elif _same_tensor(reported, masked):
                hint = "renormalise the kept probabilities so they sum to 1."
            elif any(_same_tensor(reported, _topk_renorm(draft.double(), j)) for j in (k - 1, k + 1) if j >= 1):
                hint = f"keep exactly k = {k} tokens (check for an off-by-one in the cut)."
            else:
                hint = f"keep the k = {k} largest probabilities, zero the rest, divide by their sum."
            more = "" if emitted is None else (f" With target {_show(target)} verification would emit "
                                                f"{_show(emitted)}.")
            raise _Fail(f"topk_draft({_show(draft)}, k={k}) reported {_show(reported)}, expected "
                        f"{_show(processed)}.{more}\n  Hint: {hint}")
        counts = [0] * len(draft)
        counts[token] += 1
        for _ in range(samples - 1):
            token, _ = _unpack_proposal("topk_draft", fn(draft.clone(), k, gen))
            counts[token] += 1
        outside = [i for i, c in enumerate(counts) if c and processed[i] == 0]
        if outside:
            raise _Fail(f"with k={k} you proposed token(s) {outside}, which are outside the top {k}.\n  Hint: sample "
                        "from the processed (top-k, renormalised) distribution.")
        if _pvalue(counts, processed) < P_THRESHOLD:
            raise _Fail(f"the proposed tokens' frequencies {[round(c / samples, 3) for c in counts]} do not match "
                        f"the reported distribution {_show(processed)}.\n  Hint: sample with the generator from the "
                        "same probabilities you report.")
    return f"samples from and reports the renormalised top-k distribution on all {len(_TOPK_CASES)} cases."


# ---------------------------------------------------------------------------------------------------------
# Lesson 05: acceptance vs divergence.

_ACCEPTANCE_CASES = [
    (_t([0.5, 0.3, 0.2]), _t([0.2, 0.3, 0.5])),
    (_t([0.6, 0.4]), _t([0.8, 0.2])),
    (_t([0.25, 0.25, 0.25, 0.25]), _t([0.25, 0.25, 0.25, 0.25])),
    (_t([0.5, 0.5, 0.0]), _t([0.0, 0.0, 1.0])),
    (_t([0.0, 1.0, 0.0]), _t([0.0, 1.0, 0.0])),
    (_t([0.0, 1.0, 0.0]), _t([1.0, 0.0, 0.0])),
    (_t([0.7, 0.2, 0.1, 0.0]), _t([0.4, 0.3, 0.2, 0.1])),
    # 0.5; the largest single difference would say 1 - 0.25 = 0.75: only a sum over tokens gets this right
    (_t([0.5, 0.5, 0.0, 0.0]), _t([0.25, 0.25, 0.25, 0.25])),
]


def _ref_expected_acceptance(target_probs, draft_probs):
    return _metrics.acceptance_probability(target_probs, draft_probs)


@_checker
def expected_acceptance(fn):
    """Check ``fn(target_probs [V], draft_probs [V]) -> float``: the probability a drafted token is accepted,
    sum_x min(target(x), draft(x)) = 1 - TV(target, draft) (Leviathan et al. 2023, β). Returns True/False.
    """
    def kl(t, d):
        return _metrics.kl_divergence(t, d)

    faults = [
        (lambda t, d: 1 - kl(t, d),
         "1 - KL is not the acceptance probability (KL can exceed 1 and is infinite for disjoint supports); the "
         "exact expression is sum of min(target, draft)."),
        (lambda t, d: _metrics.total_variation(t, d),
         "that is the total variation distance itself; acceptance is 1 - TV."),
        (lambda t, d: float((t * d).sum()),
         "sum(target * draft) is the chance that two independent samples agree, not the acceptance probability."),
        (lambda t, d: float(torch.maximum(t, d).sum()), "use min, not max: accepted mass is what both models share."),
        (lambda t, d: float((t * torch.where(d > 0, torch.clamp(t / d.clamp_min(1e-30), max=1.0),
                                             torch.ones_like(t))).sum()),
         "the drafted token comes from the DRAFT: average min(1, target/draft) under draft_probs, not target_probs."),
        (lambda t, d: float(1 - (t - d).abs().max()),
         "the largest single-token difference is not the distance that matters: every token's shortfall counts. "
         "Acceptance is 1 - TV, with TV = 0.5 * sum |target - draft| over ALL tokens (or directly sum min(target, "
         "draft))."),
        (lambda t, d: float(1 - (t - d).abs().sum()),
         "TV is HALF the sum of |target - draft| (each unit of mass moved is counted twice, once where it leaves "
         "and once where it arrives): acceptance = 1 - 0.5 * sum |target - draft|."),
    ]
    n = _compare("expected_acceptance", fn, _ACCEPTANCE_CASES, _ref_expected_acceptance, faults, _same_float,
                 "E_{x ~ draft}[min(1, target(x)/draft(x))] = sum_x min(target(x), draft(x)).")
    return f"correct on all {n} cases, including greedy (one-hot) and disjoint distributions."


# ---------------------------------------------------------------------------------------------------------
# Lesson 06: the speedup formula and the metrics people quote.

_TOKENS_CASES = [(0.75, 5), (0.5, 1), (0.0, 4), (1.0, 4), (0.9, 10), (0.6, 3), (0.85, 7)]


@_checker
def expected_tokens_per_call(fn):
    """Check ``fn(alpha, n_draft) -> float``: (1 - alpha^(N+1)) / (1 - alpha), and N + 1 at alpha = 1.

    Reference: :func:`lab.metrics.expected_tokens_per_call` (Leviathan et al. 2023, equation 1). Returns True/False.
    """
    faults = [
        (lambda a, n: (1 - a ** n) / (1 - a),
         "the exponent is N + 1: a step emits the accepted drafts plus one target token (resampled or bonus)."),
        (lambda a, n: 1 / (1 - a), "1/(1 - alpha) is the limit for unbounded N; with N drafts the sum stops at "
                                   "alpha^N: (1 - alpha^(N+1)) / (1 - alpha)."),
        (lambda a, n: (1 - a ** (n + 1)) / (1 - a),
         "at alpha = 1 the formula divides by zero; every draft is accepted then, so return N + 1."),
        (lambda a, n: math.nan if a == 1 else _metrics.expected_tokens_per_call(a, n),
         "at alpha = 1 the formula is 0 / 0 (NaN with NumPy or torch); every draft is accepted then, so return "
         "N + 1."),
        (lambda a, n: math.inf if a == 1 else _metrics.expected_tokens_per_call(a, n),
         "at alpha = 1 the formula divides by zero (inf with NumPy or torch); every draft is accepted then, so "
         "return N + 1."),
        (lambda a, n: 1 + n * a,
         "acceptance stops at the first rejection, so draft i counts only if drafts 1..i were all accepted: "
         "1 + alpha + alpha^2 + ... + alpha^N."),
        (lambda a, n: n * a, "count the target's own token too: a step always emits at least one token."),
        (lambda a, n: _metrics.expected_tokens_per_call(a, n) - 1,
         "every answer is exactly one short: the sum starts at i = 0 (alpha^0 = 1, the target's own token, which "
         "every step emits), not at i = 1."),
    ]
    n = _compare("expected_tokens_per_call", fn, _TOKENS_CASES, _metrics.expected_tokens_per_call, faults,
                 _same_float, "sum_{i=0}^{N} alpha^i = (1 - alpha^(N+1)) / (1 - alpha); N + 1 when alpha = 1.")
    return f"correct on all {n} cases, including alpha = 0 and alpha = 1."


_SPEEDUP_CASES = [(0.75, 5, 0.2), (0.75, 5, 0.1), (0.5, 1, 0.0), (0.9, 8, 0.05), (1.0, 4, 0.25), (0.0, 3, 0.1)]


@_checker
def predicted_speedup(fn):
    """Check ``fn(alpha, n_draft, cost_ratio) -> float``: tokens per call / (1 + N c).

    Reference: :func:`lab.metrics.predicted_speedup` (Leviathan et al. 2023, Theorem 3.8). Returns True/False.
    """
    def tokens(a, n):
        return _metrics.expected_tokens_per_call(a, n)

    faults = [
        (lambda a, n, c: tokens(a, n) / (n * c) if c > 0 else math.inf,
         "a step also costs one target pass: divide by 1 + N*c (in units of one target pass)."),
        (lambda a, n, c: tokens(a, n),
         "that is tokens per target call; the draft's N passes cost N*c target passes: divide by 1 + N*c."),
        (lambda a, n, c: tokens(a, n) / (1 + (n + 1) * c),
         "the draft runs N times per step, not N + 1."),
        (lambda a, n, c: tokens(a, n) * (1 - n * c), "costs add: divide by (1 + N*c), don't multiply by 1 - N*c."),
        (lambda a, n, c: tokens(a, n) / (1 + c),
         "the draft runs once per drafted token: N*c, not c."),
        (lambda a, n, c: (1 - a ** (n + 1)) / (1 - a) / (1 + n * c),
         "at alpha = 1 the closed form divides by zero: every draft is accepted, so a call yields N + 1 tokens. "
         "Reuse your expected_tokens_per_call, which handles alpha = 1."),
        (lambda a, n, c: (n if a == 1 else (1 - a ** n) / (1 - a)) / (1 + n * c),
         "the expected tokens per call are (1 - alpha^(N+1)) / (1 - alpha): the exponent is N + 1, since a step "
         "emits the accepted drafts plus one target token (resampled or bonus)."),
    ]
    n = _compare("predicted_speedup", fn, _SPEEDUP_CASES, _metrics.predicted_speedup, faults, _same_float,
                 "speedup = expected tokens per call / (1 + N * cost_ratio).")
    return f"correct on all {n} cases."


_BEST_N_CASES = [(0.75, 0.1, 16), (0.5, 0.1, 16), (0.85, 0.05, 16), (0.7, 0.2, 16), (0.9, 0.0, 8), (0.0, 0.1, 16),
                 (0.95, 0.02, 12), (1.0, 0.0, 5), (0.0, 0.0, 8)]


@_checker
def best_n_draft(fn):
    """Check ``fn(alpha, cost_ratio, max_n) -> int``: the N in 1..max_n with the largest predicted speedup
    (the smallest such N on ties). Reference: :func:`lab.metrics.optimal_n_draft`. Returns True/False.
    """
    def speedups(a, c, m):
        return {n: _metrics.predicted_speedup(a, n, c) for n in range(1, m + 1)}

    faults = [
        (lambda a, c, m: max(range(1, m + 1), key=lambda n: _metrics.expected_tokens_per_call(a, n)),
         "maximise the predicted SPEEDUP (which pays for the draft's passes), not tokens per call, which always "
         "grows with N."),
        (lambda a, c, m: max(range(1, m), key=lambda n: _metrics.predicted_speedup(a, n, c)),
         "include max_n itself: range(1, max_n + 1)."),
        (lambda a, c, m: max(speedups(a, c, m).values()), "return the best N, not the best speedup."),
        (lambda a, c, m: max(sorted(speedups(a, c, m), reverse=True), key=lambda n: speedups(a, c, m)[n]),
         "on ties keep the smallest N (fewer wasted draft passes)."),
        (lambda a, c, m: max(range(0, m + 1), key=lambda n: _metrics.expected_tokens_per_call(a, max(n, 1))
                             / (1 + n * c)) if m else 0,
         "N starts at 1: with N = 0 there is no speculation."),
        (lambda a, c, m: max(range(1, 17), key=lambda n: _metrics.predicted_speedup(a, n, c)),
         "search N = 1 … max_n, the max_n argument, not a fixed range (range(1, 17)): range(1, max_n + 1)."),
        (lambda a, c, m: _metrics.optimal_n_draft(a, c, m) - 1,
         "every answer is exactly one short: that is the 0-based index of the best speedup (np.argmax over a list "
         "that starts at N = 1); the draft length is that index + 1."),
    ]
    n = _compare("best_n_draft", fn, _BEST_N_CASES, _metrics.optimal_n_draft, faults, _same_int,
                 "try every N from 1 to max_n and keep the one with the largest predicted_speedup (smallest on ties).")
    answer = _outcome(fn, _BEST_N_CASES[0])
    if answer[0] == "ok" and not _same_whole(answer[1], _metrics.optimal_n_draft(*_BEST_N_CASES[0])):
        raise _Fail(f"the values are right, but best_n_draft{_BEST_N_CASES[0]} returned {answer[1]!r}, a "
                    f"{type(answer[1]).__name__}.\n  Hint: return N as an int (int(...), or range() values instead "
                    "of a float array such as np.arange(1.0, ...)): a draft length is a whole count, and the lesson "
                    "formats it with :d.")
    return f"correct on all {n} cases."


def _records(specs):
    """StepRecords from (n_drafted, n_accepted, n_emitted) triples."""
    out = []
    position = 0
    for i, (drafted, accepted, emitted) in enumerate(specs):
        out.append(StepRecord(index=i, position=position, drafted=list(range(drafted)), num_accepted=accepted,
                              emitted=list(range(emitted)), last_kind="bonus" if accepted == drafted else "resampled",
                              draft_calls=drafted))
        position += emitted
    return out


_METRIC_CASES = [
    ([(4, 4, 5), (4, 1, 2), (4, 0, 1), (4, 3, 4)], 0.1),
    # the last step had nothing left to draft (one token to go): a target call all the same
    ([(5, 5, 6), (5, 5, 6), (2, 0, 1), (0, 0, 1)], 0.25),
    ([(3, 1, 2), (1, 1, 2), (4, 2, 3), (4, 4, 3)], 0.05),  # the last step was cut by max_new_tokens
    ([(4, 0, 1)] * 3, 0.5),
]


def _ref_speculation_metrics(steps, cost_ratio):
    drafted = sum(len(s.drafted) for s in steps)
    accepted = sum(s.num_accepted for s in steps)
    emitted = sum(len(s.emitted) for s in steps)
    return {"acceptance_rate": accepted / drafted,
            "tokens_per_target_call": emitted / len(steps),
            "cost_per_token": (len(steps) + cost_ratio * drafted) / emitted}


@_checker
def speculation_metrics(fn):
    """Check ``fn(steps: list[StepRecord], cost_ratio) -> dict`` with three numbers:

    - ``acceptance_rate``: accepted drafts / drafted tokens (over the whole run);
    - ``tokens_per_target_call``: emitted tokens / target calls (one call per step);
    - ``cost_per_token``: (target calls + cost_ratio × draft passes) / emitted tokens, in target passes, where
      each drafted token costs one draft pass.
    Returns True/False.
    """
    cases = [(_records(specs), c) for specs, c in _METRIC_CASES]

    def ref(steps, c):
        return _ref_speculation_metrics(steps, c)

    def variant(**changes):
        def fn_(steps, c):
            out = ref(steps, c)
            for key, f in changes.items():
                out[key] = f(steps, c)
            return out
        return fn_

    drafted = lambda steps: sum(len(s.drafted) for s in steps)  # noqa: E731
    accepted = lambda steps: sum(s.num_accepted for s in steps)  # noqa: E731
    emitted = lambda steps: sum(len(s.emitted) for s in steps)  # noqa: E731
    faults = [
        (variant(acceptance_rate=lambda s, c: emitted(s) / drafted(s)),
         "acceptance_rate counts accepted DRAFTS only; the resampled/bonus token is the target's, not an accepted "
         "draft."),
        (variant(acceptance_rate=lambda s, c: sum(x.num_accepted / len(x.drafted) for x in s) / len(s)),
         "divide total accepted by total drafted over the run; the mean of per-step ratios weights short drafts "
         "too much."),
        (variant(tokens_per_target_call=lambda s, c: accepted(s) / len(s)),
         "tokens per target call counts every emitted token, including the target's own token each step."),
        (variant(tokens_per_target_call=lambda s, c: (accepted(s) + len(s)) / len(s)),
         "count the tokens actually emitted (len(step.emitted)): a step cut short by max_new_tokens or EOS emits "
         "fewer than accepted + 1."),
        (variant(cost_per_token=lambda s, c: (len(s) + c * drafted(s)) / accepted(s) if accepted(s) else math.inf),
         "divide the cost by the tokens the user gets (all emitted tokens), not by accepted drafts only."),
        (variant(cost_per_token=lambda s, c: (len(s) + drafted(s)) / emitted(s)),
         "a draft pass costs cost_ratio target passes: weight the draft passes by cost_ratio."),
        (variant(cost_per_token=lambda s, c: len(s) / emitted(s)),
         "cost per token must include the draft's passes (cost_ratio each)."),
    ]

    def same(a, b):
        if not isinstance(a, dict):
            return False
        keys = ("acceptance_rate", "tokens_per_target_call", "cost_per_token")
        return all(k in a and _same_float(a[k], b[k]) for k in keys)

    def show(args):
        steps, c = args
        return ("[" + ", ".join(f"(drafted {len(s.drafted)}, accepted {s.num_accepted}, emitted {len(s.emitted)})"
                                for s in steps) + f"], cost_ratio={c}")

    for steps, c in cases:
        out = _outcome(fn, (steps, c))
        if out[0] == "ok" and out[1] is None:
            raise _Fail(f"speculation_metrics({show((steps, c))}) returned None: did you forget a `return` "
                        "statement? Return a dict with the keys 'acceptance_rate', 'tokens_per_target_call' and "
                        "'cost_per_token'.")
        if out[0] == "ok":
            missing = [k for k in ("acceptance_rate", "tokens_per_target_call", "cost_per_token")
                       if not isinstance(out[1], dict) or k not in out[1]]
            if missing:
                raise _Fail(f"return a dict with the keys 'acceptance_rate', 'tokens_per_target_call' and "
                            f"'cost_per_token'; missing {missing}.")
    n = _compare("speculation_metrics", fn, cases, ref, faults, same,
                 "acceptance = accepted / drafted; tokens per call = emitted / steps; cost per token = "
                 "(steps + cost_ratio * drafted) / emitted.", show_args=show)
    return f"all three metrics correct on {n} runs."

