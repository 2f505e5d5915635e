"""Lookahead decoding (lab.drafters.lookahead; lesson 09): Jacobi iteration, the n-gram pool, both branches in one
target forward, and DESIGN's oracles on tiny random models (fast on a CPU)."""
import numpy as np
import pytest

from lab.decode import autoregressive, generate
from lab.drafters import LookaheadDrafter
from lab.drafters.base import DraftRequest
from lab.drafters.lookahead import converged_prefix, jacobi_decode, jacobi_update
from lab.models import forward, new_cache
from tests.lab.drafters.lookup_cases import MAX_NEW, REPEATED


@pytest.mark.parametrize("kwargs,word", [(dict(window=0), "window"), (dict(ngram=1), "ngram"),
                                         (dict(pool_size=0), "pool_size")])
def test_lookahead_bad_arguments(kwargs, word):
    with pytest.raises(ValueError, match=word):
        LookaheadDrafter(**kwargs)


def test_lookahead_runs_both_branches_in_one_forward(sticky_target):
    drafter = LookaheadDrafter(window=4, ngram=3)
    gen = generate(sticky_target, REPEATED, drafter=drafter, max_new_tokens=MAX_NEW)
    sources = [h["source"] for h in drafter.history]
    assert sources[0] == "jacobi" and "pool" in sources  # first decode step: no pool yet → the window is the chain
    prefill, decode_steps = gen.steps[0], gen.steps[1:]
    assert prefill.prefill and prefill.target_tokens == len(REPEATED) and not prefill.drafted  # the drafter's not in it
    assert len(drafter.history) == len(decode_steps)
    for record, info in zip(decode_steps, drafter.history):
        budget = MAX_NEW - record.position - 1  # request.max_tokens: window guesses past it are not sent
        extra = min(len(info["window"]), budget) if info["source"] == "pool" else 0
        assert record.target_tokens == 1 + len(record.drafted) + extra  # one forward holds both branches
        assert record.drafted == info["chain"]
    assert gen.stats["target_calls"] == len(decode_steps)  # the prefill's forward is not counted
    assert drafter.pool and all(len(c) == 2 for cands in drafter.pool.values() for c in cands)
    assert all(len(cands) <= drafter.pool_size for cands in drafter.pool.values())


def test_lookahead_verifies_the_most_recent_continuation_that_agrees_with_the_window():
    drafter = LookaheadDrafter(window=2, ngram=3)
    drafter.reset([1, 2, 3])
    drafter.pool = {7: [(1, 2), (3, 4), (1, 5)]}  # oldest first
    for window, expected in (([1, 9], [1, 5]), ([3, 9], [3, 4]), ([8, 9], [1, 5])):  # no agreement: most recent
        drafter._step = {}
        drafter.window_tokens = window
        assert drafter.propose(DraftRequest([1, 2, 7], 5)).tokens == expected


def test_lookahead_history_describes_each_step(target):
    drafter = LookaheadDrafter(window=3, ngram=2)
    gen = generate(target, [1, 2, 3, 4, 5], drafter=drafter, max_new_tokens=20)
    assert gen.steps[0].prefill and len(drafter.history) == len(gen.steps) - 1  # one entry per decode step
    for info, record in zip(drafter.history, gen.steps[1:]):
        assert info["num_accepted"] == record.num_accepted
        assert info["position"] == 4 + record.position  # the last committed token's: len(prompt) - 1 + position
        assert min(info["outputs"]) == info["position"] + 1
    assert drafter.history[0]["position"] == 5  # the first decode step feeds the prefill's token, at position 5


def test_lookahead_seed_takes_numpy_integers_and_rejects_other_types():
    prompt = [3, 9, 4, 17, 25, 8]
    a, b = LookaheadDrafter(seed=np.int64(3)), LookaheadDrafter(seed=3)
    a.reset(prompt)
    b.reset(prompt)
    assert a.seed == 3 and type(a.seed) is int
    assert a.window_tokens == b.window_tokens  # the same random fill as the Python int
    for bad in (1.5, True, [1], "3", -1):
        with pytest.raises(ValueError, match="seed"):
            LookaheadDrafter(seed=bad)


# --- Jacobi iteration ------------------------------------------------------------------------------------------

