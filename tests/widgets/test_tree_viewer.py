"""TreeViewer (widgets/tree_viewer.py, lesson 10): kernel-side state after real tree and chain runs on the tiny
fixtures, and hand-built records for the edge cases (empty drafts, escaping, the step bound, its arguments, a prompt
that ends inside a character)."""
import numpy as np
import pytest
import torch

from lab import trees
from lab.decode import generate
from lab.drafters import DraftModelDrafter
from lab.trace import StepRecord
from tests.helpers import TopKTreeDrafter
from tests.widgets.split_text import ByteTokenizer
from widgets import TreeViewer
from widgets.token_text import PARTIAL_LABEL

SCRIPT = "<script>x</script>"
PROMPT = [1, 2, 3, 4, 5]


class ScriptTokenizer:
    def decode(self, ids):
        return SCRIPT * len(ids)  # every token is SCRIPT; like a real tokenizer, n tokens decode to n texts


def expected_status(record):
    on_path = set(record.path)
    status = ["root"] + ["accepted" if i in on_path else "rejected" for i in range(len(record.drafted))]
    if len(record.emitted) > record.num_accepted:  # a step that drafted nothing shows the target's own token
        status.append(record.last_kind if record.drafted else "target")
    return status


def expected_mask(record):
    parents = trees.chain_parents(len(record.drafted)) if record.parents is None else record.parents
    return trees.tree_attention_mask([-1] + [p + 1 for p in parents], 0)


@pytest.fixture(scope="module")
def tree_run(target, noisy_draft):
    """A greedy tree run whose viewer received every step live; ``seen`` is what it showed at each call."""
    viewer, seen = TreeViewer(), []

    def on_step(record):
        viewer.on_step(record)
        seen.append((record, viewer.index, viewer.node_status, viewer.mask, viewer.node_ids))

    gen = generate(target, PROMPT, drafter=TopKTreeDrafter(noisy_draft, width=2, depth=3), max_new_tokens=24,
                   on_step=on_step)
    return viewer, gen, seen


def test_tree_steps_arrive_live_and_match_their_records(tree_run):
    viewer, gen, seen = tree_run
    assert len(seen) == len(gen.steps) == len(viewer.records) > 1
    assert all(a is b for a, b in zip(viewer.records, gen.steps))
    assert any(0 < len(r.path) < r.depth for r in gen.steps)  # some step rejected part of the tree
    # the prefill drafted nothing: its first token hangs off the root, the prompt's last token, which the viewer
    # (given no prompt) reads off the prefill record
    record, index, status, mask, ids = seen[0]
    assert record.prefill and record.parents is None and index == 0 and record.prompt == list(PROMPT)
    assert (status, ids, mask.tolist()) == (["root", "target"], [PROMPT[-1], record.emitted[0]], [[True]])
    from dataclasses import replace

    unnamed = TreeViewer()  # a record that does not name its prompt (hand-built): the root is unknown
    unnamed.on_step(replace(record, prompt=None))
    assert unnamed.node_ids == [None, record.emitted[0]]
    for k, (record, index, status, mask, ids) in enumerate(seen[1:], start=1):
        assert index == k and record is gen.steps[k]  # the newest step is shown as it arrives
        assert record.parents is not None and not record.prefill
        assert status == expected_status(record)
        accepted = [i for i, s in enumerate(status[1:1 + len(record.drafted)]) if s == "accepted"]
        assert accepted == sorted(record.path)
        assert mask.dtype == torch.bool and torch.equal(mask, expected_mask(record))
        assert ids[1:1 + len(record.drafted)] == record.drafted
        assert ids[0] == gen.steps[k - 1].emitted[-1]  # the root is the previous step's last token
    assert viewer.index == len(gen.steps) - 1


