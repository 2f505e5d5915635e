"""KVCacheViewer (widgets/kv_viewer.py, lesson 07): kernel-side state after hand-built records and real runs (the
tiny conftest models, the bundled pair with a draft model, Medusa and EAGLE), prompts it does not know, and token
labels of characters split over several tokens."""
import html
import re

import numpy as np
import pytest
import torch

from lab.decode import generate
from lab.drafters import DraftModelDrafter, LookaheadDrafter
from lab.trace import StepRecord
from tests.widgets.split_text import CONTINUATION, FFFD, PROMPT, chain_steps, unlabel
from widgets.kv_viewer import KVCacheViewer
from widgets.token_text import PARTIAL_LABEL, token_labels
from widgets.tree_viewer import TreeViewer

SCRIPT = "<script>alert(1)</script>"


class FakeTokenizer:
    def decode(self, ids):
        return "".join(SCRIPT if t == 0 else f"t{t}" for t in ids)


def kinds(slots):
    return [s["kind"] for s in slots]


def test_kv_viewer_summary_counts_one_entry_and_one_draft_in_the_singular():
    """'the target wrote 1 entries', '(0 of 1 drafts accepted)': a count of one takes the singular."""
    viewer = KVCacheViewer(FakeTokenizer(), prompt_ids=[1, 2])
    viewer(StepRecord(index=0, position=0, drafted=[4], num_accepted=0, emitted=[9], last_kind="resampled",
                      target_tokens=2, cache_before=1))
    verify, commit = viewer.frames
    viewer.show(0)
    assert viewer.summary == "step 0, verify: the target wrote 2 entries to scratch after 1 committed one"
    viewer.show(1)
    assert viewer.summary == "step 0, commit: the target kept 1 and discarded 1 (0 of 1 draft accepted)"
    viewer(StepRecord(index=1, position=1, drafted=[], num_accepted=0, emitted=[5], last_kind="bonus",
                      target_tokens=1, cache_before=2))
    viewer.show(2)
    assert viewer.summary == "step 1, verify: the target wrote 1 entry to scratch after 2 committed ones"


@pytest.fixture(scope="module")
def medusa(pair):
    from lab.registry import make_drafter

    return make_drafter("medusa", pair, 4)


def test_kv_viewer_frames_from_hand_built_records():
    viewer = KVCacheViewer(FakeTokenizer(), prompt_ids=[1, 2, 3])
    assert viewer.summary == "waiting for the first step" and viewer.rows == {}
    # step 0: cache holds [1, 2]; feeds [3] + drafts [4, 5, 6]; 1 accepted → keeps 2 of 4 written
    viewer(StepRecord(index=0, position=0, drafted=[4, 5, 6], num_accepted=1, emitted=[4, 9], last_kind="resampled",
                      target_tokens=4, cache_before=2, draft_cache=(2, 5, 4)))
    assert len(viewer.frames) == 2 and viewer.frame == 1
    verify, commit = viewer.frames
    assert kinds(verify["rows"]["target"]) == ["committed"] * 2 + ["scratch"] * 4
    assert [s["token_id"] for s in verify["rows"]["target"]] == [1, 2, 3, 4, 5, 6]
    assert kinds(commit["rows"]["target"]) == ["committed"] * 2 + ["kept"] * 2 + ["discarded"] * 2
    # the draft fed [3, 4, 5] (pending + all drafts but the last) and kept [3, 4]
    assert [s["token_id"] for s in verify["rows"]["draft"]] == [1, 2, 3, 4, 5]
    assert kinds(commit["rows"]["draft"]) == ["committed"] * 2 + ["kept"] * 2 + ["discarded"]
    assert viewer.summary == ("step 0, commit: the target kept 2 and discarded 2; the draft kept 2 and discarded 1 "
                              "(1 of 3 drafts accepted)")
    viewer.show(0)
    assert viewer.summary.startswith("step 0, verify: the target wrote 4 entries to scratch after 2 committed")
    # step 1 continues from the committed tokens [1, 2, 3, 4, 9]; a Lookahead-like step with 2 extra rows
    viewer(StepRecord(index=1, position=2, drafted=[7], num_accepted=1, emitted=[7, 8], last_kind="bonus",
                      target_tokens=4, cache_before=4))
    assert viewer.frame == 3  # follows the live run
    rows = viewer.frames[2]["rows"]
    assert set(rows) == {"target"}
    assert [s["token_id"] for s in rows["target"]] == [1, 2, 3, 4, 9, 7, None, None]
    assert kinds(viewer.rows["target"])[-4:] == ["kept", "kept", "discarded", "discarded"]
    assert "<script" not in viewer.html and "&lt;script&gt;" not in viewer.html  # token 0 never shown here
    for bad in (4, -5):
        with pytest.raises(ValueError, match=r"frame must be in \[-4, 3\]"):
            viewer.show(bad)
    for bad in (1.5, True, "2"):
        with pytest.raises(ValueError, match="frame must be an integer"):
            viewer.show(bad)
    assert viewer.frame == 3  # a refused call leaves the view where it was
    viewer.show(-1)
    assert viewer.frame == 3
    viewer.show(torch.tensor(1))
    assert viewer.frame == 1
    with pytest.raises(ValueError, match="no frames yet"):
        KVCacheViewer().show(0)


