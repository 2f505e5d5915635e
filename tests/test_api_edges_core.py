"""Edges of the core API found by an adversarial review: generate's seed and per-step draft checks, the context
limit in lab.models.forward (and everything built on it), lab.verify's argument checks, load_pair's device /
dtype / name checks, lab.kv's argument checks, and the StepRecord rule for steps cut at EOS.

Every case here failed (or silently did the wrong thing) before its check was added."""
from __future__ import annotations

import random

import numpy as np
import pytest
import torch

from conftest import tiny_llama
from lab import kv, models, verify
from lab.decode import generate
from lab.drafters import Draft, DraftModelDrafter
from lab.models import forward, new_cache

LIMIT = 32  # context of the small models below


@pytest.fixture(scope="module")
def short_target():
    return tiny_llama(0, layers=2, max_positions=LIMIT)


@pytest.fixture(scope="module")
def short_draft():
    return tiny_llama(1, layers=1, max_positions=LIMIT)


class Scripted:
    """A drafter whose proposal is ``make(request, position)``: position = new tokens committed so far."""

    def __init__(self, make):
        self.make = make

    def reset(self, prompt_ids):
        self.prompt_len = len(prompt_ids)

    def propose(self, request):
        return self.make(request, len(request.tokens) - self.prompt_len)

    def update(self, num_accepted, next_token):
        pass


# --- 1. seed=None leaves torch's global RNG alone --------------------------------------------------------------

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


# --- 2. the context limit and the vocabulary in lab.models.forward ---------------------------------------------

def test_forward_refuses_positions_past_the_context(short_target):
    cache = new_cache()
    assert forward(short_target, list(range(LIMIT)), cache).shape == (LIMIT, 64)  # exactly full: fine
    with pytest.raises(ValueError, match=rf"context limit of {LIMIT}.*cache length {LIMIT} \+ 1 new tokens"):
        forward(short_target, [1], cache)
    with pytest.raises(ValueError, match=rf"position {LIMIT + 7}.*context limit of {LIMIT}.*cache length 0 \+ 40"):
        forward(short_target, [1] * 40, new_cache())
    cache = new_cache()
    forward(short_target, [1, 2], cache)
    with pytest.raises(ValueError, match=rf"position {LIMIT}, past the model's context limit"):
        forward(short_target, [3, 4], cache, position_ids=[5, LIMIT])  # explicit positions count, not the length
    assert forward(short_target, [3, 4], cache, position_ids=[2, LIMIT - 1]).shape == (2, 64)


def test_forward_checks_token_ids(short_target):
    with pytest.raises(ValueError, match=r"input_ids must be token ids in \[0, 64\).*got 64"):
        forward(short_target, [1, 64], new_cache())
    with pytest.raises(ValueError, match=r"input_ids .*\[0, 64\).*got -1"):
        forward(short_target, torch.tensor([-1, 3]), new_cache())
    with pytest.raises(TypeError, match="input_ids must be integer token ids"):
        forward(short_target, [1.7, 2.2], new_cache())
    assert forward(short_target, np.array([1, 63]), new_cache()).shape == (2, 64)


def test_helpers_built_on_forward_stop_at_the_context(short_target, short_draft):
    from lab.drafters.lookahead import jacobi_update

    scratch = kv.ScratchKVCache(short_target)
    scratch.append(list(range(30)))
    with pytest.raises(ValueError, match="context limit"):
        scratch.append([1, 2, 3])
    with pytest.raises(ValueError, match="context limit"):
        jacobi_update(short_target, [5] * 30, [1] * 8)
    with pytest.raises(ValueError, match="context limit"):
        kv.two_cache_greedy(short_target, short_draft, [1] * 28, 10, n_draft=4)
    with pytest.raises(TypeError, match=r"prompt_ids must be token ids, got text \('abc'\); encode text first"):
        kv.two_cache_greedy(short_target, short_draft, "abc", 3)


