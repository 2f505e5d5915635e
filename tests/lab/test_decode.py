"""lab.decode: the one decode loop against DESIGN's oracles, on tiny random models (fast on a CPU) and the bundled pair.

1. greedy parity token for token (perfect, always-wrong and real drafters; chains and trees; every N; EOS at every
   block position; max_new_tokens exact); 2. sampled output distributed as the target's (chi-square), with
   temperature / top-k / top-p and with deterministic drafters (verified as one-hot); 3. the target's cache holds
   exactly the committed tokens after trees and Lookahead windows; the records' cache bookkeeping.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from lab import models
from lab.decode import autoregressive, generate
from lab.drafters import Draft, DraftModelDrafter, EagleDrafter, MedusaDrafter
from lab.drafters.eagle import EagleDraftModel
from lab.drafters.medusa import MedusaHeads
from lab.metrics import chi_square
from lab.models import forward, new_cache, vocab_size
from lab.prompts import held_out_prompts
from tests.helpers import SHORT_CONTEXT, TopKTreeDrafter, next_token_probs, tiny_llama

# --- oracles 1 and 2 with draft models, perfect, always wrong and real ----------------------------------------

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
        drafter = {"perfect": lambda: DraftModelDrafter(target, n_draft),
                   "wrong": lambda: WrongDrafter(target, n_draft),
                   "noisy": lambda: DraftModelDrafter(noisy_draft, n_draft)}[kind]()
        gen = generate(target, prompt, drafter=drafter, max_new_tokens=40)
        assert gen.tokens == reference[tuple(prompt)]
        stats = gen.stats
        if kind == "perfect":
            assert stats["acceptance_rate"] == 1.0
        if kind == "wrong":
            assert stats["accepted_tokens"] == 0 and stats["tokens_per_target_call"] == 1.0
        assert sum(len(s.emitted) for s in gen.steps) == 40 == stats["new_tokens"]
        # the prefill's record comes first and is no decode step
        assert [s.prefill for s in gen.steps] == [True] + [False] * stats["target_calls"]


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
    prefill = gen.steps[0]  # its time is stats["prefill_ms"], not its own
    assert prefill.prefill and (prefill.draft_ms, prefill.verify_ms, prefill.target_ms) == (0, 0, 0)
    assert gen.stats["prefill_ms"] > 0
    for s in gen.decode_steps:
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


def test_integer_settings_may_be_0d_tensors_like_the_temperature(target, noisy_draft):
    """``max_new_tokens``, ``eos_token_id`` and ``seed`` computed with torch are taken as their values, as a 0-d
    temperature tensor is; a float tensor is still refused, naming the argument."""
    kw = dict(drafter=DraftModelDrafter(noisy_draft, 4), temperature=1.0)
    plain = generate(target, PROMPTS[1], max_new_tokens=30, seed=5, **kw)
    eos = plain.tokens[10]
    ints = generate(target, PROMPTS[1], max_new_tokens=30, seed=5, eos_token_id=eos, **kw).tokens
    tensors = generate(target, PROMPTS[1], max_new_tokens=torch.tensor(30), seed=torch.tensor(5),
                       eos_token_id=torch.tensor(eos), **kw).tokens
    assert tensors == ints and ints[-1] == eos and len(ints) <= 11
    arrays = generate(target, PROMPTS[1], max_new_tokens=np.array(30), seed=torch.tensor([5]),
                      eos_token_id=np.array(eos), **kw).tokens
    assert arrays == ints
    with pytest.raises(TypeError, match="seed must be None or an integer"):
        generate(target, PROMPTS[1], max_new_tokens=3, seed=torch.tensor(5.0))
    with pytest.raises(TypeError, match="eos_token_id must be None or an integer token id"):
        generate(target, PROMPTS[1], max_new_tokens=3, eos_token_id=torch.tensor(True))


# a prompt whose next token the tiny target makes nearly certain: the first speculated token then follows one known
# context, where the noisy draft and the target disagree, so a wrong verification cannot average out
CERTAIN = [48, 35, 56, 27, 40, 52]


def _speculated_token_test(target, make_drafter, n_runs, max_new_tokens=3, **kw):
    """Counts of each run's second token, the first one a decode step verifies against a draft (the first comes
    from the prefill), and the distribution they must follow (tests.helpers.next_token_probs)."""
    counts, prefixes = torch.zeros(64), []
    for seed in range(n_runs):
        gen = generate(target, CERTAIN, drafter=make_drafter(), max_new_tokens=max_new_tokens, seed=seed, **kw)
        assert gen.steps[1].drafted  # a verification happened
        counts[gen.tokens[1]] += 1
        prefixes.append(CERTAIN + gen.tokens[:1])
    return counts, next_token_probs(target, prefixes, **kw).float()


@pytest.mark.parametrize("kw", [dict(temperature=1.0), dict(temperature=0.7, top_k=8),
                                dict(temperature=1.3, top_p=0.8)])
def test_first_speculated_token_follows_target_distribution(target, noisy_draft, kw):
    """Fails (p < 1e-7 in each case) when a rejection resamples from the target instead of the residual."""
    counts, expected = _speculated_token_test(target, lambda: DraftModelDrafter(noisy_draft, 3), 600, **kw)
    assert (counts[expected == 0] == 0).all()  # nothing outside top-k / top-p is ever emitted
    assert chi_square(counts, expected).pvalue > 1e-3


def test_deterministic_drafter_verified_as_one_hot(target, noisy_draft):
    counts, expected = _speculated_token_test(target, lambda: DeterministicDrafter(noisy_draft, 3), 600,
                                              temperature=1.0)
    assert chi_square(counts, expected).pvalue > 1e-3


def test_sampled_decoding_hands_the_draft_probabilities_to_verification(target):
    # the target as its own draft: sampled drafts must be accepted nearly always (only float noise between the
    # cached one-token passes and the verification pass can reject), and each step's kind must match its count
    gen = generate(target, [1, 2, 3, 4, 5], drafter=DraftModelDrafter(target, 4), max_new_tokens=40,
                   temperature=1.0, seed=0)
    assert gen.stats["acceptance_rate"] > 0.95
    for step in gen.steps:
        assert step.last_kind == ("bonus" if step.num_accepted == len(step.drafted) else "resampled")


class Float64Drafter(DraftModelDrafter):
    """Hands verification its sampling distributions in float64, as a drafter of the learner's own might."""

    def propose(self, request):
        from dataclasses import replace
        draft = super().propose(request)
        return draft if draft.probs is None else replace(draft, probs=draft.probs.double())


