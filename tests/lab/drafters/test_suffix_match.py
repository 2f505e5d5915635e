"""vLLM 0.34's suffix rule (lab.drafters.suffix_match): the longest match in the request's own text (prompt lookup
with n-grams up to the tree depth, held to lab.drafters.prompt_lookup.ngram_lookup), the corpus of earlier outputs
(keys of 4 and 2 tokens, the 8 newest outputs per key, token-by-token voting, first in first out by tokens), which
source drafts, and the oracles: greedy parity token for token, EOS inside a block, exact max_new_tokens, the first
speculated token distributed as the target's (verified as one-hot); the defaults and constants, read in vLLM
0.34.0's own suffix speculator (tests/data/engines/vllm-0.34.0)."""
import inspect
import random

import pytest
import torch

from lab.decode import autoregressive, generate
from lab.drafters import SuffixMatchDrafter
from lab.drafters.base import DraftRequest
from lab.drafters.prompt_lookup import ngram_lookup
from lab.drafters.suffix_match import _KEY_LENGTHS, BUCKET_SLOTS, PROMPT_CONTEXT, SuffixCorpus, longest_match
from lab.metrics import chi_square
from lab.models import forward, new_cache
from tests.helpers import next_token_probs
from tests.lab.drafters.lookup_cases import MAX_NEW, PROMPTS, REPEATED
from tests.lab.picker.engine_sources import vllm_source, vllm_suffix_source


def test_longest_match_takes_the_longest_then_the_latest():
    #          0  1  2  3  4  5  6  7  8  9 10
    tokens = [1, 2, 3, 9, 5, 2, 3, 8, 7, 2, 3]
    assert longest_match(tokens) == (2, 7)  # [2, 3] before 3 and 7: the latest; [1, 2, 3] never repeats
    tokens = [1, 2, 3, 9, 5, 2, 3, 8, 1, 2, 3]
    assert longest_match(tokens) == (3, 3)  # [1, 2, 3] before 3 beats the later [2, 3] before 7
    assert longest_match(tokens, max_depth=2) == (2, 7)  # capped at 2 tokens: a tie, the latest wins
    assert longest_match([7, 7, 7]) == (2, 2)  # overlapping: [7, 7] precedes position 2
    assert longest_match([4, 5, 6]) == (0, None) and longest_match([]) == (0, None)
    with pytest.raises(ValueError, match="max_depth must be an integer >= 1"):
        longest_match([1, 2], max_depth=0)
    with pytest.raises(ValueError, match=r"tokens must be token ids \(integers >= 0\), got -2"):
        longest_match([1, -2])
    with pytest.raises(TypeError, match="tokens must be token ids, got text"):
        longest_match("the cat")


def test_the_request_draft_is_prompt_lookup_with_n_grams_up_to_the_depth():
    """On 300 random texts over a small vocabulary (many repeats), the request-only draft equals
    ngram_lookup(tokens, max_ngram=max_depth, n_draft=N), the most recent occurrence of the longest match."""
    rng = random.Random(0)
    for _ in range(300):
        tokens = [rng.randrange(4) for _ in range(rng.randrange(1, 40))]
        depth, n = rng.choice([1, 3, 24]), rng.choice([1, 4, 8])
        drafter = SuffixMatchDrafter(n, max_depth=depth, corpus=SuffixCorpus(0))
        drafter.reset(tokens)
        draft = drafter.propose(DraftRequest(tokens, max_tokens=n))
        assert draft.tokens == ngram_lookup(tokens, depth, n), (tokens, depth, n)
        assert draft.probs is None and draft.calls == 0


def test_corpus_candidates_vote_token_by_token():
    """Three outputs continue [1, 2] with 5 6, 5 7 and 9: 5 gets two votes of three, then 6 and 7 one each and the
    newer output's 7 wins the tie. The chain scores (2 + 1) / 3 = 1.0; the 4-token match of the third output alone
    would score 1.0 for its one token, a tie the longer match wins."""
    corpus = SuffixCorpus()
    for output in ([0, 1, 2, 5, 6], [1, 2, 5, 7], [8, 0, 1, 2, 9]):
        corpus.add(output)
    assert corpus.draft([3, 1, 2], 24, 4) == (2, [5, 7])  # only [1, 2] matches: the voted chain
    assert corpus.draft([8, 0, 1, 2], 24, 4) == (4, [9])  # [8, 0, 1, 2] in the third output: its one token
    assert corpus.draft([4, 4], 24, 4) == (0, [])
    with_context = SuffixCorpus()
    with_context.add([5, 6], context=[9, 1, 2, 3])  # only the last 3 prompt tokens are kept
    assert list(with_context.documents)[0][1] == [1, 2, 3, 5, 6]
    assert with_context.draft([7, 2, 3], 24, 4) == (2, [5, 6])  # the answer's first tokens, found by the prompt's


