"""Medusa heads and the Medusa drafter (lesson 10; Cai et al. 2024): tree builder, heads, weights, decoding oracles."""
import pytest
import torch

from lab.drafters.base import Draft, DraftRequest, TargetOutput
from lab.drafters.medusa import DEFAULT_TREE, MEDUSA_DIR, MedusaDrafter, MedusaHeads, head_accuracy, medusa_tree

TOP = torch.arange(8) + torch.tensor([[10], [20], [30]])  # head d's rank-r candidate is token 10 * (d + 1) + r


def _paths(tokens, parents):
    """Rebuild each node's root-to-node token path from the tree layout."""
    out = []
    for i, tok in enumerate(tokens):
        out.append((out[parents[i]] if parents[i] >= 0 else ()) + (tok,))
    return out


# --- the tree builder, on plain tensors ------------------------------------------------------------------------

def test_default_tree_layout():
    tokens, parents = medusa_tree(TOP, DEFAULT_TREE, max_depth=None)
    assert len(tokens) == len(parents) == len(DEFAULT_TREE)
    assert all(p < i for i, p in enumerate(parents))                         # topological: parents first
    expected = {tuple(10 * (d + 1) + r for d, r in enumerate(path)) for path in DEFAULT_TREE}
    assert set(_paths(tokens, parents)) == expected                          # (i, j) = head 1's i-th, head 2's j-th
    assert [p for p, t in zip(parents, tokens) if t < 20] == [-1] * 8        # depth-1 nodes hang off the root


@pytest.mark.parametrize("max_depth,count", [(0, 0), (1, 8), (2, 13), (3, 14), (7, 14)])
def test_depth_cap(max_depth, count):
    tokens, parents = medusa_tree(TOP, DEFAULT_TREE, max_depth=max_depth)
    assert len(tokens) == count
    assert max((len(p) for p in _paths(tokens, parents)), default=0) <= max_depth


def test_chain_choice_set_gives_a_chain():
    tokens, parents = medusa_tree(TOP, [(0,), (0, 0), (0, 0, 0)])
    assert (tokens, parents) == ([10, 20, 30], [-1, 0, 1])
    # given out of order, the builder still lists parents first
    assert medusa_tree(TOP, [(0, 0), (0,)]) == ([10, 20], [-1, 0])


BAD_CHOICES = [
    [],                                           # no nodes
    [(0, 1)],                                     # parent (0,) missing
    [(0,), (0,)],                                 # duplicate
    [(-1,)], [()], [(True,)],                     # not a rank path
    [(0,), (0, 0), (0, 0, 0), (0, 0, 0, 0)],      # deeper than the 3 heads
    [(0,), (0, 8)],                               # rank beyond the 8 candidates given
]


@pytest.mark.parametrize("choices", BAD_CHOICES)
def test_bad_choices_raise(choices):
    with pytest.raises(ValueError, match="choices"):
        medusa_tree(TOP, choices)


def test_medusa_tree_refuses_logits_instead_of_token_ids():
    """Passing the heads' logits (or probabilities) instead of their top-k *indices* used to build a tree of token
    id 0 everywhere (int() of each float), silently."""
    torch.manual_seed(0)
    logits = torch.randn(3, 8)
    with pytest.raises(TypeError, match="head_topk_tokens"):
        medusa_tree(logits, DEFAULT_TREE)
    with pytest.raises(TypeError, match="head_topk_tokens"):
        medusa_tree(logits.softmax(-1).tolist(), DEFAULT_TREE)
    with pytest.raises(TypeError, match="head_topk_tokens"):
        medusa_tree(torch.ones(3, 8, dtype=torch.bool), DEFAULT_TREE)
    # the right input still works: the indices of each head's best tokens
    top = logits.topk(8, dim=-1).indices
    tokens, parents = medusa_tree(top, DEFAULT_TREE)
    assert tokens[:8] == top[0].tolist() and parents[:8] == [-1] * 8
    assert medusa_tree(top.tolist(), DEFAULT_TREE) == (tokens, parents)
    # no candidates at all (an empty list is float32 to torch) is a missing rank, not "logits instead of ids"
    with pytest.raises(ValueError, match="0 candidates"):
        medusa_tree([[], [], []], DEFAULT_TREE)


# --- the heads ----------------------------------------------------------------------------------------------------

