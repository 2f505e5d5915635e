"""Checking the counts given to an engine renderer: GPU counts (``tensor_parallel_size`` and the like) and SGLang's
``max_running_requests``."""
from __future__ import annotations

from numbers import Integral

__all__ = ["MAX_TENSOR_PARALLEL_SIZE", "MAX_RUNNING_REQUESTS", "check_count", "check_gpus"]

MAX_TENSOR_PARALLEL_SIZE = 1024
"""The largest tensor-parallel size the renderers write. vLLM shards attention by heads and requires the target's
``num_attention_heads`` to be divisible by the size; the largest open models have about 128 heads, so even 1024 is
far past any real target, and a larger number is a typo, not a cluster."""

MAX_RUNNING_REQUESTS = 1 << 16
"""The largest ``max_running_requests`` the SGLang renderer writes: far above any batch one server schedules (lesson
13's break-even batch is about 263), so a larger number is a typo."""


def check_count(name: str, value, maximum: int, unit: str) -> int:
    """``value`` as an int when it is an integer from 1 to ``maximum`` (numpy integers count); else ``ValueError``
    naming ``name``, the range and the ``unit`` (e.g. "GPUs").

    Like ``lab.validation.check_int`` with the unit in the message, but for plain and NumPy integers only (no
    tensors): not that function, because ``lab.validation`` imports torch and ``python -m lab pick`` would then pay
    torch's import (seconds) for an integer check."""
    if isinstance(value, bool) or not isinstance(value, Integral) or not 1 <= value <= maximum:
        raise ValueError(f"{name} must be an integer from 1 to {maximum} ({unit}), got {value!r}")
    return int(value)


def check_gpus(name: str, value) -> int:
    """:func:`check_count` for a GPU count: 1 to :data:`MAX_TENSOR_PARALLEL_SIZE`."""
    return check_count(name, value, MAX_TENSOR_PARALLEL_SIZE, "GPUs")
