"""Widget review fixes (token trees in TokenStream, KV slots of trees and unknown prompts, a run cut inside a
character, reused widgets, the picker's set(), the speedup explorer's α, argument errors): each test failed before.

Real runs use the bundled pair at a few dozen tokens, so the file takes seconds on a 2-core CPU.
"""
import pytest
import torch

from lab.decode import generate
from lab.trace import StepRecord
from widgets.kv_viewer import KVCacheViewer
from widgets.picker import StrategyPicker
from widgets.residual import ResidualExplorer
from widgets.speedup import SpeedupExplorer
from widgets.token_stream import TokenStream

FFFD = "\ufffd"


@pytest.fixture(scope="module")
def pair():
    from lab.models import load_pair

    return load_pair("shakespeare", device="cpu")


@pytest.fixture(scope="module")
def medusa(pair):
    from lab.cli import make_drafter

    return make_drafter("medusa", pair, 4)


def shown_text(stream):
    return "".join(t["text"] for t in stream.tokens if t["kind"] != "rejected")


# --- 1, 2: token trees in TokenStream ------------------------------------------------------------------------------

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
    # A tree's bonus token: the path reached a leaf; the text must not say every draft of the step was accepted.
    position = 0
    for record in gen.steps:
        if record.last_kind == "bonus" and len(record.emitted) > record.num_accepted:
            stream.select(position + record.num_accepted)
            assert (f"the accepted path ({record.num_accepted} of the tree's {len(record.drafted)} drafts) reached "
                    "a node with no children") in stream.detail_text
            assert "every draft of this step" not in stream.detail_text
            break
        position += len(record.emitted)
    else:
        pytest.fail("no tree step ended in a bonus token")


def test_race_stream_stats_equal_the_summary_and_show_one_speed(pair):
    from widgets.race import RaceDashboard

    dashboard = RaceDashboard(pair, max_new_tokens=24)
    results = dashboard.race(drafter="medusa", temperature=0.0)
    stream = dashboard.speculative_stream
    assert stream.stats["acceptance_rate"] == pytest.approx(results["speculative"]["acceptance_rate"])
    assert stream.stats["drafted"] == sum(len(r.drafted) for r in stream.steps)
    # tokens/s appears once per side, in the header (own compute clock), not in the stream's stats line
    for side in ("autoregressive", "speculative"):
        assert "tokens/s" not in dashboard._streams[side].stats_text
        assert "tokens/s" in dashboard._headers[side].value
        assert "tokens/s" not in dashboard._streams[side].html


# --- 3: the residual at a tree's resampled position -----------------------------------------------------------------

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


# --- 4, 5, 13: KVCacheViewer ------------------------------------------------------------------------------------------

def test_kv_viewer_keeps_a_trees_accepted_path_and_draws_no_medusa_draft_row(pair, medusa):
    ids = pair.encode("ROMEO.\n")
    viewer = KVCacheViewer(pair.tokenizer, ids)
    gen = generate(pair.target, ids, drafter=medusa, max_new_tokens=24, on_step=viewer)
    assert any(list(r.path) != list(range(len(r.path))) for r in gen.steps)  # a path that skips listed nodes
    committed = list(ids)
    for k, record in enumerate(gen.steps):
        viewer.show(2 * k + 1)
        target = viewer.rows["target"]
        kept = [s for s in target if s["kind"] == "kept"]
        assert [s["token_id"] for s in kept] == [committed[-1]] + [record.drafted[i] for i in record.path]
        assert [s["position"] for s in kept] == [record.cache_before] + [record.cache_before + 1 + i
                                                                       for i in record.path]
        assert set(viewer.rows) == {"target"}  # Medusa's heads have no cache: no empty draft row
        assert "the draft" not in viewer.summary
        committed += record.emitted


