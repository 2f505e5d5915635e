"""lab.trees: token-tree geometry (depths, positions, the tree attention mask, paths, rank-path choices), and one
forward over a tree on a transformers model giving every node the logits of its own path."""

from __future__ import annotations

import re

import pytest
import torch

from lab import trees
from lab.models import forward, new_cache
from tests.helpers import tree_forward

PREFIX = [5, 9, 2, 7, 11]


def test_issue_example_positions_and_mask():
    parents = [-1, -1, 1]  # A, B at depth 0 under the last committed token; C under B
    assert trees.position_ids(parents, 5).tolist() == [5, 5, 6]
    mask = trees.tree_attention_mask(parents, 5)
    assert mask.shape == (3, 8) and mask.dtype == torch.bool
    assert mask[:, :5].all()
    assert mask[0, 5:].tolist() == [True, False, False]
    assert mask[1, 5:].tolist() == [False, True, False]
    assert mask[2, 5:].tolist() == [False, True, True]  # C: prefix, B and itself, not its uncle A
    assert trees.paths(parents) == [[0], [1, 2]]
    assert trees.depths(parents).tolist() == [0, 0, 1]


def test_chain_is_the_degenerate_tree():
    parents = trees.chain_parents(4)
    assert parents == [-1, 0, 1, 2]
    assert torch.equal(trees.tree_attention_mask(parents, 0), torch.ones(4, 4, dtype=torch.bool).tril())
    assert trees.position_ids(parents, 3).tolist() == [3, 4, 5, 6]
    assert trees.paths(parents) == [[0, 1, 2, 3]]
    assert trees.paths([]) == [] and trees.depths([]).tolist() == []


@pytest.mark.parametrize("parents", [[0], [-1, 1], [-2], [-1, 3, 0]])
def test_parents_must_point_backwards(parents):
    with pytest.raises(ValueError, match="parents"):
        trees.tree_attention_mask(parents, 2)


def test_prefix_len_errors():
    with pytest.raises(ValueError, match="prefix_len"):
        trees.position_ids([-1], 0)
    # torch's int64 wrapped 2**63 to a negative position
    with pytest.raises(ValueError, match=r"prefix_len \(the committed tokens\) must be at most 4611686018427387904"):
        trees.position_ids([-1, 0], 2**63)
    assert trees.position_ids([-1, 0], trees.MAX_PREFIX).tolist() == [2**62, 2**62 + 1]
    with pytest.raises(ValueError, match="prefix_len"):
        trees.tree_attention_mask([-1], -1)


def test_one_forward_equals_a_plain_forward_per_path(target):
    tokens, parents = [20, 30, 40], [-1, -1, 1]  # A=20, B=30, C=40 under B
    logits, _ = tree_forward(target, PREFIX, tokens, parents)
    plain_c = forward(target, PREFIX + [30, 40], new_cache())[-1]
    plain_a = forward(target, PREFIX + [20], new_cache())[-1]
    plain_root = forward(target, PREFIX, new_cache())[-1]
    torch.testing.assert_close(logits[3], plain_c, atol=1e-4, rtol=1e-4)
    torch.testing.assert_close(logits[1], plain_a, atol=1e-4, rtol=1e-4)
    torch.testing.assert_close(logits[0], plain_root, atol=1e-4, rtol=1e-4)


def test_bigger_tree_every_node_matches_its_path(target):
    tokens = [1, 2, 3, 4, 5, 6, 7]
    parents = [-1, -1, 0, 0, 1, 2, 4]
    logits, _ = tree_forward(target, PREFIX, tokens, parents)
    for node in range(len(tokens)):
        path = trees.ancestors(parents, node) + [node]
        plain = forward(target, PREFIX + [tokens[i] for i in path], new_cache())[-1]
        torch.testing.assert_close(logits[1 + node], plain, atol=1e-4, rtol=1e-4)


def test_non_integer_parents_and_choices_are_rejected():
    with pytest.raises(ValueError, match="parents"):
        trees.depths([-1, 0.7])
    for bad in ([(0.5,)], [(True,)], ["01"], [(0, -1)], [()]):
        with pytest.raises(ValueError, match="choices"):
            trees.check_choices(bad)
    with pytest.raises(ValueError, match="rank"):
        trees.check_choices([(0,), (5000,)], max_rank=64)
    assert trees.check_choices([(1,), (0, 0), (0,)]) == [(0,), (1,), (0, 0)]
    assert trees.choices_parents([(0,), (1,), (0, 0)]) == [-1, -1, 0]