def test_corpus_details_that_change_the_draft():
    """Each case fails under one plausible mistake: a position found by both keys counted twice (then [5] would win
    2 votes to 1), every chain scored as if each token had one vote, candidates that voted otherwise kept, the
    oldest occurrence in an output taken, the match not cut at max_depth, the corpus used without a 2-token key."""
    corpus = SuffixCorpus()
    corpus.add([1, 2, 3, 4, 5])
    corpus.add([9, 3, 4, 6, 7, 8])
    assert corpus.draft([0, 1, 2, 3, 4], 24, 8) == (2, [6, 7, 8])  # (1+1+1)/2 beats the 4-token match's 1/1
    votes = SuffixCorpus()
    votes.add([7, 0, 1, 2, 9])
    for _ in range(3):
        votes.add([1, 2, 5, 6, 7])
    assert votes.draft([7, 0, 1, 2], 24, 4) == (2, [5, 6, 7])  # (3+3+3)/4 beats [9]'s 1/1 (L = 4)
    dropout = SuffixCorpus()
    for output in ([1, 2, 5, 6], [1, 2, 5, 7], [1, 2, 8, 6]):
        dropout.add(output)
    assert dropout.draft([1, 2], 24, 2) == (2, [5, 7])  # after 5, only the two outputs with 5 vote: 6 and 7 tie
    newest = SuffixCorpus()
    newest.add([1, 2, 5, 1, 2, 6])
    assert newest.draft([0, 1, 2], 24, 1) == (2, [6])
    assert corpus.draft([0, 1, 2, 3, 4], 3, 1) == (3, [5])  # the 4-token match cut at max_depth 3
    assert corpus.draft([0, 1, 2, 3, 4], 1, 4) == (0, [])  # no key fits a depth of 1


def test_the_index_keeps_the_newest_output_of_each_slot():
    """An output's slot is its number mod 8; a newer output of the same slot holding the key shadows it (vLLM's
    atomic_max per slot), so the 8 candidates are not simply the 8 newest outputs holding the key."""
    corpus = SuffixCorpus()
    for output in ([1, 2, 3], [1, 2, 3], *([9, 9] for _ in range(6)), [1, 2, 4]):
        corpus.add(output)  # numbers 0..8: output 8 shares slot 0 with output 0
    assert sorted(c[1][0] for c in corpus.candidates([0, 1, 2], 24)) == [1, 8]
    assert corpus.draft([0, 1, 2], 24, 8) == (2, [4])  # one vote each; the newest candidate wins the tie
    keys = SuffixCorpus()
    keys.add([1, 2, 3, 4, 5])
    for _ in range(BUCKET_SLOTS):  # outputs 1..8 fill every slot of the 2-token key [3, 4]; 8 shadows 0 there
        keys.add([3, 4, 9])
    assert keys.draft([1, 2, 3, 4], 24, 1) == (4, [5])  # found only through the 4-token key [1, 2, 3, 4]


def _scanned_candidates(corpus: SuffixCorpus, tokens: list, max_depth: int) -> list:
    """The index's rule read off the documents themselves: per key length, newest document first, the newest
    position in the newest document of each slot holding the key; ``[(sequence number, position), ...]``."""
    found = []
    for key in (4, 2):
        if len(tokens) < key or max_depth < key:
            continue
        filled = set()
        for number, document in reversed(corpus.documents):
            if number % BUCKET_SLOTS in filled:
                continue
            position = next((p for p in range(len(document) - 1, key - 1, -1)
                             if document[p - key:p] == tokens[-key:]), None)
            if position is not None:
                filled.add(number % BUCKET_SLOTS)
                if (number, position) not in found:
                    found.append((number, position))
    return found


