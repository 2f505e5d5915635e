"""Suffix decoding (lab.drafters.suffix): the counted suffix trie, the pattern match, the frequency-scored speculation
tree and its adaptive size, the cache of earlier outputs (shared, first in first out), and the oracles every drafter
must pass: greedy parity token for token, EOS inside a block, exact max_new_tokens, the first speculated token
distributed as the target's (a deterministic tree: verified as one-hot), then greedy parity on the real pair; the
defaults, read in vLLM 0.34.0's SpeculativeConfig (tests/data/engines/vllm-0.34.0)."""
import inspect

import pytest
import torch

from lab.decode import autoregressive, generate
from lab.drafters import SuffixDecodingDrafter
from lab.drafters.base import Draft, DraftRequest
from lab.drafters.suffix import SuffixCache, SuffixTree
from lab.metrics import chi_square
from lab.models import forward, new_cache
from tests.helpers import next_token_probs
from tests.lab.drafters.lookup_cases import MAX_NEW, PROMPTS, REPEATED
from tests.lab.picker.engine_sources import vllm_source


def test_tree_counts_every_substring_up_to_its_depth():
    tree = SuffixTree(max_depth=3)
    tree.add([1, 2, 1, 2, 3])
    assert tree.count([1, 2]) == 2 and tree.count([2, 1]) == 1 and tree.count([1, 2, 3]) == 1
    assert tree.count([1]) == 2 and tree.count([1, 2, 1, 2]) == 0  # longer than max_depth: not kept
    grown = SuffixTree(max_depth=3)
    grown.extend([1, 2])
    grown.extend([1, 2, 3])  # incremental = whole
    assert all(grown.count(p) == tree.count(p) for p in ([1], [2], [1, 2], [2, 1], [1, 2, 1], [2, 3], [1, 2, 3]))
    tree.add([7, 1, 2])
    tree.remove([1, 2, 1, 2, 3])
    assert tree.count([1, 2]) == 1 and tree.count([2, 3]) == 0 and tree.count([7, 1, 2]) == 1
    with pytest.raises(ValueError, match="never added"):
        tree.remove([7, 1, 9])  # [7, 1] was added, [7, 1, 9] was not: nothing is counted out
    assert tree.count([7, 1, 2]) == 1 and tree.count([1, 2]) == 1
    with pytest.raises(ValueError, match="max_depth"):
        SuffixTree(max_depth=1)


def test_history_tells_a_step_without_room_from_one_without_a_match():
    """A step with no room for a draft (the answer's last token, max_tokens 0) records "no room", not None (no
    match): lesson 08 counts them apart."""
    context = [1, 2, 3, 9, 1, 2, 3]
    drafter = SuffixDecodingDrafter(max_depth=8)
    drafter.reset(context)
    assert drafter.propose(DraftRequest(context, max_tokens=0)).tokens == []
    assert drafter.history[-1] == {"source": "no room", "pattern": 0, "nodes": 0}
    drafter.reset([5, 6, 7])
    assert drafter.propose(DraftRequest([5, 6, 7], max_tokens=4)).tokens == []
    assert drafter.history[-1] == {"source": None, "pattern": 0, "nodes": 0}


def test_match_takes_the_longest_suffix_with_a_continuation():
    tree = SuffixTree(max_depth=8)
    context = [4, 1, 2, 3, 9, 5, 2, 3]
    tree.extend(context)
    node, length = tree.match(context, longest=7)
    assert length == 2 and list(node.children) == [9]  # [2, 3] was followed by 9; [5, 2, 3] never occurred before
    assert tree.match([6, 6], longest=7) == (None, 0)


