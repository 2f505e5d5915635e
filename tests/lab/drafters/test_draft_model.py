"""DraftModelDrafter (lab.drafters.draft_model): a small model drafting on its own KV cache, rolled back to the
committed prefix after every step, and its adaptive draft length (transformers' num_assistant_tokens_schedule=
"heuristic": the rule :func:`lab.drafters.draft_model.next_n_draft`, scripted acceptances, greedy parity), on the
tiny fixtures. The arena's fixed vs adaptive N comparison (lab.arena.compare_adaptive) is tested in
tests/lab/test_arena.py."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from lab.decode import generate
from lab.drafters import DraftModelDrafter
from lab.drafters.base import DraftRequest
from lab.drafters.draft_model import next_n_draft
from lab.kv import cache_length
from lab.models import forward, new_cache

PROMPTS = [[3], [1, 2, 3, 4, 5], list(range(10, 40))]


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


def test_draft_model_adaptive_must_be_a_bool(draft):
    with pytest.raises(TypeError, match="adaptive"):
        DraftModelDrafter(draft, adaptive="no")
    with pytest.raises(TypeError, match="adaptive"):
        DraftModelDrafter(draft, adaptive=1)
    drafter = DraftModelDrafter(draft, 2, adaptive=np.bool_(True), max_n_draft=np.int64(5))
    assert drafter.adaptive is True and drafter.max_n_draft == 5
    assert DraftModelDrafter(draft, adaptive=np.bool_(False)).adaptive is False


# --- the adaptive draft length (transformers' num_assistant_tokens_schedule="heuristic") --------------------------

def test_next_n_draft_rule():
    assert next_n_draft(4, 4, 4) == 6            # all accepted: +2
    assert next_n_draft(4, 3, 4) == 3            # a rejection: -1
    assert next_n_draft(1, 0, 1) == 1            # never below 1
    assert next_n_draft(6, 2, 2) == 8            # a truncated step whose drafts were all accepted still grows
    assert next_n_draft(15, 4, 4, max_n_draft=16) == 16 and next_n_draft(16, 16, 16, max_n_draft=16) == 16
    for args, name in (((0, 0, 0), "n_draft"), ((4, 5, 4), "num_accepted"), ((4, 0, -1), "n_drafted"),
                       ((4, 1, 2, 0), "max_n_draft")):
        with pytest.raises(ValueError, match=name):
            next_n_draft(*args)


def test_adaptive_follows_scripted_acceptances(draft):
    drafter = DraftModelDrafter(draft, n_draft=2, adaptive=True, max_n_draft=7)
    prompt = [3, 1, 4, 1, 5, 9, 2, 6]
    drafter.reset(prompt)
    tokens = list(prompt)
    # accepted per step as a share of what was drafted: "all" or a count
    script = ["all", "all", 1, "all", "all", 0, 0, 0, 0, 0, 0, "all", 2]
    expected_n = [2, 4, 6, 5, 7, 7, 6, 5, 4, 3, 2, 1, 3]
    seen = []
    for accept, n in zip(script, expected_n):
        draft_out = drafter.propose(DraftRequest(tokens, max_tokens=100))
        seen.append(len(draft_out.tokens))
        assert drafter.n_draft == n
        k = len(draft_out.tokens) if accept == "all" else accept
        drafter.update(k, 7)
        tokens += draft_out.tokens[:k] + [7]
    assert seen == expected_n
    assert drafter.n_draft_history == expected_n
    assert drafter.n_draft == 2  # the last step accepted 2 of 3
    # a step capped by max_new_tokens: 1 drafted of N = 2, and accepted -> N still grows, to 4
    out = drafter.propose(DraftRequest(tokens, max_tokens=1))
    assert len(out.tokens) == 1
    drafter.update(1, 7)
    assert drafter.n_draft == 4
    drafter.reset(prompt)  # each generation starts from the initial N ("heuristic_transient")
    assert drafter.n_draft == 2 and drafter.n_draft_history == []


def test_fixed_n_never_changes(draft):
    drafter = DraftModelDrafter(draft, n_draft=3)
    committed = [1, 2, 3]
    drafter.reset(committed)
    for accepted in (3, 0, 3):
        out = drafter.propose(DraftRequest(list(committed), max_tokens=100))
        assert len(out.tokens) == 3
        drafter.update(accepted, 5)
        committed += out.tokens[:accepted] + [5]
    assert drafter.n_draft == 3 and drafter.n_draft_history == [3, 3, 3]


@pytest.mark.parametrize("which", ["draft", "noisy_draft"])
def test_adaptive_greedy_parity(request, target, which):
    model = request.getfixturevalue(which)  # a random draft (N shrinks) and a close one (N grows)
    for seed, max_new in ((0, 1), (1, 17), (2, 40)):
        prompt = torch.randint(0, 64, (6,), generator=torch.Generator().manual_seed(seed)).tolist()
        plain = generate(target, prompt, max_new_tokens=max_new)
        drafter = DraftModelDrafter(model, n_draft=2, adaptive=True, max_n_draft=8)
        spec = generate(target, prompt, drafter=drafter, max_new_tokens=max_new)
        assert spec.tokens == plain.tokens
        assert [s.depth for s in spec.steps if s.drafted] == [
            min(n, max_new - s.position - 1) for n, s in zip(drafter.n_draft_history,
                                                              [s for s in spec.steps if s.drafted])]
    eos = plain.tokens[5]
    drafter = DraftModelDrafter(model, n_draft=1, adaptive=True)
    spec = generate(target, prompt, drafter=drafter, max_new_tokens=40, eos_token_id=eos)
    assert spec.tokens == generate(target, prompt, max_new_tokens=40, eos_token_id=eos).tokens


def test_adaptive_grows_with_a_close_draft(target, noisy_draft, draft):
    prompt = [5, 17, 33, 2, 8, 40]
    close = DraftModelDrafter(noisy_draft, n_draft=2, adaptive=True, max_n_draft=12)
    generate(target, prompt, drafter=close, max_new_tokens=60)
    far = DraftModelDrafter(draft, n_draft=2, adaptive=True, max_n_draft=12)
    generate(target, prompt, drafter=far, max_new_tokens=60)
    assert max(close.n_draft_history) > 2      # long accepted runs let N grow
    assert far.n_draft_history.count(1) > len(far.n_draft_history) // 2  # a random draft is pushed down to N = 1


def test_adaptive_arguments(draft):
    with pytest.raises(ValueError, match="adaptive=True"):
        DraftModelDrafter(draft, n_draft=2, max_n_draft=8)
    with pytest.raises(ValueError, match="max_n_draft"):
        DraftModelDrafter(draft, n_draft=4, adaptive=True, max_n_draft=3)
    with pytest.raises(ValueError, match="n_draft"):
        DraftModelDrafter(draft, n_draft=0, adaptive=True)


def test_draft_model_drafter_arguments(draft):
    assert DraftModelDrafter(draft, n_draft=np.int64(2)).n_draft == 2
    assert DraftModelDrafter(draft, 2, adaptive=True, max_n_draft=np.int64(5)).max_n_draft == 5
    with pytest.raises(ValueError, match="n_draft must be an integer >= 1"):
        DraftModelDrafter(draft, n_draft=True)
    with pytest.raises(ValueError, match=r"max_n_draft \(at least n_draft\) must be an integer >= 3"):
        DraftModelDrafter(draft, 3, adaptive=True, max_n_draft=2)
    with pytest.raises(TypeError, match="draft_model must be a transformers causal LM"):
        DraftModelDrafter(DraftModelDrafter(draft, 2), 2)


# --- the confidence stop (transformers' assistant_confidence_threshold) -----------------------------------------

def _greedy_chain(model, prompt, n):
    """The draft's own greedy chain of n tokens after ``prompt`` and the softmax probability of each, from fresh
    forwards over the whole sequence (no cache): the reference the drafter's cached proposal must match."""
    tokens, probs = [], []
    for _ in range(n):
        p = torch.softmax(forward(model, prompt + tokens, new_cache())[-1].float(), -1)
        tokens.append(int(p.argmax()))
        probs.append(float(p.max()))
    return tokens, probs