@pytest.mark.parametrize("seed", range(6))
def test_the_index_finds_what_a_scan_of_the_documents_finds(seed):
    """Candidates come from an index updated as outputs arrive and leave; the same positions, in the same order,
    as scanning every document held, while the corpus overflows and forgets (a 3-token vocabulary makes keys
    repeat across outputs and slots)."""
    rng = random.Random(seed)
    corpus = SuffixCorpus(capacity=rng.choice([40, 120, 1 << 20]))
    for _ in range(60):
        corpus.add([rng.randrange(3) for _ in range(rng.randrange(1, 15))],
                   [rng.randrange(3) for _ in range(rng.randrange(0, 5))])
        text = [rng.randrange(3) for _ in range(rng.randrange(1, 8))]
        depth = rng.choice([1, 2, 3, 24])
        assert [c[1] for c in corpus.candidates(text, depth)] == _scanned_candidates(corpus, text, depth)
    held = {tuple(doc[p - len(key):p]) for _, doc in corpus.documents for key in ((0,) * 4, (0,) * 2)
            for p in range(len(key), len(doc))}
    assert set(corpus._index) == held  # a forgotten output's keys leave the index with it


def test_the_corpus_forgets_the_oldest():
    small = SuffixCorpus(capacity=10)
    small.add([1, 2, 3])
    small.add([4, 5, 6])
    assert len(small) == 2
    small.add([7, 8])  # 4 + 4 + 3 tokens with separators > 10: the oldest goes
    assert [doc for _, doc in small.documents] == [[4, 5, 6], [7, 8]]
    small.add(list(range(20)))  # longer than the ring: its newest 9 tokens stay, alone
    assert [doc for _, doc in small.documents] == [list(range(11, 20))]
    for capacity in (0, 1):  # room for no token: nothing is stored
        none = SuffixCorpus(capacity)
        none.add([1, 2, 3])
        assert len(none) == 0
    with pytest.raises(ValueError, match="capacity must be an integer >= 0"):
        SuffixCorpus(-1)
    with pytest.raises(TypeError, match="output must hold integer token ids"):
        SuffixCorpus().add([1, 2.5])


def test_the_longer_match_drafts_and_a_tie_goes_to_the_request():
    corpus = SuffixCorpus()
    corpus.add([1, 2, 3, 4, 5, 6])
    drafter = SuffixMatchDrafter(4, corpus=corpus)
    drafter.reset([9, 2, 3, 8, 1, 2, 3])  # the request has [2, 3] (then 8); the corpus [1, 2, 3] (then 4 5 6)
    assert drafter.propose(DraftRequest([9, 2, 3, 8, 1, 2, 3], 4)).tokens == [4, 5, 6]
    assert drafter.history[-1] == {"source": "cache", "pattern": 3, "nodes": 3}
    drafter.reset([1, 2, 3, 7, 1, 2, 3])  # both match [1, 2, 3]: the request's own text drafts
    assert drafter.propose(DraftRequest([1, 2, 3, 7, 1, 2, 3], 4)).tokens == [7, 1, 2, 3]
    assert drafter.history[-1]["source"] == "request"
    assert drafter.propose(DraftRequest([1, 2, 3, 7, 1, 2, 3], 2)).tokens == [7, 1]  # max_tokens caps the draft


def test_the_whole_output_joins_the_corpus_even_one_token(bigram_target, path_prompt):
    """The output the corpus stores is every new token, the last step's too (update appends it), and an output of
    one token is stored with its prompt context, by which it can be found."""
    prompt, path = path_prompt
    drafter = SuffixMatchDrafter()
    gen = generate(bigram_target, prompt, drafter=drafter, max_new_tokens=12)
    drafter.finish()
    assert list(drafter.corpus.documents)[-1][1] == prompt[-3:] + gen.tokens
    single = SuffixMatchDrafter()
    single.reset([7, 8, 9, 4])  # the prefill's token 4 ends the generation
    single.finish()
    assert single.corpus.draft([1, 8, 9], 24, 8) == (2, [4])


def test_a_step_is_scored_over_n_draft_tokens_then_cut():
    """As vLLM drafts N and the loop caps it: with max_tokens 1 the sources compare as at N, so the corpus's longer
    match (4 tokens) drafts its first token, not the request's shorter one."""
    corpus = SuffixCorpus()
    corpus.add([1, 2, 3, 4, 5])
    drafter = SuffixMatchDrafter(4, corpus=corpus)
    text = [2, 3, 4, 6, 0, 1, 2, 3, 4]
    drafter.reset(text)
    assert drafter.propose(DraftRequest(text, 1)).tokens == [5]
    assert drafter.history[-1] == {"source": "cache", "pattern": 4, "nodes": 1}
    with pytest.raises(ValueError, match="request.tokens must be token ids"):
        drafter.propose(DraftRequest(text + [-5], 1))
    with pytest.raises(TypeError, match="DraftRequest.tokens must be token ids, got text"):  # refused on the way in
        DraftRequest("ab", 4)