def test_heads_shapes_and_identity_init(pair):
    heads = MedusaHeads.from_target(pair.target)
    hidden = torch.randn(2, 5, heads.hidden_size, device=pair.device)
    logits = heads(hidden)
    assert logits.shape == (2, 5, 3, pair.target.config.vocab_size)
    with torch.no_grad():
        reference = pair.target.get_output_embeddings()(hidden)
    for k in range(3):  # at init every head is exactly the target's LM head
        torch.testing.assert_close(logits[:, :, k], reference)
    with pytest.raises(ValueError, match="num_heads"):
        MedusaHeads(384, 2048, num_heads=0)
    with pytest.raises(ValueError, match="hidden"):
        heads(torch.randn(3, 7))


def test_save_load_round_trip(tmp_path):
    torch.manual_seed(0)
    heads = MedusaHeads(16, 40, num_heads=2)
    for p in heads.parameters():
        torch.nn.init.normal_(p)
    heads.save(tmp_path)
    loaded = MedusaHeads.load(tmp_path)
    assert (loaded.hidden_size, loaded.vocab_size, loaded.num_heads) == (16, 40, 2)
    for (name, a), (_, b) in zip(heads.state_dict().items(), loaded.state_dict().items()):
        assert torch.equal(a.half().float(), b), name                       # stored as float16, nothing else lost
    with pytest.raises(FileNotFoundError, match="python -m lab train medusa"):
        MedusaHeads.load(tmp_path / "missing")


def test_shared_head_gives_every_head_one_output_layer_and_round_trips(pair, tmp_path):
    """shared_head=True: one output layer after three residual blocks; at init every head is the target's LM head
    on the draft vocabulary, training one block moves only its head, and the file keeps the layout."""
    vocab = torch.tensor([7, 3, 900, 12])
    heads = MedusaHeads.from_target(pair.target, 3, draft_vocab=vocab, shared_head=True).float()
    assert len(heads.lm_heads) == 1 and heads.shared_head
    own = MedusaHeads.from_target(pair.target, 3, draft_vocab=vocab).float()
    count = lambda m: sum(p.numel() for p in m.parameters())  # noqa: E731
    assert count(own) - count(heads) == 2 * len(vocab) * heads.hidden_size
    hidden = torch.randn(2, 5, heads.hidden_size, device=pair.device)
    with torch.no_grad():
        reference = pair.target.get_output_embeddings()(hidden)[..., vocab]
        for k in range(3):
            torch.testing.assert_close(heads(hidden)[:, :, k], reference)
        torch.nn.init.normal_(heads.blocks[1].linear.weight, std=0.1)
        moved = heads(hidden)
    torch.testing.assert_close(moved[:, :, 0], reference)
    torch.testing.assert_close(moved[:, :, 2], reference)
    assert not torch.allclose(moved[:, :, 1], reference)
    heads.save(tmp_path)
    loaded = MedusaHeads.load(tmp_path)
    assert loaded.shared_head and len(loaded.lm_heads) == 1
    torch.testing.assert_close(loaded(hidden.half().float()), heads.half().float()(hidden.half().float()))


def test_committed_heads_beat_chance(pair):
    # Offline and cheap: the bundled held-out prompts as windows (target_features would need the corpus).
    from lab.prompts import held_out_prompts

    windows = [pair.encode(text)[:48] for text in held_out_prompts()]
    ids = torch.tensor([w for w in windows if len(w) == 48])
    with torch.no_grad():
        hidden = pair.target.model(input_ids=ids.to(pair.device)).last_hidden_state
    heads = MedusaDrafter.from_pretrained(pair).heads
    acc = head_accuracy(pair.target, heads, {"ids": ids, "hidden": hidden})
    chance = 1 / pair.target.config.vocab_size
    for top1, top5 in zip(acc["top1"], acc["top5"]):
        assert 20 * chance < top1 <= top5
    # training taught the heads their offsets: far better than the untrained copies of the LM head
    init = head_accuracy(pair.target, MedusaHeads.from_target(pair.target), {"ids": ids, "hidden": hidden})
    assert all(a > 2 * b for a, b in zip(acc["top1"], init["top1"]))


def test_committed_heads_fit_the_targets_own_text(pair):
    # Self-distilled (lab.training.features.target_generations): on the target's greedy continuations the heads are
    # right far more often than on the corpus text the target was trained on.
    from lab.decode import generate
    from lab.prompts import held_out_prompts

    prompts = [pair.encode(text)[:16] for text in held_out_prompts()]
    own = torch.tensor([p + generate(pair.target, p, max_new_tokens=32).tokens for p in prompts if len(p) == 16])
    corpus = torch.tensor([w for w in (pair.encode(text)[:48] for text in held_out_prompts()) if len(w) == 48])
    heads = MedusaDrafter.from_pretrained(pair).heads
    with torch.no_grad():
        acc = {name: head_accuracy(pair.target, heads,
                                   {"ids": ids, "hidden": pair.target.model(ids.to(pair.device)).last_hidden_state})
               for name, ids in (("own", own), ("corpus", corpus))}
    assert all(o > 1.5 * c for o, c in zip(acc["own"]["top1"], acc["corpus"]["top1"])), acc


