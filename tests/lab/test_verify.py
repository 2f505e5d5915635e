"""lab.verify: greedy tree verification, exact (recursive rejection) sampling over siblings and levels, Medusa's
typical acceptance, and the public helpers the decode loop and the TokenStream widget share."""

from __future__ import annotations

import math
import random
import re

import numpy as np
import pytest
import torch

from lab import verify
from lab.metrics import chi_square
from lab.verify import verify_greedy, verify_tree_greedy, verify_tree_sampled, verify_tree_typical


def test_greedy_tree_takes_the_longest_matching_path():
    tokens, parents = [10, 11, 12, 13, 14], [-1, -1, 1, 1, 3]
    # target argmax per row: row 0 (after last) -> 11, row 2 (after node 1) -> 13, row 4 (after node 3) -> 14
    argmax = [11, 0, 13, 0, 14, 99]
    result = verify_tree_greedy(argmax, tokens, parents)
    assert result.path == [1, 3, 4] and result.num_accepted == 3
    assert result.next_token == 99 and result.kind == "bonus"
    argmax = [11, 0, 50, 0, 14, 99]
    result = verify_tree_greedy(argmax, tokens, parents)
    assert result.path == [1] and result.next_token == 50 and result.kind == "resampled"
    with pytest.raises(ValueError, match="rows"):
        verify_tree_greedy(argmax[:-1], tokens, parents)
    with pytest.raises(ValueError, match="parents"):
        verify_tree_greedy(argmax, tokens, parents[:-1])


TARGET = torch.tensor([0.1, 0.4, 0.3, 0.2, 0.0])


DRAFT = torch.tensor([0.5, 0.1, 0.1, 0.1, 0.2])


def _first_token_counts(make_tree, runs=20000, seed=0):
    gen = torch.Generator().manual_seed(seed)
    counts = torch.zeros(5)
    for _ in range(runs):
        tokens, draft_probs = make_tree(gen)
        rows = torch.stack([TARGET] * (len(tokens) + 1))
        result = verify_tree_sampled(rows, tokens, [-1] * len(tokens), draft_probs, gen)
        counts[tokens[result.path[0]] if result.path else result.next_token] += 1
    return counts


def _iid(gen):
    tokens = torch.multinomial(DRAFT, 3, replacement=True, generator=gen).tolist()
    return tokens, torch.stack([DRAFT] * 3)


def _without_replacement(gen):
    q, tokens, rows = DRAFT.clone(), [], []
    for _ in range(3):
        rows.append(q.clone())
        tokens.append(int(torch.multinomial(q, 1, generator=gen)))
        q[tokens[-1]] = 0
        q = q / q.sum()
    return tokens, torch.stack(rows)


def _top_k(gen):
    return [0, 4, 1], None  # deterministic choices, including one the target gives zero probability


@pytest.mark.parametrize("make_tree", [_iid, _without_replacement, _top_k])
def test_sampled_siblings_are_exact(make_tree):
    counts = _first_token_counts(make_tree)
    assert counts[4] == 0  # a zero-probability token is never emitted
    assert chi_square(counts, TARGET).pvalue > 1e-3


def test_sampled_two_levels_joint_distribution_is_exact():
    """A depth-2 deterministic tree on a 2-token context model: the emitted pair follows target(a) * target(b|a)."""
    second = torch.tensor([[0.6, 0.4], [0.1, 0.9]])  # target(b | a)
    first = torch.tensor([0.3, 0.7])
    gen = torch.Generator().manual_seed(1)
    counts = torch.zeros(4)
    tokens, parents = [0, 1, 1], [-1, -1, 0]  # 0 and 1 at depth 0; 1 under 0
    rows = torch.stack([first, second[0], second[1], second[1]])  # row 1+i: after node i
    for _ in range(20000):
        result = verify_tree_sampled(rows, tokens, parents, None, gen)
        emitted = [tokens[i] for i in result.path] + [result.next_token]
        if len(emitted) == 1:  # only the first token was decided; draw the second from the target, as a step would
            emitted.append(int(torch.multinomial(second[emitted[0]], 1, generator=gen)))
        counts[2 * emitted[0] + emitted[1]] += 1
    expected = (first[:, None] * second).reshape(-1)
    assert chi_square(counts, expected).pvalue > 1e-3


