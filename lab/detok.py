"""Each token's share of the decoded text, for views that show a sequence one token at a time.

A byte-level BPE tokenizer (GPT-2's, the bundled Shakespeare pair's) can split one character's UTF-8 bytes over
several tokens: "é" is ``Ã`` + ``©``, two tokens. Decoding such a token on its own, ``tokenizer.decode([id])``,
gives U+FFFD ("�"), although the sequence decodes to "Café". :class:`Detokenizer` decodes the growing sequence
instead and hands each token the new text up to the last complete character, holding back only an incomplete
character at the end (as the incremental detokenizers of vLLM and text-generation-inference do, with a prefix
offset and a read offset). Only a short window is decoded each time (from the last character boundary, with the
text before it as context), so a long run costs no more per token.

The CLI (``python -m lab demo``) and every widget that shows token text use it, so they all show the same text.
How a token's text is drawn in a widget's stream (:func:`token_display_text`: control characters, special tokens,
empty tokens, line breaks) is here too; the terminal demo draws its rejected drafts with it and prints the other
tokens' text as it is, line breaks included.
"""
from __future__ import annotations

import os
import re

from lab.validation import check_unbounded_ids, is_integer

__all__ = ["Detokenizer", "CONTROL_PICTURES", "show_controls", "SPECIAL_TOKEN_LABELS", "special_token_text",
           "has_special_token", "token_display_text"]

# Format characters that reorder or hide the text around them (the bidirectional overrides, embeddings and
# isolates of "Trojan Source", Boucher & Anderson 2021, and the marks), zero-width ones that make two equal-looking
# tokens differ, and the line and paragraph separators, which break lines where no newline shows. ZWNJ and ZWJ
# (U+200C, U+200D) are left alone: Persian words and emoji sequences need them.
_INVISIBLE = (0x061C, 0x200B, 0x200E, 0x200F, 0x2028, 0x2029, *range(0x202A, 0x202F), 0x2060, *range(0x2066, 0x206A),
              0xFEFF)
CONTROL_PICTURES = ({code: chr(0x2400 + code) for code in range(32) if code not in (9, 10)} | {127: "\u2421"}
                    | {code: "\ufffd" for code in range(0x80, 0xa0)}
                    | {code: f"\u27e8U+{code:04X}\u27e9" for code in _INVISIBLE})
"""``str.translate`` table: each C0 control character but tab and newline to its Unicode control picture (U+2400 +
its code; DEL to U+2421), the C1 controls U+0080–U+009F (which have no pictures; U+009B starts a terminal
escape like ESC [) to U+FFFD, and the invisible format characters that would reorder or hide text (the
bidirectional controls U+202A–U+202E and U+2066–U+2069, the marks U+200E, U+200F, U+061C, the zero-width
U+200B, U+2060, U+FEFF, the separators U+2028, U+2029) to their code point in angle brackets, ``⟨U+202E⟩``."""


def show_controls(text: str) -> str:
    """``text`` with its control characters, tab and newline excepted, shown as their control pictures
    (:data:`CONTROL_PICTURES`: ``"\\x1b"`` → ``"␛"``, ``"\\r"`` → ``"␍"``, ``"\\u202e"`` → ``"⟨U+202E⟩"``): token
    text printed to a terminal or drawn in a page can then neither move the cursor, recolour or reorder the output
    nor vanish."""
    if not isinstance(text, str):  # None raised an AttributeError about translate
        raise TypeError(f"text must be a str, got {type(text).__name__}")
    return text.translate(CONTROL_PICTURES)


# A special token decodes to its literal text, "<|im_start|>", which reads like markup in running text. Chat
# templates and end-of-text markers write theirs <|name|> (ChatML's <|im_start|>, <|im_end|>; GPT-2's and
# SmolLM2's <|endoftext|>), so the text alone tells them apart and no tokenizer is needed where a token is drawn;
# rarer ones without bars (SmolLM2's <filename>) show literally, escaped like any text.
_SPECIAL_TOKEN = re.compile(r"<\|([A-Za-z0-9_.:-]{1,40})\|>")
SPECIAL_TOKEN_LABELS = {"im_start": "start", "im_end": "end", "endoftext": "end of text"}
"""Short names of the common special tokens (``<|name|>`` → ``⟨label⟩``); any other ``<|name|>`` shows as
``⟨name⟩``."""


def special_token_text(text: str) -> str:
    """``text`` (a str) with every special token ``<|name|>`` in it replaced by a short label in angle brackets:
    ``"<|im_start|>"`` → ``"⟨start⟩"``, ``"<|im_end|>"`` → ``"⟨end⟩"``, ``"<|endoftext|>"`` → ``"⟨end of text⟩"``
    (:data:`SPECIAL_TOKEN_LABELS`), any other ``<|name|>`` → ``"⟨name⟩"``; the rest of ``text`` is unchanged. Not
    yet HTML-escaped (the label holds no HTML-special character, the rest may). Raises ``TypeError`` for a
    ``text`` that is not a str."""
    if not isinstance(text, str):
        raise TypeError(f"text must be a str, got {type(text).__name__}")
    return _SPECIAL_TOKEN.sub(lambda m: f"\u27e8{SPECIAL_TOKEN_LABELS.get(m.group(1), m.group(1))}\u27e9", text)


