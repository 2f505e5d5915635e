"""lab.toy: the toy models, one speculative step on them, and the chi-square exactness oracle of speculative
sampling (DESIGN oracle 2; seed lesson 000, step 5)."""


from __future__ import annotations

import math
import random

import numpy as np
import pytest
import torch

from lab import metrics, toy

P_MIN = 1e-3  # a correct sampler fails one of these tests with probability ~1e-3 per seed; the seeds are fixed


# --- toy models ---------------------------------------------------------------------------------------------

def test_toy_models():
    m = toy.fixed_model([0.2, 0.8])
    assert m([]) == pytest.approx([0.2, 0.8]) and m([1, 0, 1]) == pytest.approx([0.2, 0.8])
    b = toy.bigram_model([[0.9, 0.1], [0.3, 0.7]])
    assert b([]) == pytest.approx([0.9, 0.1]) and b([0, 1]) == pytest.approx([0.3, 0.7])
    mix = toy.mixture_model(m, toy.fixed_model([1.0, 0.0]), 0.25)
    assert mix([]) == pytest.approx([0.4, 0.6])
    with pytest.raises(ValueError):
        toy.fixed_model([0.5, 0.6])
    with pytest.raises(ValueError):
        toy.bigram_model([[0.5, 0.5, 0.0], [0.5, 0.5, 0.0]])
    with pytest.raises(ValueError):
        toy.mixture_model(m, m, 1.5)


def test_speculative_step_structure():
    rng = random.Random(0)
    target = toy.fixed_model([0.4, 0.3, 0.2, 0.1])
    prefix = [2, 1]
    for n in (1, 4):
        out = toy.speculative_step(prefix, target, target, n, rng)
        assert out[:2] == [2, 1] and len(out) == 2 + n + 1  # all accepted + the bonus token
    assert prefix == [2, 1]
    never = toy.fixed_model([0.0, 0.0, 0.0, 1.0])  # proposes only a token the target below never emits
    cut = toy.fixed_model([0.5, 0.5, 0.0, 0.0])
    for _ in range(50):
        out = toy.speculative_step(prefix, cut, never, 4, rng)
        assert len(out) == 3 and out[2] in (0, 1)


def test_speculative_step_bad_input():
    m = toy.fixed_model([0.5, 0.5])
    with pytest.raises(ValueError):
        toy.speculative_step([0], m, m, 0, random.Random(0))
    with pytest.raises(TypeError):
        toy.speculative_step([0], m, m, 2, 123)
    with pytest.raises(ValueError):
        toy.speculative_step([0], m, toy.fixed_model([0.2, 0.3, 0.5]), 2, random.Random(0))


# --- the exactness oracle -----------------------------------------------------------------------------------

TARGET = [0.4, 0.3, 0.2, 0.1]
DRAFTS = {
    "perturbed": [0.1, 0.2, 0.3, 0.4],
    "one-hot": [0.0, 1.0, 0.0, 0.0],           # a deterministic draft, verified as one-hot
    "zero where target has mass": [0.5, 0.5, 0.0, 0.0],
    "equal to target": TARGET,
}


@pytest.mark.parametrize("name", list(DRAFTS))
@pytest.mark.parametrize("n_draft", [1, 3])
def test_first_emitted_token_follows_target(name, n_draft):
    rng = random.Random(1234 + n_draft)
    target, draft = toy.fixed_model(TARGET), toy.fixed_model(DRAFTS[name])
    counts = [0] * 4
    for _ in range(12_000):
        counts[toy.speculative_step([0], target, draft, n_draft, rng)[1]] += 1
    assert metrics.chi_square(counts, TARGET).pvalue > P_MIN, counts


@pytest.mark.parametrize("name", ["perturbed", "one-hot", "zero where target has mass"])
def test_all_emitted_tokens_follow_target(name):
    """Chained steps on context-free models: the first L generated tokens are i.i.d. from the target."""
    rng = torch.Generator().manual_seed(7)
    target, draft = toy.fixed_model(TARGET), toy.fixed_model(DRAFTS[name])
    seq = [0]
    while len(seq) < 1 + 15_000:
        seq = toy.speculative_step(seq, target, draft, 4, rng)
    counts = [0] * 4
    for token in seq[1:1 + 15_000]:
        counts[token] += 1
    assert metrics.chi_square(counts, TARGET).pvalue > P_MIN, counts


