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
