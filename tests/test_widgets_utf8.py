"""Token text of characters whose UTF-8 bytes span several tokens (lab/detok.py, the widgets, the CLI demo).

The bundled pair's tokenizer is byte-level BPE: "é" is two tokens, "—" three. Decoded one token at a time they
would show as U+FFFD; every view must instead show the decoded text, the character on the token completing it.
"""
import html
import re

import pytest

from lab.detok import _MAX_OPEN, Detokenizer
from lab.trace import Generation, StepRecord
from widgets.kv_viewer import KVCacheViewer
from widgets.token_stream import PARTIAL_LABEL, TokenStream, token_labels
from widgets.tree_viewer import TreeViewer

PROMPT = "Café, señor — naïve\n"
CONTINUATION = "ROMEO: ¿Qué? 日本語 — 🎭 fin"
FFFD = "\ufffd"


class ByteTokenizer:
    """One token per UTF-8 byte; decoding replaces incomplete or invalid bytes with U+FFFD, as transformers does."""

    def decode(self, ids):
        return bytes(ids).decode("utf-8", errors="replace")


@pytest.fixture(scope="module")
def pair():
    from lab.models import load_pair

    return load_pair("shakespeare", device="cpu")


def unlabel(label):
    """A slot / node label back to the text it shows (labels make whitespace visible)."""
    return label.replace("\u2423", " ").replace("\u21b5", "\n").replace("\u21e5", "\t").replace(PARTIAL_LABEL, "")


def chain_steps(tokenizer, prompt_ids, generated, wrong):
    """Step records that emit ``generated``: steps accept 2, 0, 3, 1, ... drafts, and each draft ends in the
    rejected tokens ``wrong`` where the accepted text ends on a whole character (elsewhere nothing is rejected:
    ``wrong`` would not continue a split character); the last step's drafts are all accepted (a bonus token)."""
    records, position, sizes = [], 0, [2, 0, 3, 1]
    while position < len(generated):
        accept = min(sizes[len(records) % len(sizes)], len(generated) - position - 1)
        emitted = generated[position: position + accept + 1]
        whole = not tokenizer.decode(prompt_ids + generated[:position + accept]).endswith(FFFD)
        last = position + accept + 1 >= len(generated) or not whole
        drafted = emitted[:accept] if last else emitted[:accept] + wrong
        records.append(StepRecord(index=len(records), position=position, drafted=drafted, num_accepted=accept,
                                  emitted=emitted, last_kind="bonus" if last else "resampled",
                                  cache_before=len(prompt_ids) + position - 1, target_tokens=1 + len(drafted)))
        position += len(emitted)
    return records


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


def test_token_stream_shows_the_decoded_text_of_split_characters(pair):
    tokenizer = pair.tokenizer
    prompt_ids, generated = pair.encode(PROMPT), pair.encode(CONTINUATION)
    wrong = pair.encode("\u00f1")  # a rejected draft that is one character split over two tokens
    assert len(wrong) == 2
    records = chain_steps(pair.tokenizer, prompt_ids, generated, wrong)
    stream = TokenStream(tokenizer, prompt_ids=prompt_ids)
    stream.extend(records)

    tokens = stream.tokens
    # One span per token, in order, with its own kind; only the text changed.
    shown_ids = [t["token_id"] for t in tokens if t["kind"] != "rejected"]
    assert shown_ids == prompt_ids + generated and stream.generated_ids == generated
    assert sum(t["kind"] == "rejected" for t in tokens) == sum(len(r.drafted) - r.num_accepted for r in records) > 4
    prompt_text = "".join(t["text"] for t in tokens if t["kind"] == "prompt")
    accepted_text = "".join(t["text"] for t in tokens if t["kind"] != "rejected")
    assert prompt_text == tokenizer.decode(prompt_ids) == PROMPT
    assert accepted_text == tokenizer.decode(prompt_ids + generated) == PROMPT + CONTINUATION
    # A rejected draft shows what it would have added after the accepted tokens: nothing, then the character.
    rejected = [t["text"] for t in tokens if t["kind"] == "rejected"]
    assert rejected[:2] == ["", "\u00f1"]

    page = stream.html
    assert FFFD not in page and all(FFFD not in span["s"] for span in stream._view.tokens)
    stream_div = re.search(r'<div style="white-space: pre-wrap;[^"]*">(.*?)</div>', page, re.S).group(1)
    spans = re.findall(r"<span [^>]*>(.*?)</span>", stream_div, re.S)
    assert len(spans) == len(tokens)
    shown = [html.unescape(s).replace("\u21b5", "") for s, t in zip(spans, tokens) if t["kind"] != "rejected"]
    assert "".join(shown) == PROMPT + CONTINUATION

    # The detail line and the chart name a partial token's text without U+FFFD.
    partial = next(t["position"] for t in tokens if t["position"] is not None and t["text"] == "")
    stream.select(partial)
    assert FFFD not in stream.detail_text and "part of a character" in stream.detail_text
    assert FFFD not in stream.chart.layout.title.text


