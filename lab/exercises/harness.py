"""The checker harness every lesson's exercise checkers share: run the learner's function, print ✓ or a specific
hint, return a bool.

A checker (a function decorated with :func:`checker`, one module per lesson in :mod:`lab.exercises`) takes the
learner's function (plus, for some, a model or prompts), runs it on reference cases whose answers come from the
``lab`` reference code, and, when an answer is wrong, compares the learner's answers with planted wrong versions
(the mistakes people actually make) to print the hint that fits (:func:`compare`). A stub that raises
``NotImplementedError`` prints "not solved yet" and returns ``False``; no checker ever raises, so a lesson runs
top to bottom whatever state its exercises are in. Every call of the learner's function is time-limited
(:func:`time_limited`), and runs on copies of the cases (:func:`fresh_args`), so that a function that edits its
inputs in place is reported instead of corrupting later cases.

Notation: ``target_probs`` is the verifier (big model) distribution, ``draft_probs`` the draft's; Leviathan et
al. (2023) write p for the target and q for the draft, while Chen et al. (2023) and seed lesson 000 write q for the
verifier and p for the draft.
"""
from __future__ import annotations

import collections.abc
import ctypes
import dataclasses
import functools
import inspect
import itertools
import math
import re
import signal
import threading
import warnings
from numbers import Integral

import torch

from lab import metrics as _metrics
from lab.trace import StepRecord
from lab.exercises.answers import (as_bool, as_float, as_ints, same_bool, same_float, same_int,  # noqa: F401
                                 same_ints, same_tensor, same_tensor_type, same_whole)

__all__ = [
    "P_THRESHOLD", "CALL_TIME_LIMIT_S", "Fail", "NoReturn", "checker", "time_limited", "compare",
    "fresh_args", "outcome_of", "run_case", "unchanged", "IN_PLACE_HINT",
    "as_float", "as_bool", "as_ints", "same_float", "same_bool", "same_int", "same_whole", "same_ints",
    "same_tensor", "same_tensor_type", "show_value", "show_brief", "show_outcome", "counts_pvalue",
    "want_token_list", "a_type", "float32_tensor", "lesson_device", "check_on_lesson_device", "show_side_by_side",
]

# A check may be strict only where chance cannot trip a correct answer: the statistical checks below use
# fixed seeds and reject only at p < 1e-4.
P_THRESHOLD = 1e-4


class Fail(Exception):
    """A wrong answer: raised by a check body, caught by :func:`checker`, which prints the message (what went wrong
    and what to try) after "✗ name:"."""


# Seconds one call of the learner's function may take (every call a check makes) before the check gives up on it.
# The slowest reference case (a short generation with the bundled pair) takes well under a second on a 2-core CPU;
# only a loop with no way out comes near this. Lesson 13 uses a tighter limit for its counting exercise.
CALL_TIME_LIMIT_S = 30.0


class NoReturn(BaseException):
    """The learner's function ran past the time limit (``args`` = (the call's arguments, the limit in s)). A
    BaseException, so that neither the harness's ``except Exception`` nor one in the learner's own code records it
    as an ordinary answer."""


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
    # thread and, if it is still running at the limit, raise NoReturn inside it (this stops a pure-Python loop).
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
        ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(worker.ident), ctypes.py_object(NoReturn))
        worker.join(0.5)
        raise NoReturn(args, seconds)
    if "error" in result:
        raise result["error"]
    return result["value"]


def _call_with_alarm(fn, args, seconds):
    def on_alarm(signum, frame):
        raise NoReturn(args, seconds)

    previous = signal.signal(signal.SIGALRM, on_alarm)
    try:
        signal.setitimer(signal.ITIMER_REAL, seconds)
        try:
            return _limited(fn, args)
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
    finally:  # a separate block: an alarm arriving just before the timer is stopped must not skip this
        signal.signal(signal.SIGALRM, previous)


