"""lab.check_trees: every checker passes the reference, rejects planted mistakes with the right hint, and prints
"not solved yet" for a stub."""

from lab import check_trees as check
from lab.trees import depths, tree_attention_mask
from lab.verify import verify_tree_greedy


def stub(*args):
    raise NotImplementedError


def test_tree_positions(capsys):
    assert check.tree_positions(lambda p, n: (depths(p) + n).tolist())
    assert check.tree_positions(lambda p, n: depths(p) + n)  # a tensor is fine too
    assert not check.tree_positions(lambda p, n: [n + i for i in range(len(p))])
    assert "DEPTH" in capsys.readouterr().out
    assert not check.tree_positions(lambda p, n: (depths(p) + n - 1).tolist())
    assert "prefix_len - 1" in capsys.readouterr().out
    assert not check.tree_positions(lambda p, n: depths(p).tolist())
    assert not check.tree_positions(stub)
    assert "not solved yet" in capsys.readouterr().out


def test_tree_mask(capsys):
    assert check.tree_mask(tree_attention_mask)
    assert not check.tree_mask(check._mask_variant("causal"))
    assert "siblings" in capsys.readouterr().out
    assert not check.tree_mask(check._mask_variant("parent_only"))
    assert "ALL its ancestors" in capsys.readouterr().out
    assert not check.tree_mask(check._mask_variant("no_self"))
    assert not check.tree_mask(lambda p, n: tree_attention_mask(p, n).float())  # must be a bool mask


def test_accepted_path(capsys):
    assert check.accepted_path(lambda a, t, p: verify_tree_greedy(a, t, p).path)
    for kind, word in (("first_child", "EVERY child"), ("row_is_node", "row i + 1"), ("one_level", "descending"),
                       ("child_row", "PARENT's row")):
        assert not check.accepted_path(check._path_variant(kind))
        assert word in capsys.readouterr().out
    assert not check.accepted_path(lambda a, t, p: None)
    assert "return" in capsys.readouterr().out


def test_eagle_training_pairs(capsys):
    assert check.eagle_training_pairs(lambda h, x: (h[:-2], x[1:-1], h[1:-1], x[2:]))
    assert not check.eagle_training_pairs(lambda h, x: (h[:-2], x[:-2], h[1:-1], x[1:-1]))
    assert "NEXT token" in capsys.readouterr().out
    assert not check.eagle_training_pairs(lambda h, x: (h[:-2], x[1:-1], h[:-2], x[2:]))
    assert "NEXT feature" in capsys.readouterr().out
    assert not check.eagle_training_pairs(stub)


def test_tokens_per_call(capsys, target):
    from lab.check_trees import _ref_tokens_per_call

    prompts = [list(range(1, 30)), list(range(30, 60))]
    assert check.tokens_per_call(_ref_tokens_per_call, target, prompts)

    def mean_of_ratios(t, make, ps, m):
        from lab.decode import generate
        runs = [generate(t, p, drafter=make(), max_new_tokens=m) for p in ps]
        return sum(g.stats["tokens_per_target_call"] for g in runs) / len(runs)

    assert not check.tokens_per_call(mean_of_ratios, target, prompts)
    assert "pool before dividing" in capsys.readouterr().out
    assert not check.tokens_per_call(lambda t, make, ps, m: _ref_tokens_per_call(t, make, ps, m) // 1, target, prompts)
    assert "//" in capsys.readouterr().out
    assert not check.tokens_per_call(stub, target, prompts)
    assert "not solved yet" in capsys.readouterr().out
