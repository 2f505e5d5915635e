"""The EAGLE draft (lab.drafters.eagle; Li et al. 2024): size, shapes, files, its KV-cache bookkeeping, and the
decoding oracles of DESIGN.md with the bundled target."""
import pytest
import torch

from lab.decode import generate
from lab.drafters import DynamicTree, EagleDrafter
from lab.drafters.base import DraftRequest
from lab.drafters.eagle import DEFAULT_TREE, EAGLE_DIR, EagleDraftModel, trainable_parameters
from lab.metrics import chi_square
from lab.models import forward, new_cache
from lab.prompts import held_out_prompts
from lab.trees import check_choices
from tests.helpers import next_token_probs, tiny_llama

NEW = 24


pytestmark = pytest.mark.usefixtures("one_thread")  # one CPU thread per module (tests/lab/conftest.py)


def vanilla_parameters(pair) -> int:
    return sum(p.numel() for p in pair.draft.parameters())


def test_fewer_trainable_parameters_than_the_vanilla_draft(pair):
    model = EagleDraftModel(pair.target)
    assert 0 < trainable_parameters(model) < vanilla_parameters(pair)
    # the target's embedding and LM head are shared, not copied, and never trained here
    assert all(p is not q for p in model.parameters() for q in pair.target.parameters())
    assert EagleDrafter.from_pretrained(pair).model.config["feature_size"] == pair.target.config.hidden_size
    assert trainable_parameters(EagleDrafter.from_pretrained(pair).model) < vanilla_parameters(pair)


def test_shapes(pair):
    torch.manual_seed(0)
    model = EagleDraftModel(pair.target).eval()
    D, V = pair.target.config.hidden_size, pair.target.config.vocab_size
    feats, toks = torch.randn(2, 5, D), torch.randint(0, V, (2, 5))
    with torch.no_grad():
        out = model(feats, toks)
        assert out.shape == (2, 5, D) and out.dtype == torch.float32
        assert model(feats[0], toks[0]).shape == (5, D)
        assert model.logits(out).shape == (2, 5, V)
        with pytest.raises(ValueError, match="tokens"):
            model(feats, toks[:, :4])


def test_save_load_round_trip(pair, tmp_path):
    torch.manual_seed(1)
    model = EagleDraftModel(pair.target, {"width": 64, "heads": 4, "kv_heads": 2, "intermediate": 96}).eval()
    model.save_pretrained(tmp_path)
    assert {p.name for p in tmp_path.iterdir()} == {"model.safetensors", "config.json"}
    loaded = EagleDraftModel.from_pretrained(pair.target, tmp_path)
    assert loaded.config == model.config
    model.to(torch.float16).to(torch.float32)  # what the half-precision file holds
    feats = torch.randn(7, pair.target.config.hidden_size)
    toks = torch.randint(0, 2048, (7,))
    with torch.no_grad():
        torch.testing.assert_close(loaded(feats, toks), model(feats, toks))
    with pytest.raises(FileNotFoundError, match="python -m lab train eagle"):
        EagleDraftModel.from_pretrained(pair.target, tmp_path / "missing")


def test_bad_arguments(pair):
    model = EagleDrafter.from_pretrained(pair).model
    for bad in (0, -1, 2.0, True):
        with pytest.raises(ValueError, match="n_draft"):
            EagleDrafter(pair.target, model, n_draft=bad)
    for tree in ([], [(0, 0)], [(0,), (0,)], [(-1,)], [()], [(0.5,)], [(True,)], ["01"], [(0,), (5000,)], [-1, 0]):
        with pytest.raises(ValueError, match="^tree"):
            EagleDrafter(pair.target, model, tree=tree)
    with pytest.raises(ValueError, match="heads"):
        EagleDraftModel(pair.target, {"width": 100, "heads": 3})
    # a tree sets the draft depth itself: an n_draft that contradicts it is an error, not silently ignored
    for bad in (2, 4):
        with pytest.raises(ValueError, match="n_draft=.* contradicts tree"):
            EagleDrafter(pair.target, model, n_draft=bad, tree=DEFAULT_TREE)
        with pytest.raises(ValueError, match="contradicts tree"):
            EagleDrafter.from_pretrained(pair, tree=DEFAULT_TREE, n_draft=bad)
    assert EagleDrafter(pair.target, model, n_draft=3, tree=DEFAULT_TREE).n_draft == 3  # equal to its depth: fine
    assert EagleDrafter(pair.target, model, tree=DEFAULT_TREE).n_draft == 3
    assert EagleDrafter(pair.target, model, tree=[(0,), (0, 0)]).n_draft == 2
    assert EagleDrafter(pair.target, model).n_draft == 4  # a chain's default
    import numpy as np

    assert EagleDrafter(pair.target, model, n_draft=np.int64(2)).n_draft == 2
    drafter = EagleDrafter(pair.target, model)
    with pytest.raises(ValueError, match="hidden"):
        drafter.reset([1, 2, 3])  # the target's features are required
    with pytest.raises(ValueError, match="hidden"):
        drafter.reset([1, 2, 3], hidden=torch.zeros(3, pair.target.config.hidden_size))


