"""KV-cache helpers over transformers caches: how long a cache is, and rolling it back after a rejection.

A speculative step appends the drafted tokens' keys and values to the target's cache while verifying them; the
rejected ones must leave again, or the next forward would attend to tokens that were never committed.
"""
from __future__ import annotations

__all__ = ["cache_length", "rollback"]


def cache_length(cache) -> int:
    """Number of token positions the cache holds (0 for an empty cache)."""
    return int(cache.get_seq_length())


def rollback(cache, length: int):
    """Keep the first ``length`` positions of ``cache`` (in place) and return it.

    Uses the transformers cache API (``crop``). transformers 5.24 takes a negative count of tokens to remove,
    older releases an absolute length, and ``crop(0)`` in old releases empties the cache; passing the negative
    count only when something must go works with both.

    Raises ``ValueError`` if ``length`` is negative or longer than the cache.
    """
    current = cache_length(cache)
    if isinstance(length, bool) or not isinstance(length, int) or not 0 <= length <= current:
        raise ValueError(f"length must be an integer in [0, {current}] (the cache holds {current} positions), "
                         f"got {length!r}")
    if length < current:
        cache.crop(length - current)
    return cache