def test_draft_probabilities_reach_verification_as_float32_on_the_cpu(target, noisy_draft):
    gen = generate(target, [1, 2, 3, 4, 5], drafter=Float64Drafter(noisy_draft, 3), max_new_tokens=12,
                   temperature=1.0, seed=0, record_probs=True)
    same = generate(target, [1, 2, 3, 4, 5], drafter=DraftModelDrafter(noisy_draft, 3), max_new_tokens=12,
                    temperature=1.0, seed=0)
    drafted = [s for s in gen.steps if s.drafted]
    assert drafted and all(s.draft_probs.dtype == torch.float32 and s.draft_probs.device.type == "cpu"
                           for s in drafted)
    assert gen.tokens == same.tokens  # the same draws: float64 rows verified as their float32 values


def test_the_prefill_is_timed_to_its_end(target, noisy_draft, monkeypatch):
    import lab.decode

    events = []
    monkeypatch.setattr(lab.decode, "synchronize", lambda device: events.append(("sync", torch.device(device))))

    class Logged(DraftModelDrafter):
        def reset(self, prompt_ids):
            events.append(("reset",))
            super().reset(prompt_ids)

        def propose(self, request):
            events.append(("propose",))
            return super().propose(request)

    generate(target, [1, 2, 3, 4, 5], drafter=Logged(noisy_draft, 2), max_new_tokens=3)
    # the target's prefill is waited for, then the drafter's own prefill (reset), before the first step drafts
    assert events[:4] == [("sync", target.device), ("reset",), ("sync", target.device), ("propose",)]


def test_synchronize_waits_on_the_device_named(monkeypatch):
    waited = []
    monkeypatch.setattr(torch.cuda, "synchronize", lambda device=None: waited.append(device))
    models.synchronize("cpu")
    models.synchronize(torch.device("cpu"))
    assert waited == []  # nothing is queued on a CPU
    models.synchronize("cuda:1")
    models.synchronize(torch.device("cuda", 0))
    assert waited == [torch.device("cuda:1"), torch.device("cuda:0")]  # that GPU, not the current one