def test_generate_cuts_drafts_that_run_past_the_context(short_target):
    prompt = [3, 1, 4, 1, 5, 9, 2, 6] * 3 + [5, 3, 5]  # 27 tokens; 5 more fill the context exactly
    ref = generate(short_target, prompt, max_new_tokens=LIMIT - len(prompt)).tokens

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
            assert step.cache_before + step.depth < LIMIT
    gen = generate(short_target, prompt, drafter=Scripted(chain), max_new_tokens=len(ref))
    assert [len(s.drafted) for s in gen.steps] == [5]  # cut to the 5 positions left in the context (27..31)


def test_bundled_drafters_fill_the_context_exactly():
    from lab.drafters import (
        EagleDrafter,
        EarlyExitDrafter,
        LookaheadDrafter,
        MedusaDrafter,
        PromptLookupDrafter,
    )
    from lab.drafters.eagle import DEFAULT_TREE

    pair = models.load_pair()
    target = pair.target
    text = pair.encode("\n".join(models.held_out_prompts()))
    limit = models.context_limit(target)
    for prompt in (text[: limit - 24], (text[:9] * 60)[: limit - 12]):  # ordinary text; a copy-heavy prompt
        new = limit - len(prompt)
        ref = generate(target, prompt, max_new_tokens=new).tokens
        makers = {"model": lambda: DraftModelDrafter(pair.draft, 7), "ngram": lambda: PromptLookupDrafter(3, 7),
                  "lookahead": lambda: LookaheadDrafter(), "wide lookahead": lambda: LookaheadDrafter(window=30, ngram=5),
                  "medusa": lambda: MedusaDrafter.from_pretrained(pair),
                  "eagle": lambda: EagleDrafter.from_pretrained(pair, n_draft=7),
                  "eagle tree": lambda: EagleDrafter.from_pretrained(pair, tree=DEFAULT_TREE),
                  "early exit": lambda: EarlyExitDrafter(target, 2, 7)}
        for name, make in makers.items():
            assert generate(target, prompt, drafter=make(), max_new_tokens=new).tokens == ref, name


# --- 3. generate checks each step's Draft ------------------------------------------------------------------------

V = 64
GOOD = torch.full((1, V), 1 / V)


