"""How a checker compares a learner's answer with the expected value: as one number (float, bool, whole number),
as a tensor or nested list, as token ids. Lenient about the container (a 0-d tensor is a number, a tensor or tuple of
ids is a list of ids) and strict about what later cells need (a count must be an integer type; a bool is not 1).
:mod:`lab.exercises.harness` re-exports every name, so checkers import them from there.
"""
from __future__ import annotations

import collections.abc
import math
from numbers import Integral

import torch

__all__ = ["as_float", "same_float", "as_bool", "same_bool", "same_int", "same_whole", "same_tensor",
           "same_tensor_type", "as_ints", "same_ints", "int_list_pair", "pair_shape_note"]


def as_float(value):
    """``value`` as a Python float when it is one number (a real, a NumPy scalar, a 0-d tensor); None for anything
    else (a string, a bool, a list, a tensor or array with dimensions: a tensor of shape [1] is refused too, as
    f"{x:.2f}" refuses it)."""
    if isinstance(value, torch.Tensor):
        if value.dim() != 0:
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


def same_float(a, b, rel=1e-6, abs_=1e-9) -> bool:
    """Whether both are numbers (:func:`as_float`) within ``rel`` / ``abs_`` of each other; NaN equals NaN, an
    infinity only itself."""
    a, b = as_float(a), as_float(b)
    if a is None or b is None:
        return False
    if math.isnan(a) or math.isnan(b):
        return math.isnan(a) and math.isnan(b)
    if math.isinf(a) or math.isinf(b):
        return a == b
    return math.isclose(a, b, rel_tol=rel, abs_tol=abs_)


def as_bool(value):
    """``value`` as a Python bool when it is a Python or NumPy bool or a one-element bool tensor; None otherwise (1
    and 0 are not answers to a yes/no question)."""
    if isinstance(value, torch.Tensor) and value.numel() == 1 and value.dtype == torch.bool:
        return bool(value)
    if type(value).__name__ in ("bool", "bool_"):  # Python or NumPy bool
        return bool(value)
    return None


def same_bool(a, b) -> bool:
    """Whether both are bools (:func:`as_bool`) and equal."""
    a, b = as_bool(a), as_bool(b)
    return a is not None and a == b


def same_int(a, b) -> bool:
    """Whether both are the same whole number, in any numeric type (12 and 12.0 agree); bools and strings never
    do."""
    if isinstance(a, (bool, str, bytes)) or isinstance(b, (bool, str, bytes)):
        return False
    try:
        return int(a) == int(b) and float(a) == float(b)
    except (TypeError, ValueError, OverflowError):  # inf or NaN from a learner is a wrong answer
        return False


def same_whole(answer, expected) -> bool:
    """:func:`same_int` for a count, length or position the lesson formats with ``:d``, indexes with or passes to
    ``range()``: the answer must be of an integer type (int, NumPy integer or a one-element integer tensor), so
    12.0 is wrong although it equals 12."""
    whole = isinstance(answer, Integral) or (isinstance(answer, torch.Tensor) and answer.numel() == 1
                                                      and not answer.is_floating_point())
    return whole and same_int(answer, expected)


def same_tensor(a, b, atol=1e-5) -> bool:
    """Whether ``a`` and ``b`` (tensors, on any device, or nested lists of numbers) have one shape and values within
    ``atol`` (compared in float64 on the CPU; NaN equals NaN)."""
    try:  # an answer on the GPU is compared with the CPU reference; to the CPU first (MPS has no float64)
        a, b = (torch.as_tensor(x.detach().cpu() if isinstance(x, torch.Tensor) else x, dtype=torch.float64)
                for x in (a, b))
    except (TypeError, ValueError, RuntimeError):
        return False
    if a.shape != b.shape:
        return False
    return bool(torch.allclose(a, b, atol=atol, rtol=0, equal_nan=True))


