"""Argument checks shared by every module of ``lab`` and ``widgets`` (layer 0: imports nothing from ``lab``).

Each check returns the value in a plain form (a Python int, a list of ints, a float32 tensor) or raises an error
that names the argument and the allowed range, so that bad input never reaches torch's own, less helpful, errors.
One copy of each: a module that needs "an integer >= 1" calls :func:`check_int` instead of writing the test again.
"""
from __future__ import annotations

import math
from collections.abc import Mapping
from collections.abc import Set as AbstractSet
from numbers import Integral, Real

import torch

__all__ = ["check_int", "is_integer", "check_token_ids", "check_unbounded_ids", "plain_number",
           "check_sampling_args", "check_probs", "check_number", "MAX_LENGTH", "refuse_complex_and_bool",
           "SEED_RANGE", "in_seed_range", "check_seed"]


MAX_LENGTH = 1 << 16
"""The most drafts, tree nodes or batch rows one argument of a course function takes (65,536): far beyond any context
the course's models hold (SmolLM2: 8,192 positions), so a larger count is a mistake, refused before it fills memory
(a chain of 10**9 drafts was killed for memory) or runs for minutes."""


def check_int(name: str, value, minimum: int, maximum: int | None = None, *, shown=None) -> int:
    """Return ``value`` as a Python int after checking it is an integer ``>= minimum`` (and ``<= maximum`` when
    given).

    Any ``numbers.Integral`` counts (``int``, ``numpy.int64``, ...), and so does a one-element integer tensor or
    0-d NumPy array (:func:`plain_number`), as the number checks take a one-element float tensor; ``bool`` does not,
    since ``True`` passed as a count is almost always a mistake. Raises ``ValueError`` naming ``name`` and the
    allowed range; the message shows ``shown`` when given (what the caller was passed, e.g. a tensor before
    :func:`plain_number`), else ``value``.
    """
    plain = plain_number(value)  # once: a tensor's .item() may synchronise a GPU
    if plain is not value:
        shown, value = (value if shown is None else shown), plain
    if (isinstance(value, bool) or not isinstance(value, Integral) or value < minimum
            or (maximum is not None and value > maximum)):
        allowed = f">= {minimum}" if maximum is None else f"in [{minimum}, {maximum}]"
        raise ValueError(f"{name} must be an integer {allowed}, got {value if shown is None else shown!r}")
    return int(value)


SEED_RANGE = "a whole number from -2**63 to 2**64 - 1"
"""The seeds ``torch.Generator.manual_seed`` accepts, in words: the rule of :func:`check_seed`, of
:func:`lab.decode.generate`'s ``seed`` and of ``python -m lab demo --seed``."""


def in_seed_range(value: int) -> bool:
    """Whether the integer ``value`` is a seed ``torch.Generator.manual_seed`` accepts (:data:`SEED_RANGE`)."""
    return -2 ** 63 <= value < 2 ** 64


def check_seed(name: str, value, none_allowed: bool = False) -> int | None:
    """``value`` as a Python int after checking it is a seed ``torch.Generator.manual_seed`` accepts
    (:data:`SEED_RANGE`; negative seeds included): a Python or NumPy integer or a one-element integer tensor, not a
    bool; None passes through when ``none_allowed`` (``generate``'s "no seed"). Raises ``TypeError`` naming ``name``
    for anything that is not an integer, ``ValueError`` naming it and the range for an integer outside it."""
    if value is None and none_allowed:
        return None
    plain = plain_number(value)
    if not is_integer(plain):
        raise TypeError(f"{name} must be {'None or ' if none_allowed else ''}an integer ({SEED_RANGE}), got "
                        f"{type(value).__name__} {_shown(value)}")
    if not in_seed_range(int(plain)):
        raise ValueError(f"{name} must be {SEED_RANGE} (what torch.Generator.manual_seed accepts), got "
                         f"{_shown(int(plain))}")
    return int(plain)


def is_integer(value) -> bool:
    """True for a Python or NumPy integer and for an integer 0-d tensor; False for bools (bool tensors too), floats
    and everything else. The one integer test for token ids and tree indices in ``lab``."""
    if isinstance(value, bool):
        return False
    if isinstance(value, Integral):
        return True
    return (isinstance(value, torch.Tensor) and value.dim() == 0 and not value.is_floating_point()
            and not value.is_complex() and value.dtype != torch.bool)


