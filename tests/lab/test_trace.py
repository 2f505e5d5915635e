"""lab.trace: the StepRecord every view consumes."""
import pytest

from lab.trace import StepRecord


def test_a_tree_record_without_its_path_is_refused():
    # node 2 hangs under node 0: the accepted nodes [0, 2] are not the first two, so no default path can be right
    with pytest.raises(ValueError, match="needs its path"):
        StepRecord(index=0, position=0, drafted=[5, 6, 7], num_accepted=2, emitted=[5, 7, 9], last_kind="bonus",
                   parents=[-1, -1, 0])
    record = StepRecord(index=0, position=0, drafted=[5, 6, 7], num_accepted=2, emitted=[5, 7, 9],
                        last_kind="bonus", parents=[-1, -1, 0], path=[0, 2])
    assert record.rejected == [6]
    chain = StepRecord(index=0, position=0, drafted=[5, 6, 7], num_accepted=2, emitted=[5, 6, 1],
                       last_kind="resampled")
    assert chain.path == [0, 1] and chain.rejected == [7]


def test_first_rejected_child_is_the_first_child_of_the_accepted_paths_end():
    """The one draft a chain view (TokenStream, the demo) strikes through for a token-tree step."""
    from lab.trace import StepRecord, first_rejected_child

    def tree(path, last_kind, parents=(-1, 0, 0, -1, 3)):
        return StepRecord(index=1, position=0, drafted=[10, 11, 12, 13, 14], num_accepted=len(path),
                          emitted=[10 + i for i in path] + [99], last_kind=last_kind, parents=list(parents),
                          path=list(path))

    assert first_rejected_child(tree([0], "resampled")) == 1       # node 0's children: 1, then 2
    assert first_rejected_child(tree([], "resampled")) == 0        # nothing accepted: the first root child
    assert first_rejected_child(tree([3, 4], "bonus")) is None     # a leaf: nothing rejected at the end
    assert first_rejected_child(tree([0, 2], "resampled")) is None  # node 2 has no child to reject
    chain = StepRecord(index=1, position=0, drafted=[10, 11], num_accepted=1, emitted=[10, 99], last_kind="resampled")
    assert first_rejected_child(chain) is None


def test_own_token_kind_calls_a_step_without_drafts_the_targets_token():
    """The prefill and a lookup miss record last_kind "bonus" (every one of their zero drafts was accepted), but earned
    nothing: the widgets and the demo show their token as the target's own (lab.trace.own_token_kind)."""
    from lab.trace import StepRecord, own_token_kind

    prefill = StepRecord(index=0, position=0, drafted=[], num_accepted=0, emitted=[5], last_kind="bonus", prefill=True)
    assert own_token_kind(prefill) == "target"
    assert own_token_kind(StepRecord(index=1, position=1, drafted=[3, 4], num_accepted=2, emitted=[3, 4, 9],
                                     last_kind="bonus")) == "bonus"
    assert own_token_kind(StepRecord(index=2, position=4, drafted=[3, 4], num_accepted=0, emitted=[7],
                                     last_kind="resampled")) == "resampled"