# --- argument checks -------------------------------------------------------------------------------------------

@pytest.mark.parametrize("kwargs,word", [
    (dict(max_new_tokens=0), "max_new_tokens"), (dict(max_new_tokens=5, temperature=-1), "temperature"),
    (dict(max_new_tokens=5, top_p=0), "top_p"), (dict(max_new_tokens=5, top_k=0), "top_k"),
    (dict(max_new_tokens=300), "context"),
])
def test_generate_argument_errors(target, kwargs, word):
    with pytest.raises(ValueError, match=word):
        generate(target, [1, 2, 3], **kwargs)


def test_prompt_errors_and_vocab_mismatch(target):
    with pytest.raises(ValueError, match="prompt_ids"):
        generate(target, [], max_new_tokens=3)
    with pytest.raises(ValueError, match="prompt_ids"):
        generate(target, [1, 64], max_new_tokens=3)
    with pytest.raises(ValueError, match="vocabular"):
        generate(target, [1, 2], drafter=DraftModelDrafter(tiny_llama(3, layers=1, vocab=80), 2), max_new_tokens=3)
    with pytest.raises(ValueError, match="n_draft"):
        DraftModelDrafter(target, 0)


def test_a_numpy_row_prompt_is_one_sequence(target):
    """generate(target, numpy.array([ids])) decodes the row, as generate(target, torch.tensor([ids])) does."""
    import numpy as np

    ids = [1, 2, 3, 4, 5]
    expected = generate(target, ids, max_new_tokens=6).tokens
    assert generate(target, torch.tensor([ids]), max_new_tokens=6).tokens == expected
    assert generate(target, np.array([ids]), max_new_tokens=6).tokens == expected
    assert generate(target, np.array(ids), drafter=DraftModelDrafter(target, 2), max_new_tokens=6).tokens == expected


# --- what the loop records about the caches ----------------------------------------------------------------

def test_records_carry_cache_lengths(target, noisy_draft):
    prompt = [1, 2, 3, 4, 5]
    gen = generate(target, prompt, drafter=DraftModelDrafter(noisy_draft, 4), max_new_tokens=30)
    prefill = gen.steps[0]  # the whole prompt, every entry kept; its last row gives the first token
    assert prefill.prefill and (prefill.cache_before, prefill.target_tokens) == (0, len(prompt))
    assert prefill.draft_cache is None and prefill.drafted == [] and len(prefill.emitted) == 1
    committed = len(prompt)
    for record in gen.steps[1:]:
        assert record.cache_before == committed  # the target cache holds every committed token but the last
        assert record.target_tokens == 1 + len(record.drafted)
        before, written, kept = record.draft_cache
        # propose feeds the pending tokens (1, or 2 after a full acceptance) and all drafts but the last
        assert written - before - (len(record.drafted) - 1) in (1, 2)
        assert kept <= written
        if record.num_accepted < len(record.drafted):
            assert written - kept == len(record.drafted) - record.num_accepted - 1  # rejected drafts removed
        committed += len(record.emitted)
    assert any(r.num_accepted < len(r.drafted) for r in gen.steps)
    plain = autoregressive(target, prompt, max_new_tokens=5)
    assert [r.cache_before for r in plain.steps] == [0, 5, 6, 7, 8]
    assert [r.target_tokens for r in plain.steps] == [5, 1, 1, 1, 1]
    assert all(r.draft_cache is None for r in plain.steps)


# --- token trees and typical acceptance ----------------------------------------------------------------------


@pytest.mark.parametrize("model", ["target", "noisy"])
def test_tree_decoding_greedy_parity(target, noisy_draft, model):
    drafter_model = target if model == "target" else noisy_draft
    for prompt in PROMPTS:
        ref = autoregressive(target, prompt, max_new_tokens=30).tokens
        gen = generate(target, prompt, drafter=TopKTreeDrafter(drafter_model), max_new_tokens=30)
        assert gen.tokens == ref
        for s in gen.steps[1:]:  # after the prefill
            assert s.parents is not None and s.emitted[: s.num_accepted] == [s.drafted[i] for i in s.path]
        if model == "target":  # a perfect tree model: every step accepts the whole spine
            assert gen.stats["tokens_per_target_call"] > 3.0