@pytest.mark.parametrize("window", [1, 3, 6])
def test_jacobi_converges_to_greedy_within_window_iterations(target, window):
    prompt = [1, 2, 3, 4, 5]
    greedy = autoregressive(target, prompt, max_new_tokens=window).tokens
    run = jacobi_decode(target, prompt, window=window)
    assert run.converged and run.fixed_point == greedy
    assert run.target_calls <= window + 1
    counts = run.converged_counts
    assert counts[-1] == window and counts == sorted(counts)
    assert all(b >= min(a + 1, window) for a, b in zip(counts, counts[1:]))  # >= one more token per iteration


def fresh(model, tokens):
    return forward(model, tokens, new_cache())


def test_jacobi_update_is_one_parallel_step(target):
    prompt, window = [1, 2, 3, 4, 5], [7, 8, 9]
    logits = fresh(target, prompt + window)
    assert jacobi_update(target, prompt, window) == logits[4:7].argmax(-1).tolist()
    greedy = autoregressive(target, prompt, max_new_tokens=3).tokens
    assert jacobi_update(target, prompt, greedy) == greedy  # the greedy continuation is the fixed point
    run = jacobi_decode(target, prompt, window=3, init=window)
    assert run.iterations[1] == jacobi_update(target, prompt, window)
    with pytest.raises(ValueError, match="init"):
        jacobi_decode(target, prompt, window=3, init=[1])
    with pytest.raises(ValueError, match="window"):
        jacobi_decode(target, prompt, window=0)
    with pytest.raises(ValueError, match=r"window must be an integer in \[1, 65536\]"):
        jacobi_decode(target, prompt, window=10**9)  # hung building 10**9 guesses


def test_converged_prefix():
    assert converged_prefix([1, 2, 3, 4], [1, 2, 9, 4]) == 2
    assert converged_prefix([0, 2], [1, 2]) == 0
    assert converged_prefix([1, 2], [1, 2]) == 2


def test_jacobi_decode_seed_takes_numpy_integers(target):
    prompt = [5, 11, 2, 40, 7]
    run = jacobi_decode(target, prompt, window=3, seed=np.int64(3))
    assert run.iterations[0] == jacobi_decode(target, prompt, window=3, seed=3).iterations[0]
    with pytest.raises(ValueError, match="seed"):
        jacobi_decode(target, prompt, window=3, seed=1.5)


def test_lookahead_checks_the_ids_it_is_handed():
    drafter = LookaheadDrafter(window=3)
    with pytest.raises(TypeError, match="prompt_ids must hold integer token ids, got float 1.9"):
        drafter.reset([1.9, 2])  # was truncated to 1
    with pytest.raises(ValueError, match=r"prompt_ids must be token ids \(integers >= 0\), got -2"):
        drafter.reset([1, -2])
    drafter.reset([4, 5, 6])
    with pytest.raises(TypeError, match="request.tokens must hold integer token ids, got float 6.5"):
        drafter.propose(DraftRequest([4, 5, 6.5], 3))
    draft = drafter.propose(DraftRequest([4, 5, 6], 3))
    assert len(draft.tokens) == 3  # no pool yet: the window is the chain
    for num_accepted, message in ((4, r"num_accepted \(the last draft holds 3 tokens\) must be an integer in "
                                      r"\[0, 3\], got 4"),
                                  (-1, r"num_accepted .* must be an integer in \[0, 3\], got -1")):
        with pytest.raises(ValueError, match=message):
            drafter.update(num_accepted, 7)
    for next_token in (7.5, -7):
        with pytest.raises(ValueError, match=f"next_token must be an integer >= 0, got {next_token}"):
            drafter.update(1, next_token)
    assert drafter.history == []  # the refused updates changed nothing
    drafter.update(np.int64(1), np.int64(7))
    assert drafter.history[-1]["num_accepted"] == 1 and type(drafter.history[-1]["next_token"]) is int
    with pytest.raises(ValueError, match=r"num_accepted \(the last draft holds 0 tokens\) must be an integer in "
                                         r"\[0, 0\], got 1"):
        drafter.update(1, 7)  # no proposal pending


def test_lookahead_needs_a_last_token_to_follow():
    drafter = LookaheadDrafter(window=2)
    drafter.reset([])
    assert drafter.window_tokens == [0, 0]  # an empty prompt fills the window with token 0
    with pytest.raises(ValueError, match=r"request.tokens must hold at least one token \(the last committed token"):
        drafter.propose(DraftRequest([], 3))  # was an IndexError
