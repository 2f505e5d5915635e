"""Widget state tests: feed hand-built step records to ``TokenStream`` and check what it would show.

Under nbval widget cells pass vacuously, so these tests are where the widget's behaviour is asserted: the kinds and
order of the shown tokens, HTML escaping, the stats line, the probability chart (residuals computed by hand) and
the browser module (run under node with a minimal fake DOM, when node is installed).
"""
import json
import re
import shutil
import subprocess

import pytest
import torch

from lab.trace import StepRecord
from widgets.token_stream import TokenStream, token_display_text, token_label_text

SCRIPT = "<script>alert(1)</script>"
VOCAB = {0: SCRIPT, 1: " the", 2: " cat", 3: " sat", 4: "\n", 5: " on", 6: " &", 7: " mat"}


class FakeTokenizer:
    """Just what the widget needs: ``decode(list[int]) -> str``."""

    def decode(self, ids):
        return "".join(VOCAB[token] for token in ids)


def step(index, drafted, num_accepted, emitted, last_kind, **fields):
    return StepRecord(index=index, position=fields.pop("position", 0), drafted=drafted, num_accepted=num_accepted,
                      emitted=emitted, last_kind=last_kind, **fields)


def kinds_and_ids(stream):
    return [(token["kind"], token["token_id"]) for token in stream.tokens]


@pytest.fixture
def three_steps():
    """A rejection step, a full-acceptance step ending in a bonus token, and an empty-draft step."""
    stream = TokenStream(FakeTokenizer(), prompt_ids=torch.tensor([[1, 2]]))
    stream(step(0, [3, 5, 1], 1, [3, 6], "resampled", position=0, draft_ms=2.0, verify_ms=3.0, draft_calls=3))
    stream.on_step(step(1, [2, 7], 2, [2, 7, 4], "bonus", position=2, draft_ms=1.5, verify_ms=3.5, draft_calls=2))
    stream(step(2, [], 0, [5], "bonus", position=5, draft_ms=0.0, verify_ms=2.0, draft_calls=0))
    return stream


def test_kinds_and_order_of_shown_tokens(three_steps):
    assert kinds_and_ids(three_steps) == [
        ("prompt", 1), ("prompt", 2),
        ("accepted", 3), ("rejected", 5), ("rejected", 1), ("resampled", 6),  # rejected drafts in place
        ("accepted", 2), ("accepted", 7), ("bonus", 4),                        # full acceptance → bonus
        ("bonus", 5),                                                          # no draft: the target's token
    ]
    generated = [token for token in three_steps.tokens if token["kind"] != "prompt"]
    assert [token["position"] for token in generated] == [0, 1, 2, 1, 2, 3, 4, 5]
    assert [token["step"] for token in generated] == [0, 0, 0, 0, 1, 1, 1, 2]
    assert [token["text"] for token in three_steps.tokens[:3]] == [" the", " cat", " sat"]
    assert three_steps.generated_ids == [3, 6, 2, 7, 4, 5]
    assert len(three_steps.steps) == 3


def test_browser_payload_matches_and_rejected_drafts_select_the_lost_position(three_steps):
    payload = three_steps._view.tokens
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
    assert three_steps.stats_text == ("3 steps \u00b7 acceptance rate 0.60 (3/5 drafts) \u00b7 2.00 tokens per "
                                      "target call \u00b7 500 tokens/s (draft + verify time)")
    assert three_steps.stats_text in three_steps._stats_widget.value


def test_stats_before_any_step_and_without_drafts():
    stream = TokenStream(FakeTokenizer())
    assert stream.stats_text == "waiting for the first step"
    assert stream.stats["acceptance_rate"] is None and stream.stats["tokens_per_second"] is None
    stream(step(0, [], 0, [1], "bonus"))
    assert stream.stats["acceptance_rate"] is None
    assert stream.stats_text.startswith("1 step \u00b7 acceptance rate \u2013 (no drafts) \u00b7 1.00 tokens per")
    assert "\u2013 tokens/s" in stream.stats_text  # no timing recorded


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
    assert stream._view.tokens[0]["s"] == SCRIPT


def test_display_and_label_text():
    assert token_display_text("") == "\u2205"
    assert token_display_text(" a\nb\r") == " a\u21b5\nb\u240d"
    assert token_label_text(" the\n\t") == "\u2423the\u21b5\u21e5"
    assert token_label_text("\x00") == "\u2400"
    assert TokenStream(None, prompt_ids=[17]).tokens[0]["text"] == "\u27e817\u27e9"  # no tokenizer: ids


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
    with pytest.raises(IndexError):
        three_steps.select(6)
    with pytest.raises(TypeError):
        three_steps.select("1")


