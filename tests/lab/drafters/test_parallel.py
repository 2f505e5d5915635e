"""ParallelDrafter (lab.drafters.parallel): PARD's block drafting, K tokens from one draft forward over
[pending] + [mask] * (K - 1). The four oracles on tiny models (a draft near the target, so blocks get accepted)
and on the committed Shakespeare parallel draft: greedy parity, the sampled distribution of the tokens of the first
block, the cache after rollback, the edge cases; plus the mask token, the position-1 row and bad arguments."""
from __future__ import annotations

import copy
import dataclasses

import pytest
import torch

from lab.decode import autoregressive, generate
from lab.drafters import ParallelDrafter
from lab.drafters.base import DraftRequest
from lab.drafters.parallel import BLOCK_KEY, MASK_KEY, PARALLEL_DIRS, TARGET_VOCAB_KEY, add_mask_token
from lab.kv import cache_length
from lab.metrics import chi_square
from lab.models import forward, new_cache
from lab.prompts import held_out_prompts
from lab.registry import make_drafter, try_drafter
from tests.helpers import next_token_probs

PROMPTS = [[3], [1, 2, 3, 4, 5], list(range(10, 40))]
NEW = 25


@pytest.fixture(scope="module")
def parallel_draft(noisy_draft):
    """The noisy copy of the tiny target with a mask token (vocabulary 64 + 1): it agrees with the target often, and
    its masks (an untrained row) give other guesses, so blocks are partly accepted."""
    model = add_mask_token(copy.deepcopy(noisy_draft), block_size=4)
    with torch.no_grad():
        torch.manual_seed(3)
        model.get_input_embeddings().weight[-1].normal_(0, 0.4)
    return model.eval()


@pytest.fixture(scope="module")
def references(target):
    return {tuple(p): autoregressive(target, p, max_new_tokens=NEW).tokens for p in PROMPTS}


def test_add_mask_token_keeps_the_draft_and_records_the_config(draft):
    model = add_mask_token(copy.deepcopy(draft), block_size=3)
    assert model.get_input_embeddings().weight.shape[0] == 65 and model.config.vocab_size == 65
    assert (getattr(model.config, MASK_KEY), getattr(model.config, TARGET_VOCAB_KEY),
            getattr(model.config, BLOCK_KEY)) == (64, 64, 3)
    torch.testing.assert_close(model.get_input_embeddings().weight[64], draft.get_input_embeddings().weight.mean(0))
    ids = [5, 9, 2, 40]
    torch.testing.assert_close(forward(model, ids, new_cache())[:, :64], forward(draft, ids, new_cache()))
    with pytest.raises(ValueError, match="already has a mask token"):
        add_mask_token(model)
    with pytest.raises(ValueError, match="block_size"):
        add_mask_token(copy.deepcopy(draft), block_size=0)
    with pytest.raises(TypeError, match="model"):
        add_mask_token("draft")


@pytest.mark.parametrize("n_draft", [1, 2, 3, 5])
def test_greedy_parity_token_for_token(target, parallel_draft, references, n_draft):
    """Oracle 1: greedy speculative tokens equal autoregressive ones, a 1-token prompt included, every N; each step
    costs one draft forward whatever N. (The untrained mask row of this tiny draft rarely hits: whole blocks
    accepted, the catch-up of several pending tokens, are checked on the committed draft below.)"""
    accepted, rejected = 0, 0
    for prompt in PROMPTS:
        gen = generate(target, prompt, drafter=ParallelDrafter(parallel_draft, n_draft), max_new_tokens=NEW)
        assert gen.tokens == references[tuple(prompt)]
        assert all(s.draft_calls == 1 for s in gen.steps if s.drafted)
        assert all(len(s.drafted) <= n_draft for s in gen.steps)
        accepted += sum(s.num_accepted >= 1 for s in gen.steps)
        rejected += sum(s.num_accepted < len(s.drafted) for s in gen.steps)
    assert accepted > 0 and rejected > 0  # both the accepted path and the rollback ran


@pytest.mark.parametrize("max_new", [1, 2, 3, 7])
def test_max_new_tokens_is_exact(target, parallel_draft, references, max_new):
    for prompt in PROMPTS:
        gen = generate(target, prompt, drafter=ParallelDrafter(parallel_draft, 4), max_new_tokens=max_new)
        assert gen.tokens == references[tuple(prompt)][:max_new]


def test_eos_at_every_position_inside_a_block(target, parallel_draft, references):
    """Oracle 1's edge case: with EOS = the token the target emits at position i (its first occurrence), the output
    stops right after it, wherever it falls in a drafted block."""
    ref = references[tuple(PROMPTS[1])]
    positions_in_block = set()
    for i, eos in enumerate(ref[:12]):
        if ref.index(eos) != i:
            continue
        expected = ref[:i + 1]
        gen = generate(target, PROMPTS[1], drafter=ParallelDrafter(parallel_draft, 4), max_new_tokens=NEW,
                       eos_token_id=eos)
        assert gen.tokens == expected
        done = 0
        for step in gen.steps:  # where in its step's block the EOS landed
            if done + len(step.emitted) > i:
                positions_in_block.add(i - done)
                break
            done += len(step.emitted)
    assert len(positions_in_block) >= 2, positions_in_block


