"""Special tokens of the real pair's chat template (``<|im_start|>`` = 1, ``<|im_end|>`` = 2) in every view that
shows token text: TokenStream (stream, static HTML, tooltips, chart, detail line), the KV viewer and the tree viewer
show them as short labels (``⟨start⟩``, ``⟨end⟩``, one helper: widgets.token_text.special_token_text) and never put
the literal ``<|…|>`` into HTML unescaped. Records are hand-built on a real chat prompt, encoded with the real
tokenizer (the session's ``smollm2_pair``)."""
from __future__ import annotations

import dataclasses
import html

import pytest
import torch

from lab.trace import StepRecord
from widgets.kv_viewer import KVCacheViewer
from widgets.token_details import quoted
from widgets.token_stream import TokenStream
from widgets.token_text import (SPECIAL_TOKEN_LABELS, has_special_token, special_token_text, token_display_text,
                                token_label_text, token_labels)
from widgets.tree_viewer import TreeViewer

START, END = "\u27e8start\u27e9", "\u27e8end\u27e9"
REQUEST = "Say <b>hi</b>."  # user text with markup of its own: it must come out escaped, not as a tag


# --- the helper, on plain strings -------------------------------------------------------------------------------------
def test_special_token_text_labels_every_bar_token_and_leaves_the_rest():
    assert special_token_text("<|im_start|>") == START
    assert special_token_text("<|im_end|>") == END
    assert special_token_text("<|endoftext|>") == "\u27e8end of text\u27e9"
    assert special_token_text("<|eot_id|>") == "\u27e8eot_id\u27e9"  # an unknown one keeps its name
    assert special_token_text("a<|im_end|>\n<|im_start|>b") == f"a{END}\n{START}b"
    # not special: a bare "<|", a name with a space, SmolLM2's bar-less <filename>, ordinary markup
    for text in ("<|", "|>", "<| im_end |>", "<filename>", "<b>x</b>", "a < b | c > d"):
        assert special_token_text(text) == text and not has_special_token(text)
    assert has_special_token("x<|im_end|>") and not has_special_token(None) and not has_special_token("")
    assert set(SPECIAL_TOKEN_LABELS) >= {"im_start", "im_end", "endoftext"}
    with pytest.raises(TypeError, match="text must be a str"):
        special_token_text(2)


def test_display_and_label_text_use_the_labels_after_making_whitespace_visible():
    assert token_display_text("<|im_end|>\n") == f"{END}\u21b5\n"
    assert token_label_text("<|im_end|>") == END
    assert token_label_text(" <|endoftext|> x") == "\u2423\u27e8end of text\u27e9\u2423x"  # its own spaces stay
    assert quoted("<|im_end|>") == f"{END!r} (special token '<|im_end|>')"
    assert quoted(" hi") == "' hi'"


# --- the real tokenizer -----------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def chat(smollm2_pair):
    """(pair, prompt ids of REQUEST as a user turn, answer ids ending with <|im_end|>, step records of a run that
    drafts a wrong <|im_start|> once and ends on the answer's <|im_end|>)."""
    pair = smollm2_pair
    prompt = pair.encode_chat(REQUEST)
    answer = pair.encode("Hi there!") + [pair.eos_token_id]
    assert pair.eos_token_id == 2 and prompt.count(1) == 3 and prompt.count(2) == 2  # the template as DESIGN says
    base = len(prompt) - 1
    records = [
        StepRecord(index=0, position=0, drafted=answer[:2] + [1], num_accepted=2, emitted=answer[:3],
                   last_kind="resampled", cache_before=base, target_tokens=4),
        StepRecord(index=1, position=3, drafted=answer[3:], num_accepted=1, emitted=answer[3:], last_kind="bonus",
                   cache_before=base + 3, target_tokens=2),
    ]
    return pair, prompt, answer, records


def test_the_tokenizer_decodes_the_markers_literally(chat):
    pair, prompt, _, _ = chat
    texts = token_labels(pair.tokenizer, prompt)
    assert texts[0] == START and texts.count(START) == 3 and texts.count(END) == 2
    assert not any("<|" in text for text in texts)


