"""The EAGLE-3 draft (lab.drafters.eagle3; Li et al. 2025, §3) with the bundled target: the fused multi-layer
features the decode loop hands over, the d2t table, its KV cache after rollback, and the oracles of DESIGN.md."""
import pytest
import torch

from lab.batched import generate_batch
from lab.decode import generate
from lab.drafters.base import DraftRequest
from lab.drafters.eagle import EagleDraftModel
from lab.drafters.eagle3 import EAGLE3_DIRS, Eagle3Drafter, Eagle3DraftModel, default_layers
from lab.metrics import chi_square
from lab.models import forward, layer_states, new_cache
from lab.registry import make_drafter
from tests.helpers import next_token_probs

NEW = 24


pytestmark = pytest.mark.usefixtures("one_thread")  # one CPU thread per module (tests/lab/conftest.py)


@pytest.fixture(scope="module")
def model(pair):
    return Eagle3DraftModel.from_pretrained(pair.target, EAGLE3_DIRS["shakespeare"])


def fresh_layers(pair, ids, layers):
    """The target's hidden states of ``layers`` over ``ids``, concatenated, from one plain forward."""
    with torch.no_grad():
        out = pair.target(input_ids=torch.tensor([ids], device=pair.device), output_hidden_states=True)
    return torch.cat([out.hidden_states[i][0] for i in layers], dim=-1)


class Recording(Eagle3Drafter):
    """An EAGLE-3 drafter that keeps every hidden-state tensor the decode loop hands it."""

    def reset(self, prompt_ids, hidden=None):
        self.seen = [hidden.clone()]
        super().reset(prompt_ids, hidden=hidden)

    def observe(self, output):
        self.seen.append(output.hidden[output.path].clone())
        super().observe(output)


def test_the_committed_draft_reads_three_layers_and_maps_draft_ids_with_d2t(pair, model):
    assert default_layers(6) == (2, 3, 6) and default_layers(30) == (2, 15, 30)
    assert tuple(model.config["hidden_layers"]) == (2, 3, 6)
    V_d = model.config["draft_vocab_size"]
    assert 1 <= V_d < 2048 and model.head.out_features == V_d and model.fc.in_features == 3 * 384
    ids = torch.arange(V_d, device=model.d2t.device)
    assert torch.equal(model.draft_vocab, ids + model.d2t)  # target id = j + d2t[j]
    assert model.draft_vocab.unique().numel() == V_d
    a = torch.randn(2, model.config["width"], device=pair.device)
    full, reduced = model.logits(a), model.head_logits(a)
    assert full.shape == (2, 2048) and reduced.shape == (2, V_d)
    torch.testing.assert_close(full[:, model.draft_vocab], reduced)
    outside = torch.ones(2048, dtype=torch.bool)
    outside[model.draft_vocab] = False
    assert torch.isneginf(full[:, outside]).all()


@pytest.mark.parametrize("batched", [False, True], ids=["generate", "generate_batch"])
def test_the_loop_hands_over_the_layers_of_a_fresh_forward(pair, prompts, batched):
    drafter = Recording.from_pretrained(pair, n_draft=3)
    if batched:
        gen = generate_batch(pair.target, [prompts[0]], drafters=[drafter], max_new_tokens=12).rows[0]
    else:
        gen = generate(pair.target, prompts[0], drafter=drafter, max_new_tokens=12)
    committed = prompts[0] + gen.tokens
    fresh = fresh_layers(pair, committed, (2, 3, 6))
    # reset(prompt + [first token]) gets the prefill's rows: the whole prompt, every committed token but the newest
    assert drafter.seen[0].shape == (len(prompts[0]), 3 * 384)
    torch.testing.assert_close(drafter.seen[0], fresh[: len(prompts[0])], atol=1e-4, rtol=1e-4)
    assert gen.steps[0].prefill and gen.steps[0].emitted == gen.tokens[:1]
    base = len(prompts[0])  # the first decode step feeds the first new token, at position len(prompt)
    for step, rows in zip(gen.steps[1:], drafter.seen[1:]):  # row 0 = the last committed token, then accepted drafts
        assert rows.shape == (step.num_accepted + 1, 3 * 384)
        torch.testing.assert_close(rows, fresh[base: base + len(rows)], atol=1e-4, rtol=1e-4)
        base += len(step.emitted)
    assert len(drafter.seen) == len(gen.steps)  # reset, then one observe per decode step (none for the prefill)
    assert base == len(committed) - 1