def test_cache_after_rollback_equals_a_fresh_forward(target, parallel_draft):
    """Oracle 3: after a generation with rejections the draft cache holds exactly the committed tokens but the pending
    ones, and the next block (pending + masks) on it equals a fresh forward over the committed sequence + masks."""
    drafter = ParallelDrafter(parallel_draft, 3)
    committed = []
    gen = generate(target, PROMPTS[2], drafter=drafter, max_new_tokens=NEW,
                   on_step=lambda r: committed.extend(r.emitted))
    assert any(s.num_accepted < len(s.drafted) for s in gen.steps)  # a rollback happened
    sequence = PROMPTS[2] + committed
    pending = drafter._pending
    assert 1 <= len(pending) <= 4 and sequence[-len(pending):] == pending
    assert drafter.kv_length() == cache_length(drafter._cache) == len(sequence) - len(pending)
    got = drafter.block_logits(3)
    fresh = forward(parallel_draft, sequence + [64, 64], new_cache())[-3:, :64]
    torch.testing.assert_close(got, fresh, atol=1e-5, rtol=1e-5)
    assert drafter.kv_length() == len(sequence)  # the masks' entries were rolled back
    with pytest.raises(RuntimeError, match="update"):
        drafter.block_logits(2)


def test_position_one_is_a_plain_forward_and_the_kv_length_is_recorded(target, parallel_draft):
    drafter = ParallelDrafter(parallel_draft, 4)
    prompt = PROMPTS[2]
    drafter.reset(prompt)
    block = drafter.block_logits(4)
    assert block.shape == (4, 64) and block.dtype == torch.float32
    torch.testing.assert_close(block[0], forward(parallel_draft, prompt, new_cache())[-1, :64])
    gen = generate(target, prompt, drafter=ParallelDrafter(parallel_draft, 4), max_new_tokens=10)
    assert gen.steps[0].prefill and gen.steps[0].draft_cache is None  # the prefill: no drafter ran yet
    kept = len(prompt)  # reset(prompt + [first token]) prefills every token it gets but the last: the prompt
    for step in gen.steps[1:]:  # the KV viewer's record (before, after propose, after update): no mask entry stays
        before, written, after = step.draft_cache
        assert before == kept and written == after == step.position + len(prompt)
        kept = after
    assert kept == len(prompt) + len(gen.tokens) - len(gen.steps[-1].emitted)  # the last step's tokens are pending


@pytest.mark.parametrize("kw", [dict(temperature=1.0), dict(temperature=0.7, top_p=0.9)])
def test_sampled_tokens_of_the_first_block_follow_the_target(target, parallel_draft, kw):
    """Oracle 2: token 0 comes from the prefill; with N = 3 and max_new_tokens = 4 the first decode step drafts two
    tokens in one block (the second from a mask), and tokens 1 and 2 are distributed as the target's: token 1 given
    token 0, token 2 given tokens 0 and 1 (chi-square against the target's distributions after those prefixes)."""
    prompt = [1, 2, 3, 4, 5]
    counts = [torch.zeros(64), torch.zeros(64)]
    prefixes = [[], []]
    drafter = ParallelDrafter(parallel_draft, 3)
    accepted = 0
    for seed in range(1200):
        gen = generate(target, prompt, drafter=drafter, max_new_tokens=4, seed=seed, **kw)
        assert gen.steps[0].prefill and len(gen.steps[1].drafted) == 2
        accepted += gen.steps[1].num_accepted
        for i in (0, 1):  # tokens 1 and 2, the block's
            counts[i][gen.tokens[i + 1]] += 1
            prefixes[i].append(prompt + gen.tokens[: i + 1])
    assert 0 < accepted < 2 * 1200
    for i in (0, 1):
        assert chi_square(counts[i], next_token_probs(target, prefixes[i], **kw)).pvalue > 1e-3


def test_sampled_drafts_carry_one_distribution_per_position(parallel_draft):
    drafter = ParallelDrafter(parallel_draft, 3)
    drafter.reset(PROMPTS[1])
    request = DraftRequest(PROMPTS[1], 3, temperature=1.0, generator=torch.Generator().manual_seed(0))
    draft = drafter.propose(request)
    assert draft.calls == 1 and len(draft.tokens) == 3 and draft.probs.shape == (3, 64)
    torch.testing.assert_close(draft.probs.sum(-1), torch.ones(3))
    assert all(draft.probs[i, t] > 0 for i, t in enumerate(draft.tokens))
    drafter.update(1, 7)
    assert drafter._pending == [draft.tokens[0], 7]
    assert drafter.propose(DraftRequest(PROMPTS[1] + [draft.tokens[0], 7], 0)).tokens == []  # nothing fed
    drafter.update(0, 9)
    assert drafter._pending == [draft.tokens[0], 7, 9] and drafter.kv_length() == len(PROMPTS[1])


