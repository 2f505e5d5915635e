"""Review of the drafters (lab.drafters): defects found by a close reading, each pinned by a test.

Tiny random models (tests/conftest.py) keep these fast on a CPU.
"""
import pytest
import torch

from conftest import tiny_llama
from lab.decode import generate
from lab.drafters import EagleDrafter, MedusaDrafter
from lab.drafters.eagle import EagleDraftModel
from lab.drafters.medusa import DEFAULT_TREE, MedusaHeads, medusa_tree

SMALL_EAGLE = {"width": 32, "heads": 4, "kv_heads": 4, "intermediate": 64}


# --- medusa_tree takes token ids, not the heads' logits ----------------------------------------------------------

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


# --- the hidden-state drafters name a wrong argument -------------------------------------------------------------

@pytest.fixture(scope="module")
def target():
    return tiny_llama(0, layers=2)


def test_medusa_drafter_names_wrong_heads_and_target(target):
    heads = MedusaHeads.from_target(target)
    with pytest.raises(TypeError, match="heads"):
        MedusaDrafter(target, "heads")
    with pytest.raises(TypeError, match="heads"):
        MedusaDrafter(target, target)  # the model where the heads belong
    with pytest.raises(TypeError, match="target"):
        MedusaDrafter("target", heads)
    assert MedusaDrafter(target, heads).vocab_size == 64


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


# --- oracle 3 in the decode loop itself: the target's cache after trees and Lookahead windows -------------------

WIDE_TREE = [(r,) for r in range(8)] + [(0, 0), (0, 1), (1, 0), (2, 0), (0, 0, 0), (1, 0, 0)]

@pytest.mark.parametrize("temperature", [0.0, 1.0])
@pytest.mark.parametrize("kind", ["lookahead", "medusa", "eagle_tree"])
def test_target_cache_after_generation_equals_a_fresh_forward(target, monkeypatch, kind, temperature):
    """After a generation full of rejected tree nodes (or Lookahead windows), the target's KV cache holds exactly
    the committed tokens but the last: keys and values equal a fresh forward over them."""
    import lab.decode
    from lab.drafters import LookaheadDrafter
    from lab.models import forward, new_cache

    torch.manual_seed(3)
    heads = MedusaHeads.from_target(target).eval()
    with torch.no_grad():
        for p in heads.parameters():
            p.add_(0.05 * torch.randn_like(p))
    drafter = {"lookahead": lambda: LookaheadDrafter(window=4, ngram=3),
               "medusa": lambda: MedusaDrafter(target, heads, tree=WIDE_TREE),
               "eagle_tree": lambda: EagleDrafter(target, EagleDraftModel(target, SMALL_EAGLE).eval(),
                                                  tree=WIDE_TREE)}[kind]()
    caches = []

    def recording_cache():
        caches.append(new_cache())
        return caches[-1]

    monkeypatch.setattr(lab.decode, "new_cache", recording_cache)
    prompt = [5, 9, 13, 2, 7, 11, 5, 9, 13, 2, 7, 11, 5, 9]
    gen = generate(target, prompt, drafter=drafter, max_new_tokens=30, temperature=temperature, seed=1)
    assert sum(s.num_accepted < s.depth for s in gen.steps) > 5  # many steps rejected drafts
    assert sum(s.target_tokens > 1 + s.num_accepted for s in gen.steps) > 5  # and fed more than they kept
    if kind != "lookahead":  # some accepted paths skip listed nodes, so the kept slots are not a prefix
        assert any(s.path != list(range(len(s.path))) for s in gen.steps)
    committed = prompt + gen.tokens
    fresh = new_cache()
    forward(target, committed[:-1], fresh)
    (cache,) = caches
    assert cache.get_seq_length() == len(committed) - 1
    for mine, theirs in zip(cache.layers, fresh.layers):
        torch.testing.assert_close(mine.keys, theirs.keys, atol=1e-4, rtol=1e-4)
        torch.testing.assert_close(mine.values, theirs.values, atol=1e-4, rtol=1e-4)


def test_eagle_draft_model_names_features_of_the_wrong_width():
    from lab.drafters.eagle import EagleDraftModel
    from lab.models import load_pair

    pair = load_pair()
    draft = EagleDraftModel.from_pretrained(pair.target)
    width = pair.target.config.hidden_size
    assert draft(torch.zeros(2, width), [1, 2]).shape == (2, width)
    with pytest.raises(ValueError, match=f"width D = {width}, got width {width // 2}"):
        draft(torch.zeros(2, width // 2), [1, 2])