def test_truncated_inside_the_accepted_drafts():
    # max_new_tokens cut the step after 2 of 3 accepted drafts: no rejected drafts, no target token shown.
    stream = TokenStream(FakeTokenizer())
    stream(step(0, [1, 2, 3], 3, [1, 2], "bonus", truncated=True))
    assert kinds_and_ids(stream) == [("accepted", 1), ("accepted", 2)]
    assert stream.stats["emitted"] == 2 and stream.stats["acceptance_rate"] == 1.0


def test_truncated_at_the_target_token():
    # The cut fell exactly on the target's token: the rejected drafts still show, but select nothing.
    stream = TokenStream(FakeTokenizer(), top_k=4)
    record = residual_step()
    record.emitted, record.truncated = [1], True
    stream(record)
    assert kinds_and_ids(stream) == [("accepted", 1), ("rejected", 2)]
    assert [item["p"] for item in stream._view.tokens] == [0, -1]
    stream.select(0)
    assert stream.selection["truncated"] is True
    assert "cut short" in stream.detail_text
    with pytest.raises(IndexError):
        stream.select(1)


def test_reset_and_a_new_run_clear_the_generated_tokens(three_steps):
    three_steps.select(1)
    three_steps.reset()
    assert kinds_and_ids(three_steps) == [("prompt", 1), ("prompt", 2)]
    assert three_steps.stats["steps"] == 0 and three_steps.generated_ids == []
    assert three_steps.selected is None and three_steps.selection is None
    assert all(len(trace.x) == 0 for trace in three_steps.chart.data)
    assert [item["i"] for item in three_steps._view.tokens] == [1, 2]
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


@pytest.mark.parametrize("record, message", [
    (step(0, [1], 2, [1, 2], "bonus"), "num_accepted"),
    (step(0, [1, 2], 1, [1, 3, 4], "resampled"), "at most"),
    (step(0, [1, 2], 1, [2, 3], "resampled"), "does not start with the accepted drafts"),
    (step(0, [1, 2], 1, [1, 3], "bonus"), "'resampled'"),
    (step(0, [1], 1, [1, 3], "resampled"), "'bonus'"),
    (step(0, [], 0, [3], "extra"), "last_kind"),
])
def test_contradictory_records_are_rejected(record, message):
    stream = TokenStream(FakeTokenizer())
    with pytest.raises(ValueError, match=message):
        stream(record)
    assert stream.tokens == []


def test_constructor_checks_top_k():
    with pytest.raises(ValueError, match="top_k"):
        TokenStream(FakeTokenizer(), top_k=0)


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
  setAttribute(name, value) { this.attributes[name] = String(value); }
  addEventListener(type, handler) { (this.listeners[type] ||= []).push(handler); }
  closest(selector) {
    for (let node = this; node; node = node.parent) if (node.dataset && "pos" in node.dataset) return node;
    return null;
  }
  contains(other) { for (let node = other; node; node = node.parent) if (node === this) return true; return false; }
}
globalThis.document = { createElement: (tag) => new FakeElement(tag) };
const input = JSON.parse(readFileSync(process.argv[2], "utf8"));
const state = { tokens: input.tokens, selected: input.selected };
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
    data.write_text(json.dumps({"esm": stream._view._esm, "tokens": stream._view.tokens,
                                "selected": stream._view.selected, "click": 1}))
    run = subprocess.run(["node", str(harness), str(data)], capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr
    result = json.loads(run.stdout)
    before = result["before"]
    assert [span["text"] for span in before] == [token_display_text(token["text"]) for token in stream.tokens]
    assert before[0]["text"] == SCRIPT  # set as text, so the browser shows it literally
    assert [span["cls"].split()[1] for span in before] == ["sdl-" + token["kind"] for token in stream.tokens]
    assert [span["pos"] for span in before] == [None, "0", "1", "1", "1", "2", "3", "4", "5"]
    assert before[5]["cls"].endswith("sdl-selected")  # position 2 is the accepted ' cat'
    assert before[5]["title"] == "accepted draft \u00b7 id 2 \u00b7 step 1"
    assert sum("sdl-selected" in span["cls"] for span in before) == 1
    assert result["selected"] == 1 and result["saves"] == 1  # clicking the rejected ' on' selects position 1
    assert [span["cls"].endswith("sdl-selected") for span in result["after"]] == [
        False, False, False, False, True, False, False, False, False]


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
    assert stream.stats["steps"] == generation.stats["target_calls"]
    assert stream.stats["acceptance_rate"] == pytest.approx(generation.stats["acceptance_rate"])
    assert stream.stats["tokens_per_target_call"] == pytest.approx(generation.stats["tokens_per_target_call"])
    shown = [token for token in stream.tokens if token["kind"] in ("accepted", "resampled", "bonus")]
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