@pytest.mark.parametrize("threshold", [0.05, 0.2, 0.5, 0.9])
def test_confidence_stops_after_the_first_unsure_token(draft, threshold):
    """As transformers' ConfidenceCriteria: a token whose draft probability is below the threshold is proposed, and
    drafting stops after it; a chain that stays sure runs to N."""
    stopped = full = 0
    for seed in range(12):
        prompt = torch.randint(0, 64, (5,), generator=torch.Generator().manual_seed(seed)).tolist()
        chain, probs = _greedy_chain(draft, prompt, 8)
        unsure = next((i for i, p in enumerate(probs) if p < threshold), None)
        want = chain if unsure is None else chain[:unsure + 1]
        drafter = DraftModelDrafter(draft, n_draft=8, confidence=threshold)
        drafter.reset(prompt)
        got = drafter.propose(DraftRequest(prompt, 8))
        assert got.tokens == want and got.calls == len(want), (seed, probs)
        stopped += unsure is not None and unsure < 7
        full += unsure is None
    assert stopped > 0 if threshold >= 0.2 else True
    assert full > 0 if threshold <= 0.05 else True


def test_confidence_keeps_the_output_the_targets(target, noisy_draft):
    """Greedy parity, and the draft cache still equals a fresh forward after steps of every length."""
    lengths = set()
    for seed, max_new in ((0, 1), (1, 17), (2, 40)):
        prompt = torch.randint(0, 64, (6,), generator=torch.Generator().manual_seed(seed)).tolist()
        drafter = DraftModelDrafter(noisy_draft, n_draft=6, confidence=0.25)
        spec = generate(target, prompt, drafter=drafter, max_new_tokens=max_new)
        assert spec.tokens == generate(target, prompt, max_new_tokens=max_new).tokens
        lengths |= {len(s.drafted) for s in spec.steps if s.drafted}
        sequence = prompt + spec.tokens
        pending = drafter._pending
        got = forward(noisy_draft, pending, drafter._cache)[-1]
        torch.testing.assert_close(got, forward(noisy_draft, sequence, new_cache())[-1], atol=1e-5, rtol=1e-5)
    assert len(lengths) > 2   # the stop cut some proposals short, others ran to N


