"""TokenStream (widgets/token_stream.py): feed it step records, hand-built or from real runs, and check what it would
show.

Under nbval widget cells pass vacuously, so these tests are where the widget's behaviour is asserted: the kinds and
order of the shown tokens, HTML escaping, colours, the stats line, the probability chart (residuals computed by
hand), token trees drawn as chains, characters split over several tokens, a widget reused for another run, its
arguments, and the browser module (run under node with a minimal fake DOM, when node is installed). Real runs use
the tiny conftest models or the bundled pair at a few dozen tokens.
"""
import html
import json
import re
import shutil
import subprocess

import numpy as np
import plotly.graph_objects as go
import pytest
import torch

from lab.decode import generate
from lab.trace import StepRecord
from tests.widgets.split_text import CONTINUATION, FFFD, PROMPT, ByteTokenizer, chain_steps
from widgets.kv_viewer import KVCacheViewer
from widgets.style import BONUS_COLOR, RESAMPLED_COLOR, tint
from widgets.token_stream import TAIL_TOKENS, VIEW_CSS, TokenStream
from widgets.token_text import token_display_text, token_label_text

SCRIPT = "<script>alert(1)</script>"
VOCAB = {0: SCRIPT, 1: " the", 2: " cat", 3: " sat", 4: "\n", 5: " on", 6: " &", 7: " mat"}
HTML_VOCAB = ["<b>x</b>", " the", " cat", " sat"]


class FakeTokenizer:
    """Just what the widget needs: ``decode(list[int]) -> str``."""

    def decode(self, ids):
        return "".join(VOCAB[token] for token in ids)


class HtmlTokenizer:
    def decode(self, ids):
        return "".join(HTML_VOCAB[i] for i in ids)


def step(index, drafted, num_accepted, emitted, last_kind, **fields):
    return StepRecord(index=index, position=fields.pop("position", 0), drafted=drafted, num_accepted=num_accepted,
                      emitted=emitted, last_kind=last_kind, **fields)


def wire(stream):
    """Every token the browser view holds, in order: its `tokens`, then its `tail`."""
    return stream._view.tokens + stream._view.tail


def kinds_and_ids(stream):
    return [(token["kind"], token["token_id"]) for token in stream.tokens]


def shown_text(stream):
    return "".join(t["text"] for t in stream.tokens if t["kind"] != "rejected")


@pytest.fixture
def three_steps():
    """A rejection step, a full-acceptance step ending in a bonus token, and an empty-draft step."""
    stream = TokenStream(FakeTokenizer(), prompt_ids=torch.tensor([[1, 2]]))
    stream(step(0, [3, 5, 1], 1, [3, 6], "resampled", position=0, draft_ms=2.0, verify_ms=3.0, draft_calls=3))
    stream.on_step(step(1, [2, 7], 2, [2, 7, 4], "bonus", position=2, draft_ms=1.5, verify_ms=3.5, draft_calls=2))
    stream(step(2, [], 0, [5], "bonus", position=5, draft_ms=0.0, verify_ms=2.0, draft_calls=0))
    return stream


@pytest.fixture(scope="module")
def medusa(pair):
    from lab.registry import make_drafter

    return make_drafter("medusa", pair, 4)


# --- hand-built records -----------------------------------------------------------------------------------------------


def test_kinds_and_order_of_shown_tokens(three_steps):
    assert kinds_and_ids(three_steps) == [
        ("prompt", 1), ("prompt", 2),
        ("accepted", 3), ("rejected", 5), ("rejected", 1), ("resampled", 6),  # rejected drafts in place
        ("accepted", 2), ("accepted", 7), ("bonus", 4),                        # full acceptance → bonus
        ("target", 5),                                              # no draft: the target's token, not a bonus
    ]
    generated = [token for token in three_steps.tokens if token["kind"] != "prompt"]
    assert [token["position"] for token in generated] == [0, 1, 2, 1, 2, 3, 4, 5]
    assert [token["step"] for token in generated] == [0, 0, 0, 0, 1, 1, 1, 2]
    assert [token["text"] for token in three_steps.tokens[:3]] == [" the", " cat", " sat"]
    assert three_steps.generated_ids == [3, 6, 2, 7, 4, 5]
    assert len(three_steps.steps) == 3


def test_browser_payload_matches_and_rejected_drafts_select_the_lost_position(three_steps):
    payload = wire(three_steps)
    assert [(item["k"], item["i"]) for item in payload] == kinds_and_ids(three_steps)
    # Prompt tokens are not selectable; both rejected drafts of step 0 select position 1 (where ' on' lost).
    assert [item["p"] for item in payload] == [-1, -1, 0, 1, 1, 1, 2, 3, 4, 5]
    assert [item["n"] for item in payload] == [-1, -1, 0, 0, 0, 0, 1, 1, 1, 2]
    assert payload[8]["s"] == "\u21b5\n"  # a newline token shows a visible mark, then breaks the line


def test_stats_by_hand(three_steps):
    stats = three_steps.stats
    assert stats["steps"] == stats["target_calls"] == 3
    assert (stats["drafted"], stats["accepted"], stats["rejected"], stats["emitted"]) == (5, 3, 2, 6)
    assert stats["draft_calls"] == 5
    assert stats["acceptance_rate"] == pytest.approx(3 / 5)
    assert stats["tokens_per_target_call"] == pytest.approx(6 / 3)
    assert (stats["draft_ms"], stats["verify_ms"]) == (3.5, 8.5)
    assert stats["tokens_per_second"] == pytest.approx(6 / 0.012)  # 6 tokens in 12 ms of draft + verify time
    assert three_steps.stats_text == ("3 steps \u00b7 acceptance rate 0.60 (3 of 5 drafts accepted) \u00b7 2.00 "
                                      "tokens per target call \u00b7 500 tokens/s (draft + verify time)")
    assert three_steps.stats_text in three_steps._stats_widget.value


def test_stats_before_any_step_and_without_drafts():
    stream = TokenStream(FakeTokenizer())
    assert stream.stats_text == "waiting for the first step"
    assert stream.stats["acceptance_rate"] is None and stream.stats["tokens_per_second"] is None
    stream(step(0, [], 0, [1], "bonus"))
    assert stream.stats["acceptance_rate"] is None
    assert stream.stats_text.startswith("1 step \u00b7 acceptance rate n/a (nothing drafted) \u00b7 1.00 tokens per")
    assert "\u2013 tokens/s" in stream.stats_text  # no timing recorded


def prefill(first, prompt_length, **fields):
    """A prefill record as lab.decode.generate makes it: the whole prompt through the target, its first token."""
    return step(0, [], 0, [first], "bonus", target_tokens=prompt_length, cache_before=0, prefill=True, **fields)


