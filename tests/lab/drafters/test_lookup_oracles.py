"""The oracles both lookup drafters (prompt lookup, Lookahead) must pass: greedy parity token for token (several N
and prompts, including prompts whose lookups hit), EOS at every position inside a block, exact ``max_new_tokens``, no
state leaking between two generations with one drafter object, and the first speculated token distributed as the
target's (both drafters are deterministic: verified as one-hot); then greedy parity on the bundled pair."""
import pytest
import torch

from lab.decode import autoregressive, generate
from lab.drafters import LookaheadDrafter, PromptLookupDrafter
from lab.drafters.base import DraftRequest
from lab.metrics import chi_square
from lab.prompts import held_out_prompts
from tests.helpers import next_token_probs
from tests.lab.drafters.lookup_cases import DRAFTERS, MAX_NEW, PROMPTS, REPEATED


@pytest.mark.parametrize("n_draft", [1, 2, 4, 7])
@pytest.mark.parametrize("kind", ["ngram", "ngram1", "ngram-earliest", "lookahead", "jacobi"])
def test_greedy_parity(target, sticky_target, references, kind, n_draft):
    """Oracle 1 on the random and the sticky target, every prompt."""
    for name, model in (("random", target), ("sticky", sticky_target)):
        for prompt in PROMPTS:
            gen = generate(model, prompt, drafter=DRAFTERS[kind](n_draft), max_new_tokens=MAX_NEW)
            assert gen.tokens == references[name][tuple(prompt)], (name, prompt)
            stats = gen.stats
            assert stats["new_tokens"] == MAX_NEW == sum(len(s.emitted) for s in gen.steps)
            assert gen.steps[0].prefill and not gen.steps[0].drafted
            assert stats["target_calls"] == len(gen.steps) - 1 and stats["draft_calls"] == 0  # prefill not counted
            for step in gen.steps:
                assert step.emitted[: step.num_accepted] == step.drafted[: step.num_accepted]
                assert step.target_tokens >= 1 + len(step.drafted)


@pytest.mark.parametrize("kind", ["ngram", "ngram1", "ngram-earliest", "lookahead", "jacobi"])
def test_lookups_hit_on_repetitive_text(sticky_target, references, kind):
    """On the sticky model's repetitive text every drafter saves target calls, and exactly."""
    for prompt in (REPEATED, [1, 2, 3, 4, 5]):
        gen = generate(sticky_target, prompt, drafter=DRAFTERS[kind](4), max_new_tokens=MAX_NEW)
        assert gen.tokens == references["sticky"][tuple(prompt)]
        assert gen.stats["tokens_per_target_call"] > 1.2, gen.stats
        assert gen.stats["accepted_tokens"] > 0


# On the path prompt, prompt lookup drafts the path itself: EOS lands at every index of a block (5 drafts + the bonus
# token). Lookahead's drafts come from its own n-gram pool, so only some EOS positions fall after index 0.
@pytest.mark.parametrize("kind, blocks", [("ngram", {0, 1, 2, 3, 4, 5}), ("ngram-earliest", {0, 1, 2, 3, 4, 5}),
                                          ("lookahead", None)])
def test_eos_lands_at_every_block_position(bigram_target, path_prompt, kind, blocks):
    """EOS at each of the first 10 positions stops the output right after it."""
    prompt, path = path_prompt
    ref = autoregressive(bigram_target, prompt, max_new_tokens=MAX_NEW).tokens
    assert ref[:10] == path
    where = set()
    for j in range(10):
        eos = ref[j]
        gen = generate(bigram_target, prompt, drafter=DRAFTERS[kind](5), max_new_tokens=MAX_NEW, eos_token_id=eos)
        assert gen.tokens == ref[: j + 1]
        last = gen.steps[-1]
        assert last.emitted[-1] == eos and last.position + len(last.emitted) == j + 1
        where.add(len(last.emitted) - 1)  # EOS's index inside the step's block
    assert where == blocks if blocks is not None else max(where) > 0


@pytest.mark.parametrize("kind", ["ngram", "ngram-earliest", "lookahead"])
def test_max_new_tokens_exact(bigram_target, path_prompt, kind):
    prompt, _ = path_prompt
    ref = autoregressive(bigram_target, prompt, max_new_tokens=14).tokens
    for m in range(1, 14):
        gen = generate(bigram_target, prompt, drafter=DRAFTERS[kind](5), max_new_tokens=m)
        assert gen.tokens == ref[:m]
        assert all(len(s.drafted) <= m - s.position - 1 for s in gen.steps)  # never drafts past the budget
    assert generate(bigram_target, prompt, drafter=PromptLookupDrafter(3, 5), max_new_tokens=13).stats[
        "target_calls"] < 13