def test_bigram_transitions_follow_target():
    """With context-dependent models each transition a -> b must follow the target's row a."""
    table_t = [[0.6, 0.3, 0.1], [0.1, 0.2, 0.7], [0.3, 0.4, 0.3]]
    table_d = [[0.2, 0.4, 0.4], [0.0, 1.0, 0.0], [0.1, 0.8, 0.1]]
    rng = random.Random(3)
    seq = [0]
    while len(seq) < 15_000:
        seq = toy.speculative_step(seq, toy.bigram_model(table_t), toy.bigram_model(table_d), 3, rng)
    pairs = [[0] * 3 for _ in range(3)]
    for a, b in zip(seq, seq[1:]):
        pairs[a][b] += 1
    for a in range(3):
        assert metrics.chi_square(pairs[a], table_t[a]).pvalue > P_MIN / 3, (a, pairs[a])


def test_oracle_detects_a_wrong_sampler():
    """The same test must fail for a sampler that resamples from the target instead of the residual."""
    from lab.sampling import accept_or_reject, categorical, uniform

    rng = random.Random(5)
    draft = DRAFTS["perturbed"]
    counts = [0] * 4
    for _ in range(12_000):
        token = categorical(draft, rng)
        if not accept_or_reject(TARGET[token], draft[token], uniform(rng)):
            token = categorical(TARGET, rng)  # the planted bug
        counts[token] += 1
    assert metrics.chi_square(counts, TARGET).pvalue < 1e-6


def test_measured_acceptance_matches_one_minus_tv():
    """Single-draft steps: accepted iff the step emits 2 tokens; the rate estimates sum min(target, draft)."""
    rng = random.Random(11)
    target, draft = toy.fixed_model(TARGET), toy.fixed_model(DRAFTS["perturbed"])
    steps = 10_000
    accepted = sum(len(toy.speculative_step([0], target, draft, 1, rng)) == 3 for _ in range(steps))
    alpha = metrics.acceptance_probability(TARGET, DRAFTS["perturbed"])
    assert alpha == pytest.approx(0.6)
    assert abs(accepted / steps - alpha) < 4 * math.sqrt(alpha * (1 - alpha) / steps)


# --- toy models ----------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("call, error, message", [
    (lambda: toy.fixed_model([[0.5, 0.5]]), ValueError, r"probs must be one distribution \[V\].*shape \(1, 2\)"),
    (lambda: toy.fixed_model(1.0), ValueError, "probs must have a vocabulary axis"),
    (lambda: toy.fixed_model("ab"), TypeError, "probs must be a tensor or sequence"),
    (lambda: toy.bigram_model([0.5, 0.5]), ValueError, r"table must be square \[V\]\[V\].*shape \(2,\)"),
    (lambda: toy.bigram_model([[[0.5, 0.5]] * 2] * 2), ValueError, r"table must be square.*shape \(2, 2, 2\)"),
    (lambda: toy.bigram_model([[0.5, 0.5]] * 3), ValueError, r"table must be square.*shape \(3, 2\)"),
    (lambda: toy.mixture_model(toy.fixed_model([1.0]), toy.fixed_model([1.0]), "0.5"), ValueError,
     r"weight must be a number in \[0, 1\], got '0.5'"),
    (lambda: toy.mixture_model(toy.fixed_model([1.0]), toy.fixed_model([1.0]), float("nan")), ValueError,
     "weight must be a number in"),
    (lambda: toy.mixture_model(toy.fixed_model([1.0]), [1.0], 0.5), TypeError, "other must be a toy model"),
    (lambda: toy.speculative_step(None, toy.fixed_model([1.0]), toy.fixed_model([1.0]), 2, random.Random(0)),
     TypeError, "prefix must be a list of token ids or a LongTensor, got NoneType"),
    (lambda: toy.speculative_step([0], [1.0], toy.fixed_model([1.0]), 2, random.Random(0)), TypeError,
     "target_model must be a toy model"),
])
def test_toy_models_name_the_bad_argument(call, error, message):
    with pytest.raises(error, match=message):
        call()


