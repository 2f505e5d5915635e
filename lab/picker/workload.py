"""The picker's inputs: checking them and turning them into the workload dict every part of the picker reads.

The workload dict has exactly :func:`lab.picker.recommend`'s argument names as keys, so a rule can ask what a
changed workload would give with ``recommend(**{**workload, **change})``.
"""
from __future__ import annotations

import math
from collections.abc import Mapping
from numbers import Real

import numpy as np

from lab.picker.tables import MAX_API_TEMPERATURE, METHODS, SAMPLING_EPS, TASKS

__all__ = ["check_bool", "check_workload", "brief_repr"]


def _plain(value):
    """A 0-d NumPy array or a one-element real torch tensor as its Python number, as ``generate`` takes them
    (``lab.validation.plain_number``, which imports torch: the picker must not); anything else unchanged for the
    checks to judge."""
    if isinstance(value, np.ndarray) and value.shape == () and value.dtype.kind in "iuf":
        return value.item()
    if (type(value).__module__.startswith("torch") and callable(getattr(value, "numel", None))
            and value.numel() == 1 and str(getattr(value, "dtype", "")) != "torch.bool"
            and not value.is_complex()):
        return value.item()
    return value


def check_bool(name: str, value) -> bool:
    """``value`` as a bool when it is a ``bool`` or a ``numpy.bool_``; else ``ValueError`` naming ``name``."""
    # numpy.bool_ is no bool subclass; 1 or "yes" would silently mean True
    if not isinstance(value, (bool, np.bool_)):
        raise ValueError(f"{name} must be True or False, got {type(value).__name__} {value!r}")
    return bool(value)


def _finite(value: Real) -> bool:
    """``math.isfinite`` that calls a number too large for a float (``10**400``: OverflowError there) not finite."""
    try:
        return math.isfinite(value)
    except OverflowError:
        return False


def brief_repr(value) -> str:
    """``repr(value)`` cut to 40 characters for a message (``10**400`` has 401 digits); the picker stays torch-free,
    so :mod:`lab.validation`'s equivalent is not imported here."""
    try:
        text = repr(value)
    except ValueError:  # an int past Python's 4,300-digit printing limit
        return "a number too large to print"
    return text if len(text) <= 40 else f"{text[:40]}… ({len(text)} characters)"


def check_workload(task, temperature, has_small_same_family_model, can_finetune, latency_bound,
                   memory_headroom_gb, exclude, target_has_mtp=False, has_parallel_draft=False) -> dict:
    """:func:`lab.picker.recommend`'s arguments, checked, as the workload dict.

    Returns ``{"task", "temperature" (float; 0.0 for one below :data:`lab.picker.tables.SAMPLING_EPS`, which vLLM
    treats as greedy), "has_small_same_family_model", "can_finetune", "target_has_mtp",
    "has_parallel_draft", "latency_bound" (bools), "memory_headroom_gb" (float or None), "exclude" (list of methods
    in :data:`METHODS` order, each once)}``. A single method name is accepted for ``exclude``; a 0-d NumPy array
    or a one-element torch tensor for the temperature or the memory.

    Raises:
        ValueError: unknown task, temperature outside [0, :data:`lab.picker.tables.MAX_API_TEMPERATURE`] (2) or not
            finite, a flag that is not a bool (``numpy.bool_``
            counts), negative or non-finite memory, an ``exclude`` that is a dict, or an unknown method in it (the
            message names the argument and the allowed values).
    """
    temperature, memory = _plain(temperature), _plain(memory_headroom_gb)
    if not isinstance(task, str) or task not in TASKS:
        raise ValueError(f"task must be one of {', '.join(TASKS)}; got {task!r}")
    if isinstance(temperature, bool) or not isinstance(temperature, Real) or not _finite(temperature) \
            or not 0 <= temperature <= MAX_API_TEMPERATURE:
        raise ValueError(f"temperature must be a finite number from 0 (greedy) to {MAX_API_TEMPERATURE:g} (the OpenAI "
                         f"API's range, which the engines' servers take), got {brief_repr(temperature)}")
    flags = (check_bool("has_small_same_family_model", has_small_same_family_model),
             check_bool("can_finetune", can_finetune), check_bool("latency_bound", latency_bound),
             check_bool("target_has_mtp", target_has_mtp), check_bool("has_parallel_draft", has_parallel_draft))
    if memory is not None and (isinstance(memory, bool) or not isinstance(memory, Real)
                               or not _finite(memory) or memory < 0):
        raise ValueError(f"memory_headroom_gb must be None (unknown) or a finite number >= 0, got {brief_repr(memory)}")
    if isinstance(exclude, str):
        exclude = (exclude,)
    if isinstance(exclude, Mapping):  # iterating would read only its keys
        raise ValueError(f"exclude must be a list of methods, got a {type(exclude).__name__} {brief_repr(exclude)}")
    try:
        exclude = tuple(exclude)
    except TypeError:
        raise ValueError(f"exclude must be a list of methods, got {exclude!r}") from None
    allowed = [m for m in METHODS if m != "none"]
    bad = [m for m in exclude if m not in allowed]
    if bad:
        raise ValueError(f"exclude may only name {', '.join(allowed)}; got {bad!r}")
    return {"task": task, "temperature": 0.0 if temperature < SAMPLING_EPS else float(temperature),
            "has_small_same_family_model": flags[0],
            "can_finetune": flags[1], "target_has_mtp": flags[3], "has_parallel_draft": flags[4],
            "latency_bound": flags[2],
            "memory_headroom_gb": None if memory is None else float(memory) + 0.0,  # + 0.0: -0.0 printed "-0 GB"
            "exclude": [m for m in allowed if m in exclude]}