def test_proposal_is_a_frequency_tree_sized_by_the_pattern():
    context = [1, 2, 3, 9, 8, 1, 2, 3, 9, 7, 1, 2, 3, 4, 1, 2, 3]
    drafter = SuffixDecodingDrafter(max_depth=8, max_spec_factor=2.0, min_token_prob=0.1)
    drafter.reset(context)
    draft = drafter.propose(DraftRequest(context, max_tokens=10))
    # pattern [1, 2, 3] (3 tokens, followed 3 times before): 9 twice (2/3), 4 once (1/3); then 8 or 7 after 9 and
    # 1 after 4 or 8 (1/3 each); at most 2 x 3 = 6 nodes, ties in the order they were found
    assert (draft.tokens, draft.parents, draft.probs, draft.calls) == ([9, 4, 8, 7, 1, 1], [-1, -1, 0, 0, 1, 2],
                                                                       None, 0)
    assert drafter.history[-1] == {"source": "request", "pattern": 3, "nodes": 6}
    assert len(drafter.propose(DraftRequest(context, max_tokens=1)).tokens) <= 2   # depth 1 only: 9 and 4
    assert all(p == -1 for p in drafter.propose(DraftRequest(context, max_tokens=1)).parents)
    strict = SuffixDecodingDrafter(max_depth=8, max_spec_factor=2.0, min_token_prob=0.5)
    strict.reset(context)
    assert strict.propose(DraftRequest(context, max_tokens=10)).tokens == [9]   # 4 (1/3) and 9's children (1/3)
    path = SuffixDecodingDrafter(max_depth=8, max_spec_factor=2.0, min_token_prob=0.1, tree=False)
    path.reset(context)
    # the most probable path instead: 9 (2/3), then 8 (found before 7; 1/3), 1, 2, 3 (1/3 each), stopped by the
    # trie's depth (pattern 3 + 5 = max_depth 8) before the budget of 6
    assert path.propose(DraftRequest(context, max_tokens=10)) == Draft([9, 8, 1, 2, 3], parents=[-1, 0, 1, 2, 3])
    assert path.propose(DraftRequest(context, max_tokens=2)).tokens == [9, 8]
    unlikely = SuffixDecodingDrafter(max_depth=8, max_spec_factor=2.0, min_token_prob=0.5, tree=False)
    unlikely.reset(context)
    assert unlikely.propose(DraftRequest(context, max_tokens=10)).tokens == [9]  # 9 then 8 would be 1/3
    short = SuffixDecodingDrafter(max_depth=8, max_spec_factor=1.0)
    short.reset([5, 6, 5])
    assert short.propose(DraftRequest([5, 6, 5], max_tokens=10)).tokens == [6]  # pattern of 1: one token at most
    assert short.propose(DraftRequest([5, 6, 5], max_tokens=0)).tokens == []


def test_a_node_exactly_at_min_prob_stays_however_its_probability_rounds():
    """0.7 x 1/7 is 0.1, but the float product is 0.09999999999999999 (in either order of the multiplications): the
    tree and the path keep such a node at min_prob = 0.1, and still leave out one truly below it."""
    from types import SimpleNamespace

    from lab.drafters.suffix import speculation_path, speculation_tree

    def node(count, children=()):
        return SimpleNamespace(count=count, children=dict(children))

    # 1 follows 7 times in 10, then each of 7 tokens once: 0.7 x 1/7 each; 2 follows 3 times in 10
    root = node(0, {1: node(7, {t: node(1) for t in range(10, 17)}), 2: node(3)})
    assert 0.7 * 1 / 7 < 0.1 and 0.7 * (1 / 7) < 0.1   # what a comparison without a tolerance would drop
    tokens, parents, _ = speculation_tree(root, 12, 4, 0.1)
    assert tokens == [1, 2, *range(10, 17)] and parents == [-1, -1] + [0] * 7
    assert speculation_path(root, 12, 4, 0.1)[:2] == ([1, 10], [-1, 0])   # the first found of the tied children
    below = 0.1 + 1e-9   # just above every node's 0.1: only 1 (0.7) and 2 (0.3) stay
    assert speculation_tree(root, 12, 4, below)[:2] == ([1, 2], [-1, -1])
    assert speculation_path(root, 12, 4, below)[:2] == ([1], [-1])