def test_tree_decoding_eos_and_max_new_tokens(target):
    prompt = PROMPTS[1]
    ref = autoregressive(target, prompt, max_new_tokens=30).tokens
    for j in range(8):
        eos = ref[j]
        gen = generate(target, prompt, drafter=TopKTreeDrafter(target), max_new_tokens=30, eos_token_id=eos)
        assert gen.tokens == ref[: ref.index(eos) + 1]
    for m in range(1, 9):
        assert generate(target, prompt, drafter=TopKTreeDrafter(target), max_new_tokens=m).tokens == ref[:m]


def test_tree_decoding_first_speculated_token_follows_target(target, noisy_draft):
    counts, expected = _speculated_token_test(target, lambda: TopKTreeDrafter(noisy_draft, width=3, depth=2), 600,
                                              max_new_tokens=4, temperature=1.0)
    assert chi_square(counts, expected).pvalue > 1e-3


def test_malformed_tree_is_rejected(target):
    class Bad:
        def reset(self, prompt_ids):
            pass

        def propose(self, request):
            return Draft([1, 2], None, parents=[-1])

        def update(self, num_accepted, next_token):
            pass

    with pytest.raises(ValueError, match="parents"):
        generate(target, [1, 2], drafter=Bad(), max_new_tokens=3)


def test_typical_acceptance_is_opt_in_and_checked(target, noisy_draft):
    with pytest.raises(ValueError, match="acceptance"):
        generate(target, [1, 2], max_new_tokens=3, acceptance="fast")
    gen = generate(target, PROMPTS[1], drafter=TopKTreeDrafter(noisy_draft), max_new_tokens=20, temperature=1.0,
                   seed=0, acceptance="typical")
    assert len(gen.tokens) == 20


@pytest.mark.parametrize("greedy", [True, False])
def test_typical_acceptance_where_it_changes_nothing_warns(target, noisy_draft, greedy):
    drafter = TopKTreeDrafter(noisy_draft) if greedy else None
    temperature = 0.0 if greedy else 1.0
    with pytest.warns(UserWarning, match="greedy" if greedy else "autoregressive"):
        gen = generate(target, PROMPTS[1], drafter=drafter, max_new_tokens=6, temperature=temperature, seed=0,
                       acceptance="typical")
    exact = generate(target, PROMPTS[1], drafter=drafter, max_new_tokens=6, temperature=temperature, seed=0)
    assert gen.tokens == exact.tokens
    assert {step.acceptance for step in gen.steps} == {"exact"}  # the records say what ran (was "typical" unspeculated)


def test_bad_extra_layout_is_a_clear_error(target):
    class Broken:
        def reset(self, prompt_ids):
            pass

        def propose(self, request):
            return Draft([1], None, 0, extra_tokens=[2, 3], extra_positions=[1, 2], extra_mask=torch.ones(2, 2))

        def update(self, num_accepted, next_token):
            pass

    with pytest.raises(ValueError, match="extra_mask"):
        generate(target, [1, 2, 3], drafter=Broken(), max_new_tokens=3)


def test_an_additive_float_extra_mask_or_float_offsets_are_refused_not_cast():
    """A 0 / -inf additive mask cast to bool read every allowed position as masked and the -inf ones as allowed;
    float offsets were truncated."""
    from lab.decode import branch_layout

    allowed = torch.tensor([[True, True, True, True], [True, True, False, True]])  # [last, draft, 2 extra tokens]
    additive = torch.zeros(2, 4).masked_fill(~allowed, float("-inf"))
    with pytest.raises(ValueError, match="Draft.extra_mask must be bool .* got dtype torch.float32"):
        branch_layout(5, 1, Draft([1], extra_tokens=[2, 3], extra_positions=[1, 2], extra_mask=additive))
    with pytest.raises(ValueError, match="Draft.extra_positions must be integer offsets, got \\[1.5, 2\\]"):
        branch_layout(5, 1, Draft([1], extra_tokens=[2, 3], extra_positions=[1.5, 2], extra_mask=allowed))
    layout = branch_layout(5, 1, Draft([1], extra_tokens=[2, 3], extra_positions=[1, 2], extra_mask=allowed.int()))
    assert layout["position_ids"] == [5, 6, 6, 7] and layout["attention_mask"][2:].equal(allowed)