def _is_ndarray(value) -> bool:
    # NumPy is not imported here (torch does not need it); an ndarray is recognised by its type
    return type(value).__name__ == "ndarray" and type(value).__module__ == "numpy"


def check_token_ids(name: str, ids, vocab: int | None = None, *, allow_empty: bool = False, hint: str = "") -> list:
    """``ids`` as a list of Python ints after checking they are token ids: a list (or other iterable) of integers
    (Python, NumPy, integer 0-d tensors), or an integer tensor or NumPy array ``[L]`` / ``[1, L]``.

    Raises ``TypeError`` naming ``name`` for text (``str``, ``bytes``, ``bytearray``), a mapping (a tokenizer's
    output: its ``["input_ids"]`` are the ids) or a set, a non-iterable, a float/bool tensor or array or an item that is
    not an integer (bools included), and ``ValueError`` for a tensor or array of another shape, an empty sequence
    (unless ``allow_empty``), a negative id and, when ``vocab`` is given, ids outside ``[0, vocab)``. ``hint`` is
    appended to the type errors (e.g. "; encode text first: pair.encode(text)"). The result is always a new list;
    a list of plain ints is checked in one pass, cheap enough for once per decoding step."""
    if isinstance(ids, (str, bytes, bytearray)):
        raise TypeError(f"{name} must be token ids, got text ({ids[:30]!r}){hint}")
    if isinstance(ids, (Mapping, AbstractSet)):  # iterating would give its keys, or ids in no order and no repeats
        what = (f"a mapping with keys {list(ids)[:3]!r}" + ("; a tokenizer's output holds the ids in ['input_ids']"
                                                             if "input_ids" in ids else "")
                if isinstance(ids, Mapping) else f"a {type(ids).__name__} (no order, no repeats)")
        raise TypeError(f"{name} must be a sequence of token ids, got {what}{hint}")
    if _is_ndarray(ids):  # a NumPy array is read like a tensor of its shape: [1, L] is one row, not one item
        if ids.dtype.kind not in "iuO":  # object arrays: their items are judged one by one below
            raise TypeError(f"{name} must be integer token ids, got a NumPy array of dtype {ids.dtype}{hint}")
        if ids.ndim == 2 and ids.shape[0] == 1:
            ids = ids[0]
        if ids.ndim != 1:
            raise ValueError(f"{name} must be a list of ids or an array [L] or [1, L], got shape {tuple(ids.shape)}")
        ids = ids.tolist()
    elif isinstance(ids, torch.Tensor):
        if ids.is_floating_point() or ids.is_complex() or ids.dtype == torch.bool:
            raise TypeError(f"{name} must be integer token ids (a LongTensor), got dtype {ids.dtype}{hint}")
        if ids.dim() == 2 and ids.size(0) == 1:
            ids = ids[0]
        if ids.dim() != 1:
            raise ValueError(f"{name} must be a list of ids or a tensor [L] or [1, L], got shape {tuple(ids.shape)}")
        ids = ids.tolist()
    else:  # a fresh list: callers may append to it
        try:
            ids = list(ids)
        except TypeError:
            raise TypeError(f"{name} must be a list of token ids or a LongTensor, got {type(ids).__name__}"
                            f"{hint}") from None
    if not all(type(t) is int for t in ids):  # the fast path: a list of plain ints needs no conversion
        wrong = next((t for t in ids if not is_integer(t)), None)
        if wrong is not None:
            raise TypeError(f"{name} must hold integer token ids, got {type(wrong).__name__} {wrong!r}{hint}")
        ids = [int(t) for t in ids]
    if not ids and not allow_empty:
        raise ValueError(f"{name} must hold at least one token id")
    if vocab is not None and ids and not 0 <= min(ids) <= max(ids) < vocab:
        raise ValueError(f"{name} must be token ids in [0, {vocab}), got {[t for t in ids if not 0 <= t < vocab][:5]}")
    if vocab is None and ids and min(ids) < 0:  # no id is negative, whatever the vocabulary
        raise ValueError(f"{name} must be token ids (integers >= 0), got {min(ids)}")
    return ids