def test_from_pretrained_errors(pair, tmp_path):
    with pytest.raises(FileNotFoundError, match="python -m lab train medusa"):
        MedusaDrafter.from_pretrained(pair, directory=tmp_path)
    with pytest.raises(ValueError, match="tree: path .* deep"):
        MedusaDrafter.from_pretrained(pair, tree=[(0,), (0, 0), (0, 0, 0), (0, 0, 0, 0)])
    with pytest.raises(ValueError, match=r"tree must be paths of ranks, e.g. \[\(0,\), .*parents array"):
        MedusaDrafter.from_pretrained(pair, tree=[0, 1])  # a parents array, the verifiers' format
    assert (MEDUSA_DIR / "model.safetensors").is_file()


# --- the drafter's protocol ---------------------------------------------------------------------------------------

def test_propose_respects_max_tokens_and_feature(pair):
    drafter = MedusaDrafter.from_pretrained(pair)
    assert drafter.needs_hidden_states and drafter.vocab_size == 2048 and "MedusaDrafter" in repr(drafter)
    drafter.reset([5])                                                      # one-token prompt: no feature yet
    assert drafter.propose(DraftRequest([5], 4)).tokens == []
    feature = torch.randn(3, 384)
    drafter.reset([1, 2, 3, 4], hidden=feature)
    for max_tokens, count in ((0, 0), (1, 8), (2, 13), (5, 14)):  # a negative one: DraftRequest refuses it
        draft = drafter.propose(DraftRequest([1, 2, 3, 4], max_tokens))
        assert len(draft.tokens) == count
        if count:
            assert draft.calls == 1 and draft.probs is None and all(p < i for i, p in enumerate(draft.parents))
    # observe keeps the row that produced the next token: the last row on the accepted path
    rows = torch.randn(5, 384)
    drafter.observe(TargetOutput(torch.zeros(5, 2048), rows, [0, 2]))
    assert torch.equal(drafter._feature, rows[2])
    assert isinstance(drafter.propose(DraftRequest([1], 3)), Draft)


def test_reset_and_update_check_the_hidden_states(pair):
    """A row too many shifted every draft by one position (exact, but hardly ever accepted); a missing ``hidden``
    drafted nothing; an update without observe drafted from a stale feature. Each is now named."""
    drafter = MedusaDrafter.from_pretrained(pair)
    shape = r"hidden must be \[len\(prompt_ids\) - 1, hidden_size\] = \[3, 384\]"
    for hidden, message in ((torch.randn(4, 384), shape),
                            (torch.randn(3, 100), r"= \[3, 384\], got \(3, 100\)"),
                            (None, r"needs the target's hidden states: reset\(prompt_ids, hidden=\[3, 384\]\)")):
        with pytest.raises(ValueError, match=message):
            drafter.reset([1, 2, 3, 4], hidden=hidden)
    drafter.reset([1, 2, 3, 4], hidden=torch.randn(3, 384))
    drafter.propose(DraftRequest([1, 2, 3, 4], 3))
    with pytest.raises(ValueError, match="update came without observe"):
        drafter.update(0, 7)  # the first step too: the feature would still be the prompt's
    drafter.observe(TargetOutput(torch.zeros(1, 2048), torch.randn(1, 384), [0]))
    drafter.update(0, 7)
    with pytest.raises(ValueError, match="update came without observe"):
        drafter.update(0, 8)
    # update's arguments must agree with the path observed; a path past the hidden rows is named
    drafter.observe(TargetOutput(torch.zeros(3, 2048), torch.randn(3, 384), [0, 1]))
    with pytest.raises(ValueError, match=r"num_accepted \(0\) disagrees with the observed path \(1 accepted"):
        drafter.update(0, 7)
    with pytest.raises(ValueError, match=r"next_token must be an integer in \[0, 2047\]"):
        drafter.update(1, 2048)
    for path, hidden in (([0, 5], torch.randn(3, 384)), ([1], torch.randn(3, 384)), ([0], torch.randn(384))):
        with pytest.raises(ValueError, match="output.path must start at row 0 and name rows of output.hidden"):
            drafter.observe(TargetOutput(torch.zeros(3, 2048), hidden, path))


def test_medusa_drafter_names_wrong_heads_and_target(target):
    heads = MedusaHeads.from_target(target)
    with pytest.raises(TypeError, match="heads"):
        MedusaDrafter(target, "heads")
    with pytest.raises(TypeError, match="heads"):
        MedusaDrafter(target, target)  # the model where the heads belong
    with pytest.raises(TypeError, match="target"):
        MedusaDrafter("target", heads)
    assert MedusaDrafter(target, heads).vocab_size == 64


