"""Prompt lookup and Lookahead drafters against DESIGN's oracles, on tiny random models (fast on a CPU).

Greedy parity token for token (several N and prompts, including prompts whose lookups hit), EOS at every position
inside a block, exact ``max_new_tokens``, no state leaking between two generations with one drafter object, the
first sampled token distributed as the target's (both drafters are deterministic: verified as one-hot), and the
n-gram lookup's edge cases.
"""
import pytest
import torch

from lab.decode import autoregressive, generate
from lab.drafters import Draft, LookaheadDrafter, PromptLookupDrafter
from lab.drafters.base import DraftRequest
from lab.drafters.prompt_lookup import ngram_lookup
from lab.metrics import chi_square
from lab.models import forward, new_cache
from lab.sampling import probs_from_logits

# A passage repeated so that lookups hit from the first step, a short prompt and a plain one.
REPEATED = [5, 9, 13, 2, 7, 11, 5, 9, 13, 2, 7, 11, 5, 9]
PROMPTS = [[3], [1, 2, 3, 4, 5], list(range(10, 40)), REPEATED]
MAX_NEW = 40


@pytest.fixture(scope="module")
def sticky_target():
    """A tiny Llama whose next token depends mostly on the current one (attention and MLP scaled down): its
    greedy text soon repeats itself, as small real models do, so n-gram lookups hit. Attention still matters a
    little, so a wrong cache, mask or position still changes its argmax."""
    from conftest import tiny_llama

    model = tiny_llama(5)
    with torch.no_grad():
        for layer in model.model.layers:
            layer.self_attn.o_proj.weight.mul_(0.05)
            layer.mlp.down_proj.weight.mul_(0.05)
    return model


@pytest.fixture(scope="module")
def references(target, sticky_target):
    return {name: {tuple(p): autoregressive(model, p, max_new_tokens=MAX_NEW).tokens for p in PROMPTS}
            for name, model in (("random", target), ("sticky", sticky_target))}


def _models(target, sticky_target):
    return {"random": target, "sticky": sticky_target}


DRAFTERS = {
    "ngram": lambda n: PromptLookupDrafter(max_ngram=3, n_draft=n),
    "ngram1": lambda n: PromptLookupDrafter(max_ngram=1, n_draft=n),
    "lookahead": lambda n: LookaheadDrafter(window=n, ngram=3),
    "jacobi": lambda n: LookaheadDrafter(window=n, ngram=2, pool_size=1),
}


# --- the n-gram lookup ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("context,max_ngram,n_draft,expected", [
    ([1, 2, 3, 9, 1, 2, 3], 3, 5, [9, 1, 2, 3]),          # trigram hit; continuation stops at the context's end
    ([1, 2, 3, 9, 9, 1, 2, 3], 3, 2, [9, 9]),             # n_draft caps the proposal
    ([4, 1, 2, 8, 1, 2, 6, 1, 2], 3, 5, [6, 1, 2]),        # the most recent earlier match wins
    ([1, 2, 7, 5, 2], 3, 5, [7, 5, 2]),                   # no trigram or bigram match: falls back to one token
    ([7, 7, 7], 3, 5, [7]),                               # overlapping match: [7, 7] also starts at index 0
    ([1, 2, 1, 2], 3, 5, [1, 2]),                         # match right before the suffix, overlapping it
    ([1, 2, 3, 4], 3, 5, []),                             # no match at any size
    ([5], 3, 5, []),                                      # a one-token context has nothing earlier
    ([5, 5], 3, 5, [5]),                                  # n-gram sizes longer than the context are skipped
    ([], 3, 5, []),
    ([3, 1, 2, 3, 9, 1, 2, 3], 1, 5, [9, 1, 2, 3]),       # max_ngram = 1: the last token only
])
def test_ngram_lookup_cases(context, max_ngram, n_draft, expected):
    assert ngram_lookup(context, max_ngram, n_draft) == expected


def test_ngram_lookup_prefers_longer_ngrams_over_recent_shorter_ones():
    # [2, 3] occurs at index 1 (followed by 4); the unigram [3] occurs more recently at index 5 (followed by 8).
    assert ngram_lookup([1, 2, 3, 4, 0, 3, 8, 2, 3], max_ngram=2, n_draft=3) == [4, 0, 3]
    assert ngram_lookup([1, 2, 3, 4, 0, 3, 8, 2, 3], max_ngram=1, n_draft=3) == [8, 2, 3]


def test_ngram_lookup_takes_tensors_and_numpy_ids_and_returns_plain_ints():
    import numpy as np

    out = ngram_lookup(torch.tensor([1, 2, 1, 2]), 2, 3)
    assert out == [1, 2] and all(type(t) is int for t in out)
    out = ngram_lookup(np.array([12, 3, 9, 12, 3]), np.int64(2), 2)
    assert out == [9, 12] and all(type(t) is int for t in out)
    assert ngram_lookup([torch.tensor(4), 5, np.int64(4)], 1, 2) == [5, 4]
    assert ngram_lookup([12, 3, 9, 1, 23], 2, 3) == []  # [1, 23] is not [12, 3], whatever their digits say


