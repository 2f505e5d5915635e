"""Checking a GPU count given to an engine renderer (``tensor_parallel_size`` and the like)."""
from __future__ import annotations

from numbers import Integral

__all__ = ["check_gpus"]


def check_gpus(name: str, value) -> int:
    """``value`` as an int when it is an integer >= 1 (a GPU count; numpy integers count); else ``ValueError`` naming
    ``name``.

    The same test as ``lab.validation.check_int`` with the unit in the message; not that function, because
    ``lab.validation`` imports torch and ``python -m lab pick`` would then pay torch's import (seconds) for an
    integer check."""
    if isinstance(value, bool) or not isinstance(value, Integral) or value < 1:
        raise ValueError(f"{name} must be an integer >= 1 (GPUs), got {value!r}")
    return int(value)