def test_outputs_join_the_corpus_with_their_prompt_context():
    corpus = SuffixCorpus()
    drafter = SuffixMatchDrafter(corpus=corpus, prompt_outputs=lambda ids: [[5, 6, 7]])
    drafter.reset([1, 2, 3, 4, 5, 6, 7, 0, 8])  # the prompt quotes [5, 6, 7] after [2, 3, 4]
    assert [doc for _, doc in corpus.documents] == [[2, 3, 4, 5, 6, 7]]
    drafter.propose(DraftRequest([1, 2, 3, 4, 5, 6, 7, 0, 8, 9, 10], 4))
    drafter.reset([1, 2, 3, 4, 5, 6, 7, 0, 8])  # the last output (8 9 10, after 6 7 0) joins; the quote once only
    assert [doc for _, doc in corpus.documents] == [[2, 3, 4, 5, 6, 7], [6, 7, 0, 8, 9, 10]]
    assert SuffixMatchDrafter().n_draft == 8 and SuffixMatchDrafter(max_depth=5).n_draft == 5
    for kwargs, message in ((dict(n_draft=0), "n_draft must be an integer >= 1"),
                            (dict(max_depth=0), "max_depth must be an integer >= 1"),
                            (dict(corpus=[]), "corpus must be a SuffixCorpus"),
                            (dict(prompt_outputs=[[1]]), "prompt_outputs must be None or a callable")):
        with pytest.raises(ValueError, match=message):
            SuffixMatchDrafter(**kwargs)


def test_greedy_parity(target, sticky_target, references):
    """Oracle 1 on the random and the sticky target, every prompt twice, one drafter reused (its corpus grows)."""
    for name, model in (("random", target), ("sticky", sticky_target)):
        drafter = SuffixMatchDrafter()
        for prompt in PROMPTS + PROMPTS:
            gen = generate(model, prompt, drafter=drafter, max_new_tokens=MAX_NEW)
            assert gen.tokens == references[name][tuple(prompt)], (name, prompt)
            assert gen.stats["new_tokens"] == MAX_NEW and gen.stats["draft_calls"] == 0
        assert len(drafter.corpus) == 2 * len(PROMPTS) - 1  # the last output joins at the next reset
    sticky = generate(sticky_target, REPEATED, drafter=SuffixMatchDrafter(), max_new_tokens=MAX_NEW)
    assert sticky.stats["tokens_per_target_call"] > 1.2


def test_eos_inside_a_block_and_exact_max_new_tokens(bigram_target, path_prompt):
    prompt, path = path_prompt
    ref = autoregressive(bigram_target, prompt, max_new_tokens=14).tokens
    assert ref[:10] == path
    cut = []
    for j in range(10):
        gen = generate(bigram_target, prompt, drafter=SuffixMatchDrafter(), max_new_tokens=MAX_NEW,
                       eos_token_id=ref[j])
        assert gen.tokens == ref[: j + 1]
        cut.append(any(step.truncated for step in gen.steps))
    assert any(cut)  # some runs met EOS inside a drafted block
    for j in range(1, 10):  # the corpus stores the answer up to its EOS, not drafts accepted past it
        drafter = SuffixMatchDrafter()
        generate(bigram_target, prompt, drafter=drafter, max_new_tokens=MAX_NEW, eos_token_id=ref[j])
        drafter.finish()
        assert [document for _, document in drafter.corpus.documents] == [prompt[-3:] + ref[: j + 1]], j
    for m in range(1, 14):
        gen = generate(bigram_target, prompt, drafter=SuffixMatchDrafter(), max_new_tokens=m)
        assert gen.tokens == ref[:m]
        assert all(len(s.drafted) == 0 or s.position + 1 < m for s in gen.steps)


def test_first_speculated_token_follows_target_distribution(target):
    """Oracle 2: token 0 comes from the prefill, sampled; whatever it is, t, the first decode step verifies a
    one-token draft, one-hot: the corpus holds [5, t, a] for every t, with a the target's likeliest token after
    [5, 6, 5, t], so the text's last 2 tokens [5, t] find it (where the prompt itself matches as long, its own
    continuation drafts). Token 1 follows the target's distribution after the prompt and token 0 (T = 1, 1000
    draws); likely drafts make the test strict: accepted blindly, they would be over-represented."""
    prompt = [5, 6, 5]
    corpus = SuffixCorpus()
    for t in range(64):
        corpus.add([t, int(forward(target, prompt + [t], new_cache())[-1].argmax())], context=[5])
    counts, prefixes = torch.zeros(64), []
    for seed in range(1000):
        gen = generate(target, prompt, drafter=SuffixMatchDrafter(1, corpus=corpus), max_new_tokens=3,
                       temperature=1.0, seed=seed)
        assert gen.steps[0].prefill and len(gen.steps[1].drafted) == 1
        counts[gen.tokens[1]] += 1
        prefixes.append(prompt + gen.tokens[:1])
    assert len(corpus) == 64  # a fresh drafter adds its output at its next reset only
    expected = next_token_probs(target, prefixes, temperature=1.0)
    assert (counts[expected == 0] == 0).all()
    assert chi_square(counts, expected).pvalue > 1e-3