def test_tree_figure_and_mask_heatmap(tree_run):
    viewer, gen, _ = tree_run
    k = next(k for k, r in enumerate(gen.steps) if r.path)  # a decode step that accepted nodes
    viewer.show(k)
    record = gen.steps[k]
    assert record.parents is not None
    n = len(record.drafted)
    nodes = {trace.name: trace for trace in viewer.tree_figure.data[3:]}
    assert len(nodes["accepted draft"].x) == len(record.path)
    assert len(nodes["rejected draft"].x) == n - len(record.path)
    xs = sorted(nodes["accepted draft"].x)  # x = depth + 1: the path goes one level per token
    assert xs == list(range(1, len(record.path) + 1))
    assert list(nodes["last committed token"].x) == [0]
    heatmap = viewer.mask_figure.data[0]
    z = torch.tensor(heatmap.z)
    assert z.shape == (n + 1, n + 1)
    assert torch.equal(z > 0, viewer.mask)
    kept = {0} | {i + 1 for i in record.path}
    for row in range(n + 1):  # the accepted path's rows are emphasised
        assert set(z[row].tolist()) <= ({0, 2} if row in kept else {0, 1})
    assert list(viewer.mask_figure.layout.yaxis.ticktext) == viewer.node_labels[: n + 1]


def test_show_and_slider_switch_steps(tree_run):
    viewer, gen, _ = tree_run
    viewer.show(1)
    assert viewer.index == 1 and viewer.summary.startswith("step 1:")
    assert viewer.node_status == expected_status(gen.steps[1])
    viewer._slider.value = 0
    assert viewer.index == 0 and viewer.summary.startswith("step 0:")
    assert torch.equal(viewer.mask, expected_mask(gen.steps[0]))
    viewer.show(-1)
    assert viewer.index == len(gen.steps) - 1
    count = len(gen.steps)
    for bad in (count, -count - 1):
        with pytest.raises(ValueError, match=rf"index must be in \[-{count}, {count - 1}\]"):
            viewer.show(bad)
    for bad in (1.5, True, "1", None):
        with pytest.raises(ValueError, match="index must be an integer"):
            viewer.show(bad)
    assert viewer.index == count - 1  # a refused call leaves the view where it was
    import numpy as np

    viewer.show(np.int64(0))
    assert viewer.index == 0
    with pytest.raises(ValueError, match="no steps yet"):
        TreeViewer().show(0)


def test_chain_steps_show_as_a_chain(target, noisy_draft):
    viewer = TreeViewer()
    gen = generate(target, PROMPT, drafter=DraftModelDrafter(noisy_draft, n_draft=3), max_new_tokens=16,
                   on_step=viewer.on_step)
    assert len(viewer.records) == len(gen.steps)
    assert {r.last_kind for r in gen.steps if r.drafted} == {"bonus", "resampled"}
    for k, record in enumerate(gen.steps):
        viewer.show(k)
        n = len(record.drafted)
        assert record.parents is None and viewer.parents == trees.chain_parents(n)
        assert viewer.node_status == expected_status(record)
        assert viewer.node_status[1:1 + record.num_accepted] == ["accepted"] * record.num_accepted
        assert torch.equal(viewer.mask, torch.ones(n + 1, n + 1, dtype=torch.bool).tril())  # causal
        assert "(chain)" in viewer.summary or not n  # the last step may have no room left to draft
        ys = [y for trace in viewer.tree_figure.data[3:6] for y in trace.y]  # root, accepted, rejected
        assert len(ys) == n + 1 and len(set(ys)) == 1  # the drafts form a straight line
        if not n and len(record.emitted):  # nothing drafted: the target's own token continues the root
            assert list(viewer.tree_figure.data[8].y) == [ys[0]] and viewer.node_status[-1] == "target"
        elif record.last_kind == "bonus":  # ... which the bonus token continues; a resampled one branches off
            assert list(viewer.tree_figure.data[6].y) == [ys[0]]