def test_token_stream_rejected_draft_completes_the_accepted_partial_character(pair):
    # "é" and "ñ" share their first byte: the draft proposed "é", the target kept the first byte and resampled "ñ".
    e_acute, n_tilde = pair.encode("\u00e9"), pair.encode("\u00f1")
    assert e_acute[0] == n_tilde[0]
    stream = TokenStream(pair.tokenizer, prompt_ids=pair.encode("Se"))
    stream(StepRecord(index=0, position=0, drafted=e_acute + pair.encode("or"), num_accepted=1,
                      emitted=n_tilde, last_kind="resampled"))
    assert [(t["kind"], t["text"]) for t in stream.tokens] == [
        ("prompt", "S"), ("prompt", "e"), ("accepted", ""), ("rejected", "\u00e9"), ("rejected", "or"),
        ("resampled", "\u00f1")]
    assert FFFD not in stream.html and ">\u00e9</span>" in stream.html
    assert "".join(t["text"] for t in stream.tokens if t["kind"] != "rejected") == "Se\u00f1"


def test_token_stream_live_generation_from_a_non_ascii_prompt(pair):
    from lab.decode import generate
    from lab.drafters import DraftModelDrafter

    prompt_ids = pair.encode("Caf\u00e9\n")
    stream = TokenStream(pair.tokenizer, pair.encode("Caf\u00e9\n"))
    gen = generate(pair.target, prompt_ids, drafter=DraftModelDrafter(pair.draft, n_draft=3), max_new_tokens=6,
                   on_step=stream, record_probs=True)
    text = "".join(t["text"] for t in stream.tokens if t["kind"] != "rejected")
    assert text == pair.decode(prompt_ids + gen.tokens) and text.startswith("Caf\u00e9\n")
    assert FFFD not in stream.html and FFFD not in "".join(t["text"] for t in stream.tokens)
    stream.select(0)
    assert FFFD not in "".join(stream.chart.data[0].x)


def test_kv_and_tree_viewers_label_split_characters_in_context(pair):
    prompt_ids, generated = pair.encode(PROMPT), pair.encode(CONTINUATION)
    records = chain_steps(pair.tokenizer, prompt_ids, generated, pair.encode("\u00f1"))

    kv = KVCacheViewer(pair.tokenizer, prompt_ids, max_slots=200).extend(records)
    slots = kv.rows["target"]
    committed = [unlabel(slot["text"]) for slot in slots if slot["kind"] == "committed"]
    assert "".join(committed) == pair.tokenizer.decode(prompt_ids + generated[:len(committed) - len(prompt_ids)])
    assert all(FFFD not in slot["text"] for frame in kv.frames for slot in frame["rows"]["target"])
    assert FFFD not in kv.html

    tree = TreeViewer(pair.tokenizer).extend(records)
    labels = []
    for index, record in enumerate(records):
        tree.show(index)
        assert FFFD not in "".join(tree.node_labels)
        kept = [label for label, status in zip(tree.node_labels, tree.node_status) if status != "rejected"][1:]
        labels += [html.unescape(label) for label in kept]
    assert "".join(unlabel(label) for label in labels) == pair.tokenizer.decode(generated)
    # Tree nodes follow their ancestors: "ñ" split over a node and its child shows on the child.
    assert token_labels(pair.tokenizer, pair.encode("\u00f1") * 2, parents=[-1, 0, -1, 2]) == [
        PARTIAL_LABEL, "\u00f1", PARTIAL_LABEL, "\u00f1"]