def test_bad_settings_name_the_argument():
    for kwargs, word in ((dict(max_depth=1), "max_depth"), (dict(max_spec_factor=0), "max_spec_factor"),
                         (dict(min_token_prob=1.5), "min_token_prob"), (dict(max_spec_tokens=0), "max_spec_tokens"),
                         (dict(cache="x"), "cache"), (dict(tree=1), "tree")):
        with pytest.raises(ValueError, match=word):
            SuffixDecodingDrafter(**kwargs)
    with pytest.raises(ValueError, match="max_spec_factor must be a finite number > 0, got inf"):
        SuffixDecodingDrafter(max_spec_factor=float("inf"))  # would overflow int() at the first step
    with pytest.raises(ValueError, match="max_cached_requests"):
        SuffixCache(max_cached_requests=-1)
    for bad, shown in ((["x"], "'x'"), ([1.5, 2.5], "1.5"), ([-5, 3], "-5")):
        with pytest.raises(ValueError, match=f"output must hold token ids \\(integers >= 0\\), got {shown}"):
            SuffixCache().add(bad)
        with pytest.raises(ValueError, match="output must hold token ids"):
            SuffixCache().add_once(bad)
    with pytest.raises(ValueError, match="prompt_outputs must return a list of token lists, got int"):
        SuffixDecodingDrafter(prompt_outputs=lambda ids: 5).reset([1, 2, 3])
    with pytest.raises(ValueError, match=r"prompt_outputs\(\.\.\.\)\[1\] must hold token ids"):
        SuffixDecodingDrafter(prompt_outputs=lambda ids: [[1, 2], [3, None]]).reset([1, 2, 3])


def test_the_cache_carries_earlier_outputs_and_evicts_the_oldest(sticky_target):
    prompt = [1, 2, 3, 4, 5]
    cache = SuffixCache(max_depth=24, max_cached_requests=1)
    first = SuffixDecodingDrafter(cache)
    ref = generate(sticky_target, prompt, drafter=first, max_new_tokens=MAX_NEW)
    first.finish()
    # the whole answer, its first token (the prefill's, which reset received after the prompt) included
    assert len(cache) == 1 and ref.tokens in cache and cache.tree.count(ref.tokens[:5]) >= 1
    again = SuffixDecodingDrafter(cache)
    gen = generate(sticky_target, prompt, drafter=again, max_new_tokens=MAX_NEW)
    assert gen.tokens == ref.tokens
    assert "cache" in {h["source"] for h in again.history}           # the earlier output was drafted from
    assert gen.stats["target_calls"] < ref.stats["target_calls"]
    again.finish()
    cache.add([60, 61, 62])
    assert len(cache) == 1 and cache.tree.count([60, 61]) == 1 and cache.tree.count(ref.tokens[:5]) == 0
    off = SuffixCache(max_cached_requests=0)
    off.add([1, 2, 3])
    assert len(off) == 0 and off.tree.count([1]) == 0


def test_outputs_a_prompt_quotes_join_the_cache_once():
    """prompt_outputs: the earlier answers a request quotes are counted into the cache at reset, once each (the
    next request of the conversation quotes them again), also across drafters sharing one cache."""
    cache = SuffixCache(max_depth=8)
    quoted = {(1, 7, 8, 9, 2): [[7, 8, 9, 2]], (1, 7, 8, 9, 2, 5, 6, 2): [[7, 8, 9, 2], [5, 6, 2]]}

    def outputs(ids):
        return quoted.get(tuple(ids), [])

    first = SuffixDecodingDrafter(cache, max_depth=8, prompt_outputs=outputs)
    first.reset([1, 7, 8, 9, 2])
    assert len(cache) == 1 and [7, 8, 9, 2] in cache and cache.tree.count([8, 9]) == 1
    SuffixDecodingDrafter(cache, max_depth=8, prompt_outputs=outputs).reset([1, 7, 8, 9, 2, 5, 6, 2])
    assert len(cache) == 2 and cache.tree.count([8, 9]) == 1 and [5, 6, 2] in cache
    assert cache.add_once([5, 6, 2]) is False and cache.add_once([]) is False and cache.add_once([4]) is True
    with pytest.raises(ValueError, match="prompt_outputs must be None or a callable"):
        SuffixDecodingDrafter(prompt_outputs=[[1, 2]])


@pytest.mark.parametrize("kwargs", [{}, dict(max_spec_factor=3.0, min_token_prob=0.0),
                                    dict(max_depth=4, max_spec_tokens=2), dict(tree=False)])