def check_unbounded_ids(name: str, ids) -> list:
    """``ids`` as a list of Python ints >= 0, possibly empty: :func:`check_token_ids` with no vocabulary and
    ``allow_empty``, for a caller that knows no vocabulary (prompt lookup, suffix decoding, lookahead), so ``>= 0``
    is the whole range it can check. Raises ``TypeError`` naming ``name`` for text or ids that are not integers (a
    float is not truncated), ``ValueError`` for a negative id."""
    return check_token_ids(name, ids, allow_empty=True)


def plain_number(value):
    """``value`` as a Python number when it is a one-element real tensor or a 0-d NumPy array (``.item()``), so a
    value computed with torch, such as an acceptance rate ``torch.minimum(t, d).sum()``, passes the number checks;
    anything else is returned unchanged for those checks to judge (bool and complex tensors too)."""
    if isinstance(value, torch.Tensor):
        if value.numel() == 1 and value.dtype != torch.bool and not value.is_complex():
            return value.item()
        return value
    if type(value).__module__ == "numpy" and getattr(value, "shape", None) == () and hasattr(value, "item"):
        item = value.item()
        return item if isinstance(item, Real) and not isinstance(item, bool) else value
    return value


def _shown(value) -> str:
    """``repr(value)`` for an error message, cut to 40 characters (10**400 has 401 digits; past 4,300 Python refuses
    to print an int at all)."""
    try:
        text = repr(value)
    except ValueError:
        return "a number too large to print"
    return text if len(text) <= 40 else f"{text[:40]}… ({len(text)} characters)"


def _as_float(value: Real) -> float:
    """``float(value)``, with ±inf for a number too large for a float (``float(10**400)`` raises OverflowError, which
    would name no argument): the range checks then refuse it by name."""
    try:
        return float(value)
    except OverflowError:
        return math.inf if value > 0 else -math.inf


def check_sampling_args(temperature: float = 1.0, top_k: int | None = None, top_p: float | None = None) -> tuple:
    """Check the sampling settings; returns ``(temperature, top_k, top_p)`` as Python numbers (a one-element tensor
    is taken as its value, :func:`plain_number`).

    Raises ``ValueError`` naming the argument when temperature is not a number (bool included), or is negative,
    infinite or NaN, top_k is not an integer >= 1 (any ``numbers.Integral`` but bool), or top_p is not a number in
    (0, 1] (bool is not a number here); a number too large for a float (``10**400``) is out of range too."""
    given = {"temperature": temperature, "top_k": top_k, "top_p": top_p}  # messages show what was passed
    temperature, top_k, top_p = plain_number(temperature), plain_number(top_k), plain_number(top_p)
    # bool is a Real, but True as a temperature or top_p is almost always a mistake
    if isinstance(temperature, Real) and not isinstance(temperature, bool):
        temperature = _as_float(temperature)
    if isinstance(top_p, Real) and not isinstance(top_p, bool):
        top_p = _as_float(top_p)
    if (isinstance(temperature, bool) or not isinstance(temperature, Real) or math.isnan(temperature)
            or temperature < 0 or math.isinf(temperature)):
        raise ValueError(f"temperature must be a finite number >= 0 (0 = greedy), got {_shown(given['temperature'])}")
    if top_k is not None and (isinstance(top_k, bool) or not isinstance(top_k, Integral) or top_k < 1):
        raise ValueError(f"top_k must be None or an integer >= 1, got {given['top_k']!r}")
    if top_p is not None and (isinstance(top_p, bool) or not isinstance(top_p, Real) or math.isnan(top_p)
                              or not 0 < top_p <= 1):
        raise ValueError(f"top_p must be None or a number in (0, 1], got {_shown(given['top_p'])}")
    return temperature, top_k, top_p


