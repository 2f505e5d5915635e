"""Names joined into prose ("a, b and c") for help texts, messages and the lessons' generated sentences (layer 0)."""
from __future__ import annotations

__all__ = ["in_words"]


def in_words(words) -> str:
    """``["a", "b", "c"]`` -> ``"a, b and c"``; one word is itself, none is ``""``. ``words``: any iterable of str
    but a str itself. Raises ``TypeError`` naming ``words`` for a str (``in_words("abc")`` would read "a, b and c"),
    a non-iterable (None) or an item that is not a str."""
    if isinstance(words, str):
        raise TypeError(f"words must be an iterable of words (e.g. a list of str), got the str {words[:30]!r}")
    if not hasattr(words, "__iter__"):
        raise TypeError(f"words must be an iterable of words (e.g. a list of str), got {type(words).__name__}")
    words = list(words)
    wrong = next((w for w in words if not isinstance(w, str)), None)
    if wrong is not None:
        raise TypeError(f"words must hold str items, got {type(wrong).__name__} {wrong!r}")
    if len(words) <= 1:
        return "".join(words)
    return ", ".join(words[:-1]) + " and " + words[-1]