def test_kv_viewer_escapes_and_truncates():
    viewer = KVCacheViewer(FakeTokenizer(), prompt_ids=[0] * 10, max_slots=6)
    viewer(StepRecord(index=0, position=0, drafted=[0], num_accepted=0, emitted=[1], last_kind="resampled",
                      target_tokens=2, cache_before=9))
    page = viewer.html
    assert "<script" not in page and "&lt;script&gt;" in page
    assert "… 5 earlier" in page  # 11 target slots, 6 drawn
    with pytest.raises(ValueError, match="cache_before"):
        viewer(StepRecord(index=1, position=1, drafted=[], num_accepted=0, emitted=[1], last_kind="bonus"))
    with pytest.raises(ValueError, match="max_slots"):
        KVCacheViewer(max_slots=2)
    assert KVCacheViewer(max_slots=np.int64(6)).max_slots == 6


def test_kv_viewer_draws_the_prefill_as_the_prompt_kept():
    viewer = KVCacheViewer(FakeTokenizer(), prompt_ids=[1, 2, 3])
    # the prefill: the whole prompt through the target, all of it kept; its last position gave token 4
    viewer(StepRecord(index=0, position=0, drafted=[], num_accepted=0, emitted=[4], last_kind="bonus",
                      target_tokens=3, cache_before=0, prefill=True))
    verify, commit = viewer.frames
    assert [(s["position"], s["token_id"], s["text"], s["kind"]) for s in verify["rows"]["target"]] == [
        (0, 1, "t1", "scratch"), (1, 2, "t2", "scratch"), (2, 3, "t3", "scratch")]
    assert kinds(commit["rows"]["target"]) == ["kept"] * 3
    assert viewer.summary == ("step 0 (prefill), commit: the target kept 3 and discarded 0 (the prompt; its last "
                              "position gave the first new token)")
    viewer.show(0)
    assert viewer.summary == "step 0 (prefill), verify: the target wrote 3 entries to scratch after 0 committed ones"
    # the first decode step feeds the prefill's token at position 3, after the 3 prompt entries
    viewer(StepRecord(index=1, position=1, drafted=[5, 6], num_accepted=1, emitted=[5, 7], last_kind="resampled",
                      target_tokens=3, cache_before=3, draft_cache=(3, 5, 5)))
    target = viewer.rows["target"]
    assert [(s["token_id"], s["text"], s["kind"]) for s in target] == [
        (1, "t1", "committed"), (2, "t2", "committed"), (3, "t3", "committed"), (4, "t4", "kept"),
        (5, "t5", "kept"), (6, "t6", "discarded")]
    assert [s["position"] for s in target] == list(range(6))
    # the draft model's cache held the prompt; it fed [4, 5] (the pending token, the first draft) and kept both
    assert [(s["token_id"], s["kind"]) for s in viewer.rows["draft"]] == [
        (1, "committed"), (2, "committed"), (3, "committed"), (4, "kept"), (5, "kept")]
    # a prefill over 2 tokens is another prompt: drawn unknown, not as the stored prompt's first tokens
    viewer(StepRecord(index=0, position=0, drafted=[], num_accepted=0, emitted=[4], last_kind="bonus",
                      target_tokens=2, cache_before=0, prefill=True))
    assert len(viewer.frames) == 2
    assert [(s["token_id"], s["text"], s["kind"]) for s in viewer.rows["target"]] == [(None, "?", "kept")] * 2
    viewer(StepRecord(index=1, position=1, drafted=[], num_accepted=0, emitted=[6], last_kind="bonus",
                      target_tokens=1, cache_before=2))
    assert [(s["token_id"], s["kind"]) for s in viewer.rows["target"]] == [
        (None, "committed"), (None, "committed"), (4, "kept")]


