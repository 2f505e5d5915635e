"""Review of the drafters (lab.drafters): defects found by a close reading, each pinned by a test.

Tiny random models (tests/conftest.py) keep these fast on a CPU.
"""
import pytest
import torch

from lab.drafters.medusa import DEFAULT_TREE, medusa_tree


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