def test_kv_viewer_without_prompt_and_reused_on_another_prompt_follows_cache_before(pair):
    a, b = pair.encode("ROMEO.\n"), pair.encode("JULIET.\nO Romeo, wherefore")
    blind = KVCacheViewer(pair.tokenizer)
    gen = generate(pair.target, a, max_new_tokens=3, on_step=blind)
    for k, record in enumerate(gen.steps):
        blind.show(2 * k)
        slots = blind.rows["target"]
        assert [s["position"] for s in slots] == list(range(len(slots)))
        committed = [s for s in slots if s["kind"] == "committed"]
        assert len(committed) == record.cache_before
        assert slots[record.cache_before]["kind"] == "scratch"
        # the prompt is unknown ("?"); the tokens generated before the step are named
        known = [] if k == 0 else [None] + gen.tokens[:k - 1]  # the prompt's last token, then generated ones
        assert [s["token_id"] for s in committed] == [None] * (len(a) - 1) + known
        assert [s["text"] for s in committed[:len(a) - 1]] == ["?"] * (len(a) - 1)
        assert slots[record.cache_before]["token_id"] == (None if k == 0 else gen.tokens[k - 1])
    blind.show(0)
    assert blind.summary == f"step 0, verify: the target wrote 1 entries to scratch after {len(a) - 1} committed ones"

    reused = KVCacheViewer(pair.tokenizer, a)
    generate(pair.target, a, max_new_tokens=3, on_step=reused)
    generate(pair.target, b, max_new_tokens=3, on_step=reused)  # another prompt: the stored one does not fit
    reused.show(0)
    slots = reused.rows["target"]
    assert len([s for s in slots if s["kind"] == "committed"]) == len(b) - 1
    assert all(s["token_id"] is None for s in slots[:len(b)])  # unknown, not prompt a's tokens
    generate(pair.target, a, max_new_tokens=3, on_step=reused)  # back on the stored prompt: it is used again
    reused.show(0)
    assert [s["token_id"] for s in reused.rows["target"]] == a

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


# --- 6: a run that ends inside a character ----------------------------------------------------------------------------

def test_token_stream_shows_an_unfinished_character_on_the_last_token(pair):
    prompt = pair.encode("Caf")
    first, second = pair.encode("\u00e9")  # "é" is two byte tokens
    stream = TokenStream(pair.tokenizer, prompt)
    stream(StepRecord(index=0, position=0, drafted=[first], num_accepted=1, emitted=[first], last_kind="bonus",
                      truncated=True))
    expected = pair.tokenizer.decode(prompt + [first])[len("Caf"):]
    assert expected == FFFD
    assert stream.tokens[-1]["text"] == FFFD and stream._view.tokens[-1]["s"] == FFFD
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


# --- 7: a TokenStream reused for a run on another prompt -------------------------------------------------------------

def test_token_stream_reused_on_another_prompt_does_not_decode_after_the_old_one(pair):
    a, b = pair.encode("ROMEO.\n"), pair.encode("JULIET.\nO Romeo, wherefore")
    stream = TokenStream(pair.tokenizer, a)
    generate(pair.target, a, max_new_tokens=3, on_step=stream)
    gen = generate(pair.target, b, max_new_tokens=3, on_step=stream)
    assert [t for t in stream.tokens if t["kind"] == "prompt"] == []
    assert shown_text(stream) == pair.decode(gen.tokens)
    gen = generate(pair.target, a, max_new_tokens=3, on_step=stream)  # the stored prompt fits again
    assert [t["token_id"] for t in stream.tokens if t["kind"] == "prompt"] == a
    assert shown_text(stream) == pair.decode(a + gen.tokens)
    stream.reset(b)
    gen = generate(pair.target, b, max_new_tokens=3, on_step=stream)
    assert shown_text(stream) == pair.decode(b + gen.tokens)
    gen = generate(pair.target, a, max_new_tokens=3, on_step=stream)  # shorter than the stored prompt b
    assert [t for t in stream.tokens if t["kind"] == "prompt"] == []
    assert shown_text(stream) == pair.decode(gen.tokens)