def test_empty_draft_and_truncated_step():
    viewer = TreeViewer()
    viewer(StepRecord(index=0, position=0, drafted=[], num_accepted=0, emitted=[7], last_kind="bonus"))
    assert viewer.node_labels == ["last", "7"] and viewer.node_status == ["root", "target"]
    assert viewer.mask.tolist() == [[True]] and viewer.parents == []
    assert viewer.summary == "step 0: nothing drafted; 0 accepted, then the target's own token '7'"
    # cut by max_new_tokens inside the accepted path: no target token is drawn
    viewer(StepRecord(index=1, position=1, drafted=[4, 5, 6], num_accepted=2, emitted=[4], last_kind="bonus",
                      truncated=True, parents=[-1, 0, 0], path=[0, 2]))
    assert viewer.node_labels == ["7", "4", "5", "6"]
    assert viewer.node_status == ["root", "accepted", "rejected", "accepted"]
    assert "cut short" in viewer.summary and "depth 2" in viewer.summary
    with pytest.raises(ValueError, match="path"):
        viewer(StepRecord(index=2, position=2, drafted=[4, 5], num_accepted=1, emitted=[5, 1], last_kind="resampled",
                          parents=[-1, -1], path=[1, 0]))
    assert len(viewer.records) == 2  # a bad record is not stored
    viewer.clear()
    assert viewer.records == [] and viewer.index is None and viewer.mask is None and viewer.node_labels == []


def test_static_html_draws_the_shown_tree_and_its_mask(tree_run):
    """The fallback for views without widgets (nbconvert, GitHub): one list item per drawn node, nested under its
    parent, named by its status; one mask cell per (row, column), ■ exactly where the mask allows attention, the
    accepted path's rows in the accepted colour; _repr_html_ is the same page."""
    import re

    from widgets.style import ACCEPTED_COLOR

    viewer, gen, _ = tree_run
    assert "waiting for the first step" in TreeViewer().html
    k = next(k for k, r in enumerate(gen.steps) if r.path and len(r.path) < r.depth)  # a partly rejected tree
    viewer.show(k)
    page = viewer.html
    assert viewer._repr_html_() == page and "<script" not in page
    n = len(gen.steps[k].drafted)
    tree, table = page.split("<table", 1)
    assert tree.count("<li>") == len(viewer.node_status) and tree.count("<ul>") == len(set(
        viewer._view["up"][1:]))  # one nested list per node with children
    assert [tree.count(f">{label}</span>") for label in ("accepted draft", "rejected draft")] == [
        viewer.node_status.count("accepted"), viewer.node_status.count("rejected")]
    rows = re.findall(r"<tr><th style=[^>]*>(\d+) [^<]*</th>(.*?)</tr>", table)
    assert [int(r) for r, _ in rows] == list(range(n + 1))
    cells = [re.findall(r'<td style="background: ([^;]+);">(.)</td>', body) for _, body in rows]
    assert torch.equal(torch.tensor([[mark == "■" for _, mark in row] for row in cells]), viewer.mask)
    kept = {0} | {i + 1 for i in gen.steps[k].path}
    for r, row in enumerate(cells):
        assert all((fill == ACCEPTED_COLOR) == (r in kept) for fill, mark in row if mark == "■")


def test_token_text_is_escaped():
    viewer = TreeViewer(tokenizer=ScriptTokenizer())
    viewer(StepRecord(index=0, position=0, drafted=[1, 2, 3], num_accepted=1, emitted=[2, 9], last_kind="resampled",
                      parents=[-1, -1, 1], path=[1]))
    viewer(StepRecord(index=1, position=2, drafted=[4], num_accepted=1, emitted=[4, 8], last_kind="bonus"))
    assert viewer.node_status == ["root", "accepted", "bonus"]
    escaped = "&lt;script&gt;x&lt;/script&gt;"
    assert viewer.node_labels == [escaped] * 3  # the root's text is known from the previous step
    page = viewer.summary_widget.value
    assert "<script" not in page and escaped in page
    for trace in viewer.tree_figure.data:
        for field in (trace.text, trace.hovertext):
            assert all("<script" not in str(item) for item in field or [])
    heatmap = viewer.mask_figure.data[0]
    assert all("<script" not in cell for row in heatmap.text for cell in row)
    assert all("<script" not in label for label in viewer.mask_figure.layout.xaxis.ticktext)
    assert "<script" not in viewer.html and escaped in viewer.html