def test_bad_arguments(parallel_draft, draft, pair):
    for bad in (0, -1, 1.5, True):
        with pytest.raises(ValueError, match="n_draft"):
            ParallelDrafter(parallel_draft, bad)
    with pytest.raises(ValueError, match="mask_token_id"):
        ParallelDrafter(draft)  # an autoregressive draft has no mask token
    with pytest.raises(ValueError, match="mask_token_id"):
        ParallelDrafter(draft, mask_token_id=64)
    with pytest.raises(ValueError, match="vocab_size"):
        ParallelDrafter(parallel_draft, vocab_size=66)
    with pytest.raises(ValueError, match=r"mask_token_id must lie past the target's vocabulary \(>= vocab_size = 64\)"):
        ParallelDrafter(parallel_draft, mask_token_id=5, vocab_size=64)  # id 5 could be drafted, then sent as a token
    with pytest.raises(TypeError, match="draft_model"):
        ParallelDrafter(pair)
    with pytest.raises(RuntimeError, match="reset"):
        ParallelDrafter(parallel_draft).propose(DraftRequest([1, 2], 2))
    with pytest.raises(TypeError, match="ModelPair"):
        ParallelDrafter.from_pretrained(pair.draft)
    other = dataclasses.replace(pair, name="mine")
    with pytest.raises(FileNotFoundError, match="no parallel draft for the 'mine' pair"):
        ParallelDrafter.from_pretrained(other)
    drafter, why = try_drafter("parallel", other)
    assert drafter is None and "parallel" in why


# --- the committed Shakespeare parallel draft ---------------------------------------------------------------------

@pytest.fixture(scope="module")
def shakespeare_prompts(pair):
    return [pair.encode(text)[:24] for text in held_out_prompts()[:2]]


@pytest.fixture(scope="module")
def shakespeare_references(pair, shakespeare_prompts):
    return [autoregressive(pair.target, ids, max_new_tokens=40).tokens for ids in shakespeare_prompts]


def test_committed_draft_greedy_parity_and_one_forward_per_step(pair, shakespeare_prompts, shakespeare_references):
    """The committed file loads as a plain LlamaForCausalLM with its mask token, drafts N per forward, keeps greedy
    parity with autoregressive decoding (float32) at N = 2 and 4, and its mask positions get accepted, whole blocks
    too (the next proposal then feeds every accepted draft and the target's token)."""
    drafter = make_drafter("parallel", pair, 4)
    assert isinstance(drafter, ParallelDrafter) and drafter.n_draft == 4 and drafter.block_size == 4
    assert type(drafter.model).__name__ == "LlamaForCausalLM" and drafter.mask_token_id == 2048
    assert drafter.vocab_size == 2048 and PARALLEL_DIRS["shakespeare"].name == "parallel"
    later, whole = 0, 0
    for n_draft in (2, 4):
        for ids, ref in zip(shakespeare_prompts, shakespeare_references):
            sp = generate(pair.target, ids, drafter=ParallelDrafter.from_pretrained(pair, n_draft), max_new_tokens=40)
            assert sp.tokens == ref
            assert sp.stats["draft_calls"] == sum(1 for s in sp.steps if s.drafted)
            later += sum(s.num_accepted >= 2 for s in sp.steps)
            whole += sum(s.num_accepted == len(s.drafted) == n_draft for s in sp.steps)
    assert later > 0 and whole > 0


def test_committed_draft_first_speculated_token_follows_the_target(pair, shakespeare_prompts):
    """Token 0 comes from the prefill; token 1, the first decode step's, is verified against a sampled draft. The
    target continues this prompt with its next held-out token 83 % of the time, a context where the draft
    disagrees with it enough that a draft accepted blindly, or a rejection that resampled from the target instead
    of the residual, fails the test."""
    ids = shakespeare_prompts[0][:8]
    drafter = ParallelDrafter.from_pretrained(pair, n_draft=2)
    counts, prefixes = torch.zeros(pair.target.config.vocab_size), []
    for seed in range(500):
        gen = generate(pair.target, ids, drafter=drafter, max_new_tokens=3, temperature=1.0, seed=seed)
        assert gen.steps[0].prefill and gen.steps[1].drafted
        counts[gen.tokens[1]] += 1
        prefixes.append(ids + gen.tokens[:1])
    assert chi_square(counts, next_token_probs(pair.target, prefixes)).pvalue > 1e-3
