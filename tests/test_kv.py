"""KV caches (lesson 07) and Jacobi iteration (lesson 09) on tiny random models.

Oracle 3 in every form: after a commit, a discard or a rollback the next logits equal a fresh forward over the
committed tokens; a branching block with a custom attention mask gives the logits of separate causal forwards; the
cache lengths the decode loop records match what the caches held.
"""
import pytest
import torch

from lab.decode import autoregressive, generate
from lab.drafters import DraftModelDrafter, LookaheadDrafter
from lab.drafters.lookahead import converged_prefix, jacobi_decode, jacobi_update
from lab.kv import ScratchKVCache, cache_length, rollback
from lab.models import forward, new_cache

TOKENS = list(range(5, 25))


def fresh(model, tokens):
    return forward(model, tokens, new_cache())


def close(a, b):
    torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-5)


# --- the scratch buffer --------------------------------------------------------------------------------------

def test_scratch_write_leaves_committed_cache_untouched(target):
    kv = ScratchKVCache(target)
    close(kv.append(TOKENS[:10]), fresh(target, TOKENS[:10]))
    drafts = TOKENS[10:15]
    logits = kv.write(drafts)
    close(logits, fresh(target, TOKENS[:15])[10:])  # the drafts saw the prefix and each other, causally
    assert (kv.committed_length, kv.scratch_length) == (10, 5)
    assert cache_length(kv.cache) == 10  # scratch entries live outside the committed cache
    assert kv.slots() == [(t, "committed") for t in TOKENS[:10]] + [(t, "scratch") for t in drafts]


@pytest.mark.parametrize("accepted", [0, 1, 2, 5])
def test_commit_keeps_a_prefix_and_the_next_forward_matches_a_fresh_one(target, accepted):
    """The seed's Hard exercise: 10-token prefix, 5 drafts, rejection at draft position accepted + 1."""
    kv = ScratchKVCache(target)
    kv.append(TOKENS[:10])
    kv.write(TOKENS[10:15])
    kv.commit(accepted)
    committed = TOKENS[: 10 + accepted]
    assert kv.committed_tokens == committed and kv.scratch_length == 0
    assert kv.committed_length == 10 + accepted
    close(kv.append([40])[-1], fresh(target, committed + [40])[-1])


def test_scratch_written_in_two_parts_then_committed(target):
    kv = ScratchKVCache(target)
    kv.append(TOKENS[:6])
    kv.write(TOKENS[6:8])
    second = kv.write(TOKENS[8:11])  # attends to committed + the scratch written before
    close(second, fresh(target, TOKENS[:11])[8:])
    kv.commit(4)
    assert kv.committed_tokens == TOKENS[:10]
    close(kv.append([3])[-1], fresh(target, TOKENS[:10] + [3])[-1])


def test_discard_and_errors(target):
    kv = ScratchKVCache(target)
    with pytest.raises(ValueError, match="prefill"):
        kv.write([1])
    kv.append(TOKENS[:4])
    kv.write(TOKENS[4:7])
    with pytest.raises(ValueError, match="pending"):
        kv.append([1])
    with pytest.raises(ValueError, match="count"):
        kv.commit(4)
    with pytest.raises(ValueError, match="tokens"):
        kv.write([])
    kv.discard()
    assert kv.committed_tokens == TOKENS[:4] and kv.scratch_length == 0
    close(kv.append([9])[-1], fresh(target, TOKENS[:4] + [9])[-1])
    assert "committed=5" in repr(kv)


def test_rollback_to_every_length_matches_a_fresh_forward(target):
    cache = new_cache()
    forward(target, TOKENS[:15], cache)
    for length in (14, 11, 10, 3):
        rollback(cache, length)
        after = forward(target, [2], cache)[-1]
        close(after, fresh(target, TOKENS[:length] + [2])[-1])
        rollback(cache, length)
    with pytest.raises(ValueError, match="length"):
        rollback(cache, 4)


# --- a branching block in one forward ------------------------------------------------------------------------

def test_branch_mask_gives_the_logits_of_separate_forwards(target):
    """[last] + chain causal, then a window that sees only the last token and itself, at the chain's positions."""
    prefix, chain, window = TOKENS[:10], [30, 31, 32], [40, 41, 42, 43]
    cache = new_cache()
    forward(target, prefix[:-1], cache)
    base = len(prefix) - 1
    n, w = len(chain), len(window)
    mask = torch.ones(1 + n + w, 1 + n + w, dtype=torch.bool).tril()
    mask[1 + n:] = False
    mask[1 + n:, 0] = True
    mask[1 + n:, 1 + n:] = torch.ones(w, w, dtype=torch.bool).tril()
    positions = list(range(base, base + n + 1)) + list(range(base + 1, base + w + 1))
    logits = forward(target, [prefix[-1]] + chain + window, cache, attention_mask=mask, position_ids=positions)
    close(logits[: 1 + n], fresh(target, prefix + chain)[-(1 + n):])
    close(logits[1 + n:], fresh(target, prefix + window)[-w:])
    rollback(cache, base + 1 + 2)  # keep last + 2 chain tokens: the window's entries go with the rejected ones
    close(forward(target, [chain[2]], cache)[-1], fresh(target, prefix + chain)[-1])