def test_the_prefill_shows_its_token_as_the_targets_own_and_is_no_decode_step():
    stream = TokenStream(FakeTokenizer(), prompt_ids=[1, 2])
    stream(prefill(3, 2))
    assert kinds_and_ids(stream) == [("prompt", 1), ("prompt", 2), ("target", 3)]
    assert [t["text"] for t in stream.tokens] == [" the", " cat", " sat"]  # decoded after the prompt
    assert wire(stream)[-1]["t"] == "target's token, nothing drafted \u00b7 id 3 \u00b7 step 0 (prefill)"
    stats = stream.stats
    assert (stats["steps"], stats["target_calls"], stats["emitted"], stats["drafted"]) == (0, 0, 1, 0)
    assert stats["tokens_per_target_call"] is None and stats["tokens_per_second"] is None  # no decode time yet
    assert stream.stats_text == ("prefill \u00b7 acceptance rate n/a (nothing drafted) \u00b7 \u2013 tokens per target "
                                 "call \u00b7 \u2013 tokens/s (draft + verify time)")
    stream.select(0)
    assert stream.detail_text == ("Position 0 (step 0): the first new token ' sat', the target's own: the prefill, "
                                  "its forward over the whole prompt, gives it from the prompt's last position, "
                                  "before anything is drafted. Note: probabilities were not recorded: call "
                                  "generate(..., record_probs=True).")
    # the first decode step feeds that token (cache_before = the prompt's length) and drafts after it
    stream(step(1, [5, 1], 1, [5, 7], "resampled", position=1, cache_before=2, target_tokens=3, draft_ms=2.0,
                verify_ms=2.0, draft_calls=2))
    assert kinds_and_ids(stream)[2:] == [("target", 3), ("accepted", 5), ("rejected", 1), ("resampled", 7)]
    stats = stream.stats
    assert (stats["steps"], stats["emitted"], stats["drafted"], stats["accepted"]) == (1, 3, 2, 1)
    assert stats["tokens_per_target_call"] == 2.0  # the decode step's 2 tokens; the prefill's is not one of them
    assert (stats["draft_ms"], stats["verify_ms"]) == (2.0, 2.0)  # the decode step's: the prefill's is prefill_ms
    assert stream.stats_text.startswith("prefill + 1 step \u00b7 acceptance rate 0.50 (1 of 2 drafts accepted) "
                                        "\u00b7 2.00 tokens per target call \u00b7 500 tokens/s")


def test_the_prefills_length_tells_which_prompt_a_run_had():
    stream = TokenStream(FakeTokenizer(), prompt_ids=[1, 2])
    stream(prefill(3, 5))  # the stored prompt is the last 2 of 5 tokens: shown
    assert kinds_and_ids(stream) == [("prompt", 1), ("prompt", 2), ("target", 3)]
    stream(prefill(3, 6))  # another length than the first run shown with it: another prompt
    assert kinds_and_ids(stream) == [("target", 3)]
    stream(prefill(5, 5))  # back on the first run's prompt
    assert kinds_and_ids(stream) == [("prompt", 1), ("prompt", 2), ("target", 5)]
    stream.reset()
    stream(prefill(3, 1))  # shorter than the stored prompt: not this prompt
    assert kinds_and_ids(stream) == [("target", 3)]


def test_html_is_escaped():
    stream = TokenStream(FakeTokenizer(), prompt_ids=[0, 1])
    stream(step(0, [0], 0, [6], "resampled"))
    page = stream.html
    assert "<script" not in page.lower()
    assert page.count("&lt;script&gt;alert(1)&lt;/script&gt;") == 2  # once in the prompt, once struck through
    assert "&lt;/script&gt;" in page
    assert " &amp;</span>" in page and " &</span>" not in page
    assert stream._repr_html_() == page
    assert "line-through" in page
    # The browser view gets raw text and puts it in the page with textContent (see the node test below).
    assert wire(stream)[0]["s"] == SCRIPT


def test_display_and_label_text():
    assert token_display_text("") == "\u2205"
    assert token_display_text(" a\nb\r") == " a\u21b5\nb\u240d"
    assert token_label_text(" the\n\t") == "\u2423the\u21b5\u21e5"
    assert token_label_text("\x00") == "\u2400"
    assert TokenStream(None, prompt_ids=[17]).tokens[0]["text"] == "\u27e817\u27e9"  # no tokenizer: ids


def test_a_rejected_newline_draft_shows_its_mark_without_breaking_the_line():
    """A struck-through draft is not part of the output: its newline used to break the shown line where the output
    has none."""
    assert token_display_text("a\nb", "rejected") == "a\u21b5b"
    assert token_display_text("a\nb", "accepted") == token_display_text("a\nb") == "a\u21b5\nb"
    stream = TokenStream(FakeTokenizer(), prompt_ids=[1])
    stream(step(0, [4, 5], 0, [3], "resampled", position=0))  # "\n" and " on" drafted, both rejected
    stream(step(1, [4], 1, [4, 7], "bonus", position=1))  # "\n" drafted and accepted
    payload = [(item["k"], item["s"]) for item in wire(stream)]
    assert payload == [("prompt", " the"), ("rejected", "\u21b5"), ("rejected", " on"), ("resampled", " sat"),
                       ("accepted", "\u21b5\n"), ("bonus", " mat")]
    spans = re.findall(r'<span class="sdl-(\w+)[^"]*"[^>]*>([^<]*)</span>', stream.html)[-6:]
    assert spans == payload  # the static HTML shows the same
    assert stream.html.count("\n") == 1


def residual_step():
    """V = 4. Position 0: ' the' accepted; position 1: draft ' cat' rejected, target resampled ' sat'."""
    target_probs = torch.tensor([[0.1, 0.6, 0.2, 0.1],
                                 [0.4, 0.1, 0.2, 0.3],
                                 [0.25, 0.25, 0.25, 0.25]])
    draft_probs = torch.tensor([[0.1, 0.5, 0.3, 0.1],
                                [0.1, 0.1, 0.7, 0.1]])
    return step(0, [1, 2], 1, [1, 3], "resampled", target_probs=target_probs, draft_probs=draft_probs)


def bar(stream, name):
    (trace,) = [trace for trace in stream.chart.data if trace.name == name]
    return trace


def test_selecting_the_resampled_token_plots_target_draft_and_residual():
    stream = TokenStream(FakeTokenizer(), top_k=4)
    stream(residual_step())
    assert stream.selected is None and stream.selection is None
    stream.select(1)
    assert stream.selected == 1 and stream._view.selected == 1
    # Residual at position 1: max(0, target - draft) = [0.3, 0, 0, 0.2], normalised by 0.5 → [0.6, 0, 0, 0.4].
    # Bars are ordered by target probability: tokens 0 (0.4), 3 (0.3), 2 (0.2), 1 (0.1).
    probs = stream.selection["probs"]
    assert probs["token_ids"] == [0, 3, 2, 1]
    assert probs["target"] == pytest.approx([0.4, 0.3, 0.2, 0.1])
    assert probs["draft"] == pytest.approx([0.1, 0.1, 0.7, 0.1])
    assert probs["residual"] == pytest.approx([0.6, 0.4, 0.0, 0.0], abs=1e-6)
    labels = ("&lt;script&gt;alert(1)&lt;/script&gt;", "\u2423sat", "\u2423cat", "\u2423the")
    for name, values in (("target", probs["target"]), ("draft", probs["draft"]), ("residual", probs["residual"])):
        assert bar(stream, name).x == labels
        assert bar(stream, name).y == pytest.approx(values, abs=1e-6)
        assert bar(stream, name).visible is True
    assert stream.selection["kind"] == "resampled" and stream.selection["drafted_id"] == 2
    assert stream.detail_text.startswith("Position 1 (step 0): the draft proposed ' cat' (target 0.200, draft "
                                         "0.700); the target rejected it and put ' sat' (target 0.300, residual "
                                         "0.400) in its place.")
    assert stream.chart.layout.title.text == "position 1: \u2423sat (resampled)"


def test_selecting_an_accepted_token_and_selection_from_the_browser():
    stream = TokenStream(FakeTokenizer(), top_k=4)
    stream(residual_step())
    stream._view.selected = 0  # what a click in the browser does
    assert stream.selected == 0 and stream.selection["kind"] == "accepted"
    probs = stream.selection["probs"]
    assert probs["token_ids"] == [1, 2, 0, 3]  # target 0.6, 0.2, then the 0.1 tie broken by draft, then id
    assert probs["residual"] == pytest.approx([1.0, 0.0, 0.0, 0.0])  # max(0, t - d) = [0, 0.1, 0, 0]
    assert stream.detail_text == ("Position 0 (step 0): the draft proposed ' the' (target 0.600, draft 0.500) and "
                                  "the target accepted it.")
    stream.select(None)
    assert stream.selected is None and stream.selection is None
    assert all(trace.visible is False and len(trace.y) == 0 for trace in stream.chart.data)