def test_token_stream_shows_badges_and_escapes_everything(chat):
    pair, prompt, answer, records = chat
    stream = TokenStream(pair.tokenizer, prompt_ids=prompt).extend(records)
    # kernel-side tokens keep the literal text (data); what is drawn is the label
    assert stream.tokens[0]["text"] == "<|im_start|>" and stream.tokens[-1]["text"] == "<|im_end|>"
    payload = stream._view.tokens + stream._view.tail
    special = [item for item in payload if item["x"]]
    assert [item["s"] for item in special] == [START, END, START, END, START, START, END]  # rejected draft included
    assert special[-2]["k"] == "rejected" and special[-1]["k"] == "accepted"
    assert special[-1]["t"].endswith("\u00b7 <|im_end|>")  # the tooltip names the token itself
    assert all(not item["x"] and "\u27e8" not in item["s"] for item in payload if item not in special)
    page = stream.html
    assert "<|" not in page and "|>" not in page  # not even escaped in the text: only in the tooltips
    assert page.count(f">{END}</span>") == 3 and page.count(f">{START}</span>") == 4
    assert page.count("sdl-special") == 7 and page.count('title="accepted draft \u00b7 id 2 \u00b7 step 1 \u00b7 '
                                                         '&lt;|im_end|&gt;"') == 1
    assert "<b>" not in page and html.escape(" <") in page  # the user's "<b>" stays text


def test_token_stream_chart_and_detail_line_name_the_end_token(chat):
    pair, prompt, answer, records = chat
    probs = torch.zeros(2, len(pair.tokenizer))
    probs[:, 2], probs[:, 1] = 0.75, 0.25
    last = dataclasses.replace(records[1], target_probs=probs, draft_probs=probs[:1].clone())
    stream = TokenStream(pair.tokenizer, prompt_ids=prompt).extend([records[0], last])
    stream.select(-1)
    assert stream.selection["token_id"] == 2 and stream.selection["text"] == "<|im_end|>"
    assert stream.chart.layout.title.text == f"position 3: {END} (accepted)"
    assert list(stream.chart.data[0].x)[:2] == [END, START]
    assert f"{END!r} (special token '<|im_end|>')" in stream.detail_text
    shown = stream._detail_widget.value
    assert "<|im_end|>" not in shown and "&lt;|im_end|&gt;" in shown


def test_kv_viewer_labels_slots_readably(chat):
    pair, prompt, answer, records = chat
    viewer = KVCacheViewer(pair.tokenizer, prompt_ids=prompt, max_slots=80).extend(records)
    target = viewer.rows["target"]
    texts = [slot["text"] for slot in target]
    assert texts[0] == START and texts.count(START) == 3 and texts.count(END) == 3  # the prompt's two, the answer's
    assert texts[-1] == END and target[-1]["token_id"] == 2 and target[-1]["kind"] == "kept"  # written last
    viewer.show(1)  # step 0's commit frame: the rejected <|im_start|> draft is discarded
    assert [s["text"] for s in viewer.rows["target"] if s["kind"] == "discarded"] == [START]
    for frame in range(len(viewer.frames)):
        viewer.show(frame)
        assert "<|" not in viewer.html and "|>" not in viewer.html


def test_tree_viewer_labels_nodes_and_mask_readably(chat):
    pair, prompt, answer, records = chat
    viewer = TreeViewer(pair.tokenizer, prompt_ids=prompt).extend(records)
    viewer.show(0)
    assert viewer.node_labels[0] == "\u21b5"  # the root: the prompt's last token, the newline after "assistant"
    assert viewer.node_labels[3] == START and viewer.node_status[3] == "rejected"
    viewer.show(1)
    assert viewer.node_labels[-1] == END and viewer.node_ids[-1] == 2
    drawn = [text for trace in viewer.tree_figure.data[3:] for text in (trace.text or ())]  # the marker traces
    assert END in drawn and START not in drawn
    assert all("<|" not in label for label in viewer.node_labels + list(viewer.mask_figure.layout.xaxis.ticktext))


def test_token_text_shows_an_override_instead_of_obeying_it():
    """Both the stream and the labels name U+202E rather than letting it reverse the text after it."""
    assert token_display_text("a\u202eb") == "a\u27e8U+202E\u27e9b"
    assert token_label_text(" \u200b") == "\u2423\u27e8U+200B\u27e9"