def has_special_token(text) -> bool:
    """Whether ``text`` (a token's text; None: part of a character) holds a special token ``<|name|>``, which the
    viewers show as a label (:func:`special_token_text`) and may style apart."""
    return isinstance(text, str) and _SPECIAL_TOKEN.search(text) is not None


def token_display_text(text, kind=None) -> str:
    """How one token's text appears in the widgets' token streams (``TokenStream``), and a rejected draft's in
    ``python -m lab demo`` too (not yet HTML-escaped); ``kind`` is the token's kind in the stream (``"rejected"``,
    ``"accepted"``, ...; None for any other).

    Spaces stay spaces (the widgets use ``white-space: pre-wrap``); a newline shows as ``↵`` and then breaks the
    line, except in a rejected draft (``kind == "rejected"``), which is not part of the output and must not change
    its layout: there a newline shows as ``↵`` alone and a tab as ``⇥``; other control characters show as their
    control pictures (``\\r`` → ``␍``, :func:`show_controls`); a special token as its label (``⟨end⟩``,
    :func:`special_token_text`); an empty token shows as ``∅``; ``None`` (a token holding only part of a character,
    see :meth:`Detokenizer.push`) shows as nothing. Raises ``TypeError`` for anything else than a str or None."""
    if text is None:
        return ""
    if text == "":
        return "\u2205"
    text = show_controls(text)
    if kind == "rejected":  # a struck-through draft must not break the line nor move the cursor
        return special_token_text(text.replace("\n", "\u21b5").replace("\t", "\u21e5"))
    return special_token_text(text.replace("\n", "\u21b5\n"))


_REPLACEMENT = "\ufffd"
# Characters can straddle token boundaries one after another (CJK text, emoji), so a window may go a few tokens
# without ending on a character boundary; one that goes this many holds invalid bytes that nothing will complete:
# show them (as U+FFFD) rather than let the window, and the cost of decoding it, grow without end.
_MAX_OPEN = 32