def test_max_steps_bounds_memory_and_new_run_restarts():
    viewer = TreeViewer(max_steps=np.int64(3))  # NumPy integers count as integers
    for k in range(10):
        viewer(StepRecord(index=k, position=k, drafted=[k], num_accepted=1, emitted=[k, 50 + k], last_kind="bonus"))
    assert [r.index for r in viewer.records] == [7, 8, 9]
    assert viewer.index == 2 and viewer.summary.startswith("step 9:")
    assert viewer.node_ids == [58, 9, 59]  # root: the previous step's last token
    viewer.show(0)
    assert viewer.node_ids == [56, 7, 57]  # step 6 is gone, but step 7 kept the root it arrived with
    viewer(StepRecord(index=0, position=0, drafted=[], num_accepted=0, emitted=[1], last_kind="bonus"))
    assert len(viewer.records) == 1 and viewer.index == 0
    with pytest.raises(ValueError, match="max_steps"):
        TreeViewer(max_steps=0)


def test_tree_viewer_checks_its_tokenizer_and_prompt_ids(pair):
    from widgets.tree_viewer import TreeViewer

    with pytest.raises(TypeError, match="tokenizer must be None or have a decode"):
        TreeViewer(pair.encode("ROMEO."))
    vocab = len(pair.tokenizer)
    for bad in ([vocab], [-5]):
        with pytest.raises(ValueError, match="prompt_ids"):
            TreeViewer(pair.tokenizer, prompt_ids=bad)
    viewer = TreeViewer(pair.tokenizer, prompt_ids=[1, 2])
    with pytest.raises(ValueError, match="prompt_ids"):
        viewer.clear(prompt_ids=[vocab + 3])
    viewer.clear(prompt_ids=[])


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


def test_tree_viewer_draws_the_prefill_after_the_prompt():
    # The prompt ends inside "é": the prefill's token completes it, and the next step's root is that token.
    prompt = list("a\u00e9".encode())[:-1]
    records = [StepRecord(index=0, position=0, drafted=[], num_accepted=0, emitted=[0xA9], last_kind="bonus",
                          target_tokens=len(prompt), cache_before=0, prefill=True),
               StepRecord(index=1, position=1, drafted=[0x62, 0x78], num_accepted=1, emitted=[0x62, 0x63],
                          last_kind="resampled", target_tokens=3, cache_before=len(prompt))]
    viewer = TreeViewer(ByteTokenizer(), prompt_ids=prompt).extend(records)
    viewer.show(0)
    assert viewer.node_ids == [0xC3, 0xA9] and viewer.node_status == ["root", "target"]
    assert viewer.node_labels == [PARTIAL_LABEL, "\u00e9"] and viewer.mask.tolist() == [[True]]
    assert viewer.summary == ("step 0: the prefill, the target's forward over the 2-token prompt, then the "
                              "target's own token '\u00e9'")
    assert viewer.tree_figure.layout.title.text == "draft tree, step 0 (the prefill: nothing drafted)"
    viewer.show(1)
    assert viewer.node_ids == [0xA9, 0x62, 0x78, 0x63] and viewer.node_labels == ["\u00e9", "b", "x", "c"]
    assert viewer.node_status == ["root", "accepted", "rejected", "resampled"]
    # A prefill over another prompt length is another prompt: its root is unknown, its token decoded alone.
    other = TreeViewer(ByteTokenizer(), prompt_ids=prompt).extend(
        [StepRecord(index=0, position=0, drafted=[], num_accepted=0, emitted=[0xA9], last_kind="bonus",
                    target_tokens=5, cache_before=0, prefill=True)])
    assert other.node_ids == [None, 0xA9] and other.node_labels[0] == "last"
    assert other.node_labels[1] != "\u00e9"


def test_the_viewer_names_what_it_takes_when_given_something_else():
    from widgets import TreeViewer

    for wrong in (None, "step", 3):
        with pytest.raises(TypeError, match=r"TreeViewer\.on_step takes a step record \(lab\.trace\.StepRecord"):
            TreeViewer()(wrong)