SMALL_EAGLE = {"width": 32, "heads": 4, "kv_heads": 4, "intermediate": 64}


def test_eagle_drafter_names_wrong_draft_model_and_vocabulary(target):
    model = EagleDraftModel(target, SMALL_EAGLE)
    with pytest.raises(TypeError, match="draft_model"):
        EagleDrafter(target, "model")
    with pytest.raises(TypeError, match="draft_model"):
        EagleDrafter(target, tiny_llama(1, layers=1))  # a plain draft LM: DraftModelDrafter's job
    with pytest.raises(TypeError, match="target"):
        EagleDrafter("target", model)
    # an EAGLE draft reads its own target's LM head: one built for a target with another vocabulary (same width)
    # would draft ids outside this target's vocabulary
    other = tiny_llama(2, layers=1, vocab=80)
    with pytest.raises(ValueError, match="vocab"):
        EagleDrafter(target, EagleDraftModel(other, SMALL_EAGLE))
    drafter = EagleDrafter(target, model, n_draft=3)
    assert generate(target, [1, 2, 3], drafter=drafter, max_new_tokens=12).tokens == \
        generate(target, [1, 2, 3], max_new_tokens=12).tokens


def test_eagle_draft_model_names_features_of_the_wrong_width(pair):
    draft = EagleDraftModel.from_pretrained(pair.target)
    width = pair.target.config.hidden_size
    assert draft(torch.zeros(2, width), [1, 2]).shape == (2, width)
    with pytest.raises(ValueError, match=f"width D = {width}, got width {width // 2}"):
        draft(torch.zeros(2, width // 2), [1, 2])


@pytest.mark.parametrize("mode", [{"n_draft": 4}, {"tree": DynamicTree()}], ids=["chain", "dynamic"])
def test_cache_holds_exactly_the_true_pairs(pair, prompts, mode):
    """After steps with rejections, the draft layer's cache equals a fresh run over the committed pairs (a dynamic
    tree feeds several nodes per level, each rolled back)."""
    drafter = EagleDrafter.from_pretrained(pair, **mode)
    gen = generate(pair.target, prompts[0], drafter=drafter, max_new_tokens=17)
    assert any(s.num_accepted < len(s.drafted) for s in gen.steps)  # some drafts were rejected
    committed = prompts[0] + gen.tokens
    drafter.propose(DraftRequest(committed, 4))  # feeds the pairs still pending, drafts, rolls back
    assert drafter.cached_pairs() == len(committed) - 1
    with torch.no_grad():
        feats = pair.target.model(input_ids=torch.tensor([committed[:-1]], device=pair.device)).last_hidden_state[0]
        fresh = new_cache()
        predicted = drafter.model(feats, committed[1:], fresh, position_ids=torch.arange(1, len(committed)))
    torch.testing.assert_close(drafter._root, predicted[-1], atol=1e-4, rtol=1e-4)
    for mine, theirs in zip(drafter._cache.layers, fresh.layers):
        torch.testing.assert_close(mine.keys, theirs.keys, atol=1e-4, rtol=1e-4)
        torch.testing.assert_close(mine.values, theirs.values, atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize("mode", [{"n_draft": 4}, {"n_draft": 1}, {"tree": DEFAULT_TREE}, {"tree": DynamicTree()},
                                  {"tree": DynamicTree(3, 2, 5)}],
                         ids=["chain4", "chain1", "tree", "dynamic-sglang-default", "dynamic-3-2-5"])
def test_greedy_equals_autoregressive(pair, prompts, reference, mode):
    drafter = EagleDrafter.from_pretrained(pair, **mode)
    accepted = 0
    for prompt, ref in zip(prompts, reference):
        gen = generate(pair.target, prompt, drafter=drafter, max_new_tokens=NEW)
        assert gen.tokens == ref
        accepted += sum(s.num_accepted for s in gen.steps)
    assert accepted > 0  # the trained draft does get tokens accepted


@pytest.mark.parametrize("mode", [{"n_draft": 4}, {"tree": DEFAULT_TREE}, {"tree": DynamicTree()}],
                         ids=["chain", "tree", "dynamic"])
def test_max_new_tokens_exact_and_eos(pair, prompts, reference, mode):
    drafter = EagleDrafter.from_pretrained(pair, **mode)
    for n in (1, 2, 7):
        gen = generate(pair.target, prompts[1], drafter=drafter, max_new_tokens=n)
        assert gen.tokens == reference[1][:n]
    ref = reference[1]
    for j in (3, 9, 14):  # EOS landing inside a block stops right after it, like autoregressive decoding
        eos = ref[j]
        expected = ref[: ref.index(eos) + 1]
        assert generate(pair.target, prompts[1], max_new_tokens=NEW, eos_token_id=eos).tokens == expected
        gen = generate(pair.target, prompts[1], drafter=drafter, max_new_tokens=NEW, eos_token_id=eos)
        assert gen.tokens == expected


def test_one_token_prompt_and_reuse(pair, prompts):
    drafter = EagleDrafter.from_pretrained(pair)
    assert generate(pair.target, prompts[2][:1], drafter=drafter, max_new_tokens=9).tokens == \
        generate(pair.target, prompts[2][:1], max_new_tokens=9).tokens
    first = generate(pair.target, prompts[2], drafter=drafter, max_new_tokens=16)
    second = generate(pair.target, prompts[2], drafter=drafter, max_new_tokens=16)
    assert first.tokens == second.tokens
    assert [s.drafted for s in first.steps] == [s.drafted for s in second.steps]
    assert "EagleDrafter" in repr(drafter)


def test_sampling_chain_completes(pair, prompts):
    drafter = EagleDrafter.from_pretrained(pair, n_draft=3)
    gen = generate(pair.target, prompts[0], drafter=drafter, max_new_tokens=20, temperature=1.0, top_k=50, seed=3)
    assert len(gen.tokens) == 20
    assert all(0 <= t < pair.target.config.vocab_size for t in gen.tokens)
    again = generate(pair.target, prompts[0], drafter=drafter, max_new_tokens=20, temperature=1.0, top_k=50, seed=3)
    assert again.tokens == gen.tokens  # seeded: reproducible
    tree = EagleDrafter.from_pretrained(pair, tree=DEFAULT_TREE)
    gen = generate(pair.target, prompts[0], drafter=tree, max_new_tokens=12, temperature=0.8, seed=4)
    assert len(gen.tokens) == 12
    # the proposal's probabilities: one processed distribution per token, each drawn token possible under it
    prompt = prompts[0][:10]
    with torch.no_grad():
        hidden = pair.target.model(input_ids=torch.tensor([prompt[:-1]], device=pair.device)).last_hidden_state[0]
    drafter.reset(prompt, hidden=hidden)
    request = DraftRequest(prompt, 5, temperature=0.7, top_k=20, generator=torch.Generator().manual_seed(0))
    draft = drafter.propose(request)
    assert len(draft.tokens) == 3 and draft.calls == 3 and draft.probs.shape == (3, 2048)
    assert draft.probs.dtype == torch.float32 and draft.probs.device.type == "cpu"
    torch.testing.assert_close(draft.probs.sum(-1), torch.ones(3))
    assert all(draft.probs[i, t] > 0 for i, t in enumerate(draft.tokens))
    assert ((draft.probs > 0).sum(-1) <= 20).all()  # top-k applied like the target's
    assert drafter.cached_pairs() == len(prompt) - 1  # drafts rolled back: true pairs only
    assert drafter.propose(DraftRequest(prompt, 0)).tokens == []


def test_missing_weights_message(pair, tmp_path):
    with pytest.raises(FileNotFoundError) as err:
        EagleDrafter.from_pretrained(pair, directory=tmp_path)
    assert str(tmp_path) in str(err.value) and "python -m lab train eagle" in str(err.value)
    assert EAGLE_DIR.name == "eagle"


def _prompt_features(pair, prompt):
    return forward(pair.target, prompt[:-1], new_cache(), logits_to_keep=1, output_hidden_states=True)[1]


def test_chain_probs_are_the_draft_models_distribution_at_the_right_positions(pair):
    prompt = pair.encode(held_out_prompts()[0])
    drafter = EagleDrafter.from_pretrained(pair, n_draft=3)
    feats = _prompt_features(pair, prompt)
    drafter.reset(prompt, hidden=feats)
    draft = drafter.propose(DraftRequest(prompt, 3, temperature=1.0, generator=torch.Generator().manual_seed(0)))
    model, length = drafter.model, len(prompt)
    with torch.no_grad():  # recompute on a fresh cache: the true pairs, then each draft at its own position
        cache = new_cache()
        feature = model(feats, prompt[1:], cache, position_ids=torch.arange(1, length))[-1]
        for s, token in enumerate(draft.tokens):
            torch.testing.assert_close(draft.probs[s], torch.softmax(model.logits(feature).float(), -1).cpu(),
                                       atol=1e-4, rtol=1e-4)
            feature = model(feature[None], [token], cache, position_ids=[length + s])[-1]


def _chain_and_tree(pair, prompt, tree, depth):
    """The greedy chain of ``depth`` tokens, the tree drafter after proposing ``tree``, and its nodes by path."""
    feats = _prompt_features(pair, prompt)
    chain = EagleDrafter.from_pretrained(pair, n_draft=depth)
    chain.reset(prompt, hidden=feats)
    expected = chain.propose(DraftRequest(prompt, depth)).tokens
    drafter = EagleDrafter.from_pretrained(pair, tree=tree)
    drafter.reset(prompt, hidden=feats)
    draft = drafter.propose(DraftRequest(prompt, depth))
    paths = check_choices(tree)
    return expected, drafter, {p: draft.tokens[paths.index(p)] for p in paths}


def test_tree_first_choice_path_equals_the_greedy_chain(pair, prompts):
    # every tree level must be fed the feature its parent predicted, as the chain does
    tree = [(0,), (1,), (0, 0), (0, 1), (0, 0, 0)]
    for prompt in prompts:
        expected, _, node = _chain_and_tree(pair, prompt, tree, 3)
        assert [node[(0,)], node[(0, 0)], node[(0, 0, 0)]] == expected


def test_first_speculated_token_matches_target_distribution(pair, prompts):
    # sampled chain: the draft's own distribution is the proposal; tree: deterministic siblings (one-hot). The first
    # token comes from the prefill; the second is the first decode step's, verified against the draft
    ids = prompts[0][:16]  # a short prompt keeps the 2 x 600 generations quick
    for drafter in (EagleDrafter.from_pretrained(pair, n_draft=3),
                    EagleDrafter.from_pretrained(pair, tree=DEFAULT_TREE),
                    EagleDrafter.from_pretrained(pair, tree=DynamicTree())):
        counts, prefixes = torch.zeros(pair.target.config.vocab_size), []
        for seed in range(600):
            gen = generate(pair.target, ids, drafter=drafter, max_new_tokens=3, temperature=1.0, seed=seed)
            assert gen.steps[0].prefill and gen.steps[1].drafted  # a real draft was verified
            counts[gen.tokens[1]] += 1
            prefixes.append(ids + gen.tokens[:1])
        assert chi_square(counts, next_token_probs(pair.target, prefixes)).pvalue > 1e-3


def test_tree_siblings_are_the_parents_top_ranks_in_order(pair, prompts):
    """Each node is the rank-th token of its parent's distribution (one LM-head call per level serves every
    parent of that level): the first level is the root feature's top 3 in rank order, and a level with two parents
    gives each its own ranks."""
    tree = [(0,), (1,), (2,), (0, 0), (0, 1), (1, 0)]
    for prompt in prompts:
        expected, drafter, node = _chain_and_tree(pair, prompt, tree, 2)
        with torch.inference_mode():
            top3 = torch.topk(drafter.model.logits(drafter._root), 3).indices.tolist()
        assert [node[(0,)], node[(1,)], node[(2,)]] == top3
        assert [node[(0,)], node[(0, 0)]] == expected             # the first child is the chain's next token
        assert node[(0, 1)] != node[(0, 0)]                        # rank 1 of the same parent


def test_a_chain_path_that_skips_a_row_is_refused(pair):
    """Observing [0, 2] after a chain of 3 drafts queued the second draft as if the first had been accepted; a path
    past the hidden rows was a bare IndexError."""
    from lab.drafters.base import TargetOutput

    drafter = EagleDrafter.from_pretrained(pair, n_draft=3)
    prompt = pair.encode("ROMEO: What")
    _, hidden = forward(pair.target, prompt, new_cache(), output_hidden_states=True)
    drafter.reset(prompt, hidden=hidden[:-1])
    draft = drafter.propose(DraftRequest(prompt, 3))
    assert len(draft.tokens) == 3
    rows = torch.zeros(4, pair.target.config.hidden_size)
    for path in ([0, 2], [0, 1, 3], [0, 7]):
        with pytest.raises(ValueError, match="output.path"):
            drafter.observe(TargetOutput(torch.zeros(4, 2048), rows, path))
    drafter.observe(TargetOutput(torch.zeros(4, 2048), rows, [0, 1]))
    drafter.update(1, 5)