@pytest.mark.parametrize("make, error, words", [
    (lambda r: [12, 13], TypeError, "Scripted.propose must return a lab.drafters.Draft.*got list"),
    (lambda r: None, TypeError, "Scripted.propose must return a lab.drafters.Draft.*got NoneType"),
    (lambda r: Draft([99999]), ValueError,
     r"Draft.tokens \(from Scripted.propose\) must be token ids in \[0, 64\), got \[99999\]"),
    (lambda r: Draft([-1]), ValueError, r"Draft.tokens \(from Scripted.propose\) must be token ids in \[0, 64\), got \[-1\]"),
    (lambda r: Draft([1.5]), TypeError, r"Draft.tokens \(from Scripted.propose\) must hold integer token ids, got float 1.5"),
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
        assert gen.tokens == ref and gen.stats["accepted_tokens"] == 8  # every draft accepted
        assert {type(t) for t in gen.tokens} == {int}
        assert {type(t) for s in gen.steps for t in s.drafted} == {int}


# --- 4. lab.verify checks its arguments ---------------------------------------------------------------------------

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


# --- 5. load_pair and ModelPair.decode ----------------------------------------------------------------------------

def test_load_pair_checks_name_device_and_dtype():
    with pytest.raises(ValueError, match="unknown model pair \\['gpt2'\\]; name must be one of the presets"):
        models.load_pair(["gpt2"])
    with pytest.raises(ValueError, match="dtype must be None or a torch floating dtype.*'foo'"):
        models.load_pair(dtype="foo")
    with pytest.raises(ValueError, match="dtype must be None or a torch floating dtype.*torch.int64"):
        models.load_pair(dtype=torch.int64)
    with pytest.raises(ValueError, match="device must be a torch device name; this machine has cpu"):
        models.load_pair(device="gpu")
    if not torch.cuda.is_available():
        with pytest.raises(ValueError, match="device 'cuda' is not available on this machine; available: cpu"):
            models.load_pair(device="cuda")
    else:
        with pytest.raises(ValueError, match="device 'cuda:99' is not available"):
            models.pick_device("cuda:99")
    assert models.pick_device("cpu") == torch.device("cpu")
    assert models._check_dtype("bfloat16") is torch.bfloat16 and models._check_dtype(None) is torch.float32


def test_pair_decode_refuses_ids_outside_the_vocabulary():
    pair = models.load_pair()
    ids = pair.encode("ROMEO.")
    assert pair.decode(ids) == "ROMEO." == pair.decode(torch.tensor(ids)) == pair.decode(np.array(ids))
    with pytest.raises(ValueError, match=r"ids must be token ids in \[0, 2048\).*\[99999\]"):
        pair.decode([65, 99999])
    with pytest.raises(ValueError, match=r"\[-1\]"):
        pair.decode([-1])
    with pytest.raises(TypeError, match="ids must hold integer token ids, got float"):
        pair.decode([1.5])
    assert pair.decode.__doc__ and "Raises" in pair.decode.__doc__
    for bad in (123, None, ["ROMEO."], b"ROMEO."):  # a list would come back as a batch of id lists
        with pytest.raises(TypeError, match="text must be a str"):
            pair.encode(bad)


# --- 6. lab.kv arguments --------------------------------------------------------------------------------------------

def test_emitted_tokens_checks_its_arguments():
    assert kv.emitted_tokens([1, 2, 3], 2, 9) == [1, 2, 9]
    assert kv.emitted_tokens((1, 2, 3), np.int64(3), np.int64(9)) == [1, 2, 3, 9]
    with pytest.raises(ValueError, match="num_accepted must be an integer >= 0, got -1"):
        kv.emitted_tokens([1, 2, 3], -1, 9)
    with pytest.raises(ValueError, match=r"num_accepted must be an integer in \[0, 3\].*got 5"):
        kv.emitted_tokens([1, 2, 3], 5, 9)
    with pytest.raises(ValueError, match="next_token must be an integer >= 0"):
        kv.emitted_tokens([1, 2, 3], 1, 2.0)


def test_scratch_cache_refuses_text_and_floats(target):
    scratch = kv.ScratchKVCache(target)
    with pytest.raises(TypeError, match=r"tokens must be token ids, got text \('ab'\)"):
        scratch.append("ab")
    with pytest.raises(TypeError, match="tokens must hold integer token ids, got float 1.5"):
        scratch.append([1, 1.5])
    with pytest.raises(TypeError, match="tokens must be a list of token ids or a LongTensor, got int"):
        scratch.append(5)
    assert scratch.append(np.array([1, 2, 3])).shape == (3, 64) and scratch.committed_tokens == [1, 2, 3]


# --- 7. StepRecord of a step cut at EOS: num_accepted and last_kind describe verification ---------------------------

def test_step_cut_at_eos_keeps_what_verification_decided(target):
    prompt = [1, 2, 3]
    ref = generate(target, prompt, max_new_tokens=10).tokens
    eos = ref[2]
    assert eos not in ref[:2]
    gen = generate(target, prompt, drafter=Scripted(lambda r, pos: Draft(ref[pos:pos + r.max_tokens][:5])),
                   max_new_tokens=10, eos_token_id=eos)
    assert gen.tokens == ref[:3]
    last = gen.steps[-1]
    assert (last.drafted, last.num_accepted, last.emitted) == (ref[:5], 5, ref[:3])
    assert last.truncated and last.last_kind == "bonus"  # the target's token after 5 accepted drafts, then cut
    assert gen.stats["accepted_tokens"] == 5 and gen.stats["acceptance_rate"] == 1.0
    assert gen.stats["new_tokens"] == 3


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
    b = verify._tree_sampled(good, [1, 2], [-1, 0], draft, torch.Generator().manual_seed(5))
    assert (a.num_accepted, a.next_token, a.kind) == (b.num_accepted, b.next_token, b.kind)