def test_greedy_parity(target, sticky_target, references, kwargs):
    """Oracle 1 on the random and the sticky target, every prompt, one drafter reused (its cache grows)."""
    for name, model in (("random", target), ("sticky", sticky_target)):
        drafter = SuffixDecodingDrafter(**kwargs)
        for prompt in PROMPTS + PROMPTS:
            gen = generate(model, prompt, drafter=drafter, max_new_tokens=MAX_NEW)
            assert gen.tokens == references[name][tuple(prompt)], (name, prompt)
            assert gen.stats["new_tokens"] == MAX_NEW and gen.stats["draft_calls"] == 0
    sticky = generate(sticky_target, REPEATED, drafter=SuffixDecodingDrafter(), max_new_tokens=MAX_NEW)
    assert sticky.stats["tokens_per_target_call"] > 1.2 and any(s.parents for s in sticky.steps if s.drafted)


def test_eos_inside_a_block_and_exact_max_new_tokens(bigram_target, path_prompt):
    prompt, path = path_prompt
    ref = autoregressive(bigram_target, prompt, max_new_tokens=14).tokens
    assert ref[:10] == path
    for tree in (True, False):
        for j in range(10):
            gen = generate(bigram_target, prompt, drafter=SuffixDecodingDrafter(tree=tree), max_new_tokens=MAX_NEW,
                           eos_token_id=ref[j])
            assert gen.tokens == ref[: j + 1]
        for m in range(1, 14):
            gen = generate(bigram_target, prompt, drafter=SuffixDecodingDrafter(tree=tree), max_new_tokens=m)
            assert gen.tokens == ref[:m]
            assert all(len(s.drafted) == 0 or s.position + 1 < m for s in gen.steps)


def test_the_cache_stores_the_answer_up_to_its_eos(bigram_target, path_prompt):
    """A block cut at an EOS among its accepted drafts ends the answer there: the output the cache keeps is the
    generated text, not the drafts the target accepted past the EOS (they would be proposed for later requests)."""
    prompt, _ = path_prompt
    ref = autoregressive(bigram_target, prompt, max_new_tokens=14).tokens
    cut = 0
    for j in range(1, 10):
        drafter = SuffixDecodingDrafter()
        gen = generate(bigram_target, prompt, drafter=drafter, max_new_tokens=MAX_NEW, eos_token_id=ref[j])
        cut += any(step.truncated for step in gen.steps)
        drafter.finish()
        assert ref[: j + 1] in drafter.cache and len(drafter.cache) == 1, j
    assert cut  # some answers ended inside a drafted block


@pytest.mark.parametrize("kw", [dict(temperature=1.0), dict(temperature=0.8, top_k=6)])
def test_first_speculated_token_follows_target_distribution(target, kw):
    """Oracle 2: token 0 comes from the prefill, sampled; whatever it is, the first decode step verifies a real tree
    (two children of the root), one-hot, at the target's settings, and token 1 follows the target's distribution
    after the prompt and token 0. The cache holds two earlier outputs starting with each token t, [t, a] and [t, b]
    with a and b the target's two likeliest tokens after [5, t], so the pattern [t] has two continuations, seen
    once each (the prompt's own trie offers one only when t is the prompt's token: a one-node chain, which wins the
    tie). Likely drafts make the test strict: accepted blindly, or rejected into the target's distribution instead
    of the residual, they would be over-represented."""
    prompt = [5]
    cache = SuffixCache()
    likeliest = {}
    for t in range(64):
        likeliest[t] = forward(target, prompt + [t], new_cache())[-1].topk(2).indices.tolist()
        for a in likeliest[t]:
            cache.add([t, a])
    first = SuffixDecodingDrafter(cache, max_spec_factor=2.0)
    first.reset(prompt + [9])
    assert first.propose(DraftRequest(prompt + [9], 2, **kw)) == Draft(likeliest[9], parents=[-1, -1])
    counts, prefixes, trees = torch.zeros(64), [], 0
    for seed in range(1000):  # max_new_tokens=4: the first decode step may draft 2 tokens (a pattern of 1 token
        # gets 2 nodes with max_spec_factor 2), here the two siblings
        gen = generate(target, prompt, drafter=SuffixDecodingDrafter(cache, max_spec_factor=2.0), max_new_tokens=4,
                       seed=seed, **kw)
        step = gen.steps[1]
        assert gen.steps[0].prefill and step.drafted  # a real draft was verified
        trees += step.parents == [-1, -1]
        counts[gen.tokens[1]] += 1
        prefixes.append(prompt + gen.tokens[:1])
    assert len(cache) == 128  # nothing was added: each drafter's output would join it at its next reset only
    assert trees >= 900
    expected = next_token_probs(target, prefixes, **kw)
    assert (counts[expected == 0] == 0).all()
    assert chi_square(counts, expected).pvalue > 1e-3


