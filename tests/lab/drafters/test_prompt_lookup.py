"""Prompt lookup (lab.drafters.prompt_lookup): the n-gram lookup's cases and errors, the drafter's proposals, and
DESIGN's oracles on tiny random models (fast on a CPU)."""
import pytest
import torch

from lab.decode import generate
from lab.drafters import PromptLookupDrafter
from lab.drafters.base import DraftRequest
from lab.drafters.prompt_lookup import ngram_lookup
from lab.metrics import chi_square
from tests.helpers import next_token_probs

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


def test_the_engines_rule_is_the_earliest_occurrence_and_ours_the_most_recent():
    """transformers' PromptLookupCandidateGenerator continues the earliest occurrence of the longest matching n-gram
    (vLLM's ngram_proposer.py too); ngram_lookup(match="earliest") must be exactly that rule, and the default rule
    differs from it only in which occurrence it continues."""
    import random
    from functools import partial

    from transformers.generation.candidate_generator import PromptLookupCandidateGenerator

    earliest_lookup = partial(ngram_lookup, match="earliest")
    rng = random.Random(0)
    differ = 0
    for _ in range(300):
        context = [rng.randrange(6) for _ in range(rng.randrange(2, 40))]
        k = rng.randrange(1, 6)
        hf = PromptLookupCandidateGenerator(num_output_tokens=k, max_matching_ngram_size=2, max_length=10_000)
        ids, _ = hf.get_candidates(torch.tensor([context]))
        theirs = ids[0, len(context):].tolist()
        assert earliest_lookup(context, 2, k) == theirs, context
        ours = ngram_lookup(context, 2, k)
        assert len(ours) > 0 if theirs else ours == []   # the same n-gram sizes match; only the occurrence differs
        differ += ours != theirs
    assert differ > 30   # most recent and earliest do part on small random vocabularies
    assert ngram_lookup([4, 1, 2, 8, 1, 2, 6, 1, 2], 3, 5) == [6, 1, 2]
    assert earliest_lookup([4, 1, 2, 8, 1, 2, 6, 1, 2], 3, 5) == [8, 1, 2, 6, 1]
    drafter = PromptLookupDrafter(2, 5, match="earliest")
    assert drafter.propose(DraftRequest([4, 1, 2, 8, 1, 2, 6, 1, 2], 9)).tokens == [8, 1, 2, 6, 1]
    assert repr(drafter) == "PromptLookupDrafter(max_ngram=2, n_draft=5, match='earliest')"
    import numpy as np

    assert repr(PromptLookupDrafter(2, 5, match=np.str_("earliest"))).endswith("match='earliest')")  # a plain str
    for bad in ("latest", None, "EARLIEST", np.array(["earliest", "recent"])):
        with pytest.raises(ValueError, match=r"match must be one of \('recent', 'earliest'\), got"):
            ngram_lookup([1, 2, 1], 2, 3, match=bad)
        with pytest.raises(ValueError, match="match must be one of"):
            PromptLookupDrafter(2, 3, match=bad)


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


@pytest.mark.parametrize("bad, error", [(None, TypeError), ([1.5], TypeError), ("ab", TypeError), ([-1], ValueError)])
def test_reset_checks_the_prompt_as_every_drafter_does(bad, error):
    """reset had nothing to prepare and so took anything (None, [1.5]) without a word."""
    with pytest.raises(error, match="prompt_ids"):
        PromptLookupDrafter().reset(bad)


def test_prompt_lookup_draft_is_deterministic_and_free():
    drafter = PromptLookupDrafter(max_ngram=2, n_draft=3)
    drafter.reset([1, 2, 3, 1, 2])
    draft = drafter.propose(DraftRequest([1, 2, 3, 1, 2], max_tokens=10))
    assert (draft.tokens, draft.probs, draft.calls) == ([3, 1, 2], None, 0)
    assert drafter.propose(DraftRequest([1, 2, 3, 1, 2], max_tokens=2)).tokens == [3, 1]   # loop's budget
    assert drafter.propose(DraftRequest([1, 2, 3, 1, 2], max_tokens=0)).tokens == []
    assert drafter.propose(DraftRequest([1, 2, 3, 4], max_tokens=5)).tokens == []        # no match: plain step


def test_prompt_lookup_copies_a_repeated_passage_from_the_first_step(bigram_target, path_prompt):
    prompt, path = path_prompt  # [39] + path + [39]: the target's greedy text after 39 is the path
    gen = generate(bigram_target, prompt, drafter=PromptLookupDrafter(3, 5), max_new_tokens=10)
    assert gen.steps[0].prefill and gen.tokens[0] == path[0]  # the prefill gives the path's first token
    # the first decode step's context ends [39, path[0]], which began the prompt: it drafts what followed there,
    # and the target, following the path again, accepts all of it
    assert gen.steps[1].drafted == path[1:6] and gen.steps[1].num_accepted == 5
    assert gen.tokens == path


# --- on the bundled Shakespeare pair --------------------------------------------------------------------------------

def test_prompt_lookup_pays_off_on_copy_heavy_prompts(pair, copy_ids):
    for ids in copy_ids:
        gen = generate(pair.target, ids, drafter=PromptLookupDrafter(3, 5), max_new_tokens=40)
        assert gen.stats["tokens_per_target_call"] > 1.5 and gen.stats["draft_calls"] == 0


def test_first_speculated_token_matches_target_distribution(pair):
    """Token 0 comes from the prefill; after " lord" (most of its mass) the lookup proposes "?…" at the first decode
    step, and token 1 must follow the target's distribution after the prompt and token 0. Only the generations whose
    first decode step drafted count: the lookup is deterministic, so that choice depends on token 0 alone."""
    ids = pair.encode("KING.\nHow is that, my lord?\n\nKING.\nHow is that, my")
    lord = pair.encode(" lord")
    assert len(lord) == 1 and PromptLookupDrafter(3, 3).propose(DraftRequest(ids + lord, 3)).tokens
    counts, prefixes = torch.zeros(pair.target.config.vocab_size), []
    drafter = PromptLookupDrafter(3, 3)
    for seed in range(700):  # max_new_tokens=3: the first decode step verifies one drafted token
        gen = generate(pair.target, ids, drafter=drafter, max_new_tokens=3, temperature=1.0, seed=seed)
        assert gen.steps[0].prefill
        if gen.steps[1].drafted:  # a real draft was verified
            counts[gen.tokens[1]] += 1
            prefixes.append(ids + gen.tokens[:1])
    assert len(prefixes) >= 450  # about 80 %: " lord" alone has 81 % of token 0's mass
    assert chi_square(counts, next_token_probs(pair.target, prefixes)).pvalue > 1e-3