def time_limited(fn, seconds: float):
    """``fn`` wrapped so that a call running longer than ``seconds`` raises ``NoReturn`` instead of hanging the
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


def checker(summary_fn):
    """Wrap a check body ``summary_fn(fn, *args, **kwargs) -> str`` into a checker ``(fn, *args, **kwargs) -> bool``.

    The checker prints "✓ name: <summary>" and returns True; or prints "✗ name: ..." (a :class:`Fail` message, a
    call that ran past :data:`CALL_TIME_LIMIT_S`, an exception of the learner's code) or "not solved yet" (a stub
    raising ``NotImplementedError``) and returns False. It never raises. The body gets ``fn`` wrapped by
    :func:`time_limited`."""

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
                # loops, type checks before compare): an endless loop is reported, never a hung kernel.
                summary = summary_fn(time_limited(fn, CALL_TIME_LIMIT_S), *args, **kwargs)
        except NotImplementedError as error:
            other = _stub_called(error, fn)
            if other:  # the function is written, but calls another exercise's stub
                print(f"{name}: not solved yet — your {call_name} calls {other}, which still raises "
                      f"NotImplementedError: solve {other} first, then rerun this check.")
            elif call_name != name:  # the learner's own name for it: `advance`, checked by check.next_position
                print(f"{name}: not solved yet — your {call_name} still raises NotImplementedError: replace "
                      "`raise NotImplementedError` with your code and rerun.")
            else:
                print(f"{name}: not solved yet — replace `raise NotImplementedError` with your code and rerun.")
            return False
        except Fail as failure:
            message = (str(failure) if call_name == name  # a call, or the answer's subject ("x returned ...")
                       else re.sub(rf"(?<![\w.]){name}(?=\(| returned )", call_name, str(failure)))
            print(f"✗ {name}: {message}")
            return False
        except NoReturn as stuck:
            print(f"✗ {name}: {call_name}({', '.join(show_brief(a) for a in stuck.args[0])}) did not return within "
                  f"{stuck.args[1]:g} s.\n  Hint: look for a loop with no way out (a `while` whose condition "
                  "never turns false, or a counter that is never advanced).")
            return False
        except Exception as error:  # a bug in the learner's code that the case list did not anticipate
            print(f"✗ {name}: your function raised {type(error).__name__}: {error}")
            return False
        print(f"✓ {name}: {summary}")
        return True

    return run


def _stub_called(error: BaseException, fn) -> str | None:
    """The name of the function whose ``raise NotImplementedError`` ``error`` came from, when that is not ``fn``
    itself (a solved function that calls another exercise's stub); None when it is ``fn``'s own stub or unknown."""
    tb, last = error.__traceback__, None
    while tb is not None:
        last, tb = tb.tb_frame.f_code, tb.tb_next
    own = getattr(inspect.unwrap(fn), "__code__", None)
    if last is None or own is None or last is own or not last.co_name.isidentifier():
        return None
    return last.co_name


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


def fresh_args(args) -> tuple:
    """``args`` with every tensor cloned and every list rebuilt: a function that edits its inputs in place
    (``t.sub_(d)``, ``window[:] = ...``) must not corrupt the module-level cases, which every later call and every
    later check reuses."""
    return tuple(_copy_arg(a) for a in args)


def _same_arg(before, after) -> bool:
    """Whether an argument is as it was before the call (tensors by value, lists item by item)."""
    if isinstance(before, torch.Tensor):
        return isinstance(after, torch.Tensor) and unchanged(before, after)
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


def unchanged(before: torch.Tensor, after: torch.Tensor) -> bool:
    """Whether ``after`` has ``before``'s shape, dtype and values (NaN equal to NaN): an argument not edited in
    place."""
    if before.shape != after.shape or before.dtype != after.dtype:
        return False
    if before.is_floating_point():
        return bool(((before == after) | (before.isnan() & after.isnan())).all())
    return bool(torch.equal(before, after))


# The hints for an argument changed in place: a tensor (public: lesson 04 checks its drafts itself), a dict, step
# records, a list.
IN_PLACE_HINT = ("don't modify your inputs in place (sub_, clamp_, `x -= ...`, `x[i] = ...`): the caller still "
                 "needs them, and later cells read the same tensors again. Build new tensors instead: `x - y`, "
                 "`x.clamp_min(0)`, or `x.clone()` before an in-place edit.")
_IN_PLACE_DICT_HINT = ("don't modify a dict you were given (`d.pop(...)`, `d.setdefault(...)`, `d[key] = ...`, "
                       "`d[key].append(...)`): the caller still needs it as it was. Read it with `d.get(key)` or "
                       "`d[key]` and keep what you compute in variables of your own (`dict(d)` copies the top level).")
_IN_PLACE_RECORD_HINT = ("don't modify the step records you were given, or their list (`step.drafted = ...`, "
                         "`step.num_accepted += ...`, `steps.sort(...)`, `steps.append(...)`): they are the run's "
                         "history, and the lesson reads them again. Compute from them into variables of your own.")
_IN_PLACE_LIST_HINT = ("don't modify your inputs in place (`window[:] = ...`, `ids += ...`, `.append`, `x[i] = "
                       "...`): the caller still needs them, and later cells keep and compare them. Build a new list "
                       "instead: `longer = ids + [token]`, `copy = list(ids)`, a list comprehension.")


def _argument_name(fn, index: int) -> str:
    """The name of ``fn``'s positional parameter number ``index`` (0-based), or "its argument number i"."""
    try:
        params = [p for p in inspect.signature(fn).parameters.values()
                  if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    except (TypeError, ValueError):
        params = []
    return f"its argument `{params[index].name}`" if index < len(params) else f"its argument number {index + 1}"


def outcome_of(fn, args):
    """("ok", value) or ("raise", exception type name, message) of ``fn`` on copies of ``args`` (tensors
    cloned, see :func:`fresh_args`); NotImplementedError passes through."""
    return run_case(fn, fresh_args(args))


def run_case(fn, args):
    """:func:`outcome_of` on ``args`` themselves, not copies (for a caller that made the copies and inspects them
    afterwards)."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # e.g. scipy's divide warnings inside planted faults
            return ("ok", fn(*args))
    except NotImplementedError:
        raise
    except Exception as error:  # noqa: BLE001 — recorded, compared, and shown to the learner
        return ("raise", type(error).__name__, str(error))


def lesson_device() -> torch.device | None:
    """The accelerator the lessons put their models and tensors on when the machine has one (CUDA, as
    :func:`lab.models.pick_device` picks it), or None on a CPU-only machine."""
    from lab.models import pick_device

    device = pick_device()
    return None if device.type == "cpu" else device


def _tensors_in(value):
    if isinstance(value, torch.Tensor):
        yield value
    elif isinstance(value, (list, tuple)):
        for item in value:
            yield from _tensors_in(item)


def check_on_lesson_device(name, fn, args, show_args=None) -> None:
    """Where the lessons run on a GPU (:func:`lesson_device`), call ``fn`` once more with the tensors of ``args``
    moved there, since the lesson's next cells call it on the model's tensors: a function that passed every case on
    CPU tensors but leaves the device (``.numpy()``, a new tensor made on the CPU) raises :class:`Fail` with a hint
    saying so. The values were checked on the CPU cases; this call checks only that the function runs there and
    returns its tensors on that device. Does nothing on a CPU-only machine."""
    device = lesson_device()
    if device is None:
        return
    show_args = show_args or (lambda a: ", ".join(show_value(v) for v in a))
    moved = tuple(a.to(device) if isinstance(a, torch.Tensor) else a for a in args)
    outcome = run_case(fn, moved)
    if outcome[0] == "raise":
        what = f"raised {outcome[1]}: {outcome[2].rstrip('.')}"
    else:
        elsewhere = [t.device for t in _tensors_in(outcome[1]) if t.device != device]
        if not elsewhere:
            return
        what = f"returned a tensor on {elsewhere[0]}"
    raise Fail(f"{name}({show_args(args)}) is right on CPU tensors, but with its tensors on {device.type} (where "
               f"this lesson's model puts them) it {what}.\n  Hint: {DEVICE_HINT}")


DEVICE_HINT = ("keep to torch operations on the inputs' own device: make a new tensor with device=x.device "
               "(torch.arange(k, device=logits.device)) or from the input (x.new_tensor, torch.zeros_like), and "
               "leave NumPy out (.numpy() and np.asarray work only on CPU tensors; .tolist() works everywhere).")
"""The hint of :func:`check_on_lesson_device`."""


def _same_outcome(a, b, same, messages: bool = False) -> bool:
    """Do two outcomes agree? Raises agree on the exception type (and, with ``messages``, on the message too:
    used to match a learner's error to a planted fault, where the type alone says little)."""
    if a[0] != b[0]:
        return False
    if a[0] == "raise":
        return a[1] == b[1] and (not messages or a[2] == b[2])
    try:
        return bool(same(a[1], b[1]))
    except Exception:  # an answer of another kind ((0, 0) for a pair of lists): unequal, not the learner's crash
        return False


def _fault_agrees(answer, fault, same) -> bool:
    """Does the learner's outcome match a planted fault's? As :func:`_same_outcome` with messages, or both returned
    equal lists (or tuples) of the same type: a fault of the wrong kind (a list where one int is due) fails the
    exercise's ``same`` even against itself."""
    if _same_outcome(answer, fault, same, messages=True):
        return True
    if not (answer[0] == fault[0] == "ok" and type(answer[1]) is type(fault[1])
            and isinstance(answer[1], (list, tuple))):
        return False
    try:
        return bool(answer[1] == fault[1])
    except Exception:  # tensors inside: == compares them element by element (or fails on their sizes)
        return False


SHOWN_ITEMS = 64
"""A list or tuple longer than this is shown as its first quarter of that and its length in messages."""


def show_value(value, exact: bool = False) -> str:
    """A short text of ``value`` for messages: floats to 4 significant digits, or every digit with ``exact``; a list
    or tuple of more than :data:`SHOWN_ITEMS` items as its first items and its length (in full with ``exact``, which
    compare uses where the short texts of two answers read alike)."""
    if isinstance(value, torch.Tensor):
        if value.dim() == 0:
            return f"tensor({show_value(value.item(), exact)})"
        return "tensor(" + show_value(value.tolist(), exact) + ")"
    if isinstance(value, float):
        return repr(value) if exact else f"{value:.4g}"
    if isinstance(value, (list, tuple)):
        if len(value) > SHOWN_ITEMS and not exact:  # a wrong axis can return a list as long as the vocabulary
            inner = ", ".join(show_value(v, exact) for v in value[:SHOWN_ITEMS // 4])
            return (f"[{inner}, … ({len(value)} items)]" if isinstance(value, list) else
                    f"({inner}, … ({len(value)} items))")
        inner = ", ".join(show_value(v, exact) for v in value)
        return f"[{inner}]" if isinstance(value, list) else f"({inner},)" if len(value) == 1 else f"({inner})"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k!r}: {show_value(v, exact)}" for k, v in value.items()) + "}"
    return repr(value)


def show_brief(value) -> str:
    """:func:`show_value` for an argument in a one-line message: a model, a function or a generator as ``<TypeName>`` (a
    model's repr runs to dozens of lines), a long list as its first items and its length."""
    if isinstance(value, (list, tuple)) and len(value) > 8:
        inner = ", ".join(show_value(v) for v in value[:6])
        return f"[{inner}, … ({len(value)} items)]" if isinstance(value, list) else f"({inner}, … ({len(value)} items))"
    if isinstance(value, torch.Tensor) and value.numel() > 8:  # its values would not fit one line anyway
        return f"<tensor {list(value.shape)} {str(value.dtype).removeprefix('torch.')}>"
    if value is None or isinstance(value, (bool, int, float, str, list, tuple, dict, torch.Tensor, torch.dtype)):
        text = show_value(value)
        return text if len(text) <= 200 else text[:199] + "…"
    return f"<{type(value).__name__}>"


def show_outcome(outcome, exact: bool = False) -> str:
    """An outcome of :func:`outcome_of` as text for messages: "returned <value>" or "raised Type: message"."""
    if outcome[0] == "raise":
        return f"raised {outcome[1]}: {outcome[2]}"
    return f"returned {show_value(outcome[1], exact)}"


_ARITY_ERROR = re.compile(r"positional arguments? but \d+ (?:was|were) given|missing \d+ required positional "
                          r"argument|got an unexpected keyword argument")


def compare(name, fn, cases, reference, faults, same, generic_hint, show_args=None, time_limit=None,
            none_allowed=False, show_answer=None, answer_legend=None) -> int:
    """Run ``fn`` on every case; on a mismatch raise ``Fail`` with the hint of the planted fault that best
    explains the learner's answers: among the faults that reproduce more than half of the learner's wrong answers,
    the one agreeing on most cases (the hint then says how many it fits when that is not all of them);
    ``generic_hint`` when none does.
    A call of ``fn`` that runs past ``time_limit`` seconds (default ``CALL_TIME_LIMIT_S``) raises ``NoReturn``,
    which ``checker`` reports. A None answer gets the missing-``return`` hint unless the reference returns None on
    some case and the learner's function returned something else elsewhere, or ``none_allowed`` (the reference
    returns None on cases checked elsewhere) and a planted fault explains the answers: then that fault's hint, even
    for a function that returned None everywhere (so such a fault's hint should mention a missing return too).
    ``show_answer`` (optional) writes an answer as lines of text (a mask as one row of 0/1 per node): where it can
    write both the learner's answer and the expected one (it raises on an answer of another kind), the message shows
    them side by side, row by row, instead of as one-line values (see :func:`show_side_by_side`), followed by
    ``answer_legend`` (a line saying how to read the rows) when given."""
    show_args = show_args or (lambda args: ", ".join(show_value(a) for a in args))
    learner_fn, fn = fn, time_limited(fn, time_limit or CALL_TIME_LIMIT_S)
    expected = [outcome_of(reference, args) for args in cases]
    got = []
    for i, args in enumerate(cases):
        copies = fresh_args(args)
        got.append(run_case(fn, copies))
        changed = [k for k, (a, c) in enumerate(zip(args, copies)) if not _same_arg(a, c)]
        if changed:
            arg = args[changed[0]]
            hint = (IN_PLACE_HINT if isinstance(arg, torch.Tensor) else _IN_PLACE_DICT_HINT if isinstance(arg, dict)
                    else _IN_PLACE_RECORD_HINT if isinstance(arg, list) and any(isinstance(a, StepRecord) for a in arg)
                    else _IN_PLACE_LIST_HINT)
            raise Fail(f"{name}({show_args(args)}) changed {_argument_name(learner_fn, changed[0])} in place."
                       f"\n  Hint: {hint}")
    failing = [i for i in range(len(cases)) if not _same_outcome(got[i], expected[i], same)]
    if not failing:
        return len(cases)
    best_hint, best_score, best_case = None, (0, 0), failing[0]
    for fault_fn, hint in faults:
        fault = [outcome_of(fault_fn, args) for args in cases]
        agree = [i for i in failing if _fault_agrees(got[i], fault[i], same)]
        # Rank by agreement on the failing cases, then on all cases (a fault that also explains the passing
        # cases is the better explanation).
        score = (len(agree), sum(_fault_agrees(g, f, same) for g, f in zip(got, fault)))
        # A fault that explains only a few of the wrong answers would point at the wrong mistake.
        if 2 * len(agree) > len(failing) and score > best_score:
            best_hint, best_score, best_case = hint, score, agree[0]
    raised = [k for k in failing if got[k][0] == "raise" and expected[k][0] != "raise"]
    if best_hint is None and raised:  # no planted mistake explains the answers: show the crash, the plainest clue
        best_case = raised[0]
    arity = [k for k in raised if got[k][1] == "TypeError" and _ARITY_ERROR.search(got[k][2])]
    if arity and len(arity) == len(failing):  # every call failed on the parameter list, not on the maths
        best_case, best_score = arity[0], (len(failing), len(cases))  # it explains every wrong answer
        best_hint = (f"the checker calls {name} with {len(cases[best_case])} arguments, as the lesson does, and "
                     "your function's parameter list does not take them: keep the parameters the exercise names.")
    i = best_case
    label = "Hint"
    def is_none(outcome):
        return outcome[0] == "ok" and outcome[1] is None

    # None is a missing `return` unless it is an answer the exercise allows (the reference returns it somewhere)
    # and the learner's function did return something else elsewhere.
    if (is_none(got[i]) and not all(is_none(g) for g in got) and expected[i][0] == "ok"
            and isinstance(expected[i][1], (list, tuple)) and not expected[i][1]):
        best_hint = (f"your function returned None where the answer is an empty {type(expected[i][1]).__name__}: "
                     f"return {'[]' if isinstance(expected[i][1], list) else '()'} when there is nothing to return "
                     "(the lesson joins and loops over the answer, which None does not allow).")
    elif (is_none(got[i]) and not (none_allowed and best_hint) and not all(is_none(g) for g in got)
            and not any(is_none(e) for e in expected)):  # None on some inputs only: a branch, not a lost return
        best_hint = ("your function returned None on this input and a value on others: a path through it (an `if` "
                     "branch for a special case?) returns nothing. Every input needs an answer of the same kind, "
                     "special cases too: return the value expected here.")
    elif (is_none(got[i]) and not (none_allowed and best_hint)
            and (all(is_none(g) for g in got) or not any(is_none(e) for e in expected))):
        best_hint = ("your function returned None: did you forget a `return` statement? (Or did it return what "
                     "list.append, .extend, .insert or .sort returned? They change the list in place and return "
                     "None: call them first, then return the list.)")
    elif (got[i][0] == "ok" and isinstance(got[i][1], str) and expected[i][0] == "ok"
          and as_float(expected[i][1]) is not None):  # a number was due
        best_hint = ("your function returned a string; return the value itself (a number, not an f-string or "
                     "str(...)): later cells compute with it.")
    elif (got[i][0] == "ok" and expected[i][0] == "ok" and isinstance(expected[i][1], torch.Tensor)
          and not isinstance(got[i][1], torch.Tensor) and same_tensor(got[i][1], expected[i][1])):
        kind = {"ndarray": "NumPy array"}.get(type(got[i][1]).__name__, type(got[i][1]).__name__)
        best_hint = (f"the values are right, but return a torch.Tensor, not a {kind}: the lesson's next cells call "
                     "tensor methods on the answer (torch.tensor(values) converts one).")
    elif (got[i][0] == "ok" and expected[i][0] == "ok" and isinstance(expected[i][1], Integral)
          and not isinstance(expected[i][1], bool) and isinstance(got[i][1], float)
          and got[i][1] == expected[i][1]):  # 10.0 for 10: the rule is right
        best_hint = ("the value is right, but return an int, not a float (10, not 10.0): it is a position or a "
                     "length, which later cells use as an index or a slice bound (int(...) or // keep it whole).")
    elif (best_hint is None and got[i][0] == "ok" and expected[i][0] == "ok" and isinstance(expected[i][1], Integral)
          and not isinstance(expected[i][1], bool) and isinstance(got[i][1], float) and math.isfinite(got[i][1])
          and not got[i][1].is_integer()):  # 2.5 where a count is due, and no planted mistake explains it
        best_hint = (f"the answer is a whole number (a count or a position), and your function returned "
                     f"{show_value(got[i][1])}: work out which whole number the rule asks for (the next one up, "
                     "the one below, ...) rather than returning the fraction; // divides without one.")
    elif (best_hint is None and got[i][0] == "raise" and got[i][1] == "IndexError"
          and "Dimension out of range" in got[i][2]):  # dim=1 on a one-dimensional input, say
        best_hint = ("your function used an axis this input does not have: count axes from the end (dim=-1, the "
                     "vocabulary, is the last axis of a distribution [V] and of a batch [rows, V] alike), so that "
                     "one code path serves both shapes.")
    elif (best_hint is None and got[i][0] == "raise" and got[i][1] == "RuntimeError"
          and "Boolean value of Tensor" in got[i][2]):  # Python's min/max/if/and on a tensor of several values
        best_hint = ("Python's min, max, `if`, `and` and `or` need ONE True/False, and a comparison of whole tensors "
                     "gives one per element: use torch.minimum / torch.maximum (element by element), torch.where for "
                     "a choice per element, or .item() where you mean a single number.")
    elif (best_hint is None and got[i][0] == "raise" and got[i][1] == "RuntimeError"
          and "view size is not compatible" in got[i][2]):  # .view(-1, V) on a slice: the maths may well be right
        best_hint = ("the error is about memory layout, not the maths: .view only relabels a tensor whose elements "
                     "lie in one block of memory, and a slice such as x[:, :n] or x[..., k] skips over elements. Use "
                     ".reshape(...) (or .flatten(...)), which copies when it has to.")
    elif (best_hint is None and got[i][0] == "ok" and expected[i][0] == "ok" and as_float(expected[i][1]) is not None
          and not isinstance(expected[i][1], bool) and (count := _many_values(got[i][1]))):
        best_hint = (f"return ONE number: your function returned {count} values (one per token?); "
                     "reduce them to the single number the exercise asks for (a sum over the tokens, ...).")
    elif all(got[j][0] == "ok" and expected[j][0] == "ok" and _wrapped_scalar(got[j][1], expected[j][1], same)
             for j in failing):  # every wrong answer, not only the one shown (a list of several is another mistake)
        best_hint = (_TENSOR_SCALAR_HINT.format(shape=list(got[i][1].shape)) if isinstance(got[i][1], torch.Tensor)
                     else f"the value is right, but return a single number, not a {type(got[i][1]).__name__} "
                          "holding it: later cells compute with it (2 * [x] repeats a list instead of doubling x).")
    elif got[i][0] == "ok" and expected[i][0] == "ok" and _reshaped(got[i][1], expected[i][1]):
        got_shape, want_shape = list(torch.as_tensor(got[i][1]).shape), list(expected[i][1].shape)
        best_hint = (f"the values are right, but the shape is {got_shape}; return shape {want_shape}, "
                     + ("without the extra dimension (no unsqueeze, [None] or reshape(1, -1) at the end)."
                        if len(got_shape) > len(want_shape) else
                        "keeping every dimension (no squeeze(), and keepdim=True in sums and maxima)."))
    elif best_hint and best_score[0] < len(failing):
        # Say so when the hint leaves some wrong answers unexplained: there may be a second mistake.
        label = f"Hint (it fits {best_score[0]} of the {len(failing)} wrong answers)"
    want, shown = expected[i], show_outcome(got[i])
    want = show_value(want[1]) if want[0] == "ok" else show_outcome(want)
    if want == shown.removeprefix("returned "):  # a near miss that 4 digits hide: show every digit
        want, shown = show_value(expected[i][1], exact=True), show_outcome(got[i], exact=True)
    elif (got[i][0] == expected[i][0] == "ok" and all(type(o[1]) is float and math.isfinite(o[1])
                                                     for o in (got[i], expected[i]))
          and abs(got[i][1] - expected[i][1]) <= 0.01 * max(abs(got[i][1]), abs(expected[i][1]))):
        # both with their trailing zeros: "0.5646; expected 0.5650", not "expected 0.565", which reads as rounding
        want, shown = f"{expected[i][1]:#.4g}", f"returned {got[i][1]:#.4g}"
    elif (got[i][0] == "ok" and type(got[i][1]) is float and math.isfinite(got[i][1])
          and not any(c in shown.removeprefix("returned ") for c in ".e")):
        shown += ".0"  # a float stays visibly one: "returned 2.0; expected 3", not "returned 2"
    lines = (_answer_lines(show_answer, got[i][1]), _answer_lines(show_answer, expected[i][1])) if (
        show_answer is not None and got[i][0] == expected[i][0] == "ok") else (None, None)
    if all(lines):  # a grid (a mask) reads better as rows than as a nested list on one line
        head = f"{name}({show_args(cases[i])}) returned a wrong answer:\n{show_side_by_side(*lines)}"
        if answer_legend:
            head += f"\n  ({answer_legend})"
    elif got[i][0] == "raise" and "\n" in got[i][2].strip():  # a long error (scipy's): the expected value first
        head = f"{name}({show_args(cases[i])}) should give {want}, but it {shown.rstrip()}"
    else:
        head = f"{name}({show_args(cases[i])}) {shown}; expected {want}."
    message = f"{head}\n  {label}: {best_hint or generic_hint}"
    if len(failing) > 1:
        message += f"\n  ({len(failing)} of {len(cases)} cases are wrong.)"
    raise Fail(message)


def _answer_lines(show_answer, value) -> list[str] | None:
    """``show_answer(value)`` split into lines, or None when it fails (an answer of a kind it does not expect)."""
    try:
        text = show_answer(value)
    except Exception:  # noqa: BLE001 — the learner's answer may be anything: fall back to the one-line value
        return None
    return text.splitlines() if isinstance(text, str) else None


def show_side_by_side(got_lines, want_lines, titles=("returned", "expected")) -> str:
    """Two answers written as lines (the learner's and the expected one, e.g. a mask's rows) in two columns under
    ``titles``, indented for a :class:`Fail` message, one row per line::

        returned   expected
        111|0000   111|1000
    """
    width = max(len(line) for line in [titles[0], *got_lines])
    rows = [titles, *itertools.zip_longest(got_lines, want_lines, fillvalue="")]
    return "\n".join(f"    {left:<{width}}   {right}".rstrip() for left, right in rows)


_TENSOR_SCALAR_HINT = ("the value is right, but it is a tensor of shape {shape}, not one number: later cells print it "
                       "with f\"{{x:.2f}}\", which refuses a tensor with dimensions. Reduce without keepdim=True, or "
                       "return .item() / float(...).")


def _many_values(value) -> int:
    """How many numbers ``value`` holds when it is a tensor, array, list or tuple of more than one; 0 otherwise."""
    if isinstance(value, torch.Tensor) or type(value).__module__ == "numpy":
        size = getattr(value, "numel", lambda: getattr(value, "size", 1))()
        return int(size) if isinstance(size, Integral) and size > 1 else 0
    if isinstance(value, (list, tuple)) and len(value) > 1 and all(as_float(v) is not None for v in value):
        return len(value)
    return 0


def _wrapped_scalar(got, expected, same) -> bool:
    """Is ``got`` a one-element list, tuple, array or tensor with dimensions holding the number ``expected`` (a
    scalar answer)?"""
    if isinstance(expected, torch.Tensor) and expected.dim() > 0 or as_float(expected) is None:
        return False
    if isinstance(got, (list, tuple)) and len(got) == 1:
        item = got[0]
    elif type(got).__name__ == "ndarray" and getattr(got, "size", 0) == 1 and got.ndim > 0:
        item = got.reshape(()).item()
    elif isinstance(got, torch.Tensor) and got.numel() == 1 and got.dim() > 0:
        item = got.reshape(())
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
            and same_tensor(got.reshape(expected.shape), expected))


def counts_pvalue(counts, probs) -> float:
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
# Token ids, and building cases.

def a_type(value) -> str:
    """``value``'s type name with its article, for messages: "a list", "an ndarray", "an int"."""
    name = type(value).__name__
    return f"{'an' if name[:1].lower() in 'aeiou' or name == 'ndarray' else 'a'} {name}"


def want_token_list(name: str, fn, case, example: str, why: str = "the lesson adds it to a list of ids and prints it",
                    what: str = "int token ids", tuples: bool = True, arrays: bool = False) -> None:
    """Refuse, with a hint, an answer on ``case`` that holds the right kind of ints in the wrong container: a tensor
    (the lesson would collect 0-d tensors), a NumPy array (``list + array`` adds element-wise), a one-shot iterator (a
    generator or map, used up once read), a list holding floats or tensors and, with ``tuples=False``, a tuple;
    with ``arrays=True`` a one-dimensional NumPy array of integers passes (for a lesson that only slices, zips and
    sums the answer).
    ``why`` says what the lesson does with the list. None and errors are left to :func:`compare`, which names the
    case."""
    outcome = run_case(fn, fresh_args(case))
    value = outcome[1] if outcome[0] == "ok" else None
    # a NumPy array too: list + array adds element-wise instead of joining
    int_array = (type(value).__module__ == "numpy" and getattr(value, "ndim", None) == 1
                 and getattr(getattr(value, "dtype", None), "kind", "") in "iu")
    if arrays and int_array:
        return
    if (isinstance(value, (torch.Tensor, collections.abc.Iterator)) or type(value).__module__ == "numpy"
            or (not tuples and isinstance(value, tuple))):
        raise Fail(f"{name} returned {a_type(value)}; return a list of {what} (e.g. {example}): {why}.")
    if isinstance(value, (list, tuple)) and any(isinstance(x, torch.Tensor) for x in value):
        raise Fail(f"{name} returned a list of tensors; return a list of {what} (e.g. {example}; .tolist() or "
                   f"int(...) turns tensor entries into ints): {why}.")
    if isinstance(value, (list, tuple)) and any(not isinstance(x, Integral) and isinstance(x, (float, complex))
                                                or type(x).__module__ == "numpy" and "float" in type(x).__name__
                                                for x in value):
        raise Fail(f"{name} returned {value!r}: return a list of {what} (e.g. {example}), not floats: {why}.")


def float32_tensor(values) -> torch.Tensor:
    """``values`` (numbers or nested lists) as a float32 tensor: the probability vectors of the case tables."""
    return torch.tensor(values, dtype=torch.float32)