def test_greedy_parity_on_the_real_pair(smollm2_pair):
    from lab.prompts import arena_prompts, encode_prompts

    pair = smollm2_pair
    tree, path = SuffixDecodingDrafter(), SuffixDecodingDrafter(tree=False)
    for ids in encode_prompts(pair, arena_prompts(pair, "copy_edit")[:2] + arena_prompts(pair, "code")[:1]):
        ar = generate(pair.target, ids, max_new_tokens=24, eos_token_id=pair.eos_token_id)
        for drafter in (tree, path):
            gen = generate(pair.target, ids, drafter=drafter, max_new_tokens=24, eos_token_id=pair.eos_token_id)
            assert gen.tokens == ar.tokens
    assert all(step["nodes"] <= step["pattern"] for step in path.history)


def test_the_cache_lets_suffix_draft_a_repeated_tool_call_that_prompt_lookup_cannot_see(smollm2_pair):
    """The mechanism behind suffix decoding's agent-loop numbers, on the committed "files" agent transcript (the
    target answers each tool result with the same JSON tool call): with the other answers of that agent in the
    cache, 12 tokens into the first answer the suffix drafter proposes its next 12 tokens, all of them the
    target's own, from a 12-token match in the cache. Prompt lookup finds nothing in the request (system prompt
    and task) that continues the answer, and suffix decoding without the cache does no better."""
    from lab.drafters import PromptLookupDrafter
    from lab.prompts import assistant_turns, transcripts

    pair = smollm2_pair
    messages = next(t for t in transcripts()["transcripts"] if t["name"] == "files")["messages"]
    answers = assistant_turns(pair, pair.encode_chat(messages))
    request = pair.encode_chat(messages[:2])  # the system prompt and the task
    context, truth = request + answers[0][:12], answers[0][12:]

    def accepted(draft):  # the longest path of the draft (a chain or a tree) that greedy verification keeps
        depth = {}
        for i, (token, parent) in enumerate(zip(draft.tokens, draft.parents or range(-1, len(draft.tokens) - 1))):
            level = 0 if parent == -1 else depth[parent] + 1 if parent in depth else None
            if level is not None and level < len(truth) and truth[level] == token:
                depth[i] = level
        return max(depth.values(), default=-1) + 1

    cache = SuffixCache()
    for answer in answers[1:]:
        cache.add(answer)
    drafters = {"lookup": PromptLookupDrafter(max_ngram=3, n_draft=5), "suffix": SuffixDecodingDrafter(cache),
                "suffix, no cache": SuffixDecodingDrafter()}
    got = {}
    for name, drafter in drafters.items():
        drafter.reset(request)
        got[name] = accepted(drafter.propose(DraftRequest(context, max_tokens=48)))
    assert got == {"lookup": 0, "suffix": 12, "suffix, no cache": 0}
    assert drafters["suffix"].history[-1] == {"source": "cache", "pattern": 12, "nodes": 12}


class _WithoutObserve:
    """A drafter seen through the protocol's required methods only: ``observe`` is optional, so the loop skips it."""

    def __init__(self, drafter):
        self.drafter = drafter
        self.reset, self.propose, self.update = drafter.reset, drafter.propose, drafter.update


def test_update_without_observe_takes_a_chains_first_drafts():
    """observe is optional: without it, a chain's accepted drafts are its first num_accepted tokens. They used to be
    dropped (the observed path was empty), so the next propose found another text, started over, and the cache kept
    only the answer's tail ([7, 7] here)."""
    drafter = SuffixDecodingDrafter(tree=False)
    prompt = [1, 2, 3, 4, 1, 2]
    drafter.reset(prompt)
    committed, drafts = list(prompt), []
    for _ in range(2):
        draft = drafter.propose(DraftRequest(committed, 4))
        drafts.append(draft.tokens)
        drafter.update(len(draft.tokens), 7)
        committed += draft.tokens + [7]
    assert drafts == [[3, 4], []]  # [4, 7] never occurred before: nothing to draft
    assert drafter._tokens == committed == [1, 2, 3, 4, 1, 2, 3, 4, 7, 7]
    drafter.finish()
    assert list(drafter.cache._outputs) == [[2, 3, 4, 7, 7]]  # the answer from the prefill's token on