def test_kv_viewer_follows_a_real_run_and_restarts(target, noisy_draft):
    prompt = [1, 2, 3, 4, 5]
    viewer = KVCacheViewer(prompt_ids=prompt)
    gen = generate(target, prompt, drafter=DraftModelDrafter(noisy_draft, 3), max_new_tokens=20, on_step=viewer)
    assert len(viewer.frames) == 2 * len(gen.steps)
    # the prefill wrote the whole prompt and kept all of it; nothing was committed before it
    assert gen.steps[0].prefill and gen.steps[0].target_tokens == len(prompt)
    verify, commit = (viewer.frames[k]["rows"]["target"] for k in (0, 1))
    assert [(s["token_id"], s["kind"]) for s in verify] == [(t, "scratch") for t in prompt]
    assert [(s["token_id"], s["kind"]) for s in commit] == [(t, "kept") for t in prompt]
    committed = prompt + gen.steps[0].emitted  # the first decode step feeds the prefill's token
    for k, record in enumerate(gen.steps[1:], start=1):
        assert not record.prefill and record.cache_before == len(committed) - 1
        commit = viewer.frames[2 * k + 1]["rows"]["target"]
        assert [s["token_id"] for s in commit if s["kind"] == "committed"] == committed[:-1]
        assert [s["token_id"] for s in commit if s["kind"] == "kept"] == [committed[-1]] + record.emitted[
            : record.num_accepted]
        committed += record.emitted
    assert committed == prompt + gen.tokens
    generate(target, prompt, drafter=LookaheadDrafter(), max_new_tokens=5, on_step=viewer)
    assert viewer.frames[0]["step"] == 0 and len(viewer.frames) <= 10  # a new run replaced the old frames
    assert [s["token_id"] for s in viewer.frames[0]["rows"]["target"]] == prompt  # starting with its prefill


def test_kv_viewer_keeps_a_trees_accepted_path_and_draws_no_medusa_draft_row(pair, medusa):
    ids = pair.encode("ROMEO.\n")
    viewer = KVCacheViewer(pair.tokenizer, ids)
    gen = generate(pair.target, ids, drafter=medusa, max_new_tokens=24, on_step=viewer)
    assert any(list(r.path) != list(range(len(r.path))) for r in gen.steps)  # a path that skips listed nodes
    committed = []
    for k, record in enumerate(gen.steps):
        viewer.show(2 * k + 1)
        target = viewer.rows["target"]
        kept = [s for s in target if s["kind"] == "kept"]
        if k == 0:  # the prefill keeps every prompt entry
            assert record.prefill and [(s["token_id"], s["position"]) for s in kept] == list(zip(ids, range(len(ids))))
            committed = ids + record.emitted
        else:
            assert [s["token_id"] for s in kept] == [committed[-1]] + [record.drafted[i] for i in record.path]
            assert [s["position"] for s in kept] == [record.cache_before] + [record.cache_before + 1 + i
                                                                           for i in record.path]
            committed += record.emitted
        assert set(viewer.rows) == {"target"}  # Medusa's heads have no cache: no empty draft row
        assert "the draft" not in viewer.summary