def test_cli_demo_prints_split_characters_whole(pair, monkeypatch, capsys):
    import lab.decode
    import lab.models
    from lab import cli

    prompt_ids, generated = pair.encode(PROMPT), pair.encode(CONTINUATION)
    records = chain_steps(pair.tokenizer, prompt_ids, generated, pair.encode("\u00f1"))

    def replay(target, ids, on_step=None, **kwargs):
        for record in records:
            on_step(record)
        stats = {"acceptance_rate": 0.5, "tokens_per_target_call": 2.0, "target_calls": len(records),
                 "new_tokens": len(generated), "tokens_per_second": 1.0}
        return Generation(tokens=list(generated), steps=records, stats=stats)

    monkeypatch.setattr(lab.models, "load_pair", lambda *args, **kwargs: pair)
    monkeypatch.setattr(lab.decode, "generate", replay)
    assert cli.main(["demo", "--prompt", PROMPT, "--color", "never"]) == 0
    out = capsys.readouterr().out
    assert out.startswith(PROMPT + CONTINUATION + "\n\n") and FFFD not in out
    assert cli.main(["demo", "--prompt", PROMPT, "--color", "always"]) == 0
    out = re.sub(r"\x1b\[[0-9;]*m", "", capsys.readouterr().out)
    assert FFFD not in out and "ROM\u00f1E\u00f1O" in out  # the struck-through "ñ" printed whole among the kept text


def test_tree_viewer_decodes_the_first_step_after_the_prompt():
    # The prompt ends inside "é" (bytes C3 A9): the first step's first node completes it.
    prompt = list("a\u00e9".encode())[:-1]
    record = StepRecord(index=0, position=0, drafted=[0xA9, 0x62], num_accepted=2, emitted=[0xA9, 0x62, 0x63],
                        last_kind="bonus", cache_before=len(prompt) - 1)
    with_prompt = TreeViewer(ByteTokenizer(), prompt_ids=prompt).extend([record])
    assert with_prompt.node_ids[0] == 0xC3 and with_prompt.node_status[0] == "root"
    assert with_prompt.node_labels[:3] == [PARTIAL_LABEL, "\u00e9", "b"]   # the root holds half of "é"
    without = TreeViewer(ByteTokenizer()).extend([record])
    assert without.node_ids[0] is None and without.node_labels[0] == "last"
    assert without.node_labels[1] != "\u00e9"                                # decoded alone: no "é"
    # A run from another prompt (its cache held 4 positions) is not decoded after this one; clear() replaces it.
    other = StepRecord(index=0, position=0, drafted=[0x62], num_accepted=1, emitted=[0x62, 0x63], last_kind="bonus",
                       cache_before=4)
    with_prompt.extend([other])
    assert with_prompt.node_ids[0] is None and with_prompt.node_labels[0] == "last"
    with_prompt.clear(prompt_ids=list(b"xyzwv"))
    with_prompt.extend([other])
    assert with_prompt.node_ids[0] == ord("v") and with_prompt.node_labels[:2] == ["v", "b"]
    with pytest.raises(TypeError, match="prompt_ids"):
        TreeViewer(ByteTokenizer(), prompt_ids="a\u00e9")