def test_the_loop_without_observe_caches_the_whole_answer(sticky_target):
    prompt = [1, 2, 3, 4, 5]
    ref = autoregressive(sticky_target, prompt, max_new_tokens=MAX_NEW).tokens
    drafter = SuffixDecodingDrafter(tree=False)
    gen = generate(sticky_target, prompt, drafter=_WithoutObserve(drafter), max_new_tokens=MAX_NEW)
    assert gen.tokens == ref and gen.stats["accepted_tokens"] > 0
    assert drafter._tokens == prompt + ref  # no step was dropped, so nothing made the drafter start over
    drafter.finish()
    assert list(drafter.cache._outputs) == [ref]


def test_update_checks_num_accepted_against_the_observed_path_or_the_draft():
    from lab.drafters.base import TargetOutput

    context = [1, 2, 3, 9, 8, 1, 2, 3, 9, 7, 1, 2, 3, 4, 1, 2, 3]  # drafts [9, 4, 8, 7, 1, 1] (the test above)
    drafter = SuffixDecodingDrafter(max_depth=8, max_spec_factor=2.0)
    drafter.reset(context)
    draft = drafter.propose(DraftRequest(context, max_tokens=10))
    assert draft.parents == [-1, -1, 0, 0, 1, 2]
    with pytest.raises(ValueError, match=r"update got num_accepted = 1 for a tree draft that was not observed: .* "
                                         r"call observe before update"):
        drafter.update(1, 5)
    with pytest.raises(ValueError, match=r"num_accepted \(the last draft holds 6 tokens\) must be an integer in "
                                         r"\[0, 6\], got 7"):
        drafter.update(7, 5)
    with pytest.raises(ValueError, match=r"output.path must follow one root-to-leaf path .* got \[0, 1, 2\]"):
        drafter.observe(TargetOutput(torch.zeros(7, 64), None, [0, 1, 2]))  # nodes 0 and 1 are siblings
    with pytest.raises(ValueError, match=r"output.path must follow .* got \[0, 9\]"):
        drafter.observe(TargetOutput(torch.zeros(7, 64), None, [0, 9]))  # no node 8
    with pytest.raises(ValueError, match=r"output.path must be row 0 and then rows .* got \[1, 3\]"):
        drafter.observe(TargetOutput(torch.zeros(7, 64), None, [1, 3]))
    drafter.observe(TargetOutput(torch.zeros(7, 64), None, [0, 1, 3]))  # 9, then its child 8
    with pytest.raises(ValueError, match=r"num_accepted \(the observed path holds 2 accepted drafts\) must be an "
                                         r"integer in \[0, 2\], got 3"):
        drafter.update(3, 5)
    assert drafter._tokens == context  # nothing was appended by the refused calls
    drafter.update(2, 5)
    assert drafter._tokens == context + [9, 8, 5]
    drafter.propose(DraftRequest(context + [9, 8, 5], max_tokens=10))
    drafter.update(0, 6)  # nothing accepted: a tree needs no observe for that
    assert drafter._tokens == context + [9, 8, 5, 6]
    chain = SuffixDecodingDrafter(tree=False)
    chain.reset([1, 2, 3, 4, 1, 2])
    assert chain.propose(DraftRequest([1, 2, 3, 4, 1, 2], 4)).tokens == [3, 4]
    with pytest.raises(ValueError, match=r"num_accepted \(the last draft holds 2 tokens\) must be an integer in "
                                         r"\[0, 2\], got 3"):
        chain.update(3, 7)