def same_tensor_type(a, b, atol=1e-5) -> bool:
    """:func:`same_tensor` that also wants a tensor wherever the reference gave one (for answers that later cells
    call tensor methods on, such as lesson 03's residual)."""
    if isinstance(b, torch.Tensor) and not isinstance(a, torch.Tensor):
        return False
    return same_tensor(a, b, atol)


def as_ints(value):
    """``value`` (a list, tuple, tensor or other iterable) as a list of Python ints; None if it is not iterable or
    an item is not a whole number (bools included)."""
    if isinstance(value, torch.Tensor):
        value = value.tolist()
    try:
        items = list(value)
    except TypeError:
        return None
    out = []
    for item in items:
        if isinstance(item, bool):
            return None
        try:
            if int(item) != item:
                return None
        except (TypeError, ValueError):
            return None
        out.append(int(item))
    return out


def same_ints(a, b) -> bool:
    """Whether both are the same sequence of whole numbers (:func:`as_ints`): [1, 2], (1, 2) and tensor([1, 2])
    agree."""
    a, b = as_ints(a), as_ints(b)
    return a is not None and a == b


def int_list_pair(value) -> list | None:
    """``[first, second]``: an answer that should be a pair of token sequences (lesson 08's ``(tokens, parents)``,
    lesson 09's ``(inputs, targets)``) as two lists of ints (:func:`as_ints`), or None when it is not a pair of int
    sequences (a generator or iterator is refused: it has no len() and is used up once read). A 2-row tensor or
    NumPy array is read as its two rows: the lesson's unpacking takes it."""
    if isinstance(value, torch.Tensor) or type(value).__module__ == "numpy":
        value = value.tolist() if getattr(value, "ndim", 0) == 2 else value
    if not isinstance(value, (tuple, list)) or len(value) != 2:
        return None
    if any(isinstance(part, collections.abc.Iterator) for part in value):
        return None
    if any(_has_floats(part) for part in value):  # 9.0 is no token id: the lesson prints and indexes with them
        return None
    parts = [as_ints(part) for part in value]
    return None if None in parts else parts


def _has_floats(part) -> bool:
    """Whether a sequence (list, tuple, tensor or array) holds floating-point numbers."""
    if isinstance(part, torch.Tensor):  # an empty one is float by default: no float in it
        return part.numel() > 0 and part.is_floating_point()
    if type(part).__module__ == "numpy":
        return getattr(part, "dtype", None) is not None and part.dtype.kind == "f" and part.size > 0
    try:
        return any(isinstance(item, float) or type(item).__module__ == "numpy" and getattr(item, "dtype", None)
                   is not None and item.dtype.kind == "f" for item in part)
    except TypeError:
        return False


def pair_shape_note(value, unpack: str, item: str, first: str) -> str:
    """What an answer that :func:`int_list_pair` refuses looks like, for a checker's message ("" when nothing more
    fits): ``unpack`` is the lesson's line that unpacks the pair (``"tokens, parents = grow_tree(...)"``), ``item``
    what a list of pairs holds instead (``"(token, parent) pair per node"``), ``first`` the first list's name
    (``"tokens"``)."""
    if isinstance(value, dict):
        return f": a dict, which `{unpack}` would unpack into its keys"
    shape = tuple(getattr(value, "shape", ()))
    if len(shape) == 2 and shape[1] == 2 and shape[0] != 2:
        return f": one row per position, shape [{shape[0]}, 2], not two rows ({first} first)"
    if isinstance(value, (list, tuple)) and len(value) == 2 and any(_has_floats(part) for part in value):
        return ": floats (9.0 is no token id), where token ids and indices are ints"
    if isinstance(value, (list, tuple)) and value and all(isinstance(v, (list, tuple)) and len(v) == 2 for v in value):
        return f": one {item}, not two lists"
    if isinstance(value, (list, tuple)) and as_ints(value) is not None:
        return f": one list of ints (the {first} alone?), not two"
    if isinstance(value, (list, tuple)) and any(isinstance(v, collections.abc.Iterator) for v in value):
        return ": a generator or iterator has no len() and is used up once read, so make lists"
    return ""