def test_kv_viewer_without_prompt_and_reused_on_another_prompt_follows_cache_before(pair):
    """Records that do not name their prompt (hand-built ones) are told apart by the prompt's length only."""
    from dataclasses import replace

    def unnamed(viewer):  # records as hand-built ones are: the prefill does not name its prompt
        return lambda record: viewer(replace(record, prompt=None))

    a, b = pair.encode("ROMEO.\n"), pair.encode("JULIET.\nO Romeo, wherefore")
    blind = KVCacheViewer(pair.tokenizer)
    gen = generate(pair.target, a, max_new_tokens=3, on_step=unnamed(blind))
    assert len(gen.steps) == 3 and gen.steps[0].prefill  # no drafter: the prefill, then one token per step
    for k, record in enumerate(gen.steps):
        blind.show(2 * k)
        slots = blind.rows["target"]
        assert [s["position"] for s in slots] == list(range(len(slots)))
        committed = [s for s in slots if s["kind"] == "committed"]
        scratch = [s for s in slots if s["kind"] == "scratch"]
        assert len(committed) == record.cache_before == (0 if k == 0 else len(a) + k - 1)
        # the prompt is unknown ("?"); the tokens generated before the step are named
        assert [s["token_id"] for s in committed] == ([] if k == 0 else [None] * len(a) + gen.tokens[:k - 1])
        assert [s["text"] for s in committed[:len(a)]] == ["?"] * len(committed[:len(a)])
        # the prefill wrote the (unknown) prompt; a decode step the token before it
        assert [s["token_id"] for s in scratch] == ([None] * len(a) if k == 0 else [gen.tokens[k - 1]])
    blind.show(0)
    assert blind.summary == (f"step 0 (prefill), verify: the target wrote {len(a)} entries to scratch after 0 "
                             "committed ones")

    reused = KVCacheViewer(pair.tokenizer, a)
    generate(pair.target, a, max_new_tokens=3, on_step=unnamed(reused))
    generate(pair.target, b, max_new_tokens=3, on_step=unnamed(reused))  # another prompt: the stored one does not fit
    reused.show(0)
    slots = reused.rows["target"]
    assert [(s["token_id"], s["text"], s["kind"]) for s in slots] == [(None, "?", "scratch")] * len(b)
    reused.show(2)  # the first decode step: b's entries unknown, not prompt a's tokens
    slots = reused.rows["target"]
    assert [s["token_id"] for s in slots if s["kind"] == "committed"] == [None] * len(b)
    generate(pair.target, a, max_new_tokens=3, on_step=unnamed(reused))  # back on the stored prompt: used again
    reused.show(0)
    assert [s["token_id"] for s in reused.rows["target"]] == a

    # generate's prefill record names its prompt: the viewer labels the slots with it, stored or not
    named = KVCacheViewer(pair.tokenizer)
    generate(pair.target, b, max_new_tokens=3, on_step=named)
    named.show(2)
    assert [s["token_id"] for s in named.rows["target"] if s["kind"] == "committed"] == b

    # joined mid-run: the prompt keeps its slots and the unseen tokens follow it, unknown
    gen = generate(pair.target, a, max_new_tokens=6)
    late = KVCacheViewer(pair.tokenizer, a).extend(gen.steps[2:])
    late.show(0)
    seen = len(gen.steps[0].emitted) + len(gen.steps[1].emitted)
    assert [s["token_id"] for s in late.rows["target"]][:len(a) + seen] == a + [None] * seen  # was [None] * 2 + a
    # then steps of another run without its first record: nothing held is known to belong to it
    other = generate(pair.target, pair.encode("JULIET.\n"), max_new_tokens=6)  # a cache shorter than the one held
    late.extend(other.steps[1:])
    late.show(len(late.frames) - 2 * (len(other.steps) - 1))
    record = other.steps[1]
    committed = [s for s in late.rows["target"] if s["kind"] == "committed"]
    assert record.cache_before < len(a) + len(gen.tokens) - 1  # so it cannot be a continuation
    assert len(committed) == record.cache_before and all(s["token_id"] is None for s in committed)


def test_kv_viewer_draws_no_draft_row_for_eagle(pair):
    """EAGLE's cache slot i holds the pair (f_i, x_{i+1}) and its drafts are rolled back inside propose: a draft row
    drawn as one slot per committed token labelled every slot one token early. It records no draft_cache now."""
    from lab.drafters import DraftModelDrafter, EagleDrafter

    prompt = pair.encode("ROMEO.\nBut soft")
    eagle = generate(pair.target, prompt, drafter=EagleDrafter.from_pretrained(pair, n_draft=4), max_new_tokens=8)
    assert all(step.draft_cache is None for step in eagle.steps)
    viewer = KVCacheViewer(pair.tokenizer, prompt_ids=prompt).extend(eagle.steps)
    assert all(set(frame["rows"]) == {"target"} for frame in viewer.frames)
    model = generate(pair.target, prompt, drafter=DraftModelDrafter(pair.draft, n_draft=4), max_new_tokens=8)
    viewer = KVCacheViewer(pair.tokenizer, prompt_ids=prompt).extend(model.steps)
    # the prefill is the target's alone (the drafter is reset after it): its two frames have no draft row
    assert model.steps[0].prefill and model.steps[0].draft_cache is None and len(viewer.frames) > 2
    assert all(set(frame["rows"]) == {"target"} for frame in viewer.frames[:2])
    assert all(set(frame["rows"]) == {"target", "draft"} for frame in viewer.frames[2:])


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


