"""Token-tree steps as the chain views draw them (widgets/tree_steps.py): ``chain_view`` and ``tree_residual``."""
import torch

from lab.trace import StepRecord
from widgets.tree_steps import chain_view, tree_residual


def test_chain_view_of_a_token_tree():
    # root children: nodes 0 and 1; node 0's children: 2 and 3. The target accepted 0 then rejected 2 and 3.
    parents = [-1, -1, 0, 0]
    vocab = 5
    target = torch.arange(5 * vocab, dtype=torch.float32).reshape(5, vocab)
    draft = torch.arange(4 * vocab, dtype=torch.float32).reshape(4, vocab) + 100
    record = StepRecord(index=0, position=0, drafted=[10, 11, 12, 13], num_accepted=1, emitted=[10, 4],
                        last_kind="resampled", parents=parents, path=[0], target_probs=target, draft_probs=draft)
    chain = chain_view(record)
    assert chain.parents is None
    assert chain.drafted == [10, 12]  # the path, then the first rejected child of its last node
    assert chain.emitted == [10, 4] and chain.num_accepted == 1 and chain.last_kind == "resampled"
    assert torch.equal(chain.target_probs, target[[0, 1, 3]])  # rows after: committed text, node 0, node 2
    assert torch.equal(chain.draft_probs, draft[[0, 2]])
    bonus = StepRecord(index=0, position=0, drafted=[10, 11, 12], num_accepted=2, emitted=[10, 12, 7],
                       last_kind="bonus", parents=[-1, -1, 0], path=[0, 2])
    assert chain_view(bonus).drafted == [10, 12]
    plain = StepRecord(index=0, position=0, drafted=[1, 2], num_accepted=2, emitted=[1, 2, 3], last_kind="bonus")
    assert chain_view(plain) is plain


def test_tree_residual_is_none_for_a_typical_tree_step():
    tree_step = StepRecord(index=0, position=0, drafted=[1, 2], num_accepted=0, emitted=[3], last_kind="resampled",
                           target_probs=torch.full((3, 4), 0.25), parents=[-1, -1], acceptance="typical")
    assert tree_residual(tree_step) is None
    exact = StepRecord(index=0, position=0, drafted=[1, 2], num_accepted=0, emitted=[3], last_kind="resampled",
                       target_probs=torch.full((3, 4), 0.25), parents=[-1, -1])
    residual, rejected = tree_residual(exact)
    assert rejected == 2 and torch.allclose(residual, torch.tensor([0.5, 0.0, 0.0, 0.5]))
