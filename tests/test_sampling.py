"""lab.sampling: fixed-outcome cases, parity with transformers' logits warpers, and the edge cases of oracle 4."""
import math

import numpy as np
import pytest
import torch
from transformers.generation.logits_process import TemperatureLogitsWarper, TopKLogitsWarper, TopPLogitsWarper

from lab.sampling import accept_or_reject, check_probs, probs_from_logits, residual_distribution


def hf_probs(logits, temperature, top_k, top_p):
    ids = torch.zeros(logits.shape[0], 1, dtype=torch.long)
    scores = TemperatureLogitsWarper(temperature)(ids, logits.clone())
    if top_k is not None:
        scores = TopKLogitsWarper(top_k)(ids, scores)
    if top_p is not None:
        scores = TopPLogitsWarper(top_p)(ids, scores)
    return torch.softmax(scores, -1)


@pytest.mark.parametrize("temperature,top_k,top_p", [(1.0, None, None), (0.7, None, None), (1.3, 5, None),
                                                     (1.0, None, 0.9), (0.8, 10, 0.5), (2.0, 1, None),
                                                     (1.0, None, 0.01)])
def test_probs_match_transformers_warpers(temperature, top_k, top_p):
    logits = torch.randn(8, 50, generator=torch.Generator().manual_seed(0)) * 3
    ours = probs_from_logits(logits, temperature, top_k, top_p)
    assert ours.dtype == torch.float32
    torch.testing.assert_close(ours, hf_probs(logits, temperature, top_k, top_p), atol=1e-6, rtol=1e-5)


def test_temperature_zero_is_one_hot_argmax_first_on_ties():
    logits = torch.tensor([[1.0, 3.0, 3.0, -2.0], [0.0, 0.0, 0.0, 5.0]])
    assert probs_from_logits(logits, 0.0).tolist() == [[0, 1, 0, 0], [0, 0, 0, 1]]
    assert probs_from_logits(logits, 0.0, top_k=2, top_p=0.1).tolist() == [[0, 1, 0, 0], [0, 0, 0, 1]]


def test_fixed_values():
    probs = probs_from_logits(torch.log(torch.tensor([0.5, 0.3, 0.2])), 1.0)
    torch.testing.assert_close(probs, torch.tensor([0.5, 0.3, 0.2]))
    # top-p 0.6: 0.5 alone does not reach 0.6, so 0.3 is kept too -> [0.625, 0.375, 0]
    torch.testing.assert_close(probs_from_logits(torch.log(torch.tensor([0.5, 0.3, 0.2])), 1.0, top_p=0.6),
                               torch.tensor([0.625, 0.375, 0.0]))
    # round masses: a uniform row of 10 keeps exactly 10 p tokens (float32 sums kept 7 for p = 0.6), and
    # [0.7, 0.3] at p = 0.7 keeps the first alone (float32(0.7) is a hair below 0.7)
    uniform = torch.log(torch.full((10,), 0.1))
    assert [int((probs_from_logits(uniform, 1.0, top_p=k / 10) > 0).sum()) for k in range(1, 11)] == list(range(1, 11))
    assert probs_from_logits(torch.log(torch.tensor([0.7, 0.3])), 1.0, top_p=0.7).tolist() == [1.0, 0.0]
    # temperature 2 on log-probs takes square roots, renormalised
    sq = torch.tensor([0.5, 0.3, 0.2]).sqrt()
    torch.testing.assert_close(probs_from_logits(torch.log(torch.tensor([0.5, 0.3, 0.2])), 2.0), sq / sq.sum())


@pytest.mark.parametrize("kwargs,word", [({"temperature": -0.1}, "temperature"), ({"temperature": float("nan")}, "temperature"),
                                         ({"top_k": 0}, "top_k"), ({"top_p": 0.0}, "top_p"), ({"top_p": 1.5}, "top_p"),
                                         ({"top_p": float("nan")}, "top_p")])
def test_bad_sampling_arguments_name_the_argument(kwargs, word):
    with pytest.raises(ValueError, match=word):
        probs_from_logits(torch.zeros(4), **kwargs)


def test_nan_logits_rejected():
    with pytest.raises(ValueError, match="NaN"):
        probs_from_logits(torch.tensor([0.0, float("nan")]))


def test_residual_fixed_values_and_zero_mass_fallback():
    target = torch.tensor([0.6, 0.4, 0.0])
    draft = torch.tensor([0.8, 0.1, 0.1])
    torch.testing.assert_close(residual_distribution(target, draft), torch.tensor([0.0, 1.0, 0.0]))
    same = torch.tensor([0.2, 0.3, 0.5])
    res = residual_distribution(same, same)
    assert not torch.isnan(res).any()
    torch.testing.assert_close(res, same)
    batch = residual_distribution(torch.stack([target, same]), torch.stack([draft, same]))
    torch.testing.assert_close(batch, torch.tensor([[0.0, 1.0, 0.0], [0.2, 0.3, 0.5]]))