def test_confidence_sampled_first_speculated_token_matches_the_target(target, noisy_draft):
    """At T = 1 the stop reads the sampled token's probability; a shorter proposal leaves sampling exact. The first
    token comes from the prefill; the second is the first decode step's (max_new_tokens = 4: up to two drafts).
    After this prompt the target gives token 28 92 % of the time, and after it the draft's distribution is far
    enough from the target's that a draft accepted blindly, or a rejection that resampled from the target instead
    of the residual, fails the test."""
    from lab.metrics import chi_square
    from tests.helpers import next_token_probs

    prompt = [48, 35, 56, 27, 40, 52]
    seconds, prefixes = torch.zeros(64), []
    lengths = set()
    for seed in range(600):
        drafter = DraftModelDrafter(noisy_draft, n_draft=4, confidence=0.08)
        run = generate(target, prompt, drafter=drafter, max_new_tokens=4, temperature=1.0, seed=seed)
        assert run.steps[0].prefill and not run.steps[1].prefill
        seconds[run.tokens[1]] += 1
        prefixes.append(prompt + run.tokens[:1])
        lengths.add(len(run.steps[1].drafted))
    assert chi_square(seconds, next_token_probs(target, prefixes)).pvalue > 1e-3
    assert lengths == {1, 2}  # the stop cut some proposals short, after the first drafted token


def test_confidence_arguments(draft):
    assert DraftModelDrafter(draft, 4, confidence=np.float32(0.4)).confidence == pytest.approx(0.4)
    for bad in (0, 1, 1.5, -0.1, True, "0.4"):
        with pytest.raises(ValueError, match=r"confidence must be None or a probability in \(0, 1\)"):
            DraftModelDrafter(draft, 4, confidence=bad)


# --- a reduced draft vocabulary (FR-Spec) --------------------------------------------------------------------------
HALF = torch.arange(0, 64, 2)  # the even ids: a draft vocabulary of 32 of the 64