def test_bigram_model_checks_the_last_token():
    model = toy.bigram_model([[0.5, 0.5], [0.1, 0.9]])
    assert model([]) == [0.5, 0.5] and model([0, 1]) == [0.1, 0.9]
    assert model([np.int64(1)]) == [0.1, 0.9] and model([0, torch.tensor(1)]) == [0.1, 0.9]
    for bad in (5, -1, 2, 1.0, True):  # -1 used to wrap around to the last row
        with pytest.raises(ValueError, match=r"the last context token must be a token id in \[0, 2\)"):
            model([0, bad])
    with pytest.raises(ValueError, match=r"token id in \[0, 2\), got 7"):
        toy.speculative_step([7], model, model, 2, random.Random(0))


@pytest.mark.parametrize("bad, shown", [(torch.tensor(True), r"tensor\(True\)"), (torch.tensor(1.0), r"tensor\(1\.\)"),
                                        (np.float64(1.0), r"(np\.float64\()?1\.0\)?"),  # NumPy 2 / 1 repr
                                        (np.bool_(True), r"(np\.)?True_?")])
def test_bigram_model_refuses_bool_and_float_tensors_as_the_last_token(bad, shown):
    """tensor(True) was read as token 1, and tensor(1.0) raised operator.index's TypeError, not the ValueError the
    docstring names."""
    model = toy.bigram_model([[0.5, 0.5], [0.1, 0.9]])
    with pytest.raises(ValueError, match=rf"^bigram model: the last context token must be a token id in \[0, 2\), got "
                                         rf"{shown}$"):
        model([0, bad])
    assert model([0, torch.tensor(1, dtype=torch.int32)]) == [0.1, 0.9] and model([np.uint8(1)]) == [0.1, 0.9]


NAN = float("nan")


@pytest.mark.parametrize("target, draft, words", [
    ([0.5, 0.5], [NAN, 1.0], r"draft_model\(\[0\]\) contains NaN"),
    ([0.5, 0.5], [0.1, 0.1], r"draft_model\(\[0\]\) must sum to 1"),
    ([NAN, 1.0], [0.5, 0.5], r"target_model\(\[0\]\) contains NaN"),
    ([1.5, -0.5], [0.5, 0.5], r"target_model\(\[0\]\) has negative entries"),
])
def test_toy_step_validates_model_outputs(target, draft, words):
    with pytest.raises(ValueError, match=words):
        toy.speculative_step([0], lambda c: target, lambda c: draft, 2, random.Random(0))


def test_toy_step_rejects_text_prefix():
    m = toy.fixed_model([0.5, 0.5])
    with pytest.raises(TypeError, match="prefix"):
        toy.speculative_step("ab", m, m, 1, random.Random(0))


def test_toy_step_draws_are_unchanged_by_the_checks():
    """Validation consumes no random numbers: a seeded run gives the same tokens as the unchecked algorithm."""
    from lab.exercises.lesson04 import step_variant

    target, draft = toy.bigram_model([[0.6, 0.4], [0.2, 0.8]]), toy.bigram_model([[0.3, 0.7], [0.5, 0.5]])
    a, b = random.Random(9), random.Random(9)
    for _ in range(200):
        assert toy.speculative_step([1], target, draft, 3, a) == step_variant()([1], target, draft, 3, b)


def test_speculative_step_returns_plain_ints_for_a_tensor_prefix():
    model = toy.fixed_model([0.25, 0.75])
    out = toy.speculative_step(torch.tensor([1, 0]), model, model, 2, random.Random(0))
    assert out[:2] == [1, 0] and len(out) == 5 and all(type(t) is int for t in out)
    with pytest.raises(TypeError, match="prefix must hold integer token ids"):
        toy.speculative_step([0, 1.5], model, model, 2, random.Random(0))


@pytest.mark.parametrize("context", [None, "ab", {0: 1}])
def test_bigram_model_names_a_context_that_is_no_sequence(context):
    """None was read as an empty context and answered row 0."""
    model = toy.bigram_model([[0.5, 0.5], [0.25, 0.75]])
    with pytest.raises(TypeError, match="bigram model: the context must be a sequence of token ids"):
        model(context)
    assert model([]) == [0.5, 0.5] and model(torch.tensor([0, 1])) == [0.25, 0.75]