def test_sampled_verification_uses_the_draft_probabilities():
    # With draft == target every draft is accepted (u * draft < target for every u < 1). A verifier that ignored
    # draft_probs (every draft treated as one-hot) would still be exact but would reject most of these.
    p = torch.tensor([0.1, 0.4, 0.3, 0.2])
    for seed in range(200):
        gen = torch.Generator().manual_seed(seed)
        tokens = torch.multinomial(p, 3, replacement=True, generator=gen).tolist()
        r = verify_tree_sampled(torch.stack([p] * 4), tokens, [-1, 0, 1], torch.stack([p] * 3), gen)
        assert (r.num_accepted, r.kind) == (3, "bonus")


def test_sampled_rejection_is_reported_as_resampled():
    p = torch.tensor([0.5, 0.5, 0.0])  # the target never makes token 2
    r = verify_tree_sampled(torch.stack([p, p]), [2], [-1], None, torch.Generator().manual_seed(0))
    assert (r.num_accepted, r.kind) == (0, "resampled") and r.next_token in (0, 1)


def test_typical_acceptance_drifts_from_the_target():
    gen = torch.Generator().manual_seed(0)
    counts = torch.zeros(5)
    rows = torch.stack([TARGET] * 2)
    for _ in range(5000):
        result = verify_tree_typical(rows, [1], [-1], gen)
        counts[1 if result.path else result.next_token] += 1
    assert counts[1] == 5000  # 0.4 is above the threshold: always accepted
    assert chi_square(counts, TARGET).pvalue < 1e-6


def test_typical_takes_the_longest_passing_path_with_medusa_constants():
    from lab.verify import typical_threshold

    flat = torch.full((100,), 0.01)
    assert float(typical_threshold(flat)) == pytest.approx(0.3 * 0.01)  # delta * exp(-H) with H = ln 100
    sure = torch.tensor([0.999] + [0.001 / 99] * 99)
    assert float(typical_threshold(sure)) == pytest.approx(0.09)  # capped by epsilon
    rows = torch.tensor([[0.5, 0.5, 0.0], [0.0, 0.0, 1.0], [0.0, 0.0, 1.0], [0.0, 0.0, 1.0]])
    # nodes 0 and 1 both pass at the top; only node 1 has a passing child (node 2): the longer path wins
    result = verify_tree_typical(rows, [0, 1, 2], [-1, -1, 1], torch.Generator().manual_seed(0))
    assert result.path == [1, 2] and result.next_token == 2 and result.kind == "bonus"


def test_typical_default_constants_decide_a_borderline_node():
    # entropy H of this row gives the threshold 0.3 * exp(-H) = 0.0501, under the 0.09 cap (Medusa's defaults)
    row = torch.tensor([0.5, 0.04, 0.06] + [0.4 / 7] * 7)
    entropy = -(row * row.log()).sum()
    assert abs(0.3 * math.exp(-entropy.item()) - 0.0501) < 1e-4
    rows = torch.stack([row, row])
    gen = torch.Generator().manual_seed(0)
    assert verify_tree_typical(rows, [1], [-1], gen).path == []   # 0.04 is below the threshold
    assert verify_tree_typical(rows, [2], [-1], gen).path == [0]  # 0.06 is above it


def test_typical_first_of_equal_paths_wins_and_next_token_comes_from_its_row():
    gen = torch.Generator().manual_seed(0)
    rows = torch.tensor([[0.5, 0.5, 0.0], [0.0, 0.0, 1.0], [1.0, 0.0, 0.0]])
    r = verify_tree_typical(rows, [0, 1], [-1, -1], gen)  # both siblings pass; the first listed wins
    assert (r.path, r.next_token, r.kind) == ([0], 2, "bonus")  # drawn from row 1, the one after node 0
    rows = torch.tensor([[0.0, 1.0, 0.0], [1.0, 0.0, 0.0]])
    r = verify_tree_typical(rows, [1], [-1], gen)
    assert (r.path, r.next_token, r.kind) == ([0], 0, "bonus")