def test_residual_never_puts_mass_where_target_has_none():
    gen = torch.Generator().manual_seed(1)
    for _ in range(50):
        target = torch.softmax(torch.randn(20, generator=gen) * 3, -1)
        target[torch.randint(0, 20, (5,), generator=gen)] = 0
        target /= target.sum()
        draft = torch.softmax(torch.randn(20, generator=gen), -1)
        res = residual_distribution(target, draft)
        assert (res[target == 0] == 0).all()
        assert math.isclose(float(res.sum()), 1.0, abs_tol=1e-5)


def test_residual_errors():
    with pytest.raises(ValueError, match="same shape"):
        residual_distribution(torch.tensor([0.5, 0.5]), torch.tensor([0.2, 0.3, 0.5]))
    with pytest.raises(ValueError, match="draft_probs.*sum to 1"):
        residual_distribution(torch.tensor([0.5, 0.5]), torch.tensor([2.0, 3.0]))
    with pytest.raises(ValueError, match="target_probs contains NaN"):
        residual_distribution(torch.tensor([float("nan"), 0.5]), torch.tensor([0.5, 0.5]))
    with pytest.raises(ValueError, match="negative"):
        check_probs("x", torch.tensor([1.5, -0.5]))


@pytest.mark.parametrize("target_prob,draft_prob,u,expected", [
    (0.3, 0.6, 0.49, True), (0.3, 0.6, 0.5, False), (0.3, 0.6, 0.51, False),  # ratio 0.5, strict <
    (0.6, 0.3, 0.99, True),  # ratio above 1: always accepted
    (0.0, 0.5, 0.0, False),  # the target can never produce it: never accepted, even with u == 0
    (0.2, 0.0, 0.7, True),  # draft probability 0: min(1, inf) = 1
    (0.5, 0.5, 0.0, True), (1e-9, 1.0, 0.0, True),
])
def test_accept_or_reject_fixed_outcomes(target_prob, draft_prob, u, expected):
    assert accept_or_reject(target_prob, draft_prob, u) is expected


@pytest.mark.parametrize("args,word", [((1.2, 0.5, 0.1), "target_prob"), ((0.5, -0.1, 0.1), "draft_prob"),
                                      ((0.5, 0.5, 1.0), "u"), ((float("nan"), 0.5, 0.1), "target_prob")])
def test_accept_or_reject_errors(args, word):
    with pytest.raises(ValueError, match=word):
        accept_or_reject(*args)


def test_check_token_ids_is_the_one_token_id_check():
    from lab.sampling import check_token_ids

    given = [3, 1, 2]
    out = check_token_ids("ids", given, 4)
    assert out == [3, 1, 2] and out is not given  # a fresh list: callers append to it
    assert check_token_ids("ids", torch.tensor([[5, 6]])) == [5, 6]  # [1, L] is one sequence
    assert check_token_ids("ids", np.array([7, 8])) == [7, 8] and type(check_token_ids("ids", (np.int64(2),))[0]) is int
    assert check_token_ids("ids", [], allow_empty=True) == []
    for bad, error, words in (("ab", TypeError, r"ids must be token ids, got text \('ab'\); see"),
                              ([1, 2.0], TypeError, "ids must hold integer token ids, got float 2.0; see"),
                              ([True], TypeError, "got bool True"),
                              (5, TypeError, "ids must be a list of token ids or a LongTensor, got int; see"),
                              (torch.tensor([1.0]), TypeError, "dtype torch.float32"),
                              (torch.zeros(2, 2, dtype=torch.long), ValueError, r"shape \(2, 2\)"),
                              ([], ValueError, "at least one token id"),
                              ([0, 4, -1], ValueError, r"ids must be token ids in \[0, 4\), got \[4, -1\]")):
        with pytest.raises(error, match=words):
            check_token_ids("ids", bad, 4, hint="; see")


def test_top_p_keeps_the_tokens_that_reach_the_mass_exactly():
    # uniform over 4 tokens (exact in float32): two tokens reach 0.5 exactly, so two stay, as in transformers
    # (which two is a tie: ours keeps the lowest ids)
    logits = torch.zeros(4)
    probs = probs_from_logits(logits, 1.0, top_p=0.5)
    assert probs.tolist() == [0.5, 0.5, 0.0, 0.0]
    assert TopPLogitsWarper(0.5)(None, logits[None].clone())[0].isfinite().sum().item() == 2


def test_top_p_keeps_the_lowest_ids_among_ties_at_the_cut():
    # 10 tied tokens at the top, the rest tied lower: the cut falls inside the lower tie, and the tokens kept there
    # are the lowest ids (a stable sort), whatever the vocabulary size; the unstable sort kept scattered ids
    for vocab in (5, 2048):
        logits = torch.zeros(vocab)
        logits[0] = 2.0
        if vocab > 5:
            logits[:10] = 4.0
        probs = probs_from_logits(logits, 1.0, top_p=0.5 if vocab == 5 else 0.3)
        kept = probs.nonzero().flatten().tolist()
        assert kept == list(range(len(kept)))
    lg = torch.tensor([2.0, 1.0, 1.0, 1.0, 0.0])
    torch.testing.assert_close(probs_from_logits(lg, 1.0, top_p=0.5),
                               torch.tensor([0.7311, 0.2689, 0.0, 0.0, 0.0]), atol=1e-4, rtol=0)