def test_bonus_token_shows_the_target_only():
    target_probs = torch.tensor([[0.1, 0.6, 0.2, 0.1], [0.7, 0.1, 0.15, 0.05]])
    stream = TokenStream(FakeTokenizer(), top_k=2)
    stream(step(0, [1], 1, [1, 0], "bonus", target_probs=target_probs, draft_probs=torch.full((1, 4), 0.25)))
    stream.select(-1)
    assert stream.selected == 1 and stream.selection["kind"] == "bonus"
    assert stream.selection["probs"]["token_ids"] == [0, 2]
    assert bar(stream, "target").y == pytest.approx([0.7, 0.15])
    assert bar(stream, "draft").visible is False and len(bar(stream, "draft").y) == 0
    assert bar(stream, "residual").visible is False
    assert stream.selection["probs"]["draft"] is None and stream.selection["drafted_id"] is None
    assert "every draft of this step (1) was accepted" in stream.detail_text
    assert "'<script>alert(1)</script>' (target 0.700)" in stream.detail_text  # plain text; escaped on display
    assert "&lt;script&gt;" in stream._detail_widget.value and "<script" not in stream._detail_widget.value


def test_deterministic_drafter_is_one_hot_and_top_k_union():
    # V = 5, draft_probs None: the draft is one-hot on token 2. Residual = target without token 2, renormalised:
    # [0.1, 0.2, 0, 0.05, 0.15] / 0.5 = [0.2, 0.4, 0, 0.1, 0.3].
    target_probs = torch.tensor([[0.1, 0.2, 0.5, 0.05, 0.15], [0.2] * 5])
    stream = TokenStream(FakeTokenizer(), top_k=1)
    stream(step(0, [2], 0, [4], "resampled", target_probs=target_probs, draft_probs=None))
    stream.select(0)
    probs = stream.selection["probs"]
    # top-1 of target (2), draft (2), residual (1), plus the emitted token 4 and the drafted token 2.
    assert probs["token_ids"] == [2, 1, 4]
    assert probs["target"] == pytest.approx([0.5, 0.2, 0.15])
    assert probs["draft"] == pytest.approx([1.0, 0.0, 0.0])
    assert probs["residual"] == pytest.approx([0.0, 0.4, 0.3])
    assert "one-hot" in stream.selection["note"]


def test_draft_probs_of_another_vocabulary_show_the_target_only():
    target_probs = torch.tensor([[0.1, 0.6, 0.2, 0.1], [0.7, 0.1, 0.15, 0.05]])
    stream = TokenStream(FakeTokenizer(), top_k=4)
    stream(step(0, [1], 0, [0], "resampled", target_probs=target_probs, draft_probs=torch.full((1, 5), 0.2)))
    stream.select(0)
    assert stream.selection["probs"]["target"] == pytest.approx([0.6, 0.2, 0.1, 0.1])
    assert stream.selection["probs"]["draft"] is None and stream.selection["probs"]["residual"] is None
    assert "draft_probs has shape (1, 5)" in stream.detail_text


def test_step_without_probabilities_explains_itself(three_steps):
    three_steps.select(0)
    assert three_steps.selection["probs"] is None
    assert "record_probs=True" in three_steps.detail_text
    assert all(trace.visible is False for trace in three_steps.chart.data)
    count = len(three_steps.generated_ids)
    with pytest.raises(IndexError, match=rf"must be in \[-{count}, {count}\) \({count} tokens generated.*got 6"):
        three_steps.select(6)
    with pytest.raises(TypeError, match=r"position must be an int .* or None to clear, got str '1'"):
        three_steps.select("1")


def test_selecting_before_anything_was_generated_says_so():
    with pytest.raises(IndexError, match="no token has been generated yet"):
        TokenStream(FakeTokenizer()).select(0)


def test_truncated_inside_the_accepted_drafts():
    # max_new_tokens cut the step after 2 of 3 accepted drafts: no rejected drafts, no target token shown.
    stream = TokenStream(FakeTokenizer())
    stream(step(0, [1, 2, 3], 3, [1, 2], "bonus", truncated=True))
    assert kinds_and_ids(stream) == [("accepted", 1), ("accepted", 2)]
    assert stream.stats["emitted"] == 2 and stream.stats["acceptance_rate"] == 1.0
    # the rate counts the third accepted draft, which the stream does not show: the stats line says so
    assert ("acceptance rate 1.00 (3 of 3 drafts accepted, 1 accepted after the output's end, not shown)"
            in stream.stats_text)


def test_truncated_at_the_target_token():
    # The cut fell exactly on the target's token: the rejected drafts still show, but select nothing.
    stream = TokenStream(FakeTokenizer(), top_k=4)
    record = residual_step()
    record.emitted, record.truncated = [1], True
    stream(record)
    assert kinds_and_ids(stream) == [("accepted", 1), ("rejected", 2)]
    assert [item["p"] for item in wire(stream)] == [0, -1]
    stream.select(0)
    assert stream.selection["truncated"] is True
    assert "cut short" in stream.detail_text
    with pytest.raises(IndexError):
        stream.select(1)


def test_the_chart_is_built_on_the_first_selection():
    """No FigureWidget exists (none is sent to the browser) until a token is selected or `chart` is read: a page
    whose charts all start at load can miss anywidget's 2 s start-up limit on a slow machine."""
    stream = TokenStream(FakeTokenizer(), top_k=4)
    stream(residual_step())
    stream.select(None)
    assert stream._chart is None and not any(isinstance(child, go.FigureWidget) for child in stream.children)
    stream._view.selected = 1  # a click
    assert stream.children[-1] is stream.chart  # built, shown last, drawn with the selection made
    assert stream.chart.layout.title.text == "position 1: \u2423sat (resampled)"
    assert bar(stream, "residual").y == pytest.approx([0.6, 0.4, 0.0, 0.0], abs=1e-6)
    stream.reset()
    assert stream.chart.layout.title.text == "select a generated token" and len(stream.children) == 5
    later = TokenStream(FakeTokenizer(), top_k=4)
    later(residual_step())
    later.select(0)
    figure = later.chart
    later.select(1)  # the same figure is redrawn
    assert later.chart is figure and figure.layout.title.text.startswith("position 1:")


def test_the_chart_widget_starts_with_the_selection_drawn(monkeypatch):
    """The figure is drawn before it becomes a widget: the state the browser gets first already shows the click, so
    a chart model that starts late still shows it."""
    import widgets.token_stream as module

    first = []
    real = module.go.FigureWidget

    def recording(figure):
        first.append((figure.layout.title.text, figure.data[0].visible))
        return real(figure)

    monkeypatch.setattr(module.go, "FigureWidget", recording)
    stream = TokenStream(FakeTokenizer(), top_k=4)
    stream(residual_step())
    stream.select(1)
    assert first == [("position 1: \u2423sat (resampled)", True)]