# --- decoding oracles with the committed pair and heads ----------------------------------------------------------

@pytest.fixture(scope="module")
def prompts(pair):
    from lab.prompts import held_out_prompts

    return [pair.encode(p)[-60:] for p in held_out_prompts()[:3]]


def test_greedy_matches_autoregressive(pair, prompts):
    from lab.decode import generate

    drafter = MedusaDrafter.from_pretrained(pair)
    for prompt in prompts:
        ar = generate(pair.target, prompt, max_new_tokens=40)
        spec = generate(pair.target, prompt, drafter=drafter, max_new_tokens=40)
        assert spec.tokens == ar.tokens
        assert spec.stats["target_calls"] < 40                             # the heads did get tokens accepted


@pytest.mark.parametrize("n", [1, 2, 7])
def test_max_new_tokens_exact(pair, prompts, n):
    from lab.decode import generate

    g = generate(pair.target, prompts[0], drafter=MedusaDrafter.from_pretrained(pair), max_new_tokens=n)
    assert g.tokens == generate(pair.target, prompts[0], max_new_tokens=n).tokens
    assert len(g.tokens) == n


def test_eos_inside_a_block(pair, prompts):
    from lab.decode import generate

    drafter = MedusaDrafter.from_pretrained(pair)
    for prompt in prompts:
        g = generate(pair.target, prompt, drafter=drafter, max_new_tokens=40)
        # a token emitted before the end of a multi-token block, and not earlier in the output
        for step in g.steps:
            for j, tok in enumerate(step.emitted[:-1]):
                pos = step.position + j
                if tok not in g.tokens[:pos]:
                    ar = generate(pair.target, prompt, max_new_tokens=40, eos_token_id=tok)
                    spec = generate(pair.target, prompt, drafter=drafter, max_new_tokens=40, eos_token_id=tok)
                    assert spec.tokens == ar.tokens == g.tokens[:pos + 1]
                    return
    pytest.fail("no multi-token block with a fresh token: cannot place EOS inside a block")


def test_no_state_leaks_between_runs(pair, prompts):
    from lab.decode import generate

    drafter = MedusaDrafter.from_pretrained(pair)
    first = generate(pair.target, prompts[1], drafter=drafter, max_new_tokens=24)
    generate(pair.target, prompts[2], drafter=drafter, max_new_tokens=24)
    again = generate(pair.target, prompts[1], drafter=drafter, max_new_tokens=24)
    assert again.tokens == first.tokens
    assert [s.drafted for s in again.steps] == [s.drafted for s in first.steps]
    one = generate(pair.target, prompts[1][-1:], drafter=drafter, max_new_tokens=6)  # a one-token prompt
    assert one.tokens == generate(pair.target, prompts[1][-1:], max_new_tokens=6).tokens


def test_sampling_runs_and_emits_valid_tokens(pair, prompts):
    from lab.decode import generate

    drafter = MedusaDrafter.from_pretrained(pair)
    a = generate(pair.target, prompts[0], drafter=drafter, max_new_tokens=30, temperature=1.0, seed=3)
    b = generate(pair.target, prompts[0], drafter=drafter, max_new_tokens=30, temperature=1.0, seed=3)
    assert len(a.tokens) == 30 and a.tokens == b.tokens
    assert all(0 <= t < drafter.vocab_size for t in a.tokens)
    assert sum(len(s.emitted) for s in a.steps) == 30


def test_first_speculated_token_matches_target_distribution(pair, prompts):
    # token 0 comes from the prefill; the first decode step verifies the heads' first-level candidates as siblings
    # (max_new_tokens=3 caps its tree at depth 1); whatever they propose, token 1 must be distributed as the
    # target's after the prompt and token 0
    from lab.decode import generate
    from lab.metrics import chi_square
    from tests.helpers import next_token_probs

    ids = prompts[0]
    drafter = MedusaDrafter.from_pretrained(pair)
    counts, prefixes = torch.zeros(pair.target.config.vocab_size), []
    for seed in range(700):
        gen = generate(pair.target, ids, drafter=drafter, max_new_tokens=3, temperature=1.0, seed=seed)
        assert gen.steps[0].prefill and len(gen.steps[1].drafted) > 1  # a real sibling set was verified
        assert set(gen.steps[1].parents) == {-1}
        counts[gen.tokens[1]] += 1
        prefixes.append(ids + gen.tokens[:1])
    assert chi_square(counts, next_token_probs(pair.target, prefixes)).pvalue > 1e-3