# --- oracle 3 in the loop itself: the target's cache after trees and Lookahead windows ---------------------------

SMALL_EAGLE = {"width": 32, "heads": 4, "kv_heads": 4, "intermediate": 64}


WIDE_TREE = [(r,) for r in range(8)] + [(0, 0), (0, 1), (1, 0), (2, 0), (0, 0, 0), (1, 0, 0)]


@pytest.mark.parametrize("temperature", [0.0, 1.0])
@pytest.mark.parametrize("kind", ["lookahead", "medusa", "eagle_tree"])
def test_target_cache_after_generation_equals_a_fresh_forward(target, monkeypatch, kind, temperature):
    """After a generation full of rejected tree nodes (or Lookahead windows), the target's KV cache holds exactly
    the committed tokens but the last: keys and values equal a fresh forward over them."""
    import lab.decode
    from lab.drafters import LookaheadDrafter

    torch.manual_seed(3)
    heads = MedusaHeads.from_target(target).eval()
    with torch.no_grad():
        for p in heads.parameters():
            p.add_(0.05 * torch.randn_like(p))
    drafter = {"lookahead": lambda: LookaheadDrafter(window=4, ngram=3),
               "medusa": lambda: MedusaDrafter(target, heads, tree=WIDE_TREE),
               "eagle_tree": lambda: EagleDrafter(target, EagleDraftModel(target, SMALL_EAGLE).eval(),
                                                  tree=WIDE_TREE)}[kind]()
    caches = []

    def recording_cache():
        caches.append(new_cache())
        return caches[-1]

    monkeypatch.setattr(lab.decode, "new_cache", recording_cache)
    prompt = [5, 9, 13, 2, 7, 11, 5, 9, 13, 2, 7, 11, 5, 9]
    gen = generate(target, prompt, drafter=drafter, max_new_tokens=30, temperature=temperature, seed=1)
    assert sum(s.num_accepted < s.depth for s in gen.steps) > 5  # many steps rejected drafts
    assert sum(s.target_tokens > 1 + s.num_accepted for s in gen.steps) > 5  # and fed more than they kept
    if kind != "lookahead":  # some accepted paths skip listed nodes, so the kept slots are not a prefix
        assert any(s.path != list(range(len(s.path))) for s in gen.steps)
    committed = prompt + gen.tokens
    fresh = new_cache()
    forward(target, committed[:-1], fresh)
    (cache,) = caches
    assert cache.get_seq_length() == len(committed) - 1
    for mine, theirs in zip(cache.layers, fresh.layers):
        torch.testing.assert_close(mine.keys, theirs.keys, atol=1e-4, rtol=1e-4)
        torch.testing.assert_close(mine.values, theirs.values, atol=1e-4, rtol=1e-4)


# --- the bundled Shakespeare pair ------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def prompts(pair):
    return [pair.encode(p)[-60:] for p in held_out_prompts()[:3]]


@pytest.mark.parametrize("n_draft", [1, 3, 6])
def test_greedy_parity_on_the_real_pair(pair, prompts, n_draft):
    for ids in prompts:
        ar = generate(pair.target, ids, max_new_tokens=48)
        sp = generate(pair.target, ids, drafter=DraftModelDrafter(pair.draft, n_draft), max_new_tokens=48)
        assert sp.tokens == ar.tokens
        assert sp.stats["target_calls"] < ar.stats["target_calls"]


def test_first_speculated_token_matches_target_distribution(pair, prompts):
    ids = prompts[0]
    counts, prefixes = None, []
    drafter = DraftModelDrafter(pair.draft, 3)
    for seed in range(1200):
        gen = generate(pair.target, ids, drafter=drafter, max_new_tokens=3, temperature=1.0, seed=seed)
        assert gen.steps[1].drafted
        counts = torch.zeros(vocab_size(pair.target)) if counts is None else counts
        counts[gen.tokens[1]] += 1
        prefixes.append(ids + gen.tokens[:1])
    assert chi_square(counts, next_token_probs(pair.target, prefixes, 1.0).float()).pvalue > 1e-3


def test_context_overflow_is_a_clear_error(pair):
    with pytest.raises(ValueError, match="context"):
        generate(pair.target, [1] * 500, max_new_tokens=20)