class Detokenizer:
    """The text of a growing token sequence, token by token: ``push(id)`` returns the text that token adds.

    ``Detokenizer(tokenizer, ids=())``: ``tokenizer`` is anything with ``decode(list[int]) -> str`` (a
    transformers tokenizer, a :class:`lab.models.ModelPair`); ``ids`` (iterable of ints) are pushed first, e.g. the
    prompt (``TypeError`` for a ``tokenizer`` without ``decode``). The texts pushed so far concatenate to ``text``,
    which equals ``tokenizer.decode(ids)`` whenever the sequence ends on a complete character, for tokenizers whose
    decoding of a sequence extends the decoding of its prefixes, as byte-level BPE without space clean-up does (the
    bundled pair's; with clean-up, a rewritten character can show twice); :meth:`flush` releases an incomplete end.

    A token gets the complete characters it adds; one that adds only part of a character gets ``None`` (nothing to
    show yet), and the token that completes the character carries it. ``fork()`` copies the state cheaply, e.g. to
    decode draft tokens after the accepted prefix without adding them to it; ``texts_after(ids, parents)`` does
    that for a chain or a tree.

    Why not a library streamer: transformers' ``TextStreamer`` holds text back until a space (or a CJK character)
    rather than until a character is complete, and prints rather than returning each token's share; the
    tokenizers library's ``DecodeStream`` works on a Rust ``tokenizers.Tokenizer`` only and cannot be copied
    before tokenizers 0.23 (the course supports 0.22), so it cannot decode drafts that are then thrown away.
    """

    def __init__(self, tokenizer, ids=()):
        if not callable(getattr(tokenizer, "decode", None)):  # None or a model name would fail at the first push
            raise TypeError(f"tokenizer must have decode(list[int]) -> str (a transformers tokenizer or a "
                            f"ModelPair), got {type(tokenizer).__name__} {tokenizer!r:.40}")
        self._tokenizer = tokenizer
        self._window: list = []  # ids from a character boundary on: context (text out), then ids still open
        self._context = 0        # self._window[:self._context] is the context, ending on a character boundary
        self._shown = ""         # the window's text already handed out (context included)
        self.text = ""
        for token in ids:
            self.push(token)

    def push(self, token_id) -> str | None:
        """Append ``token_id`` (an int); returns the text it adds: the characters it completes (``""`` for a
        token that decodes to nothing), or ``None`` when it completes none and the text ends in an incomplete
        character (shown with the token that completes it). Raises ``TypeError`` naming ``token_id`` for anything
        but an integer, ``ValueError`` for a negative one; other errors are the tokenizer's ``decode`` errors."""
        if not is_integer(token_id):
            raise TypeError(f"token_id must be an integer token id, got {type(token_id).__name__} {token_id!r:.40}")
        if token_id < 0:  # some tokenizers decode a negative id as text from the end of their vocabulary
            raise ValueError(f"token_id must be a token id >= 0, got {int(token_id)}")
        window = self._window + [int(token_id)]
        full = str(self._tokenizer.decode(window))
        complete = full.rstrip(_REPLACEMENT)
        if len(complete) < len(self._shown) and full.startswith(self._shown):
            complete = self._shown  # never hold back text already handed out (a shown U+FFFD stays shown)
        if len(window) - self._context >= _MAX_OPEN:
            complete = full
        # Decoding normally extends the text already shown. If the tokenizer rewrote it (space clean-up), what was
        # shown stays and the rewritten text is handed out from where the two differ: nothing is lost, but a
        # character can then appear twice (decode(" '") + decode("s") -> " '" then "'s").
        start = len(self._shown) if complete.startswith(self._shown) else len(
            os.path.commonprefix([self._shown, complete]))
        new = complete[start:]
        self.text += new
        if complete == full:  # a character boundary: the ids since the last one become the next context
            self._window = window[self._context:]
            self._context = len(self._window)
            self._shown = str(self._tokenizer.decode(self._window))
        else:
            self._window = window
            self._shown = self._shown + new if start == len(self._shown) else complete
        if not new and full != complete:
            return None
        return new

    def flush(self) -> str:
        """The text still held back (an incomplete character at the end, shown as U+FFFD), added to ``text``;
        ``""`` if none. Call it when a run ends, so the shown text equals ``tokenizer.decode(ids)``."""
        full = str(self._tokenizer.decode(self._window)) if self._window else ""
        start = len(self._shown) if full.startswith(self._shown) else len(os.path.commonprefix([self._shown, full]))
        rest = full[start:]
        self.text += rest
        self._window, self._context, self._shown = [], 0, ""
        return rest

    def fork(self) -> "Detokenizer":
        """An independent copy of this state (a few ids and the text so far; no decoding)."""
        copy = Detokenizer.__new__(Detokenizer)
        copy._tokenizer, copy._window, copy._context = self._tokenizer, list(self._window), self._context
        copy._shown, copy.text = self._shown, self.text
        return copy

    def texts_after(self, ids, parents=None) -> list:
        """What each of ``ids`` (list of ints) would add after the current sequence, without adding them: one
        ``str`` or ``None`` per id, as :meth:`push` returns.

        ``parents`` (None: a chain, each id follows the one before) is a token tree's parents array, one int per
        id, ``-1`` for a child of the current sequence (see :mod:`lab.trees`): each id is decoded after its
        ancestors. When the current sequence ends inside a character and a first draft breaks it instead of
        completing it, that draft's text leaves out the U+FFFD of the broken bytes: they belong to the sequence
        (the run's own next token completes or breaks them), and a struck-through draft should not show them.
        Raises ``ValueError`` if ``parents`` does not match ``ids`` or names a later node or an id is negative,
        ``TypeError`` naming ``ids`` or ``parents`` for entries that are not integers (``int(1.5)`` would have shown
        token 1's text) or a ``parents`` that is not a sequence."""
        ids = check_unbounded_ids("ids", ids)
        broken = self.fork().flush() if len(self._window) > self._context else ""  # the open bytes, as U+FFFD

        def own(text):  # a first draft's text without the current sequence's broken character
            return text[len(broken):] if broken and text and text.startswith(broken) else text

        if parents is None:
            state = self.fork()
            texts = [state.push(token) for token in ids]
            return [own(texts[0])] + texts[1:] if texts else texts
        if isinstance(parents, (str, bytes)) or not hasattr(parents, "__iter__"):
            raise TypeError(f"parents must be a list of node indices (-1 for a root) or None, got "
                            f"{type(parents).__name__}")
        parents = parents.tolist() if hasattr(parents, "tolist") else list(parents)  # a tensor or array too
        wrong = next((p for p in parents if not is_integer(p)), None)
        if wrong is not None:
            raise TypeError(f"parents must hold integer node indices (-1 for a root), got {type(wrong).__name__} "
                            f"{wrong!r}")
        parents = [int(parent) for parent in parents]
        if len(parents) != len(ids):
            raise ValueError(f"parents has {len(parents)} entries for {len(ids)} ids")
        states, texts = [], []
        for i, (token, parent) in enumerate(zip(ids, parents)):
            if not -1 <= parent < i:
                raise ValueError(f"parents[{i}] = {parent}: a parent must be -1 or an earlier node")
            state = (self if parent < 0 else states[parent]).fork()
            text = state.push(token)
            texts.append(own(text) if parent < 0 else text)
            states.append(state)
        return texts