@pytest.mark.parametrize("context", ["abab", b"abab", [1.0, 2.0, 1.0], [True, False, True], torch.tensor([[1, 2]]),
                                     torch.tensor([1.0, 2.0]), [1, "2", 1], 7])
def test_ngram_lookup_rejects_what_is_not_token_ids(context):
    with pytest.raises(ValueError, match="context"):
        ngram_lookup(context, 2, 3)


@pytest.mark.parametrize("kwargs,word", [(dict(max_ngram=0), "max_ngram"), (dict(n_draft=0), "n_draft"),
                                         (dict(max_ngram=2.5), "max_ngram"), (dict(n_draft=True), "n_draft")])
def test_bad_arguments_name_the_argument(kwargs, word):
    with pytest.raises(ValueError, match=word):
        ngram_lookup([1, 2], **kwargs)
    with pytest.raises(ValueError, match=word):
        PromptLookupDrafter(**kwargs)


@pytest.mark.parametrize("kwargs,word", [(dict(window=0), "window"), (dict(ngram=1), "ngram"),
                                         (dict(pool_size=0), "pool_size")])
def test_lookahead_bad_arguments(kwargs, word):
    with pytest.raises(ValueError, match=word):
        LookaheadDrafter(**kwargs)


def test_prompt_lookup_draft_is_deterministic_and_free():
    drafter = PromptLookupDrafter(max_ngram=2, n_draft=3)
    drafter.reset([1, 2, 3, 1, 2])
    draft = drafter.propose(DraftRequest([1, 2, 3, 1, 2], max_tokens=10))
    assert (draft.tokens, draft.probs, draft.calls) == ([3, 1, 2], None, 0)
    assert drafter.propose(DraftRequest([1, 2, 3, 1, 2], max_tokens=2)).tokens == [3, 1]   # loop's budget
    assert drafter.propose(DraftRequest([1, 2, 3, 1, 2], max_tokens=0)).tokens == []
    assert drafter.propose(DraftRequest([1, 2, 3, 4], max_tokens=5)).tokens == []        # no match: plain step


# --- oracle 1: greedy parity ---------------------------------------------------------------------------------

@pytest.mark.parametrize("n_draft", [1, 2, 4, 7])
@pytest.mark.parametrize("kind", list(DRAFTERS))
def test_greedy_parity(target, sticky_target, references, kind, n_draft):
    for name, model in _models(target, sticky_target).items():
        for prompt in PROMPTS:
            gen = generate(model, prompt, drafter=DRAFTERS[kind](n_draft), max_new_tokens=MAX_NEW)
            assert gen.tokens == references[name][tuple(prompt)], (name, prompt)
            stats = gen.stats
            assert stats["new_tokens"] == MAX_NEW == sum(len(s.emitted) for s in gen.steps)
            assert stats["target_calls"] == len(gen.steps) and stats["draft_calls"] == 0
            for step in gen.steps:
                assert step.emitted[: step.num_accepted] == step.drafted[: step.num_accepted]
                assert step.target_tokens >= 1 + len(step.drafted)


@pytest.mark.parametrize("kind", list(DRAFTERS))
def test_lookups_hit_on_repetitive_text(sticky_target, references, kind):
    """On the sticky model's repetitive text every drafter saves target calls, and exactly."""
    for prompt in (REPEATED, [1, 2, 3, 4, 5]):
        gen = generate(sticky_target, prompt, drafter=DRAFTERS[kind](4), max_new_tokens=MAX_NEW)
        assert gen.tokens == references["sticky"][tuple(prompt)]
        assert gen.stats["tokens_per_target_call"] > 1.2, gen.stats
        assert gen.stats["accepted_tokens"] > 0


def test_prompt_lookup_copies_a_repeated_passage_from_the_first_step(sticky_target):
    gen = generate(sticky_target, REPEATED, drafter=PromptLookupDrafter(3, 5), max_new_tokens=10)
    assert gen.steps[0].drafted == [13, 2, 7, 11, 5]  # what followed the earlier occurrence of [11, 5, 9]


def test_lookahead_runs_both_branches_in_one_forward(sticky_target):
    drafter = LookaheadDrafter(window=4, ngram=3)
    gen = generate(sticky_target, REPEATED, drafter=drafter, max_new_tokens=MAX_NEW)
    sources = [h["source"] for h in drafter.history]
    assert sources[0] == "jacobi" and "pool" in sources  # first step: no pool yet → the window is the chain
    for record, info in zip(gen.steps, drafter.history):
        budget = MAX_NEW - record.position - 1  # request.max_tokens: window guesses past it are not sent
        extra = min(len(info["window"]), budget) if info["source"] == "pool" else 0
        assert record.target_tokens == 1 + len(record.drafted) + extra  # one forward holds both branches
        assert record.drafted == info["chain"]
    assert gen.stats["target_calls"] == len(gen.steps)
    assert drafter.pool and all(len(c) == 2 for cands in drafter.pool.values() for c in cands)
    assert all(len(cands) <= drafter.pool_size for cands in drafter.pool.values())