def test_reset_and_a_new_run_clear_the_generated_tokens(three_steps):
    three_steps.select(1)
    three_steps.reset()
    assert kinds_and_ids(three_steps) == [("prompt", 1), ("prompt", 2)]
    assert three_steps.stats["steps"] == 0 and three_steps.generated_ids == []
    assert three_steps.selected is None and three_steps.selection is None
    assert all(len(trace.x) == 0 for trace in three_steps.chart.data)
    assert [item["i"] for item in wire(three_steps)] == [1, 2]
    three_steps.reset(prompt_ids=[7])
    assert kinds_and_ids(three_steps) == [("prompt", 7)]
    # A record with index 0 after earlier steps is a new run: the old tokens go, the prompt stays.
    three_steps(step(0, [], 0, [3], "bonus"))
    three_steps(step(0, [1], 1, [1, 2], "bonus"))
    assert kinds_and_ids(three_steps) == [("prompt", 7), ("accepted", 1), ("bonus", 2)]
    assert three_steps.stats["steps"] == 1


def test_extend_replays_a_finished_run(three_steps):
    replay = TokenStream(FakeTokenizer(), prompt_ids=[1, 2]).extend(three_steps.steps)
    assert replay.tokens == three_steps.tokens and replay.stats == three_steps.stats


@pytest.mark.parametrize("records", [None, 3, [5, 6]])
def test_extend_names_what_is_not_step_records(records):
    """A learner passed None and saw Python's "'NoneType' object is not iterable"; TreeViewer.extend named it."""
    stream = TokenStream(FakeTokenizer(), prompt_ids=[1, 2])
    before = list(stream.tokens)
    with pytest.raises(TypeError, match="TokenStream.extend"):
        stream.extend(records)
    assert stream.tokens == before and stream.stats["target_calls"] == 0


@pytest.mark.parametrize("fields, record_message, stream_message", [
    (dict(drafted=[1], num_accepted=2, emitted=[1, 2], last_kind="bonus"), "num_accepted", "num_accepted"),
    (dict(drafted=[1, 2], num_accepted=1, emitted=[1, 3, 4], last_kind="resampled"), "at most", "at most"),
    (dict(drafted=[1, 2], num_accepted=1, emitted=[2, 3], last_kind="resampled"), "must start with the accepted",
     "must start with the accepted drafts"),
    (dict(drafted=[1, 2], num_accepted=1, emitted=[1, 3], last_kind="bonus"), "'resampled'", "'resampled'"),
    (dict(drafted=[1], num_accepted=1, emitted=[1, 3], last_kind="resampled"), "'bonus'", "'bonus'"),
    (dict(drafted=[], num_accepted=0, emitted=[3], last_kind="extra"), "last_kind", "last_kind"),
])
def test_contradictory_records_are_rejected(fields, record_message, stream_message):
    """A contradictory record is refused when it is built (lab.trace.StepRecord); one changed after it was built is
    checked again by the widget (lab.trace.check_step_record, the same rules)."""
    with pytest.raises(ValueError, match=record_message):
        StepRecord(index=0, position=0, **fields)
    record = step(0, [], 0, [3], "bonus")
    for name, value in fields.items():
        setattr(record, name, value)
    stream = TokenStream(FakeTokenizer())
    with pytest.raises(ValueError, match=f"^TokenStream.on_step: step 0: .*{stream_message}"):
        stream(record)
    assert stream.tokens == []


def test_constructor_checks_top_k():
    with pytest.raises(ValueError, match="top_k"):
        TokenStream(FakeTokenizer(), top_k=0)


# the chart title names the selected token: its text is escaped there too (plotly renders some tags).
def test_chart_title_escapes_the_token_text():
    stream = TokenStream(HtmlTokenizer())
    stream(step(0, [1], 0, [0], "resampled"))
    stream.select(0)
    title = stream.chart.layout.title.text
    assert title == "position 0: &lt;b&gt;x&lt;/b&gt; (resampled)", title


# a resampled token wears the resampled (residual) colour, a bonus token the bonus (target) colour.
def test_resampled_and_bonus_tokens_have_their_own_colours():
    stream = TokenStream(HtmlTokenizer())
    stream(step(0, [1], 0, [2], "resampled"))
    stream(step(1, [3], 1, [3, 1], "bonus"))
    spans = {kind: part for part in stream.html.split("<span")[1:]
             for kind in ("resampled", "bonus") if part.startswith(f' class="sdl-{kind}"')}
    assert f"background: {tint(RESAMPLED_COLOR)}" in spans["resampled"]
    assert f"border-bottom: 2px solid {RESAMPLED_COLOR}" in spans["resampled"]
    assert BONUS_COLOR not in spans["resampled"]
    assert f"border-bottom: 2px solid {BONUS_COLOR}" in spans["bonus"] and RESAMPLED_COLOR not in spans["bonus"]
    resampled_rule = next(line for line in VIEW_CSS.splitlines() if line.startswith(".sdl-resampled"))
    assert RESAMPLED_COLOR in resampled_rule and BONUS_COLOR not in resampled_rule


# tokens per target call counts what was emitted, also when EOS / max_new_tokens cut a step short.
def test_stats_count_emitted_tokens_of_a_truncated_step():
    stream = TokenStream(HtmlTokenizer())
    stream(step(0, [1, 2, 3], 1, [1, 0], "resampled"))
    stream(step(1, [1, 2, 3], 3, [1, 2], "bonus", truncated=True))   # 3 accepted, only 2 made it out
    stats = stream.stats
    assert stats["emitted"] == 4 and stats["accepted"] == 4 and stats["steps"] == 2
    assert stats["tokens_per_target_call"] == 2.0                        # 4 emitted / 2 calls, not (4 + 2) / 2
    assert "2.00 tokens per target call" in stream.stats_text


# --- the browser module under node ------------------------------------------------------------------------------------


# The browser module, run under node with just enough fake DOM: it must render every token with textContent (the
# fake element throws if innerHTML is set), mark the selected token, and report a click as `selected`.
NODE_HARNESS = r"""
import { readFileSync } from "node:fs";
class FakeElement {
  constructor(tag) {
    Object.assign(this, { tagName: tag, children: [], className: "", textContent: "", title: "", dataset: {},
                          attributes: {}, listeners: {}, parent: null, tabIndex: -1 });
    const self = this;
    this.classList = { add(name) { self.className += " " + name; } };
  }
  set innerHTML(value) { throw new Error("innerHTML must not be used"); }
  appendChild(child) { child.parent = this; this.children.push(child); return child; }
  replaceChildren(...children) { this.children = []; children.forEach((child) => this.appendChild(child)); }
  remove() { this.parent.children.splice(this.parent.children.indexOf(this), 1); this.parent = null; }
  setAttribute(name, value) { this.attributes[name] = String(value); }
  addEventListener(type, handler) { (this.listeners[type] ||= []).push(handler); }
  closest(selector) {
    for (let node = this; node; node = node.parent) if (node.dataset && "pos" in node.dataset) return node;
    return null;
  }
  contains(other) { for (let node = other; node; node = node.parent) if (node === this) return true; return false; }
  focus() { globalThis.document.activeElement = this; }
}
globalThis.document = { createElement: (tag) => new FakeElement(tag), activeElement: null };
const input = JSON.parse(readFileSync(process.argv[2], "utf8"));
const state = { tokens: input.tokens, tail: input.tail || [], selected: input.selected };
const handlers = {};
let saves = 0;
const model = {
  get: (key) => state[key],
  set: (key, value) => { state[key] = value; (handlers["change:" + key] || []).forEach((handler) => handler()); },
  save_changes: () => { saves += 1; },
  on: (event, handler) => { (handlers[event] ||= []).push(handler); },
  off: (event, handler) => { handlers[event] = (handlers[event] || []).filter((other) => other !== handler); },
};
const module = await import("data:text/javascript;base64," + Buffer.from(input.esm).toString("base64"));
const el = new FakeElement("div");
const cleanup = module.default.render({ model, el });
const root = el.children[0];
const snapshot = () => root.children.map((span) => ({ text: span.textContent, cls: span.className,
                                                      pos: span.dataset.pos ?? null, title: span.title }));
const before = snapshot();
const target = root.children.find((span) => span.dataset.pos === String(input.click));
root.listeners.click.forEach((handler) => handler({ target }));
const after = snapshot();
if (typeof cleanup === "function") cleanup();
console.log(JSON.stringify({ before, after, selected: state.selected, saves }));
"""