def test_draft_vocab_scores_only_its_rows_with_the_full_heads_numbers(target, noisy_draft):
    """Over several steps, 1- and 2-token feeds (the catch-up after a full acceptance) and a vocabulary in no sorted
    order, the reduced head gives the full head's logits on its rows and -inf elsewhere; a greedy draft is the argmax
    over the draft vocabulary; greedy output stays the target's; the draft cache still equals a fresh forward."""
    vocab = torch.randperm(64, generator=torch.Generator().manual_seed(3))[:32]
    inside = torch.zeros(64, dtype=torch.bool)
    inside[vocab] = True
    prompt = PROMPTS[1]
    reduced, full = DraftModelDrafter(noisy_draft, 4, draft_vocab=vocab), DraftModelDrafter(noisy_draft, 4)
    reduced.reset(prompt)
    full.reset(prompt)
    for feed in ([prompt[-1]], [7, 21], [40], [3, 60]):
        got, want = reduced.next_logits(feed), full.next_logits(feed)
        torch.testing.assert_close(got[inside], want[inside], atol=1e-5, rtol=1e-5)
        assert torch.isinf(got[~inside]).all() and (got[~inside] < 0).all()
    proposer = DraftModelDrafter(noisy_draft, 4, draft_vocab=vocab)
    proposer.reset(prompt)
    draft = proposer.propose(DraftRequest(list(prompt), 4))
    full.reset(prompt)
    first = full.next_logits([prompt[-1]])
    assert all(inside[t] for t in draft.tokens) and draft.tokens[0] == int(vocab[first[vocab].argmax()])
    spec = generate(target, prompt, drafter=proposer, max_new_tokens=30)
    assert spec.tokens == generate(target, prompt, max_new_tokens=30).tokens  # greedy parity
    assert all(inside[t] for s in spec.steps for t in s.drafted)
    sequence = prompt + spec.tokens
    pending = proposer._pending
    torch.testing.assert_close(forward(noisy_draft, pending, proposer._cache)[-1],
                               forward(noisy_draft, sequence, new_cache())[-1], atol=1e-5, rtol=1e-5)


def test_a_draft_equal_to_the_target_is_always_accepted_with_its_whole_vocabulary(target):
    """With the target as its own draft and every id in the draft vocabulary (shuffled), each draft is the target's
    next token, after catch-ups of two tokens too, so every drafted token is accepted."""
    vocab = torch.randperm(64, generator=torch.Generator().manual_seed(5))
    gen = generate(target, PROMPTS[1], drafter=DraftModelDrafter(target, 3, draft_vocab=vocab), max_new_tokens=25)
    assert gen.stats["acceptance_rate"] == 1.0 and gen.stats["drafted_tokens"] > 10


def test_draft_vocab_sampled_first_speculated_token_matches_the_target(target, noisy_draft):
    """At T = 1 the draft samples from its distribution over the draft vocabulary (zero elsewhere) and verification
    against those probabilities keeps the output the target's: the second token (the first a decode step verifies)
    follows the target's distribution, odd ids included, which only the residual or the bonus token can give."""
    from lab.metrics import chi_square
    from tests.helpers import next_token_probs

    prompt = [48, 35, 56, 27, 40, 52]
    seconds, prefixes = torch.zeros(64), []
    for seed in range(600):
        run = generate(target, prompt, drafter=DraftModelDrafter(noisy_draft, 2, draft_vocab=HALF),
                       max_new_tokens=4, temperature=1.0, seed=seed)
        step = run.steps[1]
        assert step.drafted and all(t % 2 == 0 for t in step.drafted)
        seconds[run.tokens[1]] += 1
        prefixes.append(prompt + run.tokens[:1])
    expected = next_token_probs(target, prefixes)
    assert seconds[1::2].sum() > 0 and (seconds[expected == 0] == 0).all()
    assert chi_square(seconds, expected).pvalue > 1e-3


