"""lab.detok: token text of characters whose UTF-8 bytes span several tokens. The Detokenizer holds a split character
until the token that completes it, so the shown text equals ``tokenizer.decode``.
"""
import pytest

from lab.detok import _MAX_OPEN, Detokenizer
from tests.widgets.split_text import CONTINUATION, FFFD, PROMPT, ByteTokenizer


def test_detokenizer_holds_a_split_character_until_the_token_that_completes_it():
    text = Detokenizer(ByteTokenizer())
    ids = list("a\u00e9\u2014".encode())  # a, é (2 bytes), — (3 bytes)
    assert [text.push(token) for token in ids] == ["a", None, "\u00e9", None, None, "\u2014"]
    assert text.text == "a\u00e9\u2014"
    # Forks decode drafts after the current text without changing it; a tree's nodes follow their ancestors.
    fork = text.fork()
    assert fork.push(0xC3) is None and text.text == "a\u00e9\u2014"
    assert text.texts_after([0xC3, 0xA9, 0xB1], parents=[-1, 0, 0]) == [None, "\u00e9", "\u00f1"]
    assert text.texts_after([0xC3, 0xA9]) == [None, "\u00e9"] and text.text == "a\u00e9\u2014"
    with pytest.raises(ValueError, match="parents"):
        text.texts_after([1, 2], parents=[-1])
    # Invalid bytes are held while the text ends in them and shown, as decode shows them, with the next character;
    # flush() releases what a run ends on, so the text then equals decode.
    bad = Detokenizer(ByteTokenizer(), [0x62])
    assert [bad.push(0xFF) for _ in range(4)] == [None, None, None, None]
    assert bad.push(0x63) == FFFD * 4 + "c" and bad.text == ByteTokenizer().decode([0x62] + [0xFF] * 4 + [0x63])
    cut = Detokenizer(ByteTokenizer(), list("ab\u00e9".encode())[:-1])
    assert cut.text == "ab" and cut.flush() == FFFD and cut.text == ByteTokenizer().decode(list(b"ab\xc3"))
    assert cut.flush() == "" and cut.push(ord("x")) == "x"
    # After this many tokens without a character boundary the window is released (U+FFFD for the open bytes),
    # so a stream of bytes that never completes cannot make every push decode a longer window.
    stuck = Detokenizer(ByteTokenizer())
    assert [stuck.push(0xE4) for _ in range(_MAX_OPEN)][-1] == FFFD * _MAX_OPEN


def test_a_draft_that_breaks_the_open_character_does_not_show_its_replacement():
    """An instructor: `demo` struck through "\ufffd..." when the accepted text ended inside a character and the
    rejected draft did not complete it; the broken bytes are the accepted text's, shown with the run's next token."""
    text = Detokenizer(ByteTokenizer(), list(b"a\xc3"))  # "a" and the first byte of a two-byte character
    assert text.texts_after([ord("x"), ord("y")]) == ["x", "y"]
    assert text.texts_after([ord("x"), 0xA9, ord("z")], parents=[-1, -1, 0]) == ["x", "\u00e9", "z"]
    assert text.texts_after([0xA9]) == ["\u00e9"]  # a draft that completes it carries the whole character
    assert text.text == "a" and text.push(ord("x")) == FFFD + "x"  # the run's own token still shows the break
    whole = Detokenizer(ByteTokenizer(), list(b"ab"))
    assert whole.texts_after([0xFF, ord("c")]) == [None, FFFD + "c"]  # a draft's own bad byte is its own


def test_detokenizer_with_characters_straddling_token_boundaries_one_after_another():
    # "中文字符" as byte-level BPE might cut it: every token but the last ends inside a character, so the sequence
    # never ends on a character boundary until the end; each token still shows the characters it completes.
    text_bytes = "中文字符".encode()
    cuts = [text_bytes[0:2], text_bytes[2:5], text_bytes[5:8], text_bytes[8:11], text_bytes[11:12]]

    class Pieces:
        def decode(self, ids):
            return b"".join(cuts[i] for i in ids).decode("utf-8", errors="replace")

    text = Detokenizer(Pieces())
    assert [text.push(i) for i in range(5)] == [None, "中", "文", "字", "符"]
    assert text.text == "中文字符" and FFFD not in text.text
    fork = Detokenizer(Pieces(), [0, 1])
    assert fork.texts_after([2, 3, 4]) == ["文", "字", "符"] and fork.text == "中"