def test_reject_child_is_the_residual_the_sampler_draws_from():
    """reject_child removes one rejected node's proposal: norm(max(0, r - q_child)), one-hot without draft rows."""
    from lab.sampling import residual_distribution
    from lab.verify import reject_child

    r = torch.tensor([0.1, 0.4, 0.3, 0.2])
    rows = torch.tensor([[0.7, 0.1, 0.1, 0.1], [0.25, 0.25, 0.25, 0.25]])
    torch.testing.assert_close(reject_child(r, 1, 1, rows), residual_distribution(r, rows[1]))
    torch.testing.assert_close(reject_child(r, 0, 1, None), torch.tensor([1 / 6, 0.0, 0.5, 1 / 3]))  # one-hot on 1
    assert reject_child(r, 0, 0, torch.stack([r, r])).tolist() == r.tolist()  # nothing left: the row itself


def test_unchecked_verifiers_make_the_same_draws_as_the_checked_ones():
    """The decode loop calls the unchecked verifiers (its rows are valid by construction): same results, same RNG."""
    from lab.verify import verify_tree_sampled_unchecked, verify_tree_typical_unchecked

    gen = torch.Generator().manual_seed(0)
    rows = torch.softmax(torch.randn(5, 9, generator=gen), -1)
    draft = torch.softmax(torch.randn(4, 9, generator=gen), -1)
    tokens, parents = [1, 2, 3, 4], [-1, -1, 0, 2]
    for seed in range(30):
        checked = verify_tree_sampled(rows, tokens, parents, draft, torch.Generator().manual_seed(seed))
        fast = verify_tree_sampled_unchecked(rows, tokens, parents, draft, torch.Generator().manual_seed(seed))
        assert checked == fast
        checked = verify_tree_typical(rows, tokens, parents, torch.Generator().manual_seed(seed))
        assert checked == verify_tree_typical_unchecked(rows, tokens, parents, torch.Generator().manual_seed(seed))
    with pytest.raises(ValueError, match="parents"):  # the parents array is still checked
        verify_tree_sampled_unchecked(rows, tokens, [-1, 5, 0, 0], draft, None)


def test_verify_checks_lengths_ids_shapes_and_generator():
    g = torch.Generator().manual_seed(0)
    tp = torch.softmax(torch.randn(3, 5), -1)
    with pytest.raises(ValueError, match=r"target_argmax must hold len\(drafted\) \+ 1 = 5 entries.*got 2"):
        verify.verify_greedy([1, 2], [1, 2, 3, 4])
    with pytest.raises(ValueError, match="= 1 entries"):
        verify.verify_greedy([], [])
    assert verify.verify_greedy([1, 2, 3], [1, 2]).num_accepted == 2
    with pytest.raises(ValueError, match=r"drafted tokens must be ids in \[0, 5\).*\[-1\]"):
        verify.verify_sampled(tp, [-1, 2], None, g)
    with pytest.raises(ValueError, match=r"\[0, 5\).*\[7\]"):
        verify.verify_sampled(tp, [7, 2], None, g)
    with pytest.raises(ValueError, match=r"draft_probs must be None or a float tensor \[n, V\] = \[2, 5\]"):
        verify.verify_sampled(tp, [1, 2], torch.softmax(torch.randn(2, 6), -1), g)
    with pytest.raises(ValueError, match=r"\[2, 5\].*\(1, 5\)"):
        verify.verify_sampled(tp, [1, 2], torch.softmax(torch.randn(1, 5), -1), g)
    with pytest.raises(TypeError, match="generator must be a torch.Generator or None, got Random"):
        verify.verify_sampled(tp, [1, 2], None, random.Random(0))
    with pytest.raises(TypeError, match="generator must be a torch.Generator"):
        verify.verify_tree_typical(tp, [1, 2], [-1, 0], random.Random(0))
    with pytest.raises(TypeError, match="target_probs must be a float tensor"):
        verify.verify_sampled(tp.tolist(), [1, 2], None, g)
    with pytest.raises(ValueError, match="target_probs contains NaN"):
        verify.verify_sampled(torch.full((3, 5), float("nan")), [1, 2], None, g)
    with pytest.raises(ValueError, match="target_probs contains NaN"):
        verify.verify_tree_typical(torch.full((3, 5), float("nan")), [1, 2], [-1, 0], g)
    result = verify.verify_sampled(tp, [np.int64(1), 2], None, torch.Generator().manual_seed(0))
    assert 0 <= result.next_token < 5 and result.num_accepted <= 2


def test_verify_docstrings_say_what_they_raise():
    for name in ("verify_greedy", "verify_sampled", "verify_tree_greedy", "verify_tree_sampled",
                 "verify_tree_typical"):
        assert "Raises" in getattr(verify, name).__doc__, name