@pytest.mark.parametrize("kind", ["ngram", "ngram-earliest", "lookahead"])
def test_no_state_leaks_between_calls(target, sticky_target, references, kind):
    for name, model in (("random", target), ("sticky", sticky_target)):
        drafter = DRAFTERS[kind](4)
        first = {}
        for prompt in PROMPTS + PROMPTS[::-1]:
            gen = generate(model, prompt, drafter=drafter, max_new_tokens=MAX_NEW)
            assert gen.tokens == references[name][tuple(prompt)]
            # the same drafter object gives the same steps as on its first use: nothing carried over
            record = [(s.drafted, s.num_accepted) for s in gen.steps]
            assert first.setdefault(tuple(prompt), record) == record


@pytest.mark.parametrize("kind, kw", [("ngram", dict(temperature=1.0)), ("ngram", dict(temperature=0.8, top_k=6)),
                                      ("ngram-earliest", dict(temperature=1.0)), ("lookahead", dict(temperature=1.0))])
def test_first_speculated_token_follows_target_distribution(target, kind, kw):
    """Oracle 2 with a deterministic drafter: token 0 comes from the prefill; whatever it is, the first decode step
    verifies a real draft (every token occurs once in the prompt, so the lookup continues the prompt after it;
    Lookahead's first chain is its window), and token 1 follows the target's distribution after the prompt and
    token 0."""
    prompt = list(range(64))
    drafter = DRAFTERS[kind](3)
    drafter.reset(prompt + [9])
    assert len(drafter.propose(DraftRequest(prompt + [9], 3, **kw)).tokens) == 3  # [10, 11, 12] for the lookups
    counts, prefixes, full = torch.zeros(64), [], 0
    for seed in range(1000):  # max_new_tokens=5: the first decode step may draft 3 tokens
        gen = generate(target, prompt, drafter=drafter, max_new_tokens=5, seed=seed, **kw)
        assert gen.steps[0].prefill and gen.steps[1].drafted  # a real draft is verified
        full += len(gen.steps[1].drafted) == 3
        counts[gen.tokens[1]] += 1
        prefixes.append(prompt + gen.tokens[:1])
    assert full >= 900  # all but after 61, 62, 63 (the prompt's end: shorter continuations)
    expected = next_token_probs(target, prefixes, **kw)
    assert (counts[expected == 0] == 0).all()
    assert chi_square(counts, expected).pvalue > 1e-3


@pytest.mark.parametrize("make", [lambda: PromptLookupDrafter(3, 5), lambda: PromptLookupDrafter(2, 2),
                                  lambda: LookaheadDrafter(), lambda: LookaheadDrafter(window=6, ngram=4)])
def test_greedy_parity_on_the_real_pair(pair, copy_ids, make):
    prose = [pair.encode(text)[-48:] for text in held_out_prompts()[:2]]
    for ids in prose + copy_ids:
        ar = generate(pair.target, ids, max_new_tokens=40, eos_token_id=pair.eos_token_id)
        assert generate(pair.target, ids, drafter=make(), max_new_tokens=40,
                        eos_token_id=pair.eos_token_id).tokens == ar.tokens


@pytest.mark.parametrize("kind", ["ngram", "ngram-earliest"])   # Lookahead's drafts are not the likely token
def test_a_rejection_resamples_from_the_residual(bigram_target, path_prompt, kind):
    """Oracle 2 where resampling from the wrong distribution shows. On the bigram target every lookup drafts the
    target's most likely next token, and at T = 0.3 that token holds about half the target's mass after the first
    new token. The residual of a one-hot draft leaves the drafted token out, so the token still appears with exactly
    its target probability; resampling a rejection from the target itself would add about a quarter more (the
    random target of the test above gives its drafts too little mass for that error to show)."""
    prompt, path = path_prompt
    kw = dict(temperature=0.3)
    tokens, prefixes = [], []
    for seed in range(600):
        gen = generate(bigram_target, prompt, drafter=DRAFTERS[kind](3), max_new_tokens=3, seed=seed, **kw)
        if len(gen.steps) < 2 or not gen.steps[1].drafted:
            continue   # the first new token left the prompt's tokens: nothing to look up (deterministic per prefix)
        tokens.append(gen.tokens[1])
        prefixes.append(prompt + gen.tokens[:1])
    assert len(prefixes) > 300
    expected = next_token_probs(bigram_target, prefixes, **kw)
    drafted_mass = float(expected[path[1]])   # the mean mass of the most likely token, drafted where token 0 = path[0]
    assert drafted_mass > 0.2
    counts = torch.bincount(torch.tensor(tokens), minlength=expected.numel()).double()
    assert chi_square(counts, expected).pvalue > 1e-3
