"""Names joined into prose ("a, b and c") for help texts, messages and the lessons' generated sentences (layer 0)."""
from __future__ import annotations

__all__ = ["in_words"]


def in_words(words) -> str:
    """``["a", "b", "c"]`` -> ``"a, b and c"``; one word is itself, none is ``""``. ``words``: any iterable of str."""
    words = list(words)
    if len(words) <= 1:
        return "".join(words)
    return ", ".join(words[:-1]) + " and " + words[-1]