def test_detokenizer_on_the_bundled_tokenizer_matches_decode(pair):
    ids = pair.encode(PROMPT + CONTINUATION)
    assert any(FFFD in pair.tokenizer.decode([token]) for token in ids)  # one token at a time is broken
    text = Detokenizer(pair.tokenizer)
    pieces = [text.push(token) for token in ids]
    assert None in pieces
    assert "".join(piece or "" for piece in pieces) == text.text == pair.tokenizer.decode(ids) == PROMPT + CONTINUATION


def test_detokenizer_names_a_token_that_is_not_an_integer():
    text = Detokenizer(ByteTokenizer())
    with pytest.raises(TypeError, match="token_id must be an integer token id, got str 'a'"):
        text.push("a")
    assert text.push(0x61) == "a"   # nothing was appended by the refused push


def test_texts_after_refuses_ids_and_parents_that_are_not_integers():
    """int(1.5) showed token 1's text for a float id."""
    text = Detokenizer(ByteTokenizer())
    with pytest.raises(TypeError, match="ids must hold integer token ids, got float 1.5"):
        text.texts_after([0x61, 1.5])
    with pytest.raises(TypeError, match="parents must hold integer node indices"):
        text.texts_after([0x61, 0x62], [-1, 0.5])
    with pytest.raises(TypeError, match="parents must be a list of node indices .* got int"):
        text.texts_after([0x61], 5)
    with pytest.raises(ValueError, match="ids must be token ids \\(integers >= 0\\), got -1"):
        text.texts_after([-1])
    with pytest.raises(ValueError, match="token_id must be a token id >= 0, got -1"):
        text.push(-1)
    assert text.texts_after([0x61, 0x62], [-1, 0]) == ["a", "b"]


def test_show_controls_names_a_value_that_is_not_text():
    from lab.detok import show_controls

    with pytest.raises(TypeError, match="text must be a str, got NoneType"):
        show_controls(None)


@pytest.mark.parametrize("char", ["\u202e", "\u202a", "\u2066", "\u2069", "\u200f", "\u061c", "\u200b", "\ufeff",
                                  "\u2028", "\u2029"])
def test_show_controls_names_characters_that_reorder_or_hide_text(char):
    """A token holding U+202E (right-to-left override) flipped the rest of the line in the widgets and terminal;
    U+200B made two equal-looking tokens differ; U+2028 broke a line with no ↵ to show it."""
    from lab.detok import show_controls

    shown = show_controls(f"a{char}b")
    assert shown == f"a\u27e8U+{ord(char):04X}\u27e9b"
    assert char not in shown


def test_show_controls_keeps_the_joiners_scripts_need():
    from lab.detok import show_controls

    family = "\U0001F468\u200d\U0001F469\u200d\U0001F467"  # an emoji sequence joined by ZWJ
    persian = "\u0645\u06cc\u200c\u062e\u0648\u0627\u0647\u0645"  # ZWNJ inside a word
    assert show_controls(family) == family and show_controls(persian) == persian


def test_detokenizer_needs_something_that_decodes():
    """A tester's Detokenizer(None) was taken and failed at its first push with an AttributeError."""
    for bad in (None, "gpt2"):
        with pytest.raises(TypeError, match=r"tokenizer must have decode\(list\[int\]\) -> str"):
            Detokenizer(bad)


def test_token_display_text_keeps_a_rejected_draft_on_its_line():
    """One rule for the widgets' streams and the terminal demo: a rejected draft's newline and tab are marks, not
    a line break or a jump of the cursor; kept text breaks its line after the mark; special tokens are labels."""
    from lab.detok import token_display_text

    assert token_display_text(".\n\n\treturn", "rejected") == ".\u21b5\u21b5\u21e5return"
    assert token_display_text("a\n\tb") == "a\u21b5\n\tb"
    assert token_display_text("<|im_end|>", "resampled") == "\u27e8end\u27e9"
    assert token_display_text("\x1b[2J", "rejected") == "\u241b[2J"
    assert token_display_text(None) == "" and token_display_text("") == "\u2205"
    with pytest.raises(TypeError, match="text must be a str, got int"):
        token_display_text(3)
