"""Names joined into prose ("a, b and c"), counted nouns ("1 entry", "2 entries") and the acceptance rate with what it
counts, for help texts, messages, summaries and the lessons' generated sentences (layer 0)."""
from __future__ import annotations

from numbers import Integral

__all__ = ["in_words", "plural", "acceptance_phrase"]


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


def plural(count: int, word: str, words: str | None = None) -> str:
    """``count`` and the noun it counts: ``plural(1, "draft")`` -> ``"1 draft"``, ``plural(0, "draft")`` -> ``"0
    drafts"``, ``plural(2, "entry", "entries")`` -> ``"2 entries"``. ``words``: the plural when it is not ``word``
    + "s". Raises ``TypeError`` for a ``count`` that is not an integer (Python's or NumPy's; a bool is not) and a
    ``word`` or ``words`` that is not a str."""
    if isinstance(count, bool) or not isinstance(count, Integral):  # stdlib only: help texts load no torch
        raise TypeError(f"count must be an integer, got {type(count).__name__} {count!r}")
    if not isinstance(word, str) or not isinstance(words, (str, type(None))):
        raise TypeError(f"word and words must be str, got {type(word).__name__} and {type(words).__name__}")
    return f"{int(count)} {word if count == 1 else word + 's' if words is None else words}"


def acceptance_phrase(rate, accepted, drafted, tree: bool) -> str:
    """The acceptance rate with the counts it divides, as ``python -m lab demo`` and the race dashboard print it:
    ``"acceptance rate 0.25 (3 of 12 drafts accepted)"`` ("1 of 1 draft"); with token trees (``tree``)
    ``"acceptance rate 0.12 (18 of 153 tree nodes accepted; a step keeps one path of its tree at most)"``, a rate low
    by design beside the tokens
    per target call; ``"acceptance rate n/a (nothing drafted)"`` when ``rate`` is None. ``accepted`` / ``drafted``
    (ints) may be None: then the rate stands alone. Raises ``TypeError`` for a ``rate`` that is neither None nor a
    number."""
    if rate is None:
        return "acceptance rate n/a (nothing drafted)"
    if isinstance(rate, bool) or not isinstance(rate, (int, float)) and not hasattr(rate, "__float__"):
        raise TypeError(f"rate must be None or a number, got {type(rate).__name__} {rate!r}")
    head = f"acceptance rate {float(rate):.2f}"
    if accepted is None or drafted is None:
        return head
    if tree:
        return (f"{head} ({accepted} of {plural(drafted, 'tree node')} accepted; a step keeps one path of its tree "
                "at most)")
    return f"{head} ({accepted} of {plural(drafted, 'draft')} accepted)"