@pytest.mark.skipif(shutil.which("node") is None, reason="node is not installed")
def test_browser_module_renders_text_and_reports_clicks(tmp_path, three_steps):
    stream = TokenStream(FakeTokenizer(), prompt_ids=[0])
    stream.extend(three_steps.steps)
    stream.select(2)
    harness = tmp_path / "harness.mjs"
    harness.write_text(NODE_HARNESS)
    data = tmp_path / "input.json"
    data.write_text(json.dumps({"esm": stream._view._esm, "tokens": stream._view.tokens, "tail": stream._view.tail,
                                "selected": stream._view.selected, "click": 1}))
    run = subprocess.run(["node", str(harness), str(data)], capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr
    result = json.loads(run.stdout)
    before = result["before"]
    assert [span["text"] for span in before] == [token_display_text(token["text"], token["kind"])
                                                 for token in stream.tokens]
    assert before[0]["text"] == SCRIPT  # set as text, so the browser shows it literally
    assert [span["cls"].split()[1] for span in before] == ["sdl-" + token["kind"] for token in stream.tokens]
    assert [span["pos"] for span in before] == [None, "0", "1", "1", "1", "2", "3", "4", "5"]
    assert before[5]["cls"].endswith("sdl-selected")  # position 2 is the accepted ' cat'
    assert before[5]["title"] == "accepted draft \u00b7 id 2 \u00b7 step 1"
    assert sum("sdl-selected" in span["cls"] for span in before) == 1
    assert result["selected"] == 1 and result["saves"] == 1  # clicking the rejected ' on' selects position 1
    assert [span["cls"].endswith("sdl-selected") for span in result["after"]] == [
        False, False, False, False, True, False, False, False, False]


# The harness up to its first snapshot, then: focus the third span with data-pos "1" (the resampled token after two
# rejected drafts that select the same position), choose it with Enter, then a live step appends a token.
FOCUS_HARNESS = NODE_HARNESS[:NODE_HARNESS.index("const before = snapshot();")] + r"""
const focusedIndex = () => root.children.indexOf(document.activeElement);
const target = root.children.filter((span) => span.dataset.pos === "1")[2];
target.focus();
const start = focusedIndex();
root.listeners.keydown.forEach((handler) => handler({ key: "Enter", target, preventDefault() {} }));
const afterKey = focusedIndex();
const selectedClass = afterKey >= 0 ? root.children[afterKey].className : null;
model.set("tokens", [...state.tokens, { ...state.tokens[state.tokens.length - 1], p: 9 }]);
console.log(JSON.stringify({ start, afterKey, afterStep: focusedIndex(), selected: state.selected, selectedClass,
                             spans: root.children.length }));
"""


@pytest.mark.skipif(shutil.which("node") is None, reason="node is not installed")
def test_choosing_a_token_with_the_keyboard_keeps_the_focus_on_it(tmp_path, three_steps):
    """Enter on a token selects it, which redraws every span: the focus used to fall to the page body, and again on
    every live step."""
    harness = tmp_path / "harness.mjs"
    harness.write_text(FOCUS_HARNESS)
    data = tmp_path / "input.json"
    data.write_text(json.dumps({"esm": three_steps._view._esm, "tokens": wire(three_steps), "tail": [],
                                "selected": -1}))
    run = subprocess.run(["node", str(harness), str(data)], capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr
    result = json.loads(run.stdout)
    assert [item["k"] for item in wire(three_steps)][3:6] == ["rejected", "rejected", "resampled"]
    assert result["start"] == 5 and result["selected"] == 1
    assert result["afterKey"] == 5 and result["selectedClass"].endswith("sdl-selected")  # the same, chosen span
    assert result["afterStep"] == 5 and result["spans"] == len(wire(three_steps)) + 1


# --- a long live run: each step resends the newest tokens only ---------------------------------------------------


def test_a_long_run_resends_only_its_newest_tokens():
    """Every step used to resend every token (about 500 kB and 19 ms of kernel time a step at 1,000 steps)."""
    stream = TokenStream(FakeTokenizer(), prompt_ids=[1, 2])
    sends = []
    stream._view.observe(lambda change: sends.append(len(change["new"])), names="tokens")
    for index in range(1000):
        stream(step(index, [1, 2, 5], 2, [1, 2, 3], "resampled"))
        assert wire(stream) == stream._wire(stream._display_tokens())
        assert len(stream._view.tail) <= TAIL_TOKENS + 4  # at most the tail's limit and one step's 4 tokens
    assert len(wire(stream)) == 2 + 1000 * 4
    assert 14 <= len(sends) <= 4002 // TAIL_TOKENS + 1  # the whole list went out once every ~256 tokens
    stream.reset(prompt_ids=[3])  # a new run: the browser's `tokens` are rebuilt, not extended
    assert wire(stream) == stream._wire(stream._display_tokens()) and len(wire(stream)) == 1
    stream(step(0, [1], 1, [1, 2], "bonus"))
    assert [item["i"] for item in wire(stream)] == [3, 1, 2]


def test_a_character_split_over_tokens_is_completed_after_the_tail_moved():
    """The token whose character is incomplete stays in the tail, whose text a later token changes."""
    tokenizer = ByteTokenizer()
    prompt = list(PROMPT.encode())
    generated = list((CONTINUATION * 12).encode())
    stream = TokenStream(tokenizer, prompt_ids=prompt)
    for record in chain_steps(tokenizer, prompt, generated, wrong=[ord("?")]):
        stream(record)
        assert wire(stream) == stream._wire(stream._display_tokens())
    assert len(stream._view.tokens) > TAIL_TOKENS  # the test did move tokens out of the tail
    shown = "".join(item["s"] for item in wire(stream) if item["k"] not in ("prompt", "rejected"))
    assert shown.replace("\u21b5", "") == CONTINUATION * 12


# A live step in the browser: `tail` changes alone (the head spans stay the same objects), then a new `tokens` list
# redraws everything; the focused span in the tail keeps the focus.
TAIL_HARNESS = NODE_HARNESS[:NODE_HARNESS.index("const before = snapshot();")] + r"""
const head = root.children.slice(0, state.tokens.length);
const focusTarget = root.children[root.children.length - 1];
focusTarget.focus();
model.set("tail", [...state.tail, { s: " new", k: "bonus", p: 99, i: 7, n: 9, t: "bonus", x: false }]);
const kept = head.every((node, i) => root.children[i] === node);
const afterTail = snapshot();
const focusKept = document.activeElement.dataset.pos === focusTarget.dataset.pos
  && root.contains(document.activeElement);
model.set("tokens", [...state.tokens, ...state.tail]);
model.set("tail", []);
const afterFold = snapshot();
console.log(JSON.stringify({ kept, afterTail, afterFold, focusKept }));
"""


@pytest.mark.skipif(shutil.which("node") is None, reason="node is not installed")
def test_browser_module_redraws_only_the_tail_on_a_live_step(tmp_path, three_steps):
    payload = wire(three_steps)
    harness = tmp_path / "harness.mjs"
    harness.write_text(TAIL_HARNESS)
    data = tmp_path / "input.json"
    data.write_text(json.dumps({"esm": three_steps._view._esm, "tokens": payload[:4], "tail": payload[4:],
                                "selected": -1}))
    run = subprocess.run(["node", str(harness), str(data)], capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr
    result = json.loads(run.stdout)
    expected = [item["s"] for item in payload] + [" new"]
    assert result["kept"] is True and result["focusKept"] is True
    assert [span["text"] for span in result["afterTail"]] == expected
    assert [span["text"] for span in result["afterFold"]] == expected
    assert result["afterTail"][-1]["pos"] == "99"


# --- real runs --------------------------------------------------------------------------------------------------------


def test_live_generation_with_a_real_draft_model(target, draft):
    """A tiny random target/draft pair through the real engine: the widget shows exactly what was generated."""
    decode = pytest.importorskip("lab.decode")
    from lab.drafters import DraftModelDrafter

    class IdTokenizer:
        def decode(self, ids):
            return "".join(f"<{token}>" for token in ids)

    prompt = [1, 2, 3]
    stream = TokenStream(IdTokenizer(), prompt_ids=prompt)
    seen = []

    def on_step(record):
        stream(record)
        seen.append(len(stream.generated_ids))

    generation = decode.generate(target, prompt, drafter=DraftModelDrafter(draft, n_draft=3), max_new_tokens=20,
                                 temperature=1.0, seed=0, record_probs=True, on_step=on_step)
    assert stream.generated_ids == generation.tokens and len(generation.tokens) == 20
    assert seen == sorted(seen) and len(seen) == len(generation.steps)  # it grew one step at a time
    # the prefill's record came first and added the first token as the target's own
    assert generation.steps[0].prefill and seen[0] == 1
    first = stream.tokens[len(prompt)]
    assert (first["kind"], first["token_id"], first["step"], first["position"]) == (
        "target", generation.tokens[0], 0, 0)
    expected = f"target's token, nothing drafted \u00b7 id {generation.tokens[0]} \u00b7 step 0 (prefill)"
    assert wire(stream)[len(prompt)]["t"] == expected
    # the stats, like Generation.stats, count the decode steps: the prefill is no target call of the decode loop
    assert stream.stats["steps"] == generation.stats["target_calls"] == len(generation.steps) - 1
    assert stream.stats["emitted"] == 20
    assert stream.stats_text.startswith(f"prefill + {len(generation.steps) - 1} steps \u00b7 acceptance rate ")
    assert stream.stats["acceptance_rate"] == pytest.approx(generation.stats["acceptance_rate"])
    assert stream.stats["tokens_per_target_call"] == pytest.approx(generation.stats["tokens_per_target_call"])
    shown = [token for token in stream.tokens if token["kind"] in ("accepted", "resampled", "bonus", "target")]
    assert [token["token_id"] for token in shown] == generation.tokens
    assert sum(token["kind"] == "rejected" for token in stream.tokens) == stream.stats["rejected"]
    assert re.search(r"<\d", stream.html) is None  # token texts like '<17>' only appear escaped
    assert all(f"&lt;{token}&gt;" in stream.html for token in prompt + generation.tokens)
    stream.select(len(generation.tokens) - 1)
    probs = stream.selection["probs"]
    assert probs is not None and sum(probs["target"]) <= 1 + 1e-5
    step_record = generation.steps[-1]
    offset = len(step_record.emitted) - 1
    token = generation.tokens[-1]
    expected = float(step_record.target_probs[offset, token])
    assert probs["target"][probs["token_ids"].index(token)] == pytest.approx(expected)


# --- token trees (Medusa) drawn as chains, and the residual at a tree's resampled position ----------------------------


@pytest.mark.parametrize("temperature", [0.0, 0.8])
def test_token_stream_shows_a_medusa_run_and_counts_its_whole_trees(pair, medusa, temperature):
    ids = pair.encode("ROMEO.\n")
    stream = TokenStream(pair.tokenizer, ids)
    gen = generate(pair.target, ids, drafter=medusa, max_new_tokens=30, temperature=temperature, seed=1,
                   record_probs=True, on_step=stream)  # raised "does not start with the accepted drafts" before
    assert any(record.parents is not None and len(record.drafted) > record.depth for record in gen.steps)
    assert stream.generated_ids == gen.tokens
    assert all(a is b for a, b in zip(stream.steps, gen.steps)) and len(stream.steps) == len(gen.steps)
    assert shown_text(stream) == pair.decode(ids + gen.tokens)
    # Drawn as chains: per step, the path, at most one struck-through child, then the target's token.
    for k, record in enumerate(gen.steps):
        rejected = [t["token_id"] for t in stream.tokens if t["step"] == k and t["kind"] == "rejected"]
        assert len(rejected) == (1 if record.last_kind == "resampled" and not record.truncated else 0)
    # Stats count every drafted node, as Generation.stats does (the chain view would count only the path + 1).
    stats = stream.stats
    assert stats["drafted"] == gen.stats["drafted_tokens"] == sum(len(r.drafted) for r in gen.steps)
    assert stats["accepted"] == gen.stats["accepted_tokens"]
    assert stats["acceptance_rate"] == pytest.approx(gen.stats["acceptance_rate"])
    assert stats["tokens_per_target_call"] == pytest.approx(gen.stats["tokens_per_target_call"])
    assert f"acceptance rate {gen.stats['acceptance_rate']:.2f} " in stream.stats_text
    assert "tree nodes accepted; a step keeps one path of its tree at most" in stream.stats_text
    # The prefill's token is the target's own, from the prompt's last position: no tree was drafted before it.
    assert gen.steps[0].prefill and stream.tokens[len(ids)]["kind"] == "target"
    stream.select(0)
    assert stream.detail_text.startswith(f"Position 0 (step 0): the first new token "
                                         f"{pair.decode(gen.tokens[:1])!r} (target ")
    assert "the prefill, its forward over the whole prompt" in stream.detail_text
    # A tree's bonus token: the path reached a leaf; the text must not say every draft of the step was accepted.
    position = len(gen.steps[0].emitted)
    for record in gen.steps[1:]:
        if record.last_kind == "bonus" and len(record.emitted) > record.num_accepted:
            stream.select(position + record.num_accepted)
            assert (f"the accepted path ({record.num_accepted} of the tree's {len(record.drafted)} drafts) reached "
                    "a node with no children") in stream.detail_text
            assert "every draft of this step" not in stream.detail_text
            break
        position += len(record.emitted)
    else:
        pytest.fail("no tree step ended in a bonus token")


def test_tree_residual_removes_every_rejected_child_with_draft_probs():
    # Root children: nodes 0 (token 0) and 1 (token 1); node 2 (token 3) hangs under node 0. Both root children
    # were rejected and the target resampled token 2.
    target = torch.tensor([[0.4, 0.3, 0.2, 0.1]] + [[0.25] * 4] * 3)
    draft = torch.tensor([[0.7, 0.1, 0.1, 0.1], [0.1, 0.5, 0.2, 0.2], [0.1, 0.1, 0.1, 0.7]])
    record = StepRecord(index=0, position=0, drafted=[0, 1, 3], num_accepted=0, emitted=[2], last_kind="resampled",
                        parents=[-1, -1, 0], path=[], target_probs=target, draft_probs=draft)
    stream = TokenStream(None).extend([record])
    assert [(t["kind"], t["token_id"]) for t in stream.tokens] == [("rejected", 0), ("resampled", 2)]
    stream.select(0)
    probs = stream.selection["probs"]
    residual = dict(zip(probs["token_ids"], probs["residual"]))
    # By hand: max(0, t - q0) = [0, .2, .1, 0] -> [0, 2/3, 1/3, 0]; minus q1 -> [0, 1/6, 2/15, 0] -> [0, 5/9, 4/9, 0]
    assert residual[2] == pytest.approx(4 / 9, abs=1e-6) and residual[1] == pytest.approx(5 / 9, abs=1e-6)
    assert residual.get(0, 0.0) == 0.0 and residual.get(3, 0.0) == 0.0
    assert dict(zip(probs["token_ids"], probs["draft"]))[0] == pytest.approx(0.7)  # the struck-through child's row
    assert stream.selection["rejected_here"] == 2
    assert "rejected all 2 in turn" in stream.detail_text and "residual 0.444)" in stream.detail_text


def test_tree_residual_after_an_accepted_path_with_a_deterministic_drafter():
    # Node 0 (token 1) accepted; its children nodes 2 (token 3) and 3 (token 4) both rejected; resampled token 0.
    target = torch.tensor([[0.1, 0.5, 0.2, 0.1, 0.1], [0.1, 0.2, 0.3, 0.25, 0.15]] + [[0.2] * 5] * 3)
    record = StepRecord(index=0, position=0, drafted=[1, 2, 3, 4], num_accepted=1, emitted=[1, 0],
                        last_kind="resampled", parents=[-1, -1, 0, 0], path=[0], target_probs=target)
    stream = TokenStream(None).extend([record])
    stream.select(1)
    probs = stream.selection["probs"]
    residual = dict(zip(probs["token_ids"], probs["residual"]))
    # One-hot drafts remove tokens 3 and 4 from row 1: [.1, .2, .3, 0, 0] / .6
    assert residual[0] == pytest.approx(1 / 6, abs=1e-6) and residual[2] == pytest.approx(1 / 2, abs=1e-6)
    assert residual.get(3, 0.0) == 0.0 and residual.get(4, 0.0) == 0.0
    assert stream.selection["rejected_here"] == 2 and stream.selection["drafted_id"] == 3
    stream.select(0)
    assert stream.selection["rejected_here"] == 0 and "rejected all" not in stream.detail_text


def test_tree_steps_recorded_in_bfloat16_are_drawn(pair, medusa):
    ids = pair.encode("ROMEO.\n")
    gen = generate(pair.target, ids, drafter=medusa, max_new_tokens=30, temperature=0.9, seed=2, record_probs=True)
    steps = [StepRecord(**{**vars(r), "target_probs": r.target_probs.to(torch.bfloat16)}) for r in gen.steps]
    assert any(r.last_kind == "resampled" for r in steps)
    stream = TokenStream(pair.tokenizer, ids).extend(steps)  # raised "target_probs must sum to 1" before
    assert stream.generated_ids == gen.tokens
    resampled = [d for d in stream._details if d["kind"] == "resampled"]
    assert resampled and all(d["probs"] is not None for d in resampled)


def test_token_stream_under_typical_acceptance_shows_no_residual(pair):
    """Typical acceptance replaces a rejected draft by a sample from the target's row: the stream must not chart
    the residual (which often gives the emitted token probability 0) nor say it was drawn from it."""
    from lab.drafters import DraftModelDrafter

    prompt = pair.encode("ROMEO.\nBut soft")
    runs = {}
    for rule in ("typical", "exact"):
        stream = TokenStream(pair.tokenizer, prompt_ids=prompt)
        gen = generate(pair.target, prompt, drafter=DraftModelDrafter(pair.draft, n_draft=4), max_new_tokens=40,
                       temperature=1.0, seed=0, record_probs=True, on_step=stream, acceptance=rule)
        assert {s.acceptance for s in gen.steps} == {rule}
        runs[rule] = (stream, [d["position"] for d in stream._details if d["kind"] == "resampled"])
    stream, positions = runs["typical"]
    assert positions
    for position in positions:
        stream.select(position)
        assert stream.selection["probs"]["residual"] is None
        assert "target's own distribution (typical acceptance" in stream._detail_plain
        assert "residual distribution" not in stream._detail_plain
    stream, positions = runs["exact"]
    stream.select(positions[0])
    assert stream.selection["probs"]["residual"] is not None and "residual distribution" in stream._detail_plain
    greedy = generate(pair.target, prompt, drafter=DraftModelDrafter(pair.draft, n_draft=4), max_new_tokens=4)
    assert {s.acceptance for s in greedy.steps} == {"exact"}


# --- characters split over several tokens -----------------------------------------------------------------------------


def test_token_stream_shows_an_unfinished_character_on_the_last_token(pair):
    prompt = pair.encode("Caf")
    first, second = pair.encode("\u00e9")  # "é" is two byte tokens
    stream = TokenStream(pair.tokenizer, prompt)
    stream(StepRecord(index=0, position=0, drafted=[first], num_accepted=1, emitted=[first], last_kind="bonus",
                      truncated=True))
    expected = pair.tokenizer.decode(prompt + [first])[len("Caf"):]
    assert expected == FFFD
    assert stream.tokens[-1]["text"] == FFFD and wire(stream)[-1]["s"] == FFFD
    assert f">{FFFD}</span>" in stream.html
    assert shown_text(stream) == pair.tokenizer.decode(prompt + [first])
    stream.select(0)
    assert stream.selection["text"] == FFFD
    # A later token that completes the character carries it, as before; the partial token shows nothing again.
    a = pair.encode("a")[0]
    stream(StepRecord(index=1, position=1, drafted=[second, 7], num_accepted=1, emitted=[second, a],
                      last_kind="resampled"))
    assert [t["text"] for t in stream.tokens[len(prompt):]] == ["", "\u00e9", pair.tokenizer.decode([7]), "a"]
    assert FFFD not in stream.html and stream.selection["text"] == ""  # the selected token was redrawn
    assert shown_text(stream) == "Caf\u00e9a"


class PieceTokenizer:
    """Token id → bytes; decode joins the bytes and shows an incomplete UTF-8 end as U+FFFD, as byte-level BPE does."""

    pieces = {0: b"C", 1: b"x\xc3", 2: b"\xa9", 3: b"a"}

    def decode(self, ids):
        return b"".join(self.pieces[int(i)] for i in ids).decode("utf-8", errors="replace")

    def __len__(self):
        return len(self.pieces)


def test_a_token_ending_inside_a_character_keeps_its_complete_characters():
    stream = TokenStream(PieceTokenizer(), [0])
    stream(StepRecord(index=0, position=0, drafted=[1], num_accepted=1, emitted=[1], last_kind="bonus"))
    assert shown_text(stream) == PieceTokenizer().decode([0, 1]) == "Cx" + FFFD  # was "C" + FFFD: the x was lost
    stream.select(0)
    assert stream.selection["text"] == "x" + FFFD
    stream(StepRecord(index=1, position=1, drafted=[2], num_accepted=1, emitted=[2], last_kind="bonus"))
    assert shown_text(stream) == "Cx\u00e9"


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
    assert FFFD not in page and all(FFFD not in span["s"] for span in wire(stream))
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


# --- a widget reused for another run ----------------------------------------------------------------------------------


def test_token_stream_reused_on_another_prompt_does_not_decode_after_the_old_one(pair):
    """Records that do not name their prompt (hand-built ones) are told apart by the prompt's length only."""
    from dataclasses import replace

    a, b = pair.encode("ROMEO.\n"), pair.encode("JULIET.\nO Romeo, wherefore")
    stream = TokenStream(pair.tokenizer, a)

    def unnamed(record):  # the prefill record without its prompt's ids
        stream(replace(record, prompt=None))

    generate(pair.target, a, max_new_tokens=3, on_step=unnamed)
    gen = generate(pair.target, b, max_new_tokens=3, on_step=unnamed)
    assert [t for t in stream.tokens if t["kind"] == "prompt"] == []
    assert shown_text(stream) == pair.decode(gen.tokens)
    gen = generate(pair.target, a, max_new_tokens=3, on_step=unnamed)  # the stored prompt fits again
    assert [t["token_id"] for t in stream.tokens if t["kind"] == "prompt"] == a
    assert shown_text(stream) == pair.decode(a + gen.tokens)
    stream.reset(b)
    gen = generate(pair.target, b, max_new_tokens=3, on_step=unnamed)
    assert shown_text(stream) == pair.decode(b + gen.tokens)
    gen = generate(pair.target, a, max_new_tokens=3, on_step=unnamed)  # shorter than the stored prompt b
    assert [t for t in stream.tokens if t["kind"] == "prompt"] == []
    assert shown_text(stream) == pair.decode(gen.tokens)


def test_token_stream_reused_on_a_prompt_of_the_same_length_shows_that_prompt(pair):
    """An instructor's second prompt of the same length was shown after the first ("The capital of France is
    Madrid."): generate's prefill record names its prompt, so the stream shows the run's own."""
    a, b = pair.encode("ROMEO.\nGood"), pair.encode("JULIET.\nO")
    assert len(a) == len(b) and a != b
    stream = TokenStream(pair.tokenizer, a)
    gen = generate(pair.target, a, max_new_tokens=3, on_step=stream)
    assert shown_text(stream) == pair.decode(a + gen.tokens)
    gen = generate(pair.target, b, max_new_tokens=3, on_step=stream)
    assert [t["token_id"] for t in stream.tokens if t["kind"] == "prompt"] == b
    assert shown_text(stream) == pair.decode(b + gen.tokens)
    gen = generate(pair.target, a, max_new_tokens=3, on_step=stream)  # the stored prompt again
    assert [t["token_id"] for t in stream.tokens if t["kind"] == "prompt"] == a
    quiet = TokenStream(pair.tokenizer)  # no stored prompt: none is shown, as before
    generate(pair.target, b, max_new_tokens=3, on_step=quiet)
    assert [t for t in quiet.tokens if t["kind"] == "prompt"] == []


def test_token_stream_prompt_may_be_the_tail_of_the_runs_prompt(pair):
    # Lesson 08 shows the last 60 tokens of a long prompt: a cache longer than the stored prompt is no mismatch.
    ids = pair.encode("JULIET.\nO Romeo, Romeo, wherefore art thou")
    stream = TokenStream(pair.tokenizer, ids[-4:])
    gen = generate(pair.target, ids, max_new_tokens=3, on_step=stream)
    assert [t["token_id"] for t in stream.tokens if t["kind"] == "prompt"] == ids[-4:]
    assert shown_text(stream) == pair.decode(ids[-4:] + gen.tokens)
    gen = generate(pair.target, ids, max_new_tokens=3, on_step=stream)  # the same run again keeps it
    assert [t["token_id"] for t in stream.tokens if t["kind"] == "prompt"] == ids[-4:]


# --- arguments --------------------------------------------------------------------------------------------------------


def test_token_stream_show_speed():
    record = StepRecord(index=0, position=0, drafted=[1], num_accepted=1, emitted=[1, 2], last_kind="bonus",
                        draft_ms=1.0, verify_ms=1.0)
    assert TokenStream(None).extend([record]).stats_text.endswith("1000 tokens/s (draft + verify time)")
    quiet = TokenStream(None, show_speed=False).extend([record])
    assert quiet.stats_text == ("1 step \u00b7 acceptance rate 1.00 (1 of 1 draft accepted) \u00b7 2.00 tokens per "
                                "target call")
    assert quiet.stats["tokens_per_second"] == pytest.approx(1000)
    with pytest.raises(TypeError, match="show_speed"):
        TokenStream(None, show_speed="no")


def test_token_stream_and_kv_viewer_argument_errors(pair):
    ids = pair.encode("ROMEO.\n")
    with pytest.raises(TypeError, match="tokenizer must be None or have a decode"):
        TokenStream(ids)  # the prompt passed where the tokenizer goes
    with pytest.raises(TypeError, match="tokenizer must be None or have a decode"):
        KVCacheViewer("gpt2")
    for bad, error in (("ROMEO", TypeError), ([1.5, 2.7], TypeError), ([True], TypeError), ([-1], ValueError),
                       ([len(pair.tokenizer)], ValueError), (torch.tensor([ids, ids]), ValueError)):
        for make in (lambda: TokenStream(pair.tokenizer, bad), lambda: KVCacheViewer(pair.tokenizer, bad),
                     lambda: TokenStream(pair.tokenizer).reset(bad)):
            with pytest.raises(error, match="prompt_ids"):
                make()
    assert TokenStream(pair.tokenizer, [len(pair.tokenizer) - 1]).tokens[0]["token_id"] == len(pair.tokenizer) - 1

    gen = generate(pair.target, ids, max_new_tokens=3)
    stream = TokenStream(pair.tokenizer, ids)
    with pytest.raises(TypeError, match="extend"):
        stream(gen)
    with pytest.raises(TypeError, match="extend"):
        stream.on_step(gen.steps)
    assert stream.extend(gen) is stream and stream.generated_ids == gen.tokens
    assert stream.steps == gen.steps

    tensor, plain = KVCacheViewer(pair.tokenizer, torch.tensor([ids])), KVCacheViewer(pair.tokenizer, ids)
    tensor.extend(gen.steps)
    plain.extend(gen.steps)
    assert tensor.frames == plain.frames and tensor.rows["target"][0]["token_id"] == ids[0]


def test_token_stream_chart_height():
    assert TokenStream(chart_height=np.int64(300)).chart.layout.height == 300
    for bad in ("big", -5, 5, True, 300.5):
        with pytest.raises(ValueError, match="chart_height"):
            TokenStream(chart_height=bad)


def test_the_viewer_names_what_it_takes_when_given_something_else():
    from widgets import TokenStream

    for wrong in (None, "step", 3):
        with pytest.raises(TypeError, match=r"TokenStream\.on_step takes a step record \(lab\.trace\.StepRecord"):
            TokenStream()(wrong)


def test_records_out_of_order_are_refused_before_anything_changes():
    """extend(gen.steps[1:]) after the whole run showed its text twice, without a word."""
    stream = TokenStream(FakeTokenizer())
    stream.extend([step(0, [1], 1, [1, 2], "bonus"), step(1, [3], 0, [5], "resampled")])
    before = wire(stream)
    for index in (1, 3):
        with pytest.raises(ValueError, match=rf"step {index} does not follow the last step shown \(1\)"):
            stream(step(index, [1], 1, [1, 2], "bonus"))
    assert wire(stream) == before and len(stream.steps) == 2
    stream(step(2, [1], 1, [1, 2], "bonus"))  # the next one, and a new run, are fine
    stream(step(0, [7], 0, [4], "resampled"))
    assert [item["i"] for item in wire(stream)] == [7, 4]
    late = TokenStream(FakeTokenizer()).extend([step(5, [1], 1, [1, 2], "bonus")])  # joined mid-run
    assert late.generated_ids == [1, 2]


def test_a_token_from_a_step_that_drafted_nothing_is_the_targets_own_not_a_bonus():
    """The prefill's token (and a lookup miss's) earned no bonus: the stream draws it as the target's token, and
    selecting it says the same (an instructor saw "position 0: Here (bonus)")."""
    stream = TokenStream(FakeTokenizer())
    stream(step(0, [], 0, [2], "bonus", prefill=True, target_tokens=3))
    stream(step(1, [], 0, [1], "bonus", position=1))
    assert [token["kind"] for token in stream.tokens] == ["target", "target"]
    for position in (0, 1):
        stream.select(position)
        assert stream.selection["kind"] == "target", stream.selection
        assert "bonus" not in stream.chart.layout.title.text