# --- EOS inside a block and exact max_new_tokens ---------------------------------------------------------------

@pytest.fixture(scope="module")
def bigram_target():
    """A tiny Llama whose next token depends on the current token only (attention and MLP switched off): its greedy
    text from a token is a fixed path, so a prompt holding that path makes every lookup propose exactly it."""
    from conftest import tiny_llama

    model = tiny_llama(5)
    with torch.no_grad():
        for layer in model.model.layers:
            layer.self_attn.o_proj.weight.zero_()
            layer.mlp.down_proj.weight.zero_()
    return model


@pytest.fixture(scope="module")
def path_prompt(bigram_target):
    path = autoregressive(bigram_target, [39], max_new_tokens=10).tokens
    assert len(set(path)) == 10 and 39 not in path  # distinct tokens: each can serve as EOS at one position
    return [39] + path + [39], path


@pytest.mark.parametrize("kind", ["ngram", "lookahead"])
def test_eos_lands_at_every_block_position(bigram_target, path_prompt, kind):
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
    if kind == "ngram":
        assert where == {0, 1, 2, 3, 4, 5}  # 5 accepted drafts + the bonus token: EOS at each of them
    else:
        assert max(where) > 0


@pytest.mark.parametrize("kind", ["ngram", "lookahead"])
def test_max_new_tokens_exact(bigram_target, path_prompt, kind):
    prompt, _ = path_prompt
    ref = autoregressive(bigram_target, prompt, max_new_tokens=14).tokens
    for m in range(1, 14):
        gen = generate(bigram_target, prompt, drafter=DRAFTERS[kind](5), max_new_tokens=m)
        assert gen.tokens == ref[:m]
        assert all(len(s.drafted) <= m - s.position - 1 for s in gen.steps)  # never drafts past the budget
    assert generate(bigram_target, prompt, drafter=PromptLookupDrafter(3, 5), max_new_tokens=13).stats[
        "target_calls"] < 13


# --- no state leaking between generations -----------------------------------------------------------------------

@pytest.mark.parametrize("kind", ["ngram", "lookahead"])
def test_no_state_leaks_between_calls(target, sticky_target, references, kind):
    for name, model in _models(target, sticky_target).items():
        drafter = DRAFTERS[kind](4)
        first = {}
        for prompt in PROMPTS + PROMPTS[::-1]:
            gen = generate(model, prompt, drafter=drafter, max_new_tokens=MAX_NEW)
            assert gen.tokens == references[name][tuple(prompt)]
            # the same drafter object gives the same steps as on its first use: nothing carried over
            record = [(s.drafted, s.num_accepted) for s in gen.steps]
            assert first.setdefault(tuple(prompt), record) == record


# --- oracle 2: the first sampled token follows the target (deterministic drafts, one-hot verification) ----------

def _first_token_counts(model, prompt, drafter, runs, **kw):
    counts = torch.zeros(64)
    for seed in range(runs):
        counts[generate(model, prompt, drafter=drafter, max_new_tokens=4, seed=seed, **kw).tokens[0]] += 1
    return counts


@pytest.mark.parametrize("kind,kw", [("ngram", dict(temperature=1.0)), ("ngram", dict(temperature=0.8, top_k=6)),
                                     ("lookahead", dict(temperature=1.0))])
def test_first_sampled_token_follows_target_distribution(target, kind, kw):
    prompt = [1, 2, 3, 4, 5, 1, 2, 3]  # the lookup proposes [4, 5, 1] at the first step
    target_probs = probs_from_logits(forward(target, prompt, new_cache())[-1], **kw).cpu()
    drafter = DRAFTERS[kind](3)
    drafter.reset(prompt)
    assert len(drafter.propose(DraftRequest(prompt, 3, **kw)).tokens) == 3  # a real draft is verified
    counts = _first_token_counts(target, prompt, drafter, 1000, **kw)
    assert (counts[target_probs == 0] == 0).all()
    assert chi_square(counts, target_probs).pvalue > 1e-3


# --- the drafter protocol's optional extras ----------------------------------------------------------------------

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


def test_lookahead_verifies_the_most_recent_continuation_that_agrees_with_the_window():
    drafter = LookaheadDrafter(window=2, ngram=3)
    drafter.reset([1, 2, 3])
    drafter.pool = {7: [(1, 2), (3, 4), (1, 5)]}  # oldest first
    for window, expected in (([1, 9], [1, 5]), ([3, 9], [3, 4]), ([8, 9], [1, 5])):  # no agreement: most recent
        drafter._step = {}
        drafter.window_tokens = window
        assert drafter.propose(DraftRequest([1, 2, 7], 5)).tokens == expected