def refuse_complex_and_bool(name: str, values, what: str = "probabilities") -> None:
    """TypeError naming ``name`` (and saying ``values`` must be real ``what``) for complex or bool input, which
    ``torch.as_tensor(..., dtype=float)`` would cast silently (dropping the imaginary part; False/True as 0/1): a
    tensor, NumPy array or NumPy scalar of complex or bool dtype, a bool, a complex number, or a (nested) list or
    tuple holding one."""
    if isinstance(values, torch.Tensor):
        if values.is_complex() or values.dtype == torch.bool:
            raise TypeError(f"{name} must be real {what}, got a tensor of dtype {values.dtype}")
    elif type(values).__module__ == "numpy" and hasattr(values, "dtype"):  # an array or a NumPy scalar
        if values.dtype.kind in "bc":
            raise TypeError(f"{name} must be real {what}, got NumPy {type(values).__name__} of dtype "
                            f"{values.dtype}")
    elif isinstance(values, bool):
        raise TypeError(f"{name} must be {what} (numbers), got bool {values!r}")
    elif isinstance(values, complex):
        raise TypeError(f"{name} must be real {what}, got complex {values!r}")
    elif isinstance(values, (list, tuple)):
        for item in values:
            if type(item) is not float and type(item) is not int:  # plain numbers (the usual case): nothing to refuse
                refuse_complex_and_bool(name, item, what)


def check_probs(name: str, probs: torch.Tensor, atol: float = 1e-3, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """Return ``probs`` as a tensor of ``dtype`` (float32 by default) after checking it is a distribution over
    its last axis.

    Raises ``ValueError`` naming ``name`` for a scalar or an empty last axis, NaN or infinite entries, negative
    entries, or sums further than ``atol`` from 1; ``TypeError`` for something that is not numbers, complex numbers
    (a tensor or array of complex dtype) and bools (a bool tensor or array, or a sequence holding a bool). Raises
    ``ValueError`` for an ``atol`` that is not a finite number >= 0 and a ``dtype`` that is not a floating dtype
    (an integer dtype would truncate every probability to 0).
    """
    if isinstance(atol, bool) or not isinstance(atol, Real) or not math.isfinite(atol) or atol < 0:
        raise ValueError(f"atol must be a finite number >= 0, got {atol!r}")
    if not (isinstance(dtype, torch.dtype) and dtype.is_floating_point):
        raise ValueError(f"dtype must be a floating torch dtype (torch.float32, ...), got {dtype!r}")
    refuse_complex_and_bool(name, probs)
    try:
        probs = torch.as_tensor(probs, dtype=dtype)
    except (TypeError, ValueError, RuntimeError) as error:
        raise TypeError(f"{name} must be a tensor or sequence of probabilities, got {type(probs).__name__} "
                        f"({error})") from None
    if probs.dim() == 0:
        raise ValueError(f"{name} must have a vocabulary axis, got a scalar")
    if probs.size(-1) == 0:
        raise ValueError(f"{name} must have at least one entry on its vocabulary axis, got shape {tuple(probs.shape)}")
    if torch.isnan(probs).any():
        raise ValueError(f"{name} contains NaN")
    if (probs < 0).any():
        raise ValueError(f"{name} has negative entries; probabilities must be >= 0")
    sums = probs.sum(-1)
    if not bool(((sums - 1).abs() <= atol).all()):  # also catches +inf entries (an inf or NaN sum)
        got = (f"a sum of {float(sums):.4g}" if sums.numel() == 1
               else f"sums from {float(sums.min()):.4g} to {float(sums.max()):.4g}")
        raise ValueError(f"{name} must sum to 1 over the last axis (got {got}); pass probabilities, not logits or "
                         "counts")
    return probs


def check_number(name: str, value, allowed: str) -> float:
    """``value`` as a float: a real number (not bool) or a one-element tensor; ``TypeError`` naming ``name`` for
    anything else, ``ValueError`` naming ``name`` and ``allowed`` for a number too large for a float (``10**400``:
    the callers check floats, so their ranges hold only numbers that fit one)."""
    if isinstance(value, Real) and not isinstance(value, bool):
        try:
            return float(value)
        except OverflowError:  # float(10**400): raised here, the message would name nothing
            raise ValueError(f"{name} must be a number in {allowed} that fits a float, got {_shown(value)}") \
                from None
    if isinstance(value, torch.Tensor) and value.numel() == 1 and value.dtype != torch.bool and not value.is_complex():
        return float(value)
    raise TypeError(f"{name} must be a number in {allowed}, got {type(value).__name__} {value!r}")