class Scripted:
    """A drafter whose proposal is ``make(request, position)``: position = new tokens committed so far."""

    def __init__(self, make):
        self.make = make

    def reset(self, prompt_ids):
        self.prompt_len = len(prompt_ids) - 1  # reset receives the prompt and the prefill's first token

    def propose(self, request):
        return self.make(request, len(request.tokens) - self.prompt_len)

    def update(self, num_accepted, next_token):
        pass


def test_unseeded_generate_leaves_global_rng_untouched(target):
    torch.manual_seed(0)
    before = torch.get_rng_state()
    runs = {tuple(generate(target, [1, 2, 3], max_new_tokens=12, temperature=3.0).tokens) for _ in range(3)}
    assert torch.equal(torch.get_rng_state(), before)
    assert len(runs) > 1  # still a fresh seed per call: three unseeded runs of 12 hot draws do not all agree
    torch.manual_seed(0)
    expected = torch.rand(3)
    torch.manual_seed(0)
    generate(target, [1, 2, 3], max_new_tokens=2, temperature=1.0)
    assert torch.equal(torch.rand(3), expected)


def test_generate_cuts_drafts_that_run_past_the_context(short_target):
    prompt = [3, 1, 4, 1, 5, 9, 2, 6] * 3 + [5, 3, 5]  # 27 tokens; 5 more fill the context exactly
    ref = generate(short_target, prompt, max_new_tokens=SHORT_CONTEXT - len(prompt)).tokens

    def chain(request, pos):  # the right continuation, far longer than request.max_tokens and the context
        return Draft((ref[pos:] + [7] * 40)[:40])

    def tree(request, pos):  # two chains of 20, the right one second, so renumbering matters
        wrong, right = [(t + 1) % 64 for t in ref[pos:]] + [7] * 20, ref[pos:] + [7] * 20
        return Draft(wrong[:20] + right[:20], parents=[-1] + list(range(19)) + [-1] + list(range(20, 39)))

    def window(request, pos):  # Lookahead-style extra tokens at positions past the end (never committed)
        mask = torch.zeros(8, 9, dtype=torch.bool)
        mask[:, 0] = True
        mask[:, 1:] = torch.ones(8, 8, dtype=torch.bool).tril()
        return Draft([], extra_tokens=[7] * 8, extra_positions=list(range(1, 9)), extra_mask=mask)

    for make in (chain, tree, window):
        gen = generate(short_target, prompt, drafter=Scripted(make), max_new_tokens=len(ref))
        assert gen.tokens == ref, make.__name__
        for step in gen.steps:  # what reached the target fits: its last position is inside the context
            assert step.cache_before + step.depth < SHORT_CONTEXT
    gen = generate(short_target, prompt, drafter=Scripted(chain), max_new_tokens=len(ref))
    # the prefill fills 0..26 and gives the token at 27; the drafts are cut to the 4 positions left (28..31)
    assert [len(s.drafted) for s in gen.steps] == [0, 4]


def test_bundled_drafters_fill_the_context_exactly(pair):
    from lab.drafters import EagleDrafter, EarlyExitDrafter, LookaheadDrafter, MedusaDrafter, PromptLookupDrafter
    from lab.drafters.eagle import DEFAULT_TREE

    target = pair.target
    text = pair.encode("\n".join(held_out_prompts()))
    limit = models.context_limit(target)
    for prompt in (text[: limit - 24], (text[:9] * 60)[: limit - 12]):  # ordinary text; a copy-heavy prompt
        new = limit - len(prompt)
        ref = generate(target, prompt, max_new_tokens=new).tokens
        makers = {"model": lambda: DraftModelDrafter(pair.draft, 7), "ngram": lambda: PromptLookupDrafter(3, 7),
                  "lookahead": lambda: LookaheadDrafter(),
                  "wide lookahead": lambda: LookaheadDrafter(window=30, ngram=5),
                  "medusa": lambda: MedusaDrafter.from_pretrained(pair),
                  "eagle": lambda: EagleDrafter.from_pretrained(pair, n_draft=7),
                  "eagle tree": lambda: EagleDrafter.from_pretrained(pair, tree=DEFAULT_TREE),
                  "early exit": lambda: EarlyExitDrafter(target, 2, 7)}
        for name, make in makers.items():
            assert generate(target, prompt, drafter=make(), max_new_tokens=new).tokens == ref, name


V = 64