def test_tree_attention_mask_refuses_a_prefix_no_memory_holds():
    """A context of 10**12 tokens would ask for 2 TB; the error names prefix_len and the most this tree allows."""
    with pytest.raises(ValueError, match=r"prefix_len must be at most 1073741822 for a tree of 2 nodes"):
        trees.tree_attention_mask([-1, 0], 10 ** 12)


def test_numpy_and_tensor_integers_work_bools_and_floats_do_not():
    import numpy as np

    assert trees.position_ids([-1, 0, -1], np.int64(3)).tolist() == [3, 4, 3]
    assert trees.position_ids([-1], torch.tensor(7)).tolist() == [7]
    assert trees.tree_attention_mask([-1, 0], np.int32(2)).shape == (2, 4)
    assert trees.ancestors([-1, 0, 1], np.int64(2)) == [0, 1]
    assert trees.children([-1, 0, 0], np.int64(0)) == [1, 2]
    assert trees.chain_parents(np.int64(3)) == [-1, 0, 1] and trees.chain_parents(0) == []
    assert trees.depths(np.array([-1, 0, 0])).tolist() == [0, 1, 1]
    for bad in (True, torch.tensor(True), 3.0, torch.tensor(3.0), np.float64(3)):
        with pytest.raises(ValueError, match="prefix_len"):
            trees.position_ids([-1], bad)
    with pytest.raises(ValueError, match="parents"):
        trees.depths([-1, torch.tensor(True)])
    for bad in (-3, -1, 2.0, True, 10 ** 9):  # 10**9 drafts were killed for memory before an error
        with pytest.raises(ValueError, match=r"n \(the number of drafts in the chain\) must be an integer in "
                                             r"\[0, 65536\]"):
            trees.chain_parents(bad)
    for bad in (1.0, 3, -1):
        with pytest.raises(ValueError, match="node"):
            trees.ancestors([-1, 0, 1], bad)
    with pytest.raises(ValueError, match="node"):
        trees.children([-1, 0], 5)


@pytest.mark.parametrize("fn", ["position_ids", "tree_attention_mask", "depths"])
def test_tree_helpers_name_parents_when_it_is_not_a_sequence(fn):
    from lab import trees

    args = (None,) if fn == "depths" else (None, 1)
    with pytest.raises(TypeError, match="parents must be a list, tuple or 1-D tensor"):
        getattr(trees, fn)(*args)


def test_choices_parents_takes_list_paths_as_the_tree_loaders_do():
    assert trees.choices_parents([[0], [0, 0], [1], [0, 1]]) == trees.choices_parents([(0,), (0, 0), (1,), (0, 1)]) \
        == [-1, 0, -1, 0]
    # a tester's: a raw KeyError for a missing parent, a silent [-1, -1] for a duplicate
    for bad, words in (([(0, 0)], "needs its parent (0,)"), ([(0,), (0,)], "appears twice"),
                       ([(0, 0), (0,)], "comes before its parent")):
        with pytest.raises(ValueError, match=re.escape(words)):
            trees.choices_parents(bad)


def test_a_dict_or_set_is_no_parents_array_and_limits_are_integers():
    """depths({-1: 0}) read the dict's keys as the parents; check_choices(max_depth="a") compared an int with a str."""
    for parents in ({-1: 0}, {-1, 0}):
        with pytest.raises(TypeError, match="parents must be a list, tuple or 1-D tensor of ints"):
            trees.depths(parents)
    for limits, name in ((dict(max_depth="a"), "max_depth"), (dict(max_rank=0), "max_rank"),
                         (dict(max_depth=1.5), "max_depth")):
        with pytest.raises(ValueError, match=f"{name} must be an integer >= 1"):
            trees.check_choices([(0,), (0, 0)], **limits)
    assert trees.check_choices([(0,), (0, 0)], max_depth=2, max_rank=1) == [(0,), (0, 0)]
