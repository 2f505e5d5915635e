"""Each token's share of the decoded text, for views that show a sequence one token at a time.

A byte-level BPE tokenizer (GPT-2's, the bundled Shakespeare pair's) can split one character's UTF-8 bytes over
several tokens: "é" is ``Ã`` + ``©``, two tokens. Decoding such a token on its own, ``tokenizer.decode([id])``,
gives U+FFFD ("�"), although the sequence decodes to "Café". :class:`Detokenizer` does what transformers'
``TextStreamer`` does: decode the growing sequence and emit only the new text, holding back text that ends in an
incomplete character. As in vLLM's and text-generation-inference's incremental detokenizers, only a short window is
decoded each time (the text emitted last, as context, plus the new tokens), so a long run costs no more per token.

The CLI (``python -m lab demo``) and every widget that shows token text use it, so they all show the same text.
"""
from __future__ import annotations

import os

__all__ = ["Detokenizer"]

_REPLACEMENT = "\ufffd"
# A UTF-8 character has at most 4 bytes, so it can span at most 4 tokens; text still ending in U+FFFD after that
# many held tokens holds invalid bytes, which no later token completes: release it instead of holding forever.
_MAX_HELD = 4


class Detokenizer:
    """The text of a growing token sequence, token by token: ``push(id)`` returns the text that token adds.

    ``Detokenizer(tokenizer, ids=())``: ``tokenizer`` is anything with ``decode(list[int]) -> str`` (a
    transformers tokenizer, a :class:`lab.models.ModelPair`); ``ids`` (iterable of ints) are pushed first, e.g. the
    prompt. The texts pushed so far concatenate to ``text``, which equals ``tokenizer.decode(ids)`` whenever the
    sequence ends on a complete character (for tokenizers whose decoding of a sequence extends the decoding of
    its prefixes, as byte-level BPE without space clean-up does).

    A token whose bytes end in an incomplete UTF-8 character gets ``None`` (nothing to show yet); the token that
    completes the character carries it. ``fork()`` copies the state cheaply, e.g. to decode draft tokens after the
    accepted prefix without adding them to it; ``texts_after(ids, parents)`` does that for a chain or a tree.

    The tokenizers library's ``DecodeStream`` does the same for one stream, but needs a Rust
    ``tokenizers.Tokenizer`` and cannot be forked, so it cannot decode drafts that are then thrown away.
    """

    def __init__(self, tokenizer, ids=()):
        self._tokenizer = tokenizer
        self._window: list = []  # ids since a character boundary: context whose text is out, then held ids
        self._done = 0           # self._window[:self._done] is the context
        self.text = ""
        for token in ids:
            self.push(token)

    def push(self, token_id) -> str | None:
        """Append ``token_id`` (an int); returns the text it adds: the new characters it completes (``""`` for a
        token that decodes to nothing), or ``None`` while the text ends in an incomplete character (its bytes
        are then shown with the token that completes it). Errors are the tokenizer's ``decode`` errors."""
        window = self._window + [int(token_id)]
        full = str(self._tokenizer.decode(window))
        if full.endswith(_REPLACEMENT) and len(window) - self._done < _MAX_HELD:
            self._window = window
            return None
        base = str(self._tokenizer.decode(window[: self._done])) if self._done else ""
        # Decoding normally extends the context's text; if the tokenizer rewrote it (space clean-up), keep what
        # was already emitted and emit the rest.
        start = len(base) if full.startswith(base) else len(os.path.commonprefix([base, full]))
        new = full[start:]
        self.text += new
        self._window = window[self._done:]  # what this call emitted becomes the next call's context
        self._done = len(self._window)
        return new

    def fork(self) -> "Detokenizer":
        """An independent copy of this state (a few ids and the text so far; no decoding)."""
        copy = Detokenizer.__new__(Detokenizer)
        copy._tokenizer, copy._window, copy._done = self._tokenizer, list(self._window), self._done
        copy.text = self.text
        return copy

    def texts_after(self, ids, parents=None) -> list:
        """What each of ``ids`` (list of ints) would add after the current sequence, without adding them: one
        ``str`` or ``None`` per id, as :meth:`push` returns.

        ``parents`` (None: a chain, each id follows the one before) is a token tree's parents array, one int per
        id, ``-1`` for a child of the current sequence (see :mod:`lab.trees`): each id is decoded after its
        ancestors. Raises ``ValueError`` if ``parents`` does not match ``ids`` or names a later node."""
        ids = [int(token) for token in ids]
        if parents is None:
            state = self.fork()
            return [state.push(token) for token in ids]
        parents = [int(parent) for parent in parents]
        if len(parents) != len(ids):
            raise ValueError(f"parents has {len(parents)} entries for {len(ids)} ids")
        states, texts = [], []
        for i, (token, parent) in enumerate(zip(ids, parents)):
            if not -1 <= parent < i:
                raise ValueError(f"parents[{i}] = {parent}: a parent must be -1 or an earlier node")
            state = (self if parent < 0 else states[parent]).fork()
            texts.append(state.push(token))
            states.append(state)
        return texts