def test_token_stream_prompt_may_be_the_tail_of_the_runs_prompt(pair):
    # Lesson 08 shows the last 60 tokens of a long prompt: a cache longer than the stored prompt is no mismatch.
    ids = pair.encode("JULIET.\nO Romeo, Romeo, wherefore art thou")
    stream = TokenStream(pair.tokenizer, ids[-4:])
    gen = generate(pair.target, ids, max_new_tokens=3, on_step=stream)
    assert [t["token_id"] for t in stream.tokens if t["kind"] == "prompt"] == ids[-4:]
    assert shown_text(stream) == pair.decode(ids[-4:] + gen.tokens)
    gen = generate(pair.target, ids, max_new_tokens=3, on_step=stream)  # the same run again keeps it
    assert [t["token_id"] for t in stream.tokens if t["kind"] == "prompt"] == ids[-4:]


# --- 8: StrategyPicker.set ----------------------------------------------------------------------------------------

def test_picker_set_checks_everything_first_and_takes_what_the_constructor_takes():
    picker = StrategyPicker()
    card, workload = picker.html, picker.workload
    with pytest.raises(ValueError, match=r"temperature must be in \[0, 1.5\]"):
        picker.set(task="code", temperature=2.0)
    assert picker.workload == workload and picker.html == card  # nothing moved
    with pytest.raises(ValueError, match="task must be one of chat, code"):
        picker.set(task="foo")
    with pytest.raises(ValueError, match="exclude may only name"):
        picker.set(exclude=("foo",))
    with pytest.raises(ValueError, match="tensor_parallel_size must be one of"):
        picker.set(tensor_parallel_size=3)
    assert picker.workload == workload
    picker.set(task="code", memory_headroom_gb=3.0)  # 3.0 is not one of the dropdown's choices
    fresh = StrategyPicker(task="code", memory_headroom_gb=3.0)
    assert picker.workload == fresh.workload and picker.workload["memory_headroom_gb"] == 3.0
    assert picker.recommendation.method == fresh.recommendation.method and picker.html == fresh.html
    assert picker.highlighted_workload == "code"


# --- 9, 12: explorers -----------------------------------------------------------------------------------------------

def test_speedup_explorer_names_its_alpha_per_token_and_fits_n_draft_to_max_n():
    explorer = SpeedupExplorer()
    assert explorer.alpha_slider.description == "per-token acceptance α"
    assert "alpha_from_steps" in SpeedupExplorer.__doc__
    assert explorer.n_draft == 5
    small = SpeedupExplorer(max_n=3)
    assert small.n_draft == 3 and small.n_slider.max == 3
    with pytest.raises(ValueError, match="n_draft"):
        SpeedupExplorer(max_n=3, n_draft=5)  # one the user passed is still checked


def test_residual_explorer_axes_are_categories():
    explorer = ResidualExplorer(target_probs=[0.5, 0.3, 0.2], draft_probs=[0.2, 0.3, 0.5], tokens=["1", "10", "2"])
    axes = [explorer.figure.layout[name] for name in ("xaxis", "xaxis2", "xaxis3")]
    assert [axis.type for axis in axes] == ["category"] * 3
    assert list(explorer.figure.data[0].x) == ["1", "10", "2"]


# --- 10, 11: TokenStream and KVCacheViewer arguments ------------------------------------------------------------------

def test_token_stream_show_speed():
    record = StepRecord(index=0, position=0, drafted=[1], num_accepted=1, emitted=[1, 2], last_kind="bonus",
                        draft_ms=1.0, verify_ms=1.0)
    assert TokenStream(None).extend([record]).stats_text.endswith("1000 tokens/s (draft + verify time)")
    quiet = TokenStream(None, show_speed=False).extend([record])
    assert quiet.stats_text == "1 step \u00b7 acceptance rate 1.00 (1/1 drafts) \u00b7 2.00 tokens per target call"
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