GOOD = torch.full((1, V), 1 / V)


@pytest.mark.parametrize("make, error, words", [
    (lambda r: [12, 13], TypeError, "Scripted.propose must return a lab.drafters.Draft.*got list"),
    (lambda r: None, TypeError, "Scripted.propose must return a lab.drafters.Draft.*got NoneType"),
    (lambda r: Draft([99999]), ValueError,
     r"Draft.tokens \(from Scripted.propose\) must be token ids in \[0, 64\), got \[99999\]"),
    (lambda r: Draft([-1]), ValueError,
     r"Draft.tokens \(from Scripted.propose\) must be token ids in \[0, 64\), got \[-1\]"),
    (lambda r: Draft([1.5]), TypeError,
     r"Draft.tokens \(from Scripted.propose\) must hold integer token ids, got float 1.5"),
    (lambda r: Draft([True]), TypeError, "must hold integer token ids, got bool"),
    (lambda r: Draft("ab"), TypeError, r"Draft.tokens \(from Scripted.propose\) must be token ids, got text"),
    (lambda r: Draft(torch.tensor([1.0])), TypeError, "Draft.tokens .* must be integer token ids .*torch.float32"),
    (lambda r: Draft([12, 13], torch.full((2, 10), 0.1)), ValueError, r"Draft.probs of Tensor \(2, 10\).*\[2, 64\]"),
    (lambda r: Draft([12, 13], GOOD), ValueError, r"Draft.probs of Tensor \(1, 64\)"),
    (lambda r: Draft([12], [[1 / V] * V]), ValueError, "Draft.probs of list"),
    (lambda r: Draft([12], torch.full((1, V), float("nan"))), ValueError, "NaN, inf or negative"),
    (lambda r: Draft([12], torch.zeros(1, V)), ValueError, "probability 0 for its own drafted token at positions"),
    (lambda r: Draft([12], torch.full((1, V), 1 / (V - 1)).index_fill_(1, torch.tensor([12]), 0.0)), ValueError,
     r"probability 0 for its own drafted token at positions \[0\]"),  # a proper distribution, just not its own
    (lambda r: Draft([12], torch.full((1, V), 2 / V)), ValueError, "rows that do not sum to 1"),
    (lambda r: Draft([1], extra_tokens=[64], extra_positions=[1], extra_mask=torch.ones(1, 3, dtype=torch.bool)),
     ValueError, r"Draft.extra_tokens \(from Scripted.propose\) must be token ids in \[0, 64\)"),
])
@pytest.mark.parametrize("temperature", [0.0, 1.0])
def test_generate_checks_the_draft_each_step(target, make, error, words, temperature):
    with pytest.raises(error, match=words):
        generate(target, [1, 2, 3], drafter=Scripted(lambda r, pos: make(r)), max_new_tokens=3,
                 temperature=temperature, seed=0)


def test_draft_ids_become_plain_ints(target):
    ref = generate(target, [1, 2, 3], max_new_tokens=9).tokens
    for wrap in (lambda ids: [np.int64(t) for t in ids], torch.tensor, np.array):
        gen = generate(target, [1, 2, 3], drafter=Scripted(lambda r, pos: Draft(wrap(ref[pos:pos + r.max_tokens]))),
                       max_new_tokens=9)
        assert gen.tokens == ref and gen.stats["accepted_tokens"] == 7  # every draft accepted (the prefill: one)
        assert {type(t) for t in gen.tokens} == {int}
        assert {type(t) for s in gen.steps for t in s.drafted} == {int}


def test_step_cut_at_eos_keeps_what_verification_decided(target):
    prompt = [1, 2, 3]
    ref = generate(target, prompt, max_new_tokens=10).tokens
    eos = ref[2]
    assert eos not in ref[:2]
    gen = generate(target, prompt, drafter=Scripted(lambda r, pos: Draft(ref[pos:pos + r.max_tokens][:5])),
                   max_new_tokens=10, eos_token_id=eos)
    assert gen.tokens == ref[:3]
    last = gen.steps[-1]  # ref[0] came from the prefill; the step drafted ref[1:6]
    assert (last.drafted, last.num_accepted, last.emitted) == (ref[1:6], 5, ref[1:3])
    assert last.truncated and last.last_kind == "bonus"  # the target's token after 5 accepted drafts, then cut
    assert gen.stats["accepted_tokens"] == 5 and gen.stats["acceptance_rate"] == 1.0
    assert gen.stats["new_tokens"] == 3