def test_verify_greedy_fixed_outcomes():
    # target argmax per row [5, 7, 9]: a mismatch at the second draft keeps one and takes the target's 7
    r = verify.verify_greedy([5, 7, 9], [5, 8])
    assert (r.num_accepted, r.next_token, r.kind, r.path) == (1, 7, "resampled", [0])
    r = verify.verify_greedy([4, 7, 9], [5, 7])
    assert (r.num_accepted, r.next_token, r.kind, r.path) == (0, 4, "resampled", [])
    r = verify.verify_greedy([5, 7, 9], [5, 7])
    assert (r.num_accepted, r.next_token, r.kind, r.path) == (2, 9, "bonus", [0, 1])


def test_sampled_verifiers_refuse_rows_that_are_not_distributions():
    """Logits, negative rows, a softmax over the wrong axis or a draft row giving its own token probability 0 used
    to be verified silently (2.0 everywhere accepted every draft and returned a bonus)."""
    g = torch.Generator().manual_seed(0)
    good = torch.softmax(torch.randn(3, 4, generator=g), -1)
    cases = [
        (lambda: verify.verify_sampled(torch.full((3, 4), 2.0), [1, 2], None, g), "target_probs must sum to 1"),
        (lambda: verify.verify_sampled(torch.tensor([[-0.5, 1.5], [0.5, 0.5]]), [1], None, g),
         "target_probs has negative entries"),
        (lambda: verify.verify_sampled(torch.softmax(torch.randn(3, 4, generator=g), 0), [1, 2], None, g),
         "target_probs must sum to 1"),
        (lambda: verify.verify_sampled(good, [1, 2], torch.full((2, 4), 0.5), g), "draft_probs must sum to 1"),
        (lambda: verify.verify_sampled(torch.full((2, 2), 0.5), [1], torch.tensor([[1.0, 0.0]]), g),
         r"own drafted token probability 0 at rows \[0\]"),
        (lambda: verify.verify_tree_sampled(torch.full((3, 4), 2.0), [1, 2], [-1, -1], None, g),
         "target_probs must sum to 1"),
        (lambda: verify.verify_tree_typical(torch.full((3, 4), 2.0), [1, 2], [-1, 0], g), "target_probs must sum to 1"),
    ]
    for call, words in cases:
        with pytest.raises(ValueError, match=words):
            call()
    # valid rows still verify, with the same draws as before the scan (the scan draws nothing)
    draft = torch.softmax(torch.randn(2, 4, generator=torch.Generator().manual_seed(1)), -1)
    a = verify.verify_sampled(good, [1, 2], draft, torch.Generator().manual_seed(5))
    b = verify.verify_tree_sampled_unchecked(good, [1, 2], [-1, 0], draft, torch.Generator().manual_seed(5))
    assert (a.num_accepted, a.next_token, a.kind) == (b.num_accepted, b.next_token, b.kind)


def test_sampled_verifiers_take_half_precision_rows():
    from lab import verify

    logits = torch.zeros(2, 1000)
    logits[:, 3] = 8.0
    rows = torch.softmax(logits.bfloat16(), -1)  # sums 1.002 after bf16 rounding
    result = verify.verify_sampled(rows, [3], None, torch.Generator().manual_seed(0))
    assert result.num_accepted in (0, 1)
    with pytest.raises(ValueError, match="must sum to 1"):
        verify.verify_sampled(torch.full((2, 4), 0.5, dtype=torch.bfloat16), [1], None, torch.Generator())


def test_greedy_and_typical_verification_name_bad_inputs():
    with pytest.raises(TypeError, match="target_argmax must hold integer token ids, got str 'a'"):
        verify.verify_greedy(["a", "b"], ["a"])
    with pytest.raises(TypeError, match="drafted"):
        verify.verify_greedy([1, 2], [1.5])
    probs = torch.full((2, 4), 0.25)
    for bad in (1.5, "a", True):  # a ValueError before, where the greedy check raises TypeError
        with pytest.raises(TypeError, match="drafted tokens must be integer token ids"):
            verify.verify_sampled(probs, [bad], None, torch.Generator())
        with pytest.raises(TypeError, match="drafted tokens must be integer token ids"):
            verify.verify_tree_typical(probs, [bad], [-1], torch.Generator())
    for bad in (None, 3, "ab", {1: 2}, {1}):  # None raised "object of type 'NoneType' has no len()"; a dict its keys
        with pytest.raises(TypeError, match="drafted tokens must be a list of token ids, got"):
            verify.verify_sampled(probs, bad, None, torch.Generator())
    with pytest.raises(ValueError, match="target_probs contains NaN"):
        verify.typical_threshold(torch.full((5,), float("nan")))