def test_draft_vocab_arguments(draft):
    from transformers import GPT2Config, GPT2LMHeadModel

    for bad, message in (([], "draft_vocab must hold 1..64 ids"), ([3, 3], "must not repeat an id"),
                         ([0, 64], r"in \[0, 64\)"), ([0.5], "integer token ids")):
        with pytest.raises(ValueError, match=message):
            DraftModelDrafter(draft, 4, draft_vocab=bad)
    gpt2 = GPT2LMHeadModel(GPT2Config(vocab_size=64, n_embd=16, n_layer=1, n_head=2, n_positions=64)).eval()
    with pytest.raises(ValueError, match="draft_vocab needs a Llama draft .* got model_type 'gpt2'"):
        DraftModelDrafter(gpt2, 4, draft_vocab=[0, 1])
    assert DraftModelDrafter(gpt2, 4).draft_vocab is None  # the whole head: any causal LM
    import copy

    biased = copy.deepcopy(draft)  # a head that is not just a weight: its bias, a hook would be skipped
    biased.lm_head = torch.nn.Linear(32, 64, bias=True)
    with pytest.raises(ValueError, match="plain nn.Linear without bias or hooks"):
        DraftModelDrafter(biased, 4, draft_vocab=[0, 1])
    hooked = copy.deepcopy(draft)
    hooked.lm_head.register_forward_hook(lambda module, args, out: out * 0.25)
    with pytest.raises(ValueError, match="plain nn.Linear without bias or hooks"):
        DraftModelDrafter(hooked, 4, draft_vocab=[0, 1])
    drafter = DraftModelDrafter(draft, 4, draft_vocab=[0, 1])
    drafter.reset([1, 2, 3])
    with pytest.raises(ValueError, match=r"feed must be 1 or more token ids in \[0, 64\)"):
        drafter.next_logits([70])


def test_update_checks_its_counts(noisy_draft):
    """num_accepted = -1 rolled the draft's cache back past a committed entry; 3.7 was fed as token 3 next step."""
    drafter = DraftModelDrafter(noisy_draft, n_draft=3)
    drafter.reset([1, 2, 3])
    drafter.propose(DraftRequest([1, 2, 3], 3))
    before = drafter.kv_length()
    with pytest.raises(ValueError, match=r"num_accepted \(the last draft holds 3 tokens\) must be an integer in "
                                         r"\[0, 3\], got -1"):
        drafter.update(-1, 4)
    with pytest.raises(ValueError, match="next_token must be an integer >= 0, got 3.7"):
        drafter.update(1, 3.7)
    assert drafter.kv_length() == before  # refused before anything was rolled back
    drafter.update(1, 4)
    assert drafter.kv_length() == 3 + 1  # the prompt and the one accepted draft


def test_reset_checks_the_prompt_ids_it_is_handed(noisy_draft):
    """[5.5] and [-1] were taken and failed at the next propose naming input_ids; a [1, L] tensor raised a bare
    torch error."""
    drafter = DraftModelDrafter(noisy_draft, n_draft=2)
    with pytest.raises(TypeError, match="prompt_ids must hold integer token ids"):
        drafter.reset([1, 5.5])
    with pytest.raises(ValueError, match=r"prompt_ids must be token ids in \[0, "):
        drafter.reset([1, -1])
    drafter.reset(torch.tensor([[1, 2, 3]]))  # [1, L], as generate takes it
    assert drafter.kv_length() == 2 and drafter.propose(DraftRequest([1, 2, 3], 2)).tokens


def test_a_request_the_drafter_has_not_followed_is_refused(draft):
    """The draft reads its own KV cache, not request.tokens: a missed update drafted silently from the old
    context."""
    drafter = DraftModelDrafter(draft, n_draft=2)
    drafter.reset([1, 2, 3])
    out = drafter.propose(DraftRequest([1, 2, 3], max_tokens=2))
    drafter.update(1, 7)
    with pytest.raises(ValueError, match=r"request.tokens holds 3 committed tokens, but this drafter has seen 5"):
        drafter.propose(DraftRequest([1, 2, 3], max_tokens=2))  # the caller forgot the step's tokens
    assert len(drafter.propose(DraftRequest([1, 2, 3, out.tokens[0], 7], max_tokens=2)).tokens) == 2