def test_update_checks_its_counts_and_reset_checks_before_ending_the_generation():
    """update took 3.7 as token 3 and num_accepted = -1 as 'all drafts but the last' (the next step then reset
    and the generation was never stored); a bad reset ended the running generation before it was refused."""
    drafter = SuffixMatchDrafter(n_draft=4)
    drafter.reset([1, 2, 3, 4, 1, 2])
    draft = drafter.propose(DraftRequest([1, 2, 3, 4, 1, 2], 4))
    assert draft.tokens == [3, 4, 1, 2]
    with pytest.raises(ValueError, match=r"num_accepted \(the last draft holds 4 tokens\) must be an integer in "
                                         r"\[0, 4\], got -1"):
        drafter.update(-1, 7)
    with pytest.raises(ValueError, match="next_token must be an integer >= 0, got 3.7"):
        drafter.update(2, 3.7)
    drafter.update(2, 7)
    with pytest.raises(TypeError, match="prompt_ids must hold integer token ids"):
        drafter.reset([5, 6.5])
    assert len(drafter.corpus) == 0  # the refused reset stored nothing: the generation still runs
    drafter.finish()
    stored = [3, 4, 1] + [2, 3, 4, 7]  # the prompt's last 3 tokens, then the output from the prefill's token on
    assert stored in drafter.corpus and 2.7 not in drafter.corpus and [3.0, 4, 1, 2, 3, 4, 7] not in drafter.corpus


def test_the_defaults_and_constants_are_vllm_0_34s():
    """Read in the pinned vLLM 0.34.0 wheel: the tree depth (24, SpeculativeConfig in vllm/config/speculative.py) is
    the longest match; N, when unset, is what SuffixSpeculatorConfig.configure sets (min(8, depth), suffix/config.py,
    checked at every depth); the speculator reads both from those settings and launches its kernels with them; the
    corpus holds suffix_decoding_corpus_tokens (2**20); and the prompt context, the slots per key and the key lengths
    are suffix/speculator.py's (_PROMPT_CONTEXT 3, _BUCKET_SLOTS 8, keys of the last 4 and 2 tokens)."""
    config, suffix = vllm_source().defaults, vllm_suffix_source()
    depth = inspect.signature(SuffixMatchDrafter).parameters["max_depth"].default
    assert depth == inspect.signature(longest_match).parameters["max_depth"].default
    assert depth == config["suffix_decoding_max_tree_depth"] == 24
    assert SuffixMatchDrafter().n_draft == suffix.default_n_draft(depth) == 8
    for max_depth in range(suffix.min_depth, 40):
        assert SuffixMatchDrafter(max_depth=max_depth).n_draft == suffix.default_n_draft(max_depth), max_depth
    with pytest.raises(ValueError, match=f"max_depth must be an integer >= {suffix.min_depth}"):
        SuffixMatchDrafter(max_depth=suffix.min_depth - 1)  # configure refuses it too
    assert suffix.reads["max_depth"] == "spec.suffix_decoding_max_tree_depth"
    assert suffix.reads["num_speculative_steps"] == "spec.num_speculative_tokens"
    assert suffix.launches == {"MAX_DEPTH": {"self.max_depth"}, "K": {"self.num_speculative_steps"}}
    assert inspect.signature(SuffixCorpus).parameters["capacity"].default == config["suffix_decoding_corpus_tokens"]
    assert suffix.reads["corpus_len"].startswith("spec.suffix_decoding_corpus_tokens ")
    assert (PROMPT_CONTEXT, BUCKET_SLOTS) == (suffix.constants["_PROMPT_CONTEXT"], suffix.constants["_BUCKET_SLOTS"])
    assert _KEY_LENGTHS == suffix.key_lengths
    assert PROMPT_CONTEXT == max(_KEY_LENGTHS) - 1  # the reason speculator.py gives for 3
