"""How a token's text is shown in the widgets: decoded in context, whitespace and control characters made visible.

A byte-level tokenizer splits some characters over several tokens, so a token decoded alone can be U+FFFD. The
viewers instead show the text each token adds to the decoded sequence (:class:`lab.detok.Detokenizer`): a
character whose bytes span several tokens shows once, on the token that completes it, and a token holding only
part of a character shows as :data:`PARTIAL_LABEL` in labels and as nothing in running text. A special token
written ``<|name|>`` (a chat template's ``<|im_start|>`` / ``<|im_end|>``, GPT-2's ``<|endoftext|>``) shows as a
short label, ``⟨start⟩``, ``⟨end⟩`` (:func:`special_token_text`), in the running text and in labels alike. The
running text's rules (:func:`token_display_text`, :func:`special_token_text`) live in :mod:`lab.detok`, which
``python -m lab demo`` shares; they are imported here for the viewers. Also
here: the argument checks every viewer applies to its ``tokenizer`` and ``prompt_ids``, and
:func:`run_prompt_length`, the prompt length that a run's first step record shows.

Nothing here escapes HTML: callers escape (:func:`html.escape`) or set ``textContent``.
"""
from __future__ import annotations

from lab.detok import (SPECIAL_TOKEN_LABELS, Detokenizer, has_special_token, show_controls, special_token_text,
                       token_display_text)
from lab.validation import check_token_ids, check_unbounded_ids

__all__ = ["PARTIAL_LABEL", "SPECIAL_TOKEN_LABELS", "token_texts", "token_labels", "token_display_text",
           "token_label_text", "special_token_text", "has_special_token", "check_tokenizer", "prompt_token_ids",
           "run_prompt_length", "run_prompt"]

# Label of a token that holds only part of a character (its text comes with a later token): a dotted circle, the
# usual stand-in for a missing character, rather than U+FFFD, which would read as broken text.
PARTIAL_LABEL = "\u25cc"


def token_texts(tokenizer, ids, context=None, parents=None) -> list:
    """The text each of ``ids`` (list of ints) adds after ``context`` (a :class:`lab.detok.Detokenizer` holding
    the tokens before them; None: nothing before), without changing ``context``: a ``str``, or ``None`` for a
    token holding only part of a character. ``parents``: a token tree's parents array (see
    :meth:`lab.detok.Detokenizer.texts_after`); None for a chain. ``tokenizer`` None shows ids as ``⟨17⟩``.
    Raises ``ValueError`` for a ``parents`` array that does not fit ``ids`` and for a negative id, ``TypeError`` for
    ``ids`` that are not integer token ids (a float is not truncated)."""
    if tokenizer is None:
        return [f"\u27e8{token}\u27e9" for token in check_unbounded_ids("ids", ids)]
    context = Detokenizer(tokenizer) if context is None else context
    return context.texts_after(ids, parents)


def token_labels(tokenizer, ids, context=None, parents=None) -> list:
    """Labels (:func:`token_label_text`, not yet HTML-escaped) of ``ids`` decoded after ``context``, as
    :func:`token_texts` takes them; ``tokenizer`` None gives the ids as strings (``"17"``). For the viewers that
    show one cell or node per token."""
    if tokenizer is None:
        return [str(token) for token in check_unbounded_ids("ids", ids)]
    return [token_label_text(text) for text in token_texts(tokenizer, ids, context, parents)]


def token_label_text(text) -> str:
    """One token's text as a chart label (not yet HTML-escaped): every whitespace character made visible.

    ``" the"`` → ``"␣the"``, ``"\\n"`` → ``"↵"``, ``"\\t"`` → ``"⇥"``, ``""`` → ``"∅"``, ``"<|im_end|>"`` →
    ``"⟨end⟩"`` (:func:`special_token_text`); ``None`` (a token holding only part of a character, see
    :func:`token_texts`) → :data:`PARTIAL_LABEL` ``"◌"``.
    """
    if text is None:
        return PARTIAL_LABEL
    if text == "":
        return "\u2205"
    # Whitespace first: a special token's name holds none, and a label's own spaces ("end of text") stay spaces.
    return special_token_text(show_controls(text).replace(" ", "\u2423").replace("\n", "\u21b5")
                              .replace("\t", "\u21e5"))


def check_tokenizer(tokenizer):
    """``tokenizer`` unchanged after checking it can decode: None, or anything with a callable ``decode``.

    Raises ``TypeError`` naming ``tokenizer`` otherwise (e.g. token ids passed first by mistake)."""
    if tokenizer is not None and not callable(getattr(tokenizer, "decode", None)):
        raise TypeError(f"tokenizer must be None or have a decode(list[int]) -> str method (a transformers "
                        f"tokenizer), got {type(tokenizer).__name__}; pass the prompt as prompt_ids=")
    return tokenizer


def prompt_token_ids(tokenizer, ids) -> list:
    """Prompt ids as a fresh ``list[int]``: None (no prompt), a list of integers or an integer tensor ``[n]`` /
    ``[1, n]``. Ids must lie in ``[0, len(tokenizer))`` when the tokenizer has a length.

    Raises ``TypeError`` naming ``prompt_ids`` for text, floats or bools, ``ValueError`` for another tensor shape
    or an id outside the vocabulary (:func:`lab.validation.check_token_ids`, as :class:`lab.decode.generate` and
    ``TreeViewer`` check them)."""
    if ids is None:
        return []
    vocab = len(tokenizer) if tokenizer is not None and hasattr(tokenizer, "__len__") else None
    return check_token_ids("prompt_ids", ids, vocab, allow_empty=True,
                           hint="; encode text first: tokenizer.encode(text)")


def run_prompt_length(record):
    """How many tokens the prompt of ``record``'s run had, read off a run's first :class:`lab.trace.StepRecord`
    (``index == 0``), or None when the record does not tell.

    The viewers compare it with their stored prompt to tell a run on that prompt from one on another. A prefill
    record (``record.prefill``, the first record of :func:`lab.decode.generate`) processed the whole prompt:
    its ``target_tokens``. A hand-built first record that is a decode step feeds the prompt's last token after
    the rest was cached: its ``cache_before`` + 1."""
    if record.prefill:
        return int(record.target_tokens) if record.target_tokens else None
    return None if record.cache_before is None else int(record.cache_before) + 1


def run_prompt(record):
    """The prompt token ids (a list of ints) of ``record``'s run when the record carries them, else None: a
    prefill record from :func:`lab.decode.generate` or :func:`lab.batched.generate_batch` holds them in
    ``record.prompt``; decode steps and hand-built records do not. With them a viewer reused for another run tells
    its prompt by the tokens themselves, not only by the length (:func:`run_prompt_length`), which two different
    prompts can share."""
    ids = getattr(record, "prompt", None)
    return None if ids is None else [int(token) for token in ids]
