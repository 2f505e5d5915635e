"""lab.sampling: fixed-outcome cases, parity with transformers' logits warpers, and the edge cases of oracle 4."""

from __future__ import annotations

import math
import random

import numpy as np
import pytest
import torch
from transformers.generation.logits_process import (
    TemperatureLogitsWarper,
    TopKLogitsWarper,
    TopPLogitsWarper,
)

from lab.sampling import (
    accept_or_reject,
    categorical,
    probs_from_logits,
    residual_distribution,
    sample,
)
from lab.validation import check_probs


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


@pytest.mark.parametrize("kwargs,word", [({"temperature": -0.1}, "temperature"),
                                         ({"temperature": float("nan")}, "temperature"), ({"top_k": 0}, "top_k"),
                                         ({"top_p": 0.0}, "top_p"), ({"top_p": 1.5}, "top_p"),
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


def test_residual_subtracts_in_the_inputs_precision():
    """A float64 gap of 1e-9 is a residual of its own; rounded to float32 first it vanished, and the target came back
    instead of the residual ([0.5, 0.5] where [1, 0] is right)."""
    target = torch.tensor([0.5 + 1e-9, 0.5 - 1e-9], dtype=torch.float64)
    draft = torch.tensor([0.5, 0.5], dtype=torch.float64)
    res = residual_distribution(target, draft)
    assert res.dtype == torch.float64 and res.tolist() == [1.0, 0.0]
    assert residual_distribution(target.numpy(), draft.numpy()).tolist() == [1.0, 0.0]  # NumPy float64 too
    assert residual_distribution(target, draft.float()).dtype == torch.float64  # either input in float64 is enough
    # float32 inputs (and lists) keep float32, as the DESIGN contract's probs_from_logits output is
    assert residual_distribution(torch.tensor([0.6, 0.4]), torch.tensor([0.8, 0.2])).dtype == torch.float32
    assert residual_distribution([0.6, 0.4], [0.8, 0.2]).dtype == torch.float32


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


def test_probability_list_and_invert_cdf_the_pure_python_sampler():
    from lab.sampling import categorical, invert_cdf, probability_list

    probs = [0.25, 0.0, 0.75]
    assert probability_list("probs", probs) is probs  # a list of floats is not copied
    assert probability_list("probs", torch.tensor([0.5, 0.5])) == [0.5, 0.5]
    assert [invert_cdf(probs, u) for u in (0.0, 0.2499, 0.25, 0.9999)] == [0, 0, 2, 2]  # token 1 has no mass
    assert invert_cdf([0.5, 0.5, 0.0], 1.0) == 1  # rounding left u above the mass: the last token with mass
    with pytest.raises(ValueError, match="toy_model\\(\\[1\\]\\) must sum to 1"):
        probability_list(lambda: "toy_model([1])", [0.5, 0.6])
    with pytest.raises(TypeError, match="probs must be a sequence"):
        probability_list("probs", "0.5")
    with pytest.raises(ValueError, match="one distribution"):
        probability_list("probs", torch.ones(2, 2) / 2)
    import random

    assert categorical(probs, random.Random(0)) in (0, 2)


# --- sampling ------------------------------------------------------------------------------------------------------
def test_sample_accepts_lists_and_numpy_arrays():
    assert sample([0.0, 1.0]) == 1
    assert sample(np.array([0.0, 0.0, 1.0])) == 2
    probs = torch.tensor([0.1, 0.2, 0.3, 0.4])
    for seed in range(5):  # a float32 tensor is sampled exactly as torch.multinomial samples it
        expected = int(torch.multinomial(probs, 1, generator=torch.Generator().manual_seed(seed)))
        assert sample(probs, torch.Generator().manual_seed(seed)) == expected
        assert sample(probs.tolist(), torch.Generator().manual_seed(seed)) == expected


@pytest.mark.parametrize("probs, error, message", [
    (torch.tensor([5.0, 5.0]), ValueError, r"probs must sum to 1 .*got a sum of 10"),
    (torch.tensor([[0.5, 0.5], [0.5, 0.5]]), ValueError, r"probs must be one distribution \[V\], got shape \(2, 2\)"),
    (torch.tensor(1.0), ValueError, "probs must have a vocabulary axis"),
    (torch.tensor([float("nan"), 1.0]), ValueError, "probs contains NaN"),
    ("ab", TypeError, "probs must be a tensor or sequence of probabilities"),
])
def test_sample_rejects_what_is_not_one_distribution(probs, error, message):
    with pytest.raises(error, match=message):
        sample(probs)


def test_sample_rejects_another_kind_of_generator():
    with pytest.raises(TypeError, match="generator must be None or a torch.Generator, got Random"):
        sample([0.5, 0.5], random.Random(0))


def test_probs_from_logits_rejects_an_empty_batch():
    with pytest.raises(ValueError, match=r"logits must hold at least one row \[\.\.\., V\], got shape \(0, 5\)"):
        probs_from_logits(torch.zeros(0, 5))


NAN = float("nan")


@pytest.mark.parametrize("probs, words", [([-0.5, 1.5], "negative"), ([NAN, 1.0], "NaN"), ([0.1, 0.1], "sum to 1"),
                                          ([], "empty"), ("ab", "sequence of probabilities"),
                                          (torch.ones(2, 2) / 2, "one distribution")])
def test_categorical_validates(probs, words):
    with pytest.raises((ValueError, TypeError), match=words):
        categorical(probs, random.Random(0))


def test_categorical_values():
    class FixedU(random.Random):
        def __init__(self, u):
            super().__init__(0)
            self.u = u

        def random(self):
            return self.u

    assert categorical([0.25, 0.5, 0.25], FixedU(0.2)) == 0
    assert categorical([0.25, 0.5, 0.25], FixedU(0.74)) == 1
    assert categorical(torch.tensor([0.25, 0.5, 0.25]), FixedU(0.9)) == 2
    assert categorical([0.0, 1.0, 0.0], FixedU(0.999)) == 1


@pytest.mark.parametrize("args, error, word", [
    (("a", 0.5, 0.1), TypeError, "target_prob"), ((None, 0.5, 0.1), TypeError, "target_prob"),
    ((0.5, None, 0.1), TypeError, "draft_prob"), ((0.5, 0.5, "0.1"), TypeError, "u must be a number"),
    ((True, 0.5, 0.1), TypeError, "target_prob"), ((torch.tensor([0.5, 0.5]), 0.5, 0.1), TypeError, "target_prob"),
])
def test_accept_or_reject_names_wrong_types(args, error, word):
    with pytest.raises(error, match=word):
        accept_or_reject(*args)


def test_accept_or_reject_accepts_numpy_and_tensor_numbers():
    assert accept_or_reject(np.float32(0.375), torch.tensor(0.75), np.float64(0.49)) is True
    assert accept_or_reject(torch.tensor(0.375), 0.75, 0.5) is False  # u == ratio: strict <


@pytest.mark.parametrize("temperature", [1e-45, 1e-46, 1e-300, 5e-324, 1e-31])
def test_tiny_temperature_is_the_exact_limit(temperature):
    logits = torch.tensor([[1.0, 2.0, 3.0], [-5.0, -1.0, -3.0], [2.0, 2.0, -1.0]])
    probs = probs_from_logits(logits, temperature)
    assert not torch.isnan(probs).any()
    # the argmax gets everything; tied maxima share it, as softmax does for any T > 0
    assert probs.tolist() == [[0.0, 0.0, 1.0], [0.0, 1.0, 0.0], [0.5, 0.5, 0.0]]
    assert probs_from_logits(logits, temperature, top_k=1).tolist() == probs.tolist()


def test_huge_logits_at_small_temperature_do_not_overflow():
    logits = torch.tensor([3e38, 1e38, -3e38])
    assert probs_from_logits(logits, 0.5).tolist() == [1.0, 0.0, 0.0]


def test_ordinary_temperatures_keep_the_plain_formula():
    """The overflow guard must not change a single bit where no overflow is possible."""
    logits = torch.randn(4, 100, generator=torch.Generator().manual_seed(3)) * 5
    for temperature in (1.0, 0.7, 1.3, 1e-3):
        assert torch.equal(probs_from_logits(logits, temperature), torch.softmax(logits / temperature, -1))


@pytest.mark.parametrize("logits, words", [
    (torch.full((3,), -math.inf), "every logit in a row is -inf"),
    (torch.tensor([[0.0, 1.0], [-math.inf, -math.inf]]), "every logit in a row is -inf"),
    (torch.tensor([0.0, math.inf]), r"\+inf"),
    (torch.tensor([0.0, NAN]), "NaN"),
    (torch.tensor(1.0), "vocabulary axis"),
])
@pytest.mark.parametrize("temperature", [0.0, 1.0])
def test_logits_without_a_distribution_are_rejected(logits, words, temperature):
    with pytest.raises(ValueError, match=words):
        probs_from_logits(logits, temperature)


def test_logits_too_large_for_float32_are_named_as_such():
    for row in ([1e300, 0.0], [1e300, -math.inf], [-1e300, -1e300]):   # a masked -inf is no +inf
        with pytest.raises(ValueError, match="too large for float32"):
            probs_from_logits(torch.tensor(row, dtype=torch.float64))
    with pytest.raises(ValueError, match=r"contain \+inf"):                    # a real +inf still says so
        probs_from_logits(torch.tensor([float("inf"), 0.0], dtype=torch.float64))


def test_sample_takes_probabilities_on_the_models_device_with_a_cpu_generator():
    from lab.sampling import sample
    from tests.helpers import DEVICE

    probs = torch.tensor([0.0, 0.25, 0.75])
    draws = [[sample(probs.to(device), torch.Generator().manual_seed(seed)) for seed in range(30)]
             for device in ("cpu", DEVICE)]
    assert draws[0] == draws[1] and 0 not in draws[0] and set(draws[0]) == {1, 2}


@pytest.mark.parametrize("probs, words", [({0: 0.7, 1: 0.3}, "got dict"), ({0.5}, "got set"),
                                          ([True, False], "floats"), (["0.5", "0.5"], "floats")])
def test_a_probability_list_is_a_sequence_of_numbers(probs, words):
    """A dict was read as its keys ([0, 1]: "always token 1"), bools as 1 and 0 and strings were parsed."""
    from lab.sampling import categorical, probability_list

    with pytest.raises(TypeError, match=words):
        probability_list("probs", probs)
    with pytest.raises(TypeError, match=words):
        categorical(probs, random.Random(0))


def test_a_probability_lists_tolerance_is_a_number_in_0_1():
    from lab.sampling import probability_list

    with pytest.raises(TypeError, match="atol must be a number"):
        probability_list("probs", [0.5, 0.5], atol="a")
    with pytest.raises(ValueError, match=r"atol must be a number in \[0, 1\]"):
        probability_list("probs", [0.5, 0.5], atol=-1)
    assert probability_list("probs", [0.5, 0.5], atol=0) == [0.5, 0.5]


@pytest.mark.parametrize("logits", [None, "1.0 2.0"])
def test_probs_from_logits_names_what_is_not_logits(logits):
    """None raised torch's own "Could not infer dtype of NoneType"."""
    with pytest.raises(TypeError, match=r"logits must be a floating-point tensor \[\.\.\., V\], got "):
        probs_from_logits(logits)