def test_ids_are_checked_not_truncated():
    drafter = SuffixDecodingDrafter()
    with pytest.raises(TypeError, match="prompt_ids must hold integer token ids, got float 2.9"):
        drafter.reset([1, 2.9, 3])
    with pytest.raises(ValueError, match=r"prompt_ids must be token ids \(integers >= 0\), got -3"):
        drafter.reset([1, 2, -3])
    drafter.reset([1, 2, 3])
    for bad, message in ((3.7, r"next_token must be an integer >= 0, got 3.7"),
                         (-1, r"next_token must be an integer >= 0, got -1")):
        with pytest.raises(ValueError, match=message):
            drafter.update(0, bad)
    with pytest.raises(ValueError, match=r"num_accepted \(the last draft holds 0 tokens\) must be an integer in "
                                         r"\[0, 0\], got 1.0"):
        drafter.update(1.0, 4)
    assert drafter._tokens == [1, 2, 3]
    with pytest.raises(TypeError, match="request.tokens must hold integer token ids, got float 4.5"):
        drafter.propose(DraftRequest([1, 2, 3, 4.5], 2))
    with pytest.raises(ValueError, match=r"request.tokens must be token ids \(integers >= 0\), got -4"):
        drafter.propose(DraftRequest([1, 2, 3, -4], 2))
    assert drafter._tokens == [1, 2, 3]
    drafter.update(0, 4)
    assert drafter._tokens == [1, 2, 3, 4] and type(drafter._tokens[-1]) is int
    empty = SuffixDecodingDrafter()
    empty.reset([])
    assert empty.propose(DraftRequest([], 3)) == Draft()  # nothing to match: a plain step, as prompt lookup's


def test_the_public_trees_refuse_floats_instead_of_truncating_them():
    tree, cache = SuffixTree(4), SuffixCache(4)
    with pytest.raises(ValueError, match="tokens must hold integer token ids, got 1.5"):
        tree.extend([1, 1.5])
    tree.add([1, 2, 3])
    assert tree.count([1, 2]) == 1
    with pytest.raises(ValueError, match="path must hold token ids"):
        tree.count([1.9, 2])  # was read as [1, 2]
    with pytest.raises(ValueError, match="tokens must hold token ids"):
        tree.remove([1.0, 2, 3])
    cache.add([2, 3])
    assert [2, 3] in cache and [2.7, 3] not in cache and "23" not in cache  # 2.7 matched token 2


def test_a_second_update_before_the_next_propose_accepts_nothing():
    drafter = SuffixDecodingDrafter(tree=False)
    drafter.reset([1, 2, 3, 4, 1, 2])
    draft = drafter.propose(DraftRequest([1, 2, 3, 4, 1, 2], 4))
    assert draft.tokens[:2] == [3, 4]
    drafter.update(2, 7)
    with pytest.raises(ValueError, match=r"num_accepted \(the last draft holds 0 tokens\)"):
        drafter.update(1, 8)  # was checked against the used draft
    drafter.update(0, 8)
    assert drafter._tokens[-4:] == [3, 4, 7, 8]


def test_the_defaults_are_vllms_suffix_decoding_settings():
    """The module docstring's defaults are vLLM's SpeculativeConfig defaults, read in the pinned vllm/config/
    speculative.py (suffix_decoding_max_tree_depth 24, _max_cached_requests 10000, _max_spec_factor 1.0,
    _min_token_prob 0.1; the last two deprecated there, kept here for the paper's rule)."""
    config = vllm_source().defaults
    drafter = inspect.signature(SuffixDecodingDrafter).parameters
    cache = inspect.signature(SuffixCache).parameters
    for ours, field in ((drafter["max_depth"], "max_tree_depth"), (cache["max_depth"], "max_tree_depth"),
                        (cache["max_cached_requests"], "max_cached_requests"),
                        (drafter["max_spec_factor"], "max_spec_factor"), (drafter["min_token_prob"], "min_token_prob")):
        assert ours.default == config[f"suffix_decoding_{field}"], (ours.name, field)
    assert inspect.signature(SuffixTree).parameters["max_depth"].default == config["suffix_decoding_max_tree_depth"]
    built = SuffixDecodingDrafter()
    assert (built.max_depth, built.cache.max_cached_requests) == (  # a private cache gets them too
        config["suffix_decoding_max_tree_depth"], config["suffix_decoding_max_cached_requests"])