# --- diff review (session 10) ------------------------------------------------------------------------------------

class _ByteTokenizer:
    """Token id → bytes; decode joins the bytes and shows an incomplete UTF-8 end as U+FFFD, as byte-level BPE does."""

    pieces = {0: b"C", 1: b"x\xc3", 2: b"\xa9", 3: b"a"}

    def decode(self, ids):
        return b"".join(self.pieces[int(i)] for i in ids).decode("utf-8", errors="replace")

    def __len__(self):
        return len(self.pieces)


def test_a_token_ending_inside_a_character_keeps_its_complete_characters():
    stream = TokenStream(_ByteTokenizer(), [0])
    stream(StepRecord(index=0, position=0, drafted=[1], num_accepted=1, emitted=[1], last_kind="bonus"))
    assert shown_text(stream) == _ByteTokenizer().decode([0, 1]) == "Cx" + FFFD  # was "C" + FFFD: the x was lost
    stream.select(0)
    assert stream.selection["text"] == "x" + FFFD
    stream(StepRecord(index=1, position=1, drafted=[2], num_accepted=1, emitted=[2], last_kind="bonus"))
    assert shown_text(stream) == "Cx\u00e9"


def test_tree_steps_recorded_in_bfloat16_are_drawn(pair, medusa):
    ids = pair.encode("ROMEO.\n")
    gen = generate(pair.target, ids, drafter=medusa, max_new_tokens=30, temperature=0.9, seed=2, record_probs=True)
    steps = [StepRecord(**{**vars(r), "target_probs": r.target_probs.to(torch.bfloat16)}) for r in gen.steps]
    assert any(r.last_kind == "resampled" for r in steps)
    stream = TokenStream(pair.tokenizer, ids).extend(steps)  # raised "target_probs must sum to 1" before
    assert stream.generated_ids == gen.tokens
    resampled = [d for d in stream._details if d["kind"] == "resampled"]
    assert resampled and all(d["probs"] is not None for d in resampled)


# --- second widget review (session 12) ---------------------------------------------------------------------------
def test_race_near_the_context_limit_warms_up_within_what_was_asked(pair):
    """The warm-up used to ask for 4 new tokens whatever the race asked for: 510 + 2 tokens passed the dashboard's
    check and then failed in the warm-up with an error about 4."""
    from widgets.race import RaceDashboard

    limit = pair.target.config.max_position_embeddings
    text = pair.tokenizer.decode(list(range(300, 300 + limit)))
    ids = pair.encode(text)[: limit - 2]
    prompt = pair.tokenizer.decode(ids)
    assert len(pair.encode(prompt)) == limit - 2
    dashboard = RaceDashboard(pair, prompts=[prompt], max_new_tokens=2)
    results = dashboard.race(drafter="model", n_draft=2)
    assert dashboard.error is None
    assert all(len(result["tokens"]) == 2 for result in results.values())


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


def test_tree_residual_is_none_for_a_typical_tree_step():
    tree_step = StepRecord(index=0, position=0, drafted=[1, 2], num_accepted=0, emitted=[3], last_kind="resampled",
                           target_probs=torch.full((3, 4), 0.25), parents=[-1, -1], acceptance="typical")
    from widgets.token_stream import tree_residual

    assert tree_residual(tree_step) is None
    exact = StepRecord(index=0, position=0, drafted=[1, 2], num_accepted=0, emitted=[3], last_kind="resampled",
                       target_probs=torch.full((3, 4), 0.25), parents=[-1, -1])
    residual, rejected = tree_residual(exact)
    assert rejected == 2 and torch.allclose(residual, torch.tensor([0.5, 0.0, 0.0, 0.5]))


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
    assert all(set(frame["rows"]) == {"target", "draft"} for frame in viewer.frames)
