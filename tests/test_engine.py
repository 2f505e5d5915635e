"""The decode loop against DESIGN's oracles, on tiny random models (fast on a CPU).

1. greedy parity token for token (perfect, always-wrong and real drafters; every N; EOS at every block
   position; max_new_tokens exact); 2. sampled output distributed as the target's (chi-square);
3. logits after rollback equal a fresh forward; 4. no NaN / impossible token (see test_sampling).
"""
import pytest
import torch

from lab.decode import autoregressive, generate
from lab.drafters import Draft, DraftModelDrafter
from lab.kv import cache_length, rollback
from lab.metrics import chi_square
from lab.models import forward, new_cache
from lab.sampling import probs_from_logits

PROMPTS = [[3], [1, 2, 3, 4, 5], list(range(10, 40))]


class WrongDrafter:
    """Always proposes a token the target will not choose greedily: its argmax + 1."""

    def __init__(self, target, n_draft):
        self.target, self.n_draft, self.inner = target, n_draft, DraftModelDrafter(target, n_draft)

    def reset(self, prompt_ids):
        self.inner.reset(prompt_ids)

    def propose(self, request):
        draft = self.inner.propose(request)
        self.sent = [(t + 1) % 64 for t in draft.tokens]
        return Draft(self.sent, None, draft.calls)

    def update(self, num_accepted, next_token):
        self.inner.update(num_accepted, next_token)


class DeterministicDrafter(DraftModelDrafter):
    """Proposes the draft model's argmax even when sampling: verified as one-hot (probs None)."""

    def propose(self, request):
        from dataclasses import replace
        draft = super().propose(replace(request, temperature=0.0))
        return draft


@pytest.fixture(scope="module")
def reference(target):
    return {tuple(p): autoregressive(target, p, max_new_tokens=40).tokens for p in PROMPTS}


@pytest.mark.parametrize("n_draft", [1, 2, 3, 5, 8])
@pytest.mark.parametrize("kind", ["perfect", "wrong", "noisy"])
def test_greedy_parity(target, noisy_draft, reference, n_draft, kind):
    for prompt in PROMPTS:
        drafter = {"perfect": lambda: DraftModelDrafter(target, n_draft), "wrong": lambda: WrongDrafter(target, n_draft),
                   "noisy": lambda: DraftModelDrafter(noisy_draft, n_draft)}[kind]()
        gen = generate(target, prompt, drafter=drafter, max_new_tokens=40)
        assert gen.tokens == reference[tuple(prompt)]
        stats = gen.stats
        if kind == "perfect":
            assert stats["acceptance_rate"] == 1.0
        if kind == "wrong":
            assert stats["accepted_tokens"] == 0 and stats["tokens_per_target_call"] == 1.0
        assert sum(len(s.emitted) for s in gen.steps) == 40 == stats["new_tokens"]
        assert stats["target_calls"] == len(gen.steps)


def test_noisy_draft_is_a_real_test_case(target, noisy_draft):
    gen = generate(target, PROMPTS[1], drafter=DraftModelDrafter(noisy_draft, 4), max_new_tokens=60)
    assert 0.2 < gen.stats["acceptance_rate"] < 0.95  # both accepts and rejects happen


@pytest.mark.parametrize("n_draft", [3, 4])
def test_eos_lands_at_every_block_position(target, reference, n_draft):
    prompt = PROMPTS[1]
    ref = reference[tuple(prompt)]
    for j in range(12):
        eos = ref[j]
        expected = ref[: ref.index(eos) + 1]
        for drafter in (DraftModelDrafter(target, n_draft), None):
            gen = generate(target, prompt, drafter=drafter, max_new_tokens=40, eos_token_id=eos)
            assert gen.tokens == expected
            assert gen.steps[-1].emitted[-1] == eos


def test_max_new_tokens_exact_with_perfect_drafter(target, reference):
    prompt = PROMPTS[1]
    for m in range(1, 14):
        gen = generate(target, prompt, drafter=DraftModelDrafter(target, 4), max_new_tokens=m)
        assert gen.tokens == reference[tuple(prompt)][:m]


def test_no_state_leaks_between_calls(target, noisy_draft, reference):
    drafter = DraftModelDrafter(noisy_draft, 3)
    for prompt in PROMPTS + PROMPTS[::-1]:
        assert generate(target, prompt, drafter=drafter, max_new_tokens=40).tokens == reference[tuple(prompt)]


def test_on_step_sees_records_as_they_happen(target, noisy_draft):
    seen = []
    gen = generate(target, PROMPTS[1], drafter=DraftModelDrafter(noisy_draft, 4), max_new_tokens=30,
                   on_step=lambda r: seen.append((r.index, r.position, list(r.emitted))))
    assert seen == [(s.index, s.position, s.emitted) for s in gen.steps]
    for s in gen.steps:
        assert s.emitted[: s.num_accepted] == s.drafted[: s.num_accepted]
        assert s.last_kind == ("bonus" if s.num_accepted == len(s.drafted) else "resampled")
        assert s.draft_calls == len(s.drafted) and s.draft_ms >= 0 and s.verify_ms > 0
    positions = [s.position for s in gen.steps]
    assert positions == sorted(positions) and positions[0] == 0


