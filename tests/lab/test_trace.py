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
    with pytest.raises(ValueError, match="last_kind must be 'bonus'"):  # node 2 has no child the target could reject
        tree([0, 2], "resampled")
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


@pytest.mark.parametrize("fields, error, message", [
    (dict(drafted=[5.7, 6]), TypeError, "StepRecord drafted must hold integer"),
    (dict(drafted=[5, -6]), ValueError, "StepRecord drafted must be token ids"),
    (dict(emitted=[5, 9.0]), TypeError, "StepRecord emitted must hold integer"),
    (dict(num_accepted=3), ValueError, r"num_accepted \(accepted drafts\) must be an integer in \[0, 2\]"),
    (dict(num_accepted=1.0), ValueError, "num_accepted"),
    (dict(last_kind="<script>"), ValueError, "last_kind must be one of"),
    (dict(acceptance="greedy"), ValueError, "acceptance must be one of"),
    (dict(index=-1), ValueError, "StepRecord index"),
    (dict(position=2.5), ValueError, "StepRecord position"),
    (dict(cache_before=-3), ValueError, "cache_before"),
    (dict(emitted=[5, 6, 9, 9]), ValueError, "at most num_accepted \\+ 1 = 3"),
    (dict(emitted=[6, 5, 9]), ValueError, "must start with the accepted drafts \\[5, 6\\]"),
    (dict(path=[0.0, 1.0]), ValueError, "path must hold indices into drafted"),
    (dict(path=[0, 5]), ValueError, r"integers in \[0, 2\)"),
    (dict(path=[1, 0]), ValueError, "not a root-to-leaf path"),
    (dict(path=[0]), ValueError, "path lists 1 accepted nodes but num_accepted is 2"),
    (dict(path="01"), TypeError, "path must be a list"),
    (dict(emitted=[]), ValueError, "StepRecord emitted must hold at least one token id"),
    (dict(path={0: 1}), TypeError, "path must be a list of draft indices, got dict"),
    (dict(parents=[-1]), ValueError, "parents has 1 entries for 2 drafted"),
    (dict(parents=[-1, 1], path=[0, 1]), ValueError, r"parents\[1\] must be -1"),
    (dict(num_accepted=1, emitted=[5, 9]), ValueError, "last_kind must be 'resampled' when 1 of 2"),
])
def test_a_hand_built_record_is_checked(fields, error, message):
    """Every view trusts a record's fields, and lessons and tests build records by hand: a float id used to be
    truncated by the widgets, a path out of range drawn, an unknown last_kind shown as a bonus, and an acceptance
    rate of 2.5 summarised (three accepted of two drafted)."""
    base = dict(index=1, position=0, drafted=[5, 6], num_accepted=2, emitted=[5, 6, 9], last_kind="bonus")
    with pytest.raises(error, match=message):
        StepRecord(**{**base, **fields})
    record = StepRecord(**base)  # the same record, right, passes, and its ids come back as plain ints
    assert record.path == [0, 1] and record.rejected == []
    import torch

    from_tensors = StepRecord(**{**base, "drafted": torch.tensor([5, 6]), "emitted": (5, 6, 9),
                                 "num_accepted": torch.tensor(2), "path": [torch.tensor(0), 1]})
    assert from_tensors.drafted == [5, 6] and from_tensors.emitted == [5, 6, 9] and from_tensors.path == [0, 1]
    assert all(type(t) is int for t in from_tensors.drafted + from_tensors.path + [from_tensors.num_accepted])


def test_a_path_may_be_an_array_and_a_changed_record_is_checked_again():
    """A path given as a NumPy array or tensor raised NumPy's "truth value ... ambiguous"; a record changed after it
    was built is checked again, with the same rules, by check_step_record (what the widgets call)."""
    import numpy as np
    import torch

    from lab.trace import check_step_record

    base = dict(index=3, position=0, drafted=[5, 6, 7], num_accepted=2, emitted=[5, 7, 9], last_kind="bonus",
                parents=[-1, -1, 0])
    assert StepRecord(**base, path=np.array([0, 2])).path == [0, 2]
    assert StepRecord(**base, path=torch.tensor([0, 2])).path == [0, 2]
    record = StepRecord(**base, path=[0, 2])
    check_step_record(record, "Viewer")  # as built: passes
    record.num_accepted = 3
    with pytest.raises(ValueError, match=r"^Viewer: step 3: StepRecord path lists 2 accepted nodes but num_accepted"):
        check_step_record(record, "Viewer")