def test_rows_on_the_models_device_are_verified_with_a_cpu_generator():
    """generate draws with a CPU generator; a learner's rows from a CUDA model made multinomial raise, reported as
    'target_probs is not a valid distribution'. On CPU (LAB_TEST_DEVICE unset) both runs are on one device."""
    from tests.helpers import DEVICE

    target = torch.tensor([[0.1, 0.2, 0.7], [0.5, 0.25, 0.25], [0.2, 0.2, 0.6]])
    draft = torch.tensor([[0.6, 0.2, 0.2], [0.1, 0.1, 0.8]])
    runs = []
    for device in ("cpu", DEVICE):
        generator = torch.Generator().manual_seed(5)
        results = [verify.verify_sampled(target.to(device), [0, 2], draft.to(device), generator) for _ in range(40)]
        runs.append([(r.num_accepted, r.next_token) for r in results])
    assert runs[0] == runs[1]
    generator = torch.Generator().manual_seed(5)
    typical = verify_tree_typical(target.to(DEVICE), [2, 0], [-1, 0], generator)
    assert typical.num_accepted == 2 and typical.path == [0, 1]  # 0.7 and 0.5 pass the typical threshold


def test_greedy_verifiers_refuse_ids_that_are_no_token_ids():
    """A tester's float and negative argmaxes were verified silently (next_token -5, or 1 for 1.5)."""
    for call, words in ((lambda: verify_tree_greedy([1.5, 2.5, 3.5], [1, 2], [-1, 0]),
                         "target_argmax must hold integer"),
                        (lambda: verify_tree_greedy([-5, 2, 3], [1, 2], [-1, 0]), "target_argmax must be token ids"),
                        (lambda: verify_greedy([-5], []), "target_argmax must be token ids (integers >= 0), got -5"),
                        (lambda: verify_tree_greedy([1, 2, 3], [1, -2], [-1, 0]), "tokens must be token ids"),
                        (lambda: verify_tree_greedy([1, 2, 3], "ab", [-1, 0]), "tokens must be token ids, got text")):
        with pytest.raises((TypeError, ValueError), match=re.escape(words)):
            call()
    assert verify_tree_greedy(torch.tensor([1, 2, 3]), [1, 2], [-1, 0]).path == [0, 1]  # a tensor row still works


def test_typical_threshold_wants_a_distribution_and_numbers():
    """A tester's all-ones rows and negative entries got 0.09 silently; a list an AttributeError; epsilon 'a' a
    comparison error."""
    for bad, words in ((torch.ones(3, 4), "must sum to 1"), ([[2.0, -1.0]], "negative entries")):
        with pytest.raises(ValueError, match=words):
            verify.typical_threshold(bad)
    assert verify.typical_threshold([0.5, 0.5]).item() == pytest.approx(0.09)  # a list is taken as a tensor
    for kwargs, words in ((dict(epsilon="a"), "epsilon must be a number in (0, 1], got str 'a'"),
                          (dict(delta=float("inf")), "delta must be a finite number > 0")):
        with pytest.raises((TypeError, ValueError), match=re.escape(words)):
            verify.typical_threshold(torch.tensor([0.5, 0.5]), **kwargs)


def test_typical_threshold_takes_what_the_verifiers_take():
    """A reviewer: bfloat16 rows the typical verifier accepts were refused by typical_threshold, a float64 row came
    back float32 and a one-element tensor epsilon was refused."""
    rows = torch.softmax(torch.randn(2, 4096, generator=torch.Generator().manual_seed(0)) * 6, -1).bfloat16()
    assert verify.typical_threshold(rows).shape == (2,)
    assert verify.typical_threshold(torch.tensor([0.5, 0.5], dtype=torch.float64)).dtype == torch.float64
    assert verify.typical_threshold(torch.tensor([0.5, 0.5]), epsilon=torch.tensor(0.05)).item() == pytest.approx(0.05)