def test_forward_picks_layers_as_output_hidden_states_does(pair, prompts):
    ids = prompts[1][:9]
    logits, hidden = forward(pair.target, ids, new_cache(), output_hidden_states=True, hidden_layers=(0, 4, -1))
    torch.testing.assert_close(hidden, fresh_layers(pair, ids, (0, 4, 6)), atol=1e-5, rtol=1e-5)
    _, last = forward(pair.target, ids, new_cache(), output_hidden_states=True)  # the default: the last layer only
    torch.testing.assert_close(last, hidden[:, 768:])
    with pytest.raises(ValueError, match="hidden_layers"):
        layer_states((torch.zeros(1, 2),) * 7, (7,))


def test_cache_and_logits_after_rollback_equal_a_fresh_run(pair, prompts, model):
    drafter = Eagle3Drafter(pair.target, model, n_draft=4)
    gen = generate(pair.target, prompts[0], drafter=drafter, max_new_tokens=17)
    assert any(s.num_accepted < len(s.drafted) for s in gen.steps)  # some drafts were rejected
    committed = prompts[0] + gen.tokens
    drafter.propose(DraftRequest(committed, 4))  # feeds the pending true pairs, drafts, rolls back
    assert drafter.cached_pairs() == len(committed) - 1
    with torch.no_grad():
        g = model.fuse(fresh_layers(pair, committed[:-1], (2, 3, 6)))
        fresh = new_cache()
        predicted = model(g, committed[1:], fresh, position_ids=torch.arange(1, len(committed)))
    torch.testing.assert_close(drafter._root, predicted[-1], atol=1e-4, rtol=1e-4)
    with torch.no_grad():
        torch.testing.assert_close(model.logits(drafter._root), model.logits(predicted[-1]), atol=1e-3, rtol=1e-4)
    for mine, theirs in zip(drafter._cache.layers, fresh.layers):
        torch.testing.assert_close(mine.keys, theirs.keys, atol=1e-4, rtol=1e-4)
        torch.testing.assert_close(mine.values, theirs.values, atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize("n_draft", [1, 3])
def test_greedy_equals_autoregressive(pair, prompts, reference, model, n_draft):
    drafter = Eagle3Drafter(pair.target, model, n_draft=n_draft)
    accepted = 0
    for prompt, ref in zip(prompts, reference):
        gen = generate(pair.target, prompt, drafter=drafter, max_new_tokens=NEW)
        assert gen.tokens == ref
        accepted += sum(s.num_accepted for s in gen.steps)
    assert accepted > 0  # the trained draft gets tokens accepted


def test_max_new_tokens_eos_inside_a_block_and_a_one_token_prompt(pair, prompts, reference, model):
    drafter = Eagle3Drafter(pair.target, model, n_draft=4)
    for n in (1, 2, 7):
        assert generate(pair.target, prompts[1], drafter=drafter, max_new_tokens=n).tokens == reference[1][:n]
    ref = reference[1]
    for j in (3, 9, 14):
        eos = ref[j]
        expected = ref[: ref.index(eos) + 1]
        gen = generate(pair.target, prompts[1], drafter=drafter, max_new_tokens=NEW, eos_token_id=eos)
        assert gen.tokens == expected
    one = prompts[2][:1]
    assert generate(pair.target, one, drafter=drafter, max_new_tokens=9).tokens == \
        generate(pair.target, one, max_new_tokens=9).tokens


def test_first_speculated_token_matches_the_target_and_drafts_stay_in_the_draft_vocabulary(pair, prompts, model):
    ids = prompts[0][:8]  # the target continues it with the held-out text's next token 83 % of the time, where the
    # draft and the target disagree enough that a draft accepted blindly would fail the chi-square
    drafter = Eagle3Drafter(pair.target, model, n_draft=1)  # the first speculated token: the first draft only
    allowed = set(model.draft_vocab.tolist())
    counts, prefixes = torch.zeros(2048), []
    for seed in range(500):  # token 0 comes from the prefill, token 1 from the first decode step's verification
        gen = generate(pair.target, ids, drafter=drafter, max_new_tokens=3, temperature=1.0, seed=seed)
        assert gen.steps[0].prefill and gen.steps[1].drafted and set(gen.steps[1].drafted) <= allowed
        counts[gen.tokens[1]] += 1
        prefixes.append(ids + gen.tokens[:1])
    assert chi_square(counts, next_token_probs(pair.target, prefixes)).pvalue > 1e-3
    drafter = Eagle3Drafter(pair.target, model, n_draft=3)
    drafter.reset(ids, hidden=fresh_layers(pair, ids[:-1], (2, 3, 6)))
    draft = drafter.propose(DraftRequest(ids, 3, 1.0, None, None, torch.Generator().manual_seed(0)))
    outside = torch.ones(2048, dtype=torch.bool)
    outside[model.draft_vocab] = False
    assert draft.probs.shape == (3, 2048) and draft.probs[:, outside].sum() == 0  # q = 0 outside: exactness


def test_save_load_round_trip_and_registry(pair, model, tmp_path):
    model.save_pretrained(tmp_path / "e3")
    again = Eagle3DraftModel.from_pretrained(pair.target, tmp_path / "e3")
    assert torch.equal(again.d2t, model.d2t)
    for (name, a), (_, b) in zip(model.state_dict().items(), again.state_dict().items()):
        if not name.startswith("layer.embed_tokens"):  # unused and not saved
            torch.testing.assert_close(a, b, msg=name)
    built = make_drafter("eagle3", pair, 2)
    assert isinstance(built, Eagle3Drafter) and built.n_draft == 2 and built.hidden_layers == (2, 3, 6)
    assert "Eagle3Drafter(n_draft=2, layers=(2, 3, 6)" in repr(built)


def test_the_targets_head_option_scores_with_the_targets_own_rows_and_saves_none(pair, prompts, tmp_path):
    """config["head"] = "target": no trained head; the draft's logits are the target's LM head on the draft
    vocabulary's rows, the file holds no head, and the draft still decodes exactly."""
    torch.manual_seed(0)
    vocab = torch.tensor([5, 17, 2, 300, 41, 1999])
    config = {"width": 384, "heads": 6, "kv_heads": 6, "intermediate": 64, "head": "target"}
    shared = Eagle3DraftModel(pair.target, config, draft_vocab=vocab)
    assert shared.head is None and not any("head" in name for name, _ in shared.named_parameters())
    a = torch.randn(3, 384, device=pair.device)
    with torch.no_grad():
        expected = pair.target.get_output_embeddings()(a)[:, vocab]
    torch.testing.assert_close(shared.head_logits(a), expected)
    own = Eagle3DraftModel(pair.target, dict(config, head="own"), draft_vocab=vocab)
    saved = torch.nn.utils.parameters_to_vector(own.parameters()).numel()
    assert saved - torch.nn.utils.parameters_to_vector(shared.parameters()).numel() == 384 * len(vocab)
    shared.save_pretrained(tmp_path / "shared")
    again = Eagle3DraftModel.from_pretrained(pair.target, tmp_path / "shared")
    assert again.config["head"] == "target" and again.head is None
    torch.testing.assert_close(again.head_logits(a), expected)
    drafter = Eagle3Drafter(pair.target, again, n_draft=3)
    ar = generate(pair.target, prompts[0], max_new_tokens=12)
    assert generate(pair.target, prompts[0], drafter=drafter, max_new_tokens=12).tokens == ar.tokens
    with pytest.raises(ValueError, match=r"config\['width'\] must be the target's width \(384\)"):
        Eagle3DraftModel(pair.target, dict(config, width=192), draft_vocab=vocab)
    with pytest.raises(ValueError, match=r"config\['head'\] must be 'own' or 'target'"):
        Eagle3DraftModel(pair.target, dict(config, head="tied"), draft_vocab=vocab)


def test_bad_arguments_are_named(pair, model, prompts, tmp_path):
    for layers in ((2, 9), (2, True, 6), (2, 3.7, 6)):  # True and 3.7 were taken as layers 1 and 3
        with pytest.raises(ValueError, match="hidden_layers"):
            Eagle3DraftModel(pair.target, hidden_layers=layers)
    assert [default_layers(n) for n in (3, 4, 5)] == [(0, 1, 3), (1, 2, 4), (1, 2, 5)]  # as the docstring says
    with pytest.raises(ValueError, match="draft_vocab"):
        Eagle3DraftModel(pair.target, draft_vocab=[1, 1])
    with pytest.raises(TypeError, match="draft_model must be an Eagle3DraftModel"):
        Eagle3Drafter(pair.target, EagleDraftModel(pair.target))
    with pytest.raises(ValueError, match="n_draft"):
        Eagle3Drafter(pair.target, model, n_draft=0)
    drafter = Eagle3Drafter(pair.target, model)
    with pytest.raises(ValueError, match=r"hidden must be \[len\(prompt_ids\) - 1, 3 · D\]"):
        drafter.reset(prompts[0], hidden=torch.zeros(len(prompts[0]) - 1, 384))
    with pytest.raises(ValueError, match="width 1152"):
        model.fuse(torch.zeros(2, 384))
    with pytest.raises(FileNotFoundError, match="train eagle3"):
        Eagle3DraftModel.from_pretrained(pair.target, tmp_path)
    with pytest.raises(TypeError, match="ModelPair"):
        Eagle3Drafter.from_pretrained(pair.target)


def test_eagle3_card_reads_both_recipes_cards_into_one_shape():
    """Lesson 11 quotes the committed EAGLE-3 card of whichever pair it runs on: the chat recipe's (agreement per
    kind of request in training.json) and the Shakespeare recipe's (agreement in measurements.json) give the same
    keys, holding the files' own numbers."""
    import json

    from lab.drafters.eagle import EAGLE_DIRS
    from lab.drafters.eagle3 import EAGLE3_DIRS, eagle3_card

    real, small = eagle3_card("smollm2-135m"), eagle3_card("shakespeare")
    assert set(real) == set(small)
    train = json.loads((EAGLE3_DIRS["smollm2-135m"] / "training.json").read_text())
    assert real["agreement"] == [train["held_out_agreement"][f"step_{k}"]["all"] for k in (1, 2, 3)]
    assert real["eagle_agreement"] == train["eagle_on_the_same_held_out"]["agreement"]["all"]
    eagle = json.loads((EAGLE_DIRS["smollm2-135m"] / "training.json").read_text())
    # a continued draft counts the steps of every run: the first run's, then the continuation's
    assert real["eagle_steps"] == eagle["recipe"]["steps"] + eagle["continued_from"]["recipe"]["steps"] == 1500
    assert real["steps"] == train["recipe"]["steps"] + train["continued_from"]["recipe"]["steps"] == 2500
    assert "continuing the first run on data rebuilt later" in real["data"]
    assert real["held_out"] == f"its {train['data']['held_out_sequences']} held-out sequences"
    assert real["date"] == "2026-12-06 13:09 UTC"  # when the card's decoding run ran (lesson 11 prints it)
    measured = json.loads((EAGLE3_DIRS["shakespeare"] / "measurements.json").read_text())
    assert small["agreement"] == measured["teacher_forced_agreement"]["eagle3"]
    assert small["eagle_agreement"] == measured["teacher_forced_agreement"]["eagle"][0]
    assert small["eagle_steps"] == json.loads((EAGLE_DIRS["shakespeare"] / "training.json").read_text())["steps"]
    for card in (real, small):
        assert len(card["agreement"]) == 3 and all(0 < a < 1 for a in card["agreement"])
        assert {"eagle N=3", "eagle3 N=3"} <= set(card["decoding"]) and card["settings"]["prompts"] == 8
    with pytest.raises(ValueError, match="pair_name must be one of"):
        eagle3_card("gpt2")
