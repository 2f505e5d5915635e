"""lab.toy and lab.metrics: exact formula values, bad-input errors, and the chi-square exactness oracle of
speculative sampling on toy models (DESIGN oracle 2; seed lesson 000, step 5)."""
from __future__ import annotations

import math
import random

import pytest
import torch

from lab import metrics, toy

P_MIN = 1e-3  # a correct sampler fails one of these tests with probability ~1e-3 per seed; the seeds are fixed


# --- metrics: formulas --------------------------------------------------------------------------------------

def test_expected_tokens_per_call_exact_values():
    assert metrics.expected_tokens_per_call(0.75, 5) == pytest.approx(3.2880859375, abs=1e-12)
    assert metrics.expected_tokens_per_call(0.5, 1) == pytest.approx(1.5)
    assert metrics.expected_tokens_per_call(0.0, 7) == 1.0
    assert metrics.expected_tokens_per_call(1.0, 4) == 5.0
    # The geometric sum it stands for: 1 + a + ... + a^N.
    assert metrics.expected_tokens_per_call(0.85, 9) == pytest.approx(sum(0.85 ** i for i in range(10)))


def test_predicted_speedup_exact_values():
    assert metrics.predicted_speedup(0.75, 5, 0.2) == pytest.approx(3.2880859375 / 2.0)
    assert metrics.predicted_speedup(0.75, 5, 0.1) == pytest.approx(3.2880859375 / 1.5)
    assert metrics.predicted_speedup(0.75, 5, 0.0) == pytest.approx(3.2880859375)
    assert metrics.predicted_speedup(0.0, 3, 0.5) == pytest.approx(1 / 2.5)  # speculation can be slower
    assert metrics.predicted_speedup(1.0, 4, 0.25) == pytest.approx(5 / 2)


def test_optimal_n_draft_values():
    # alpha 0.75, c 0.1: speedups at N = 4, 5, 6 are 2.179, 2.192, 2.166.
    assert metrics.optimal_n_draft(0.75, 0.1) == 5
    assert metrics.optimal_n_draft(0.5, 0.1) == 2
    assert metrics.optimal_n_draft(0.85, 0.05) == 10  # 3.701 at N = 10 vs 3.693 (9) and 3.689 (11)
    assert metrics.optimal_n_draft(0.0, 0.1) == 1  # nothing is ever accepted: draft as little as possible
    assert metrics.optimal_n_draft(0.0, 0.0) == 1  # every N ties at 1x: the smallest wins
    assert metrics.optimal_n_draft(1.0, 0.0, max_n=7) == 7
    for alpha, c in [(0.6, 0.05), (0.9, 0.2), (0.7, 0.0)]:
        best = metrics.optimal_n_draft(alpha, c, max_n=12)
        speedups = [metrics.predicted_speedup(alpha, n, c) for n in range(1, 13)]
        assert speedups[best - 1] == pytest.approx(max(speedups))


@pytest.mark.parametrize("call", [
    lambda: metrics.expected_tokens_per_call(0.5, 0),
    lambda: metrics.expected_tokens_per_call(0.5, -3),
    lambda: metrics.expected_tokens_per_call(0.5, 2.5),
    lambda: metrics.expected_tokens_per_call(0.5, True),
    lambda: metrics.expected_tokens_per_call(1.2, 3),
    lambda: metrics.expected_tokens_per_call(-0.1, 3),
    lambda: metrics.expected_tokens_per_call(float("nan"), 3),
    lambda: metrics.predicted_speedup(0.5, 3, -0.1),
    lambda: metrics.predicted_speedup(0.5, 3, float("inf")),
    lambda: metrics.predicted_speedup(0.5, 0, 0.1),
    lambda: metrics.predicted_speedup(1.5, 3, 0.1),
    lambda: metrics.optimal_n_draft(0.5, -1.0),
    lambda: metrics.optimal_n_draft(2.0, 0.1),
    lambda: metrics.optimal_n_draft(0.5, 0.1, max_n=0),
])
def test_bad_input_raises_value_error(call):
    with pytest.raises(ValueError):
        call()


# --- metrics: divergences -----------------------------------------------------------------------------------

def test_kl_total_variation_and_acceptance_known_values():
    t, d = [0.5, 0.5], [0.25, 0.75]
    assert metrics.kl_divergence(t, d) == pytest.approx(0.5 * math.log(2) + 0.5 * math.log(2 / 3))
    assert metrics.total_variation(t, d) == pytest.approx(0.25)
    assert metrics.acceptance_probability(t, d) == pytest.approx(0.75)
    assert metrics.kl_divergence(t, t) == 0.0
    assert metrics.kl_divergence([0.5, 0.5, 0.0], [1.0, 0.0, 0.0]) == math.inf
    assert metrics.kl_divergence([1.0, 0.0], [0.5, 0.5]) == pytest.approx(math.log(2))  # 0 log 0 = 0
    assert metrics.total_variation([1.0, 0.0], [0.0, 1.0]) == 1.0
    with pytest.raises(ValueError):
        metrics.kl_divergence([0.5, 0.5], [0.2, 0.3, 0.5])
    with pytest.raises(ValueError):
        metrics.total_variation([0.5, 0.5], [1.0])


def test_acceptance_is_one_minus_total_variation():
    gen = torch.Generator().manual_seed(0)
    for _ in range(20):
        t = torch.rand(6, generator=gen)
        d = torch.rand(6, generator=gen)
        t, d = t / t.sum(), d / d.sum()
        assert metrics.acceptance_probability(t, d) == pytest.approx(1 - metrics.total_variation(t, d), abs=1e-6)


def test_chi_square_helper():
    assert metrics.chi_square([50, 50], [0.5, 0.5]).pvalue == pytest.approx(1.0)
    assert metrics.chi_square([90, 10], [0.5, 0.5]).pvalue < 1e-10
    assert metrics.chi_square([10, 0, 5], [0.5, 0.5, 0.0]).pvalue == 0.0  # an impossible token was seen
    assert metrics.chi_square([60, 40, 0], [0.6, 0.4, 0.0]).pvalue == pytest.approx(1.0)  # no NaN


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