def test_generate_argument_errors_name_the_argument(target, draft):
    prompt = [1, 2, 3]
    cases = [
        (dict(prompt_ids="ROMEO:"), TypeError, r"prompt_ids.*pair\.encode\(text\)"),
        (dict(prompt_ids=[1.5, 2.0]), TypeError, r"prompt_ids must hold integer token ids.*pair\.encode"),
        (dict(prompt_ids=torch.tensor([1.0, 2.0])), TypeError, "prompt_ids must be integer token ids"),
        (dict(drafter=draft), TypeError, r"drafter.*DraftModelDrafter\(model, n_draft\)"),
        (dict(drafter="ngram"), TypeError, "drafter must be a drafter"),
        (dict(seed="a"), TypeError, "seed must be None or an integer"),
        (dict(seed=2 ** 64), ValueError, r"seed must be a whole number from -2\*\*63 to 2\*\*64 - 1"),
        (dict(seed=1.5), TypeError, "seed"),
        (dict(eos_token_id="x"), TypeError, "eos_token_id"),
        (dict(eos_token_id=64), ValueError, r"eos_token_id must be a token id in \[0, 64\)"),
        (dict(on_step=3), TypeError, "on_step"),
        (dict(max_new_tokens=0), ValueError, "max_new_tokens must be an integer >= 1"),
    ]
    for kwargs, error, words in cases:
        args = dict(prompt_ids=prompt, max_new_tokens=4)
        args.update(kwargs)
        with pytest.raises(error, match=words):
            generate(target, args.pop("prompt_ids"), **args)
    with pytest.raises(TypeError, match="target must be a transformers causal LM"):
        generate("gpt2", prompt, max_new_tokens=4)


def test_generate_accepts_numpy_integers_and_tiny_temperature(target, draft):
    prompt = [1, 2, 3]
    greedy = generate(target, prompt, drafter=DraftModelDrafter(draft, 2), max_new_tokens=12).tokens
    tiny = generate(target, np.array(prompt), drafter=DraftModelDrafter(draft, np.int64(2)),
                    max_new_tokens=np.int64(12), temperature=1e-45, seed=np.int64(0), top_k=np.int64(5))
    assert tiny.tokens == greedy  # the T -> 0 limit is greedy decoding (no argmax ties in these models)
    a = generate(target, prompt, max_new_tokens=8, temperature=1.0, seed=np.int64(4)).tokens
    b = generate(target, prompt, max_new_tokens=8, temperature=1.0, seed=4).tokens
    assert a == b


def test_generate_names_record_probs_and_a_drafter_class(target, draft):
    with pytest.raises(TypeError, match="record_probs must be True or False, got str 'no'"):
        generate(target, [1, 2], max_new_tokens=2, record_probs="no")
    with pytest.raises(TypeError, match="got the class DraftModelDrafter itself; create one"):
        generate(target, [1, 2], drafter=DraftModelDrafter, max_new_tokens=2)


def test_generate_checks_the_draft_models_context_up_front(target):
    from tests.helpers import tiny_llama

    short = tiny_llama(5, layers=1, max_positions=16)
    calls = []
    drafter = DraftModelDrafter(short, 3)
    drafter.reset = lambda prompt: calls.append(prompt)     # nothing may run before the check
    with pytest.raises(ValueError, match="exceeds the draft model's context of 16 positions"):
        generate(target, [1, 2, 3, 4], drafter=drafter, max_new_tokens=13)
    assert calls == []
    assert len(generate(target, [1, 2, 3, 4], drafter=DraftModelDrafter(short, 3), max_new_tokens=12).tokens) == 12


def test_a_widget_class_as_on_step_is_named_before_the_prefill(target):
    """on_step=TokenStream (the class) ran the prefill, then failed inside the widget with a message about its
    tokenizer argument."""
    class Viewer:
        def __init__(self, tokenizer=None):
            self.tokenizer = tokenizer

    with pytest.raises(TypeError, match=r"got the class Viewer itself; create one first, e.g. stream = "
                                        r"Viewer\(pair.tokenizer\)"):
        generate(target, [1, 2], max_new_tokens=3, on_step=Viewer)