def test_the_viewer_names_what_it_takes_when_given_something_else():
    from widgets import KVCacheViewer

    for wrong in (None, "step", 3):
        with pytest.raises(TypeError, match=r"KVCacheViewer\.on_step takes a step record \(lab\.trace\.StepRecord"):
            KVCacheViewer()(wrong)


def test_both_viewers_take_a_finished_generation_as_the_token_stream_does(pair):
    """``extend(gen)`` with the Generation itself (as TokenStream.extend takes it) shows the same frames as
    ``extend(gen.steps)``; anything that is not step records is named before a frame is drawn."""
    prompt = pair.encode("ROMEO.\nBut soft")
    gen = generate(pair.target, prompt, drafter=DraftModelDrafter(pair.draft, n_draft=3), max_new_tokens=6)
    for cls in (KVCacheViewer, TreeViewer):
        whole, steps = cls(pair.tokenizer, prompt_ids=prompt), cls(pair.tokenizer, prompt_ids=prompt)
        whole.extend(gen)
        steps.extend(gen.steps)
        assert len(whole.records if cls is TreeViewer else whole.frames) > 0
        if cls is KVCacheViewer:
            assert whole.frames == steps.frames
        else:
            assert [r.drafted for r in whole.records] == [r.drafted for r in steps.records]
        fresh = cls(pair.tokenizer, prompt_ids=prompt)
        with pytest.raises(TypeError, match=rf"{cls.__name__}.extend: item 1 is not a step record"):
            fresh.extend([gen.steps[0], "token"])
        with pytest.raises(TypeError, match=rf"{cls.__name__}.extend takes step records .*got int"):
            fresh.extend(5)
        assert len(fresh.records if cls is TreeViewer else fresh.frames) == 0


def _cells(page):
    return re.findall(r'<span title="([^"]*)"[^>]*>([^<]*)</span>', page)


def test_kv_viewer_rows_when_the_draft_cache_outgrows_what_is_known_and_steps_are_skipped():
    """Frames store what each step changed and build their slots when read; these rows and cells were recorded
    from the viewer that stored every slot of every frame, and must not change."""
    viewer = KVCacheViewer(FakeTokenizer(), prompt_ids=[1, 2, 3], max_slots=12)
    viewer(StepRecord(index=0, position=0, drafted=[4, 5, 6], num_accepted=1, emitted=[4, 9], last_kind="resampled",
                      target_tokens=4, cache_before=2, draft_cache=(2, 5, 4)))
    viewer(StepRecord(index=1, position=2, drafted=[7], num_accepted=1, emitted=[7, 8], last_kind="bonus",
                      target_tokens=4, cache_before=4))
    # the draft's cache starts past the committed tokens (inside the drafts), then past the drafts too
    viewer(StepRecord(index=2, position=4, drafted=[10, 11], num_accepted=0, emitted=[12], last_kind="resampled",
                      target_tokens=3, cache_before=6, draft_cache=(5, 12, 3)))
    viewer(StepRecord(index=3, position=5, drafted=[0, 13], num_accepted=2, emitted=[0, 13, 14], last_kind="bonus",
                      target_tokens=3, cache_before=7, draft_cache=(11, 14, 13)))
    viewer(StepRecord(index=6, position=9, drafted=[15], num_accepted=1, emitted=[15, 16], last_kind="bonus",
                      target_tokens=2, cache_before=14, draft_cache=(14, 15, 15)))  # steps 4 and 5 not seen
    short = {"committed": "co", "scratch": "sc", "kept": "ke", "discarded": "di"}

    def row(frame, name):
        return [(s["position"], s["token_id"], s["text"], short[s["kind"]]) for s in viewer.frames[frame]["rows"][name]]

    known = [(0, 1, "t1"), (1, 2, "t2"), (2, 3, "t3"), (3, 4, "t4"), (4, 9, "t9"), (5, 7, "t7")]
    assert row(5, "target") == [(*s, "co") for s in known] + [(6, 8, "t8", "ke"), (7, 10, "t10", "di"),
                                                              (8, 11, "t11", "di")]
    assert row(4, "draft") == ([(*s, "co") for s in known[:5]] + [(5, 7, "t7", "sc"), (6, 8, "t8", "sc"),
                               (7, 10, "t10", "sc"), (8, 11, "t11", "sc")]
                               + [(p, None, "?", "sc") for p in (9, 10, 11)])
    # step 3: the draft's committed entries run into the drafts (t0 is the <script> token), its fed ones are unknown
    assert row(7, "draft")[6:] == [(6, 8, "t8", "co"), (7, 12, "t12", "co"), (8, 0, SCRIPT, "co"),
                                   (9, 13, "t13", "co"), (10, None, "?", "ke"), (11, None, "?", "ke"),
                                   (12, None, "?", "di")]
    # the skipped steps' tokens are unknown; positions follow cache_before
    assert row(9, "target")[9:] == [(9, 13, "t13", "co"), (10, 14, "t14", "co"), (11, None, "?", "co"),
                                    (12, None, "?", "co"), (13, None, "?", "co"), (14, None, "?", "ke"),
                                    (15, 15, "t15", "ke")]
    viewer.show(7)
    assert viewer.rows == viewer.frames[7]["rows"]
    assert viewer.summary == ("step 3, commit: the target kept 3 and discarded 0; the draft kept 2 and discarded 1 "
                              "(2 of 2 drafts accepted)")
    cells = _cells(viewer.html)  # 10 target slots, then the draft's 13 with the first one hidden
    assert cells[:2] == [("position 0 · committed · id 1", "t1"), ("position 1 · committed · id 2", "t2")]
    assert cells[8] == ("position 8 · kept → committed · id 0", "&lt;script&gt;alert(1)&lt;/script&gt;")
    assert "… 1 earlier" in viewer.html and len(cells) == 10 + 12
    assert cells[10] == ("position 1 · committed · id 2", "t2")
    assert cells[-3:] == [("position 10 · kept → committed", "?"), ("position 11 · kept → committed", "?"),
                          ("position 12 · discarded (rolled back)", "?")]