def test_seed_reproducible_and_sampling_differs_by_seed(target, noisy_draft):
    kw = dict(drafter=DraftModelDrafter(noisy_draft, 4), max_new_tokens=30, temperature=1.0)
    a = generate(target, PROMPTS[1], seed=5, **kw).tokens
    b = generate(target, PROMPTS[1], seed=5, **kw).tokens
    c = generate(target, PROMPTS[1], seed=6, **kw).tokens
    assert a == b and a != c


def _first_token_counts(target, drafter, n_runs, **kw):
    counts = torch.zeros(64)
    for seed in range(n_runs):
        gen = generate(target, PROMPTS[1], drafter=drafter, max_new_tokens=3, seed=seed, **kw)
        counts[gen.tokens[0]] += 1
    return counts


@pytest.mark.parametrize("kw", [dict(temperature=1.0), dict(temperature=0.7, top_k=8), dict(temperature=1.3, top_p=0.8)])
def test_first_sampled_token_follows_target_distribution(target, noisy_draft, kw):
    logits = forward(target, PROMPTS[1], new_cache())[-1]
    target_probs = probs_from_logits(logits, **kw).cpu()
    drafter = DraftModelDrafter(noisy_draft, 3)
    counts = _first_token_counts(target, drafter, 1500, **kw)
    assert (counts[target_probs == 0] == 0).all()  # nothing outside top-k / top-p is ever emitted
    assert chi_square(counts, target_probs).pvalue > 1e-3


def test_deterministic_drafter_verified_as_one_hot(target, noisy_draft):
    kw = dict(temperature=1.0)
    target_probs = probs_from_logits(forward(target, PROMPTS[1], new_cache())[-1], **kw).cpu()
    counts = _first_token_counts(target, DeterministicDrafter(noisy_draft, 3), 1500, **kw)
    assert chi_square(counts, target_probs).pvalue > 1e-3


def test_rollback_then_forward_equals_fresh_forward(target):
    tokens = list(range(5, 20))  # 10 prefix tokens + 5 drafts
    cache = new_cache()
    forward(target, tokens[:10], cache)
    forward(target, tokens[10:15], cache)
    assert cache_length(cache) == 15
    rollback(cache, 12)  # rejected at draft position 3: prefix + 2 accepted drafts remain
    assert cache_length(cache) == 12
    after = forward(target, [40], cache)[-1]
    fresh = forward(target, tokens[:12] + [40], new_cache())[-1]
    torch.testing.assert_close(after, fresh, atol=1e-5, rtol=1e-5)


def test_draft_cache_matches_committed_sequence_after_each_step(target, noisy_draft):
    """Oracle 3 for the drafter: its next logits equal a fresh forward over the committed tokens."""
    drafter = DraftModelDrafter(noisy_draft, 4)
    committed = []
    gen = generate(target, PROMPTS[1], drafter=drafter, max_new_tokens=25,
                   on_step=lambda r: committed.extend(r.emitted))
    sequence = PROMPTS[1] + committed
    # the drafter has fed every committed token but its pending ones; feeding those gives the next logits
    pending = drafter._pending
    assert sequence[-len(pending):] == pending
    assert cache_length(drafter._cache) == len(sequence) - len(pending)
    got = forward(noisy_draft, pending, drafter._cache)[-1]
    fresh = forward(noisy_draft, sequence, new_cache())[-1]
    torch.testing.assert_close(got, fresh, atol=1e-5, rtol=1e-5)
    assert any(s.num_accepted < len(s.drafted) for s in gen.steps)  # a rollback happened


def test_rollback_errors():
    from transformers import DynamicCache
    cache = DynamicCache()
    with pytest.raises(ValueError, match="length"):
        rollback(cache, 3)


@pytest.mark.parametrize("kwargs,word", [
    (dict(max_new_tokens=0), "max_new_tokens"), (dict(max_new_tokens=5, temperature=-1), "temperature"),
    (dict(max_new_tokens=5, top_p=0), "top_p"), (dict(max_new_tokens=5, top_k=0), "top_k"),
    (dict(max_new_tokens=300), "context"),
])
def test_generate_argument_errors(target, kwargs, word):
    with pytest.raises(ValueError, match=word):
        generate(target, [1, 2, 3], **kwargs)


def test_prompt_errors_and_vocab_mismatch(target):
    from conftest import tiny_llama
    with pytest.raises(ValueError, match="prompt_ids"):
        generate(target, [], max_new_tokens=3)
    with pytest.raises(ValueError, match="prompt_ids"):
        generate(target, [1, 64], max_new_tokens=3)
    with pytest.raises(ValueError, match="vocabular"):
        generate(target, [1, 2], drafter=DraftModelDrafter(tiny_llama(3, layers=1, vocab=80), 2), max_new_tokens=3)
    with pytest.raises(ValueError, match="n_draft"):
        DraftModelDrafter(target, 0)


def test_sampled_decoding_hands_the_draft_probabilities_to_verification(target):
    # the target as its own draft: sampled drafts must be accepted nearly always (only float noise between the
    # cached one-token passes and the verification pass can reject), and each step's kind must match its count
    gen = generate(target, [1, 2, 3, 4, 5], drafter=DraftModelDrafter(target, 4), max_new_tokens=40,
                   temperature=1.0, seed=0)
    assert gen.stats["acceptance_rate"] > 0.95
    for step in gen.steps:
        assert step.last_kind == ("bonus" if step.num_accepted == len(step.drafted) else "resampled")