def test_forward_rejects_bad_layouts(target):
    with pytest.raises(ValueError, match="attention_mask"):
        forward(target, [1, 2], new_cache(), attention_mask=torch.ones(3, 3, dtype=torch.bool))
    with pytest.raises(ValueError, match="position_ids"):
        forward(target, [1, 2], new_cache(), position_ids=[0])


# --- what the decode loop records about the caches -----------------------------------------------------------

def test_records_carry_cache_lengths(target, noisy_draft):
    prompt = [1, 2, 3, 4, 5]
    gen = generate(target, prompt, drafter=DraftModelDrafter(noisy_draft, 4), max_new_tokens=30)
    committed = len(prompt) - 1
    for record in gen.steps:
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
    assert [r.cache_before for r in plain.steps] == [4, 5, 6, 7, 8]
    assert all(r.draft_cache is None and r.target_tokens == 1 for r in plain.steps)


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


def test_converged_prefix():
    assert converged_prefix([1, 2, 3, 4], [1, 2, 9, 4]) == 2
    assert converged_prefix([0, 2], [1, 2]) == 0
    assert converged_prefix([1, 2], [1, 2]) == 2


def test_lookahead_history_describes_each_step(target):
    drafter = LookaheadDrafter(window=3, ngram=2)
    gen = generate(target, [1, 2, 3, 4, 5], drafter=drafter, max_new_tokens=20)
    assert len(drafter.history) == len(gen.steps)
    for info, record in zip(drafter.history, gen.steps):
        assert info["num_accepted"] == record.num_accepted
        assert info["position"] == 4 + record.position
        assert min(info["outputs"]) == info["position"] + 1


def test_cache_kwarg_names_a_parameter_of_forward(target):
    import inspect
    import warnings

    from transformers.models.llama.modeling_llama import LlamaDecoderLayer

    from lab.models import cache_kwarg

    for cls in (type(target), LlamaDecoderLayer):
        key = cache_kwarg(cls)
        assert key in ("cache", "past_key_values") and key in inspect.signature(cls.forward).parameters
    # the name it gives is the one the installed transformers wants: passing it raises no deprecation warning
    with warnings.catch_warnings():
        warnings.simplefilter("error", FutureWarning)
        target(input_ids=torch.tensor([[1, 2, 3]]), use_cache=True, **{cache_kwarg(type(target)): new_cache()})


def test_forward_rejects_an_empty_block(target):
    with pytest.raises(ValueError, match="input_ids must hold at least one token"):
        forward(target, [], new_cache())


# --- integer arguments: NumPy and 0-d tensor integers work, bools and floats do not ------------------------------

def test_rollback_and_commit_accept_numpy_and_tensor_integers(target):
    import numpy as np

    cache = new_cache()
    forward(target, TOKENS[:12], cache)
    rollback(cache, np.int64(9))
    assert type(cache_length(cache)) is int and cache_length(cache) == 9
    rollback(cache, torch.tensor(8))
    assert cache_length(cache) == 8
    close(forward(target, [2], cache)[-1], fresh(target, TOKENS[:8] + [2])[-1])
    for bad in (torch.tensor(True), True, 4.0, np.float64(4), torch.tensor(4.0), torch.tensor([4]), "4", None):
        with pytest.raises(ValueError, match="length must be an integer"):
            rollback(cache, bad)
    assert cache_length(cache) == 9  # the probe's entry; nothing was cut by the bad calls

    kv = ScratchKVCache(target)
    kv.append(TOKENS[:5])
    kv.write(TOKENS[5:9])
    for bad in (np.float32(1), torch.tensor(False), 1.0):
        with pytest.raises(ValueError, match="count must be an integer"):
            kv.commit(bad)
    kv.commit(np.int32(2))
    assert kv.committed_tokens == TOKENS[:7] and kv.scratch_length == 0
    kv.write(TOKENS[7:9])
    kv.commit(torch.tensor(1, dtype=torch.int16))
    assert kv.committed_tokens == TOKENS[:8]
    close(kv.append([3])[-1], fresh(target, TOKENS[:8] + [3])[-1])