def test_kv_viewer_frames_do_not_copy_the_committed_prefix():
    """Every frame used to hold a slot dict per committed token: 1,000 steps after a 104-token prompt took 948 MB
    (2.3 MB now). 200 steps here: about 38 MB then."""
    import tracemalloc

    prompt = list(range(10, 114))
    records = [StepRecord(index=0, position=0, drafted=[], num_accepted=0, emitted=[5], last_kind="bonus",
                          target_tokens=len(prompt), cache_before=0, prefill=True)]
    cache = len(prompt) + 1
    for k in range(1, 200):
        records.append(StepRecord(index=k, position=k, drafted=[20, 21, 22, 23], num_accepted=1, emitted=[20, 30],
                                  last_kind="resampled", target_tokens=5, cache_before=cache - 1,
                                  draft_cache=(cache - 1, cache + 3, cache + 1)))
        cache += 2
    viewer = KVCacheViewer(FakeTokenizer(), prompt, max_slots=6)
    tracemalloc.start()
    try:
        viewer.extend(records)
        held, _peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert held < 4_000_000, held
    target = viewer.rows["target"]  # the last step's rows are still all there
    assert len(target) == cache + 2 and [s["token_id"] for s in target[-5:]] == [30, 20, 21, 22, 23]
    assert [s["kind"] for s in target[-5:]] == ["kept", "kept", "discarded", "discarded", "discarded"]
    cells = _cells(viewer.html)  # max_slots 6 of each row: the target's, then the draft's
    assert viewer.html.count("earlier</span>") == 2 and len(cells) == 12
    assert cells[5] == (f"position {cache + 1} · discarded (rolled back) · id 23", "t23")
    assert cells[-1] == (f"position {cache} · discarded (rolled back) · id 22", "t22")
    # frames[k] builds frame k only: lesson 07 reads frames[2k + 1] in a loop over the steps
    from widgets import kv_viewer

    built = []
    original = kv_viewer._Row.slots
    kv_viewer._Row.slots = lambda row, *args: built.append(row) or original(row, *args)
    try:
        frames = viewer.frames
        assert len(frames) == 400 and not built
        assert frames[-1]["rows"] == viewer.rows and len(built) == 2 * 2  # target and draft, for rows and frames[-1]
        assert frames[3:5] == [frames[3], frames[4]] and frames == list(viewer.frames)
    finally:
        kv_viewer._Row.slots = original
